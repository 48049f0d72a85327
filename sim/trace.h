/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>

#include "util.h"

/*
 * VM utilisation traces (docs/simulator.md, "Trace formats").  The format is
 * stated, never guessed: the caller names it (vmmpower-sim --trace-format),
 * and each format is checked for what it must look like; anything else is
 * refused with FILE:LINE.
 *
 *  - SIM_TRACE_VMMPOWER (the default): the first line must be
 *    "# vmmpower-trace v1 interval_s=N", then one VM per line
 *    "name,vcpus,u0,...,uN", u = percent of one vCPU (mean over the VM's
 *    vCPUs), vcpus 1..64.
 *  - SIM_TRACE_PLANETLAB (CoMon, as shipped with CloudSim): one VM per line,
 *    "name,u0,...,uN", u = whole percent of one CPU over a 300 s interval,
 *    '#' comment lines; every VM has one vCPU.  A file that starts with the
 *    vmmpower header is refused, and so is a decimal sample (CoMon's are
 *    integers).
 *  - SIM_TRACE_BITBRAINS (GWA-T-12 Bitbrains, one file per VM): the first
 *    line is the dataset's column header, "Timestamp [ms];\tCPU cores;\t...",
 *    fields separated by ";\t", 11 per row; the rows are resampled onto a
 *    grid of resample_ns (sample-and-hold, time-weighted mean per interval)
 *    over the time all the VMs cover.  vcpus = the largest "CPU cores" of the
 *    file; u = "CPU usage [%]" x cores / vcpus.
 *
 * Every VM has the same number of samples.  Values are decimals 0..100
 * (values over 100 are an error).
 */

enum sim_trace_format {
        SIM_TRACE_VMMPOWER,
        SIM_TRACE_PLANETLAB,
        SIM_TRACE_BITBRAINS,
        _SIM_TRACE_FORMAT_MAX,
};
int sim_trace_format_from_string(const char *s); /* "vmmpower", "planetlab", "bitbrains"; -EINVAL */
const char *sim_trace_format_to_string(enum sim_trace_format f);

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

/* Fill *err (NULL: nothing) with file, line and the message; returns -EINVAL. */
int sim_fail(struct sim_error *err, const char *file, unsigned line, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/*
 * -EINVAL with err = "FILE:LINE: message" parts on a bad line, -errno on I/O. ret only on success.
 * sim_trace_load_as(): for SIM_TRACE_BITBRAINS, path is one VM's file or a directory whose *.csv
 * files (in version order of their names) are one VM each; resample_ns 0 means 300 s.
 * sim_trace_parse() and sim_trace_load() read the vmmpower format (its header is required).
 */
int sim_trace_load_as(const char *path, enum sim_trace_format fmt, nsec_t resample_ns, struct sim_trace **ret,
                      struct sim_error *err);
int sim_trace_parse_as(const char *text, const char *name_for_errors, enum sim_trace_format fmt, nsec_t resample_ns,
                       struct sim_trace **ret, struct sim_error *err);
int sim_trace_load(const char *path, struct sim_trace **ret, struct sim_error *err);
int sim_trace_parse(const char *text, const char *name_for_errors, struct sim_trace **ret, struct sim_error *err);
void sim_trace_free(struct sim_trace *t);

static inline double sim_trace_util(const struct sim_trace *t, unsigned vm, unsigned interval)
{
        return t->util[(size_t) vm * t->n_intervals + interval];
}

/*
 * Demand of vCPU j (0-based) of an n-vCPU VM whose mean per-vCPU utilisation is u (ratio 0..1):
 * a share `balance` (0..1) of the VM's demand D = u n spread evenly over its vCPUs (what the guest's
 * load balancer spreads), the rest filled into vCPU 0, then 1, ... up to a whole vCPU each (what the
 * guest's wake-up placement concentrates).  balance 1 is the even split (every vCPU u).  The shares
 * sum to D and none exceeds 1.
 */
double sim_trace_vcpu_share(double u, unsigned n, unsigned j, double balance);
