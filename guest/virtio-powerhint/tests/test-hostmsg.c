/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hostmsg.h"
#include "guest_hint.h" /* the host's reply buffer size */
#include "hint_proto.h" /* the host's serialisers: the guest must parse what they write */

static int parse(const char *s, struct hostmsg *m)
{
        return hostmsg_parse(s, strlen(s), m);
}

static void test_good(void **state)
{
        struct hostmsg m;

        assert_int_equal(parse("WELCOME 1 vcpus=4 max_level=900 boost_cap_ms=500 rate=10 burst=20 trust=full", &m), 0);
        assert_int_equal(m.type, HOSTMSG_WELCOME);
        assert_int_equal(m.version, 1);
        assert_int_equal(m.vcpus, 4);
        assert_int_equal(m.max_level, 900);
        assert_int_equal(m.boost_cap_ms, 500);
        assert_int_equal(m.rate, 10);
        assert_int_equal(m.burst, 20);
        assert_string_equal(m.trust, "full");
        /* unknown keys from a newer host are skipped; max_level defaults to 1024 */
        assert_int_equal(parse("WELCOME 1 color=blue vcpus=2", &m), 0);
        assert_int_equal(m.max_level, 1024);
        assert_int_equal(m.vcpus, 2);

        assert_int_equal(parse("GRANT 3 768", &m), 0);
        assert_int_equal(m.type, HOSTMSG_GRANT);
        assert_int_equal(m.vcpu, 3);
        assert_int_equal(m.level, 768);
        assert_int_equal(parse("LIMIT 0 128 1024", &m), 0);
        assert_int_equal(m.type, HOSTMSG_LIMIT);
        assert_int_equal(m.min_level, 128);
        assert_int_equal(m.max_level, 1024);
        assert_int_equal(parse("ERR vcpu no such vcpu", &m), 0);
        assert_int_equal(m.type, HOSTMSG_ERR);
        assert_string_equal(m.code, "vcpu");
        assert_string_equal(m.text, "no such vcpu");
        assert_int_equal(parse("ERR handshake", &m), 0);
        assert_string_equal(m.text, "");
}

static void test_bad(void **state)
{
        static const char *const bad[] = {
                "", "GRANT", "GRANT 1", "GRANT 1 2 3", "GRANT 1 1025", "GRANT -1 5", "GRANT 01 5", "GRANT 1  5",
                " GRANT 1 5", "GRANT 1 5 ", "grant 1 5", "GRANTS 1 5", "GRANT 4096 5", "GRANT 1 99999999999",
                "LIMIT 0 600 500", "LIMIT 0 0", "LIMIT 0 0 1025", "WELCOME", "WELCOME x", "WELCOME 1 vcpus=",
                "WELCOME 1 vcpus=x", "WELCOME 1 max_level=2000", "WELCOME 1 =5", "WELCOME 1 novalue",
                "WELCOME 1 trust=FULL", "ERR", "ERR ", "ERR Bad text", "ERR  x", "ERR abcdefghijklmnopq x",
                "GRANT 1 5\r", "HELLO 1 vcpus=1",
        };
        struct hostmsg m;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (parse(bad[i], &m) == 0) {
                        print_error("accepted \"%s\"\n", bad[i]);
                        fail();
                }
        assert_int_equal(hostmsg_parse("GRANT 1 5\0", 10, &m), -EINVAL);
        assert_int_equal(parse("GRANT 1 1025", &m), -ERANGE);
}

struct seen {
        int lines, discards;
        char last[HOSTMSG_LINE_MAX];
};

static void cb(enum hostmsg_event ev, const char *line, size_t len, void *userdata)
{
        struct seen *s = userdata;

        if (ev == HOSTMSG_EV_DISCARD) {
                s->discards++;
                return;
        }
        assert_true(len < HOSTMSG_LINE_MAX);
        memcpy(s->last, line, len);
        s->last[len] = 0;
        s->lines++;
}

static void test_framer(void **state)
{
        struct hostmsg_framer f;
        struct seen s = {};
        char big[300];
        static const char in[] = "GRANT 0 1\nGR\x01NT 0 2\nGRANT 0 3\n";

        hostmsg_framer_init(&f);
        for (size_t i = 0; i < sizeof(in) - 1; i++)
                hostmsg_framer_push(&f, in + i, 1, cb, &s);
        assert_int_equal(s.lines, 2);
        assert_int_equal(s.discards, 1);
        assert_string_equal(s.last, "GRANT 0 3");

        memset(big, 'G', sizeof(big));
        hostmsg_framer_push(&f, big, sizeof(big), cb, &s);
        hostmsg_framer_push(&f, "\nGRANT 1 4\n", 11, cb, &s);
        assert_int_equal(s.discards, 2);
        assert_int_equal(s.lines, 3);
        assert_string_equal(s.last, "GRANT 1 4");

        hostmsg_framer_push(&f, "GRANT 1", 7, cb, &s);
        hostmsg_framer_reset(&f);
        hostmsg_framer_push(&f, " 5\n", 3, cb, &s);
        assert_string_equal(s.last, " 5");
}

static void test_host_serialisers(void **state)
{
        struct hint_policy p;
        struct hint_vm *vm;
        struct strbuf sb;
        struct hostmsg m;
        char *save = NULL;
        int n = 0;

        hint_policy_init(&p);
        p.trust = HINT_TRUST_FULL;
        p.max_level = 777;
        p.boost_cap_ms = 250;
        vm = hint_vm_new(6, &p, 0);
        assert_non_null(vm);
        strbuf_init(&sb);
        assert_int_equal(hint_format_welcome(&sb, vm), 0);
        assert_int_equal(hint_format_grant(&sb, 5, 1024), 0);
        assert_int_equal(hint_format_limit(&sb, 4, 0, 512), 0);
        assert_int_equal(hint_format_err(&sb, "vcpu", "no such vcpu"), 0);
        /* what a real connection answers to garbage and to HELLO */
        hint_vm_feed(vm, "LEVEL 0 1\nHELLO 1 vcpus=6\n", 26, 0, &sb);

        for (char *l = strtok_r(sb.data, "\n", &save); l; l = strtok_r(NULL, "\n", &save), n++) {
                assert_int_equal(hostmsg_parse(l, strlen(l), &m), 0);
                switch (n) {
                case 0:
                case 5:
                        assert_int_equal(m.type, HOSTMSG_WELCOME);
                        assert_int_equal(m.version, 1);
                        assert_int_equal(m.vcpus, 6);
                        assert_int_equal(m.max_level, 777);
                        assert_int_equal(m.boost_cap_ms, 250);
                        assert_int_equal(m.rate, p.rate_per_sec);
                        assert_int_equal(m.burst, p.burst);
                        assert_string_equal(m.trust, "full");
                        break;
                case 1:
                        assert_int_equal(m.type, HOSTMSG_GRANT);
                        assert_int_equal(m.vcpu, 5);
                        assert_int_equal(m.level, 1024);
                        break;
                case 2:
                        assert_int_equal(m.type, HOSTMSG_LIMIT);
                        assert_int_equal(m.vcpu, 4);
                        assert_int_equal(m.max_level, 512);
                        break;
                case 3:
                case 4:
                        assert_int_equal(m.type, HOSTMSG_ERR);
                        assert_string_equal(m.code, n == 3 ? "vcpu" : "handshake");
                        break;
                default:
                        /* the WELCOME to HELLO is followed by every vCPU's LIMIT (policy max 777) */
                        assert_int_equal(m.type, HOSTMSG_LIMIT);
                        assert_int_equal(m.vcpu, n - 6);
                        assert_int_equal(m.max_level, 777);
                        break;
                }
        }
        assert_int_equal(n, 6 + 6);
        strbuf_free(&sb);
        hint_vm_free(vm);
}

struct tally {
        int lines, discards, bad, welcomes, limits, grants;
        uint32_t max_vcpu;
};

static void tally_cb(enum hostmsg_event ev, const char *line, size_t len, void *userdata)
{
        struct tally *t = userdata;
        struct hostmsg m;

        if (ev == HOSTMSG_EV_DISCARD) {
                t->discards++;
                return;
        }
        t->lines++;
        if (hostmsg_parse(line, len, &m) < 0) {
                t->bad++;
                return;
        }
        t->welcomes += m.type == HOSTMSG_WELCOME;
        t->limits += m.type == HOSTMSG_LIMIT;
        t->grants += m.type == HOSTMSG_GRANT;
        if ((m.type == HOSTMSG_LIMIT || m.type == HOSTMSG_GRANT) && m.vcpu > t->max_vcpu)
                t->max_vcpu = m.vcpu;
}

/*
 * The largest VM the host serves (HINT_VCPUS_MAX vCPUs): its answer to a
 * HELLO (WELCOME and a LIMIT per vCPU) and a GRANT per vCPU fit the host's
 * reply buffer at once, and the guest, reading them 4 KiB at a time as
 * port_read() does, parses every line.
 */
static void test_host_replies_max_vcpus(void **state)
{
        struct hint_policy p;
        struct hint_vm *vm;
        struct strbuf sb;
        struct hostmsg_framer f;
        struct tally t = {};
        char hello[64];
        int n;

        assert_int_equal(HOSTMSG_VCPUS_MAX, HINT_VCPUS_MAX);
        hint_policy_init(&p);
        vm = hint_vm_new(HINT_VCPUS_MAX, &p, 0);
        assert_non_null(vm);
        strbuf_init(&sb);
        n = snprintf(hello, sizeof(hello), "HELLO 1 vcpus=%u\n", HINT_VCPUS_MAX);
        hint_vm_feed(vm, hello, (size_t) n, 0, &sb);
        for (uint32_t v = 0; v < HINT_VCPUS_MAX; v++)
                assert_int_equal(hint_format_grant(&sb, v, HINT_LEVEL_MAX - v % 1000), 0);
        assert_true(sb.len <= HINT_OUT_BYTES(HINT_VCPUS_MAX));

        hostmsg_framer_init(&f);
        for (size_t o = 0; o < sb.len; o += 4096)
                hostmsg_framer_push(&f, sb.data + o, sb.len - o < 4096 ? sb.len - o : 4096, tally_cb, &t);
        assert_int_equal(t.discards, 0);
        assert_int_equal(t.bad, 0);
        assert_int_equal(t.welcomes, 1);
        assert_int_equal(t.limits, HINT_VCPUS_MAX);
        assert_int_equal(t.grants, HINT_VCPUS_MAX);
        assert_int_equal(t.lines, 1 + 2 * HINT_VCPUS_MAX);
        assert_int_equal(t.max_vcpu, HINT_VCPUS_MAX - 1);
        strbuf_free(&sb);
        hint_vm_free(vm);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_good),
                cmocka_unit_test(test_bad),
                cmocka_unit_test(test_framer),
                cmocka_unit_test(test_host_serialisers),
                cmocka_unit_test(test_host_replies_max_vcpus),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
