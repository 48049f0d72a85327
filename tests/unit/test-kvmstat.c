/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * kvmstat on debugfs fixture trees (tests/data/kvm-debugfs) and on this
 * host's real debugfs with a real paused KVM QEMU when /dev/kvm exists.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kvmstat.h"
#include "log.h"
#include "util.h"

static const char *root(const char *name)
{
        static char buf[512];

        assert_true(path_printf(buf, sizeof(buf), "%s/kvm-debugfs/%s", TEST_DATA_DIR, name) > 0);
        return buf;
}

static void test_dirname(void **state)
{
        pid_t pid = 0;
        int fd = -1;

        assert_int_equal(kvmstat_parse_dirname("1660-9", &pid, &fd), 0);
        assert_int_equal(pid, 1660);
        assert_int_equal(fd, 9);
        assert_int_equal(kvmstat_parse_dirname("1-0", &pid, &fd), 0);
        assert_int_equal(pid, 1);
        assert_int_equal(fd, 0);

        const char *bad[] = { "", "-", "1-", "-1", "0-5", "a-1", "1-a", "1-2-3", "exits", "vcpu0",
                              "4194305-1", "1-99999999999", " 1-2", "1-2 ", "+1-2", "1--2",
                              /* not as the kernel prints them: "1660-09" would be read as 1660-9 */
                              "1660-09", "01660-9", "00-1" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                pid = 7;
                fd = 7;
                if (kvmstat_parse_dirname(bad[i], &pid, &fd) != -EINVAL)
                        fail_msg("accepted \"%s\"", bad[i]);
                assert_int_equal(pid, 7);
                assert_int_equal(fd, 7);
        }
}

static void test_recorded_host(void **state)
{
        struct kvmstat_vm vm = {};
        struct kvmstat_vm *vms = NULL;
        struct vcpu_info *v = NULL;
        unsigned nv = 0;
        size_t n = 0;

        assert_int_equal(kvmstat_read_vm(root("host-6.18"), 1660, &vm), 1);
        assert_int_equal(vm.pid, 1660);
        assert_int_equal(vm.vm_fd, 9);
        assert_true(vm.has_halt_poll);
        assert_true(vm.halt_poll_success_ns == 123456789);
        assert_true(vm.halt_poll_fail_ns == 987654);

        assert_int_equal(kvmstat_read_vm(root("host-6.18"), 1661, &vm), 0);
        assert_int_equal(vm.pid, 1660); /* untouched */

        assert_int_equal(kvmstat_list(root("host-6.18"), &vms, &n), 0);
        assert_int_equal(n, 1); /* the 64 global stat files are not VMs */
        assert_int_equal(vms[0].pid, 1660);
        free(vms);

        assert_int_equal(kvmstat_vcpu_tids(root("host-6.18"), 1660, 9, &v, &nv), 0);
        assert_int_equal(nv, 2);
        assert_int_equal(v[0].index, 0);
        assert_int_equal(v[0].tid, 1665);
        assert_int_equal(v[1].index, 1);
        assert_int_equal(v[1].tid, 1666);
        free(v);
        assert_int_equal(kvmstat_vcpu_tids(root("host-6.18"), 1660, 10, &v, &nv), -ENOENT);
}

static void test_multi(void **state)
{
        struct kvmstat_vm vm = {};
        struct kvmstat_vm *vms = NULL;
        struct vcpu_info *v = NULL;
        unsigned nv = 0;
        size_t n = 0;

        /* two VM fds: the count says 2, the lowest fd is reported */
        assert_int_equal(kvmstat_read_vm(root("multi"), 100, &vm), 2);
        assert_int_equal(vm.vm_fd, 11);
        assert_true(vm.halt_poll_success_ns == 5 && vm.halt_poll_fail_ns == 6);

        /* old kernel: no halt-poll files is data */
        assert_int_equal(kvmstat_read_vm(root("multi"), 200, &vm), 1);
        assert_false(vm.has_halt_poll);
        assert_true(vm.halt_poll_success_ns == 0);

        assert_int_equal(kvmstat_list(root("multi"), &vms, &n), 0);
        assert_int_equal(n, 3);
        assert_int_equal(vms[0].pid, 100);
        assert_int_equal(vms[0].vm_fd, 11);
        assert_int_equal(vms[1].pid, 100);
        assert_int_equal(vms[1].vm_fd, 12);
        assert_true(vms[1].halt_poll_success_ns == UINT64_MAX);
        assert_true(vms[1].halt_poll_fail_ns == 8);
        assert_int_equal(vms[2].pid, 200);
        free(vms);

        /* vcpu1 never ran (pid 0): left out */
        assert_int_equal(kvmstat_vcpu_tids(root("multi"), 100, 11, &v, &nv), 0);
        assert_int_equal(nv, 2);
        assert_int_equal(v[0].tid, 101);
        assert_int_equal(v[1].index, 2);
        assert_int_equal(v[1].tid, 103);
        free(v);
}

static void test_bad_and_missing(void **state)
{
        struct kvmstat_vm vm = { .pid = 42 };
        struct kvmstat_vm *vms = (void *) 1;
        struct vcpu_info *v = NULL;
        unsigned nv = 5;
        size_t n = 5;

        assert_int_equal(kvmstat_read_vm(root("bad"), 300, &vm), -EBADMSG);
        assert_int_equal(kvmstat_read_vm(root("bad"), 301, &vm), -EBADMSG);
        assert_int_equal(vm.pid, 42);
        assert_int_equal(kvmstat_list(root("bad"), &vms, &n), -EBADMSG);
        assert_int_equal(n, 5);
        assert_int_equal(kvmstat_read_vm(root("bad"), 302, &vm), 1);
        assert_int_equal(kvmstat_vcpu_tids(root("bad"), 302, 10, &v, &nv), -EBADMSG);
        assert_int_equal(nv, 5);

        /* no kvm directory: no VMs */
        vm.pid = 42;
        assert_int_equal(kvmstat_read_vm(root("nokvm"), 1, &vm), 0);
        assert_int_equal(vm.pid, 42);
        assert_int_equal(kvmstat_list(root("nokvm"), &vms, &n), 0);
        assert_int_equal(n, 0);
        assert_null(vms);
        assert_int_equal(kvmstat_read_vm("/nonexistent-debugfs", 1, &vm), 0);

        assert_int_equal(kvmstat_read_vm(root("multi"), 0, &vm), -EINVAL);
        assert_int_equal(kvmstat_read_vm(NULL, 1, &vm), -EINVAL);
}

/* This host: a real KVM VM (paused, never runs) and the real debugfs. */
static void test_real_host(void **state)
{
        struct kvmstat_vm vm = {};
        struct vcpu_info *v = NULL;
        unsigned nv = 0;
        pid_t qpid;
        int r, status;
        bool have_kvm = access("/dev/kvm", R_OK | W_OK) == 0;
        bool have_debugfs = access("/sys/kernel/debug/kvm", F_OK) == 0;

        qpid = fork();
        assert_true(qpid >= 0);
        if (qpid == 0) {
                int null = open("/dev/null", O_RDWR);

                dup2(null, STDIN_FILENO);
                dup2(null, STDOUT_FILENO);
                dup2(null, STDERR_FILENO);
                execlp("qemu-system-x86_64", "qemu-system-x86_64", "-accel", have_kvm ? "kvm" : "tcg",
                       "-smp", "2", "-m", "64", "-nographic", "-nodefaults", "-display", "none", "-S", (char *) NULL);
                _exit(127);
        }
        /* wait until QEMU has created its VM (or give up after 10 s) */
        r = 0;
        for (int i = 0; i < 200 && r == 0; i++) {
                usleep(50 * 1000);
                r = kvmstat_read_vm("/sys/kernel/debug", qpid, &vm);
        }
        print_message("/dev/kvm %s, debugfs/kvm %s: kvmstat_read_vm(real QEMU) = %d (%s)\n",
                      have_kvm ? "yes" : "no", have_debugfs ? "yes" : "no", r, r < 0 ? strerror(-r) : "ok");
        if (!have_kvm || !have_debugfs)
                assert_int_equal(r, 0);
        else {
                /* lockdown: the stat files exist but reads fail with EPERM; else real numbers */
                assert_true(r == -EPERM || (r == 1 && vm.has_halt_poll && vm.pid == qpid));
                /* the VM dir of that pid exists; vcpuN/pid is readable even under lockdown */
                int fd = -1;
                DIR *d = opendir("/sys/kernel/debug/kvm");
                struct dirent *de;

                assert_non_null(d);
                while ((de = readdir(d))) {
                        pid_t p;
                        int f;

                        if (kvmstat_parse_dirname(de->d_name, &p, &f) == 0 && p == qpid)
                                fd = f;
                }
                closedir(d);
                assert_true(fd >= 0);
                r = kvmstat_vcpu_tids("/sys/kernel/debug", qpid, fd, &v, &nv);
                assert_int_equal(r, 0);
                /* -S: no vCPU has entered KVM_RUN, so every vcpuN/pid reads 0 */
                assert_int_equal(nv, 0);
                free(v);
        }
        kill(qpid, SIGKILL);
        assert_int_equal(waitpid(qpid, &status, 0), qpid);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_dirname),
                cmocka_unit_test(test_recorded_host),
                cmocka_unit_test(test_multi),
                cmocka_unit_test(test_bad_and_missing),
                cmocka_unit_test(test_real_host),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
