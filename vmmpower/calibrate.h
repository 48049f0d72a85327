/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cpuset.h"
#include "energy_model.h"
#include "journal.h"
#include "topology.h"
#include "util.h"

/*
 * vmmpower-calibrate: fit the watts of an energy model (docs/energy-model.md)
 * from a host's powercap (RAPL) energy counters.  docs/calibration.md has the
 * procedure and the reasoning; calibrate.c the algorithm.
 *
 * The measuring loop reaches the world through struct calib_ops only (the
 * energy counters, the load, the clock), so a unit test runs the whole fit
 * in simulated time against a planted model; the program installs the real
 * ones (powercap files, pinned busy-loop threads, CLOCK_MONOTONIC).  Knobs
 * (cpufreq limits, cpuidle state disable, PM QoS) are written through the
 * power driver's sysfs backend, hence journaled before every write, and
 * restored from the journal before calibrate_run() returns, whatever
 * happened.
 */

#define CALIB_MAX_ZONES 64

enum calib_zone_kind {
        CALIB_ZONE_PACKAGE, /* intel-rapl:N, name "package-N", or "package-N-die-M" (one zone per die of a
                             * multi-die package): fitted */
        CALIB_ZONE_CORE,    /* intel-rapl:N:M, name "core" (PP0): fixes the deepest core state's power */
        CALIB_ZONE_DRAM,    /* name "dram": reported, not in the model */
        CALIB_ZONE_PSYS,    /* name "psys" (platform): reported, not in the model */
        CALIB_ZONE_OTHER,   /* "uncore" (PP1, client graphics) and anything else: ignored */
        _CALIB_ZONE_KIND_MAX,
};

struct calib_zone {
        char rel[96];                /* class/powercap/intel-rapl:N[:M] relative to the sysfs root */
        char name[32];               /* its "name" file */
        enum calib_zone_kind kind;
        int package;                 /* package zones: N of "package-N[-die-M]" (the dies of a package are
                                        summed); -1 for the others */
        uint64_t max_energy_range_uj; /* counter range: energy_uj wraps to 0 after it */
};

struct calib_zones {
        unsigned n;
        struct calib_zone zone[CALIB_MAX_ZONES];
};

const char *calib_zone_kind_to_string(enum calib_zone_kind k);

/*
 * List class/powercap/intel-rapl:* below sysfs_root (AMD hosts publish the
 * same names).  -ENOENT: no powercap zone at all; -ENODATA: zones but no
 * package zone; -EINVAL: unreadable max_energy_range_uj or a range of 0.
 */
int calib_zones_discover(const char *sysfs_root, struct calib_zones *ret);

/* Read every zone's energy_uj (ret[i] for zone i).  The default read_energy op. */
int calib_zones_read(const char *sysfs_root, const struct calib_zones *z, uint64_t *ret_uj);

/* Energy counted between two readings of a counter that wraps after max_range_uj. */
static inline uint64_t calib_counter_delta(uint64_t prev, uint64_t cur, uint64_t max_range_uj)
{
        return cur >= prev ? cur - prev : cur + max_range_uj - prev;
}

/*
 * What the loop needs from the world.  Every member is required and every
 * one is called by calibrate_run().
 */
struct calib_ops {
        /* the counters of the zones in calib_config.zones, µJ (ret[i] for zone i) */
        int (*read_energy)(void *userdata, uint64_t *ret_uj);
        /* start the load: duty_permille[cpu] of every period_ns busy (0: no thread on it, 1000: always) */
        int (*load_start)(void *userdata, const uint16_t *duty_permille, unsigned n_cpus, nsec_t period_ns);
        /* CPU time each loaded CPU's thread has run since load_start, ns (0 for unloaded CPUs) */
        int (*load_busy_ns)(void *userdata, uint64_t *ret_busy_ns, unsigned n_cpus);
        /* stop and join the load (also called after a failed load_start) */
        void (*load_stop)(void *userdata);
        /* monotonic clock, ns */
        nsec_t (*now)(void *userdata);
        /* sleep until the deadline on now()'s clock: 0, or -EINTR when asked to stop (a signal) */
        int (*sleep_until)(void *userdata, nsec_t deadline_ns);
};

struct calib_config {
        const char *sysfs_root;            /* "/sys" or a fixture tree */
        const struct topology *topo;       /* read from sysfs_root */
        const struct energy_model *base;   /* structure (levels, idle states, domains, latencies) and the
                                              values RAPL cannot tell apart (see calibrate.c) */
        struct journal *journal;           /* open: every knob write is recorded here first */
        struct calib_zones zones;
        cpuset_t cpus;                     /* CPUs the loads may run on (empty: every online CPU) */
        nsec_t dwell_ns;                   /* measured window per point */
        nsec_t settle_ns;                  /* after changing knobs and starting the load, before measuring */
        nsec_t sample_ns;                  /* counters read at least this often (wrap-around) */
        nsec_t period_ns;                  /* duty-cycle period of partial loads */
        const char *name;                  /* Name of the fitted model (NULL: "calibrated") */
        const struct calib_ops *ops;
        void *ops_userdata;
        FILE *progress;                    /* one line per point, NULL: quiet */
};

/* The most points plan_points() makes: idle and idle-end, per level 3 (busy1, busy2, busyllc), busy-llcs,
 * the partial duty, 2 per idle state but the deepest, and a PM QoS point per latency (the deepest core
 * state's and each domain's). */
#define CALIB_MAX_POINTS (2 + 3 * EM_MAX_LEVELS + 2 + 2 * (EM_MAX_IDLE_STATES - 1) + 1 + _EM_DOMAIN_MAX)

enum calib_param_source {
        CALIB_FITTED,      /* least squares over the points */
        CALIB_CORE_ZONE,   /* from the core (PP0) zone */
        CALIB_BASE,        /* not determined by the counters: the base model's value */
};

struct calib_point {
        char name[40];
        unsigned level;                    /* perf level index of every policy */
        unsigned n_busy;                   /* CPUs loaded */
        double measured_mw;                /* Σ package zones */
        double core_mw;                    /* Σ core zones; -1 without */
        double dram_mw;                    /* Σ dram zones; -1 without */
        double psys_mw;                    /* psys zone; -1 without */
        double fitted_mw;                  /* the fitted model's power for the point's load */
        double busy_ratio;                 /* mean achieved busy fraction of the loaded CPUs */
        double pkg_max_mw;                 /* the largest package's power (its zones: one, or one per die) */
        bool capped;                       /* at the package power limit: not in the fit */
};

struct calib_report {
        unsigned n_points;
        struct calib_point points[CALIB_MAX_POINTS];
        unsigned n_params;
        struct {
                char name[48];
                double value_mw;             /* before rounding and the model's order rules */
                enum calib_param_source source;
        } params[EM_MAX_LEVELS + EM_MAX_IDLE_STATES + 3 * _EM_DOMAIN_MAX];
        double rms_residual_pct;           /* of the points, fitted vs measured */
        double max_residual_pct;
        unsigned adjusted;                 /* values moved to satisfy the model's order rules */
        unsigned starved;                  /* loaded points whose CPUs ran less than 90% of the asked duty
                                              (other work on the host: the fit uses what ran, but the
                                              active powers rest on less signal) */
        double idle_drift_pct;             /* idle-end against idle: the host's background changed */
        unsigned turbo_skipped;            /* points not run: more busy cores than the level's MaxActiveCores */
        unsigned capped;                   /* points dropped from the fit: a package at >= 97% of
                                              PackagePowerLimitMW (the hardware may have lowered the level);
                                              the fit fails when fewer points are left than parameters */
        struct restore_stats restore;
        nsec_t elapsed_ns;
        char error[256];                   /* on failure: what failed, with the knob's path */
};

/*
 * Run every point, fit, restore.  ret is written only on success (a model
 * that energy_model_validate() accepts).  The journal is restored before
 * returning in every case; a restore that leaves entries is -EBUSY with
 * report->error saying so.  -EINTR: ops->sleep_until asked to stop.
 * -EINVAL before anything is touched: cfg->name is not a valid model Name.
 * -ERANGE: the base model's levels do not fit the host's cpufreq
 * (em_host_check()).  -EDOM: the points left after those at the package
 * power limit cannot determine the parameters.
 */
int calibrate_run(const struct calib_config *cfg, struct energy_model *ret, struct calib_report *report);

/* The report as text: points (measured, fitted, residual) and parameters with their source. */
void calib_report_print(const struct calib_report *r, FILE *f);

/* The model file with a header saying where its numbers come from. */
void calib_model_write(const struct energy_model *m, const struct calib_report *r, const char *host, FILE *f);
