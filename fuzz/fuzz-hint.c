/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for the host side of the guest hint protocol
 * (vmmpower/hint_proto.c).  The input is split into chunks whose sizes come
 * from the input itself, so line splits across reads, disconnects mid-line and
 * time steps are all explored.  Layout:
 *   byte 0: vCPU count - 1 (mod 16) and trust (bits 4-5), bit 6: boosts disabled,
 *           bit 7: slow bucket (1 token/s, burst 1)
 *   then repeated: one control byte c, then (c & 0x3f) + 1 data bytes;
 *   c & 0x40: advance time by c * 7 ms before the chunk; c & 0x80: disconnect after it;
 *   c == 0xff: vCPU hotplug to (next byte % 16) + 1; c == 0xfe: new policy (next byte:
 *   trust, max_level, boost cap), as on a metadata change.
 * Invariants checked: replies are whole lines of printable ASCII within the
 * line limit, effective levels within [0, max_level], weights within
 * [0, 1024], counters consistent, and the framer never holds a full buffer.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hint_proto.h"

static void check_reply(const struct strbuf *sb)
{
        size_t start = 0;

        for (size_t i = 0; i < sb->len; i++) {
                unsigned char c = (unsigned char) sb->data[i];
                if (c == '\n') {
                        assert(i - start + 1 <= HINT_LINE_MAX);
                        start = i + 1;
                        continue;
                }
                assert(c >= 0x20 && c <= 0x7e);
        }
        assert(start == sb->len); /* ends with a newline */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct hint_policy p;
        struct hint_vm *vm;
        struct strbuf reply;
        nsec_t now = 1000 * NSEC_PER_SEC;
        size_t i = 1;

        if (size < 1)
                return 0;
        hint_policy_init(&p);
        p.trust = (enum hint_trust) ((data[0] >> 4) % _HINT_TRUST_MAX);
        p.max_level = 700 + (data[0] & 0x3);
        p.burst = (data[0] & 0x80) ? 1 : 4;
        p.rate_per_sec = (data[0] & 0x80) ? 1 : 50;
        p.boost_cap_ms = (data[0] & 0x40) ? 0 : 500;
        vm = hint_vm_new((data[0] & 0xf) + 1, &p, now);
        assert(vm);
        strbuf_init(&reply);

        /* the line parser alone, on the whole input */
        struct hint_msg m;
        enum hint_reject why;
        if (hint_parse_line((const char *) data, size, &m, &why) == 0) {
                assert(m.type < _HINT_MSG_MAX);
                assert(m.type == HINT_MSG_HELLO || m.vcpu < HINT_VCPUS_MAX);
        } else
                assert(why < _HINT_REJECT_MAX);

        while (i < size) {
                uint8_t c = data[i++];
                size_t n = MIN((size_t) (c & 0x3f) + 1, size - i);

                if ((c == 0xff || c == 0xfe) && i < size) {
                        uint8_t a = data[i++];
                        if (c == 0xff)
                                assert(hint_vm_set_vcpus(vm, (a % 16) + 1) == 0);
                        else {
                                struct hint_policy q = vm->policy;
                                q.trust = (enum hint_trust) (a % _HINT_TRUST_MAX);
                                q.max_level = (a & 0x80) ? 1024 : (uint32_t) a * 4;
                                q.boost_cap_ms = (a & 0x40) ? 0 : 1000;
                                assert(hint_vm_set_policy(vm, &q, now) == 0);
                                assert(vm->bucket.tokens_milli <= (uint64_t) q.burst * 1000);
                        }
                        continue;
                }

                if (c & 0x40)
                        now += (nsec_t) c * 7 * NSEC_PER_MSEC;
                strbuf_reset(&reply);
                int r = hint_vm_feed(vm, data + i, n, now, &reply);
                assert(r >= 0);
                assert(r == 0 || vm->policy.trust == HINT_TRUST_FULL);
                check_reply(&reply);
                assert(vm->framer.len < HINT_LINE_MAX);
                i += n;
                if (c & 0x80)
                        hint_vm_disconnect(vm);
        }

        uint64_t rejected = 0;
        for (int k = 0; k < _HINT_REJECT_MAX; k++)
                rejected += vm->counters.rejected[k];
        assert(vm->counters.accepted + rejected <= vm->counters.lines + vm->counters.resyncs);
        assert(vm->counters.resyncs == vm->counters.oversized + vm->counters.rejected[HINT_REJECT_CHAR]);
        assert(vm->counters.actuations <= vm->counters.accepted);
        for (uint32_t k = 0; k < vm->n_vcpus; k++) {
                struct hint_effective e;
                assert(hint_vm_effective(vm, k, now, &e) == 0);
                assert(e.level <= vm->policy.max_level);
                assert(e.weight <= 1024 && e.util <= HINT_LEVEL_MAX);
                assert(!e.boosted || e.boost_remaining_ns <= 1000 * NSEC_PER_MSEC);
        }
        strbuf_free(&reply);
        hint_vm_free(vm);
        return 0;
}
