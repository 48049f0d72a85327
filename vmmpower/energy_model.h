/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "topology.h"

/*
 * Energy model of a host (docs/energy-model.md has the equations, the file
 * format and the assumptions).
 *
 * Two layers:
 *  - struct energy_model: the parameters of a host *type* (perf levels with
 *    capacity and per-core active power, core idle states, idle domains,
 *    SMT gain, migration cost).  Read from a model file
 *    (config/models/NAME.model) or derived from a struct topology with
 *    documented assumptions where the kernel publishes no watts.
 *  - struct em_host: the model bound to one topology (cores, frequency
 *    domains, LLC and package idle domains, wake orders).  em_host_power()
 *    evaluates the modelled average power of a load; it is pure arithmetic
 *    (no I/O, no allocation) and is what the planner minimises.
 */

#define EM_MAX_LEVELS 32
#define EM_MAX_IDLE_STATES 8
#define EM_NAME_MAX 32
#define EM_CAPACITY_SCALE 1024   /* capacity of the fastest level, as the kernel's SCHED_CAPACITY_SCALE */
#define EM_LATENCY_ANY UINT32_MAX

enum em_freq_scope {
        EM_FREQ_POLICY,   /* cpufreq related_cpus as published */
        EM_FREQ_CORE,     /* related_cpus joined with SMT siblings (threads share the core clock) */
        EM_FREQ_PACKAGE,  /* one level per package */
};

enum em_domain_scope {
        EM_DOMAIN_LLC,
        EM_DOMAIN_PACKAGE,
        _EM_DOMAIN_MAX,
};

struct em_perf_level {
        uint32_t freq_khz;     /* 0 only when the model has one level and the frequency is unknown */
        uint32_t capacity;     /* 1..1024, strictly increasing, last == 1024 */
        uint32_t active_mw;    /* power of one busy core at this level */
        uint32_t max_active_cores; /* turbo: reachable only while at most this many cores of the package
                                    * are busy (Σ busy fractions); 0 = any number */
};

/* Core idle states, shallow to deep.  Power is per core, reached when every thread of the core is idle. */
struct em_idle_state {
        char name[EM_NAME_MAX];
        uint32_t exit_latency_us;
        uint32_t target_residency_us;
        uint32_t power_mw;
        uint32_t wake_energy_uj;   /* energy of one exit from this state (and the entry before it) */
};

/*
 * An idle domain above the core (LLC/CCX or package).  awake: some core below
 * is not in the deepest core state; quiet: all cores below are in the deepest
 * core state but the domain's own deep state is not reached (e.g. SPR: the
 * other socket is busy); asleep: the domain's deep state (CCX off, PC6).
 */
struct em_idle_domain {
        bool present;
        uint32_t awake_mw, quiet_mw, asleep_mw;
        uint32_t exit_latency_us, target_residency_us;
        uint32_t wake_energy_uj;   /* energy of one wake-up of the domain from its deep state */
};

struct energy_model {
        char name[64];
        enum em_freq_scope freq_scope;
        uint32_t smt_gain_permille;        /* throughput of 2 busy threads vs 1, 1000..2000 */
        uint32_t migration_cost_uj;        /* energy cost of moving one vCPU */
        uint32_t active_idle_interval_us;  /* typical idle interval of a CPU that hosts vCPUs */
        bool package_idle_all_packages;    /* package deep state only when every package is idle */
        uint32_t package_power_limit_mw;   /* PL1 / PPT per package (cores + its domains); 0 = none */
        uint32_t platform_mw;              /* platform power outside the packages (memory, fans, disks, BMC) */
        uint32_t platform_busy_mw;         /* ... more with every core busy (linear in the busy share) */
        uint32_t psu_efficiency_permille;  /* DC power / wall power, 500..1000 (1000: the model is DC power) */
        unsigned n_levels;
        struct em_perf_level levels[EM_MAX_LEVELS];
        unsigned n_idle;
        struct em_idle_state idle[EM_MAX_IDLE_STATES];
        struct em_idle_domain domain[_EM_DOMAIN_MAX];
};

struct em_error {
        char file[256];
        unsigned line;          /* 0: about the whole model */
        char message[256];
};

/* Parse a model file / text.  -EINVAL with err filled on any error; ret written only on success. */
int energy_model_parse_file(const char *path, struct energy_model *ret, struct em_error *err);
int energy_model_parse_string(const char *text, const char *name_for_errors, struct energy_model *ret,
                              struct em_error *err);
/* Whole-model rules (also run by the parser).  0 or -EINVAL with err->message. */
int energy_model_validate(const struct energy_model *m, struct em_error *err);
/* The file format's rule for the model's Name (1..63 letters, digits, '-', '_', '.'). */
bool energy_model_name_valid(const char *name);
/* The lowest PackagePowerLimitMW the model accepts (0 aside): one core busy at the slowest level with its
 * domains awake (the slowest level's ActivePowerMW + every domain's AwakePowerMW). */
uint32_t energy_model_min_power_limit(const struct energy_model *m);
/* Defaults from sysfs facts plus documented assumptions (energy_model.c, docs). */
int energy_model_from_topology(const struct topology *t, struct energy_model *ret);
/* Write in the model file format (parses back to the same model). */
void energy_model_write(const struct energy_model *m, FILE *f);
const char *em_freq_scope_to_string(enum em_freq_scope s);

/* ---- the model bound to a topology ---------------------------------------- */

struct em_core {
        uint8_t n_threads;
        int cpu[2];            /* CPU ids of the threads (cpu[1] == -1 without SMT) */
        unsigned llc, pkg;     /* indices into em_host.llcs / pkgs */
        unsigned fdom;         /* frequency domain of thread 0 */
};

struct em_group {                /* contiguous range of cores [first, end) */
        unsigned first, end;
};

struct em_host {
        struct energy_model model;
        unsigned n_cpus;         /* topology n_cpus (ids 0..n_cpus-1) */
        unsigned n_cores, n_llcs, n_pkgs, n_fdoms;
        int *cpu_core;           /* [n_cpus] core index, -1 offline */
        int *cpu_thread;         /* [n_cpus] 0/1 */
        unsigned *cpu_fdom;      /* [n_cpus] */
        int *cpu_node;           /* [n_cpus] NUMA node (topology), -1 offline: plan_vcpu.nodes */
        struct em_core *cores;   /* sorted by package, LLC, core id */
        struct em_group *llcs;   /* cores of each LLC */
        struct em_group *pkgs;   /* cores of each package (LLCs of a package are contiguous) */
        unsigned n_online;
        /* the wake orders; in both, each LLC's CPUs are one run (placement.c cut_runs relies on it) */
        int *order_smt_first;    /* [n_online] CPUs: per package, LLC, core: thread 0, thread 1 */
        int *order_cores_first;  /* [n_online] per package, LLC: thread 0 of every core, then thread 1s */
        double *gapf;            /* [EM_GAPF_N][n_idle + _EM_DOMAIN_MAX] cached idle-gap fractions */
        bool has_wake;           /* some state or domain has a WakeEnergyUJ */
        bool has_limits;         /* PackagePowerLimitMW or a MaxActiveCores level */
};
#define EM_GAPF_N 256

/*
 * Whether the model's perf levels fit the host's cpufreq (docs/energy-model.md §1, "The model and the
 * host"): every level within [cpuinfo_min_freq, cpuinfo_max_freq] of the policies of the online CPUs
 * (above a policy's maximum is allowed up to the highest maximum of the host: favoured cores), and the
 * top level at that highest maximum (a lower top level would cap the host for good).  No check without
 * cpufreq, for a one-level model of unknown frequency or a synthetic topology.  0, or -ERANGE with
 * err->message naming the level and the host's range.
 */
int em_host_check(const struct topology *t, const struct energy_model *m, struct em_error *err);
/* Bind a model to a topology: -EINVAL for an invalid model, -ERANGE (logged as an error with
 * em_host_check()'s message) when its levels do not fit the host, -ENODEV without an online CPU. */
int em_host_new(const struct topology *t, const struct energy_model *m, struct em_host **ret);
void em_host_free(struct em_host *h);

/*
 * A load to evaluate: per CPU the work (utilisation in units of one CPU at
 * the fastest level, so 0.5 = 512 capacity units), the number of vCPUs it
 * hosts (each one wakes its CPU about every ActiveIdleIntervalUs; 0 =
 * inactive; saturates at 255), the deepest idle exit latency allowed
 * (EM_LATENCY_ANY = no limit), and the perf level of each frequency domain.
 */
struct em_load {
        const double *cpu_work;           /* [n_cpus] */
        const uint8_t *cpu_vcpus;         /* [n_cpus] */
        const uint32_t *cpu_max_latency_us; /* [n_cpus] */
        const uint8_t *fdom_level;        /* [n_fdoms] */
        /* wake_given: the wake-up power is wake_mw (DC, e.g. the simulator's counted wake-up
         * episodes times their energy) instead of the model's rate (ActiveIdleIntervalUs per vCPU) */
        bool wake_given;
        double wake_mw;
        /* optional (NULL: none): a memo of core evaluations (em_core_memo_new), for one em_host */
        struct em_core_memo *memo;
};

/*
 * A memo of the per-core evaluation that em_host_power() and em_core_power_at() make, keyed by
 * everything it reads of the load (each thread's work, the core's vCPUs and latency limit, the
 * level): a hit returns the same figures bit for bit.  A planner evaluates many candidate
 * placements whose cores repeat (the CPUs of a pack set share one water level).  Valid for the
 * em_host it was used with only; em_core_memo_new() returns NULL when out of memory.  Hits and misses are counted.
 */
struct em_core_memo *em_core_memo_new(unsigned slots); /* 0: the default size (256) */
void em_core_memo_free(struct em_core_memo *m);
void em_core_memo_counts(const struct em_core_memo *m, unsigned long *hits, unsigned long *misses);

struct em_breakdown {
        double active_mw;      /* Σ cores busy × P_active(level) */
        double idle_mw;        /* Σ cores idle × P(idle state reached) */
        double domain_mw;      /* Σ domains awake/quiet/asleep */
        double wake_mw;        /* wake-ups × their energy (WakeEnergyUJ) */
        double platform_mw;    /* PlatformPowerMW + PlatformBusyPowerMW × busy share */
        double psu_loss_mw;    /* (DC total) × (1 / PsuEfficiency - 1) */
        double total_mw;       /* the sum: wall power when the model has platform and PSU terms */
        unsigned capped_pkgs;  /* packages whose level the power limit or the turbo table lowered */
        unsigned capped_level;  /* the lowest level a cap forced (valid when capped_pkgs > 0) */
};

/* Average modelled power of the load (energy over a period = power × period). */
double em_host_power(const struct em_host *h, const struct em_load *l, struct em_breakdown *b);

/*
 * Per package the level cap (cap_out[p], -1 = none) that the turbo table (MaxActiveCores) and the
 * package power limit force on this load, as em_host_power() evaluates it; returns how many
 * packages are capped.
 */
unsigned em_host_level_caps(const struct em_host *h, const struct em_load *l, int *cap_out);
/* em_host_power() and the caps of em_host_level_caps() in one evaluation (cap_out may be NULL). */
double em_host_power_caps(const struct em_host *h, const struct em_load *l, struct em_breakdown *b, int *cap_out);

/* Power of one core (active + idle + wake terms and its share of PlatformBusyPowerMW, no domain terms) with its
 * level forced: used to choose levels. */
double em_core_power_at(const struct em_host *h, const struct em_load *l, unsigned core, unsigned level);
/* Busy fraction of a 2-thread core whose threads need d0, d1 of a thread alone, SMT gain g. */
double smt_core_busy(double d0, double d1, double g);
/* Each thread's busy fraction (t0, t1) and their overlap under SMT contention; false: saturated. */
bool smt_thread_busy(double d0, double d1, double g, double *t0, double *t1, double *overlap);

/*
 * The highest level a package may run at with the given number of busy cores (Σ busy fractions),
 * from the turbo table (MaxActiveCores); n_levels - 1 without one.
 */
unsigned em_turbo_level(const struct energy_model *m, double busy_cores);
/* Wall power of a host's DC package power dc_mw with busy_share (0..1) of its cores busy:
 * (dc + PlatformPowerMW + PlatformBusyPowerMW x busy_share) / PsuEfficiency. */
double em_wall_mw(const struct energy_model *m, double dc_mw, double busy_share);

/* Deepest model idle state with exit latency <= lat (and residency <= max_res); -1 if none. */
int em_deepest_idle(const struct energy_model *m, uint32_t max_latency_us, uint32_t max_residency_us);
/* Capacity of one CPU at level (1024 scale). */
static inline uint32_t em_capacity(const struct energy_model *m, unsigned level)
{
        return m->levels[level].capacity;
}
