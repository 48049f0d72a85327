/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cpuset.h"
#include "energy_model.h"
#include "policy_types.h"
#include "util.h"

/*
 * The planner: a pure, deterministic function
 *
 *   plan = f(host (topology + energy model), policy, samples, hints,
 *            previous plan, now)
 *
 * No clock reads, no I/O; the same inputs give a byte-identical plan (every
 * array of the plan can be memcmp'ed).  The daemon calls plan_compute() once
 * per control period, the simulator and the tests call the same function.
 * The algorithm and its constants are explained at the top of placement.c.
 */

/* enum place_mode and place_mode_to_string(): policy_types.h. */

struct plan_vcpu {
        uint64_t key;          /* stable unique identity chosen by the caller (vmmpowerd: vcpu_ref_key()) */
        uint32_t vm;           /* VM identity */
        enum place_mode mode;
        double util;           /* frequency-invariant utilisation, 1.0 = one CPU at the top level */
        double util_last;      /* the same, of the last period alone (the tracker's util) */
        double wait_ratio;     /* run-queue wait / wall time in the last period */
        double wait_avg;       /* the same, decayed average (the tracker's wait_avg, LoadHalfLife) */
        int cur_cpu;           /* where it runs now if known, else -1 */
        double burst_cv2;      /* squared coefficient of variation of its bursts (run time per
                                * timeslice) where the caller measures it; 0 or NaN = unknown: taken
                                * as 1 (exponential).  vmmpowerd leaves it 0: schedstat sums the run
                                * time and counts the timeslices, no variance */
        double queue_budget;   /* latency profile: this vCPU's queueing budget when tighter than the
                                * policy's (a VM's metadata); 0 = the policy's.  A pack set holding it
                                * is sized for the tightest budget of its vCPUs. */
        uint64_t nodes;        /* NUMA nodes its memory is bound to (<numatune>), bit n = node n of
                                * em_host.cpu_node: placed, packed and pinned only on their CPUs (a pack
                                * set's CPUs in them); 0 = anywhere, and so are nodes with no online CPU */
};

/* Guest hints, already validated and bounded by host policy. */
struct plan_hint {
        uint64_t key;          /* vCPU */
        double util_floor;     /* plan for at least this utilisation */
        bool boost;            /* run its frequency domain at the top level, its pCPU out of deep idle */
        double perf_floor;     /* run its frequency domain at least at this fraction of the top level's
                                * capacity (0..1): a guest's LEVEL, or a BOOST capped by MaxLevel.  A
                                * packed vCPU's floor holds for every domain of its pack set. */
};

/*
 * A vCPU "waits" (plan_vcpu_wait) when its decayed wait is over the budget, or
 * when one period's wait is over the budget and its CPU was overloaded in that
 * period (its last-period load over the packing headroom at the top level:
 * the wait of a busy neighbour, the overload to grow on at once), or when one
 * period's wait is over this many times the budget (a sudden long wait, also
 * from load outside the plan).  The decay keeps one period's wait on a CPU
 * with room (a 1 s period of 10 ms bursts holds few of them; a guest's own
 * forks) from growing the plan, to shrink again after the dwell.
 */
#define WAIT_SEVERE_FACTOR 4.0

/*
 * Profiles (config [Planner] Profile): how a pack set is sized.
 *  - latency (default): each LLC's pack set gets the fewest CPUs for which the
 *    wait model (queueing.h, placement.c) predicts that at most queue_budget
 *    of the wake-ups find every CPU of the set busy;
 *  - batch: every CPU of a set is filled up to headroom_pct of its capacity
 *    (the deep packing of releases before the wait model).
 */
enum plan_profile {
        PLAN_PROFILE_LATENCY,
        PLAN_PROFILE_BATCH,
        _PLAN_PROFILE_MAX,
};
const char *plan_profile_to_string(enum plan_profile p);
int plan_profile_from_string(const char *s); /* -EINVAL if unknown */

struct plan_policy {
        enum plan_profile profile;      /* latency */
        double queue_budget;            /* latency profile: share of wake-ups allowed to queue (0.01) */
        uint32_t headroom_pct;          /* batch profile: utilisation of an active CPU <= this % of its
                                         * capacity (80); latency profile: the grow trigger of a CPU
                                         * outside a pack set */
        uint32_t level_headroom_pct;    /* a domain's level holds its CPUs' load within this % of capacity (97) */
        double wait_budget;             /* wait_avg above this, or wait_ratio above it on an overloaded CPU
                                         * or above WAIT_SEVERE_FACTOR x it, forces growth at once (0.05) */
        nsec_t shrink_dwell_ns;         /* a saving must be predicted this long before moving (10 s) */
        nsec_t move_cooldown_ns;        /* a shrink does not move a vCPU moved less than this ago; -1: the
                                         * profile's (batch 60 s, latency 0) */
        nsec_t period_ns;               /* control period (1 s) */
        unsigned max_moves;             /* vCPU moves per period, 0 = unlimited (16) */
        uint32_t active_max_latency_us; /* idle exit latency allowed on CPUs hosting vCPUs */
        bool pin_single_cpu;            /* pin a packed vCPU to its one CPU, not its LLC's pack set */
};
void plan_policy_defaults(struct plan_policy *p);
/* The wait the planner acts on: wait_ratio when over the budget and cpu_overloaded (its CPU's last-period
 * load over the packing headroom at the top level) or over WAIT_SEVERE_FACTOR x the budget, else wait_avg
 * when over the budget, else 0 (not waiting).  NaN reads as 0. */
double plan_vcpu_wait(const struct plan_policy *pol, const struct plan_vcpu *v, bool cpu_overloaded);

enum plan_decision {
        PLAN_INITIAL,          /* no previous plan: the target is applied */
        PLAN_KEEP,             /* placement kept (levels and idle limits recomputed) */
        PLAN_GROW,             /* overload or wait over budget: moved at once */
        PLAN_SHRINK_PENDING,   /* a saving is predicted, dwell not over yet (or none of its moves possible now) */
        PLAN_SHRINK,           /* the saving held for the dwell and beats the move cost: moved */
        _PLAN_DECISION_MAX,
};
const char *plan_decision_to_string(enum plan_decision d);

struct plan_reasons {
        enum plan_decision decision;
        double plan_mw;        /* modelled power of this plan */
        double spread_mw;      /* ... of spreading the same vCPUs one per core */
        double prev_mw;        /* ... of keeping the previous placement under the current load */
        double target_mw;      /* ... of the best placement found (applied or not) */
        unsigned n_active;
        unsigned candidates;   /* placements evaluated by the target search */
        unsigned moves;        /* vCPUs moved by this plan */
        unsigned moves_deferred; /* wanted but not made: held by the cap, waiting for the dwell, no room */
        unsigned moves_capped; /* of moves_deferred, held by the per-period cap (MaxMovesPerPeriod) */
        unsigned moves_dwell;  /* of moves_deferred, a shrink waiting out ShrinkDwell */
        unsigned moves_cooling; /* of moves_deferred, a shrink held by MoveCooldown (a vCPU of its source
                                 * CPU moved less than MoveCooldown ago) */
        unsigned shrink_moves; /* of moves, those made to save energy (a grow may make some on other cores) */
        int forced_wake_cpu;   /* CPU woken because of forced_by_key, -1 if none */
        uint64_t forced_by_key;
        char text[256];
};

/*
 * The pack set of each LLC (latency and batch profiles alike): the CPUs the
 * plan gives packed vCPUs there, and what the wait model says of it.
 */
struct plan_set {
        unsigned cpus;         /* CPUs in the set (0: no set in this LLC) */
        unsigned vcpus;        /* packed vCPUs in it */
        unsigned level;        /* perf level of its CPUs (the highest of their domains) */
        double speed;          /* per-CPU speed share (1; gain / 2 for both threads of a core) */
        double pool_speed;     /* the same over its CPUs without a vCPU pinned alone, as its sizing
                                * counts them (the closed loop reads the same pool) */
        double demand;         /* its vCPUs' demand, 1.0 = a CPU at the top level */
        double pwait;          /* predicted share of wake-ups that queue (corrected model) */
        double pwait_less;     /* the same with one CPU fewer (1 when cpus <= 1) */
        double measured;       /* queueing share its vCPUs' measured wait stands for, previous plan's set */
        double corr;           /* closed-loop correction of the model (1 = as modelled) */
        double corr_floor;     /* the correction does not fall under this: raised past the correction
                                * each time the set measured over its budget, forgotten slowly */
        double budget;         /* budget it is sized for (latency profile) */
};

struct plan {
        unsigned n_cpus, n_fdoms, n_vcpus;
        cpuset_t active;             /* CPUs hosting vCPUs (including excluded ones' CPUs) */
        uint64_t *vcpu_key;          /* [n_vcpus], in input order */
        int *vcpu_cpu;               /* [n_vcpus], -1 = not placed (exclude with unknown CPU) */
        uint8_t *vcpu_boost;         /* [n_vcpus] 1: boosted by a hint (its CPU at the top level) */
        uint8_t *vcpu_alone;         /* [n_vcpus] 1: larger than its pack set's water level: pinned alone */
        nsec_t *vcpu_moved_ns;       /* [n_vcpus] when a plan last moved it, -1: never (MoveCooldown) */
        double *vcpu_demand;         /* [n_vcpus] the demand planned for it (step 1 of placement.c) */
        uint8_t *fdom_level;         /* [n_fdoms] perf level index */
        int8_t *cpu_idle_state;      /* [n_cpus] deepest allowed model idle state, -1 = none (offline: -1) */
        uint32_t *cpu_max_latency_us;/* [n_cpus] the same as an exit latency limit */
        double *cpu_work;            /* [n_cpus] planned utilisation (1.0 = a CPU at the top level),
                                      * balanced within pack sets (placement.c, pack_set_balance) */
        unsigned n_llcs;
        struct plan_set *set;        /* [n_llcs] */
        nsec_t shrink_pending_since_ns; /* -1 when no shrink is pending */
        bool sets_as_one;            /* saturated (plan_saturated): the LLCs' pack sets pinned as one,
                                      * at the top level (plan_pin_sets) */
        nsec_t saturated_ns;         /* when a plan was last saturated (-1: never); the sets stay
                                      * one 30 s after it while every core stays active */
        nsec_t now_ns;
        struct plan_reasons why;
};

int plan_compute(const struct em_host *h, const struct plan_policy *pol, const struct plan_vcpu *v, size_t n_v,
                 const struct plan_hint *hints, size_t n_hints, const struct plan *prev, nsec_t now,
                 struct plan **ret);
void plan_free(struct plan *p);
/* Contents equal (every array and field). */
bool plan_equal(const struct plan *a, const struct plan *b);

/* Modelled power of a plan's load. */
double plan_power(const struct em_host *h, const struct plan *p, struct em_breakdown *b);

/*
 * Inactive online CPU with the least marginal modelled power for a small
 * extra load (10% of a CPU), ties broken by the SMT-first wake order; -1 if
 * every CPU is active, -ENOMEM.
 */
int plan_best_wake_cpu(const struct em_host *h, const struct plan *p);

/*
 * For tests: the grow's choice of a CPU to wake scores every candidate CPU
 * (on) instead of one CPU per class of identical ones (off, the default);
 * the plans must be the same (test_wake_classes).
 */
void plan_test_wake_exhaustive(bool on);
/*
 * Active CPU whose release saves the most modelled power once its work moves
 * to the least loaded other active CPU (the last busy CPU of a domain that
 * can then sleep); -1 if fewer than two CPUs are active, -ENOMEM.
 */
int plan_best_sleep_cpu(const struct em_host *h, const struct plan *p);

/* Capacity (1..1024) of the perf level plan p runs online CPU c at. */
unsigned plan_cpu_capacity(const struct em_host *h, const struct plan *p, int c);

/*
 * The CPUs each placed vCPU may run on (ret[n_v]): with pol->pin_single_cpu,
 * or for a dedicated or spread vCPU, its planned CPU alone; for a packed vCPU
 * the "pack set" of its planned CPU's LLC: every CPU of that LLC the plan
 * gives packed vCPUs.  The plan keeps the same CPUs awake either way; inside
 * the set the kernel's wake-up balancing takes a vCPU to whichever of them is
 * idle instead of queueing it behind a busy one.  A boosted vCPU (hint) gets
 * its CPU alone: that CPU is the one kept at the top level for it; so does a
 * vCPU larger than its set's water level (plan->vcpu_alone): its CPU runs
 * the level it needs, the rest of the set the level of the balanced load,
 * and its CPU is taken out of the others' set: a vCPU pinned to one CPU
 * cannot leave it, so others there would queue it behind them (in
 * vmmpower-sim runs that was all of the planner's queueing over its budget).
 * Only when every CPU of a set holds a vCPU alone do the others keep them
 * all.  On a saturated host (plan->sets_as_one, plan_saturated: every core active and
 * a set over its budget; the plan runs every set at the top level then),
 * every packed vCPU, large ones included, gets the union of every LLC's
 * set instead: no core is asleep for a per-LLC pin to protect, which would
 * only keep the kernel's periodic balancer from moving load off the LLC
 * that is over.  An unplaced vCPU gets an empty set.  0, or -ENOMEM.
 */
int plan_pin_sets(const struct em_host *h, const struct plan_policy *pol, const struct plan *p,
                  const struct plan_vcpu *v, size_t n_v, cpuset_t *ret);

/*
 * Whether plan p's host is saturated, so that its pack sets are pinned as
 * one (plan->sets_as_one, plan_pin_sets): the latency profile with sets
 * (PinSingleCPU off), every core of the host active (a thread of it at
 * least: the sibling of a dedicated vCPU's thread is kept empty, not asleep
 * for the energy; a core sleeps only as a whole) and a pack set predicted
 * over its budget (plan_set.pwait > budget: at the top level, since the
 * planner raises an over-budget set's level as far as it goes).  Such a plan
 * runs every set at the top level: the kernel may move load onto any of
 * them.
 */
bool plan_saturated(const struct em_host *h, const struct plan_policy *pol, const struct plan *p);

/*
 * Water level of m CPUs carrying unmovable loads fixed[] when a movable load
 * is spread over them as evenly as it goes (a pack set balanced by the
 * kernel): lambda with sum of max(0, lambda - fixed[j]) = load.  Sorts fixed
 * in place.  0 when m is 0.
 */
double plan_water_level(double *fixed, unsigned m, double load);
