/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "control.h"

static void test_parse_request(void **state)
{
        struct control_request req;
        char l1[] = "vms --json\n", l2[] = "notify started vmmpt-a\n", l3[] = "", l4[] = "vms  --json\n",
             l5[] = " vms\n", l6[] = "vms \n", l7[] = "a b c d e f g h i\n", l8[] = "vm\x01s\n", l9[] = "--json\n";

        assert_int_equal(control_parse_request(l1, &req), 0);
        assert_int_equal(req.argc, 1);
        assert_string_equal(req.argv[0], "vms");
        assert_true(req.json);
        assert_int_equal(control_parse_request(l2, &req), 0);
        assert_int_equal(req.argc, 3);
        assert_false(req.json);
        assert_string_equal(req.argv[2], "vmmpt-a");
        assert_int_equal(control_parse_request(l3, &req), -EINVAL);
        assert_int_equal(control_parse_request(l4, &req), -EINVAL);
        assert_int_equal(control_parse_request(l5, &req), -EINVAL);
        assert_int_equal(control_parse_request(l6, &req), -EINVAL);
        assert_int_equal(control_parse_request(l7, &req), -E2BIG);
        assert_int_equal(control_parse_request(l8, &req), -EINVAL);
        assert_int_equal(control_parse_request(l9, &req), -EINVAL);
}

static void test_readonly(void **state)
{
        assert_int_equal(control_command_readonly("status"), 1);
        assert_int_equal(control_command_readonly("metrics"), 1);
        assert_int_equal(control_command_readonly("reload"), 0);
        assert_int_equal(control_command_readonly("notify"), 0);
        assert_int_equal(control_command_readonly("shutdown"), -ENOENT);
        assert_int_equal(control_command_readonly("Status"), -ENOENT);
}

static void test_peer_allowed(void **state)
{
        gid_t groups[] = { 5, 7, 1001 };

        /* root: everything */
        assert_true(control_peer_allowed(0, 0, NULL, 0, 0, false, false));
        /* no group configured: only root */
        assert_false(control_peer_allowed(1000, 1000, groups, 3, 0, false, true));
        /* group member (primary or supplementary): read-only only */
        assert_true(control_peer_allowed(1000, 1001, NULL, 0, 1001, true, true));
        assert_true(control_peer_allowed(1000, 1000, groups, 3, 1001, true, true));
        assert_false(control_peer_allowed(1000, 1000, groups, 3, 1001, true, false));
        /* not a member */
        assert_false(control_peer_allowed(1000, 1000, groups, 2, 1001, true, true));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_request),
                cmocka_unit_test(test_readonly),
                cmocka_unit_test(test_peer_allowed),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
