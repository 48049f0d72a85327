/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cpuset.h"

static void roundtrip(const char *in, const char *want_out, unsigned want_count)
{
        cpuset_t s;
        char buf[256];

        assert_int_equal(cpuset_parse_list(in, &s), 0);
        assert_int_equal(cpuset_count(&s), want_count);
        assert_int_equal(cpuset_format_list(&s, buf, sizeof(buf)), (int) strlen(want_out));
        assert_string_equal(buf, want_out);
}

static void test_parse_good(void **state)
{
        cpuset_t s;

        roundtrip("0", "0", 1);
        roundtrip("0-3", "0-3", 4);
        roundtrip("0-3\n", "0-3", 4);
        roundtrip("0-7,16-23", "0-7,16-23", 16);
        roundtrip("1,2,3,5", "1-3,5", 4);
        roundtrip("3,1,2", "1-3", 3);        /* unordered input is accepted, output is canonical */
        roundtrip("5-5", "5", 1);
        roundtrip("0,0,0-1", "0-1", 2);      /* duplicates collapse */
        roundtrip("63-64", "63-64", 2);      /* word boundary */
        roundtrip("4095", "4095", 1);        /* last representable */
        roundtrip("0-4095", "0-4095", 4096);

        assert_int_equal(cpuset_parse_list("", &s), 0);
        assert_true(cpuset_empty(&s));
        assert_int_equal(cpuset_parse_list("\n", &s), 0);
        assert_true(cpuset_empty(&s));
        assert_int_equal(cpuset_format_list(&s, (char[8]) { 0 }, 8), 0);

        assert_int_equal(cpuset_parse_list("2,64,130", &s), 0);
        assert_true(cpuset_isset(&s, 64));
        assert_false(cpuset_isset(&s, 63));
        assert_false(cpuset_isset(&s, 100000)); /* out of range is simply not set */
        assert_int_equal(cpuset_next(&s, 0), 2);
        assert_int_equal(cpuset_next(&s, 3), 64);
        assert_int_equal(cpuset_next(&s, 65), 130);
        assert_int_equal(cpuset_next(&s, 131), -1);
        int seen = 0;
        CPUSET_FOREACH(c, &s) seen += c;
        assert_int_equal(seen, 2 + 64 + 130);
}

static void test_parse_bad(void **state)
{
        static const char *const bad[] = {
                "a", "-1", "1-", "-", ",", "1,", ",1", "1,,2", "1 2", " 1", "1 ", "1\n\n", "1-2-3",
                "0x3", "1.5", "+1", "3-1" /* reversed */, "10-9", "1\n2",
        };
        cpuset_t s, orig;

        assert_int_equal(cpuset_parse_list("7", &orig), 0);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                s = orig;
                if (cpuset_parse_list(bad[i], &s) != -EINVAL) {
                        fprintf(stderr, "accepted bad cpulist \"%s\"\n", bad[i]);
                        fail();
                }
                assert_true(cpuset_equal(&s, &orig)); /* output untouched on failure */
        }
}

static void test_parse_e2big(void **state)
{
        cpuset_t s;

        assert_int_equal(cpuset_parse_list("4096", &s), -E2BIG);
        assert_int_equal(cpuset_parse_list("0-4096", &s), -E2BIG);
        assert_int_equal(cpuset_parse_list("1,99999999999999999999", &s), -E2BIG);
}

static void test_format_small_buffer(void **state)
{
        cpuset_t s;
        char buf[8];

        assert_int_equal(cpuset_parse_list("0,2,4,6,8,10", &s), 0);
        assert_int_equal(cpuset_format_list(&s, buf, sizeof(buf)), -ENOBUFS);
        assert_int_equal(cpuset_format_list(&s, buf, 0), -ENOBUFS);
        assert_int_equal(cpuset_parse_list("0-3", &s), 0);
        assert_int_equal(cpuset_format_list(&s, buf, 4), 3); /* exactly fits "0-3" + NUL */
        assert_int_equal(cpuset_format_list(&s, buf, 3), -ENOBUFS);
}

static void test_equal_count(void **state)
{
        cpuset_t a, b;

        assert_int_equal(cpuset_parse_list("0-3", &a), 0);
        assert_int_equal(cpuset_parse_list("3,2,1,0", &b), 0);
        assert_true(cpuset_equal(&a, &b));
        cpuset_clear(&b, 2);
        assert_false(cpuset_equal(&a, &b));
        assert_int_equal(cpuset_count(&b), 3);
        cpuset_set(&b, 4000);
        assert_int_equal(cpuset_count(&b), 4);
        cpuset_zero(&b);
        assert_true(cpuset_empty(&b));
}

/* cpuset_subset(): every CPU of a in b, across 64-bit words; the empty set is in any. */
static void test_subset(void **state)
{
        cpuset_t a, b, e;

        assert_int_equal(cpuset_parse_list("1,70", &a), 0);
        assert_int_equal(cpuset_parse_list("0-2,64-127", &b), 0);
        cpuset_zero(&e);
        assert_true(cpuset_subset(&a, &b));
        assert_false(cpuset_subset(&b, &a));
        assert_true(cpuset_subset(&a, &a));
        assert_true(cpuset_subset(&e, &a));
        cpuset_set(&a, 4000);
        assert_false(cpuset_subset(&a, &b));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_good),
                cmocka_unit_test(test_parse_bad),
                cmocka_unit_test(test_parse_e2big),
                cmocka_unit_test(test_format_small_buffer),
                cmocka_unit_test(test_equal_count),
                cmocka_unit_test(test_subset),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
