/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for the simulator's trace parser (sim/trace.h): the input
 * is one trace file, parsed as each stated format in turn (vmmpower,
 * PlanetLab, one GWA-T-12 Bitbrains VM file).  Checks what a
 * successful parse promises: at least one VM and one interval, a positive
 * interval, 1..TRACE_MAX_VCPUS vCPUs per VM, NUL-terminated names and every
 * utilisation a finite ratio in 0..1; an error is -EINVAL with a message and a
 * line inside the input.  Seeds: fuzz/corpus/trace/.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parse_as(const char *text, size_t lines, enum sim_trace_format fmt)
{
        struct sim_trace *t = NULL;
        struct sim_error err;
        int r;

        memset(&err, 0, sizeof(err));
        r = sim_trace_parse_as(text, "fuzz", fmt, 300 * NSEC_PER_SEC, &t, &err);
        if (r < 0) {
                if (t || (r != -EINVAL && r != -ENOMEM))
                        abort();
                if (r == -EINVAL && (err.line > lines || err.message[0] == 0))
                        abort();
                return;
        }
        if (t->n_vms == 0 || t->n_intervals == 0 || t->interval_ns <= 0)
                abort();
        for (unsigned v = 0; v < t->n_vms; v++) {
                if (t->vcpus[v] < 1 || t->vcpus[v] > TRACE_MAX_VCPUS)
                        abort();
                if (strnlen(t->name[v], TRACE_NAME_MAX) >= TRACE_NAME_MAX)
                        abort();
                for (unsigned i = 0; i < t->n_intervals; i++) {
                        double u = sim_trace_util(t, v, i);

                        if (!isfinite(u) || u < 0 || u > 1)
                                abort();
                }
        }
        sim_trace_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        size_t lines = 1;
        char *text;

        if (size > 256 * 1024)
                return 0;
        log_set_max_level((enum log_level) 0);
        for (size_t i = 0; i < size; i++)
                lines += data[i] == '\n';
        text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        for (int f = 0; f < _SIM_TRACE_FORMAT_MAX; f++)
                parse_as(text, lines, (enum sim_trace_format) f);
        free(text);
        return 0;
}
