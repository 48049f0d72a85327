/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Tracker: decay math; arithmetic on a fake procfs in a temp dir whose
 * schedstat files the test rewrites in place between samples (the tracker's
 * kept fds see the new content); merging of sources; real threads of this
 * test for ESRCH (a thread that exits) and for busy/idle utilisation, with
 * both samplers (pread() on kept fds, BPF task iterator: the BPF one must
 * load on the CI machine, so these fail rather than skip without it), and
 * the two samplers reading identical counters of stopped threads.
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
};

static void publish_tid(struct thr *t)
{
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
        struct thr a = { 0 }, b = { 0 };
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
        struct thr busy = { 0 }, idle = { 0 };
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
                cmocka_unit_test(test_untracked_vcpus),
                cmocka_unit_test(test_enomem_keeps_state),
                cmocka_unit_test(test_real_gone),
                cmocka_unit_test(test_real_busy_idle),
                cmocka_unit_test(test_real_gone_bpf),
                cmocka_unit_test(test_real_busy_idle_bpf),
                cmocka_unit_test(test_same_counters),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
