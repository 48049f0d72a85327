/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * procscan: the vCPU comm parser, and scans of fake procfs trees built in a
 * temp dir at test time (cmdline files hold NULs), plus one scan of the real
 * /proc with a thread of this test named like a QEMU vCPU.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>

#include "procscan.h"
#include "util.h"

static void test_comm_parser(void **state)
{
        static const struct {
                const char *comm;
                int index;
                enum vm_accel accel;
        } good[] = {
                { "CPU 0/KVM", 0, VM_ACCEL_KVM },
                { "CPU 12/TCG", 12, VM_ACCEL_TCG },
                { "CPU 1023/KVM", 1023, VM_ACCEL_KVM },
        };
        static const char *const bad[] = {
                "CPU 01/KVM", "CPU -1/KVM", "CPU 1/KVMX", "CPU 1/kvm", "CPU 1", "CPU  1/KVM",
                "CPU 1/KVM ", " CPU 1/KVM", "cpu 1/KVM", "CPU +1/KVM", "CPU 123456789/KVM",
                "CPU /KVM", "CPU 1/", "CPU 1/TCGX", "", "CPU 1/KVM\n", "CPU 00/KVM", "CPU 1 /KVM",
                "CPU 0x1/KVM", "ALL CPUs/TCG",
        };
        int index;
        enum vm_accel accel;

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                index = -5;
                accel = VM_ACCEL_UNKNOWN;
                assert_int_equal(procscan_parse_vcpu_comm(good[i].comm, &index, &accel), 0);
                assert_int_equal(index, good[i].index);
                assert_int_equal(accel, good[i].accel);
        }
        /* a vCPU name beyond the limit: -ERANGE with the index, so that it is counted */
        assert_int_equal(procscan_parse_vcpu_comm("CPU 1024/KVM", &index, &accel), -ERANGE);
        assert_int_equal(index, 1024);
        assert_int_equal(accel, VM_ACCEL_KVM);
        assert_int_equal(procscan_parse_vcpu_comm("CPU 99999/TCG", &index, &accel), -ERANGE);
        assert_int_equal(index, 99999);
        assert_int_equal(accel, VM_ACCEL_TCG);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                index = -5;
                accel = VM_ACCEL_UNKNOWN;
                if (procscan_parse_vcpu_comm(bad[i], &index, &accel) != -EINVAL)
                        fail_msg("accepted \"%s\"", bad[i]);
                assert_int_equal(index, -5);
                assert_int_equal(accel, VM_ACCEL_UNKNOWN);
        }
}

/* ---- fake procfs ---- */

static char root[64];

static void write_file(const char *path, const void *data, size_t len)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, len), (ssize_t) len);
        assert_int_equal(close(fd), 0);
}

static void mkdirf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mkdirf(const char *fmt, ...)
{
        char p[PATH_MAX];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(p, sizeof(p), fmt, ap);
        va_end(ap);
        assert_int_equal(mkdir(p, 0755), 0);
}

/* threads: "tid=comm" strings; tid == pid is the main thread. comm NULL: no comm file. */
static void make_proc(int pid, const char *main_comm, const char *const *threads, size_t n_threads,
                      const char *cmdline, size_t cmdline_len)
{
        char p[PATH_MAX];

        mkdirf("%s/%d", root, pid);
        snprintf(p, sizeof(p), "%s/%d/comm", root, pid);
        {
                char buf[64];
                snprintf(buf, sizeof(buf), "%s\n", main_comm); /* comm files end in a newline */
                write_file(p, buf, strlen(buf));
        }
        if (cmdline) {
                snprintf(p, sizeof(p), "%s/%d/cmdline", root, pid);
                write_file(p, cmdline, cmdline_len);
        }
        mkdirf("%s/%d/task", root, pid);
        for (size_t i = 0; i < n_threads; i++) {
                int tid;
                char comm[64], buf[80];

                assert_int_equal(sscanf(threads[i], "%d=%63[^\n]", &tid, comm), 2);
                mkdirf("%s/%d/task/%d", root, pid, tid);
                if (strcmp(comm, "(none)") == 0)
                        continue; /* vanished thread: directory without files */
                snprintf(p, sizeof(p), "%s/%d/task/%d/comm", root, pid, tid);
                snprintf(buf, sizeof(buf), "%s\n", comm);
                write_file(p, buf, strlen(buf));
                snprintf(p, sizeof(p), "%s/%d/task/%d/schedstat", root, pid, tid);
                write_file(p, "0 0 0\n", 6);
        }
}

#define CMD(s) s, sizeof(s) - 1 /* string literal with embedded NULs, minus the final NUL */

static int setup_tree(void **state)
{
        strcpy(root, "/tmp/test-procscan-XXXXXX");
        assert_non_null(mkdtemp(root));

        /* 100: KVM QEMU, 3 vCPUs, escaped comma in the name */
        make_proc(100, "qemu-system-x86",
                  (const char *[]) { "100=qemu-system-x86", "101=CPU 0/KVM", "104=CPU 2/KVM", "102=CPU 1/KVM",
                                     "103=IO mon_iothread" }, 5,
                  CMD("/usr/bin/qemu-system-x86_64\0-name\0guest=web,,01,debug-threads=on\0-smp\0003\0"));
        /* 200: renamed binary and process=, TCG, implied name */
        make_proc(200, "vmhost",
                  (const char *[]) { "200=vmhost", "201=CPU 1/TCG", "202=CPU 0/TCG" }, 3,
                  CMD("/opt/vm/bin/vmhost\0-accel\0tcg\0--name\0db,process=vmhost,debug-threads=on\0-uuid\0"
                      "not-a-uuid\0--uuid\0" "6F1B0E3C-2A4D-4E8F-9B1C-0123456789AB\0"));
        /* 300: not QEMU: a thread name close to a vCPU's */
        make_proc(300, "python3", (const char *[]) { "300=python3", "301=worker", "302=CPU 01/KVM", "303=CPU 1/kvm" }, 4,
                  CMD("python3\0-name\0guest=fake\0"));
        /* 400: single-threaded process whose main thread calls itself a vCPU */
        make_proc(400, "CPU 0/KVM", (const char *[]) { "400=CPU 0/KVM" }, 1, CMD("x\0"));
        /* 500: vanished: pid dir without task/ */
        mkdirf("%s/500", root);
        /* 600: a thread that vanished (no comm file) and one vCPU; no cmdline */
        make_proc(600, "qemu-kvm", (const char *[]) { "600=qemu-kvm", "601=(none)", "602=CPU 0/KVM" }, 3, NULL, 0);
        /* 700: duplicate vCPU index: not one QEMU */
        make_proc(700, "qemu-kvm", (const char *[]) { "700=qemu-kvm", "701=CPU 0/KVM", "702=CPU 0/KVM" }, 3,
                  CMD("q\0"));
        /* 800: mixed accelerators: not one QEMU */
        make_proc(800, "qemu-kvm", (const char *[]) { "800=qemu-kvm", "801=CPU 0/KVM", "802=CPU 1/TCG" }, 3,
                  CMD("q\0"));
        /* 900: guest= after other keys, last guest= wins */
        make_proc(900, "qemu", (const char *[]) { "900=qemu", "901=CPU 0/KVM" }, 2,
                  CMD("qemu\0-name\0debug-threads=on,guest=first,guest=second\0"));
        /* 1000: "-name" is the last argument: no name */
        make_proc(1000, "qemu", (const char *[]) { "1000=qemu", "1001=CPU 0/KVM" }, 2, CMD("qemu\0-name\0"));
        /* 1100: no guest= at all (first element is a key=value) */
        make_proc(1100, "qemu", (const char *[]) { "1100=qemu", "1101=CPU 0/KVM" }, 2,
                  CMD("qemu\0-name\0process=p,debug-threads=on\0"));
        /* 1200: "-name" inside another argument does not count */
        make_proc(1200, "qemu", (const char *[]) { "1200=qemu", "1201=CPU 0/TCG" }, 2,
                  CMD("qemu\0-name-x\0a\0-append\0-name\0"));
        /* 1300: vCPUs beyond VM_MAX_VCPUS (1024, 1030): kept with 0 and 1, the others counted */
        make_proc(1300, "qemu", (const char *[]) { "1300=qemu", "1301=CPU 0/KVM", "1302=CPU 1024/KVM",
                                                   "1303=CPU 1/KVM", "1304=CPU 1030/KVM" }, 5,
                  CMD("qemu\0-name\0big\0"));
        /* non-pid entries */
        mkdirf("%s/sys", root);
        mkdirf("%s/0123", root);
        mkdirf("%s/0123/task", root);
        return 0;
}

static int teardown_tree(void **state)
{
        char cmd[PATH_MAX + 16];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        assert_int_equal(system(cmd), 0);
        return 0;
}

static const struct vm_info *find(const struct vm_info *v, size_t n, pid_t pid)
{
        for (size_t i = 0; i < n; i++)
                if (v[i].pid == pid)
                        return &v[i];
        return NULL;
}

static void test_scan_fixture(void **state)
{
        struct procscan_stats st = { 0 };
        struct vm_info *vms = NULL;
        size_t n = 0;
        const struct vm_info *v;

        assert_int_equal(procscan_scan(root, NULL, &vms, &n, &st), 0);
        assert_int_equal(st.scans, 1);
        assert_int_equal(st.vanished, 2); /* 500 (no task/) and thread 601 */
        assert_int_equal(st.errors, 0);
        assert_int_equal(n, 8); /* 100 200 600 900 1000 1100 1200 1300 */
        for (size_t i = 1; i < n; i++)
                assert_true(vms[i - 1].pid < vms[i].pid);

        v = find(vms, n, 100);
        assert_non_null(v);
        assert_string_equal(v->name, "web,01");
        assert_int_equal(v->accel, VM_ACCEL_KVM);
        assert_int_equal(v->sources, VM_SOURCE_PROC);
        assert_int_equal(v->libvirt_id, -1);
        assert_string_equal(v->uuid, "");
        assert_int_equal(v->n_vcpus, 3);
        assert_int_equal(v->vcpus[0].index, 0);
        assert_int_equal(v->vcpus[0].tid, 101);
        assert_int_equal(v->vcpus[1].index, 1);
        assert_int_equal(v->vcpus[1].tid, 102);
        assert_int_equal(v->vcpus[2].index, 2);
        assert_int_equal(v->vcpus[2].tid, 104);
        assert_int_equal(v->n_vcpus_untracked, 0);

        v = find(vms, n, 200);
        assert_non_null(v);
        assert_string_equal(v->name, "db");
        assert_string_equal(v->uuid, "6f1b0e3c-2a4d-4e8f-9b1c-0123456789ab"); /* the valid one, lower case */
        assert_int_equal(v->accel, VM_ACCEL_TCG);
        assert_int_equal(v->n_vcpus, 2);
        assert_int_equal(v->vcpus[0].tid, 202);
        assert_int_equal(v->vcpus[1].tid, 201);

        assert_null(find(vms, n, 300));
        assert_null(find(vms, n, 400));
        assert_null(find(vms, n, 500));
        assert_null(find(vms, n, 700));
        assert_null(find(vms, n, 800));

        v = find(vms, n, 600);
        assert_non_null(v);
        assert_string_equal(v->name, "qemu-600");
        assert_int_equal(v->n_vcpus, 1);
        assert_int_equal(v->vcpus[0].tid, 602);

        v = find(vms, n, 900);
        assert_non_null(v);
        assert_string_equal(v->name, "second");
        v = find(vms, n, 1000);
        assert_non_null(v);
        assert_string_equal(v->name, "qemu-1000");
        v = find(vms, n, 1100);
        assert_non_null(v);
        assert_string_equal(v->name, "qemu-1100");
        v = find(vms, n, 1200);
        assert_non_null(v);
        assert_string_equal(v->name, "qemu-1200");
        v = find(vms, n, 1300);
        assert_non_null(v);
        assert_string_equal(v->name, "big");
        assert_int_equal(v->n_vcpus, 2);
        assert_int_equal(v->vcpus[0].tid, 1301);
        assert_int_equal(v->vcpus[1].tid, 1303);
        assert_int_equal(v->n_vcpus_untracked, 2);

        vm_info_free_array(vms, n);
}

/*
 * [QEMU] ProcScanUsers: a QEMU-like process of a user not listed is skipped
 * and counted (not named, not tracked); listed (by uid or name), or with an
 * empty list, it is a VM again.  The owner is that of <pid>/task, as procfs
 * shows a process's effective uid.
 */
static void test_scan_users(void **state)
{
        struct procscan_stats st = { 0 };
        struct procscan_users users;
        struct vm_info *vms = NULL;
        uid_t uids[4];
        char path[PATH_MAX], unknown[64];
        size_t n = 0;

        snprintf(path, sizeof(path), "%s/100/task", root);
        assert_int_equal(chown(path, 60000, 60000), 0);

        assert_int_equal(procscan_users_resolve("root nosuchuser-vmmpt libvirt-qemu-x", uids, 4, &users, unknown,
                                                sizeof(unknown)), 0);
        assert_false(users.any);
        assert_int_equal(users.n, 1);
        assert_int_equal(uids[0], 0);
        assert_string_equal(unknown, "nosuchuser-vmmpt");
        assert_int_equal(procscan_scan(root, &users, &vms, &n, &st), 0);
        assert_int_equal(n, 7); /* test_scan_fixture's 8 without 100 */
        assert_null(find(vms, n, 100));
        assert_non_null(find(vms, n, 200));
        assert_int_equal(st.other_user, 1);
        assert_int_equal(st.last_other_user, 1);
        assert_int_equal(st.last_other_pid, 100);
        assert_int_equal(st.last_other_uid, 60000);
        vm_info_free_array(vms, n);

        /* by uid */
        assert_int_equal(procscan_users_resolve("root 60000", uids, 4, &users, unknown, sizeof(unknown)), 0);
        assert_int_equal(users.n, 2);
        assert_string_equal(unknown, "");
        assert_int_equal(procscan_scan(root, &users, &vms, &n, &st), 0);
        assert_int_equal(n, 8);
        assert_non_null(find(vms, n, 100));
        assert_int_equal(st.other_user, 1);
        assert_int_equal(st.last_other_user, 0);
        vm_info_free_array(vms, n);

        /* empty: any user */
        assert_int_equal(procscan_users_resolve("", uids, 4, &users, unknown, sizeof(unknown)), 0);
        assert_true(users.any);
        assert_int_equal(procscan_scan(root, &users, &vms, &n, &st), 0);
        assert_int_equal(n, 8);
        vm_info_free_array(vms, n);

        /* more names than room, a malformed list */
        assert_int_equal(procscan_users_resolve("0 1 2 3 4", uids, 4, &users, unknown, sizeof(unknown)), -EINVAL);
        assert_int_equal(procscan_users_resolve("root  0", uids, 4, &users, unknown, sizeof(unknown)), -EINVAL);

        assert_int_equal(chown(path, 0, 0), 0);
}

static void test_vcpus_of(void **state)
{
        struct procscan_stats st = { 0 };
        struct vm_info vm = { .pid = 200 };

        assert_int_equal(procscan_vcpus_of(root, &vm, &st), 0);
        assert_int_equal(vm.n_vcpus, 2);
        assert_int_equal(vm.accel, VM_ACCEL_TCG);
        assert_int_equal(vm.vcpus[0].index, 0);
        assert_int_equal(vm.vcpus[1].index, 1);
        vm_info_done(&vm);

        vm = (struct vm_info) { .pid = 500 };
        assert_int_equal(procscan_vcpus_of(root, &vm, &st), -ESRCH);
        vm = (struct vm_info) { .pid = 4242 };
        assert_int_equal(procscan_vcpus_of(root, &vm, &st), -ESRCH);
        assert_int_equal(st.vanished, 2);
        assert_null(vm.vcpus);

        vm = (struct vm_info) { .pid = 700 };
        assert_int_equal(procscan_vcpus_of(root, &vm, &st), -EINVAL);
        vm = (struct vm_info) { .pid = 800 };
        assert_int_equal(procscan_vcpus_of(root, &vm, &st), -EINVAL);

        assert_int_equal(procscan_scan("/nonexistent-procfs", NULL, &(struct vm_info *) { NULL }, &(size_t) { 0 }, NULL),
                         -ENOENT);
}

/* ---- real /proc ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool stop;
static pid_t fake_tid;

static void *fake_vcpu(void *arg)
{
        pthread_mutex_lock(&mu);
        fake_tid = (pid_t) syscall(SYS_gettid);
        pthread_cond_broadcast(&cv);
        while (!stop)
                pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        return NULL;
}

static void test_real_proc(void **state)
{
        struct vm_info *vms = NULL;
        size_t n = 0;
        const struct vm_info *v;
        pthread_t t;

        assert_int_equal(pthread_create(&t, NULL, fake_vcpu, NULL), 0);
        pthread_mutex_lock(&mu);
        while (fake_tid == 0)
                pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        assert_int_equal(pthread_setname_np(t, "CPU 3/TCG"), 0);

        /* the cheap filter's premise: link count of <pid>/task is 2 + threads */
        {
                struct stat st;
                struct dirent *de;
                DIR *d = opendir("/proc/self/task");
                nlink_t entries = 0;

                assert_non_null(d);
                while ((de = readdir(d)))
                        entries += de->d_name[0] != '.';
                closedir(d);
                assert_int_equal(stat("/proc/self/task", &st), 0);
                assert_int_equal(entries, 2);
                assert_int_equal(st.st_nlink, 2 + entries);
        }

        assert_int_equal(procscan_scan("/proc", NULL, &vms, &n, NULL), 0);
        v = find(vms, n, getpid());
        assert_non_null(v);
        {
                char expect[32];
                snprintf(expect, sizeof(expect), "qemu-%d", (int) getpid());
                assert_string_equal(v->name, expect);
        }
        assert_int_equal(v->n_vcpus, 1);
        assert_int_equal(v->vcpus[0].index, 3);
        assert_int_equal(v->vcpus[0].tid, fake_tid);
        assert_int_equal(v->accel, VM_ACCEL_TCG);
        vm_info_free_array(vms, n);

        pthread_mutex_lock(&mu);
        stop = true;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        assert_int_equal(pthread_join(t, NULL), 0);
}

/* The CPU field of a stat line: counted after the last ')' (a comm may hold both). */
static void test_stat_cpu(void **state)
{
        /* /proc/<pid>/task/<tid>/stat of a QEMU TCG vCPU thread (Debian 12, 6.1), processor 1 */
        static const char real[] =
                "2195 (CPU 0/TCG) S 1 2150 2150 0 -1 4194368 1139 0 0 0 31218 3006 0 0 20 0 5 0 4655 "
                "1166499840 52993 18446744073709551615 1 1 0 0 0 0 268444224 4096 16963 0 0 0 -1 1 0 0 0 0 0 "
                "0 0 0 0 0 0 0\n";
        char hostile[512];
        struct stat st;
        char path[PATH_MAX];
        cpu_set_t one, saved;
        int cpu;

        (void) state;
        assert_int_equal(procscan_parse_stat_cpu(real), 1);
        /* a comm chosen to look like fields: ") S 1 2 ... 7 " must not move field 39 */
        snprintf(hostile, sizeof(hostile), "2195 (x) 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 "
                 "21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 9999) %s", strchr(real, ')') + 2);
        assert_int_equal(procscan_parse_stat_cpu(hostile), 1);
        assert_int_equal(procscan_parse_stat_cpu("2195 (CPU 0/TCG) S 1 2"), -EINVAL);
        assert_int_equal(procscan_parse_stat_cpu("2195 CPU 0/TCG S"), -EINVAL);
        /* field 39 not a number */
        assert_int_equal(procscan_parse_stat_cpu("2195 (CPU 0/TCG) S 1 2150 2150 0 -1 4194368 1139 0 0 0 31218 3006 0 0 20 0 5 0 4655 1166499840 52993 18446744073709551615 1 1 0 0 0 0 268444224 4096 16963 0 0 0 -1 1x 0 0 0 0 0 0 0 0 0 0 0 0"), -EINVAL);

        /* this thread, pinned to the CPU it is on: the real /proc answers that CPU */
        assert_int_equal(sched_getaffinity(0, sizeof(saved), &saved), 0);
        cpu = sched_getcpu();
        assert_true(cpu >= 0);
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
        sched_yield();
        assert_int_equal(procscan_thread_cpu("/proc", getpid(), (pid_t) syscall(SYS_gettid)), cpu);
        assert_int_equal(sched_setaffinity(0, sizeof(saved), &saved), 0);
        snprintf(path, sizeof(path), "/proc/%d/task/%d", (int) getpid(), (int) syscall(SYS_gettid));
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(procscan_thread_cpu("/proc", getpid(), 0x7ffffff0), -ESRCH);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_comm_parser),
                cmocka_unit_test(test_scan_fixture),
                cmocka_unit_test(test_scan_users),
                cmocka_unit_test(test_vcpus_of),
                cmocka_unit_test(test_real_proc),
                cmocka_unit_test(test_stat_cpu),
        };
        return cmocka_run_group_tests(tests, setup_tree, teardown_tree);
}
