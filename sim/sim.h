/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "burst.h"
#include "config.h"
#include "energy_model.h"
#include "evsim.h"
#include "hints.h"
#include "placement.h"
#include "topology.h"
#include "trace.h"

/*
 * vmmpower-sim: replays VM utilisation traces on a modelled host and
 * compares vmmpower's planner (the daemon's plan_compute(), applied through
 * the "sim" power driver) with baselines and lower bounds under one energy
 * model.  docs/simulator.md describes every model, baseline and bound.
 */

enum sim_policy {
        SIM_VMM,        /* vmmpower's planner */
        SIM_B0,         /* Linux default: spread, performance governor, all idle states */
        SIM_B1,         /* static 1:1 pinning, schedutil-like frequency */
        SIM_B2,         /* intel-lpmd-like threshold packer */
        SIM_B3,         /* spread, powersave/EPP-style frequency */
        _SIM_RUN_MAX,   /* the policies above run the burst simulation */
        SIM_FLUID = _SIM_RUN_MAX, /* core-level fluid lower bound */
        SIM_BINPACK_REF, /* bin-packing reference: first-fit decreasing, no wake-ups; not a bound */
        SIM_LATBOUND,   /* latency-constrained bound: least energy of a placement within the queueing budget */
        _SIM_POLICY_MAX,
};
const char *sim_policy_name(enum sim_policy p);
const char *sim_policy_description(enum sim_policy p);

/*
 * What a trace's 100% (one vCPU fully busy) is on the simulated host.  The model's capacity unit
 * (1024) is the top perf level; with a turbo table (MaxActiveCores) that level is reachable by a
 * few busy cores only, so "100% = one CPU at the top level" asks a busy host for work no placement
 * can run.  SIM_DEMAND_ALLCORE (the default): one CPU at the all-core level, the highest level the
 * turbo table allows with every core of the largest package busy; SIM_DEMAND_TOP: one CPU at the
 * top level (the unit before 2026-12-05).  Without a turbo table the two are equal.
 */
enum sim_demand_unit {
        SIM_DEMAND_ALLCORE,
        SIM_DEMAND_TOP,
};
/* Demand in top-level units of one fully busy vCPU (capacity of the unit's level / 1024); *level_out
 * (may be NULL) gets the level. */
double sim_demand_scale(const struct em_host *h, enum sim_demand_unit u, unsigned *level_out);

struct sim_config {
        double oversub;                 /* vCPU : pCPU (1, 2, 4 ...) */
        unsigned n_vms;                 /* 0: whole VMs up to oversub x online CPUs worth of vCPUs */
        double vcpu_balance;            /* a multi-vCPU VM's demand: share spread evenly, the rest
                                         * filled vCPU 0 first (sim_trace_vcpu_share(); 1 = even split) */
        uint64_t seed;
        nsec_t plan_period_ns;          /* the planner runs every ... of simulated time (ControlPeriod) */
        nsec_t step_ns;                 /* observation step: one burst window per step */
        nsec_t window_ns;               /* 0: max(1 s, 50 x burst mean), at most step */
        struct burst_params burst;
        unsigned first_interval, n_intervals; /* 0 = all */
        struct plan_policy policy;      /* as the daemon builds it from its configuration */
        nsec_t half_life_ns;            /* LoadHalfLife of the tracker */
        bool progress;                  /* progress on stderr */
        bool resim_on_change;           /* re-simulate cores the planner changed (wait feedback) */
        enum sim_demand_unit demand_unit; /* what a trace's 100% is (sim_demand_scale) */
        double queue_budget;            /* share of wake-ups allowed to queue: the latency-constrained
                                         * bound's budget (default 0.01, the planner's default) */
        const struct sim_hint_script *hints; /* guest hints replayed to the planner (NULL: none) */
        struct hint_policy hint_policy; /* the [Hints] policy they are taken under (config_defaults) */
        bool free_undelivered;          /* false (default): a policy's energy includes its undelivered
                                         * work charged at sim_undelivered_mw() per CPU (docs/simulator.md §5) */
        bool check_reference;           /* also run the per-LLC reference's placements and the
                                         * latency-constrained bound's through the burst simulation,
                                         * at the budget and at SIM_REF_FRACTIONS of it
                                         * (sim_result.ref, ref_one) */
        bool check_binpack;             /* also run the bin-packing reference's placements through the
                                         * burst simulation, charged as a policy (sim_result.binpack_placed) */
};

/* The run's VM k is QEMU pid SIM_VM_PID0 + k (plan keys, hint scripts' VM numbers). */
#define SIM_VM_PID0 10000

/* Defaults: the daemon's built-in configuration (config_defaults()), 1:1, seed 1, exp bursts of 10 ms. */
void sim_config_defaults(struct sim_config *c);
/* The planner policy exactly as vmmpowerd's plan_period() builds it from a configuration. */
void sim_policy_from_config(const struct vp_config *cfg, struct plan_policy *ret);

/* --check-reference: the per-LLC reference and the lat-bound at the budget and at these fractions of it */
#define SIM_REF_FRACTIONS { 1.0, 0.5, 0.2, 0.1 }
#define SIM_N_REF 4

struct sim_policy_result {
        double energy_j;
        double *interval_w;             /* [n_intervals] mean power per trace interval */
        struct wait_hist hist;
        uint64_t wakeups, deep_wakeups;
        uint64_t queued_wakeups;        /* of the wake-ups: found no idle CPU they may run on (evsim.h) */
        double migrations;              /* placement changes + wake-up and newidle migrations (scaled to the step) */
        double moves;                   /* placement changes alone: planner moves, balancer moves */
        nsec_t decide_cpu_ns;           /* CPU time of the policy's decisions (plan_compute for SIM_VMM) */
        uint64_t decisions;
        uint64_t grows, shrinks;        /* SIM_VMM: plans by decision */
        uint64_t host_wide;             /* SIM_VMM: plans whose pack sets are pinned as one (plan->sets_as_one) */
        uint64_t host_wide_entries;     /* SIM_VMM: of them, those after a plan that was not */
        uint64_t active_cpus, active_llcs; /* SIM_VMM: CPUs hosting vCPUs and LLCs holding them, summed over plans */
        double overload_s;              /* CPU-seconds of demand over capacity (modelled power is clipped) */
        double undelivered_j;           /* overload_s charged at sim_result.undelivered_mw (included in energy_j
                                         * unless sim_config.free_undelivered) */
};

struct sim_result {
        unsigned n_vms, n_vcpus, n_cpus, n_intervals;
        unsigned want_vcpus;            /* the vCPU target (oversub x online CPUs; 0 with --vms) */
        nsec_t interval_ns;
        double vcpu_hours;
        double mean_util;               /* mean demand per vCPU */
        double demand_cpu_s;            /* total demand, CPU-seconds at the top level */
        double demand_scale;            /* a fully busy vCPU's demand at the top level (sim_demand_scale) */
        unsigned demand_level;          /* the perf level that is the demand unit */
        uint64_t events;                /* burst simulation events */
        nsec_t cpu_ns, wall_ns;
        nsec_t window_ns, vmm_window_ns; /* burst window per step: baselines', vmmpower's */
        double queue_budget;            /* the latency-constrained bound's budget */
        uint64_t hints_fed, hints_actuating; /* replayed hint lines, and hints that took a token */
        unsigned latbound_infeasible;   /* intervals where no placement meets it (the fluid bound is counted) */
        double latbound_cpus;           /* mean size of the latency-constrained bound's set over the others */
        double latbound_llc_j;          /* the same with per-LLC sets (sim_latency_bound_llc_mw), J */
        double latbound_llc_cpus;       /* mean size of its sets over the intervals it meets the budget */
        unsigned latbound_llc_infeasible; /* intervals where it does not (the fluid bound counted) */
        /* sim_config.check_reference: the per-LLC reference at the budget x SIM_REF_FRACTIONS[j]
         * (j 0: the budget itself, latbound_llc_j), its placements in the burst simulation, one
         * window per interval it has one (sim_ref_homes(), its sets' CPUs the allowed ones, its
         * level on their domains, the lowest elsewhere, no idle limit) */
        struct sim_ref_result {
                double budget;          /* the share of wake-ups its sets are sized for */
                double energy_j;        /* its energy (the fluid bound where it has no placement) */
                struct wait_hist hist;
                uint64_t wakeups, queued_wakeups;
                unsigned windows, infeasible;
                double overload_s;      /* binpack_placed: CPU-seconds of demand over capacity */
        } ref[SIM_N_REF];
        /* sim_config.check_reference: the same for the latency-constrained bound's one set
         * (sim_latency_bound_mw) at those budgets (j 0: the bound's own): the set's CPUs allowed,
         * across LLCs where it spans them, the demand homed LLC by LLC in proportion to its CPUs
         * there; its energy that of the placement charged as the policies are
         * (sim_ref_placement_mw(): its vCPUs in the idle gaps, which the bound counts none of) */
        struct sim_ref_result ref_one[SIM_N_REF];
        /* sim_config.check_binpack: the bin-packing reference's placement of each interval
         * (sim_binpack_reference) in the burst simulation, one window per interval: every vCPU
         * homed where the packing put it (one with no demand on the packed CPU with the fewest
         * vCPUs), free to run on the packing's CPUs, the packing's level on
         * their domains and the lowest elsewhere, no idle limit; its energy charged as a policy's
         * is: each CPU with the vCPUs packed onto it in the idle gaps and wake-ups, and the work over
         * its CPUs' capacity (overload_s) as undelivered work, which the reference counts neither of */
        struct sim_ref_result binpack_placed;
        /* sim_config.check_binpack: the same packing one interval late: the previous interval's
         * packing (its packed CPUs and level; the first interval's, or after one that packed
         * nothing, its own) carrying each interval's demand, each LLC's spread evenly over its
         * packed CPUs (lagged_binpack), charged the same way; what a packer that re-packed once
         * an interval on the last interval's exact demand would use and leave undelivered */
        struct sim_ref_result binpack_lag;
        /* sim_config.check_binpack: the bin-packing reference with every CPU packed to at most the
         * planner's level headroom (binpack_fill = policy.level_headroom_pct / 100, 0.97 by default)
         * of its capacity: the least margin the planner keeps below the top level, since a CPU
         * loaded past it gets the next level.  binpack_fill_j its energy as the reference's is
         * counted (sim_binpack_reference_fill, per interval); binpack_fill_placed its placements
         * simulated and charged as binpack_placed's are */
        double binpack_fill, binpack_fill_j;
        struct sim_ref_result binpack_fill_placed;
        double undelivered_mw;          /* the charge per CPU of undelivered work (sim_undelivered_mw) */
        bool free_undelivered;          /* the run's sim_config.free_undelivered */
        struct sim_policy_result p[_SIM_POLICY_MAX];
};
void sim_result_free(struct sim_result *r);

/* The modelled host. */
struct sim_host {
        struct topology *topo;
        struct em_host *em;
        char topo_name[128], model_name[64];
};
/* topology: a fixture directory (with sys/ inside) or a sysfs root, or "synth:PxC" (P packages of C cores, SMT, 8-core LLCs). */
int sim_host_load(const char *topology, const char *model_file, struct sim_host *ret, struct sim_error *err);
void sim_host_done(struct sim_host *h);

int sim_run(const struct sim_host *host, const struct sim_trace *trace, const struct sim_config *cfg,
            struct sim_result *ret);

/*
 * What one CPU-second of work a placement did not deliver costs when it is done (docs/simulator.md
 * §5), in mW: a busy core at the top level instead of the shallowest idle state, its share of the
 * platform's busy power, over the PSU efficiency.  Charged per CPU-second of overload.
 */
double sim_undelivered_mw(const struct energy_model *m, unsigned n_cores);

/* The lower bound of one load and the bin-packing reference (docs/simulator.md §5); demand[nv]. */
double sim_fluid_bound_mw(const struct em_host *h, const double *demand, unsigned nv);
int sim_binpack_reference_mw(const struct em_host *h, const double *demand, unsigned nv, double *ret_mw);
/* The bin-packing reference's placement of one interval: its level and where each vCPU went. */
struct sim_binpack_placement {
        unsigned level;                 /* the one level of the domains it packs onto (the lowest elsewhere) */
        int *home;                      /* [nv] the CPU each vCPU is packed onto, -1 for no demand */
        double *work;                   /* [n_cpus] the demand packed onto each CPU */
};
/* sim_binpack_reference_mw(), and its placement in ret_pl (or NULL; arrays the caller's). */
int sim_binpack_reference(const struct em_host *h, const double *demand, unsigned nv, double *ret_mw,
                          struct sim_binpack_placement *ret_pl);
/* The same with every CPU packed to at most fill (0 < fill <= 1) of its capacity at the level, and
 * a core to fill x SmtGain x a thread's (1: sim_binpack_reference()); -EINVAL for another fill. */
int sim_binpack_reference_fill(const struct em_host *h, const double *demand, unsigned nv, double fill,
                               double *ret_mw, struct sim_binpack_placement *ret_pl);
/* A reference's placement of one interval: its sets' CPUs, the demand each LLC's part carries, its level. */
struct sim_ref_placement {
        unsigned level;                 /* the one level of its sets */
        uint8_t *in_set;                /* [n_cpus] 1: a CPU of a set */
        double *llc_w;                  /* [n_llcs] the demand LLC k's set carries (top-level CPUs) */
};
/*
 * The latency-constrained bound of one load (latbound.c; docs/simulator.md §5): the least power of
 * a placement whose Erlang C queueing probability is within budget; *ret_cpus the size of its set.
 * 1 when a placement meets the budget, 0 when none does (*ret_mw INFINITY), -ENOMEM.  ret_pl (or
 * NULL): its one set (the demand spread evenly on it, each LLC's part carrying its CPUs' share;
 * no CPU when none meets the budget).
 */
int sim_latency_bound_mw(const struct em_host *h, const double *demand, unsigned nv, double budget, double *ret_mw,
                         unsigned *ret_cpus, struct sim_ref_placement *ret_pl);
/*
 * The same with every set within one LLC, as vmmpower's planner keeps them (the kernel's wake-up
 * path looks for an idle CPU only in the waking vCPU's LLC): per level, the LLCs filled in the
 * wake order each with the most its CPUs carry within budget (the last the rest, on the fewest
 * CPUs or more), or the demand split evenly over k LLCs; the least power of those.  A reference
 * for a per-LLC planner, not a bound of every placement (docs/simulator.md §5).
 */
int sim_latency_bound_llc_mw(const struct em_host *h, const double *demand, unsigned nv, double budget,
                             double *ret_mw, unsigned *ret_cpus, struct sim_ref_placement *ret_pl);
/*
 * The power of a reference's placement pl charged as the policies are (and as the per-LLC reference
 * is): each LLC's part carries its demand evenly, and each of its CPUs counts its share of the nv
 * vCPUs of total demand W (nv x / W, at least one) in the model's idle gaps and wake-ups; the
 * placement's level on its domains, the lowest elsewhere, no idle limit.  NAN when out of memory.
 */
double sim_ref_placement_mw(const struct em_host *h, const struct sim_ref_placement *pl, unsigned nv, double W);
/*
 * A reference's placement of one interval (ret_pl of sim_latency_bound_llc_mw or of
 * sim_latency_bound_mw) made real for the burst simulation: the vCPUs, largest first, each into the LLC whose set has the
 * most of its demand left to take (ties: the lower LLC), homed on the least loaded CPU of that
 * set; home[i] -1 when no set is left (the bound has no placement).  nv vCPUs of demand[].
 */
void sim_ref_homes(const struct em_host *h, const struct sim_ref_placement *pl, const double *demand, unsigned nv,
                   int *home);
/* Erlang C: the probability that an arrival waits in M/M/c with offered load a (1 when a >= c). */
double sim_erlang_c(unsigned c, double a);
/* The least c <= max_c with sim_erlang_c(c, a) <= budget; 0 for a <= 0, max_c + 1 when none. */
unsigned sim_erlang_servers(double a, double budget, unsigned max_c);

/*
 * One planning step exactly as the daemon's plan_period(): the samples as the
 * tracker holds them (a VM: the samples of one pid in a row) through the
 * daemon's input step, plan_input_build() (key vcpu_ref_key(pid, index), mode
 * pack, util = decayed util, util_last = the last period's, wait_ratio = last
 * period's ratio, wait_avg = its decayed average; no thread CPUs; the hints of
 * the replay hints at now, when not NULL), then plan_compute().
 */
struct sim_vcpu_sample {
        uint32_t pid;
        unsigned index;
        double util_avg, util_last, wait_ratio, wait_avg;
};
int sim_plan_step(const struct em_host *h, const struct plan_policy *pol, const struct sim_vcpu_sample *s,
                  size_t n, struct sim_hint_replay *hints, const struct plan *prev, nsec_t now, struct plan **ret);

/*
 * The model's power at SPECpower_ssj2008's load levels (curve.c; docs/energy-model.md §7): load[i]
 * in 0..1 of the host's full-load throughput, uniform over every thread, at the level, or time mix
 * of two levels (the same for every frequency domain), that carries it at the least power; ret[n].
 */
struct sim_curve_point {
        double load, throughput;   /* share of the full-load throughput; CPUs at the top level */
        double mw;                 /* em_host_power() (wall power when the model has platform and PSU terms) */
        int level, level_hi;       /* the levels of the time mix chosen (equal: one level) */
        double mix;                /* share of the time at level_hi */
        struct em_breakdown b;
};
int sim_power_curve(const struct em_host *h, const double *load, unsigned n, struct sim_curve_point *ret);

#define SIM_MEASURED_MAX 32
struct sim_measured {
        unsigned n;
        double load_pct[SIM_MEASURED_MAX], watts[SIM_MEASURED_MAX];
};
/* A measured curve file: "LOAD_PCT WATTS" lines, '#' comments (tests/data/specpower/). */
int sim_measured_load(const char *path, struct sim_measured *ret, struct sim_error *err);

/* Output (report.c). */
void sim_print_table(const struct sim_result *r, FILE *f);
void sim_write_csv(const struct sim_result *r, const char *run_label, bool header, FILE *f);
int sim_write_svg(const struct sim_result *r, const char *title, FILE *f);
