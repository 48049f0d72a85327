/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for the guest agent's handling of host -> guest bytes:
 * guest/virtio-powerhint/powerhintd.c is included directly (its main() renamed)
 * so that the real framer, parser and message handlers (WELCOME, GRANT, LIMIT,
 * ERR) run, followed by a level choice.  sysfs points to a directory that does
 * not exist, so a GRANT writes nothing.
 *   byte 0: number of online vCPUs - 1 (mod 8); byte 1: utilisation seed;
 *   then repeated: one length byte n, then n bytes pushed as one read(); a
 *   length byte with the top bit set also simulates a disconnect after it.
 * Invariants: levels, grants and limits stay within 0..1024 with min <= max,
 * GRANTs only land on online vCPUs, WELCOME max_level <= 1024.
 */
#include <assert.h>

#define main powerhintd_main
int powerhintd_main(int argc, char **argv);
#include "powerhintd.c"
#undef main

#define MIN(a, b) ((a) < (b) ? (a) : (b))

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct daemon d;
        size_t i = 2;

        if (size < 2)
                return 0;
        /* the struct holds MAX_CPUS vCPUs; only the first 8 are ever used here */
        memset(&d, 0, offsetof(struct daemon, cpus));
        memset(d.cpus, 0, 8 * sizeof(d.cpus[0]));
        memset((char *) &d + offsetof(struct daemon, psi_have_prev), 0,
               sizeof(d) - offsetof(struct daemon, psi_have_prev));
        d.proc_root = "/nonexistent-powerhint-fuzz/proc";
        d.sys_root = "/nonexistent-powerhint-fuzz/sys";
        d.port_fd = -1;
        d.listen_fd = -1;
        d.verbose = 0;
        d.n_cpus = (data[0] & 7) + 1;
        for (unsigned c = 0; c < 9; c++)
                d.cpus[c].lim_max = LEVEL_MAX;
        for (unsigned c = 0; c < d.n_cpus; c++) {
                d.cpus[c].online = (data[0] >> 3 >> (c % 5)) != 1; /* a few offline ones */
                d.cpus[c].util = (uint32_t) (data[1] * 4 + c) % (LEVEL_MAX + 1);
        }
        hostmsg_framer_init(&d.framer);

        while (i < size) {
                uint8_t n = data[i++];
                size_t len = MIN((size_t) (n & 0x7f), size - i);

                hostmsg_framer_push(&d.framer, data + i, len, host_line, &d);
                assert(d.framer.len < HOSTMSG_LINE_MAX);
                i += len;
                if (n & 0x80) {
                        hostmsg_framer_reset(&d.framer);
                        d.welcomed = false;
                }
                choose_levels(&d);
        }

        if (d.welcomed)
                assert(d.welcome.max_level <= LEVEL_MAX && d.welcome.version == 1);
        for (unsigned c = 0; c < 9; c++) {
                const struct cpu_state *s = &d.cpus[c];
                assert(s->lim_min <= s->lim_max && s->lim_max <= LEVEL_MAX);
                assert(s->level <= LEVEL_MAX);
                assert(!s->has_grant || (s->granted <= LEVEL_MAX && c < d.n_cpus && s->online));
                assert(c < d.n_cpus || (s->lim_min == 0 && s->lim_max == LEVEL_MAX));
        }
        static char status[4096];
        size_t n = status_text(&d, status, sizeof(status));
        assert(n < sizeof(status) && strlen(status) == n);
        return 0;
}
