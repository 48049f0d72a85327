/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Actuator: backoff arithmetic, starttime parsing (comm with spaces and
 * parentheses), a real thread of this process pinned and restored through
 * the journal, tid-reuse detection via starttime, a mask the kernel narrows
 * (-ERANGE), a thread that exited, someone else's change left alone, a
 * read-back the journal cannot record (undone), the journal key of a libvirt
 * pin telling runs of a domain apart (libvirt's test driver), and libvirt live
 * vCPU pinning of a real (TCG, diskless) domain with restore.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>
#include <libvirt/libvirt.h>

#include "actuator.h"
#include "journal.h"
#include "journal_builtin.h"
#include "retry.h"
#include "util.h"

static char tmpdir[256];
static char statedir[300];

static int setup(void **state)
{
        strcpy(tmpdir, "/tmp/test-actuator.XXXXXX");
        if (!mkdtemp(tmpdir))
                return -1;
        snprintf(statedir, sizeof(statedir), "%s/state", tmpdir);
        return 0;
}

static int teardown(void **state)
{
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        return system(cmd) == 0 ? 0 : -1;
}

static void test_backoff(void **state)
{
        const struct backoff b = { 10 * NSEC_PER_MSEC, 100 * NSEC_PER_MSEC, 5 };
        struct retry_state s = { 0 };
        struct retry_counters c = { 0 };
        static const nsec_t want[] = { 10, 20, 40, 80, 100 };
        nsec_t now = 1000 * NSEC_PER_MSEC;

        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                assert_true(retry_schedule(&s, &b, now, &c));
                assert_int_equal(s.next_ns - now, want[i] * NSEC_PER_MSEC);
                assert_false(retry_due(&s, s.next_ns - 1));
                assert_true(retry_due(&s, s.next_ns));
                now = s.next_ns;
        }
        assert_false(retry_schedule(&s, &b, now, &c));
        assert_true(s.gave_up);
        assert_false(retry_due(&s, now + NSEC_PER_SEC));
        assert_int_equal(c.scheduled, 5);
        assert_int_equal(c.gave_up, 1);
        retry_reset(&s);
        assert_true(retry_schedule(&s, &b, 0, &c));
        assert_int_equal(s.next_ns, 10 * NSEC_PER_MSEC);
}

static void test_cpumap(void **state)
{
        unsigned char map[3];
        cpuset_t s, t;

        cpuset_parse_list("0,3,8-9,17", &s);
        assert_int_equal(actuator_cpuset_to_cpumap(&s, 18, map, sizeof(map)), 0);
        assert_int_equal(map[0], 0x09);
        assert_int_equal(map[1], 0x03);
        assert_int_equal(map[2], 0x02);
        assert_int_equal(actuator_cpumap_to_cpuset(map, sizeof(map), &t), 0);
        assert_true(cpuset_equal(&s, &t));
        assert_int_equal(actuator_cpuset_to_cpumap(&s, 17, map, sizeof(map)), -EINVAL); /* CPU 17 absent */
        assert_int_equal(actuator_cpuset_to_cpumap(&s, 18, map, 2), -ENOBUFS);
}

/* A thread that waits until told to exit. */
struct worker {
        pthread_t th;
        pid_t tid;
        pthread_mutex_t m;
        pthread_cond_t c;
        bool started, stop;
};

static void *worker_main(void *p)
{
        struct worker *w = p;

        pthread_mutex_lock(&w->m);
        w->tid = (pid_t) syscall(SYS_gettid);
        w->started = true;
        pthread_cond_broadcast(&w->c);
        while (!w->stop)
                pthread_cond_wait(&w->c, &w->m);
        pthread_mutex_unlock(&w->m);
        return NULL;
}

static void worker_start(struct worker *w)
{
        memset(w, 0, sizeof(*w));
        pthread_mutex_init(&w->m, NULL);
        pthread_cond_init(&w->c, NULL);
        assert_int_equal(pthread_create(&w->th, NULL, worker_main, w), 0);
        pthread_mutex_lock(&w->m);
        while (!w->started)
                pthread_cond_wait(&w->c, &w->m);
        pthread_mutex_unlock(&w->m);
}

static void worker_stop(struct worker *w)
{
        pthread_mutex_lock(&w->m);
        w->stop = true;
        pthread_cond_broadcast(&w->c);
        pthread_mutex_unlock(&w->m);
        assert_int_equal(pthread_join(w->th, NULL), 0);
        /*
         * pthread_join() returns when the kernel clears the tid (at mm
         * release), a little before it releases the task: until then
         * /proc/self/task/<tid> is still there.  The tests that follow
         * expect an exited thread to be gone, so wait for that (up to 5 s).
         */
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/task/%d", (int) w->tid);
        for (int i = 0; i < 5000 && access(path, F_OK) == 0; i++)
                usleep(1000);
        if (access(path, F_OK) == 0)
                fail_msg("thread %d still in /proc/self/task 5 s after pthread_join()", (int) w->tid);
}

static void affinity_of(pid_t tid, char *buf, size_t size)
{
        cpu_set_t m;
        cpuset_t s;

        CPU_ZERO(&m);
        assert_int_equal(sched_getaffinity(tid, sizeof(m), &m), 0);
        cpuset_zero(&s);
        for (unsigned c = 0; c < CPU_SETSIZE; c++)
                if (CPU_ISSET(c, &m))
                        cpuset_set(&s, c);
        assert_true(cpuset_format_list(&s, buf, size) >= 0);
}

static void set_affinity_list(pid_t tid, const char *list)
{
        cpu_set_t m;
        cpuset_t s;

        assert_int_equal(cpuset_parse_list(list, &s), 0);
        CPU_ZERO(&m);
        CPUSET_FOREACH(c, &s)
                CPU_SET((unsigned) c, &m);
        assert_int_equal(sched_setaffinity(tid, sizeof(m), &m), 0);
}

static void test_starttime(void **state)
{
        struct worker w;
        uint64_t st_main, st_w, st_w2;

        assert_int_equal(actuator_thread_starttime(getpid(), getpid(), &st_main), 0);
        assert_true(st_main > 0);
        worker_start(&w);
        assert_int_equal(actuator_thread_starttime(getpid(), w.tid, &st_w), 0);
        assert_true(st_w >= st_main);
        /* comm with spaces and parentheses must not shift the fields */
        assert_int_equal(pthread_setname_np(w.th, "a) b (c"), 0);
        assert_int_equal(actuator_thread_starttime(getpid(), w.tid, &st_w2), 0);
        assert_int_equal(st_w2, st_w);
        pid_t tid = w.tid;
        worker_stop(&w);
        assert_int_equal(actuator_thread_starttime(getpid(), tid, &st_w2), -ESRCH);
        assert_int_equal(actuator_thread_starttime(getpid(), 0x3fffffff, &st_w2), -ESRCH);

        /* A fake procfs root: comm "x) 1 2 (y" and field 22 = 987654 */
        char cmd[2048];
        snprintf(cmd, sizeof(cmd),
                 "mkdir -p '%s/proc/10/task/11' && printf '11 (x) 1 2 (y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 20 21\\n' "
                 "> '%s/proc/10/task/11/stat' && "
                 "mkdir -p '%s/proc/10/task/12' && printf '12 (z) S 1\\n' > '%s/proc/10/task/12/stat'",
                 tmpdir, tmpdir, tmpdir, tmpdir);
        assert_int_equal(system(cmd), 0);
        snprintf(cmd, sizeof(cmd), "%s/proc", tmpdir);
        assert_int_equal(actuator_set_proc_root(cmd), 0);
        assert_int_equal(actuator_thread_starttime(10, 11, &st_w2), 0);
        assert_int_equal(st_w2, 987654);
        assert_int_equal(actuator_thread_starttime(10, 12, &st_w2), -EINVAL); /* truncated line */
        assert_int_equal(actuator_thread_starttime(10, 13, &st_w2), -ESRCH);
        assert_int_equal(actuator_set_proc_root(NULL), 0);
        assert_int_equal(actuator_thread_starttime(getpid(), getpid(), &st_w2), 0);
        assert_int_equal(st_w2, st_main);
}

static void test_pin_and_restore(void **state)
{
        struct journal *j;
        struct worker w;
        struct restore_stats st;
        char buf[64], key[96];
        cpuset_t one;
        uint64_t stt;

        worker_start(&w);
        set_affinity_list(w.tid, "0-1");
        assert_int_equal(actuator_thread_starttime(getpid(), w.tid, &stt), 0);
        assert_int_equal(journal_open(statedir, &j), 0);
        cpuset_parse_list("1", &one);
        assert_int_equal(actuator_pin_thread(j, getpid(), w.tid, stt, &one), 0);
        affinity_of(w.tid, buf, sizeof(buf));
        assert_string_equal(buf, "1");
        actuator_thread_key(getpid(), w.tid, stt, key, sizeof(key));
        assert_string_equal(journal_original(j, JOURNAL_KIND_AFFINITY, key), "0-1");
        /* Again: already so, nothing to do */
        assert_int_equal(actuator_pin_thread(j, getpid(), w.tid, 0, &one), 0);
        /* Wrong starttime (what a reused tid looks like): refused, not touched */
        cpuset_t zero;
        cpuset_parse_list("0", &zero);
        assert_int_equal(actuator_pin_thread(j, getpid(), w.tid, stt + 1, &zero), -ESRCH);
        affinity_of(w.tid, buf, sizeof(buf));
        assert_string_equal(buf, "1");
        assert_int_equal(journal_n_entries(j), 1);
        journal_free(j);

        /* vmmpowerd --restore */
        assert_int_equal(journal_restore_all(statedir, NULL, NULL, &st), 0);
        assert_int_equal(st.restored, 1);
        affinity_of(w.tid, buf, sizeof(buf));
        assert_string_equal(buf, "0-1");
        worker_stop(&w);
}

static void test_tid_reuse_and_exit(void **state)
{
        struct journal *j;
        struct worker w, gone;
        struct restore_stats st;
        char buf[64], key[96];
        uint64_t stt;
        cpuset_t one;

        worker_start(&w);
        set_affinity_list(w.tid, "0-1");
        assert_int_equal(actuator_thread_starttime(getpid(), w.tid, &stt), 0);
        assert_int_equal(journal_open(statedir, &j), 0);
        /*
         * An entry for this tid but another starttime: the thread we pinned
         * exited and the tid was reused by this one.  It holds the value we
         * "wrote", so only the starttime tells them apart.
         */
        set_affinity_list(w.tid, "0");
        actuator_thread_key(getpid(), w.tid, stt + 7, key, sizeof(key));
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_AFFINITY, key, "0-1", "0"), 0);

        /* A pinned thread that then exits. */
        worker_start(&gone);
        set_affinity_list(gone.tid, "0-1");
        cpuset_parse_list("1", &one);
        assert_int_equal(actuator_pin_thread(j, getpid(), gone.tid, 0, &one), 0);
        worker_stop(&gone);
        journal_free(j);

        assert_int_equal(journal_restore_all(statedir, NULL, NULL, &st), 0);
        assert_int_equal(st.gone, 2);
        assert_int_equal(st.restored, 0);
        affinity_of(w.tid, buf, sizeof(buf));
        assert_string_equal(buf, "0"); /* not "restored" into a stranger */
        worker_stop(&w);
}

static void test_narrowed_and_foreign(void **state)
{
        struct journal *j;
        struct worker w;
        struct restore_stats st;
        char buf[64];
        cpuset_t want;
        long ncpu = sysconf(_SC_NPROCESSORS_CONF);

        assert_true(ncpu >= 2);
        worker_start(&w);
        set_affinity_list(w.tid, "0-1");
        assert_int_equal(journal_open(statedir, &j), 0);
        /* CPU 1000 does not exist: the kernel keeps {1}; reported, not success */
        cpuset_parse_list("1,1000", &want);
        assert_int_equal(actuator_pin_thread(j, getpid(), w.tid, 0, &want), -ERANGE);
        affinity_of(w.tid, buf, sizeof(buf));
        assert_string_equal(buf, "1");
        journal_free(j);
        /* The narrowed mask is known as ours: restore puts 0-1 back. */
        assert_int_equal(journal_restore_all(statedir, NULL, NULL, &st), 0);
        assert_int_equal(st.restored, 1);
        affinity_of(w.tid, buf, sizeof(buf));
        assert_string_equal(buf, "0-1");

        /* Someone else re-pins after us: left alone. */
        assert_int_equal(journal_open(statedir, &j), 0);
        cpuset_parse_list("1", &want);
        assert_int_equal(actuator_pin_thread(j, getpid(), w.tid, 0, &want), 0);
        journal_free(j);
        set_affinity_list(w.tid, "0");
        assert_int_equal(journal_restore_all(statedir, NULL, NULL, &st), 0);
        assert_int_equal(st.foreign, 1);
        affinity_of(w.tid, buf, sizeof(buf));
        assert_string_equal(buf, "0");
        worker_stop(&w);
}

/*
 * The mask read back cannot be journaled (the journal's file system is full:
 * here RLIMIT_FSIZE lets the record before the write in, not the one after):
 * the thread is put back to the mask it had, and the journal's error returned;
 * it used to keep a narrowed mask the journal never recorded.
 */
/*
 * A pin the kernel refuses (every CPU of the mask absent: EINVAL) leaves a
 * verified record of the mask the thread kept; unverified, restore would have
 * taken any later mask as ours and put the original over another tool's.
 */
static void test_failed_pin_verified(void **state)
{
        struct restore_stats st;
        struct journal *j;
        struct worker w;
        char key[96], buf[64];
        cpuset_t want;
        uint64_t stt;

        worker_start(&w);
        set_affinity_list(w.tid, "0-1");
        assert_int_equal(actuator_thread_starttime(getpid(), w.tid, &stt), 0);
        actuator_thread_key(getpid(), w.tid, stt, key, sizeof(key));
        assert_int_equal(journal_open(statedir, &j), 0);
        cpuset_parse_list("1000", &want); /* no such CPU */
        assert_int_equal(actuator_pin_thread(j, getpid(), w.tid, stt, &want), -EINVAL);
        affinity_of(w.tid, buf, sizeof(buf));
        assert_string_equal(buf, "0-1");
        assert_false(journal_unverified(j, JOURNAL_KIND_AFFINITY, key));
        /* another tool pins it afterwards: left to it at restore */
        set_affinity_list(w.tid, "1");
        journal_free(j);
        assert_int_equal(journal_restore_all(statedir, NULL, NULL, &st), 0);
        affinity_of(w.tid, buf, sizeof(buf));
        assert_string_equal(buf, "1");
        assert_int_equal(st.restored, 0);
        worker_stop(&w);
}

static void test_readback_not_journaled(void **state)
{
        char key[96], payload[256], buf[64];
        struct restore_stats st;
        struct rlimit saved, rl;
        struct journal *j;
        struct worker w;
        struct stat sb;
        cpuset_t want;
        uint64_t stt;
        size_t len;
        char jp[400];

        worker_start(&w);
        set_affinity_list(w.tid, "0-1");
        assert_int_equal(actuator_thread_starttime(getpid(), w.tid, &stt), 0);
        assert_int_equal(journal_open(statedir, &j), 0);
        /* the journal file exists (its header and one record) */
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_SYSFS, "x", "1", "2"), 0);
        snprintf(jp, sizeof(jp), "%s/journal", statedir);
        assert_int_equal(stat(jp, &sb), 0);
        /* room for exactly the record made before the write */
        actuator_thread_key(getpid(), w.tid, stt, key, sizeof(key));
        snprintf(payload, sizeof(payload), "U affinity %s 0-1 0-1 1,1000", key);
        len = (size_t) snprintf(buf, sizeof(buf), "%zu", strlen(payload)) + 1 + 8 + 1 + strlen(payload) + 1;
        assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
        rl = saved;
        rl.rlim_cur = (rlim_t) sb.st_size + len;
        signal(SIGXFSZ, SIG_IGN);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
        cpuset_parse_list("1,1000", &want); /* narrowed to 1 by the kernel */
        int r = actuator_pin_thread(j, getpid(), w.tid, stt, &want);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &saved), 0);
        signal(SIGXFSZ, SIG_DFL);
        assert_int_equal(r, -EFBIG);
        affinity_of(w.tid, buf, sizeof(buf));
        assert_string_equal(buf, "0-1");
        assert_true(journal_unverified(j, JOURNAL_KIND_AFFINITY, key));
        assert_int_equal(journal_error_count(j), 1);
        assert_int_equal(journal_forget(j, JOURNAL_KIND_SYSFS, "x"), 0);
        journal_free(j);
        assert_int_equal(journal_restore_all(statedir, NULL, NULL, &st), 0);
        assert_int_equal(st.unchanged, 1);
        affinity_of(w.tid, buf, sizeof(buf));
        assert_string_equal(buf, "0-1");
        worker_stop(&w);
}

/* ---- libvirt pins: the run of a domain (libvirt's test driver, in this process, no VM) ---- */

static void emulator_pin(virDomainPtr dom, char *buf, size_t size)
{
        int n = virNodeGetCPUMap(virDomainGetConnect(dom), NULL, NULL, 0);
        size_t maplen = (size_t) VIR_CPU_MAPLEN(n);
        unsigned char map[64] = { 0 };
        cpuset_t s;

        assert_true(n > 0 && maplen <= sizeof(map));
        assert_int_equal(virDomainGetEmulatorPinInfo(dom, map, (int) maplen, VIR_DOMAIN_AFFECT_LIVE), 1);
        assert_int_equal(actuator_cpumap_to_cpuset(map, maplen, &s), 0);
        assert_true(cpuset_format_list(&s, buf, size) >= 0);
}

static void set_emulator_pin(virDomainPtr dom, const char *list)
{
        int n = virNodeGetCPUMap(virDomainGetConnect(dom), NULL, NULL, 0);
        size_t maplen = (size_t) VIR_CPU_MAPLEN(n);
        unsigned char map[64] = { 0 };
        cpuset_t s;

        assert_int_equal(cpuset_parse_list(list, &s), 0);
        assert_int_equal(actuator_cpuset_to_cpumap(&s, (unsigned) n, map, maplen), 0);
        assert_int_equal(virDomainPinEmulator(dom, map, (int) maplen, VIR_DOMAIN_AFFECT_LIVE), 0);
}

/*
 * A domain pinned, shut down, its definition changed (pinning 0-7 -> 0-3) and
 * started again, pinned again: the journal key carries the domain id of the
 * run, so the new run's entry has its own original (0-3) and restore puts that
 * back, not the previous run's 0-7 over the new definition.  A pin of the
 * previous run is found gone: by the actuator (its entry forgotten) and by
 * restore (dropped).
 */
static void test_vcpupin_run_identity(void **state)
{
        char uuid[VIR_UUID_STRING_BUFLEN], key1[96], key2[96], buf[64];
        struct restore_stats st;
        virConnectPtr conn;
        virDomainPtr dom;
        struct journal *j;
        int id1 = 0, id2 = 0;
        cpuset_t one, two;

        conn = virConnectOpen("test:///default");
        assert_non_null(conn);
        dom = virDomainLookupByName(conn, "test");
        assert_non_null(dom);
        assert_int_equal(virDomainGetUUIDString(dom, uuid), 0);
        set_emulator_pin(dom, "0-7");
        cpuset_parse_list("1", &one);
        cpuset_parse_list("2", &two);

        assert_int_equal(journal_open(statedir, &j), 0);
        assert_int_equal(actuator_pin_vcpu(j, conn, uuid, ACTUATOR_EMULATOR, &id1, &one), 0);
        assert_int_equal(id1, (int) virDomainGetID(dom));
        emulator_pin(dom, buf, sizeof(buf));
        assert_string_equal(buf, "1");

        /* shut down, definition changed, started again: libvirt applies the new pinning */
        assert_int_equal(virDomainDestroy(dom), 0);
        assert_int_equal(virDomainCreate(dom), 0);
        set_emulator_pin(dom, "0-3");
        assert_int_equal(actuator_pin_vcpu(j, conn, uuid, ACTUATOR_EMULATOR, &id2, &two), 0);
        assert_int_not_equal(id2, id1);
        assert_int_equal(actuator_vcpu_key(uuid, id1, ACTUATOR_EMULATOR, key1, sizeof(key1)), 0);
        assert_int_equal(actuator_vcpu_key(uuid, id2, ACTUATOR_EMULATOR, key2, sizeof(key2)), 0);
        assert_string_equal(journal_original(j, JOURNAL_KIND_VCPUPIN, key2), "0-3");
        /* the previous run, asked for again: gone, its entry with it */
        assert_non_null(journal_original(j, JOURNAL_KIND_VCPUPIN, key1));
        assert_int_equal(actuator_pin_vcpu(j, conn, uuid, ACTUATOR_EMULATOR, &id1, &one), -ENOENT);
        assert_null(journal_original(j, JOURNAL_KIND_VCPUPIN, key1));
        emulator_pin(dom, buf, sizeof(buf));
        assert_string_equal(buf, "2");
        /* an entry of a previous run left by a crash */
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_VCPUPIN, key1, "0-7", "1"), 0);
        journal_free(j);

        assert_int_equal(journal_restore_all(statedir, NULL, conn, &st), 0);
        assert_int_equal(st.restored, 1);
        assert_int_equal(st.gone, 1);
        emulator_pin(dom, buf, sizeof(buf));
        assert_string_equal(buf, "0-3");

        /* released: put back and forgotten */
        assert_int_equal(journal_open(statedir, &j), 0);
        id2 = 0;
        assert_int_equal(actuator_pin_vcpu(j, conn, uuid, ACTUATOR_EMULATOR, &id2, &one), 0);
        assert_int_equal(actuator_release_vcpu(j, conn, uuid, ACTUATOR_EMULATOR, id2), 1);
        emulator_pin(dom, buf, sizeof(buf));
        assert_string_equal(buf, "0-3");
        assert_int_equal(journal_n_entries(j), 0);
        assert_int_equal(actuator_release_vcpu(j, conn, uuid, ACTUATOR_EMULATOR, id2), 0);
        journal_free(j);
        virDomainFree(dom);
        virConnectClose(conn);
}

/* ---- libvirt live pinning of a real domain ---- */

static const char domain_xml[] =
        "<domain type='qemu'>"
        "<name>%s</name>"
        "<memory unit='MiB'>64</memory>"
        "<vcpu placement='static'>2</vcpu>"
        "<os><type arch='x86_64' machine='pc'>hvm</type></os>"
        "<features><acpi/></features>"
        "<on_poweroff>destroy</on_poweroff><on_reboot>destroy</on_reboot><on_crash>destroy</on_crash>"
        "<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>"
        "<graphics type='vnc' autoport='yes' listen='127.0.0.1'/></devices>"
        "</domain>";

static void pin_info(virDomainPtr dom, unsigned vcpu, unsigned flags, char *buf, size_t size)
{
        int n = virNodeGetCPUMap(virDomainGetConnect(dom), NULL, NULL, 0);
        size_t maplen = (size_t) VIR_CPU_MAPLEN(n);
        unsigned char maps[64] = { 0 };
        cpuset_t s;

        assert_true(n > 0 && maplen * 2 <= sizeof(maps));
        assert_int_equal(virDomainGetVcpuPinInfo(dom, 2, maps, (int) maplen, flags), 2);
        assert_int_equal(actuator_cpumap_to_cpuset(VIR_GET_CPUMAP(maps, maplen, vcpu), maplen, &s), 0);
        assert_true(cpuset_format_list(&s, buf, size) >= 0);
}

static void test_libvirt_live_pin(void **state)
{
        char name[64], xml[1024], uuid[VIR_UUID_STRING_BUFLEN], buf[64], key[96];
        virConnectPtr conn;
        virDomainPtr dom;
        struct journal *j;
        struct restore_stats st;
        int dom_id = 0;
        cpuset_t one;

        conn = virConnectOpen("qemu:///system");
        if (!conn)
                fail_msg("libvirtd is needed (qemu:///system); see DESIGN.md section 6 to start it");
        snprintf(name, sizeof(name), "vmmpower-test-actuator-%d", (int) getpid());
        snprintf(xml, sizeof(xml), domain_xml, name);
        dom = virDomainDefineXML(conn, xml);
        assert_non_null(dom);
        assert_int_equal(virDomainCreate(dom), 0);
        assert_int_equal(virDomainGetUUIDString(dom, uuid), 0);

        pin_info(dom, 1, VIR_DOMAIN_AFFECT_LIVE, buf, sizeof(buf));
        char orig[64];
        snprintf(orig, sizeof(orig), "%s", buf);
        assert_int_equal(journal_open(statedir, &j), 0);
        cpuset_parse_list("1", &one);
        assert_int_equal(actuator_pin_vcpu(j, conn, uuid, 1, &dom_id, &one), 0);
        pin_info(dom, 1, VIR_DOMAIN_AFFECT_LIVE, buf, sizeof(buf));
        assert_string_equal(buf, "1");
        /* the persistent definition is untouched */
        pin_info(dom, 1, VIR_DOMAIN_AFFECT_CONFIG, buf, sizeof(buf));
        assert_string_equal(buf, orig);
        assert_int_equal(dom_id, virDomainGetID(dom));
        assert_int_equal(actuator_vcpu_key(uuid, dom_id, 1, key, sizeof(key)), 0);
        assert_string_equal(journal_original(j, JOURNAL_KIND_VCPUPIN, key), orig);
        /* a vCPU the domain does not have */
        assert_int_equal(actuator_pin_vcpu(j, conn, uuid, 5, NULL, &one), -ENOENT);
        journal_free(j);

        /* Without a connection the entry is kept ... */
        assert_int_equal(journal_restore_all(statedir, NULL, NULL, &st), 1);
        assert_int_equal(st.skipped, 1);
        pin_info(dom, 1, VIR_DOMAIN_AFFECT_LIVE, buf, sizeof(buf));
        assert_string_equal(buf, "1");
        /* ... and restored with one. */
        assert_int_equal(journal_restore_all(statedir, NULL, conn, &st), 0);
        assert_int_equal(st.restored, 1);
        pin_info(dom, 1, VIR_DOMAIN_AFFECT_LIVE, buf, sizeof(buf));
        assert_string_equal(buf, orig);

        /* Pinned, then the domain stops: its live pinning is gone with it. */
        assert_int_equal(journal_open(statedir, &j), 0);
        assert_int_equal(actuator_pin_vcpu(j, conn, uuid, 0, NULL, &one), 0);
        journal_free(j);
        assert_int_equal(virDomainDestroy(dom), 0);
        assert_int_equal(journal_restore_all(statedir, NULL, conn, &st), 0);
        assert_int_equal(st.gone, 1);

        virDomainUndefine(dom);
        virDomainFree(dom);
        virConnectClose(conn);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_backoff),
                cmocka_unit_test(test_cpumap),
                cmocka_unit_test(test_starttime),
                cmocka_unit_test(test_pin_and_restore),
                cmocka_unit_test(test_tid_reuse_and_exit),
                cmocka_unit_test(test_narrowed_and_foreign),
                cmocka_unit_test(test_readback_not_journaled),
                cmocka_unit_test(test_failed_pin_verified),
                cmocka_unit_test(test_vcpupin_run_identity),
                cmocka_unit_test(test_libvirt_live_pin),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
