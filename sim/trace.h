/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>

#include "util.h"

/*
 * VM utilisation traces (docs/simulator.md, "Trace formats").
 *
 *  - PlanetLab (CoMon, as shipped with CloudSim): one VM per line,
 *    "name,u0,...,uN", u = percent of one CPU over a 300 s interval, '#'
 *    comment lines; every VM has one vCPU.
 *  - generic: the first line is "# vmmpower-trace v1 interval_s=N", then one
 *    VM per line "name,vcpus,u0,...,uN", u = percent of one vCPU (mean over
 *    the VM's vCPUs), vcpus 1..64.
 *
 * Every VM must have the same number of samples.  Values are decimals
 * 0..100 (PlanetLab rounds to integers; values over 100 are an error).
 */

#define TRACE_NAME_MAX 64
#define TRACE_MAX_VCPUS 64

struct sim_trace {
        unsigned n_vms, n_intervals;
        nsec_t interval_ns;
        char (*name)[TRACE_NAME_MAX]; /* [n_vms] */
        unsigned *vcpus;              /* [n_vms] */
        float *util;                  /* [n_vms * n_intervals] ratio 0..1 of one vCPU */
};

struct sim_error {
        char file[256];
        unsigned line;
        char message[256];
};

/* -EINVAL with err = "FILE:LINE: message" parts on a bad line, -errno on I/O. ret only on success. */
int sim_trace_load(const char *path, struct sim_trace **ret, struct sim_error *err);
int sim_trace_parse(const char *text, const char *name_for_errors, struct sim_trace **ret, struct sim_error *err);
void sim_trace_free(struct sim_trace *t);

static inline double sim_trace_util(const struct sim_trace *t, unsigned vm, unsigned interval)
{
        return t->util[(size_t) vm * t->n_intervals + interval];
}
