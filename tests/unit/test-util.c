/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static void test_parse_u64(void **state)
{
        uint64_t v;

        assert_int_equal(parse_u64("0", &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(parse_u64("18446744073709551615\n", &v), 0);
        assert_true(v == UINT64_MAX);
        assert_int_equal(parse_u64("18446744073709551616", &v), -ERANGE);
        assert_int_equal(parse_u64("", &v), -EINVAL);
        assert_int_equal(parse_u64("\n", &v), -EINVAL);
        assert_int_equal(parse_u64(" 1", &v), -EINVAL);
        assert_int_equal(parse_u64("1 ", &v), -EINVAL);
        assert_int_equal(parse_u64("-1", &v), -EINVAL);
        assert_int_equal(parse_u64("+1", &v), -EINVAL);
        assert_int_equal(parse_u64("0x10", &v), -EINVAL);
        assert_int_equal(parse_u64("12\n\n", &v), -EINVAL);
}

static void test_parse_signed(void **state)
{
        int64_t v;
        int i;

        assert_int_equal(parse_i64("-9223372036854775808", &v), 0);
        assert_true(v == INT64_MIN);
        assert_int_equal(parse_i64("9223372036854775808", &v), -ERANGE);
        assert_int_equal(parse_int("-5", &i), 0);
        assert_int_equal(i, -5);
        assert_int_equal(parse_int("2147483648", &i), -ERANGE);
        assert_int_equal(parse_int("--5", &i), -EINVAL);
}

static void test_parse_duration(void **state)
{
        nsec_t v;
        bool b;

        assert_int_equal(parse_duration_ns("1s", &v), 0);
        assert_true(v == NSEC_PER_SEC);
        assert_int_equal(parse_duration_ns("250ms", &v), 0);
        assert_true(v == 250 * NSEC_PER_MSEC);
        assert_int_equal(parse_duration_ns("2.5s", &v), 0);
        assert_true(v == 2500 * NSEC_PER_MSEC);
        assert_int_equal(parse_duration_ns("1min", &v), 0);
        assert_true(v == 60 * NSEC_PER_SEC);
        assert_int_equal(parse_duration_ns("100", &v), -EINVAL);
        assert_int_equal(parse_duration_ns("1 s", &v), -EINVAL);
        assert_int_equal(parse_duration_ns("s", &v), -EINVAL);
        assert_int_equal(parse_duration_ns("1.s", &v), -EINVAL);
        assert_int_equal(parse_duration_ns("-1s", &v), -EINVAL);
        assert_int_equal(parse_duration_ns("99999999999999999999s", &v), -ERANGE);
        /* a fraction of a long unit: 0.5min is 30 s (the fraction times 60e9 ns overflowed 64 bits) */
        assert_int_equal(parse_duration_ns("0.500000000min", &v), 0);
        assert_int_equal(v, 30 * NSEC_PER_SEC);
        assert_int_equal(parse_duration_ns("0.333333333min", &v), 0);
        assert_int_equal(v, 19999999980LL);
        assert_int_equal(parse_duration_ns("1h", &v), 0);
        assert_int_equal(v, 3600 * NSEC_PER_SEC);
        assert_int_equal(parse_duration_ns("1.5h", &v), 0);
        assert_int_equal(v, 5400 * NSEC_PER_SEC);
        /* past INT64_MAX ns (about 292 years) with the fraction: out of range, not wrapped */
        assert_int_equal(parse_duration_ns("9223372036.9s", &v), -ERANGE);
        assert_int_equal(parse_duration_ns("9223372036.8s", &v), 0);
        assert_int_equal(v, 9223372036800000000LL);
        assert_int_equal(parse_bool("yes", &b), 0);
        assert_true(b);
        assert_int_equal(parse_bool("off", &b), 0);
        assert_false(b);
        assert_int_equal(parse_bool("Yes", &b), -EINVAL);
}

static void test_escape(void **state)
{
        char out[32];

        escape_bytes("ab\"\\\n\x01\xff", 7, out, sizeof(out));
        assert_string_equal(out, "ab\\x22\\x5c\\x0a\\x01\\xff");
        escape_bytes("0123456789012345678901234567890123456789", 40, out, 16);
        assert_true(strlen(out) < 16);
        assert_non_null(strstr(out, "..."));
}

/* array_grow: grows to at least the count asked, keeps the elements, never shrinks. */
static void test_array_grow(void **state)
{
        int *a = NULL;
        size_t alloc = 0;

        (void) state;
        assert_int_equal(array_grow((void **) &a, &alloc, 4, sizeof(*a)), 0);
        assert_non_null(a);
        assert_int_equal(alloc, 4);
        for (int i = 0; i < 4; i++)
                a[i] = i * 7;
        assert_int_equal(array_grow((void **) &a, &alloc, 2, sizeof(*a)), 0);
        assert_int_equal(alloc, 4);
        assert_int_equal(array_grow((void **) &a, &alloc, 1000, sizeof(*a)), 0);
        assert_int_equal(alloc, 1000);
        for (int i = 0; i < 4; i++)
                assert_int_equal(a[i], i * 7);
        /* a size that wraps: -ENOMEM, the array as it was */
        assert_int_equal(array_grow((void **) &a, &alloc, SIZE_MAX / 2, sizeof(*a)), -ENOMEM);
        assert_int_equal(alloc, 1000);
        assert_int_equal(a[3], 21);
        free(a);
}

static void test_sanitize_name(void **state)
{
        char a[] = "vm-\xc3\xa9t\xc3\xa9", b[] = "ev\xffil\x1b[31mRED\nx\x7f", c[] = "\xc2\x85\xed\xa0\x80\xe2\x82",
             d[] = "\xf0\x9f\x98\x80ok\xc0\xaf";

        sanitize_name(a);
        assert_string_equal(a, "vm-\xc3\xa9t\xc3\xa9"); /* valid UTF-8 kept */
        sanitize_name(b);
        assert_string_equal(b, "ev?il?[31mRED?x?"); /* invalid byte, ESC, newline, DEL */
        sanitize_name(c);
        assert_string_equal(c, "?????" "??"); /* C1 control, surrogate, truncated sequence */
        sanitize_name(d);
        assert_string_equal(d, "\xf0\x9f\x98\x80ok??"); /* 4-byte kept, overlong replaced */
}

static void test_strbuf(void **state)
{
        struct strbuf sb;

        strbuf_init(&sb);
        for (int i = 0; i < 1000; i++)
                strbuf_printf(&sb, "%d,", i);
        assert_false(sb.oom);
        assert_int_equal(sb.len, strlen(sb.data));
        assert_memory_equal(sb.data, "0,1,2,", 6);
        strbuf_reset(&sb);
        strbuf_json_string(&sb, "a\"b\\c\n\x01");
        assert_string_equal(sb.data, "\"a\\\"b\\\\c\\u000a\\u0001\"");
        strbuf_free(&sb);
}

static void test_files(void **state)
{
        char dir[] = "/tmp/vmmpower-test-util-XXXXXX", path[256], buf[16];

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/f", dir);
        assert_int_equal(write_file_atomic(path, "hello\n", 6, 0644), 0);
        assert_int_equal(read_small_file(path, buf, sizeof(buf)), 5);
        assert_string_equal(buf, "hello");
        assert_int_equal(write_string_at(AT_FDCWD, path, "0123456789abcdefXYZ"), 0);
        assert_int_equal(read_small_file(path, buf, sizeof(buf)), -EFBIG);
        assert_int_equal(read_small_file("/nonexistent/x", buf, sizeof(buf)), -ENOENT);
        assert_int_equal(write_string_at(AT_FDCWD, "/nonexistent/x", "1"), -ENOENT);
        assert_int_equal(path_printf(buf, 4, "%s", "abcd"), -ENAMETOOLONG);
        unlink(path);
        rmdir(dir);
}

/*
 * read_small_file() reads to the end, not one read(): a sysfs cpulist over a
 * page comes in several (here a FIFO whose writer sends two parts, 100 ms
 * apart; one read() returned the first part only).
 */
static void test_read_in_parts(void **state)
{
        char dir[] = "/tmp/vmmpower-test-util-XXXXXX", path[256], buf[64];
        pid_t pid;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/cpulist", dir);
        assert_int_equal(mkfifo(path, 0600), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int fd = open(path, O_WRONLY | O_CLOEXEC);

                if (fd < 0 || write(fd, "0-3,8-", 6) != 6)
                        _exit(1);
                usleep(100 * 1000);
                _exit(write(fd, "11,64\n", 6) == 6 ? 0 : 1);
        }
        assert_int_equal(read_small_file(path, buf, sizeof(buf)), 11);
        assert_string_equal(buf, "0-3,8-11,64");
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        unlink(path);
        rmdir(dir);
}

/*
 * write_file_atomic() does not write through a symlink planted in the
 * directory at the temp name it would use (PATH.tmp.PID before it created its
 * temp file exclusively under a fresh name): the victim keeps its content and
 * mode, PATH is a regular file with the data.
 */
static void test_atomic_no_symlink(void **state)
{
        char dir[] = "/tmp/vmmpower-test-util-XXXXXX", path[256], victim[256], trap[300], buf[32];
        struct stat st;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/metrics.prom", dir);
        snprintf(victim, sizeof(victim), "%s/victim", dir);
        snprintf(trap, sizeof(trap), "%s.tmp.%d", path, (int) getpid());
        assert_int_equal(write_file_atomic(victim, "secret\n", 7, 0600), 0);
        assert_int_equal(symlink(victim, trap), 0);
        assert_int_equal(write_file_atomic_nosync(path, "metrics\n", 8, 0644), 0);
        assert_int_equal(read_small_file(victim, buf, sizeof(buf)), 6);
        assert_string_equal(buf, "secret");
        assert_int_equal(stat(victim, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0644);
        assert_int_equal(read_small_file(path, buf, sizeof(buf)), 7);
        assert_string_equal(buf, "metrics");
        unlink(trap);
        unlink(path);
        unlink(victim);
        rmdir(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_array_grow),
                cmocka_unit_test(test_parse_u64),      cmocka_unit_test(test_parse_signed),
                cmocka_unit_test(test_parse_duration), cmocka_unit_test(test_atomic_no_symlink), cmocka_unit_test(test_read_in_parts), cmocka_unit_test(test_escape),
                cmocka_unit_test(test_strbuf),         cmocka_unit_test(test_files),
                cmocka_unit_test(test_sanitize_name),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
