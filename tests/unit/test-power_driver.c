/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Power driver: ops validation, the sysfs backend against fixture trees
 * copied into a temp dir (xeon-spr-2s: intel_pstate + EPP; epyc-genoa-1s:
 * acpi-cpufreq with available frequencies; small-2cpu: PM QoS, and the
 * halt_poll_ns an older vmmpowerd wrote), each errno's documented action
 * through the I/O seam, read-back clamping (also killed before the read-back
 * is journaled, and a read-back the journal cannot record), knobs someone
 * else changed, restore of everything the driver wrote, and the sim backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "journal.h"
#include "journal_builtin.h"
#include "power_driver.h"
#include "util.h"

#define CPU_REL "devices/system/cpu"
#define POL0 CPU_REL "/cpufreq/policy0"

struct fixture {
        char tmp[256];
        char root[300];
        char pristine[300];
        char state[300];
        struct journal *j;
        struct power_driver *drv;
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

/* Events of the driver (power_driver_config.on_event) of the next fixture_setup(), when set. */
struct events {
        unsigned n;
        enum power_event_type type[8];
        char msg[8][512];
};
static struct events *fixture_events;

static void record_event(void *userdata, const struct power_event *ev)
{
        struct events *e = userdata;

        if (e->n < 8) {
                e->type[e->n] = ev->type;
                power_event_format(ev, e->msg[e->n], sizeof(e->msg[e->n]));
        }
        e->n++;
}

static void fixture_setup(struct fixture *f, const char *tree)
{
        struct power_driver_config cfg = { 0 };

        memset(f, 0, sizeof(*f));
        /* tmpfs when there is one: copying a 3600-file fixture to this disk takes seconds */
        strcpy(f->tmp, access("/dev/shm", W_OK) == 0 ? "/dev/shm/test-power_driver.XXXXXX" : "/tmp/test-power_driver.XXXXXX");
        assert_non_null(mkdtemp(f->tmp));
        snprintf(f->root, sizeof(f->root), "%s/sys", f->tmp);
        snprintf(f->pristine, sizeof(f->pristine), "%s/pristine", f->tmp);
        snprintf(f->state, sizeof(f->state), "%s/state", f->tmp);
        sh("cp -a '%s/%s' '%s' && cp -a '%s/%s' '%s'", TEST_DATA_DIR, tree, f->root, TEST_DATA_DIR, tree, f->pristine);
        assert_int_equal(journal_open(f->state, &f->j), 0);
        cfg.sysfs_root = f->root;
        cfg.journal = f->j;
        if (fixture_events) {
                cfg.on_event = record_event;
                cfg.event_userdata = fixture_events;
        }
        assert_int_equal(power_driver_new("sysfs", &cfg, &f->drv), 0);
}

static void fixture_teardown(struct fixture *f)
{
        power_driver_free(f->drv);
        journal_free(f->j);
        power_driver_sysfs_set_io(NULL);
        sh("rm -rf '%s'", f->tmp);
}

static void read_knob(struct fixture *f, const char *rel, char *buf, size_t size)
{
        char path[512];

        snprintf(path, sizeof(path), "%s/%s", f->root, rel);
        assert_true(read_small_file(path, buf, size) >= 0);
}

static void assert_knob(struct fixture *f, const char *rel, const char *want)
{
        char buf[256];

        read_knob(f, rel, buf, sizeof(buf));
        assert_string_equal(buf, want);
}

/* Restore everything and check the tree is byte-identical to the pristine copy. */
static void assert_restores_pristine(struct fixture *f)
{
        struct restore_stats st;
        char jpath[512];

        journal_free(f->j);
        f->j = NULL;
        power_driver_sysfs_set_io(NULL);
        assert_int_equal(journal_restore_all(f->state, f->root, NULL, &st), 0);
        assert_int_equal(st.foreign, 0);
        assert_int_equal(st.failed, 0);
        sh("diff -r '%s' '%s'", f->pristine, f->root);
        snprintf(jpath, sizeof(jpath), "%s/journal", f->state);
        assert_int_equal(access(jpath, F_OK), -1);
}

/* ---- ops validation ---- */

static int dummy_idle(struct power_driver *d, unsigned c, const struct power_idle_constraint *ic) { return 0; }
static int dummy_perf(struct power_driver *d, unsigned c, const struct power_perf_request *r) { return 0; }
static void dummy_exit(struct power_driver *d) { }

static void test_validate(void **state)
{
        const struct power_driver_ops full = {
                .name = "dummy", .enter_idle = dummy_idle, .set_perf = dummy_perf,
        };
        static const struct {
                size_t off;
                const char *name;
        } req[] = {
                { offsetof(struct power_driver_ops, enter_idle), "enter_idle" },
                { offsetof(struct power_driver_ops, set_perf), "set_perf" },
        };
        const char *missing = NULL;

        assert_int_equal(power_driver_validate(&full, &missing), 0);
        for (size_t i = 0; i < ELEMENTSOF(req); i++) {
                struct power_driver_ops o = full;
                memset((char *) &o + req[i].off, 0, sizeof(void *));
                missing = NULL;
                assert_int_equal(power_driver_validate(&o, &missing), -EINVAL);
                assert_string_equal(missing, req[i].name);
                assert_int_equal(power_driver_register(&o), -EINVAL);
        }
        struct power_driver_ops o = full;
        o.name = NULL;
        assert_int_equal(power_driver_validate(&o, &missing), -EINVAL);
        assert_string_equal(missing, "name");
        o = full;
        o.exit = dummy_exit;
        assert_int_equal(power_driver_validate(&o, &missing), -EINVAL);
        assert_string_equal(missing, "init");

        /* Registration: once; another table under the same name is refused. */
        static const struct power_driver_ops reg = {
                .name = "dummy", .enter_idle = dummy_idle, .set_perf = dummy_perf,
        };
        static const struct power_driver_ops reg2 = {
                .name = "dummy", .enter_idle = dummy_idle, .set_perf = dummy_perf,
        };
        assert_int_equal(power_driver_register(&reg), 0);
        assert_int_equal(power_driver_register(&reg), 0);
        assert_int_equal(power_driver_register(&reg2), -EEXIST);

        /* The optional late_callback absent: nothing deferred, 0. */
        struct power_driver *d;
        assert_int_equal(power_driver_new("dummy", NULL, &d), 0);
        assert_int_equal(power_driver_late_callback(d, 5), 0);
        power_driver_free(d);
        assert_int_equal(power_driver_new("no-such-driver", NULL, &d), -ENOENT);
}

/* ---- sysfs backend on real layouts ---- */

static void test_xeon_perf_epp(void **state)
{
        struct fixture f;
        struct power_sysfs_info info;
        struct power_perf_request req = { 0 };
        uint32_t cap;

        fixture_setup(&f, "topology/xeon-spr-2s/sys");
        assert_int_equal(power_sysfs_get_info(f.drv, &info), 0);
        assert_true(info.n_policies > 1);
        assert_true(info.has_epp);
        assert_true(info.n_idle_knobs >= 4 * info.n_cpus);

        /* level 500: 800000 + 500/1000 * (3800000 - 800000) */
        req.flags = POWER_PERF_LEVEL | POWER_PERF_EPP;
        req.level_permille = 500;
        strcpy(req.epp, "power");
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), 0);
        assert_knob(&f, POL0 "/scaling_max_freq", "2300000");
        assert_knob(&f, POL0 "/energy_performance_preference", "power");
        assert_knob(&f, POL0 "/scaling_min_freq", "800000");
        assert_string_equal(journal_original(f.j, JOURNAL_KIND_SYSFS, POL0 "/scaling_max_freq"), "3800000\n");
        assert_string_equal(journal_original(f.j, JOURNAL_KIND_SYSFS, POL0 "/energy_performance_preference"),
                            "balance_performance\n");

        /* max kHz 2000000: the cap the driver tracks follows; another policy untouched */
        assert_int_equal(power_driver_set_perf(f.drv, 0, &(struct power_perf_request) {
                                 .flags = POWER_PERF_MAX_KHZ, .max_khz = 2000000 }), 0);
        assert_int_equal(power_sysfs_policy_cap_khz(f.drv, 0, &cap), 0);
        assert_int_equal(cap, 2000000);
        assert_knob(&f, POL0 "/scaling_max_freq", "2000000");
        assert_knob(&f, CPU_REL "/cpufreq/policy1/scaling_max_freq", "3800000");
        /* above cpuinfo_max: capped at it */
        assert_int_equal(power_driver_set_perf(f.drv, 0, &(struct power_perf_request) {
                                 .flags = POWER_PERF_MAX_KHZ, .max_khz = 9000000 }), 0);
        assert_knob(&f, POL0 "/scaling_max_freq", "3800000");

        /* Same value again: no write, no journal record (skipped counter). */
        unsigned skipped = power_driver_stats(f.drv)->skipped;
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), 0); /* 2300000 + power */
        assert_int_equal(power_driver_stats(f.drv)->skipped, skipped + 1); /* epp unchanged */

        /* min and max together, raising the floor above the current cap: cap first */
        req = (struct power_perf_request) { .flags = POWER_PERF_MIN_KHZ | POWER_PERF_MAX_KHZ,
                                             .min_khz = 3000000, .max_khz = 3500000 };
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), 0);
        assert_knob(&f, POL0 "/scaling_min_freq", "3000000");
        assert_knob(&f, POL0 "/scaling_max_freq", "3500000");

        /* idle: deepest state 1 disables states 2 and 3 only */
        struct power_idle_constraint ic = { .deepest_state = 1, .latency_us = -1 };
        assert_int_equal(power_driver_enter_idle(f.drv, 3, &ic), 0);
        assert_knob(&f, CPU_REL "/cpu3/cpuidle/state0/disable", "0");
        assert_knob(&f, CPU_REL "/cpu3/cpuidle/state1/disable", "0");
        assert_knob(&f, CPU_REL "/cpu3/cpuidle/state2/disable", "1");
        assert_knob(&f, CPU_REL "/cpu3/cpuidle/state3/disable", "1");
        /* PM QoS resume latency: written, then released back to the original. */
        ic.latency_us = 10;
        assert_int_equal(power_driver_enter_idle(f.drv, 3, &ic), 0);
        assert_knob(&f, CPU_REL "/cpu3/power/pm_qos_resume_latency_us", "10");
        ic.deepest_state = -1;
        ic.latency_us = -1;
        assert_int_equal(power_driver_enter_idle(f.drv, 3, &ic), 0);
        assert_knob(&f, CPU_REL "/cpu3/power/pm_qos_resume_latency_us", "0");
        assert_knob(&f, CPU_REL "/cpu3/cpuidle/state3/disable", "0");
        /* A state disabled by someone else (not by us) is left alone on release. */
        sh("echo 1 > '%s/" CPU_REL "/cpu4/cpuidle/state3/disable'", f.root);
        assert_int_equal(power_driver_enter_idle(f.drv, 4, &ic), 0);
        assert_knob(&f, CPU_REL "/cpu4/cpuidle/state3/disable", "1");
        sh("echo 0 > '%s/" CPU_REL "/cpu4/cpuidle/state3/disable'", f.root);

        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

static void test_epyc_available_frequencies(void **state)
{
        struct fixture f;
        struct power_perf_request req = { .flags = POWER_PERF_LEVEL, .level_permille = 500 };
        struct power_sysfs_info info;

        fixture_setup(&f, "topology/epyc-genoa-1s/sys");
        assert_int_equal(power_sysfs_get_info(f.drv, &info), 0);
        assert_false(info.has_epp);
        /* 1500000 + 0.5 * 900000 = 1950000 snaps up to the listed 2200000 */
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), 0);
        assert_knob(&f, POL0 "/scaling_max_freq", "2200000");
        /* level 0: the lowest listed frequency, never below the floor (scaling_min_freq 1500000) */
        req.level_permille = 0;
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), 0);
        assert_knob(&f, POL0 "/scaling_max_freq", "1500000");
        /* EPP on a driver without it */
        req = (struct power_perf_request) { .flags = POWER_PERF_EPP, .epp = "power" };
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -EOPNOTSUPP);

        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

/*
 * PM QoS on the small fixture, and restore of a halt_poll_ns record: the
 * driver no longer writes KVM's halt_poll_ns, but a journal left by an older
 * vmmpowerd may hold a record of it, and restore (by path) must still put the
 * original back.
 */
static void test_small_qos_halt_poll(void **state)
{
        const char *hp = "module/kvm/parameters/halt_poll_ns";
        struct fixture f;
        struct power_sysfs_info info;
        struct power_idle_constraint ic = { .deepest_state = -1, .latency_us = 20 };

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        assert_int_equal(power_sysfs_get_info(f.drv, &info), 0);
        assert_int_equal(info.n_cpus, 2);
        assert_int_equal(info.n_pm_qos, 2);
        assert_int_equal(power_driver_enter_idle(f.drv, 1, &ic), 0);
        assert_knob(&f, CPU_REL "/cpu1/power/pm_qos_resume_latency_us", "20");
        ic.latency_us = 0; /* no wake latency tolerated: the kernel's "n/a" */
        assert_int_equal(power_driver_enter_idle(f.drv, 1, &ic), 0);
        assert_knob(&f, CPU_REL "/cpu1/power/pm_qos_resume_latency_us", "n/a");
        ic.latency_us = -1;
        assert_int_equal(power_driver_enter_idle(f.drv, 1, &ic), 0);
        assert_knob(&f, CPU_REL "/cpu1/power/pm_qos_resume_latency_us", "0");
        assert_int_equal(power_driver_enter_idle(f.drv, 7, &ic), -ENOENT);
        /* the record an older vmmpowerd made before writing 50000 */
        assert_int_equal(journal_before_write(f.j, JOURNAL_KIND_SYSFS, hp, "200000\n", "50000"), 0);
        assert_int_equal(power_driver_sysfs_knob_write(f.root, hp, "50000\n"), 0);
        assert_knob(&f, hp, "50000");
        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

/* ---- fault injection ---- */

struct faults {
        const char *match; /* path substring */
        int write_errno;   /* fail writes with this */
        const char *readback; /* after a write, reads return this */
        bool armed_readback;
        unsigned clamp_above;  /* a value written above it is stored as it (a platform limit), 0 = none */
        bool exit_after_write; /* _exit(9) once a matching write is made: kill -9 before the read-back */
        const char *full_journal; /* after a matching write, this file can grow no more (RLIMIT_FSIZE) */
        unsigned writes, reads, writes_matched;
};

static ssize_t f_read(void *ud, const char *path, char *buf, size_t size)
{
        struct faults *fl = ud;

        fl->reads++;
        if (fl->match && strstr(path, fl->match) && fl->armed_readback && fl->readback) {
                snprintf(buf, size, "%s\n", fl->readback);
                return (ssize_t) strlen(buf);
        }
        return power_sysfs_default_read(NULL, path, buf, size);
}

static int f_write(void *ud, const char *path, const char *data, size_t len)
{
        struct faults *fl = ud;
        int r;

        fl->writes++;
        if (fl->match && strstr(path, fl->match)) {
                fl->writes_matched++;
                if (fl->write_errno)
                        return -fl->write_errno;
                if (fl->clamp_above && strtoul(data, NULL, 10) > fl->clamp_above) {
                        char buf[32];
                        snprintf(buf, sizeof(buf), "%u\n", fl->clamp_above);
                        r = power_sysfs_default_write(NULL, path, buf, strlen(buf));
                        goto written;
                }
        }
        r = power_sysfs_default_write(NULL, path, data, len);
        if (r == 0 && fl->match && strstr(path, fl->match) && fl->readback) {
                /* The kernel clamps: the file holds what it would read back. */
                char buf[128];
                snprintf(buf, sizeof(buf), "%s\n", fl->readback);
                r = power_sysfs_default_write(NULL, path, buf, strlen(buf));
        }
written:
        if (r == 0 && fl->match && strstr(path, fl->match)) {
                if (fl->exit_after_write)
                        _exit(9);
                if (fl->full_journal) {
                        struct rlimit rl;
                        struct stat st;

                        assert_int_equal(stat(fl->full_journal, &st), 0);
                        assert_int_equal(getrlimit(RLIMIT_FSIZE, &rl), 0);
                        rl.rlim_cur = (rlim_t) st.st_size;
                        assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
                        fl->full_journal = NULL;
                }
        }
        return r;
}

static void install(struct faults *fl)
{
        const struct power_sysfs_io io = { f_read, f_write, fl };
        power_driver_sysfs_set_io(&io);
}

static void test_errno_einval(void **state)
{
        struct fixture f;
        struct faults fl = { .match = "policy1/energy_performance_preference", .write_errno = EINVAL };
        struct power_perf_request req = { .flags = POWER_PERF_EPP, .epp = "bogus" };
        struct power_driver_stats *st;

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        st = power_driver_stats(f.drv);
        install(&fl);
        assert_int_equal(power_driver_set_perf(f.drv, 1, &req), -EINVAL);
        assert_int_equal(st->rejected, 1);
        assert_int_equal(fl.writes_matched, 1);
        /* The same value again: refused without touching the file. */
        assert_int_equal(power_driver_set_perf(f.drv, 1, &req), -EINVAL);
        assert_int_equal(st->rejected_cached, 1);
        assert_int_equal(fl.writes_matched, 1);
        assert_int_equal(power_driver_pending_retries(f.drv), 0);
        /* Another value is tried (and accepted once the fault is gone). */
        fl.write_errno = 0;
        strcpy(req.epp, "power");
        assert_int_equal(power_driver_set_perf(f.drv, 1, &req), 0);
        assert_knob(&f, CPU_REL "/cpufreq/policy1/energy_performance_preference", "power");
        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

static void test_errno_ebusy_backoff(void **state)
{
        struct fixture f;
        struct faults fl = { .match = "cpu0/cpuidle/state2/disable", .write_errno = EBUSY };
        struct power_idle_constraint ic = { .deepest_state = 1, .latency_us = -1 };
        struct power_driver_stats *st;
        nsec_t t = 1000 * NSEC_PER_SEC;

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        st = power_driver_stats(f.drv);
        install(&fl);
        power_driver_set_now(f.drv, t);
        assert_int_equal(power_driver_enter_idle(f.drv, 0, &ic), -EBUSY);
        assert_int_equal(st->busy, 1);
        assert_int_equal(power_driver_pending_retries(f.drv), 1);
        assert_knob(&f, CPU_REL "/cpu0/cpuidle/state2/disable", "0");
        /* Not due before the first backoff (10 ms). */
        assert_int_equal(power_driver_late_callback(f.drv, t + 9 * NSEC_PER_MSEC), 0);
        assert_int_equal(st->retries, 0);
        /* Due: retried, still busy: next after 20 ms. */
        assert_int_equal(power_driver_late_callback(f.drv, t + 10 * NSEC_PER_MSEC), -EBUSY);
        assert_int_equal(st->retries, 1);
        assert_int_equal(power_driver_late_callback(f.drv, t + 29 * NSEC_PER_MSEC), 0);
        assert_int_equal(st->retries, 1);
        /* The knob frees up: the retry succeeds and the pending entry is gone. */
        fl.write_errno = 0;
        assert_int_equal(power_driver_late_callback(f.drv, t + 30 * NSEC_PER_MSEC), 0);
        assert_int_equal(st->retries, 2);
        assert_int_equal(power_driver_pending_retries(f.drv), 0);
        assert_knob(&f, CPU_REL "/cpu0/cpuidle/state2/disable", "1");

        /* Permanently busy: gives up after max_attempts retries. */
        fl.write_errno = EBUSY;
        fl.match = "cpu1/cpuidle/state2/disable";
        assert_int_equal(power_driver_enter_idle(f.drv, 1, &ic), -EBUSY);
        nsec_t now = t;
        for (int i = 0; i < 200 && power_driver_pending_retries(f.drv) > 0; i++) {
                now += NSEC_PER_SEC;
                (void) power_driver_late_callback(f.drv, now);
        }
        assert_int_equal(power_driver_pending_retries(f.drv), 0);
        assert_int_equal(st->gave_up, 1);
        assert_int_equal(st->retries, 2 + BACKOFF_DEFAULT.max_attempts);
        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

static void test_errno_eacces(void **state)
{
        struct fixture f;
        struct faults fl = { .match = "policy0/scaling_max_freq", .write_errno = EACCES };
        struct power_perf_request req = { .flags = POWER_PERF_LEVEL, .level_permille = 100 };
        struct power_idle_constraint ic = { .deepest_state = 0, .latency_us = -1 };
        struct power_driver_stats *st;

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        st = power_driver_stats(f.drv);
        install(&fl);
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -EACCES);
        assert_int_equal(st->denied, 1);
        assert_true(power_driver_class_disabled(f.drv, POWER_KNOB_CPUFREQ));
        /* Every cpufreq knob is now refused without I/O, other classes still work. */
        unsigned w = fl.writes;
        assert_int_equal(power_driver_set_perf(f.drv, 1, &req), -EACCES);
        assert_int_equal(fl.writes, w);
        assert_int_equal(st->class_disabled, 1);
        assert_int_equal(power_driver_enter_idle(f.drv, 0, &ic), 0);
        assert_knob(&f, CPU_REL "/cpu0/cpuidle/state1/disable", "1");
        assert_false(power_driver_class_disabled(f.drv, POWER_KNOB_CPUIDLE));
        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

static void test_errno_enoent(void **state)
{
        struct fixture f;
        struct faults fl = { .match = "cpu1/power/pm_qos", .write_errno = ENOENT };
        struct power_idle_constraint ic = { .deepest_state = -1, .latency_us = 5 };
        struct power_driver_stats *st;

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        st = power_driver_stats(f.drv);
        install(&fl);
        assert_int_equal(power_driver_enter_idle(f.drv, 1, &ic), -ENOENT);
        assert_int_equal(st->gone, 1);
        /* dropped: not tried again */
        unsigned m = fl.writes_matched;
        assert_int_equal(power_driver_enter_idle(f.drv, 1, &ic), -ENOENT);
        assert_int_equal(fl.writes_matched, m);
        assert_int_equal(power_driver_pending_retries(f.drv), 0);
        /* a CPU whose policy directory vanished: the read fails with ENOENT too */
        sh("rm -rf '%s/" CPU_REL "/cpufreq/policy0'", f.root);
        struct power_perf_request req = { .flags = POWER_PERF_LEVEL, .level_permille = 100 };
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -ENOENT);
        assert_int_equal(st->gone, 2);
        fixture_teardown(&f);
}

static void test_clamped(void **state)
{
        struct fixture f;
        struct faults fl = { .match = "policy0/scaling_min_freq", .readback = "2000000" };
        struct power_perf_request req = { .flags = POWER_PERF_MIN_KHZ, .min_khz = 3000000 };
        const struct power_write_info *lw;
        struct power_driver_stats *st;

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        st = power_driver_stats(f.drv);
        install(&fl);
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -ERANGE);
        lw = power_driver_last_write(f.drv);
        assert_int_equal(lw->error, -ERANGE);
        assert_string_equal(lw->wanted, "3000000");
        assert_string_equal(lw->actual, "2000000");
        assert_string_equal(lw->path, POL0 "/scaling_min_freq");
        assert_int_equal(st->clamped, 1);
        assert_int_equal(st->writes, 0);
        assert_knob(&f, POL0 "/scaling_min_freq", "2000000");
        /* The clamped value is known to the journal: restore puts 800000 back. */
        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

/*
 * kill -9 between a clamped write and the journal record of its read-back: the
 * platform holds scaling_max_freq at 2400000, we ask 3000000 (journaled:
 * before 3800000, after 3000000), the knob reads 2400000, a value the journal
 * never saw.  Its last record is unverified, so restore takes it as ours and
 * puts 3800000 back (it used to leave it as "changed by someone else").
 */
static void test_clamp_killed_before_readback(void **state)
{
        struct faults fl = { .match = "policy0/scaling_max_freq", .clamp_above = 2400000, .exit_after_write = true };
        struct power_perf_request req = { .flags = POWER_PERF_MAX_KHZ, .max_khz = 3000000 };
        struct fixture f;
        int status;
        pid_t pid;

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        install(&fl);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                /* the fixture's journal and driver (the same open file, lock and all) */
                (void) power_driver_set_perf(f.drv, 0, &req);
                _exit(1); /* the hook did not end it: no write was made */
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 9);
        assert_knob(&f, POL0 "/scaling_max_freq", "2400000");
        /* this process's journal never saw the child's record: restore from the file */
        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

/*
 * The read-back of a clamped write cannot be journaled (the journal's file
 * system is full: here RLIMIT_FSIZE, EFBIG): the value read before the write
 * is written back, the journal error returned and counted, and restore still
 * finds a value it knows.
 */
static void test_readback_not_journaled(void **state)
{
        struct faults fl = { .match = "policy0/scaling_max_freq", .clamp_above = 2400000 };
        struct power_perf_request req = { .flags = POWER_PERF_MAX_KHZ, .max_khz = 2000000 };
        struct events ev = { 0 };
        struct power_driver_stats *st;
        struct rlimit saved;
        char jpath[512];
        struct fixture f;
        int r;

        fixture_events = &ev;
        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        fixture_events = NULL;
        st = power_driver_stats(f.drv);
        install(&fl);
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), 0);
        assert_knob(&f, POL0 "/scaling_max_freq", "2000000");

        snprintf(jpath, sizeof(jpath), "%s/journal", f.state);
        assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
        signal(SIGXFSZ, SIG_IGN);
        fl.full_journal = jpath; /* from the write on: the journal cannot grow */
        req.max_khz = 3000000;
        r = power_driver_set_perf(f.drv, 0, &req);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &saved), 0);
        signal(SIGXFSZ, SIG_DFL);
        assert_int_equal(r, -EFBIG);
        assert_int_equal(st->journal_errors, 1);
        assert_int_equal(st->clamped, 0);
        assert_knob(&f, POL0 "/scaling_max_freq", "2000000"); /* put back */
        assert_int_equal(ev.n, 1);
        assert_int_equal(ev.type[0], POWER_EVENT_JOURNAL_FAILED);
        /* still ours: the next write goes through */
        req.max_khz = 1900000;
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), 0);
        assert_int_equal(st->foreign, 0);
        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

static void test_other_errno(void **state)
{
        struct fixture f;
        struct faults fl = { .match = "cpu1/power/pm_qos", .write_errno = EIO };
        struct power_idle_constraint ic = { .deepest_state = -1, .latency_us = 1 };

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        install(&fl);
        assert_int_equal(power_driver_enter_idle(f.drv, 1, &ic), -EIO);
        assert_int_equal(power_driver_stats(f.drv)->other_errors, 1);
        assert_int_equal(power_driver_pending_retries(f.drv), 0);
        assert_false(power_driver_class_disabled(f.drv, POWER_KNOB_PM_QOS));
        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

/* A journal that cannot record: the knob must not be written. */
static void test_journal_failure_blocks_write(void **state)
{
        struct fixture f;
        struct power_idle_constraint ic = { .deepest_state = -1, .latency_us = 7 };

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        sh("chmod 0500 '%s'", f.state);
        if (geteuid() == 0) {
                /* root ignores the mode: take the directory away instead */
                sh("rm -rf '%s' && touch '%s'", f.state, f.state);
        }
        assert_true(power_driver_enter_idle(f.drv, 1, &ic) < 0);
        assert_int_equal(power_driver_stats(f.drv)->journal_errors, 1);
        assert_knob(&f, CPU_REL "/cpu1/power/pm_qos_resume_latency_us", "0");
        sh("rm -rf '%s'", f.state);
        fixture_teardown(&f);
}

/* ---- ownership: a knob someone else changed is theirs (issue 16, item 2) ---- */

struct foreign_seen {
        unsigned calls;
        char path[256], ours[64], found[64];
};

static void on_foreign(void *ud, const char *path, const char *ours, const char *found)
{
        struct foreign_seen *fs = ud;

        fs->calls++;
        snprintf(fs->path, sizeof(fs->path), "%s", path);
        snprintf(fs->ours, sizeof(fs->ours), "%s", ours);
        snprintf(fs->found, sizeof(fs->found), "%s", found);
}

/* The fixture's driver again, with the on_foreign callback. */
static void fixture_watch_foreign(struct fixture *f, struct foreign_seen *fs)
{
        struct power_driver_config cfg = { .sysfs_root = f->root, .journal = f->j, .on_foreign = on_foreign,
                                           .foreign_userdata = fs };

        power_driver_free(f->drv);
        assert_int_equal(power_driver_new("sysfs", &cfg, &f->drv), 0);
}

static void admin_writes(struct fixture *f, const char *rel, const char *value)
{
        sh("echo %s > '%s/%s'", value, f->root, rel);
}

/*
 * The daemon writes 2000000, an administrator (or thermald, tuned) writes
 * 3000000: the next write (1500000) is refused and the administrator's value
 * stays.  The same for a release of a PM QoS limit.  Other knobs are still ours
 * and restored.  The foreign knobs' journal records are kept (the knob is
 * theirs in memory only): restore leaves a value that is not ours (PM QoS,
 * 50), but the tool that changed scaling_max_freq later puts back what it
 * found there, our 2000000, and restore then puts the original 3800000 back.
 * With the record closed at the foreign write, as before, nothing would
 * restore it: the host would stay capped at 2000000.
 */
/*
 * A failed write leaves a verified record: what the knob held then.  Left
 * unverified (U), restore took any later value as ours and put the original
 * over another tool's value set long after the failure.
 */
static void test_failed_write_verified(void **state)
{
        struct fixture f;
        struct faults fl = { .match = "policy0/scaling_max_freq", .write_errno = EINVAL };
        struct power_perf_request req = { .flags = POWER_PERF_MAX_KHZ, .max_khz = 2000000 };
        struct restore_stats rs;

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        install(&fl);
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -EINVAL);
        assert_int_equal(fl.writes_matched, 1);
        assert_false(journal_unverified(f.j, JOURNAL_KIND_SYSFS, POL0 "/scaling_max_freq"));
        /* another tool sets the knob afterwards: theirs at restore */
        admin_writes(&f, POL0 "/scaling_max_freq", "3000000");
        journal_free(f.j);
        f.j = NULL;
        assert_int_equal(journal_restore_all(f.state, f.root, NULL, &rs), 0);
        assert_int_equal(rs.foreign, 1);
        assert_int_equal(rs.restored, 0);
        assert_knob(&f, POL0 "/scaling_max_freq", "3000000");
        fixture_teardown(&f);
}

static void test_foreign_change(void **state)
{
        struct power_perf_request req = { .flags = POWER_PERF_MAX_KHZ, .max_khz = 2000000 };
        struct power_idle_constraint ic = { .deepest_state = -1, .latency_us = 20 };
        struct foreign_seen fs = { 0 };
        struct power_driver_stats *st;
        struct restore_stats rs;
        struct fixture f;

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        fixture_watch_foreign(&f, &fs);
        st = power_driver_stats(f.drv);
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), 0);
        assert_int_equal(power_driver_set_perf(f.drv, 1, &req), 0);
        assert_knob(&f, POL0 "/scaling_max_freq", "2000000");

        admin_writes(&f, POL0 "/scaling_max_freq", "3000000");
        req.max_khz = 1500000;
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -POWER_KNOB_FOREIGN);
        assert_knob(&f, POL0 "/scaling_max_freq", "3000000");
        assert_int_equal(st->foreign, 1);
        assert_int_equal(fs.calls, 1);
        assert_string_equal(fs.path, POL0 "/scaling_max_freq");
        assert_string_equal(fs.ours, "2000000");
        assert_string_equal(fs.found, "3000000");
        assert_string_equal(journal_original(f.j, JOURNAL_KIND_SYSFS, POL0 "/scaling_max_freq"), "3800000\n");
        /* From then on: theirs, refused without I/O, reported once. */
        req.max_khz = 1600000;
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -POWER_KNOB_FOREIGN);
        assert_knob(&f, POL0 "/scaling_max_freq", "3000000");
        assert_int_equal(st->foreign, 1);
        assert_int_equal(st->foreign_refused, 1);
        assert_int_equal(fs.calls, 1);
        /* The other policy is still ours. */
        assert_int_equal(power_driver_set_perf(f.drv, 1, &req), 0);
        assert_knob(&f, CPU_REL "/cpufreq/policy1/scaling_max_freq", "1600000");

        /* Release: our limit is lifted only if the knob still holds it. */
        assert_int_equal(power_driver_enter_idle(f.drv, 1, &ic), 0);
        admin_writes(&f, CPU_REL "/cpu1/power/pm_qos_resume_latency_us", "50");
        ic.latency_us = -1;
        assert_int_equal(power_driver_enter_idle(f.drv, 1, &ic), -POWER_KNOB_FOREIGN);
        assert_knob(&f, CPU_REL "/cpu1/power/pm_qos_resume_latency_us", "50");
        assert_int_equal(st->foreign, 2);
        assert_int_equal(fs.calls, 2);

        /* The other tool puts back the value it found: ours.  Still theirs for this daemon. */
        admin_writes(&f, POL0 "/scaling_max_freq", "2000000");
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -POWER_KNOB_FOREIGN);
        assert_knob(&f, POL0 "/scaling_max_freq", "2000000");

        /* Restore: the PM QoS value is theirs and left; scaling_max_freq holds ours again and
         * goes back to the original, as does policy1. */
        journal_free(f.j);
        f.j = NULL;
        assert_int_equal(journal_restore_all(f.state, f.root, NULL, &rs), 0);
        assert_int_equal(rs.restored, 2);
        assert_int_equal(rs.foreign, 1);
        assert_int_equal(rs.failed, 0);
        assert_knob(&f, POL0 "/scaling_max_freq", "3800000");
        assert_knob(&f, CPU_REL "/cpu1/power/pm_qos_resume_latency_us", "50");
        assert_knob(&f, CPU_REL "/cpufreq/policy1/scaling_max_freq", "3800000");
        fixture_teardown(&f);
}

/* A knob this process never wrote is free to take; one the journal of a
 * previous run still holds is ours if it reads the record's before or after. */
static void test_ownership_from_journal(void **state)
{
        struct power_perf_request req = { .flags = POWER_PERF_MAX_KHZ, .max_khz = 2000000 };
        struct power_driver_config cfg = { 0 };
        struct foreign_seen fs = { 0 };
        struct fixture f;

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), 0);
        assert_int_equal(power_driver_set_perf(f.drv, 1, &req), 0);
        /* A new driver on the same journal (no memory of its own writes). */
        fixture_watch_foreign(&f, &fs);
        req.max_khz = 2100000;
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), 0);
        assert_knob(&f, POL0 "/scaling_max_freq", "2100000");
        admin_writes(&f, CPU_REL "/cpufreq/policy1/scaling_max_freq", "2900000");
        power_driver_free(f.drv);
        cfg.sysfs_root = f.root;
        cfg.journal = f.j;
        assert_int_equal(power_driver_new("sysfs", &cfg, &f.drv), 0);
        assert_int_equal(power_driver_set_perf(f.drv, 1, &req), -POWER_KNOB_FOREIGN);
        assert_knob(&f, CPU_REL "/cpufreq/policy1/scaling_max_freq", "2900000");
        assert_int_equal(power_driver_stats(f.drv)->foreign, 1);
        assert_int_equal(fs.calls, 0); /* no callback configured this time */
        admin_writes(&f, CPU_REL "/cpufreq/policy1/scaling_max_freq", "3800000");
        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

/*
 * EPERM does not disable a class until restart (issue 16, item 9): after a
 * backoff (1 s, then 2 s, ...) one write is let through; still denied: the
 * backoff grows; allowed: the class works again.
 */
static void test_eperm_class_retry(void **state)
{
        struct fixture f;
        struct faults fl = { .match = "policy0/scaling_max_freq", .write_errno = EPERM };
        struct power_perf_request req = { .flags = POWER_PERF_LEVEL, .level_permille = 100 };
        struct power_driver_stats *st;
        nsec_t t = 1000 * NSEC_PER_SEC;
        unsigned w;

        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        st = power_driver_stats(f.drv);
        install(&fl);
        power_driver_set_now(f.drv, t);
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -EPERM);
        assert_true(power_driver_class_disabled(f.drv, POWER_KNOB_CPUFREQ));
        assert_int_equal(st->denied, 1);
        /* Within the backoff: refused without I/O. */
        power_driver_set_now(f.drv, t + 999 * NSEC_PER_MSEC);
        w = fl.writes;
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -EACCES);
        assert_int_equal(fl.writes, w);
        assert_int_equal(st->class_disabled, 1);
        assert_int_equal(st->class_retries, 0);
        /* After 1 s one write goes through; still denied: next in 2 s. */
        power_driver_set_now(f.drv, t + 1 * NSEC_PER_SEC);
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -EPERM);
        assert_int_equal(fl.writes, w + 1);
        assert_int_equal(st->class_retries, 1);
        assert_int_equal(st->denied, 2);
        assert_true(power_driver_class_disabled(f.drv, POWER_KNOB_CPUFREQ));
        power_driver_set_now(f.drv, t + 2999 * NSEC_PER_MSEC);
        assert_int_equal(power_driver_set_perf(f.drv, 1, &req), -EACCES);
        assert_int_equal(fl.writes, w + 1);
        /* The denial is lifted: the next write after the backoff enables the class again. */
        fl.write_errno = 0;
        power_driver_set_now(f.drv, t + 3 * NSEC_PER_SEC);
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), 0);
        assert_false(power_driver_class_disabled(f.drv, POWER_KNOB_CPUFREQ));
        assert_int_equal(st->class_retries, 2);
        assert_int_equal(st->class_reenabled, 1);
        assert_int_equal(power_driver_set_perf(f.drv, 1, &req), 0);
        assert_knob(&f, CPU_REL "/cpufreq/policy1/scaling_max_freq", "1100000");
        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

/*
 * The driver logs at debug only; what the operator must hear of reaches the caller as
 * events: the class disabled on EPERM (once, not for the refusals that follow), enabled
 * again when a write goes through, and an unexpected errno.
 */
static void test_events(void **state)
{
        struct fixture f;
        struct events ev = { 0 };
        struct faults fl = { .match = "policy0/scaling_max_freq", .write_errno = EPERM };
        struct power_perf_request req = { .flags = POWER_PERF_LEVEL, .level_permille = 100 };
        nsec_t t = 1000 * NSEC_PER_SEC;

        fixture_events = &ev;
        fixture_setup(&f, "sysfs-cpufreq/small-2cpu/sys");
        fixture_events = NULL;
        install(&fl);
        power_driver_set_now(f.drv, t);
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -EPERM);
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -EACCES);
        assert_int_equal(ev.n, 1);
        assert_int_equal(ev.type[0], POWER_EVENT_CLASS_DISABLED);
        assert_non_null(strstr(ev.msg[0], "policy0/scaling_max_freq: Operation not permitted; disabling all "
                                          "cpufreq writes, trying one again in 1 s"));
        fl.write_errno = 0;
        power_driver_set_now(f.drv, t + 1 * NSEC_PER_SEC);
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), 0);
        assert_int_equal(ev.n, 2);
        assert_int_equal(ev.type[1], POWER_EVENT_CLASS_ENABLED);
        assert_non_null(strstr(ev.msg[1], "policy0/scaling_max_freq: written; cpufreq writes are allowed again"));
        assert_int_equal(power_event_level(&(struct power_event) { .type = POWER_EVENT_CLASS_ENABLED }),
                         LOG_LEVEL_INFO);
        fl.write_errno = EIO;
        req.level_permille = 1000;
        assert_int_equal(power_driver_set_perf(f.drv, 0, &req), -EIO);
        assert_int_equal(ev.n, 3);
        assert_int_equal(ev.type[2], POWER_EVENT_WRITE_FAILED);
        assert_non_null(strstr(ev.msg[2], "policy0/scaling_max_freq: write of "));
        assert_int_equal(power_event_level(&(struct power_event) { .type = POWER_EVENT_WRITE_FAILED }),
                         LOG_LEVEL_WARNING);
        fl.write_errno = 0;
        assert_restores_pristine(&f);
        fixture_teardown(&f);
}

/*
 * Tests that need the kernel never write the host's knobs: each runs in a
 * private mount namespace of this process (unshare(CLONE_NEWNS), mounts made
 * private) where the knobs' directories are tmpfs copies of the real ones
 * bind-mounted over the real paths, or on a kernel attribute of a network
 * namespace of its own.  host_knobs_open() keeps an fd on every real knob the
 * sysfs driver can write, taken before any mount; host_knobs_check() reads
 * them again through those fds and fails if one changed.  Needs root.
 */
#define HOST_KNOBS_MAX 1024

struct host_knobs {
        unsigned n;
        int fd[HOST_KNOBS_MAX];
        char path[HOST_KNOBS_MAX][128];
        char value[HOST_KNOBS_MAX][64];
};

static const char *const host_knob_globs[] = {
        "/sys/devices/system/cpu/cpu[0-9]*/power/pm_qos_resume_latency_us",
        "/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/disable",
        "/sys/devices/system/cpu/cpufreq/policy[0-9]*/scaling_min_freq",
        "/sys/devices/system/cpu/cpufreq/policy[0-9]*/scaling_max_freq",
        "/sys/devices/system/cpu/cpufreq/policy[0-9]*/energy_performance_preference",
        "/sys/module/kvm/parameters/halt_poll_ns",
        "/sys/class/net/lo/tx_queue_len",
};

static void host_knob_value(int fd, char *buf, size_t size)
{
        ssize_t n = pread(fd, buf, size - 1, 0);

        assert_true(n >= 0);
        buf[n] = 0;
}

static void host_knobs_open(struct host_knobs *h)
{
        h->n = 0;
        for (size_t i = 0; i < sizeof(host_knob_globs) / sizeof(host_knob_globs[0]); i++) {
                glob_t g;

                if (glob(host_knob_globs[i], 0, NULL, &g) != 0)
                        continue;
                for (size_t k = 0; k < g.gl_pathc && h->n < HOST_KNOBS_MAX; k++) {
                        int fd = open(g.gl_pathv[k], O_RDONLY | O_CLOEXEC);

                        if (fd < 0)
                                continue; /* write-only or gone: nothing to compare */
                        h->fd[h->n] = fd;
                        snprintf(h->path[h->n], sizeof(h->path[0]), "%s", g.gl_pathv[k]);
                        host_knob_value(fd, h->value[h->n], sizeof(h->value[0]));
                        h->n++;
                }
                globfree(&g);
        }
        assert_true(h->n >= 2); /* at least the PM QoS of two CPUs */
}

/* Fails, naming the knob, if a host knob no longer holds what it held at open. */
static void host_knobs_check(struct host_knobs *h)
{
        char now[64];
        unsigned changed = 0;

        for (unsigned i = 0; i < h->n; i++) {
                host_knob_value(h->fd[i], now, sizeof(now));
                if (strcmp(now, h->value[i]) != 0) {
                        print_error("host knob %s changed: \"%s\" -> \"%s\"\n", h->path[i], h->value[i], now);
                        changed++;
                }
                close(h->fd[i]);
        }
        h->n = 0;
        assert_int_equal(changed, 0);
}

static int saved_netns_fd = -1;

/* Enter a private mount namespace (and a new network namespace if net). */
static void enter_private_ns(bool net)
{
        if (geteuid() != 0)
                fail_msg("this test needs root (mount and network namespaces; see README, Testing)");
        if (net) {
                saved_netns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
                assert_true(saved_netns_fd >= 0);
        }
        assert_int_equal(unshare(CLONE_NEWNS | (net ? CLONE_NEWNET : 0)), 0);
        assert_int_equal(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
}

/* Back to the network namespace the test started in.  The mount namespace
 * stays private to this process; the caller undoes its own mounts. */
static void leave_private_ns(void)
{
        if (saved_netns_fd < 0)
                return;
        assert_int_equal(setns(saved_netns_fd, CLONE_NEWNET), 0);
        close(saved_netns_fd);
        saved_netns_fd = -1;
}

/*
 * Copy the host directory src (readable regular files and the directory
 * structure; sysfs symlinks are kept as links) to a tmpfs under tmp and
 * bind-mount the copy over src.  Returns false if src does not exist.
 */
static bool bind_copy_over(const char *tmp, const char *src, const char *name)
{
        char copy[512];

        if (access(src, F_OK) != 0)
                return false;
        snprintf(copy, sizeof(copy), "%s/%s", tmp, name);
        /* cp reads sysfs files to EOF (their st_size is a page); unreadable ones are skipped */
        sh("cp -r --no-preserve=ownership '%s' '%s' 2>/dev/null; test -d '%s'", src, copy, copy);
        assert_int_equal(mount(copy, src, NULL, MS_BIND, NULL), 0);
        return true;
}

/*
 * The sysfs driver on the real /sys layout of this host: no cpufreq, PM QoS
 * per CPU, and cpuidle states where the host has a cpuidle driver (haltpoll:
 * poll, halt) -- none where the driver is "none" (a Firecracker guest: idle
 * is the default halt, with no state to disable; the PM QoS latency is then
 * the only idle knob).  Discovery reads the real /sys; every write goes to a
 * copy of devices/system/cpu bind-mounted over the real directory in a
 * private mount namespace, so the host's knobs never change (checked through
 * fds opened before the mounts).  Checks what the driver writes and that restore
 * puts the copy back as it was.  The kernel's own read-back normalisation is
 * test_real_sysfs_clamp's.
 */
static void test_real_sysfs(void **state)
{
        const char *dis1 = "/sys/devices/system/cpu/cpu1/cpuidle/state1/disable";
        const char *qos1 = "/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us";
        struct power_driver_config cfg = { .sysfs_root = "/sys" };
        struct power_idle_constraint ic = { .deepest_state = 0, .latency_us = 0 };
        struct power_sysfs_info info;
        struct power_driver *drv;
        struct journal *j;
        struct restore_stats st;
        struct host_knobs host;
        char sd[] = "/tmp/test-power_driver-real.XXXXXX", tmp[] = "/tmp/test-power_driver-copy.XXXXXX";
        char st1[32], qos[32], buf[32], before1[32], beforeq[32];
        unsigned n_state_knobs = 0;
        bool states;
        glob_t g;
        int r;

        assert_non_null(mkdtemp(sd));
        assert_non_null(mkdtemp(tmp));
        host_knobs_open(&host);
        enter_private_ns(false);
        assert_int_equal(mount("tmpfs", tmp, "tmpfs", 0, "mode=0700"), 0);
        assert_true(bind_copy_over(tmp, "/sys/devices/system/cpu", "cpu"));

        if (access(qos1, W_OK) != 0)
                fail_msg("this test needs a host with PM QoS per CPU (see README, Testing)");
        /* the idle-state knobs the driver must find: every stateK/disable */
        if (glob("/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/disable", 0, NULL, &g) == 0)
                n_state_knobs = (unsigned) g.gl_pathc;
        globfree(&g);
        states = access(dis1, W_OK) == 0;
        print_message("real /sys: %u cpuidle state knobs, cpu1 state1 %s\n", n_state_knobs,
                      states ? "present" : "absent (no cpuidle states)");
        if (states)
                assert_true(read_small_file(dis1, before1, sizeof(before1)) >= 0);
        assert_true(read_small_file(qos1, beforeq, sizeof(beforeq)) >= 0);
        assert_int_equal(journal_open(sd, &j), 0);
        cfg.journal = j;
        assert_int_equal(power_driver_new("sysfs", &cfg, &drv), 0);
        assert_int_equal(power_sysfs_get_info(drv, &info), 0);
        assert_true(info.n_cpus >= 2);
        assert_true(info.n_pm_qos >= 2);
        assert_int_equal(info.n_idle_knobs, n_state_knobs);
        /* no cpufreq: no cap to set */
        assert_int_equal(power_driver_set_perf(drv, 1, &(struct power_perf_request) { .flags = POWER_PERF_LEVEL }),
                         -EOPNOTSUPP);

        /* poll only on CPU 1 (where there are states), no wake latency tolerated ("n/a") */
        r = power_driver_enter_idle(drv, 1, &ic);
        assert_int_equal(r, 0);
        if (states) {
                assert_true(read_small_file(dis1, st1, sizeof(st1)) >= 0);
                assert_string_equal(st1, "1");
        }
        assert_true(read_small_file(qos1, qos, sizeof(qos)) >= 0);
        assert_string_equal(qos, "n/a");
        /* lift the state limit, a 25 us latency limit instead */
        ic = (struct power_idle_constraint) { .deepest_state = -1, .latency_us = 25 };
        assert_int_equal(power_driver_enter_idle(drv, 1, &ic), 0);
        assert_true(read_small_file(qos1, qos, sizeof(qos)) >= 0);
        assert_string_equal(qos, "25");
        if (states) {
                assert_true(read_small_file(dis1, st1, sizeof(st1)) >= 0);
                assert_string_equal(st1, before1);
        }
        power_driver_free(drv);
        journal_free(j);

        assert_int_equal(journal_restore_all(sd, "/sys", NULL, &st), 0);
        assert_int_equal(st.failed + st.foreign, 0);
        assert_true(st.restored >= 1);
        if (states) {
                assert_true(read_small_file(dis1, buf, sizeof(buf)) >= 0);
                assert_string_equal(buf, before1);
        }
        assert_true(read_small_file(qos1, buf, sizeof(buf)) >= 0);
        assert_string_equal(buf, beforeq);

        assert_int_equal(umount2("/sys/devices/system/cpu", MNT_DETACH), 0);
        assert_int_equal(umount2(tmp, MNT_DETACH), 0);
        leave_private_ns();
        host_knobs_check(&host);
        sh("rm -rf '%s' '%s'", sd, tmp);
}

/*
 * The driver's write path on a knob whose kernel store normalises, and
 * restore of it: the journal must keep what the kernel holds, not what was
 * written.  The knob is a real sysfs attribute that no host setting depends
 * on: tx_queue_len of the loopback device of a network namespace made for
 * the test, in a sysfs mounted in a private mount namespace.  Its store
 * parses like PM QoS's (kstrtoul, base 0): "0x19" reads back "25".  The
 * host's knobs are checked unchanged afterwards.
 */
static void test_real_sysfs_clamp(void **state)
{
        struct journal *j;
        struct restore_stats st;
        struct host_knobs host;
        char sd[] = "/tmp/test-power_driver-real.XXXXXX", root[] = "/tmp/test-power_driver-sysfs.XXXXXX";
        char orig[32], cur[32], buf[32];
        const char *rel = "class/net/lo/tx_queue_len";

        assert_non_null(mkdtemp(sd));
        assert_non_null(mkdtemp(root));
        host_knobs_open(&host);
        enter_private_ns(true);
        assert_int_equal(mount("sysfs", root, "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), 0);

        assert_int_equal(journal_open(sd, &j), 0);
        assert_true(power_driver_sysfs_knob_read(root, rel, orig, sizeof(orig)) >= 0);
        assert_string_not_equal(orig, "25\n");
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_SYSFS, rel, orig, "0x19"), 0);
        assert_int_equal(power_driver_sysfs_knob_write(root, rel, "0x19\n"), 0);
        assert_true(power_driver_sysfs_knob_read(root, rel, cur, sizeof(cur)) >= 0);
        assert_string_equal(cur, "25\n");
        assert_int_equal(journal_note_actual(j, JOURNAL_KIND_SYSFS, rel, cur), 0);
        journal_free(j);
        assert_int_equal(journal_restore_all(sd, root, NULL, &st), 0);
        assert_int_equal(st.restored, 1);
        assert_true(power_driver_sysfs_knob_read(root, rel, buf, sizeof(buf)) >= 0);
        assert_string_equal(buf, orig);

        assert_int_equal(umount2(root, MNT_DETACH), 0);
        leave_private_ns();
        host_knobs_check(&host);
        sh("rm -rf '%s' '%s'", sd, root);
}

/* ---- sim ---- */

static void hook(void *ud, struct power_driver *d, unsigned cpu)
{
        ((unsigned *) ud)[cpu]++;
}

static void test_sim(void **state)
{
        unsigned calls[4] = { 0 };
        struct power_driver_config cfg = { .n_cpus = 4, .sim_max_khz = 2000000, .sim_hook = hook, .sim_userdata = calls };
        struct power_driver *d;
        struct power_perf_request req = { .flags = POWER_PERF_MAX_KHZ | POWER_PERF_EPP, .max_khz = 1000000, .epp = "power" };
        struct power_idle_constraint ic = { .deepest_state = 2, .latency_us = 50 };

        assert_int_equal(power_driver_new("sim", &cfg, &d), 0);
        assert_int_equal(power_sim_cpu(d, 1)->level_permille, 1000);
        assert_int_equal(power_driver_set_perf(d, 1, &req), 0);
        assert_int_equal(power_sim_cpu(d, 1)->level_permille, 500);
        assert_string_equal(power_sim_cpu(d, 1)->epp, "power");
        /* a floor above the level raises the level to it */
        req = (struct power_perf_request) { .flags = POWER_PERF_LEVEL | POWER_PERF_MIN_KHZ, .level_permille = 400,
                                             .min_khz = 1200000 };
        assert_int_equal(power_driver_set_perf(d, 2, &req), 0);
        assert_int_equal(power_sim_cpu(d, 2)->min_permille, 600);
        assert_int_equal(power_sim_cpu(d, 2)->level_permille, 600);
        assert_int_equal(power_driver_late_callback(d, 1100), 0); /* nothing deferred */
        assert_int_equal(power_driver_enter_idle(d, 3, &ic), 0);
        assert_int_equal(power_sim_cpu(d, 3)->idle.deepest_state, 2);
        assert_int_equal(power_sim_cpu(d, 3)->idle.latency_us, 50);
        assert_int_equal(calls[0], 0);
        assert_int_equal(calls[1], 1);
        assert_int_equal(calls[2], 1);
        assert_int_equal(calls[3], 1);
        assert_int_equal(power_driver_enter_idle(d, 4, &ic), -ENOENT);
        power_driver_free(d);
        cfg.n_cpus = 0;
        assert_int_equal(power_driver_new("sim", &cfg, &d), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_validate),
                cmocka_unit_test(test_xeon_perf_epp),
                cmocka_unit_test(test_epyc_available_frequencies),
                cmocka_unit_test(test_small_qos_halt_poll),
                cmocka_unit_test(test_errno_einval),
                cmocka_unit_test(test_errno_ebusy_backoff),
                cmocka_unit_test(test_errno_eacces),
                cmocka_unit_test(test_errno_enoent),
                cmocka_unit_test(test_clamped),
                cmocka_unit_test(test_clamp_killed_before_readback),
                cmocka_unit_test(test_readback_not_journaled),
                cmocka_unit_test(test_other_errno),
                cmocka_unit_test(test_journal_failure_blocks_write),
                cmocka_unit_test(test_foreign_change),
                cmocka_unit_test(test_failed_write_verified),
                cmocka_unit_test(test_ownership_from_journal),
                cmocka_unit_test(test_eperm_class_retry),
                cmocka_unit_test(test_events),
                cmocka_unit_test(test_real_sysfs),
                cmocka_unit_test(test_real_sysfs_clamp),
                cmocka_unit_test(test_sim),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
