/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hint_proto.h"

#define S(x) (x), (sizeof(x) - 1)

static int parse(const char *s, struct hint_msg *m, enum hint_reject *why)
{
        return hint_parse_line(s, strlen(s), m, why);
}

static void expect_reject(const char *s, enum hint_reject want)
{
        struct hint_msg m;
        enum hint_reject why = _HINT_REJECT_MAX;

        if (parse(s, &m, &why) != -EINVAL || why != want) {
                print_error("line \"%s\": want reject %s, got %s\n", s, hint_reject_to_string(want),
                            hint_reject_to_string(why));
                fail();
        }
}

static void test_parse_each_kind(void **state)
{
        struct hint_msg m;
        enum hint_reject why;

        assert_int_equal(parse("HELLO 1 vcpus=4 agent=powerhintd/0.1", &m, &why), 0);
        assert_int_equal(m.type, HINT_MSG_HELLO);
        assert_int_equal(m.version, 1);
        assert_int_equal(m.vcpus, 4);
        assert_string_equal(m.agent, "powerhintd/0.1");

        assert_int_equal(parse("HELLO 1 agent=x vcpus=2", &m, &why), 0);
        assert_int_equal(m.vcpus, 2);
        assert_string_equal(m.agent, "x");
        assert_int_equal(parse("HELLO 1 vcpus=1", &m, &why), 0);
        assert_string_equal(m.agent, "");

        assert_int_equal(parse("LEVEL 3 1024", &m, &why), 0);
        assert_int_equal(m.type, HINT_MSG_LEVEL);
        assert_int_equal(m.vcpu, 3);
        assert_int_equal(m.value, 1024);
        assert_int_equal(parse("LEVEL 0 0", &m, &why), 0);
        assert_int_equal(m.value, 0);

        assert_int_equal(parse("FASTER 1 100", &m, &why), 0);
        assert_int_equal(m.type, HINT_MSG_FASTER);
        assert_int_equal(m.value, 100);
        assert_int_equal(parse("SLOWER 2 7", &m, &why), 0);
        assert_int_equal(m.type, HINT_MSG_SLOWER);
        assert_int_equal(m.vcpu, 2);
        assert_int_equal(parse("BOOST 0 10000", &m, &why), 0);
        assert_int_equal(m.type, HINT_MSG_BOOST);
        assert_int_equal(m.value, 10000);
        assert_int_equal(parse("UTIL 4095 512", &m, &why), 0);
        assert_int_equal(m.type, HINT_MSG_UTIL);
        assert_int_equal(m.vcpu, 4095);
        assert_int_equal(m.value, 512);
}

static void test_parse_bad(void **state)
{
        /* keywords are exact */
        expect_reject("level 0 1", HINT_REJECT_SYNTAX);
        expect_reject("LEVELS 0 1", HINT_REJECT_SYNTAX);
        expect_reject("LEVE 0 1", HINT_REJECT_SYNTAX);
        expect_reject("STATE", HINT_REJECT_SYNTAX);
        /* field count and separators */
        expect_reject("LEVEL 0", HINT_REJECT_SYNTAX);
        expect_reject("LEVEL 0 1 2", HINT_REJECT_SYNTAX);
        expect_reject("LEVEL  0 1", HINT_REJECT_SYNTAX);
        expect_reject(" LEVEL 0 1", HINT_REJECT_SYNTAX);
        expect_reject("LEVEL 0 1 ", HINT_REJECT_SYNTAX);
        expect_reject(" ", HINT_REJECT_SYNTAX);
        /* numbers */
        expect_reject("LEVEL 0 -1", HINT_REJECT_NUMBER);
        expect_reject("LEVEL 0 +1", HINT_REJECT_NUMBER);
        expect_reject("LEVEL 0 01", HINT_REJECT_NUMBER);
        expect_reject("LEVEL 00 1", HINT_REJECT_NUMBER);
        expect_reject("LEVEL 0 0x10", HINT_REJECT_NUMBER);
        expect_reject("LEVEL 0 1.5", HINT_REJECT_NUMBER);
        expect_reject("LEVEL x 1", HINT_REJECT_NUMBER);
        /* ranges and overflow */
        expect_reject("LEVEL 0 1025", HINT_REJECT_RANGE);
        expect_reject("UTIL 0 1025", HINT_REJECT_RANGE);
        expect_reject("FASTER 0 0", HINT_REJECT_RANGE);
        expect_reject("SLOWER 0 0", HINT_REJECT_RANGE);
        expect_reject("BOOST 0 0", HINT_REJECT_RANGE);
        expect_reject("BOOST 0 10001", HINT_REJECT_RANGE);
        expect_reject("LEVEL 4096 1", HINT_REJECT_RANGE);
        expect_reject("LEVEL 0 4294967296", HINT_REJECT_RANGE);
        expect_reject("LEVEL 0 4294967295", HINT_REJECT_RANGE);
        expect_reject("LEVEL 0 99999999999999999999999", HINT_REJECT_RANGE);
        /* HELLO */
        expect_reject("HELLO", HINT_REJECT_SYNTAX);
        expect_reject("HELLO 2 vcpus=4", HINT_REJECT_VERSION);
        expect_reject("HELLO 0", HINT_REJECT_VERSION);
        expect_reject("HELLO 99999999999", HINT_REJECT_RANGE);
        expect_reject("HELLO 1", HINT_REJECT_SYNTAX);
        expect_reject("HELLO 1 vcpus=0", HINT_REJECT_RANGE);
        expect_reject("HELLO 1 vcpus=4097", HINT_REJECT_RANGE);
        expect_reject("HELLO 1 vcpus=4 vcpus=4", HINT_REJECT_SYNTAX);
        expect_reject("HELLO 1 vcpus=4 color=red", HINT_REJECT_SYNTAX);
        expect_reject("HELLO 1 vcpus=4 agent=", HINT_REJECT_SYNTAX);
        expect_reject("HELLO 1 vcpus=4 agent=a\"b", HINT_REJECT_SYNTAX);
        expect_reject("HELLO 1 vcpus=4 agent=123456789012345678901234567890123", HINT_REJECT_SYNTAX);
        expect_reject("HELLO 1 vcpus", HINT_REJECT_SYNTAX);
        /* characters */
        expect_reject("LEVEL 0 1\r", HINT_REJECT_CHAR);
        expect_reject("LEVEL\t0 1", HINT_REJECT_CHAR);
        expect_reject("LEVEL 0 1\x7f", HINT_REJECT_CHAR);
        expect_reject("LEVEL 0 \xc3\xa9", HINT_REJECT_CHAR);

        /* embedded NUL: length-delimited, the NUL is a bad char, not a terminator */
        struct hint_msg m;
        enum hint_reject why;
        assert_int_equal(hint_parse_line(S("LEVEL 0 1\0junk"), &m, &why), -EINVAL);
        assert_int_equal(why, HINT_REJECT_CHAR);
}

/* ---- framer ---- */

struct frames {
        char lines[16][HINT_LINE_MAX + 1];
        int n_lines, n_oversized, n_badchar;
        char order[64];
        int n_order;
};

static void frame_cb(enum hint_frame_event ev, const char *line, size_t len, void *userdata)
{
        struct frames *fr = userdata;

        assert_true(fr->n_order < (int) sizeof(fr->order));
        switch (ev) {
        case HINT_FRAME_LINE:
                assert_true(len < HINT_LINE_MAX);
                assert_true(fr->n_lines < 16);
                memcpy(fr->lines[fr->n_lines], line, len);
                fr->lines[fr->n_lines][len] = 0;
                fr->n_lines++;
                fr->order[fr->n_order++] = 'L';
                break;
        case HINT_FRAME_OVERSIZED:
                fr->n_oversized++;
                fr->order[fr->n_order++] = 'O';
                break;
        case HINT_FRAME_BADCHAR:
                fr->n_badchar++;
                fr->order[fr->n_order++] = 'B';
                break;
        }
}

static void test_framer_oversized_and_recovery(void **state)
{
        struct hint_framer f;
        struct frames fr = {};
        char big[400];

        hint_framer_init(&f);
        /* exactly 127 bytes + '\n' is fine */
        memset(big, 'A', 127);
        big[127] = '\n';
        hint_framer_push(&f, big, 128, frame_cb, &fr);
        assert_int_equal(fr.n_lines, 1);
        assert_int_equal(strlen(fr.lines[0]), 127);

        /* 128 bytes before '\n' is oversized, the rest of the line is dropped, next line ok */
        memset(big, 'B', 300);
        big[300] = '\n';
        hint_framer_push(&f, big, 301, frame_cb, &fr);
        hint_framer_push(&f, S("LEVEL 0 1\n"), frame_cb, &fr);
        assert_int_equal(fr.n_oversized, 1);
        assert_int_equal(fr.n_lines, 2);
        assert_string_equal(fr.lines[1], "LEVEL 0 1");
        assert_int_equal(f.resyncs, 1);

        /* bad byte poisons its line only, reported once */
        hint_framer_push(&f, S("LEV\0EL 0 1\r\nLEVEL 1 2\n"), frame_cb, &fr);
        assert_int_equal(fr.n_badchar, 1);
        assert_int_equal(fr.n_lines, 3);
        assert_string_equal(fr.lines[2], "LEVEL 1 2");
        assert_string_equal(fr.order, "LOLBL");
}

static void test_framer_chunking(void **state)
{
        static const char in[] = "HELLO 1 vcpus=2\nLEVEL 0 10\n\nUTIL 1 5\nLEVEL 1";
        struct hint_framer f;
        struct frames a = {}, b = {};

        /* all at once vs byte by byte: same lines */
        hint_framer_init(&f);
        hint_framer_push(&f, in, sizeof(in) - 1, frame_cb, &a);
        hint_framer_init(&f);
        for (size_t i = 0; i < sizeof(in) - 1; i++)
                hint_framer_push(&f, in + i, 1, frame_cb, &b);
        assert_int_equal(a.n_lines, 4);
        assert_int_equal(b.n_lines, 4);
        for (int i = 0; i < 4; i++)
                assert_string_equal(a.lines[i], b.lines[i]);
        assert_string_equal(b.lines[2], "");
        assert_string_equal(b.lines[3], "UTIL 1 5");

        /* disconnect mid-line: the partial "LEVEL 1" is dropped, not glued to the next */
        assert_int_equal(f.len, 7);
        hint_framer_reset(&f);
        assert_int_equal(f.partial_dropped, 1);
        hint_framer_push(&f, S(" 5\nLEVEL 1 6\n"), frame_cb, &b);
        assert_int_equal(b.n_lines, 6);
        assert_string_equal(b.lines[4], " 5");
        assert_string_equal(b.lines[5], "LEVEL 1 6");
        hint_framer_reset(&f);
        assert_int_equal(f.partial_dropped, 1); /* nothing pending: not counted */
}

/* ---- policy ---- */

static void test_policy_merge(void **state)
{
        struct hint_policy d, p;
        struct hint_policy_override o = {};
        enum hint_trust t;

        hint_policy_init(&d);
        assert_int_equal(hint_policy_validate(&d), 0);
        assert_int_equal(d.trust, HINT_TRUST_ADVISORY);
        assert_int_equal(hint_policy_merge(&d, NULL, &p), 0);
        assert_memory_equal(&d, &p, sizeof(p));

        o.has_trust = true;
        o.trust = HINT_TRUST_FULL;
        o.has_burst = true;
        o.burst = 3;
        assert_int_equal(hint_policy_merge(&d, &o, &p), 0);
        assert_int_equal(p.trust, HINT_TRUST_FULL);
        assert_int_equal(p.burst, 3);
        assert_int_equal(p.rate_per_sec, HINT_DEFAULT_RATE_PER_SEC);

        p.trust = HINT_TRUST_NONE;
        o.has_rate_per_sec = true;
        o.rate_per_sec = 0;
        assert_int_equal(hint_policy_merge(&d, &o, &p), -EINVAL);
        assert_int_equal(p.trust, HINT_TRUST_NONE); /* untouched on failure */
        o.rate_per_sec = 1;
        o.has_max_level = true;
        o.max_level = 1025;
        assert_int_equal(hint_policy_merge(&d, &o, &p), -EINVAL);

        assert_int_equal(hint_trust_from_string("full", &t), 0);
        assert_int_equal(t, HINT_TRUST_FULL);
        assert_int_equal(hint_trust_from_string("Full", &t), -EINVAL);
        assert_string_equal(hint_trust_to_string(HINT_TRUST_NONE), "none");
}

/* ---- token bucket ---- */

static void test_bucket(void **state)
{
        struct hint_policy p;
        struct hint_bucket b;
        nsec_t t = 1000 * NSEC_PER_SEC;
        int got;

        hint_policy_init(&p);
        p.rate_per_sec = 10;
        p.burst = 5;
        hint_bucket_init(&b, &p, t);
        assert_true(b.tokens_milli == 5000);

        /* burst drains in one instant */
        got = 0;
        for (int i = 0; i < 20; i++)
                got += hint_bucket_take(&b, &p, t);
        assert_int_equal(got, 5);

        /* 10/s: 99 ms later nothing, 100 ms later exactly one */
        assert_false(hint_bucket_take(&b, &p, t + 99 * NSEC_PER_MSEC));
        assert_true(hint_bucket_take(&b, &p, t + 100 * NSEC_PER_MSEC));
        assert_false(hint_bucket_take(&b, &p, t + 100 * NSEC_PER_MSEC));

        /* tiny steps accumulate: 1 µs apart for 100 ms yields one token, not zero */
        nsec_t u = t + 100 * NSEC_PER_MSEC;
        got = 0;
        for (int i = 1; i <= 100000; i++)
                got += hint_bucket_take(&b, &p, u + i * NSEC_PER_USEC);
        assert_int_equal(got, 1);

        /* sustained: over 10 s of continuous asking, 10/s plus nothing banked */
        u += 100 * NSEC_PER_MSEC;
        got = 0;
        for (int i = 1; i <= 10000; i++)
                got += hint_bucket_take(&b, &p, u + i * NSEC_PER_MSEC);
        assert_in_range(got, 99, 100);

        /* a long pause fills to burst, never beyond */
        u += 10 * NSEC_PER_SEC + 3600 * NSEC_PER_SEC;
        hint_bucket_refill(&b, &p, u);
        assert_true(b.tokens_milli == 5000);
        /* time going backwards refills nothing and does not crash */
        for (int i = 0; i < 5; i++)
                assert_true(hint_bucket_take(&b, &p, u));
        assert_false(hint_bucket_take(&b, &p, u - NSEC_PER_SEC));
        assert_true(b.tokens_milli < 1000);

        /* high rate: 100000/s, 1 ms gives 100 tokens (capped by burst) */
        p.rate_per_sec = 100000;
        p.burst = 1000;
        hint_bucket_init(&b, &p, 0);
        b.tokens_milli = 0;
        hint_bucket_refill(&b, &p, NSEC_PER_MSEC);
        assert_true(b.tokens_milli == 100 * 1000);
}

/* ---- decay ---- */

static void test_decay(void **state)
{
        nsec_t hl = 2 * NSEC_PER_SEC;

        assert_int_equal(hint_decay_weight(0, hl), 1024);
        assert_int_equal(hint_decay_weight(-5, hl), 1024);
        assert_int_equal(hint_decay_weight(hl, hl), 512);
        assert_int_equal(hint_decay_weight(2 * hl, hl), 256);
        assert_int_equal(hint_decay_weight(hl / 2, hl), 724); /* 1024 / sqrt(2) = 724.08 */
        assert_int_equal(hint_decay_weight(7 * hl, hl), 8);
        assert_int_equal(hint_decay_weight(8 * hl - 1, hl), 4);
        assert_int_equal(hint_decay_weight(8 * hl, hl), 0);
        /* monotone */
        uint32_t prev = 1024;
        for (nsec_t a = 0; a < 9 * hl; a += hl / 64) {
                uint32_t w = hint_decay_weight(a, hl);
                assert_true(w <= prev);
                prev = w;
        }
}

/* ---- per-VM ---- */

static struct hint_vm *new_vm(uint32_t n, enum hint_trust trust, nsec_t now)
{
        struct hint_policy p;
        struct hint_vm *vm;

        hint_policy_init(&p);
        p.trust = trust;
        p.max_level = 900;
        p.boost_cap_ms = 500;
        p.rate_per_sec = 10;
        p.burst = 3;
        vm = hint_vm_new(n, &p, now);
        assert_non_null(vm);
        return vm;
}

static int feed(struct hint_vm *vm, const char *s, nsec_t now, struct strbuf *reply)
{
        return hint_vm_feed(vm, s, strlen(s), now, reply);
}

static void test_vm_handshake(void **state)
{
        struct strbuf out;
        struct hint_vm *vm = new_vm(2, HINT_TRUST_FULL, 0);
        struct hint_effective e;

        strbuf_init(&out);
        /* hints before HELLO are rejected and answered once */
        assert_int_equal(feed(vm, "LEVEL 0 100\nLEVEL 1 100\n", 0, &out), 0);
        assert_true(vm->counters.rejected[HINT_REJECT_HANDSHAKE] == 2);
        assert_true(vm->counters.errors_suppressed == 1);
        assert_string_equal(out.data, "ERR handshake HELLO first\n");
        assert_int_equal(hint_vm_effective(vm, 0, 0, &e), 0);
        assert_int_equal(e.weight, 0);

        /* wrong version: ERR version, still not handshaked (ERR rate limit passed: 2 s later) */
        strbuf_reset(&out);
        feed(vm, "HELLO 2 vcpus=2 whatever\n", 2 * NSEC_PER_SEC, &out);
        assert_string_equal(out.data, "ERR version supported=1\n");
        assert_false(vm->handshaked);

        /* guest claims 64 vCPUs: clamped to the 2 the host knows */
        strbuf_reset(&out);
        feed(vm, "\nHELLO 1 vcpus=64 agent=powerhintd/0.1\n", 2 * NSEC_PER_SEC, &out);
        assert_true(vm->handshaked);
        assert_int_equal(vm->guest_vcpus, 2);
        assert_true(vm->counters.clamped == 1);
        assert_string_equal(vm->agent, "powerhintd/0.1");
        assert_string_equal(out.data,
                            "WELCOME 1 vcpus=2 max_level=900 boost_cap_ms=500 rate=10 burst=3 trust=full\n"
                            "LIMIT 0 0 900\nLIMIT 1 0 900\n");

        /* a repeated HELLO within HINT_WELCOME_INTERVAL_NS is not answered (a HELLO flood costs
         * no replies); one after it is */
        strbuf_reset(&out);
        for (int i = 0; i < 100; i++)
                feed(vm, "HELLO 1 vcpus=2\n", 2 * NSEC_PER_SEC + i * NSEC_PER_MSEC, &out);
        assert_int_equal(out.len, 0);
        assert_true(vm->counters.welcomes_suppressed == 100);
        assert_true(vm->counters.handshakes == 101);
        feed(vm, "HELLO 1 vcpus=2\n", 2 * NSEC_PER_SEC + HINT_WELCOME_INTERVAL_NS, &out);
        assert_non_null(strstr(out.data, "WELCOME 1 vcpus=2 "));
        assert_non_null(strstr(out.data, "LIMIT 1 0 900\n"));

        /* vCPU index beyond the real count */
        feed(vm, "LEVEL 2 100\nUTIL 4095 1\n", 2 * NSEC_PER_SEC, NULL);
        assert_true(vm->counters.rejected[HINT_REJECT_VCPU] == 2);

        /* disconnect: handshake must be redone */
        hint_vm_disconnect(vm);
        assert_false(vm->handshaked);
        feed(vm, "LEVEL 0 100\n", 3 * NSEC_PER_SEC, NULL);
        assert_true(vm->counters.rejected[HINT_REJECT_HANDSHAKE] == 3);
        assert_true(vm->counters.handshakes == 102);
        /* the first HELLO of the next connection is answered at once */
        strbuf_reset(&out);
        feed(vm, "HELLO 1 vcpus=2\n", 3 * NSEC_PER_SEC, &out);
        assert_non_null(strstr(out.data, "WELCOME 1 "));

        strbuf_free(&out);
        hint_vm_free(vm);
}

static void test_vm_levels_and_tokens(void **state)
{
        struct hint_vm *vm = new_vm(4, HINT_TRUST_FULL, 0);
        struct hint_effective e;
        nsec_t t = 10 * NSEC_PER_SEC;

        assert_int_equal(feed(vm, "HELLO 1 vcpus=4\n", t, NULL), 0);
        /* three changes: three tokens (burst 3); the fourth finds the bucket empty and, with
         * trust=full, is dropped: the bucket limits the effect, not only the re-planning */
        assert_int_equal(feed(vm, "LEVEL 0 100\nLEVEL 1 200\nLEVEL 2 300\nLEVEL 3 1000\n", t, NULL), 3);
        assert_true(vm->counters.actuations == 3);
        assert_true(vm->counters.rate_limited == 1);
        assert_true(vm->counters.clamped == 1); /* 1000 > max_level 900 */
        assert_int_equal(hint_vm_effective(vm, 3, t, &e), 0);
        assert_int_equal(e.level, 0);
        assert_int_equal(e.weight, 0);
        assert_true(e.may_actuate);
        /* FASTER / SLOWER / BOOST without a token: no effect either */
        assert_int_equal(feed(vm, "FASTER 0 500\nSLOWER 1 100\nBOOST 2 100\n", t, NULL), 0);
        assert_true(vm->counters.rate_limited == 4);
        hint_vm_effective(vm, 0, t, &e);
        assert_int_equal(e.level, 100);
        hint_vm_effective(vm, 1, t, &e);
        assert_int_equal(e.level, 200);
        hint_vm_effective(vm, 2, t, &e);
        assert_false(e.boosted);

        /* re-sending the same level refreshes, takes no token; the dropped one is re-sent and,
         * with a token now, stored */
        t += NSEC_PER_SEC; /* refills 10 tokens, capped at 3 */
        assert_int_equal(feed(vm, "LEVEL 0 100\nLEVEL 1 200\nLEVEL 2 300\n", t, NULL), 0);
        hint_bucket_refill(&vm->bucket, &vm->policy, t);
        assert_true(vm->bucket.tokens_milli == 3000); /* a take would have left 2000 */
        assert_int_equal(feed(vm, "LEVEL 3 1000\n", t, NULL), 1);
        assert_int_equal(hint_vm_effective(vm, 3, t, &e), 0);
        assert_int_equal(e.level, 900);
        assert_int_equal(e.weight, 1024);
        assert_int_equal(hint_vm_effective(vm, 0, t, &e), 0);
        assert_int_equal(e.weight, 1024);
        assert_int_equal(e.level, 100);

        /* a level that is not refreshed fades toward "no hint" (0), never up: after one
         * half-life (2 s) half of it */
        assert_int_equal(hint_vm_effective(vm, 0, t + 2 * NSEC_PER_SEC, &e), 0);
        assert_int_equal(e.weight, 512);
        assert_int_equal(e.level, 50);
        for (nsec_t dt = 0; dt < 20 * NSEC_PER_SEC; dt += 100 * NSEC_PER_MSEC) {
                struct hint_effective f;
                hint_vm_effective(vm, 0, t + dt, &f);
                assert_true(f.level <= 100);
        }
        /* expired after 8 half-lives: weight 0, level 0 */
        assert_int_equal(hint_vm_effective(vm, 0, t + 16 * NSEC_PER_SEC, &e), 0);
        assert_int_equal(e.weight, 0);
        assert_int_equal(e.level, 0);
        /* a high level fades down */
        assert_int_equal(hint_vm_effective(vm, 3, t + 2 * NSEC_PER_SEC, &e), 0);
        assert_int_equal(e.level, 450);

        /* FASTER/SLOWER work on the decayed level; FASTER clamps at max_level */
        assert_int_equal(feed(vm, "FASTER 0 50\n", t + 2 * NSEC_PER_SEC, NULL), 1);
        assert_int_equal(hint_vm_effective(vm, 0, t + 2 * NSEC_PER_SEC, &e), 0);
        assert_int_equal(e.level, 50 + 50);
        feed(vm, "SLOWER 0 1024\n", t + 2 * NSEC_PER_SEC, NULL);
        hint_vm_effective(vm, 0, t + 2 * NSEC_PER_SEC, &e);
        assert_int_equal(e.level, 0);
        uint64_t clamped = vm->counters.clamped;
        feed(vm, "FASTER 0 1024\n", t + 2 * NSEC_PER_SEC, NULL);
        hint_vm_effective(vm, 0, t + 2 * NSEC_PER_SEC, &e);
        assert_int_equal(e.level, 900);
        assert_true(vm->counters.clamped == clamped + 1);

        /* FASTER on a vCPU without a (live) level starts from neutral */
        hint_vm_set_vcpus(vm, 5);
        assert_int_equal(feed(vm, "FASTER 4 10\n", t + 3 * NSEC_PER_SEC, NULL), 1);
        hint_vm_effective(vm, 4, t + 3 * NSEC_PER_SEC, &e);
        assert_int_equal(e.level, 522);

        /* UTIL: stored, no token, expires */
        uint64_t act = vm->counters.actuations;
        feed(vm, "UTIL 1 700\n", t + 3 * NSEC_PER_SEC, NULL);
        assert_true(vm->counters.actuations == act);
        hint_vm_effective(vm, 1, t + 3 * NSEC_PER_SEC, &e);
        assert_int_equal(e.util, 700);
        assert_int_equal(e.util_weight, 1024);
        hint_vm_effective(vm, 1, t + 20 * NSEC_PER_SEC, &e);
        assert_int_equal(e.util, 0);

        hint_vm_free(vm);
}

static void test_vm_boost(void **state)
{
        struct hint_vm *vm = new_vm(1, HINT_TRUST_FULL, 0);
        struct hint_effective e;
        nsec_t t = 5 * NSEC_PER_SEC;

        feed(vm, "HELLO 1 vcpus=1\n", t, NULL);
        assert_int_equal(feed(vm, "BOOST 0 200\n", t, NULL), 1);
        hint_vm_effective(vm, 0, t + 199 * NSEC_PER_MSEC, &e);
        assert_true(e.boosted);
        assert_int_equal(e.boost_level, 900); /* the boost asks for max_level, not the top */
        assert_true(e.boost_remaining_ns == NSEC_PER_MSEC);
        hint_vm_effective(vm, 0, t + 200 * NSEC_PER_MSEC, &e);
        assert_false(e.boosted);
        assert_true(e.boost_remaining_ns == 0);

        /* capped at 500 ms, counted; only the 300 ms it adds are paid from the budget
         * (500 ms per 10 s window): the budget is now empty */
        feed(vm, "BOOST 0 10000\n", t, NULL);
        assert_true(vm->counters.clamped == 1);
        assert_true(vm->boost_budget_ns == 0);
        hint_vm_effective(vm, 0, t + 499 * NSEC_PER_MSEC, &e);
        assert_true(e.boosted);
        hint_vm_effective(vm, 0, t + 500 * NSEC_PER_MSEC, &e);
        assert_false(e.boosted);

        /* 1 s after the last payment the budget has refilled 50 ms: a 100 ms boost gets 50 ms, counted */
        assert_int_equal(feed(vm, "BOOST 0 100\n", t + NSEC_PER_SEC, NULL), 1);
        assert_true(vm->counters.boost_denied == 1);
        hint_vm_effective(vm, 0, t + NSEC_PER_SEC + 49 * NSEC_PER_MSEC, &e);
        assert_true(e.boosted);
        hint_vm_effective(vm, 0, t + NSEC_PER_SEC + 50 * NSEC_PER_MSEC, &e);
        assert_false(e.boosted);
        /* an empty budget refuses without taking a token */
        uint64_t act = vm->counters.actuations;
        assert_int_equal(feed(vm, "BOOST 0 100\n", t + NSEC_PER_SEC, NULL), 0);
        assert_true(vm->counters.boost_denied == 2);
        assert_true(vm->counters.actuations == act);

        /* a full window later: a shorter boost does not cut a longer one short */
        t += 20 * NSEC_PER_SEC;
        feed(vm, "BOOST 0 500\nBOOST 0 10\n", t, NULL);
        hint_vm_effective(vm, 0, t + 400 * NSEC_PER_MSEC, &e);
        assert_true(e.boosted);

        /* max_level 0: a boost runs but asks for nothing */
        struct hint_policy p = vm->policy;
        p.max_level = 0;
        assert_int_equal(hint_vm_set_policy(vm, &p, t), 0);
        hint_vm_effective(vm, 0, t + 400 * NSEC_PER_MSEC, &e);
        assert_int_equal(e.boost_level, 0);

        /* boost_cap 0 disables boosts, and cuts the running one */
        p.boost_cap_ms = 0;
        assert_int_equal(hint_vm_set_policy(vm, &p, t + 2 * NSEC_PER_SEC), 0);
        assert_int_equal(feed(vm, "BOOST 0 100\n", t + 3 * NSEC_PER_SEC, NULL), 0);
        hint_vm_effective(vm, 0, t + 3 * NSEC_PER_SEC, &e);
        assert_false(e.boosted);
        hint_vm_free(vm);
}

/*
 * Issue 16 (1): metadata max-level='0' boost-cap-ms='200', the guest sends BOOST 0 10000
 * every 150 ms for a minute.  The boosted time stays within the budget (the cap plus
 * cap/window of the time: 2%), and a boost never asks for more than max_level.
 */
static void test_vm_boost_duty_cycle(void **state)
{
        struct hint_policy p;
        struct hint_vm *vm;
        struct hint_effective e;
        nsec_t t0 = 7 * NSEC_PER_SEC, end = t0 + 60 * NSEC_PER_SEC, boosted_ns = 0, step = NSEC_PER_MSEC;
        double allowed_ns;

        hint_policy_init(&p);
        p.trust = HINT_TRUST_FULL;
        p.max_level = 0;
        p.boost_cap_ms = 200;
        vm = hint_vm_new(2, &p, 0);
        assert_non_null(vm);
        feed(vm, "HELLO 1 vcpus=2\n", t0, NULL);
        for (nsec_t t = t0; t < end; t += step) {
                if ((t - t0) % (150 * NSEC_PER_MSEC) == 0)
                        feed(vm, "BOOST 0 10000\n", t, NULL);
                hint_vm_effective(vm, 0, t, &e);
                if (e.boosted) {
                        boosted_ns += step;
                        assert_int_equal(e.boost_level, 0);
                }
        }
        allowed_ns = 200 * NSEC_PER_MSEC + (double) (end - t0) * 200 / 10000;
        printf("boost abuse: boosted %.0f ms of %.0f s (%.2f%%), budget allows %.0f ms\n", boosted_ns / 1e6,
               (end - t0) / 1e9, 100.0 * boosted_ns / (end - t0), allowed_ns / 1e6);
        assert_true(boosted_ns > 0);
        assert_true((double) boosted_ns <= allowed_ns + (double) step);
        assert_true(vm->counters.boost_denied > 0);
        hint_vm_free(vm);
}

/* A handshake that hears nothing for HINT_STALE_NS is stale; the next HELLO clears it. */
static void test_vm_stale(void **state)
{
        struct hint_vm *vm = new_vm(1, HINT_TRUST_FULL, 0);
        struct strbuf out;
        nsec_t t = NSEC_PER_SEC;

        strbuf_init(&out);
        feed(vm, "\nHELLO 1 vcpus=1\nLEVEL 0 128\n", t, &out);
        assert_true(vm->handshaked);
        assert_false(hint_vm_tick(vm, t + HINT_STALE_NS - 1));
        feed(vm, "\n", t + HINT_STALE_NS - 1, NULL); /* an empty line counts as a sign of life */
        assert_false(hint_vm_tick(vm, t + HINT_STALE_NS));
        t += HINT_STALE_NS - 1;
        assert_true(hint_vm_tick(vm, t + HINT_STALE_NS));
        assert_false(vm->handshaked);
        assert_true(vm->stale);
        assert_true(vm->counters.stale == 1);
        assert_false(hint_vm_tick(vm, t + 2 * HINT_STALE_NS)); /* once */
        /* the next batch handshakes again and gets a WELCOME at once */
        strbuf_reset(&out);
        feed(vm, "\nHELLO 1 vcpus=1\nLEVEL 0 128\n", t + HINT_STALE_NS + 1, &out);
        assert_true(vm->handshaked);
        assert_false(vm->stale);
        assert_non_null(strstr(out.data, "WELCOME 1 "));
        strbuf_free(&out);
        hint_vm_free(vm);
}

/* A policy change re-sends LIMITs (when the range changed) and answers the next HELLO at once. */
static void test_vm_policy_limits(void **state)
{
        struct hint_vm *vm = new_vm(2, HINT_TRUST_FULL, 0);
        struct hint_policy p = vm->policy;
        struct strbuf out;

        strbuf_init(&out);
        feed(vm, "HELLO 1 vcpus=2\n", 0, &out);
        assert_false(hint_vm_take_limits_changed(vm));
        assert_int_equal(hint_vm_set_policy(vm, &p, 0), 0); /* the same policy: nothing */
        assert_false(hint_vm_take_limits_changed(vm));
        p.rate_per_sec = 20;
        assert_int_equal(hint_vm_set_policy(vm, &p, 0), 0); /* no LIMIT change */
        assert_false(hint_vm_take_limits_changed(vm));
        p.max_level = 300;
        assert_int_equal(hint_vm_set_policy(vm, &p, 0), 0);
        assert_true(hint_vm_take_limits_changed(vm));
        assert_false(hint_vm_take_limits_changed(vm));
        strbuf_reset(&out);
        assert_int_equal(hint_format_limits(&out, vm), 0);
        assert_string_equal(out.data, "LIMIT 0 0 300\nLIMIT 1 0 300\n");
        strbuf_reset(&out);
        feed(vm, "HELLO 1 vcpus=2\n", NSEC_PER_MSEC, &out); /* within the interval, but due */
        assert_string_equal(out.data, "WELCOME 1 vcpus=2 max_level=300 boost_cap_ms=500 rate=20 burst=3 trust=full\n"
                                      "LIMIT 0 0 300\nLIMIT 1 0 300\n");
        strbuf_free(&out);
        hint_vm_free(vm);
}

static void test_vm_trust(void **state)
{
        struct hint_vm *vm = new_vm(2, HINT_TRUST_ADVISORY, 0);
        struct hint_effective e;
        struct strbuf out;

        strbuf_init(&out);
        feed(vm, "HELLO 1 vcpus=2\n", 0, &out);
        /* advisory: state kept, never actuates, no tokens taken */
        assert_int_equal(feed(vm, "LEVEL 0 800\nBOOST 1 100\n", 0, &out), 0);
        assert_true(vm->counters.actuations == 0);
        assert_true(vm->counters.rate_limited == 0);
        hint_vm_effective(vm, 0, 0, &e);
        assert_int_equal(e.level, 800);
        assert_false(e.may_actuate);

        /* none: rejected and counted, WELCOME still tells the guest */
        struct hint_policy p = vm->policy;
        p.trust = HINT_TRUST_NONE;
        hint_vm_set_policy(vm, &p, 0);
        strbuf_reset(&out);
        feed(vm, "HELLO 1 vcpus=2\nLEVEL 1 800\n", 0, &out);
        assert_true(vm->counters.rejected[HINT_REJECT_TRUST] == 1);
        assert_string_equal(out.data, "WELCOME 1 vcpus=2 max_level=900 boost_cap_ms=500 rate=10 burst=3 trust=none\n"
                                      "LIMIT 0 0 900\nLIMIT 1 0 900\n"
                                      "ERR trust hints disabled by host policy\n");
        hint_vm_effective(vm, 1, 0, &e);
        assert_int_equal(e.weight, 0);
        strbuf_free(&out);
        hint_vm_free(vm);
}

static void test_vm_garbage_and_chunks(void **state)
{
        static const char in[] = "garbage\n\xff\xfe\x01zz\nLEVEL 0 5\r\nHELLO 1 vcpus=3\nLEVEL 0 5\nLEVEL 1\0 7\n"
                                 "LEVEL 1 7\nUTIL 2 1024\nLEVEL 2 ";
        struct hint_vm *a = new_vm(3, HINT_TRUST_FULL, 0), *b = new_vm(3, HINT_TRUST_FULL, 0);
        char big[1000];
        int ra, rb = 0;

        ra = hint_vm_feed(a, in, sizeof(in) - 1, 0, NULL);
        for (size_t i = 0; i < sizeof(in) - 1; i++)
                rb += hint_vm_feed(b, in + i, 1, 0, NULL);
        assert_int_equal(ra, 2);
        assert_int_equal(rb, 2);
        assert_memory_equal(&a->counters, &b->counters, sizeof(a->counters));
        assert_true(a->counters.rejected[HINT_REJECT_SYNTAX] == 1);
        assert_true(a->counters.rejected[HINT_REJECT_CHAR] == 3);
        assert_true(a->counters.resyncs == 3);
        assert_true(a->counters.accepted == 4);
        assert_true(a->counters.bytes == sizeof(in) - 1);

        /* disconnect mid-line: "LEVEL 2 " is dropped, "9" does not make "LEVEL 2 9" */
        hint_vm_disconnect(a);
        assert_true(a->counters.partial_dropped == 1);
        feed(a, "9\nHELLO 1 vcpus=3\n", 0, NULL);
        assert_true(a->counters.rejected[HINT_REJECT_SYNTAX] == 2);
        struct hint_effective e;
        hint_vm_effective(a, 2, 0, &e);
        assert_int_equal(e.weight, 0);
        assert_int_equal(e.util, 1024);

        /* a huge line, then recovery within the same chunk */
        memset(big, 'L', sizeof(big));
        assert_int_equal(hint_vm_feed(a, big, sizeof(big), NSEC_PER_SEC, NULL), 0);
        assert_true(a->counters.oversized == 1);
        assert_int_equal(feed(a, "EVEL 0 1\nLEVEL 2 33\n", NSEC_PER_SEC, NULL), 1);
        hint_vm_effective(a, 2, NSEC_PER_SEC, &e);
        assert_int_equal(e.level, 33);
        assert_true(a->counters.rejected[HINT_REJECT_OVERSIZED] == 1);

        hint_vm_free(a);
        hint_vm_free(b);
}

static void test_vm_new_bad(void **state)
{
        struct hint_policy p;

        hint_policy_init(&p);
        assert_null(hint_vm_new(0, &p, 0));
        assert_null(hint_vm_new(HINT_VCPUS_MAX + 1, &p, 0));
        p.burst = 0;
        assert_null(hint_vm_new(1, &p, 0));
        hint_vm_free(NULL);
}

static void test_format(void **state)
{
        struct strbuf sb;
        char longtext[300];

        strbuf_init(&sb);
        assert_int_equal(hint_format_grant(&sb, 3, 768), 0);
        assert_int_equal(hint_format_limit(&sb, 0, 128, 1024), 0);
        assert_string_equal(sb.data, "GRANT 3 768\nLIMIT 0 128 1024\n");
        assert_int_equal(hint_format_grant(&sb, 0, 1025), -EINVAL);
        assert_int_equal(hint_format_limit(&sb, 0, 600, 500), -EINVAL);
        assert_int_equal(hint_format_err(&sb, "Bad", "x"), -EINVAL);

        strbuf_reset(&sb);
        memset(longtext, 'x', sizeof(longtext) - 1);
        longtext[sizeof(longtext) - 1] = 0;
        longtext[3] = '\n';
        assert_int_equal(hint_format_err(&sb, "syntax", longtext), 0);
        assert_int_equal(sb.len, HINT_LINE_MAX);
        assert_int_equal(sb.data[sb.len - 1], '\n');
        assert_null(memchr(sb.data, '\n', sb.len - 1));
        assert_int_equal(sb.data[strlen("ERR syntax ") + 3], '?');
        strbuf_free(&sb);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_each_kind),
                cmocka_unit_test(test_parse_bad),
                cmocka_unit_test(test_framer_oversized_and_recovery),
                cmocka_unit_test(test_framer_chunking),
                cmocka_unit_test(test_policy_merge),
                cmocka_unit_test(test_bucket),
                cmocka_unit_test(test_decay),
                cmocka_unit_test(test_vm_handshake),
                cmocka_unit_test(test_vm_levels_and_tokens),
                cmocka_unit_test(test_vm_boost),
                cmocka_unit_test(test_vm_boost_duty_cycle),
                cmocka_unit_test(test_vm_stale),
                cmocka_unit_test(test_vm_policy_limits),
                cmocka_unit_test(test_vm_trust),
                cmocka_unit_test(test_vm_garbage_and_chunks),
                cmocka_unit_test(test_vm_new_bad),
                cmocka_unit_test(test_format),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
