/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The applier (apply.c): desired states in, host changes out, on its own
 * thread.  Against a copy of a fixture sysfs tree (cpufreq + PM QoS) and
 * real threads of this process (affinity pins); restore through the journal
 * leaves the tree byte-identical and every affinity as it was.  Pins let go
 * (released, left out, thread gone) leave the journal.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "apply.h"
#include "journal.h"
#include "journal_builtin.h"
#include "power_driver.h"
#include "util.h"

#define CPU_REL "devices/system/cpu"

struct fixture {
        char tmp[256], root[300], pristine[300], state[300];
        pthread_t thr[2];
        pid_t tid[2];
        volatile int stop;
        cpu_set_t orig;
};

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
        char cmd[2048];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        assert_int_equal(system(cmd), 0);
}

static pid_t *volatile tid_slot;
static void *sleeper(void *arg)
{
        struct fixture *f = arg;
        pid_t *slot = tid_slot;

        *slot = (pid_t) syscall(SYS_gettid);
        while (!f->stop)
                usleep(1000);
        return NULL;
}

static int setup(void **state)
{
        struct fixture *f = calloc(1, sizeof(*f));

        strcpy(f->tmp, access("/dev/shm", W_OK) == 0 ? "/dev/shm/test-apply.XXXXXX" : "/tmp/test-apply.XXXXXX");
        assert_non_null(mkdtemp(f->tmp));
        snprintf(f->root, sizeof(f->root), "%s/sys", f->tmp);
        snprintf(f->pristine, sizeof(f->pristine), "%s/pristine", f->tmp);
        snprintf(f->state, sizeof(f->state), "%s/state", f->tmp);
        sh("cp -a '%s/sysfs-cpufreq/small-2cpu/sys' '%s' && cp -a '%s' '%s'", TEST_DATA_DIR, f->root, f->root,
           f->pristine);
        for (int i = 0; i < 2; i++) {
                tid_slot = &f->tid[i];
                assert_int_equal(pthread_create(&f->thr[i], NULL, sleeper, f), 0);
                while (!f->tid[i])
                        usleep(1000);
        }
        assert_int_equal(sched_getaffinity(f->tid[0], sizeof(f->orig), &f->orig), 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;

        power_driver_sysfs_set_io(NULL); /* a failed test may leave its fault injection installed */
        f->stop = 1;
        for (int i = 0; i < 2; i++)
                pthread_join(f->thr[i], NULL);
        sh("rm -rf '%s'", f->tmp);
        free(f);
        return 0;
}

static void knob(struct fixture *f, const char *rel, char *buf, size_t size)
{
        char path[512];

        snprintf(path, sizeof(path), "%s/%s", f->root, rel);
        assert_true(read_small_file(path, buf, size) >= 0);
        buf[strcspn(buf, "\n")] = '\0';
}

static int affinity_of(pid_t tid)
{
        cpu_set_t s;
        int only = -1;

        assert_int_equal(sched_getaffinity(tid, sizeof(s), &s), 0);
        if (CPU_COUNT(&s) != 1)
                return -1;
        for (int c = 0; c < CPU_SETSIZE; c++)
                if (CPU_ISSET(c, &s))
                        only = c;
        return only;
}

static struct applier *start(struct fixture *f)
{
        struct apply_config cfg = { .state_dir = f->state, .sysfs_root = f->root, .libvirt_uri = NULL };
        struct applier *a = NULL;

        assert_int_equal(applier_new(&cfg, &a), 0);
        return a;
}

static struct apply_request *request(struct fixture *f, int cpu0, int cpu1, uint32_t khz, int32_t lat)
{
        struct apply_request *r = apply_request_new(2, 2);

        assert_non_null(r);
        for (int i = 0; i < 2; i++) {
                r->pins[i].pid = getpid();
                r->pins[i].tid = f->tid[i];
                r->pins[i].vcpu = (unsigned) i;
        }
        r->pins[0].cpu = cpu0;
        r->pins[1].cpu = cpu1;
        for (unsigned c = 0; c < 2; c++) {
                r->cpu_max_khz[c] = khz;
                r->cpu_latency_us[c] = c == 1 ? lat : -1;
        }
        return r;
}

static void submit_wait(struct applier *a, struct apply_request *r)
{
        applier_submit(a, r);
        assert_int_equal(applier_wait_idle(a, 10 * NSEC_PER_SEC), 0);
}

static void restore_and_check(struct fixture *f)
{
        struct restore_stats st = { 0 };
        cpu_set_t now;

        assert_int_equal(journal_restore_all(f->state, f->root, NULL, &st), 0);
        assert_int_equal(st.failed, 0);
        assert_int_equal(st.foreign, 0);
        sh("diff -r '%s' '%s'", f->pristine, f->root);
        for (int i = 0; i < 2; i++) {
                assert_int_equal(sched_getaffinity(f->tid[i], sizeof(now), &now), 0);
                assert_true(CPU_EQUAL(&now, &f->orig));
        }
}

/* Pins, a frequency cap and a latency limit are applied; the same state again
 * changes nothing; restore puts the tree and the affinities back. */
static void test_apply_and_restore(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start(f);
        struct apply_stats st;
        char buf[64];

        submit_wait(a, request(f, 1, 0, 2000000, 20));
        assert_int_equal(affinity_of(f->tid[0]), 1);
        assert_int_equal(affinity_of(f->tid[1]), 0);
        knob(f, CPU_REL "/cpufreq/policy0/scaling_max_freq", buf, sizeof(buf));
        assert_string_equal(buf, "2000000");
        knob(f, CPU_REL "/cpu1/power/pm_qos_resume_latency_us", buf, sizeof(buf));
        assert_string_equal(buf, "20");
        applier_get_stats(a, &st);
        assert_int_equal(st.pins, 2);
        assert_int_equal(st.pin_errors, 0);
        assert_int_equal(st.pins_current, 2);

        /* The same desired state: no pin, no write. */
        submit_wait(a, request(f, 1, 0, 2000000, 20));
        applier_get_stats(a, &st);
        assert_int_equal(st.pins, 2);

        /* One vCPU moves, the limit is lifted: the PM QoS value goes back to the original. */
        submit_wait(a, request(f, 0, 0, 3800000, -1));
        assert_int_equal(affinity_of(f->tid[0]), 0);
        knob(f, CPU_REL "/cpu1/power/pm_qos_resume_latency_us", buf, sizeof(buf));
        assert_string_equal(buf, "0");
        applier_get_stats(a, &st);
        assert_int_equal(st.pins, 3);
        print_message("applier: %" PRIu64 " pins, %" PRIu64 " knob changes, %u sysfs writes, last pass %" PRId64
                      " ns\n", st.pins, st.knob_changes, st.driver_writes, st.last_pass_ns);

        applier_free(a);
        restore_and_check(f);
}

/* applier_stop(): the applier's own thread puts every knob and pin back (a
 * reload does not restore on the daemon's loop); a request submitted after
 * the stop is not applied. */
static void test_stop_restores(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start(f);
        struct restore_stats st = { 0 };
        cpu_set_t now;
        int r = -1;

        submit_wait(a, request(f, 1, 0, 2000000, 20));
        assert_int_equal(affinity_of(f->tid[0]), 1);
        applier_stop(a);
        applier_submit(a, request(f, 0, 1, 1500000, 30));
        assert_true(applier_stopped(a, true, &r, &st));
        assert_int_equal(r, 0);
        assert_int_equal(st.failed, 0);
        assert_true(st.restored >= 4); /* two affinities, the cap, the latency limit */
        sh("diff -r '%s' '%s'", f->pristine, f->root);
        for (int i = 0; i < 2; i++) {
                assert_int_equal(sched_getaffinity(f->tid[i], sizeof(now), &now), 0);
                assert_true(CPU_EQUAL(&now, &f->orig));
        }
        assert_string_equal(applier_state_dir(a), f->state);
        applier_free(a);
        restore_and_check(f); /* nothing left in the journal */
}

/* apply_config.simulate (--dry-run): the sim power driver takes the caps and
 * limits, pins count as made, and nothing reaches the host: no file of the
 * tree, no affinity, no journal; stopping restores nothing. */
static void test_simulate(void **state)
{
        struct fixture *f = *state;
        struct apply_config cfg = { .state_dir = f->state, .sysfs_root = f->root, .simulate = true, .n_cpus = 2,
                                    .sim_max_khz = 3800000 };
        struct apply_request *rq;
        struct applier *a = NULL;
        struct restore_stats rs = { 0 };
        struct apply_stats st;
        char path[512];
        cpu_set_t now;
        int r = -1;

        assert_int_equal(applier_new(&cfg, &a), 0);
        submit_wait(a, request(f, 1, 0, 2000000, 20));
        applier_get_stats(a, &st);
        assert_true(st.simulated);
        assert_int_equal(st.pins, 2);
        assert_int_equal(st.pin_errors, 0);
        assert_int_equal(st.knob_changes, 3); /* two caps, one latency limit */
        assert_int_equal(st.knob_errors, 0);
        submit_wait(a, request(f, 1, 0, 2000000, 20)); /* the same: nothing more */
        applier_get_stats(a, &st);
        assert_int_equal(st.pins, 2);
        assert_int_equal(st.knob_changes, 3);
        /* a VM let go, another left out: nothing to put back (and no journal to look in) */
        rq = request(f, APPLY_RELEASE, 0, 2000000, 20);
        rq->n_pins = 1;
        submit_wait(a, rq);
        applier_get_stats(a, &st);
        assert_int_equal(st.pins, 2);
        assert_int_equal(st.pin_released, 0);
        sh("diff -r '%s' '%s'", f->pristine, f->root);
        for (int i = 0; i < 2; i++) {
                assert_int_equal(sched_getaffinity(f->tid[i], sizeof(now), &now), 0);
                assert_true(CPU_EQUAL(&now, &f->orig));
        }
        snprintf(path, sizeof(path), "%s/journal", f->state);
        assert_int_equal(access(path, F_OK), -1);
        applier_stop(a);
        assert_true(applier_stopped(a, true, &r, &rs));
        assert_int_equal(r, 0);
        assert_int_equal(rs.restored + rs.failed + rs.skipped, 0);
        applier_free(a);
        sh("diff -r '%s' '%s'", f->pristine, f->root);

        cfg.n_cpus = 0; /* the sim driver needs its CPUs */
        assert_int_equal(applier_new(&cfg, &a), -EINVAL);
}

/* Live entries of the journal the applier left in the state directory (it must be freed). */
static size_t journal_live(struct fixture *f)
{
        struct journal *j;
        size_t n;

        assert_int_equal(journal_open(f->state, &j), 0);
        n = journal_n_entries(j);
        journal_free(j);
        return n;
}

/*
 * A VM let go (mode exclude): the pins we made go back to the original mask
 * and leave the journal; a thread we never pinned is left as it is.  A thread
 * the request leaves out (its VM left the plan) is let go the same way: it
 * used to stay pinned, its entry live, until the daemon exited.
 */
static void test_release(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start(f);
        struct apply_request *r;
        struct apply_stats st;
        cpu_set_t now;

        submit_wait(a, request(f, 1, 0, 0, -1));
        assert_int_equal(affinity_of(f->tid[0]), 1);
        assert_int_equal(affinity_of(f->tid[1]), 0);
        r = request(f, APPLY_RELEASE, APPLY_RELEASE, 0, -1);
        r->n_pins = 1; /* tid[1] left out */
        submit_wait(a, r);
        for (int i = 0; i < 2; i++) {
                assert_int_equal(sched_getaffinity(f->tid[i], sizeof(now), &now), 0);
                assert_true(CPU_EQUAL(&now, &f->orig));
        }
        applier_get_stats(a, &st);
        assert_int_equal(st.pin_released, 2);
        assert_int_equal(st.pins_current, 1);
        /* Both asked released again: nothing of ours left to put back. */
        submit_wait(a, request(f, APPLY_RELEASE, APPLY_RELEASE, 0, -1));
        applier_get_stats(a, &st);
        assert_int_equal(st.pin_released, 2);
        applier_free(a);
        assert_int_equal(journal_live(f), 0);
        restore_and_check(f);
}

/* A thread that exits between two requests. */
struct worker {
        pthread_t th;
        pid_t tid;
        volatile int stop;
};

static void *worker_main(void *arg)
{
        struct worker *w = arg;

        w->tid = (pid_t) syscall(SYS_gettid);
        while (!w->stop)
                usleep(1000);
        return NULL;
}

static void worker_start(struct worker *w)
{
        memset(w, 0, sizeof(*w));
        assert_int_equal(pthread_create(&w->th, NULL, worker_main, w), 0);
        while (!__atomic_load_n(&w->tid, __ATOMIC_SEQ_CST))
                usleep(1000);
}

static void worker_exit(struct worker *w)
{
        char path[64];

        w->stop = 1;
        assert_int_equal(pthread_join(w->th, NULL), 0);
        /* gone from /proc a little after pthread_join() (see test-actuator.c) */
        snprintf(path, sizeof(path), "/proc/self/task/%d", (int) w->tid);
        for (int i = 0; i < 5000 && access(path, F_OK) == 0; i++)
                usleep(1000);
        assert_int_equal(access(path, F_OK), -1);
}

/*
 * The journal entries of pins whose thread is gone are forgotten, not kept
 * live until the daemon exits: a thread that exited and that the request
 * leaves out (its VM shut down), and one that exited and that the request
 * moves.  The pin of a thread still there stays.
 */
static void test_gone_pins_forgotten(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start(f);
        struct apply_request *r;
        struct apply_stats st;
        struct worker w[2];

        for (int i = 0; i < 2; i++)
                worker_start(&w[i]);
        r = request(f, 1, 0, 0, -1);
        r->pins[1].tid = w[0].tid;
        submit_wait(a, r);
        r = apply_request_new(3, 2);
        assert_non_null(r);
        for (int i = 0; i < 3; i++) {
                r->pins[i].pid = getpid();
                r->pins[i].tid = i == 0 ? f->tid[0] : w[i - 1].tid;
                r->pins[i].vcpu = (unsigned) i;
                r->pins[i].cpu = 1;
        }
        submit_wait(a, r);
        assert_int_equal(affinity_of(w[0].tid), 1);
        assert_int_equal(affinity_of(w[1].tid), 1);
        applier_get_stats(a, &st);
        assert_int_equal(st.pins, 4); /* tid[0] and w[0], then w[0] again and w[1] */
        for (int i = 0; i < 2; i++)
                worker_exit(&w[i]);

        /* w[0] left out, w[1] moved */
        r = request(f, 1, 0, 0, -1);
        r->pins[1].tid = w[1].tid;
        r->pins[1].vcpu = 2;
        submit_wait(a, r);
        applier_get_stats(a, &st);
        assert_int_equal(st.pin_gone, 2);
        assert_int_equal(st.pin_errors, 0);
        assert_int_equal(st.journal_errors, 0);
        applier_free(a);
        assert_int_equal(journal_live(f), 1); /* tid[0]'s */
        restore_and_check(f);
}

/* A thread that is gone is counted and dropped, not retried; the others still move. */
static void test_gone_thread(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start(f);
        struct apply_request *r = request(f, 1, 1, 0, -1);
        struct apply_stats st;

        r->pins[1].tid = 999999999; /* no such thread */
        submit_wait(a, r);
        assert_int_equal(affinity_of(f->tid[0]), 1);
        applier_get_stats(a, &st);
        assert_int_equal(st.pins, 1);
        assert_int_equal(st.pin_gone, 1);
        assert_int_equal(st.pin_errors, 0);
        applier_free(a);
        restore_and_check(f);
}

/* Poll (deadline 10 s, 10 ms steps) until the applier counts at least min pin failures; its stats in *st. */
static bool wait_pin_errors(struct applier *a, uint64_t min, struct apply_stats *st)
{
        for (nsec_t until = now_ns() + 10 * NSEC_PER_SEC;; usleep(10 * 1000)) {
                applier_get_stats(a, st);
                if (st->pin_errors >= min)
                        return true;
                if (now_ns() >= until)
                        return false;
        }
}

/* A libvirt pin without libvirt fails, is counted and retried with backoff
 * (not in a loop), and never blocks the plain pins of the same request. */
static void test_libvirt_unreachable(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start(f);
        struct apply_request *r = request(f, 1, 1, 0, -1);
        struct apply_stats st;
        nsec_t begin;

        snprintf(r->pins[1].uuid, sizeof(r->pins[1].uuid), "00000000-0000-0000-0000-000000000001");
        submit_wait(a, r);
        assert_int_equal(affinity_of(f->tid[0]), 1);
        /* A few backoff steps: the first attempt and two retries, each after its backoff.  Seen within one
         * 10 ms poll step of the third failure, a busy loop would have failed far more often. */
        begin = now_ns();
        assert_true(wait_pin_errors(a, 3, &st));
        assert_true(st.pin_retries >= 1);
        assert_true(st.pin_errors <= 8); /* backoff, not a busy loop */
        assert_int_equal(st.last_error, -ENOTCONN);
        print_message("libvirt unreachable: %" PRIu64 " attempts, %" PRIu64 " retries scheduled in %.3f s\n",
                      st.pin_errors, st.pin_retries, (double) (now_ns() - begin) / NSEC_PER_SEC);
        applier_free(a);
        restore_and_check(f);
}

/* ---- knob bookkeeping (issue 16, item 7) ---- */

/* Writes to paths containing `match` fail with `write_errno` while it is non-zero (set by the test thread). */
static const char *fault_match;
static int fault_errno;

static int fault_write(void *ud, const char *path, const char *data, size_t len)
{
        if (fault_match && strstr(path, fault_match) && __atomic_load_n(&fault_errno, __ATOMIC_SEQ_CST))
                return -__atomic_load_n(&fault_errno, __ATOMIC_SEQ_CST);
        return power_sysfs_default_write(NULL, path, data, len);
}

static void fault_install(const char *match, int err)
{
        const struct power_sysfs_io io = { power_sysfs_default_read, fault_write, NULL };

        fault_match = match;
        __atomic_store_n(&fault_errno, err, __ATOMIC_SEQ_CST);
        power_driver_sysfs_set_io(&io);
}

/* Poll (deadline 15 s) until the knob reads `want`; true if it did. */
static bool wait_knob(struct fixture *f, const char *rel, const char *want)
{
        char buf[64];

        for (nsec_t until = now_ns() + 15 * NSEC_PER_SEC; now_ns() < until; usleep(20 * 1000)) {
                knob(f, rel, buf, sizeof(buf));
                if (strcmp(buf, want) == 0)
                        return true;
        }
        return false;
}

/*
 * A frequency cap whose write fails is not taken for applied: it is counted
 * as a failure (not a change) and tried again on later passes, without a new
 * plan, until it goes through.
 */
static void test_failed_knob_retried(void **state)
{
        struct fixture *f = *state;
        struct applier *a;
        struct apply_stats st;
        char buf[64];

        fault_install("policy0/scaling_max_freq", EIO);
        a = start(f);
        submit_wait(a, request(f, 1, 0, 2000000, -1));
        knob(f, CPU_REL "/cpufreq/policy0/scaling_max_freq", buf, sizeof(buf));
        assert_string_equal(buf, "3800000");
        knob(f, CPU_REL "/cpufreq/policy1/scaling_max_freq", buf, sizeof(buf));
        assert_string_equal(buf, "2000000");
        applier_get_stats(a, &st);
        assert_int_equal(st.knob_changes, 1); /* policy1 only */
        assert_true(st.knob_errors >= 1);
        assert_int_equal(st.last_error, -EIO);

        /* The fault clears; the same plan stays: the cap is retried and applied. */
        __atomic_store_n(&fault_errno, 0, __ATOMIC_SEQ_CST);
        assert_true(wait_knob(f, CPU_REL "/cpufreq/policy0/scaling_max_freq", "2000000"));
        assert_int_equal(applier_wait_idle(a, 10 * NSEC_PER_SEC), 0);
        applier_get_stats(a, &st);
        assert_true(st.knob_retries >= 1);
        print_message("failed cap: %" PRIu64 " failed attempts, %" PRIu64 " retries, %" PRIu64 " changes\n",
                      st.knob_errors, st.knob_retries, st.knob_changes);
        applier_free(a);
        power_driver_sysfs_set_io(NULL);
        restore_and_check(f);
}

/*
 * A cap that fails with EBUSY (the driver keeps retrying it) and whose plan
 * then goes back to the value applied before: the applier writes that value
 * once more, which supersedes the driver's pending retry of the abandoned
 * one (else the retry would later put a value no plan wants).
 */
static void test_failed_knob_reverted(void **state)
{
        struct fixture *f = *state;
        struct applier *a;
        struct apply_stats st;
        char buf[64];

        fault_install("policy0/scaling_max_freq", 0);
        a = start(f);
        submit_wait(a, request(f, 1, 0, 2000000, -1));
        __atomic_store_n(&fault_errno, EBUSY, __ATOMIC_SEQ_CST);
        submit_wait(a, request(f, 1, 0, 1500000, -1));
        applier_get_stats(a, &st);
        assert_int_equal(st.driver_pending_retries, 1);
        submit_wait(a, request(f, 1, 0, 2000000, -1));
        applier_get_stats(a, &st);
        assert_int_equal(st.driver_pending_retries, 0);
        __atomic_store_n(&fault_errno, 0, __ATOMIC_SEQ_CST);
        knob(f, CPU_REL "/cpufreq/policy0/scaling_max_freq", buf, sizeof(buf));
        assert_string_equal(buf, "2000000");
        applier_free(a);
        power_driver_sysfs_set_io(NULL);
        restore_and_check(f);
}

/* A cap for a pCPU without a cpufreq policy is not a "knob change". */
static void test_unsupported_not_a_change(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start(f);
        struct apply_request *r = apply_request_new(0, 3);
        struct apply_stats st;

        assert_non_null(r);
        for (unsigned c = 0; c < 3; c++)
                r->cpu_max_khz[c] = 2000000; /* cpu2 does not exist in the fixture */
        submit_wait(a, r);
        applier_get_stats(a, &st);
        assert_int_equal(st.knob_changes, 2);
        assert_int_equal(st.knob_unsupported, 1);
        assert_int_equal(st.knob_errors, 0);
        applier_free(a);
        restore_and_check(f);
}

/* A cap someone else changed: left to them, counted, not restored. */
static void test_foreign_knob_left(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start(f);
        struct apply_stats st;
        char buf[64];

        char logpath[400];
        int saved_stderr, fd;

        submit_wait(a, request(f, 1, 0, 2000000, -1));
        sh("echo 3000000 > '%s/" CPU_REL "/cpufreq/policy0/scaling_max_freq'", f->root);
        /* The daemon's log (stderr) while the knob is found changed, then asked again. */
        snprintf(logpath, sizeof(logpath), "%s/log", f->tmp);
        saved_stderr = dup(STDERR_FILENO);
        fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(saved_stderr >= 0 && fd >= 0);
        dup2(fd, STDERR_FILENO);
        close(fd);
        submit_wait(a, request(f, 1, 0, 1500000, -1));
        submit_wait(a, request(f, 1, 0, 1400000, -1));
        fflush(stderr);
        dup2(saved_stderr, STDERR_FILENO);
        close(saved_stderr);
        knob(f, CPU_REL "/cpufreq/policy0/scaling_max_freq", buf, sizeof(buf));
        assert_string_equal(buf, "3000000");
        knob(f, CPU_REL "/cpufreq/policy1/scaling_max_freq", buf, sizeof(buf));
        assert_string_equal(buf, "1400000");
        applier_get_stats(a, &st);
        assert_int_equal(st.knob_foreign, 2); /* both targets refused */
        assert_int_equal(st.driver_foreign, 1); /* one knob let go */
        assert_int_equal(st.knob_errors, 0);
        /* logged once, at notice, with both values */
        sh("test \"$(grep -c 'policy0/scaling_max_freq holds \\\"3000000\\\", vmmpower last wrote \\\"2000000\\\": "
           "changed by someone else' '%s')\" = 1", logpath);
        applier_free(a);
        assert_int_equal(journal_restore_all(f->state, f->root, NULL, NULL), 0);
        knob(f, CPU_REL "/cpufreq/policy0/scaling_max_freq", buf, sizeof(buf));
        assert_string_equal(buf, "3000000"); /* theirs: not restored */
        sh("echo 3800000 > '%s/" CPU_REL "/cpufreq/policy0/scaling_max_freq'", f->root);
        restore_and_check(f);
}

/* An applier that checks its pins every `every` ns (1: at every pass). */
static struct applier *start_checking_every(struct fixture *f, nsec_t every)
{
        struct apply_config cfg = { .state_dir = f->state, .sysfs_root = f->root, .pin_check_ns = every };
        struct applier *a = NULL;

        assert_int_equal(applier_new(&cfg, &a), 0);
        return a;
}

static struct applier *start_checking(struct fixture *f)
{
        return start_checking_every(f, 1);
}

static void set_affinity2(pid_t tid, int c0, int c1)
{
        cpu_set_t s;

        CPU_ZERO(&s);
        CPU_SET(c0, &s);
        if (c1 >= 0)
                CPU_SET(c1, &s);
        assert_int_equal(sched_setaffinity(tid, sizeof(s), &s), 0);
}

static size_t foreign_threads(struct applier *a, pid_t *first)
{
        struct apply_thread *l = NULL;
        size_t n = 99;

        assert_int_equal(applier_foreign_threads(a, &l, &n), 0);
        if (n > 0)
                *first = l[0].tid;
        free(l);
        return n;
}

/* Set tid[0]'s mask behind the applier's back (c1 < 0: CPU c0 alone), then `passes` passes over
 * the request "tid[0] on CPU 1, tid[1] on 0" (with the online CPUs 0-1 if online; a changed mask is
 * someone else's when two checks find it): tid[0]'s single CPU after (-1: more than one), the stats
 * in *st. */
static int tamper_and_pass(struct fixture *f, struct applier *a, int c0, int c1, bool online, int passes,
                           struct apply_stats *st)
{
        set_affinity2(f->tid[0], c0, c1);
        for (int i = 0; i < passes; i++) {
                struct apply_request *r = request(f, 1, 0, 0, -1);
                if (online) {
                        cpuset_set(&r->online, 0);
                        cpuset_set(&r->online, 1);
                }
                submit_wait(a, r);
        }
        applier_get_stats(a, st);
        return affinity_of(f->tid[0]);
}

/*
 * The pins made are checked against the kernel.  A mask widened behind the
 * applier's back (what the kernel does to a thread whose CPUs all went
 * offline, however briefly) is pinned again; one changed otherwise (taskset)
 * is someone else's: left as it is while the request still asks for another
 * CPU or for a release, listed for the daemon, its journal entry forgotten so
 * that the restore at exit leaves it too.
 */
static void test_pins_checked(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start_checking(f);
        struct restore_stats rs = { 0 };
        struct apply_stats st;
        pid_t t = 0;

        submit_wait(a, request(f, 1, 0, 0, -1));
        assert_int_equal(affinity_of(f->tid[0]), 1);
        assert_int_equal(tamper_and_pass(f, a, 0, 1, false, 2, &st), 1); /* widened: pinned again */
        assert_int_equal(st.pin_widened, 1);
        assert_int_equal(st.pins, 3);
        assert_int_equal(st.pin_foreign, 0);
        assert_int_equal(foreign_threads(a, &t), 0);

        /* a mask changed at one check only (as the kernel's in a hotplug flap) is not let go, nor
         * pinned over while under suspicion */
        assert_int_equal(tamper_and_pass(f, a, 0, -1, false, 1, &st), 0);
        assert_int_equal(tamper_and_pass(f, a, 1, -1, false, 1, &st), 1);
        assert_int_equal(st.pin_foreign, 0);
        assert_int_equal(st.pins, 3);

        /* someone else's pin: CPU 0 where vmmpower pinned 1, found at two checks */
        assert_int_equal(tamper_and_pass(f, a, 0, -1, false, 2, &st), 0);
        assert_int_equal(st.pin_foreign, 1);
        assert_int_equal(st.pins_foreign, 1);
        assert_int_equal(st.pin_widened, 1);
        assert_int_equal(foreign_threads(a, &t), 1);
        assert_int_equal(t, f->tid[0]);
        /* asked for CPU 1 again, then released: theirs, untouched; the other thread still moves */
        submit_wait(a, request(f, 1, 1, 0, -1));
        assert_int_equal(affinity_of(f->tid[0]), 0);
        assert_int_equal(affinity_of(f->tid[1]), 1);
        submit_wait(a, request(f, APPLY_RELEASE, 1, 0, -1));
        assert_int_equal(affinity_of(f->tid[0]), 0);
        applier_get_stats(a, &st);
        assert_true(st.pin_released == 0 && st.pin_foreign == 1 && st.pin_errors == 0); /* nothing put back */
        applier_free(a);
        assert_int_equal(journal_live(f), 1); /* tid[1]'s: tid[0]'s was forgotten */
        assert_int_equal(journal_restore_all(f->state, f->root, NULL, &rs), 0);
        assert_int_equal(rs.restored, 1); /* tid[1] */
        assert_int_equal(rs.foreign, 0);
        assert_int_equal(affinity_of(f->tid[0]), 0); /* theirs: not restored */
        assert_int_equal(sched_setaffinity(f->tid[0], sizeof(f->orig), &f->orig), 0);
        restore_and_check(f);
}

/* A pin left to someone else is taken back once they let the thread run on all the CPUs it had
 * before the first pin (this process's threads: every CPU). */
static void test_pin_handed_back(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start_checking(f);
        struct apply_stats st;
        pid_t t = 0;

        submit_wait(a, request(f, 1, 0, 0, -1));
        assert_int_equal(tamper_and_pass(f, a, 0, -1, false, 2, &st), 0);
        assert_int_equal(foreign_threads(a, &t), 1);
        /* every CPU of the request's online set again: vmmpower pins it again in the same pass */
        assert_int_equal(tamper_and_pass(f, a, 0, 1, true, 2, &st), 1);
        assert_int_equal(st.pin_handed_back, 1);
        assert_int_equal(st.pins_foreign, 0);
        assert_int_equal(st.pin_widened, 0);
        assert_int_equal(foreign_threads(a, &t), 0);
        /* pinned by hand again; a set narrower than the online CPUs is not a hand-back: left to them */
        assert_int_equal(tamper_and_pass(f, a, 0, -1, false, 2, &st), 0);
        assert_int_equal(tamper_and_pass(f, a, 0, -1, true, 2, &st), 0);
        assert_int_equal(st.pin_foreign, 2);
        assert_int_equal(st.pin_handed_back, 1);
        applier_free(a);
        assert_int_equal(sched_setaffinity(f->tid[0], sizeof(f->orig), &f->orig), 0);
        restore_and_check(f);
}

/* A request "tid[0] on cpu0, tid[1] on 0" with the online CPUs listed (-1 ends), tid[0] left out if cpu0 < -2. */
static struct apply_request *request_online(struct fixture *f, int cpu0, int on0, int on1)
{
        struct apply_request *r = request(f, cpu0 < -2 ? 0 : cpu0, 0, 0, -1);

        cpuset_set(&r->online, (unsigned) on0);
        if (on1 >= 0)
                cpuset_set(&r->online, (unsigned) on1);
        if (cpu0 < -2) {
                r->pins[0] = r->pins[1];
                r->n_pins = 1;
        }
        return r;
}

/*
 * The pin check's edges (found by review): a suspicion whose pin's CPU then
 * goes offline is resolved (the plan's new target is made, not held for
 * good); a pin let go stays theirs while requests leave its thread out.
 */
static void test_pin_check_edges(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start_checking(f);
        struct apply_stats st;
        pid_t t = 0;

        submit_wait(a, request_online(f, 1, 0, 1));
        /* suspect ({0} where {1} was made), then CPU 1 offline in the request, the plan moves tid[0] to 0,
         * then back online and to 1: made */
        assert_int_equal(tamper_and_pass(f, a, 0, -1, true, 1, &st), 0);
        submit_wait(a, request_online(f, 0, 0, -1));
        submit_wait(a, request_online(f, 1, 0, 1));
        assert_int_equal(affinity_of(f->tid[0]), 1);
        applier_get_stats(a, &st);
        assert_true(st.pin_foreign == 0 && st.pin_widened == 0);

        /* let go ({0} where {1} was made), then left out of three requests: still theirs */
        set_affinity2(f->tid[0], 0, -1);
        submit_wait(a, request_online(f, 1, 0, 1));
        submit_wait(a, request_online(f, 1, 0, 1));
        applier_get_stats(a, &st);
        assert_int_equal(st.pin_foreign, 1);
        for (int i = 0; i < 3; i++)
                submit_wait(a, request_online(f, -3, 0, 1));
        assert_int_equal(foreign_threads(a, &t), 1);
        submit_wait(a, request_online(f, 1, 0, 1));
        assert_int_equal(affinity_of(f->tid[0]), 0);
        applier_get_stats(a, &st);
        assert_int_equal(st.pins_foreign, 1);
        applier_free(a);
        assert_int_equal(sched_setaffinity(f->tid[0], sizeof(f->orig), &f->orig), 0);
        restore_and_check(f);
}

/*
 * A suspect pin (changed at one check) whose plan asks for another CPU
 * before the next check, and found wider than made at that check: the new
 * target is made, as any (not a widened pin "made again", which for a
 * libvirt pin would take libvirt's record for someone's vcpupin).  Checks
 * every 2 s here, so that a pass can fall between two of them.
 */
static void test_suspect_then_new_target(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start_checking_every(f, 2 * NSEC_PER_SEC);
        struct apply_stats st;

        submit_wait(a, request_online(f, 1, 0, 1)); /* made; this pass's check came first */
        set_affinity2(f->tid[0], 0, -1);
        usleep(2100 * 1000);
        submit_wait(a, request_online(f, 1, 0, 1)); /* a check: suspect */
        submit_wait(a, request_online(f, 0, 0, 1)); /* no check: the new target is held */
        applier_get_stats(a, &st);
        assert_int_equal(st.pins, 2);
        set_affinity2(f->tid[0], 0, 1);
        usleep(2100 * 1000);
        submit_wait(a, request_online(f, 0, 0, 1)); /* a check: wider than made, a target held */
        assert_int_equal(affinity_of(f->tid[0]), 0);
        applier_get_stats(a, &st);
        assert_true(st.pin_foreign == 0 && st.pin_widened == 0 && st.pins == 3);
        applier_free(a);
        restore_and_check(f);
}

/*
 * A hand pin made between two checks, then a release (or a move) asked of
 * the pin before the next check: held, not written over; the next check
 * finds the same mask and lets it go.
 */
static void test_hold_before_release(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start_checking_every(f, 2 * NSEC_PER_SEC);
        struct apply_stats st;

        submit_wait(a, request_online(f, 1, 0, 1));
        set_affinity2(f->tid[0], 0, -1);
        submit_wait(a, request_online(f, APPLY_RELEASE, 0, 1)); /* no check yet: the release is held */
        assert_int_equal(affinity_of(f->tid[0]), 0);
        applier_get_stats(a, &st);
        assert_int_equal(st.pin_released, 0);
        usleep(2100 * 1000);
        submit_wait(a, request_online(f, APPLY_RELEASE, 0, 1)); /* a check: the same mask, theirs */
        assert_int_equal(affinity_of(f->tid[0]), 0);
        applier_get_stats(a, &st);
        assert_true(st.pin_foreign == 1 && st.pin_released == 0);
        applier_free(a);
        assert_int_equal(sched_setaffinity(f->tid[0], sizeof(f->orig), &f->orig), 0);
        restore_and_check(f);
}

/*
 * A thread whose original mask does not hold the CPU it was pinned to
 * (QEMU started under taskset), released and then pinned again: the release
 * leaves no pin of ours to compare with, so the new pin is made, not held as
 * a hand pin.
 */
static void test_repin_after_release(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start_checking_every(f, 2 * NSEC_PER_SEC);
        struct apply_stats st;

        set_affinity2(f->tid[0], 0, -1); /* its original */
        submit_wait(a, request_online(f, 1, 0, 1));
        assert_int_equal(affinity_of(f->tid[0]), 1);
        submit_wait(a, request_online(f, APPLY_RELEASE, 0, 1));
        assert_int_equal(affinity_of(f->tid[0]), 0);
        submit_wait(a, request_online(f, 1, 0, 1));
        assert_int_equal(affinity_of(f->tid[0]), 1);
        applier_get_stats(a, &st);
        assert_true(st.pin_released == 1 && st.pins == 3 && st.pin_foreign == 0);
        applier_free(a);
        assert_int_equal(journal_restore_all(f->state, f->root, NULL, NULL), 0);
        assert_int_equal(affinity_of(f->tid[0]), 0); /* back to its original */
        assert_int_equal(sched_setaffinity(f->tid[0], sizeof(f->orig), &f->orig), 0);
        restore_and_check(f);
}

/*
 * A pin let go whose thread later holds vmmpower's own mask again (a cpuset
 * narrowed, then widened: the kernel restores the mask asked for) is taken
 * back and journaled again, so that the restore at exit puts the original
 * back rather than leaving vmmpower's pin on the host.
 */
static void test_own_pin_taken_back(void **state)
{
        struct fixture *f = *state;
        pid_t t = 0;
        struct apply_stats st;
        struct applier *a = start_checking(f);

        submit_wait(a, request_online(f, 1, 0, 1));
        assert_int_equal(tamper_and_pass(f, a, 0, -1, true, 2, &st), 0); /* let go at the second check */
        assert_int_equal(st.pin_foreign, 1);
        assert_int_equal(tamper_and_pass(f, a, 1, -1, true, 1, &st), 1); /* vmmpower's {1} again */
        assert_int_equal(st.pin_handed_back, 1);
        assert_int_equal(st.pins_foreign, 0);
        assert_int_equal(foreign_threads(a, &t), 0);
        applier_free(a);
        assert_int_equal(journal_live(f), 2);
        restore_and_check(f); /* both threads back to their original */
}

/* A thread that exits while its pin is under suspicion is found gone, not kept (and checked) for good. */
static void test_suspect_thread_gone(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start_checking(f);
        struct apply_request *r;
        struct apply_stats st;
        struct worker w;

        worker_start(&w);
        for (int i = 0; i < 2; i++) {
                r = request(f, 1, 0, 0, -1);
                r->pins[0].tid = w.tid;
                submit_wait(a, r);
                if (i == 0)
                        set_affinity2(w.tid, 0, -1); /* the next pass's check: suspect */
        }
        worker_exit(&w);
        r = request(f, 1, 0, 0, -1);
        r->pins[0].tid = w.tid;
        submit_wait(a, r);
        applier_get_stats(a, &st);
        assert_int_equal(st.pin_gone, 1);
        assert_int_equal(st.pin_foreign, 0);
        applier_free(a);
        restore_and_check(f);
}

/*
 * A pin left to someone else stays theirs under the next applier (a reload,
 * a restart): the state directory's foreign-pins file.  A line of a thread
 * that is gone and a line that does not parse are dropped; the file goes
 * once nothing is left to others.
 */
static void test_foreign_pins_kept(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start_checking(f);
        struct apply_stats st;
        char path[400], buf[512];
        pid_t t = 0;
        FILE *fp;

        submit_wait(a, request(f, 1, 0, 0, -1));
        assert_int_equal(tamper_and_pass(f, a, 0, -1, false, 2, &st), 0);
        assert_int_equal(st.pin_foreign, 1);
        applier_free(a);
        snprintf(path, sizeof(path), "%s/foreign-pins", f->state);
        assert_true(read_small_file(path, buf, sizeof(buf)) > 0);
        /* a thread long gone and a line that does not parse, appended */
        fp = fopen(path, "a");
        assert_non_null(fp);
        fprintf(fp, "%d 999999999 12345 0-1\nnot a line\n", (int) getpid());
        fclose(fp);

        a = start_checking(f);
        submit_wait(a, request(f, 1, 1, 0, -1));
        assert_int_equal(affinity_of(f->tid[0]), 0); /* still theirs */
        assert_int_equal(affinity_of(f->tid[1]), 1);
        applier_get_stats(a, &st);
        assert_int_equal(st.pins_foreign, 1);
        assert_int_equal(st.pin_foreign, 0); /* found by the earlier applier */
        assert_int_equal(foreign_threads(a, &t), 1);
        assert_int_equal(t, f->tid[0]);
        /* rewritten without the two bad lines */
        assert_true(read_small_file(path, buf, sizeof(buf)) > 0);
        assert_null(strstr(buf, "999999999"));
        assert_null(strstr(buf, "not a line"));
        /* handed back (all the CPUs it had before the first pin): pinned, and the file goes */
        assert_int_equal(tamper_and_pass(f, a, 0, 1, false, 2, &st), 1);
        assert_int_equal(st.pin_handed_back, 1);
        assert_int_equal(st.pins_foreign, 0);
        applier_free(a);
        assert_int_equal(access(path, F_OK), -1);
        restore_and_check(f);
}

/* Requests faster than the thread: only the latest state is applied. */
static void test_latest_wins(void **state)
{
        struct fixture *f = *state;
        struct applier *a = start(f);

        for (int i = 0; i < 200; i++)
                applier_submit(a, request(f, i % 2, (i + 1) % 2, 0, -1));
        assert_int_equal(applier_wait_idle(a, 10 * NSEC_PER_SEC), 0);
        assert_int_equal(affinity_of(f->tid[0]), 1);
        assert_int_equal(affinity_of(f->tid[1]), 0);
        applier_free(a);
        restore_and_check(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_apply_and_restore, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_restores, setup, teardown),
                cmocka_unit_test_setup_teardown(test_simulate, setup, teardown),
                cmocka_unit_test_setup_teardown(test_release, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gone_thread, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gone_pins_forgotten, setup, teardown),
                cmocka_unit_test_setup_teardown(test_libvirt_unreachable, setup, teardown),
                cmocka_unit_test_setup_teardown(test_latest_wins, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_knob_retried, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_knob_reverted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unsupported_not_a_change, setup, teardown),
                cmocka_unit_test_setup_teardown(test_foreign_knob_left, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pins_checked, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pin_handed_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_foreign_pins_kept, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pin_check_edges, setup, teardown),
                cmocka_unit_test_setup_teardown(test_suspect_then_new_target, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hold_before_release, setup, teardown),
                cmocka_unit_test_setup_teardown(test_suspect_thread_gone, setup, teardown),
                cmocka_unit_test_setup_teardown(test_repin_after_release, setup, teardown),
                cmocka_unit_test_setup_teardown(test_own_pin_taken_back, setup, teardown),
        };
        if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
                printf("1..0 # SKIP needs 2 online CPUs\n");
                return 0;
        }
        return cmocka_run_group_tests(tests, NULL, NULL);
}
