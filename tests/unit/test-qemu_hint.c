/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu_hint: [QEMU] HintSocket patterns filled with a VM's name, and the
 * checks on the socket found there (a socket, owned by the QEMU process's
 * user), on a fake procfs and sockets in a temp dir.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "qemu_hint.h"
#include "util.h"

static void test_pattern_check(void **state)
{
        static const char *const good[] = { "/run/%n.hint", "/run/qemu/%n/hint.0", "/r/%n-%n", "/100%%/%n" };
        static const char *const bad[] = { "", "run/%n", "/run/hint", "/run/%s", "/run/%n%", "/run/%N",
                                           "/run/%%n", "/run/\t%n", "/run/\x7f%n" };

        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                assert_int_equal(qemu_hint_pattern_check(good[i]), 0);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (qemu_hint_pattern_check(bad[i]) != -EINVAL)
                        fail_msg("pattern \"%s\" accepted", bad[i]);
        }
}

static void test_path(void **state)
{
        static const char *const bad_names[] = { "", ".", "..", "../x", "a/b", ".hidden", "-x", "a b", "a\\b",
                                                 "caf\xc3\xa9", "a%n", "x\n" };
        char buf[108], longname[120];

        assert_int_equal(qemu_hint_path("/run/%n.hint", "web1", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "/run/web1.hint");
        assert_int_equal(qemu_hint_path("/run/100%%/%n/%n.hint", "vmmpt-12-a_b.c+d", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "/run/100%/vmmpt-12-a_b.c+d/vmmpt-12-a_b.c+d.hint");
        for (size_t i = 0; i < ELEMENTSOF(bad_names); i++) {
                strcpy(buf, "unchanged");
                if (qemu_hint_path("/run/%n.hint", bad_names[i], buf, sizeof(buf)) != -EINVAL)
                        fail_msg("name \"%s\" accepted", bad_names[i]);
                assert_string_equal(buf, "unchanged");
        }
        assert_int_equal(qemu_hint_path("/run/%s", "web1", buf, sizeof(buf)), -EINVAL);
        /* 107 bytes fit a unix socket address, 108 do not, whatever the buffer */
        memset(longname, 'n', 102);
        longname[102] = '\0';
        assert_int_equal(qemu_hint_path("/r/%n.h", longname, buf, sizeof(buf)), 0);
        assert_int_equal(strlen(buf), 107);
        longname[102] = 'n';
        longname[103] = '\0';
        assert_int_equal(qemu_hint_path("/r/%n.h", longname, buf, sizeof(buf)), -ENAMETOOLONG);
        assert_int_equal(qemu_hint_path("/r/%n.h", "web1", buf, 9), -ENAMETOOLONG);
        assert_int_equal(qemu_hint_path("/r/%n.h", "web1", buf, 10), 0);
}

static void make_socket(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        assert_true(fd >= 0);
        assert_true(strlen(path) < sizeof(sa.sun_path));
        strcpy(sa.sun_path, path);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        close(fd); /* the socket file stays */
}

static void write_status(const char *proc, int pid, unsigned long euid)
{
        char p[200];
        FILE *f;

        snprintf(p, sizeof(p), "%s/%d/status", proc, pid);
        f = fopen(p, "we");
        assert_non_null(f);
        /* the real, saved and fs uids differ on purpose: the effective one counts */
        fprintf(f, "Name:\tqemu-system-x86\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\n"
                   "Uid:\t4321\t%lu\t4322\t4323\nGid:\t0\t0\t0\t0\n", pid, euid);
        assert_int_equal(fclose(f), 0);
}

static void test_socket_checks(void **state)
{
        char dir[] = "/tmp/test-qemu_hint.XXXXXX", proc[64], pattern[128], p[160], buf[108], cmd[128];
        struct vm_info vm = { .pid = 4242, .libvirt_id = -1 };

        assert_non_null(mkdtemp(dir));
        snprintf(proc, sizeof(proc), "%s/proc", dir);
        assert_int_equal(mkdir(proc, 0755), 0);
        snprintf(p, sizeof(p), "%s/4242", proc);
        assert_int_equal(mkdir(p, 0755), 0);
        write_status(proc, 4242, geteuid());
        snprintf(pattern, sizeof(pattern), "%s/%%n.hint", dir);
        strcpy(vm.name, "web1");

        /* not there yet */
        assert_int_equal(qemu_hint_socket(pattern, proc, &vm, buf, sizeof(buf)), -ENOENT);
        /* a socket of the process's (effective) user */
        snprintf(p, sizeof(p), "%s/web1.hint", dir);
        make_socket(p);
        strcpy(buf, "unchanged");
        assert_int_equal(qemu_hint_socket(pattern, proc, &vm, buf, sizeof(buf)), 0);
        assert_string_equal(buf, p);
        /* the process is gone */
        vm.pid = 4243;
        strcpy(buf, "unchanged");
        assert_int_equal(qemu_hint_socket(pattern, proc, &vm, buf, sizeof(buf)), -ESRCH);
        assert_string_equal(buf, "unchanged");
        vm.pid = 4242;
        /* a regular file, and a symlink to the socket, are not the VM's socket */
        strcpy(vm.name, "file");
        snprintf(p, sizeof(p), "%s/file.hint", dir);
        fclose(fopen(p, "w"));
        assert_int_equal(qemu_hint_socket(pattern, proc, &vm, buf, sizeof(buf)), -ENOTSOCK);
        strcpy(vm.name, "link");
        snprintf(p, sizeof(p), "%s/link.hint", dir);
        assert_int_equal(symlink("web1.hint", p), 0);
        assert_int_equal(qemu_hint_socket(pattern, proc, &vm, buf, sizeof(buf)), -ENOTSOCK);
        /* a name that is no file name never reaches the file system */
        strcpy(vm.name, "../web1");
        assert_int_equal(qemu_hint_socket(pattern, proc, &vm, buf, sizeof(buf)), -EINVAL);
        /* another user's process calling itself web1 (its /proc directory's owner does not count) */
        strcpy(vm.name, "web1");
        write_status(proc, 4242, geteuid() + 1);
        strcpy(buf, "unchanged");
        assert_int_equal(qemu_hint_socket(pattern, proc, &vm, buf, sizeof(buf)), -EPERM);
        assert_string_equal(buf, "unchanged");
        /* a status without a Uid line */
        snprintf(p, sizeof(p), "%s/4242/status", proc);
        fclose(fopen(p, "w"));
        assert_int_equal(qemu_hint_socket(pattern, proc, &vm, buf, sizeof(buf)), -EBADMSG);

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        assert_int_equal(system(cmd), 0);
}

/* The real /proc: this process owns a socket of its own user. */
static void test_real_proc(void **state)
{
        char dir[] = "/tmp/test-qemu_hint.XXXXXX", pattern[128], p[160], buf[108];
        struct vm_info vm = { .pid = getpid(), .libvirt_id = -1 };

        assert_non_null(mkdtemp(dir));
        snprintf(pattern, sizeof(pattern), "%s/%%n.hint", dir);
        strcpy(vm.name, "self");
        snprintf(p, sizeof(p), "%s/self.hint", dir);
        make_socket(p);
        assert_int_equal(qemu_hint_socket(pattern, "/proc", &vm, buf, sizeof(buf)), 0);
        assert_string_equal(buf, p);
        assert_int_equal(unlink(p), 0);
        assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pattern_check),
                cmocka_unit_test(test_path),
                cmocka_unit_test(test_socket_checks),
                cmocka_unit_test(test_real_proc),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
