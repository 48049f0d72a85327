/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "vcpu_track.h"

static void test_good(void **state)
{
        struct schedstat s;

        assert_int_equal(schedstat_parse("123 456 7\n", &s), 0);
        assert_int_equal(s.run_ns, 123);
        assert_int_equal(s.wait_ns, 456);
        assert_int_equal(s.timeslices, 7);

        assert_int_equal(schedstat_parse("0 0 0", &s), 0); /* no newline */
        assert_int_equal(s.run_ns, 0);
        assert_int_equal(s.wait_ns, 0);
        assert_int_equal(s.timeslices, 0);

        assert_int_equal(schedstat_parse("18446744073709551615 1 2\n", &s), 0);
        assert_true(s.run_ns == UINT64_MAX);
        assert_int_equal(s.wait_ns, 1);
        assert_int_equal(s.timeslices, 2);
}

static void test_bad(void **state)
{
        static const char *const bad[] = {
                "",                         /* empty */
                "\n",
                "garbage",
                "12 ab 3\n",
                "-1 2 3\n",                 /* negative */
                "1 -2 3\n",
                "18446744073709551616 1 2\n", /* overflow */
                "99999999999999999999999 1 2\n",
                "1 2\n",                    /* missing field */
                "1\n",
                "1 2 3 4\n",                /* extra field */
                "1 2 3 \n",                 /* trailing space */
                " 1 2 3\n",                 /* leading space */
                "1  2 3\n",                 /* double space */
                "1\t2\t3\n",
                "1 2 3\n\n",
                "+1 2 3\n",
                "1 2 3x",
        };
        struct schedstat s = { .run_ns = 42, .wait_ns = 43, .timeslices = 44 };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_int_equal(schedstat_parse(bad[i], &s), -EINVAL);
                /* outputs untouched on failure */
                assert_int_equal(s.run_ns, 42);
                assert_int_equal(s.wait_ns, 43);
                assert_int_equal(s.timeslices, 44);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_good),
                cmocka_unit_test(test_bad),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
