/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Tracker: decay math; arithmetic on a fake procfs in a temp dir whose
 * schedstat files the test rewrites in place between samples (the tracker's
 * kept fds see the new content); merging of sources; real threads of this
 * test for ESRCH (a thread that exits) and for busy/idle utilisation, with
 * both samplers (pread() on kept fds, BPF task iterator: the BPF one must
 * load on the CI machine, so these fail rather than skip without it), and
 * the two samplers reading identical counters of stopped threads; thread
 * identity: stale source lists, vCPU thread names, a tid taken by another
 * thread of the process (clone3() set_tid, root), merging by vCPU index.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>

#include "vcpu_track.h"

#define EPS 1e-12
#define HALF_LIFE (4 * NSEC_PER_SEC)

static char root[64];

static void test_decay_alpha(void **state)
{
        assert_true(fabs(tracker_decay_alpha(HALF_LIFE, HALF_LIFE) - 0.5) < EPS);
        assert_true(fabs(tracker_decay_alpha(2 * HALF_LIFE, HALF_LIFE) - 0.75) < EPS);
        assert_true(fabs(tracker_decay_alpha(NSEC_PER_SEC, HALF_LIFE) - (1.0 - pow(2.0, -0.25))) < EPS);
        assert_true(tracker_decay_alpha(0, HALF_LIFE) == 0.0);
        assert_true(tracker_decay_alpha(-5, HALF_LIFE) == 0.0);
        /* two periods of dt weigh like one of 2*dt */
        double a1 = tracker_decay_alpha(700 * NSEC_PER_MSEC, HALF_LIFE);
        double a2 = tracker_decay_alpha(1400 * NSEC_PER_MSEC, HALF_LIFE);
        assert_true(fabs((1 - a1) * (1 - a1) - (1 - a2)) < EPS);
        /* monotonic, in (0, 1) */
        assert_true(a1 > 0 && a1 < a2 && a2 < 1);
}

/* ---- fake procfs ---- */

static void write_schedstat(int pid, int tid, uint64_t run, uint64_t wait, uint64_t slices)
{
        char p[PATH_MAX], buf[96];
        int fd, n;

        snprintf(p, sizeof(p), "%s/%d/task/%d/schedstat", root, pid, tid);
        n = snprintf(buf, sizeof(buf), "%llu %llu %llu\n", (unsigned long long) run, (unsigned long long) wait,
                     (unsigned long long) slices);
        /* in place (same inode), so that a kept fd sees the new content */
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, buf, (size_t) n), n);
        assert_int_equal(close(fd), 0);
}

static void make_thread(int pid, int tid)
{
        char p[PATH_MAX];

        snprintf(p, sizeof(p), "%s/%d", root, pid);
        (void) mkdir(p, 0755);
        snprintf(p, sizeof(p), "%s/%d/task", root, pid);
        (void) mkdir(p, 0755);
        snprintf(p, sizeof(p), "%s/%d/task/%d", root, pid, tid);
        assert_int_equal(mkdir(p, 0755), 0);
        write_schedstat(pid, tid, 0, 0, 0);
}

/* The thread's name, as <procfs>/<pid>/task/<tid>/comm shows it (a fixture without one is not checked). */
static void write_comm(int pid, int tid, const char *comm)
{
        char p[PATH_MAX];
        FILE *f;

        snprintf(p, sizeof(p), "%s/%d/task/%d/comm", root, pid, tid);
        f = fopen(p, "we");
        assert_non_null(f);
        fprintf(f, "%s\n", comm);
        assert_int_equal(fclose(f), 0);
}

static void make_named_thread(int pid, int tid, const char *comm)
{
        make_thread(pid, tid);
        write_comm(pid, tid, comm);
}

static int setup(void **state)
{
        strcpy(root, "/tmp/test-tracker-XXXXXX");
        assert_non_null(mkdtemp(root));
        make_thread(100, 101);
        make_thread(100, 102);
        make_thread(100, 103);
        make_thread(200, 201);
        return 0;
}

static int teardown(void **state)
{
        char cmd[PATH_MAX + 16];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        assert_int_equal(system(cmd), 0);
        return 0;
}

static struct vm_info mkvm(pid_t pid, const char *name, const struct vcpu_info *v, unsigned n)
{
        struct vm_info vm = { .pid = pid, .libvirt_id = -1, .n_vcpus = n, .vcpus = (struct vcpu_info *) v };

        snprintf(vm.name, sizeof(vm.name), "%s", name);
        return vm;
}

#define S (NSEC_PER_SEC)
#define MS (NSEC_PER_MSEC)

static void test_arithmetic(void **state)
{
        static const struct vcpu_info v100[] = { { 0, 101 }, { 1, 102 } };
        struct vm_info vm = mkvm(100, "a", v100, 2);
        struct tracker *tr;
        const struct vm_load *l;
        nsec_t t0 = 1000 * S;

        assert_int_equal(tracker_new(root, HALF_LIFE, &tr), 0);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, &vm, 1, t0), 0);
        assert_int_equal(tracker_n_vms(tr), 1);
        assert_int_equal(tracker_n_threads(tr), 2);

        write_schedstat(100, 101, 1000, 2000, 1);
        write_schedstat(100, 102, 5 * S, 0, 1);
        assert_int_equal(tracker_sample(tr, t0), 2);
        l = tracker_find_vm(tr, 100);
        assert_non_null(l);
        assert_false(l->vcpus[0].valid);
        assert_int_equal(l->vcpus[0].last.run_ns, 1000);
        assert_int_equal(l->vcpus[0].last.wait_ns, 2000);

        /* 500 ms run, 100 ms wait in 1 s */
        write_schedstat(100, 101, 1000 + 500 * MS, 2000 + 100 * MS, 5);
        /* 2 s "run" in 1 s (jitter): clamped; wait 1.5 s in 1 s: clamped */
        write_schedstat(100, 102, 7 * S, 1500 * MS, 2);
        assert_int_equal(tracker_sample(tr, t0 + S), 2);
        l = tracker_find_vm(tr, 100);
        assert_true(l->vcpus[0].valid);
        assert_true(fabs(l->vcpus[0].util - 0.5) < EPS);
        assert_true(fabs(l->vcpus[0].wait_ratio - 0.1) < EPS);
        assert_true(fabs(l->vcpus[0].util_avg - 0.5) < EPS); /* first valid period initialises */
        assert_true(fabs(l->vcpus[0].wait_avg - 0.1) < EPS);
        assert_true(l->vcpus[0].halt_poll_ratio == 0.0);
        assert_int_equal(l->vcpus[0].last.timeslices, 5);
        assert_true(l->vcpus[1].util == 1.0);
        assert_true(l->vcpus[1].wait_ratio == 1.0);

        /* fully busy for 1 s: avg moves by alpha(1 s) towards 1 */
        write_schedstat(100, 101, 1000 + 1500 * MS, 2000 + 100 * MS, 6);
        write_schedstat(100, 102, 7 * S, 1500 * MS, 2); /* idle */
        assert_int_equal(tracker_sample(tr, t0 + 2 * S), 2);
        l = tracker_find_vm(tr, 100);
        double a = tracker_decay_alpha(S, HALF_LIFE);
        assert_true(fabs(l->vcpus[0].util - 1.0) < EPS);
        assert_true(fabs(l->vcpus[0].util_avg - (0.5 + a * 0.5)) < EPS);
        assert_true(fabs(l->vcpus[0].wait_avg - (0.1 + a * (0.0 - 0.1))) < EPS);
        assert_true(l->vcpus[1].util == 0.0);
        assert_true(fabs(l->vcpus[1].util_avg - (1.0 - a)) < EPS);

        /* 250 ms run in 500 ms, with 100 ms of halt polling: util 0.3 */
        tracker_set_halt_poll(tr, 100, 0, 7000);   /* first value: baseline */
        tracker_set_halt_poll(tr, 100, 0, 7000);
        write_schedstat(100, 101, 1000 + 1750 * MS, 2000 + 100 * MS, 7);
        assert_int_equal(tracker_sample(tr, t0 + 2 * S + 500 * MS), 2);
        tracker_set_halt_poll(tr, 100, 0, 7000 + 100 * MS);
        write_schedstat(100, 101, 1000 + 2000 * MS, 2000 + 100 * MS, 8);
        assert_int_equal(tracker_sample(tr, t0 + 3 * S), 2);
        l = tracker_find_vm(tr, 100);
        assert_true(l->vcpus[0].has_halt_poll);
        assert_true(fabs(l->vcpus[0].util - 0.3) < EPS);
        assert_true(fabs(l->vcpus[0].halt_poll_ratio - 0.2) < EPS);
        /* unknown vCPU / pid: ignored */
        tracker_set_halt_poll(tr, 100, 7, 1);
        tracker_set_halt_poll(tr, 999, 0, 1);

        /* frequency invariance: 500 ms busy at half the top capacity is 0.25 of a CPU at the top
         * level; the scale stays until set again, 0 means unscaled; unknown vCPU / pid: ignored */
        tracker_set_load_scale(tr, 100, 0, 512);
        write_schedstat(100, 101, 1000 + 2500 * MS, 2000 + 100 * MS, 9);
        assert_int_equal(tracker_sample(tr, t0 + 4 * S), 2);
        l = tracker_find_vm(tr, 100);
        assert_true(fabs(l->vcpus[0].util - 0.25) < EPS);
        write_schedstat(100, 101, 1000 + 3500 * MS, 2000 + 100 * MS, 10);
        assert_int_equal(tracker_sample(tr, t0 + 5 * S), 2);
        assert_true(fabs(tracker_find_vm(tr, 100)->vcpus[0].util - 0.5) < EPS);
        tracker_set_load_scale(tr, 100, 0, 0);
        tracker_set_load_scale(tr, 100, 7, 512);
        tracker_set_load_scale(tr, 999, 0, 512);
        write_schedstat(100, 101, 1000 + 4500 * MS, 2000 + 100 * MS, 11);
        assert_int_equal(tracker_sample(tr, t0 + 6 * S), 2);
        assert_true(fabs(tracker_find_vm(tr, 100)->vcpus[0].util - 1.0) < EPS);
        t0 += 3 * S;

        /* counters going backwards (tid reused): new baseline, values kept */
        write_schedstat(100, 102, 10, 10, 1);
        assert_int_equal(tracker_sample(tr, t0 + 4 * S), 2);
        l = tracker_find_vm(tr, 100);
        assert_int_equal(l->vcpus[1].last.run_ns, 10);
        write_schedstat(100, 102, 10 + 250 * MS, 10, 2);
        assert_int_equal(tracker_sample(tr, t0 + 5 * S), 2);
        assert_true(fabs(tracker_find_vm(tr, 100)->vcpus[1].util - 0.25) < EPS);

        /* garbage: read error, counted, not fatal */
        {
                char p[PATH_MAX];
                snprintf(p, sizeof(p), "%s/100/task/102/schedstat", root);
                int fd = open(p, O_WRONLY | O_TRUNC);
                assert_true(fd >= 0);
                assert_int_equal(write(fd, "x y z\n", 6), 6);
                close(fd);
        }
        uint64_t errs = tracker_stats(tr)->read_errors;
        assert_int_equal(tracker_sample(tr, t0 + 6 * S), 1);
        assert_int_equal(tracker_stats(tr)->read_errors, errs + 1);
        assert_int_equal(tracker_n_vms(tr), 1);

        assert_true(tracker_stats(tr)->samples >= 12);
        tracker_free(tr);
}

static void test_merge(void **state)
{
        static const struct vcpu_info lv[] = { { 1, 102 }, { 0, 101 } }; /* unsorted on purpose */
        static const struct vcpu_info pv[] = { { 0, 101 } };
        static const struct vcpu_info pv2[] = { { 0, 201 } };
        struct vm_info lib = mkvm(100, "web", lv, 2);
        struct vm_info proc[2] = { mkvm(200, "other", pv2, 1), mkvm(100, "qemu-100", pv, 1) };
        struct tracker *tr;
        const struct vm_load *l;

        strcpy(lib.uuid, "6b1f8a2e-0b7a-4d43-9b0e-1f2a3b4c5d6e");
        lib.libvirt_id = 3;
        lib.accel = VM_ACCEL_TCG;
        lib.sources = VM_SOURCE_LIBVIRT;
        proc[0].sources = proc[1].sources = VM_SOURCE_PROC;

        assert_int_equal(tracker_new(root, HALF_LIFE, &tr), 0);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, proc, 2, 0), 0);
        assert_int_equal(tracker_n_vms(tr), 2);
        assert_int_equal(tracker_stats(tr)->vms_added, 2);
        /* before libvirt: name from proc, one vCPU */
        assert_string_equal(tracker_vm(tr, 0)->info.name, "other");
        assert_string_equal(tracker_vm(tr, 1)->info.name, "qemu-100");
        assert_int_equal(tracker_find_vm(tr, 100)->n_vcpus, 1);

        write_schedstat(100, 101, 0, 0, 0);
        write_schedstat(100, 102, 0, 0, 0);
        assert_int_equal(tracker_sample(tr, 10 * S), 2);

        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, 10 * S), 0);
        assert_int_equal(tracker_n_vms(tr), 2); /* counted once */
        assert_int_equal(tracker_stats(tr)->vms_added, 2);
        assert_int_equal(tracker_n_threads(tr), 3);
        l = tracker_find_vm(tr, 100);
        assert_non_null(l);
        assert_string_equal(l->info.name, "web");
        assert_string_equal(l->info.uuid, "6b1f8a2e-0b7a-4d43-9b0e-1f2a3b4c5d6e");
        assert_int_equal(l->info.libvirt_id, 3);
        assert_int_equal(l->info.sources, VM_SOURCE_LIBVIRT | VM_SOURCE_PROC);
        assert_int_equal(l->info.accel, VM_ACCEL_TCG);
        assert_int_equal(l->first_seen_ns, 0);
        /* libvirt's vCPU list, sorted by index */
        assert_int_equal(l->n_vcpus, 2);
        assert_int_equal(l->info.n_vcpus, 2);
        assert_int_equal(l->vcpus[0].index, 0);
        assert_int_equal(l->vcpus[0].tid, 101);
        assert_int_equal(l->vcpus[1].tid, 102);
        /* order by name: other, web */
        assert_string_equal(tracker_vm(tr, 0)->info.name, "other");
        assert_string_equal(tracker_vm(tr, 1)->info.name, "web");
        assert_null(tracker_vm(tr, 2));

        /* the kept fd of vCPU 0 survived the update: the next sample gives a rate */
        write_schedstat(100, 101, 400 * MS, 0, 1);
        write_schedstat(100, 102, 100 * MS, 0, 1);
        assert_int_equal(tracker_sample(tr, 11 * S), 3);
        l = tracker_find_vm(tr, 100);
        assert_true(l->vcpus[0].valid);
        assert_true(fabs(l->vcpus[0].util - 0.4) < EPS);
        assert_false(l->vcpus[1].valid); /* new in this update: first sample only */

        /* a changed tid replaces the fd and the state */
        static const struct vcpu_info lv2[] = { { 0, 101 }, { 1, 103 } };
        lib.vcpus = (struct vcpu_info *) lv2;
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, 11 * S), 0);
        l = tracker_find_vm(tr, 100);
        assert_int_equal(l->vcpus[1].tid, 103);
        assert_false(l->vcpus[1].valid);
        assert_true(l->vcpus[0].valid);

        /* libvirt drops it: still known to proc, proc's name and vCPU list */
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, NULL, 0, 12 * S), 0);
        l = tracker_find_vm(tr, 100);
        assert_non_null(l);
        assert_string_equal(l->info.name, "qemu-100");
        assert_int_equal(l->info.sources, VM_SOURCE_PROC);
        assert_int_equal(l->info.libvirt_id, -1);
        assert_string_equal(l->info.uuid, "");
        assert_int_equal(l->n_vcpus, 1);
        assert_true(l->vcpus[0].valid);
        assert_int_equal(tracker_stats(tr)->vms_removed, 0);

        /* proc drops pid 100: gone */
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, proc, 1, 13 * S), 0);
        assert_null(tracker_find_vm(tr, 100));
        assert_int_equal(tracker_n_vms(tr), 1);
        assert_int_equal(tracker_n_threads(tr), 1);
        assert_int_equal(tracker_stats(tr)->vms_removed, 1);

        /* bad source: error, state kept */
        assert_int_equal(tracker_set_source(tr, (enum vm_source) 0x40, proc, 1, 0), -EINVAL);
        assert_int_equal(tracker_n_vms(tr), 1);

        /* duplicate pid in one snapshot: the first wins */
        struct vm_info dup[2] = { mkvm(200, "first", pv2, 1), mkvm(200, "second", pv2, 1) };
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_QMP, dup, 2, 14 * S), 0);
        assert_int_equal(tracker_n_vms(tr), 1);
        assert_string_equal(tracker_vm(tr, 0)->info.name, "first"); /* QMP wins over proc */
        assert_int_equal(tracker_vm(tr, 0)->info.sources, VM_SOURCE_QMP | VM_SOURCE_PROC);

        /* one vCPU index twice in a snapshot: kept once */
        static const struct vcpu_info twice[] = { { 0, 201 }, { 0, 201 } };
        struct vm_info tw = mkvm(200, "twice", twice, 2);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_QMP, &tw, 1, 14 * S), 0);
        assert_int_equal(tracker_find_vm(tr, 200)->n_vcpus, 1);
        assert_int_equal(tracker_n_threads(tr), 1);
        assert_string_equal(tracker_vm(tr, 0)->info.name, "twice");

        /* a VM whose threads do not exist (stale report): not added */
        static const struct vcpu_info ghost[] = { { 0, 9991 }, { 1, 9992 } };
        struct vm_info g = mkvm(999, "ghost", ghost, 2);
        uint64_t gone = tracker_stats(tr)->threads_gone;
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &g, 1, 15 * S), 0);
        assert_null(tracker_find_vm(tr, 999));
        assert_int_equal(tracker_stats(tr)->threads_gone, gone + 2);
        /* a VM without known vCPUs yet is kept */
        struct vm_info novcpu = mkvm(300, "booting", NULL, 0);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &novcpu, 1, 16 * S), 0);
        assert_non_null(tracker_find_vm(tr, 300));
        assert_int_equal(tracker_sample(tr, 17 * S), 1);
        assert_non_null(tracker_find_vm(tr, 300));
        assert_int_equal(tracker_n_vms(tr), 2);

        tracker_free(tr);
        tracker_free(NULL);
}

/* ---- thread identity: stale lists, names, several sources ---- */

/*
 * A (vCPU index, tid) the tracker saw gone is never opened again while a
 * stale source keeps listing it, even once a thread with the vCPU's very
 * name holds that tid (pid wrap); it is forgotten when no source lists it.
 */
static void test_gone_not_reopened(void **state)
{
        static const struct vcpu_info lv[] = { { 0, 601 }, { 1, 602 } };
        static const struct vcpu_info fresh[] = { { 0, 601 } };
        struct vm_info lib = mkvm(600, "stale", lv, 2);
        struct tracker *tr;
        const struct vm_load *l;

        make_named_thread(600, 601, "CPU 0/KVM"); /* 602: vCPU 1 unplugged, its thread gone */
        assert_int_equal(tracker_new(root, HALF_LIFE, &tr), 0);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, S), 0);
        l = tracker_find_vm(tr, 600);
        assert_non_null(l);
        assert_int_equal(l->n_vcpus, 2);
        assert_true(l->vcpus[1].gone);
        assert_int_equal(tracker_stats(tr)->threads_gone, 1);

        for (int i = 0; i < 5; i++) {
                if (i == 2)
                        make_named_thread(600, 602, "CPU 1/KVM"); /* the tid is taken again */
                assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, (2 + i) * S), 0);
                assert_int_equal(tracker_sample(tr, (2 + i) * S), 1);
                l = tracker_find_vm(tr, 600);
                assert_non_null(l);
                assert_int_equal(l->n_vcpus, 1);
                assert_int_equal(l->vcpus[0].tid, 601);
                assert_int_equal(tracker_n_threads(tr), 1);
                assert_int_equal(tracker_stats(tr)->threads_gone, 1); /* counted once */
        }
        assert_int_equal(tracker_stats(tr)->open_errors, 0);

        /* an up-to-date list forgets the pair; a later report of it is a new thread */
        lib.vcpus = (struct vcpu_info *) fresh;
        lib.n_vcpus = 1;
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, 8 * S), 0);
        lib.vcpus = (struct vcpu_info *) lv;
        lib.n_vcpus = 2;
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, 9 * S), 0);
        l = tracker_find_vm(tr, 600);
        assert_int_equal(l->n_vcpus, 2);
        assert_int_equal(l->vcpus[1].tid, 602);
        assert_false(l->vcpus[1].gone);
        tracker_free(tr);
}

/* A tid is opened as vCPU n only when its thread is named "CPU n/KVM" or "CPU n/TCG". */
static void test_vcpu_name_checked(void **state)
{
        static const struct vcpu_info lv[] = { { 0, 701 }, { 1, 702 }, { 2, 703 }, { 3, 704 } };
        static const struct vcpu_info pv[] = { { 0, 701 }, { 1, 706 }, { 3, 704 } };
        struct vm_info lib = mkvm(700, "named", lv, 4), proc = mkvm(700, "qemu-700", pv, 3);
        struct tracker *tr;
        const struct vm_load *l;

        make_named_thread(700, 701, "CPU 0/KVM");
        make_named_thread(700, 702, "qemu-system-x86"); /* a worker thread got vCPU 1's tid */
        make_named_thread(700, 703, "CPU 5/KVM");       /* another vCPU's thread */
        make_named_thread(700, 704, "CPU 3/TCG");
        make_named_thread(700, 706, "CPU 1/KVM");
        assert_int_equal(tracker_new(root, HALF_LIFE, &tr), 0);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, S), 0);
        l = tracker_find_vm(tr, 700);
        assert_non_null(l);
        assert_int_equal(l->n_vcpus, 2);
        assert_int_equal(l->vcpus[0].tid, 701);
        assert_int_equal(l->vcpus[1].index, 3);
        assert_int_equal(l->vcpus[1].tid, 704);
        assert_int_equal(tracker_n_threads(tr), 2);
        assert_int_equal(tracker_stats(tr)->threads_misnamed, 2);
        assert_int_equal(tracker_stats(tr)->threads_gone, 0);
        assert_int_equal(tracker_stats(tr)->open_errors, 0);

        /* the same stale list again: refused once, not read and counted at every update */
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, 2 * S), 0);
        assert_int_equal(tracker_find_vm(tr, 700)->n_vcpus, 2);
        assert_int_equal(tracker_stats(tr)->threads_misnamed, 2);

        /* the /proc scan knows vCPU 1's real thread: taken from it */
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, &proc, 1, 3 * S), 0);
        l = tracker_find_vm(tr, 700);
        assert_int_equal(l->n_vcpus, 3);
        assert_int_equal(l->vcpus[1].index, 1);
        assert_int_equal(l->vcpus[1].tid, 706);
        assert_int_equal(tracker_stats(tr)->threads_misnamed, 2);

        /* only new opens are checked: a kept vCPU stays */
        write_comm(700, 701, "renamed");
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, 4 * S), 0);
        assert_int_equal(tracker_find_vm(tr, 700)->n_vcpus, 3);
        assert_int_equal(tracker_find_vm(tr, 700)->vcpus[0].tid, 701);

        /* a VM whose listed threads are all someone else's is not added */
        static const struct vcpu_info wv[] = { { 0, 702 } };
        struct vm_info worker = mkvm(700, "w", wv, 1);
        tracker_free(tr);
        assert_int_equal(tracker_new(root, HALF_LIFE, &tr), 0);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_QMP, &worker, 1, S), 0);
        assert_null(tracker_find_vm(tr, 700));
        assert_int_equal(tracker_stats(tr)->threads_misnamed, 1);
        tracker_free(tr);

        /* a plain QEMU without -name debug-threads=on (QMP): every thread has the main
         * thread's name, which is taken, as there is nothing to tell them apart by; with
         * debug-threads=on its other threads have names of their own and are refused */
        {
                static const struct vcpu_info qv[] = { { 0, 751 }, { 1, 752 }, { 2, 753 } };
                struct vm_info q = mkvm(750, "plain", qv, 3);
                char p[PATH_MAX];
                FILE *f;

                make_named_thread(750, 751, "qemu-system-x86");
                make_named_thread(750, 752, "qemu-system-x86");
                make_named_thread(750, 753, "worker");
                snprintf(p, sizeof(p), "%s/750/comm", root);
                f = fopen(p, "we");
                assert_non_null(f);
                fprintf(f, "qemu-system-x86\n");
                assert_int_equal(fclose(f), 0);
                assert_int_equal(tracker_new(root, HALF_LIFE, &tr), 0);
                assert_int_equal(tracker_set_source(tr, VM_SOURCE_QMP, &q, 1, S), 0);
                l = tracker_find_vm(tr, 750);
                assert_non_null(l);
                assert_int_equal(l->n_vcpus, 2);
                assert_int_equal(l->vcpus[0].tid, 751);
                assert_int_equal(l->vcpus[1].tid, 752);
                assert_int_equal(tracker_stats(tr)->threads_misnamed, 1);
                tracker_free(tr);
        }
}

/*
 * vCPUs are merged by index: a vCPU hot-plugged after libvirt's last
 * snapshot is taken from the /proc scan; a thread is one vCPU, under the
 * best source's index.
 */
static void test_vcpus_merged_by_index(void **state)
{
        static const struct vcpu_info lv[] = { { 0, 801 }, { 1, 802 } };
        static const struct vcpu_info pv[] = { { 0, 801 }, { 1, 802 }, { 2, 803 } };
        static const struct vcpu_info pv2[] = { { 0, 801 }, { 1, 802 }, { 2, 803 }, { 3, 802 } };
        struct vm_info lib = mkvm(800, "web", lv, 2), proc = mkvm(800, "qemu-800", pv, 3);
        struct tracker *tr;
        const struct vm_load *l;

        make_named_thread(800, 801, "CPU 0/KVM");
        make_named_thread(800, 802, "CPU 1/KVM");
        make_named_thread(800, 803, "CPU 2/KVM");
        assert_int_equal(tracker_new(root, HALF_LIFE, &tr), 0);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, S), 0);
        assert_int_equal(tracker_find_vm(tr, 800)->n_vcpus, 2);
        assert_int_equal(tracker_sample(tr, S), 2);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, &proc, 1, 2 * S), 0);
        l = tracker_find_vm(tr, 800);
        assert_string_equal(l->info.name, "web");
        assert_int_equal(l->n_vcpus, 3);
        assert_int_equal(l->info.n_vcpus, 3);
        assert_int_equal(l->vcpus[2].index, 2);
        assert_int_equal(l->vcpus[2].tid, 803);
        assert_int_equal(tracker_n_threads(tr), 3);
        assert_int_equal(tracker_sample(tr, 2 * S), 3);
        assert_true(l->vcpus[0].valid); /* carried */

        /* one thread, one vCPU: a tid libvirt lists is not taken again under another index */
        proc.vcpus = (struct vcpu_info *) pv2;
        proc.n_vcpus = 4;
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, &proc, 1, 3 * S), 0);
        assert_int_equal(tracker_find_vm(tr, 800)->n_vcpus, 3);
        assert_int_equal(tracker_n_threads(tr), 3);
        assert_int_equal(tracker_stats(tr)->threads_misnamed, 0); /* not even tried */

        /* libvirt catches up: nothing changes, nothing reopened */
        lib.vcpus = (struct vcpu_info *) pv;
        lib.n_vcpus = 3;
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, 4 * S), 0);
        assert_int_equal(tracker_sample(tr, 4 * S), 3);
        assert_true(tracker_find_vm(tr, 800)->vcpus[2].valid);
        tracker_free(tr);
}

/* ---- vCPUs over VM_MAX_VCPUS: counted per VM, summed in the stats ---- */

static void test_untracked_vcpus(void **state)
{
        static const struct vcpu_info pv[] = { { 0, 101 }, { 1, 102 } };
        static const struct vcpu_info ov[] = { { 0, 201 } };
        struct vm_info proc[2] = { mkvm(100, "big", pv, 2), mkvm(200, "small", ov, 1) };
        struct vm_info lib = mkvm(100, "big", pv, 2);
        struct tracker *tr;

        assert_int_equal(tracker_new(root, HALF_LIFE, &tr), 0);
        assert_int_equal(tracker_stats(tr)->vcpus_untracked, 0);
        proc[0].n_vcpus_untracked = 6;
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, proc, 2, 0), 0);
        assert_int_equal(tracker_find_vm(tr, 100)->info.n_vcpus_untracked, 6);
        assert_int_equal(tracker_find_vm(tr, 200)->info.n_vcpus_untracked, 0);
        assert_int_equal(tracker_stats(tr)->vcpus_untracked, 6);
        assert_int_equal(tracker_stats(tr)->vms_with_untracked, 1);
        /* two sources: the highest count wins (libvirt may see fewer threads named yet) */
        lib.n_vcpus_untracked = 8;
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, S), 0);
        assert_int_equal(tracker_find_vm(tr, 100)->info.n_vcpus_untracked, 8);
        assert_int_equal(tracker_stats(tr)->vcpus_untracked, 8);
        /* gone from every source: no longer counted */
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, NULL, 0, 2 * S), 0);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, &proc[1], 1, 2 * S), 0);
        assert_int_equal(tracker_stats(tr)->vcpus_untracked, 0);
        assert_int_equal(tracker_stats(tr)->vms_with_untracked, 0);
        tracker_free(tr);
}

/* ---- allocation failure: tracker_set_source() keeps the old state ---- */

/*
 * Fault injection without replacing the allocator: this test is linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (tests/meson.build), so the
 * calls the program's own objects make (vcpu_track.c's among them) go through
 * the __wrap_ functions below, which call the real allocator (AddressSanitizer's
 * under -Db_sanitize=address) unless a failure is due.  Allocations made inside
 * libc (strdup, asprintf) are not injected.
 */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
static int fail_countdown; /* the fail_countdown-th allocation from now fails; 0: off */

static bool fail_now(void)
{
        return fail_countdown > 0 && --fail_countdown == 0;
}
void *__wrap_malloc(size_t n)
{
        return fail_now() ? NULL : __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m)
{
        return fail_now() ? NULL : __real_calloc(n, m);
}
void *__wrap_realloc(void *p, size_t n)
{
        return fail_now() ? NULL : __real_realloc(p, n);
}

static int count_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        int n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        closedir(d);
        return n;
}

static void test_enomem_keeps_state(void **state)
{
        static const struct vcpu_info pv[] = { { 0, 101 }, { 1, 102 } };
        static const struct vcpu_info lv[] = { { 0, 101 }, { 1, 103 } }; /* vCPU 1 changes tid */
        static const struct vcpu_info ov[] = { { 0, 201 } };
        struct vm_info proc = mkvm(100, "qemu-100", pv, 2);
        struct vm_info lib[2] = { mkvm(100, "web", lv, 2), mkvm(200, "other", ov, 1) };
        struct tracker *tr;
        int failures = 0, r = -ENOMEM, fds;

        assert_int_equal(tracker_new(root, HALF_LIFE, &tr), 0);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, &proc, 1, 0), 0);
        write_schedstat(100, 101, 0, 0, 0);
        write_schedstat(100, 102, 0, 0, 0);
        assert_int_equal(tracker_sample(tr, S), 2);
        write_schedstat(100, 101, 300 * MS, 0, 0);
        assert_int_equal(tracker_sample(tr, 2 * S), 2);
        fds = count_fds();

        for (int k = 1; k < 200 && r == -ENOMEM; k++) {
                fail_countdown = k;
                r = tracker_set_source(tr, VM_SOURCE_LIBVIRT, lib, 2, 3 * S);
                fail_countdown = 0;
                if (r != -ENOMEM)
                        break;
                failures++;
                /* nothing changed: inventory, names, fds, state */
                assert_int_equal(tracker_n_vms(tr), 1);
                assert_int_equal(tracker_n_threads(tr), 2);
                assert_string_equal(tracker_vm(tr, 0)->info.name, "qemu-100");
                assert_int_equal(tracker_find_vm(tr, 100)->vcpus[1].tid, 102);
                assert_true(fabs(tracker_find_vm(tr, 100)->vcpus[0].util - 0.3) < EPS);
                assert_int_equal(count_fds(), fds);
        }
        assert_int_equal(r, 0);
        assert_true(failures >= 3);
        assert_int_equal(tracker_n_vms(tr), 2);
        assert_string_equal(tracker_find_vm(tr, 100)->info.name, "web");
        assert_int_equal(tracker_find_vm(tr, 100)->vcpus[1].tid, 103);
        assert_int_equal(count_fds(), fds + 1); /* 102 closed, 103 and 201 opened */
        /* the carried fd still works */
        write_schedstat(100, 101, 900 * MS, 0, 0);
        assert_int_equal(tracker_sample(tr, 3 * S), 3);
        assert_true(fabs(tracker_find_vm(tr, 100)->vcpus[0].util - 0.6) < EPS);
        tracker_free(tr);
        assert_int_equal(count_fds(), fds - 2);
}

/* ---- real threads ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static volatile bool stop_busy;
static bool stop_idle, exit_now;

struct thr {
        pthread_t t;
        pid_t tid;
        int index; /* named "CPU <index>/KVM" like a QEMU vCPU thread: the tracker checks */
};

static void publish_tid(struct thr *t)
{
        char name[16];

        snprintf(name, sizeof(name), "CPU %d/KVM", t->index);
        assert_int_equal(pthread_setname_np(pthread_self(), name), 0);
        pthread_mutex_lock(&mu);
        t->tid = (pid_t) syscall(SYS_gettid);
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
}

static void wait_tid(struct thr *t)
{
        pthread_mutex_lock(&mu);
        while (t->tid == 0)
                pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
}

static void *busy_main(void *arg)
{
        volatile uint64_t x = 0;

        publish_tid(arg);
        while (!stop_busy)
                x++;
        return NULL;
}

static void *idle_main(void *arg)
{
        publish_tid(arg);
        pthread_mutex_lock(&mu);
        while (!stop_idle)
                pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        return NULL;
}

static void *exit_main(void *arg)
{
        publish_tid(arg);
        pthread_mutex_lock(&mu);
        while (!exit_now)
                pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        return NULL;
}

/* Put the tracker on the sampler under test; the BPF one must load here. */
static void use_sampler(struct tracker *tr, bool bpf)
{
        int r = tracker_use_bpf(tr, bpf);

        if (r < 0)
                fprintf(stderr, "tracker_use_bpf(%d): %s\n", bpf, strerror(-r));
        assert_int_equal(r, 0);
        assert_int_equal(tracker_uses_bpf(tr), bpf);
        assert_string_equal(tracker_sampler_name(tr), bpf ? "bpf-iter" : "pread");
}

static void real_gone(bool bpf)
{
        struct thr a = { .index = 0 }, b = { .index = 1 };
        struct tracker *tr;
        nsec_t deadline;

        stop_idle = exit_now = false;

        assert_int_equal(pthread_create(&a.t, NULL, exit_main, &a), 0);
        wait_tid(&a);
        assert_int_equal(pthread_create(&b.t, NULL, idle_main, &b), 0);
        wait_tid(&b);

        struct vcpu_info v[] = { { 0, a.tid }, { 1, b.tid } };
        struct vm_info vm = mkvm(getpid(), "self", v, 2);

        assert_int_equal(tracker_new("/proc", HALF_LIFE, &tr), 0);
        use_sampler(tr, bpf);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, &vm, 1, now_ns()), 0);
        assert_int_equal(tracker_sample(tr, now_ns()), 2);

        /* vCPU 0 exits: marked gone, the VM stays */
        pthread_mutex_lock(&mu);
        exit_now = true;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        assert_int_equal(pthread_join(a.t, NULL), 0);
        /* join returns when the tid is cleared, a little before the kernel releases the task */
        deadline = now_ns() + 5 * S;
        while (!tracker_find_vm(tr, getpid())->vcpus[0].gone && now_ns() < deadline) {
                tracker_sample(tr, now_ns());
                usleep(1000);
        }
        assert_true(tracker_find_vm(tr, getpid())->vcpus[0].gone);
        assert_false(tracker_find_vm(tr, getpid())->vcpus[1].gone);
        assert_int_equal(tracker_stats(tr)->threads_gone, 1);
        assert_int_equal(tracker_sample(tr, now_ns()), 1);

        /* the next inventory update drops the gone vCPU (not reopened, not counted twice) */
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, &vm, 1, now_ns()), 0);
        assert_int_equal(tracker_find_vm(tr, getpid())->n_vcpus, 1);
        assert_int_equal(tracker_find_vm(tr, getpid())->vcpus[0].tid, b.tid);
        assert_true(tracker_find_vm(tr, getpid())->vcpus[0].valid); /* fd and state carried */
        assert_int_equal(tracker_n_threads(tr), 1);
        assert_int_equal(tracker_stats(tr)->threads_gone, 1);
        assert_int_equal(tracker_stats(tr)->open_errors, 0);

        /* vCPU 1 exits too: the VM is dropped in the same sample */
        pthread_mutex_lock(&mu);
        stop_idle = true;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        assert_int_equal(pthread_join(b.t, NULL), 0);
        deadline = now_ns() + 5 * S;
        while (tracker_n_vms(tr) > 0 && now_ns() < deadline) {
                tracker_sample(tr, now_ns());
                usleep(1000);
        }
        assert_int_equal(tracker_n_vms(tr), 0);
        assert_int_equal(tracker_n_threads(tr), 0);
        assert_null(tracker_find_vm(tr, getpid()));
        assert_int_equal(tracker_stats(tr)->threads_gone, 2);
        assert_int_equal(tracker_stats(tr)->vms_removed, 1);
        assert_int_equal(tracker_stats(tr)->read_errors, 0);

        /* the stale source report does not bring it back on the next update of another source */
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_QMP, NULL, 0, now_ns()), 0);
        assert_int_equal(tracker_n_vms(tr), 0);
        assert_int_equal(tracker_uses_bpf(tr), bpf);
        assert_int_equal(tracker_stats(tr)->bpf_errors, 0);
        tracker_free(tr);
}

static void test_real_gone(void **state)
{
        real_gone(false);
}

static void test_real_gone_bpf(void **state)
{
        real_gone(true);
}

/*
 * libvirt's list is older than a vCPU hot-unplug (vCPU 1's thread exited)
 * and a hot-plug (vCPU 2), the /proc scan is current: the tracker follows
 * the threads, without flapping (audit h1).
 */
static void real_stale_list(bool bpf)
{
        struct thr a = { .index = 0 }, b = { .index = 1 }, c = { .index = 2 };
        struct tracker *tr;

        stop_idle = exit_now = false;
        assert_int_equal(pthread_create(&a.t, NULL, idle_main, &a), 0);
        wait_tid(&a);
        assert_int_equal(pthread_create(&b.t, NULL, exit_main, &b), 0);
        wait_tid(&b);
        assert_int_equal(pthread_create(&c.t, NULL, idle_main, &c), 0);
        wait_tid(&c);
        pthread_mutex_lock(&mu);
        exit_now = true;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        assert_int_equal(pthread_join(b.t, NULL), 0);
        /* until the kernel released it */
        for (nsec_t deadline = now_ns() + 5 * S; now_ns() < deadline; usleep(1000)) {
                char p[64];

                snprintf(p, sizeof(p), "/proc/self/task/%d", (int) b.tid);
                if (access(p, F_OK) < 0)
                        break;
        }

        struct vcpu_info lv[] = { { 0, a.tid }, { 1, b.tid } };
        struct vcpu_info pv[] = { { 0, a.tid }, { 2, c.tid } };
        struct vm_info lib = mkvm(getpid(), "dom", lv, 2), proc = mkvm(getpid(), "qemu", pv, 2);

        assert_int_equal(tracker_new("/proc", HALF_LIFE, &tr), 0);
        use_sampler(tr, bpf);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &lib, 1, now_ns()), 0);
        assert_int_equal(tracker_stats(tr)->threads_gone, 1);
        for (int i = 0; i < 6; i++) {
                const struct vm_load *l;

                assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, &proc, 1, now_ns()), 0);
                assert_int_equal(tracker_sample(tr, now_ns()), 2);
                l = tracker_find_vm(tr, getpid());
                assert_non_null(l);
                assert_string_equal(l->info.name, "dom");
                assert_int_equal(l->n_vcpus, 2);
                assert_int_equal(l->vcpus[0].tid, a.tid);
                assert_int_equal(l->vcpus[1].index, 2);
                assert_int_equal(l->vcpus[1].tid, c.tid);
                assert_false(l->vcpus[1].gone);
                assert_int_equal(tracker_stats(tr)->threads_gone, 1);
        }
        assert_int_equal(tracker_uses_bpf(tr), bpf);
        tracker_free(tr);

        pthread_mutex_lock(&mu);
        stop_idle = true;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        assert_int_equal(pthread_join(a.t, NULL), 0);
        assert_int_equal(pthread_join(c.t, NULL), 0);
}

static void test_real_stale_list(void **state)
{
        real_stale_list(false);
}

static void test_real_stale_list_bpf(void **state)
{
        real_stale_list(true);
}

/*
 * Another thread of the same process takes an exited vCPU thread's tid
 * (clone3() with set_tid stands for a pid wrap): the vCPU is gone for both
 * samplers, whether the tid changed hands after the first sample or before
 * it (audit h2, h4).
 */
#if defined(__x86_64__)
static uint32_t reuse_exit;  /* futex word: the clone3() thread exits once it is 1 */
static int32_t reuse_ctid;   /* its tid, cleared by the kernel when it has exited */
static char reuse_stack[16384] __attribute__((aligned(16)));

/*
 * A thread of this process with tid `tid`, or -errno.  It runs on
 * reuse_stack with our TLS, so it is all raw system calls: wait on
 * reuse_exit, then exit.
 */
static long reuse_tid(pid_t tid)
{
        pid_t want = tid;
        struct clone_args ca = {
                .flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
                         CLONE_CHILD_CLEARTID,
                .child_tid = (uintptr_t) &reuse_ctid,
                .stack = (uintptr_t) reuse_stack, .stack_size = sizeof(reuse_stack),
                .set_tid = (uintptr_t) &want, .set_tid_size = 1,
        };
        register uint32_t *word asm("r12") = &reuse_exit;
        long ret;

        reuse_exit = 0;
        reuse_ctid = tid;
        asm volatile("syscall\n\t"
                     "test %%rax, %%rax\n\t"
                     "jnz 2f\n\t"
                     "1:\n\t"
                     "cmpl $0, (%%r12)\n\t"
                     "jne 3f\n\t"
                     "mov $202, %%eax\n\t"      /* futex(word, FUTEX_WAIT, 0, NULL) */
                     "mov %%r12, %%rdi\n\t"
                     "xor %%esi, %%esi\n\t"
                     "xor %%edx, %%edx\n\t"
                     "xor %%r10d, %%r10d\n\t"
                     "syscall\n\t"
                     "jmp 1b\n\t"
                     "3:\n\t"
                     "mov $60, %%eax\n\t"       /* exit(0): this thread only */
                     "xor %%edi, %%edi\n\t"
                     "syscall\n\t"
                     "2:\n\t"
                     : "=a"(ret)
                     : "0"((long) SYS_clone3), "D"(&ca), "S"(sizeof(ca)), "r"(word)
                     : "rcx", "r11", "rdx", "r10", "memory");
        return ret;
}

static void reuse_stop(void)
{
        __atomic_store_n(&reuse_exit, 1, __ATOMIC_RELEASE);
        syscall(SYS_futex, &reuse_exit, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        for (int32_t t; (t = __atomic_load_n(&reuse_ctid, __ATOMIC_ACQUIRE)) != 0;)
                syscall(SYS_futex, &reuse_ctid, FUTEX_WAIT, t, NULL, NULL, 0);
}

/* vCPU 1's thread exits and another thread of ours takes its tid. */
static bool exit_and_reuse(struct thr *b)
{
        long r = -EEXIST;

        pthread_mutex_lock(&mu);
        exit_now = true;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        assert_int_equal(pthread_join(b->t, NULL), 0);
        /* the tid is free once the kernel released the task, a little after the join */
        for (nsec_t deadline = now_ns() + 5 * S; r == -EEXIST && now_ns() < deadline;) {
                r = reuse_tid(b->tid);
                if (r == -EEXIST)
                        usleep(1000);
        }
        if (r == -EPERM || r == -ENOSYS)
                return false;
        assert_int_equal(r, b->tid);
        return true;
}

static void real_tid_reused(bool bpf)
{
        for (int before_first_sample = 0; before_first_sample < 2; before_first_sample++) {
                struct thr a = { .index = 0 }, b = { .index = 1 };
                struct tracker *tr;
                const struct vm_load *l;

                stop_idle = exit_now = false;
                assert_int_equal(pthread_create(&a.t, NULL, idle_main, &a), 0);
                wait_tid(&a);
                assert_int_equal(pthread_create(&b.t, NULL, exit_main, &b), 0);
                wait_tid(&b);

                struct vcpu_info v[] = { { 0, a.tid }, { 1, b.tid } };
                struct vm_info vm = mkvm(getpid(), "self", v, 2);

                assert_int_equal(tracker_new("/proc", HALF_LIFE, &tr), 0);
                use_sampler(tr, bpf);
                assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &vm, 1, now_ns()), 0);
                if (!before_first_sample)
                        assert_int_equal(tracker_sample(tr, now_ns()), 2);
                if (!exit_and_reuse(&b)) {
                        tracker_free(tr);
                        pthread_mutex_lock(&mu);
                        stop_idle = true;
                        pthread_cond_broadcast(&cv);
                        pthread_mutex_unlock(&mu);
                        assert_int_equal(pthread_join(a.t, NULL), 0);
                        skip(); /* no clone3() set_tid here (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE) */
                }

                /* the next sample sees vCPU 1 gone, whatever now has its tid */
                assert_int_equal(tracker_sample(tr, now_ns()), 1);
                l = tracker_find_vm(tr, getpid());
                assert_non_null(l);
                assert_false(l->vcpus[0].gone);
                assert_true(l->vcpus[1].gone);
                assert_int_equal(tracker_stats(tr)->threads_gone, 1);
                assert_int_equal(tracker_sample(tr, now_ns()), 1);

                /* libvirt's list, out of date, still names the tid: not reopened */
                for (int i = 0; i < 3; i++) {
                        assert_int_equal(tracker_set_source(tr, VM_SOURCE_LIBVIRT, &vm, 1, now_ns()), 0);
                        assert_int_equal(tracker_sample(tr, now_ns()), 1);
                        l = tracker_find_vm(tr, getpid());
                        assert_int_equal(l->n_vcpus, 1);
                        assert_int_equal(l->vcpus[0].tid, a.tid);
                }
                assert_int_equal(tracker_stats(tr)->threads_gone, 1);
                assert_int_equal(tracker_uses_bpf(tr), bpf);
                assert_int_equal(tracker_stats(tr)->bpf_errors, 0);
                tracker_free(tr);

                reuse_stop();
                pthread_mutex_lock(&mu);
                stop_idle = true;
                pthread_cond_broadcast(&cv);
                pthread_mutex_unlock(&mu);
                assert_int_equal(pthread_join(a.t, NULL), 0);
        }
}
#else
static void real_tid_reused(bool bpf)
{
        skip(); /* the clone3() thread is x86-64 assembly */
}
#endif

static void test_real_tid_reused(void **state)
{
        real_tid_reused(false);
}

static void test_real_tid_reused_bpf(void **state)
{
        real_tid_reused(true);
}

static nsec_t thread_cpu_ns(pthread_t t)
{
        clockid_t c;
        struct timespec ts;

        assert_int_equal(pthread_getcpuclockid(t, &c), 0);
        assert_int_equal(clock_gettime(c, &ts), 0);
        return (nsec_t) ts.tv_sec * S + ts.tv_nsec;
}

static void real_busy_idle(bool bpf)
{
        struct thr busy = { .index = 0 }, idle = { .index = 1 };
        struct tracker *tr;
        nsec_t t0, t1, c0, c1;
        const struct vm_load *l;

        stop_idle = stop_busy = false;
        assert_int_equal(pthread_create(&busy.t, NULL, busy_main, &busy), 0);
        wait_tid(&busy);
        assert_int_equal(pthread_create(&idle.t, NULL, idle_main, &idle), 0);
        wait_tid(&idle);

        struct vcpu_info v[] = { { 0, busy.tid }, { 1, idle.tid } };
        struct vm_info vm = mkvm(getpid(), "self", v, 2);
        assert_int_equal(tracker_new("/proc", HALF_LIFE, &tr), 0);
        use_sampler(tr, bpf);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, &vm, 1, now_ns()), 0);

        c0 = thread_cpu_ns(busy.t);
        t0 = now_ns();
        assert_int_equal(tracker_sample(tr, t0), 2);
        usleep(1000 * 1000);
        c1 = thread_cpu_ns(busy.t);
        t1 = now_ns();
        assert_int_equal(tracker_sample(tr, t1), 2);

        l = tracker_find_vm(tr, getpid());
        assert_true(l->vcpus[0].valid && l->vcpus[1].valid);
        double expect = (double) (c1 - c0) / (double) (t1 - t0);
        printf("%s: busy util %.3f (thread clock %.3f) wait %.3f, idle util %.3f\n", tracker_sampler_name(tr), l->vcpus[0].util, expect,
               l->vcpus[0].wait_ratio, l->vcpus[1].util);
        /* agrees with the thread's own CPU clock */
        assert_true(fabs(l->vcpus[0].util - MIN(expect, 1.0)) < 0.05);
        /* busy is busy (2 CPUs; other work on the host may take a share), idle is idle */
        assert_true(l->vcpus[0].util > 0.8 || l->vcpus[0].util + l->vcpus[0].wait_ratio > 0.8);
        assert_true(l->vcpus[1].util < 0.2);
        assert_true(tracker_stats(tr)->last_sample_cpu_ns > 0);

        stop_busy = true;
        pthread_mutex_lock(&mu);
        stop_idle = true;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        assert_int_equal(pthread_join(busy.t, NULL), 0);
        assert_int_equal(pthread_join(idle.t, NULL), 0);
        assert_int_equal(tracker_uses_bpf(tr), bpf);
        tracker_free(tr);
}

static void test_real_busy_idle(void **state)
{
        real_busy_idle(false);
}

static void test_real_busy_idle_bpf(void **state)
{
        real_busy_idle(true);
}

/* ---- both samplers, same counters ---- */

#define N_STOPPED 6
static uint32_t gate; /* futex word: threads block while 0 */

static void *stopped_main(void *arg)
{
        struct thr *t = arg;
        volatile uint64_t x = 0;

        /* some CPU time first, so the counters are non-zero: 3 ms of this thread's
         * own CPU time, not of wall time (a loaded host preempts it) */
        while (thread_cputime_ns() < 3 * NSEC_PER_MSEC)
                x++;
        publish_tid(t);
        while (__atomic_load_n(&gate, __ATOMIC_ACQUIRE) == 0)
                syscall(SYS_futex, &gate, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
        return NULL;
}

/* State letter of one of our threads in /proc/self/task/<tid>/stat. */
static char thread_state(pid_t tid)
{
        char path[64], buf[512], *p;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int) tid);
        f = fopen(path, "re");
        assert_non_null(f);
        assert_non_null(fgets(buf, sizeof(buf), f));
        fclose(f);
        p = strrchr(buf, ')');
        assert_non_null(p);
        return p[2];
}

static void test_same_counters(void **state)
{
        struct thr t[N_STOPPED] = { 0 };
        struct vcpu_info v[N_STOPPED];
        struct tracker *tp, *tb, *tf;
        nsec_t now;

        gate = 0;
        for (int i = 0; i < N_STOPPED; i++) {
                t[i].index = i;
                assert_int_equal(pthread_create(&t[i].t, NULL, stopped_main, &t[i]), 0);
                wait_tid(&t[i]);
                v[i] = (struct vcpu_info) { i, t[i].tid };
        }
        /* all asleep on the futex: their counters no longer move */
        for (int i = 0; i < N_STOPPED; i++) {
                nsec_t deadline = now_ns() + 5 * S;
                while (thread_state(t[i].tid) != 'S' && now_ns() < deadline)
                        usleep(1000);
                assert_int_equal(thread_state(t[i].tid), 'S');
        }

        struct vm_info vm = mkvm(getpid(), "self", v, N_STOPPED);
        assert_int_equal(tracker_new("/proc", HALF_LIFE, &tp), 0);
        use_sampler(tp, false);
        assert_int_equal(tracker_new("/proc", HALF_LIFE, &tb), 0);
        use_sampler(tb, true);
        assert_int_equal(tracker_set_source(tp, VM_SOURCE_PROC, &vm, 1, now_ns()), 0);
        assert_int_equal(tracker_set_source(tb, VM_SOURCE_PROC, &vm, 1, now_ns()), 0);
        now = now_ns();
        assert_int_equal(tracker_sample(tb, now), N_STOPPED);
        assert_int_equal(tracker_sample(tp, now), N_STOPPED);

        const struct vm_load *lp = tracker_find_vm(tp, getpid()), *lb = tracker_find_vm(tb, getpid());
        assert_non_null(lp);
        assert_non_null(lb);
        assert_int_equal(lp->n_vcpus, N_STOPPED);
        assert_int_equal(lb->n_vcpus, N_STOPPED);
        for (int i = 0; i < N_STOPPED; i++) {
                printf("tid %d: pread %llu %llu %llu, bpf %llu %llu %llu\n", (int) lp->vcpus[i].tid,
                       (unsigned long long) lp->vcpus[i].last.run_ns, (unsigned long long) lp->vcpus[i].last.wait_ns,
                       (unsigned long long) lp->vcpus[i].last.timeslices,
                       (unsigned long long) lb->vcpus[i].last.run_ns, (unsigned long long) lb->vcpus[i].last.wait_ns,
                       (unsigned long long) lb->vcpus[i].last.timeslices);
                assert_int_equal(lb->vcpus[i].tid, lp->vcpus[i].tid);
                assert_true(lp->vcpus[i].last.run_ns >= 1 * NSEC_PER_MSEC); /* it did spin */
                assert_true(lp->vcpus[i].last.timeslices > 0);
                assert_int_equal(lb->vcpus[i].last.run_ns, lp->vcpus[i].last.run_ns);
                assert_int_equal(lb->vcpus[i].last.wait_ns, lp->vcpus[i].last.wait_ns);
                assert_int_equal(lb->vcpus[i].last.timeslices, lp->vcpus[i].last.timeslices);
        }
        assert_true(tracker_uses_bpf(tb));
        assert_int_equal(tracker_stats(tb)->samples, N_STOPPED);
        assert_int_equal(tracker_stats(tb)->bpf_errors, 0);

        /* a fixture tree is not the kernel's /proc: no BPF there */
        assert_int_equal(tracker_new(root, HALF_LIFE, &tf), 0);
        assert_false(tracker_uses_bpf(tf));
        assert_int_equal(tracker_use_bpf(tf, true), -EOPNOTSUPP);
        assert_string_equal(tracker_sampler_name(tf), "pread");
        tracker_free(tf);

        __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
        syscall(SYS_futex, &gate, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
        for (int i = 0; i < N_STOPPED; i++)
                assert_int_equal(pthread_join(t[i].t, NULL), 0);
        tracker_free(tp);
        tracker_free(tb);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_decay_alpha),
                cmocka_unit_test(test_arithmetic),
                cmocka_unit_test(test_merge),
                cmocka_unit_test(test_gone_not_reopened),
                cmocka_unit_test(test_vcpu_name_checked),
                cmocka_unit_test(test_vcpus_merged_by_index),
                cmocka_unit_test(test_untracked_vcpus),
                cmocka_unit_test(test_enomem_keeps_state),
                cmocka_unit_test(test_real_gone),
                cmocka_unit_test(test_real_busy_idle),
                cmocka_unit_test(test_real_gone_bpf),
                cmocka_unit_test(test_real_busy_idle_bpf),
                cmocka_unit_test(test_real_stale_list),
                cmocka_unit_test(test_real_stale_list_bpf),
                cmocka_unit_test(test_real_tid_reused),
                cmocka_unit_test(test_real_tid_reused_bpf),
                cmocka_unit_test(test_same_counters),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
