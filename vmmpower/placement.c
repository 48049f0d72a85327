/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The planner (placement.h): which pCPUs are active, which vCPU runs where,
 * the perf level of each frequency domain and the idle limit of each pCPU.
 * Every control period, pure arithmetic on the inputs.
 *
 * Terms
 *
 *  - demand d of a vCPU: its share of a CPU at the top level (1.0 = always
 *    running there), from the tracker's utilisation, hints and wait (step 1).
 *  - capacity of a level: its work rate over the top level's (levels[L]
 *    .capacity / 1024); SmtGain: a core's capacity with both threads busy,
 *    over one thread's alone.
 *  - room of a CPU: how much more demand it takes at a level; the packing
 *    headroom (PackHeadroomPercent, 80) is the share of capacity the batch
 *    profile packs to, the level headroom (LevelHeadroomPercent, 97) the
 *    share a level is run to before the next one is used.
 *  - wake order: the order CPUs are woken in, topology-aware (an LLC, then
 *    its package, before the next), SMT-first (a sibling right after its
 *    core) or cores-first (every core of an LLC before any sibling).
 *  - pack set of an LLC: the CPUs of the LLC that hold its packed vCPUs
 *    (PinSingleCPU = no).  The daemon pins a packed vCPU to its set
 *    (plan_pin_sets), so the kernel balances the set: a waking vCPU goes to
 *    an idle CPU of it, a newly idle CPU pulls from it.  The set is one queue
 *    with c servers, and its load is evaluated balanced.
 *  - water level lambda of a set: the load each of its CPUs carries once the
 *    movable load is spread as evenly as it goes,
 *        sum over the set's CPUs of max(0, lambda - fixed_c) = movable load.
 *  - large vCPU: one whose demand is over its set's water level; a busy
 *    thread is not spread by time slicing, so it keeps its CPU (vcpu_alone:
 *    pinned there, that CPU out of the others' set, one per CPU, and not
 *    beside another on its core when the two are over SmtGain x a thread:
 *    the core would not deliver them; that one stays movable, except after
 *    a saturated plan).
 *  - queueing share P of a set: the share of its wake-ups that find every
 *    CPU of the set busy; the budget (QueueBudgetPercent, or a VM's tighter
 *    queue-budget-percent; the tightest of a set's vCPUs) bounds it.
 *  - move: a vCPU whose planned CPU (for a packed vCPU: set) changes; a level
 *    or an idle limit change is not a move.
 *
 * Steps
 *
 *  1. Demand.  d = max(util, hint floor), plus the vCPU's wait when it
 *     waited for CPU (plan_vcpu_wait) and the CPU it ran on was saturated
 *     (at least WAIT_SATURATED = 90% of its capacity at the level it ran at,
 *     or the level headroom if higher; SmtGain x that for a core with both
 *     threads busy; for a packed vCPU, its set over the set's capacity) or
 *     unknown: on a saturated CPU it wanted the time it got plus the time it
 *     waited, on a CPU with room it did all its work and the wait was a
 *     delay.  Which wait counts: the decayed wait_avg over the budget, or one
 *     period's wait_ratio over it when the CPU was overloaded in that
 *     period, or one period's over WAIT_SEVERE_FACTOR times it (on a CPU with
 *     room one period's wait is noise: a 1 s period of 10 ms bursts holds few
 *     bursts).  Clamped to 0..1.
 *  2. Candidates (target search).  First-fit decreasing (by d, ties by key)
 *     onto the CPUs in a wake order, every CPU's room = packing headroom x
 *     capacity at a candidate level L (headroom x capacity x SmtGain for a
 *     core once both threads hold work).  Levels tried in the SMT-first
 *     order: the top level (densest packing), then downwards until the energy
 *     rises or the demand no longer fits, then upwards from the lowest level
 *     whose room holds the demand until the energy rises (energy over the
 *     level is roughly U-shaped: many slow CPUs .. few fast ones); in the
 *     cores-first order the top level and the best level found; plus the
 *     spread baseline (one vCPU per core round-robin over packages and LLCs,
 *     then siblings).  Typically 7 to 12 candidates.  Dedicated vCPUs take
 *     whole free cores first, spread vCPUs one free core each, excluded
 *     vCPUs stay where they are as background load.  First fit is exact, on
 *     a 4-ary tree of room per CPU: O(V log P) per candidate.  The latency
 *     profile sizes its pack sets by the wait model instead of the packing
 *     headroom (L2 below).
 *  3. Balance and levels of each candidate.  Each set's load is balanced
 *     (pack_set_balance: the water level; large vCPUs settled largest first,
 *     each lowering the level for the rest).  Each frequency domain
 *     gets the lowest level at which every CPU's balanced load is within the
 *     level headroom of its capacity, raised only where the model says a
 *     higher level costs less (race to idle), and every CPU of a set at least
 *     the level its water level needs (2 lambda within SmtGain x the level
 *     headroom on a core with both threads in the set): the kernel balances
 *     equal load per thread and does not weigh a frequency cap.  Latency
 *     profile: also the level at which the set's P is within its budget (L3).
 *     The modelled power of the result (energy_model.c, O(P)) is the
 *     candidate's cost; the cheapest is the target.
 *  4. Hysteresis against the previous plan (re-evaluated under the current
 *     load, new vCPUs placed first-fit into it):
 *     - grow at once: when a CPU is over headroom at the top level, a set is
 *       over its budget at the top level (latency), or a vCPU waits (step
 *       1), its vCPUs move (wait offenders first, then the largest) to their
 *       target CPU if it has room, else to an active CPU with room, else to
 *       the best CPU to wake (the least power with a probe load on it: one
 *       CPU scored per class of identical ones, ws_best_wake), else (every
 *       CPU awake) to a less loaded active CPU with room.  A waiting vCPU
 *       only moves where it is relieved: to an empty core, or to a CPU that
 *       with it is no more loaded than the one it leaves is without it (no
 *       ping-pong; a plan that moved nothing is not a grow).  The grow is
 *       local: the cores it touches are marked, the rest of the host goes on
 *       to the next point;
 *     - shrink (any move made only to save energy) once the target has been
 *       predicted cheaper for shrink_dwell_ns in a row *and* the saving over
 *       the dwell exceeds MigrationCostUJ x moves.  A grow does not cancel a
 *       pending shrink: once the dwell is over it is applied on the untouched
 *       cores (a source CPU only as a whole), and moves onto a CPU with vCPUs
 *       must be wait-safe by a processor-sharing estimate (u x / (1 - x) for
 *       a vCPU of demand u among others of demand x, over the CPU's capacity
 *       at its level; for the moved vCPU and the largest one there);
 *     - a shrink does not move a vCPU a plan moved less than the move
 *       cooldown ago (plan->vcpu_moved_ns; MoveCooldown, by default 60 s
 *       under the batch profile, 0 under latency), nor vacate the CPU it is
 *       on; a grow is never held by it;
 *     - at most max_moves moves per period, grow and shrink together (the
 *       rest is deferred and, for a shrink, continued without a new dwell).
 *  5. Idle limits: CPUs hosting vCPUs are limited to states whose exit
 *     latency is within policy.active_max_latency_us; inactive CPUs may use
 *     every state.
 *  6. Pins (plan_pin_sets, called by plan_to_actions): a packed vCPU its LLC's
 *     set (without the CPUs of vCPUs pinned alone, unless those are all it
 *     has), within its NUMA nodes; a dedicated, spread, boosted or large
 *     vCPU, and every vCPU with PinSingleCPU, its planned CPU alone.  On a
 *     saturated host (plan_saturated: every core active and a set over
 *     its budget) the LLCs' sets are pinned as one, large vCPUs with them,
 *     and every set runs the top level (fill_plan): no core is asleep for a
 *     per-LLC pin to protect, and the kernel's periodic balancer evens the
 *     LLCs' load within milliseconds where this planner moves a few vCPUs a
 *     period (at 4:1 on a busy day one LLC stayed saturated for minutes while
 *     the others had room: docs/simulator.md §5).  The sets stay one for
 *     SATURATION_HOLD_NS after the last saturated plan while every core
 *     stays active (fill_plan).
 *
 * The latency profile (policy.profile, the default)
 *
 *  L1. Model: a set of c CPUs at capacity C (per thread SmtGain / 2 of it
 *      when both threads of a core are in the set) carrying demand D from
 *      vCPUs of demand-weighted mean size s queues
 *      P = min(1, f k Pfs(c, n = D / s, u = s)): Pfs the finite-population
 *      Erlang C (machine-repair model: n vCPUs, each busy u, on c CPUs; c
 *      vCPUs on c CPUs never queue), f the Allen-Cunneen factor (1 + cs^2) / 2
 *      of the vCPUs' burst variability (plan_vcpu.burst_cv2, 1 when unknown;
 *      vmmpowerd and vmmpower-sim leave it unknown: schedstat has a vCPU's run
 *      time and timeslice count, the mean burst and not its variance), k the
 *      set's closed-loop correction (L4).  Checked against
 *      the simulator's event model of the kernel's balancing (sim/evsim.c,
 *      test_queueing_vs_evsim): within half a point on sets of 2-8 CPUs
 *      without SMT at 3.5-21% queueing.
 *  L2. Sizing (place_sets): the packed vCPUs, largest first, are cut into
 *      runs, one per LLC in the wake order: each LLC takes the longest run
 *      its free CPUs carry with P <= budget, the last one the fewest CPUs
 *      that carry the rest; a run is spread over its CPUs a core at a time
 *      (put_balanced: the largest vCPUs, the ones pinned alone, on
 *      different cores).  Sets stay within an LLC: the wake-up path
 *      (select_idle_sibling) looks for an idle CPU only in the LLC, so two
 *      LLCs are not one queue (and a cross-LLC move costs the cache).  NUMA-bound vCPUs (plan_vcpu.nodes) are cut after
 *      the unbound ones, per node mask, onto the empty CPUs of their nodes
 *      (cut_runs: a queue of their own, conservative).
 *  L3. Levels: every domain of a set runs at least the lowest level at which
 *      P <= budget, over all its CPUs and vCPUs and over the CPUs without a
 *      large vCPU with the movable load (the pool; a thread beside a large
 *      vCPU's counts at a lone thread's speed), both.  A candidate over the budget
 *      even at the top level is charged LAT_PENALTY x the top level's power
 *      per CPU and unit of excess; in step 4 such a set grows at once, and a
 *      grow destination must keep its set within the budget.
 *  L4. Closed loop (set_feedback): the previous plan's set without the CPUs
 *      and vCPUs it pinned alone, the other vCPUs' utilisation and decayed
 *      run-queue wait give the queueing share the wait stands for
 *      (queue_measured_pwait, the M/M/c relation W = P A / (c - A)); over
 *      the budget, k rises at once to measured / predicted (the level rises
 *      or the set grows in this plan); under half the budget it falls by at
 *      most CORR_DECAY a period, towards that ratio when the prediction says
 *      something (at least CORR_INFORMATIVE of the budget), else towards 1
 *      (the set may shrink after the dwell).  k is never under 1 (the loop
 *      only adds caution to the model) nor under the set's floor: a set over
 *      its budget raises its floor to measured / predicted (or, when the
 *      prediction says nothing, to CORR_PROBE times the k it was sized
 *      with), so a fall that took it over the budget once stops short of
 *      that the next time; the floor decays by CORR_FLOOR_DECAY a period.
 * The batch profile keeps the packing headroom of steps 2 and 4.
 *
 * Constants
 *
 *  - WAIT_SATURATED 0.9: a CPU busier than this is short of capacity for the
 *    tracker (busy time cannot exceed it), so its vCPUs' wait is demand.
 *  - WAIT_SEVERE_FACTOR 4 (placement.h): one period's wait this far over the
 *    budget is not burst noise; it grows at once.
 *  - LAT_PENALTY 10: a set over its budget costs ten times the top level's
 *    power per CPU and unit of excess, so that the search prefers any
 *    candidate within the budget and, when none is, the least over.
 *  - QUEUE_BUDGET_MAX 0.999: the budget is taken below 1 (QueueBudgetPercent
 *    100 is 0.999): a saturated set's predicted share is exactly 1 and must
 *    be over any budget, or every set would fit anywhere.
 *  - CORR_MIN 1, CORR_MAX 16: the closed loop never makes the model more
 *    optimistic (a correction under 1, learnt while a set was quiet, was
 *    wrong when its load rose: in a vmmpower-sim variant without vCPUs
 *    pinned alone a set held at 0.25 queued 10% of its wake-ups where the
 *    model itself said 15%, docs/simulator.md §5); CORR_MAX bounds what
 *    one bad sample of wait can cost (a set at most 16x as cautious as
 *    modelled).
 *  - CORR_DECAY 0.8: the correction falls by at most a fifth a period, so a
 *    set that was over its budget shrinks back over several dwell periods,
 *    not at the first quiet sample.
 *  - CORR_INFORMATIVE 0.25: a prediction under a quarter of the budget says
 *    too little about the model's error to take measured / predicted as the
 *    correction; the correction then falls towards 1 (a set that measured
 *    over its budget once, and grew until its prediction said about 0, kept
 *    a correction of up to 16 for good before stop 26: half the Genoa 2:1
 *    sets sat at 16, docs/simulator.md §5).
 *  - CORR_PROBE 1.25, CORR_FLOOR_DECAY 0.999: after a fall towards 1 took a
 *    set over its budget where the prediction said nothing, the next fall
 *    stops a quarter above where that one did (where it said something, the
 *    floor is the measured ratio itself: test_latency_closed_loop's planted
 *    3x error is corrected at once and held); the floor halves its excess
 *    over 1 in about 700 periods (12
 *    minutes at the default period), so a set probes again at most every
 *    few minutes as its load moves.
 *  - MOVE_COOLDOWN_BATCH_NS 60 s: the issue's "at most one planner move
 *    per vCPU per minute", held where the moves come from: without it the
 *    batch profile's shrinks undid the grows of bursty load every few
 *    seconds (60-110 moves per vCPU-hour on the simulator's 1:1 and 2:1
 *    runs, 10-30 with it at about the same energy).  The latency profile's
 *    default is 0: its sets are sized by the wait model, it moved fewer than
 *    30 times a vCPU-hour, and holding its shrinks cost 0.6% of the energy
 *    on the 2:1 Genoa run (docs/simulator.md §5).
 *  - SATURATION_HOLD_NS 30 s: the sets stay pinned as one this long after
 *    the last saturated plan while every core stays active.  Without it a
 *    host on the boundary went in and out of the one set every few minutes
 *    (Genoa 4:1 pl-20110306 2 ms: 450 entries a day, wait p99 2.11 ms
 *    against a 1.12 ms limit); with 30 s, 112 entries and 1.06 ms
 *    (docs/simulator.md §5).
 *  - ROOM_EMPTY_CORE 4, FFD_WINDOW 4, WAKE_PROBE_WORK 0.1: first-fit and
 *    best-wake-CPU details (an empty core takes any vCPU; positions scanned
 *    linearly before the tree; the load that compares CPUs to wake).
 *
 * Determinism: no clock, no randomness, every tie broken by key or CPU
 * order, and the output arrays are fully written (memcmp-able).
 */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"
#include "queueing.h"

#define EPS 1e-9
#define QUEUE_BUDGET_MAX 0.999 /* the latency profile's budget at most (w->budget) */
#define ROOM_EMPTY_CORE 4.0      /* room of an empty core: any single vCPU fits */
#define ROOM_NONE (-1.0)
#define MAX_LEVEL_CANDIDATES 8
#define WAKE_PROBE_WORK 0.1      /* load used to compare CPUs to wake: 10% of a CPU */
#define MOVE_COOLDOWN_BATCH_NS (60 * NSEC_PER_SEC) /* MoveCooldown's default under the batch profile */
#define SATURATION_HOLD_NS (30 * NSEC_PER_SEC)     /* the sets stay one this long after saturation */
#define FFD_WINDOW 4             /* positions scanned linearly before the segment tree search */

double plan_vcpu_wait(const struct plan_policy *pol, const struct plan_vcpu *v, bool cpu_overloaded)
{
        if (v->wait_ratio > (cpu_overloaded ? 1.0 : WAIT_SEVERE_FACTOR) * pol->wait_budget)
                return v->wait_ratio > 1.0 ? 1.0 : v->wait_ratio;
        if (v->wait_avg > pol->wait_budget)
                return v->wait_avg > 1.0 ? 1.0 : v->wait_avg;
        return 0.0;
}

const char *plan_profile_to_string(enum plan_profile p)
{
        static const char *const n[_PLAN_PROFILE_MAX] = { "latency", "batch" };
        return p < _PLAN_PROFILE_MAX ? n[p] : "?";
}

int plan_profile_from_string(const char *s)
{
        for (int p = 0; p < _PLAN_PROFILE_MAX; p++)
                if (s && strcmp(s, plan_profile_to_string((enum plan_profile) p)) == 0)
                        return p;
        return -EINVAL;
}

const char *plan_decision_to_string(enum plan_decision d)
{
        static const char *const n[_PLAN_DECISION_MAX] = { "initial", "keep", "grow", "shrink-pending",
                                                           "shrink" };
        return d < _PLAN_DECISION_MAX ? n[d] : "?";
}

void plan_policy_defaults(struct plan_policy *p)
{
        p->profile = PLAN_PROFILE_LATENCY;
        p->queue_budget = 0.01;
        p->headroom_pct = 80;
        p->level_headroom_pct = 97;
        p->wait_budget = 0.05;
        p->shrink_dwell_ns = 10 * NSEC_PER_SEC;
        p->move_cooldown_ns = -1;
        p->period_ns = NSEC_PER_SEC;
        p->max_moves = 16;
        p->active_max_latency_us = EM_LATENCY_ANY;
        p->pin_single_cpu = false;
}

/* ---- workspace ----------------------------------------------------------- */

struct ws {
        const struct em_host *h;
        const struct plan_policy *pol;
        const struct plan_vcpu *v;
        size_t nv;
        double hfrac, lfrac, gain;
        bool race_to_idle;      /* can a higher level than needed ever cost less? */
        double *dem;            /* [nv] */
        double *wait;           /* [nv] the wait it acts on (plan_vcpu_wait), 0 if none */
        uint8_t *boost;         /* [nv] */
        double *floor;          /* [nv] perf floor (plan_hint.perf_floor), 0 = none */
        double *fdom_floor;     /* [n_fdoms] scratch: the largest floor of a domain's vCPUs */
        unsigned *sorted;       /* [nv] by demand desc, key asc */
        int *sib;               /* [n_cpus] SMT sibling or -1 */
        /* state */
        double *work, *base_work;     /* [n_cpus] */
        unsigned *nvc, *base_nvc;     /* [n_cpus] */
        uint8_t *resv;          /* [n_cpus] 0 free, 1 one vCPU only (spread), 2 dedicated core */
        uint8_t *cpu_boost;     /* [n_cpus] */
        uint8_t *in_set;        /* [n_cpus] pack-set scratch */
        uint8_t *set_level;     /* [n_llcs] pack-set scratch: the set's level */
        uint8_t *large;         /* [nv] pack-set scratch: larger than its set's water level, runs alone */
        uint8_t *cpu_large;     /* [n_cpus] pack-set scratch: holds a large vCPU */
        double *set_load;       /* [n_llcs] pack-set scratch: the set's movable load */
        double *set_lambda;     /* [n_llcs] pack-set scratch: its water level */
        uint8_t *set_done;      /* [n_llcs] pack-set scratch: water level found */
        uint8_t *set_flat;      /* [n_llcs] pack-set scratch: no unmovable load on its CPUs */
        unsigned *set_free;     /* [n_llcs] pack-set scratch: CPUs without a large vCPU (flat sets) */
        double *ework;          /* [n_cpus] load as evaluated: work, balanced within pack sets */
        double *fixed;          /* [n_cpus] scratch: a set's unmovable loads, sorted */
        int *assign;            /* [nv] */
        /* evaluation */
        uint8_t *active;        /* [n_cpus] */
        uint32_t *lat;          /* [n_cpus] */
        uint8_t *level;         /* [n_fdoms] */
        unsigned *fdom_start, *fdom_cores; /* CSR: cores of each fdom */
        uint8_t *fdom_one_llc;  /* [n_fdoms] its cores are in one LLC, and it holds no thread of another
                                 * core (ws_best_wake's classes) */
        unsigned *fdom_busy, *llc_busy; /* [n_fdoms], [n_llcs] ws_best_wake scratch: CPUs not empty */
        unsigned *spread_cores; /* [n_cores] */
        /* FFD */
        double *seg;
        unsigned segn;          /* leaves (a power of 4 >= n_online) */
        unsigned leaf0;         /* index of the first leaf: (segn - 1) / 3 */
        int *cpu_pos;           /* [n_cpus] */
        double penalty_mw;        /* of the last finalize(): undelivered work charged (turbo table, power limit) */
        /* wait model (latency profile; step 2 of the comment at the top) */
        bool latency;           /* pack sets sized by the wait model */
        bool smt;               /* some core has two threads */
        bool any_vcpu_budget;   /* some vCPU has a budget of its own (vcpu_budget) */
        double budget;          /* pol->queue_budget */
        double dbar;            /* demand-weighted mean demand of the packed vCPUs (top-level units) */
        double acf;             /* Allen-Cunneen factor of their bursts */
        double *corr;           /* [n_llcs] closed-loop correction of the model per LLC's set */
        double *corr_floor;     /* [n_llcs] its floor (plan_set.corr_floor) */
        double *measured;       /* [n_llcs] measured queueing share of the previous plan's set */
        unsigned *sorted_pack;  /* [nv] place_sets scratch: the packed vCPUs to place, largest first */
        int *cpu_list;          /* [n_cpus] place_sets scratch: an LLC's free CPUs */
        int *cpu_list2;         /* [n_cpus] put_balanced scratch: second threads */
        uint8_t *cpu_mark;      /* [n_cpus] put_balanced scratch, all 0 between calls */
        double lat_over;        /* of the last finalize(): sum over sets of CPUs x queueing over the budget at the
                                 * top level */
        double *work2, *base_work2; /* [n_cpus] sum of the squared demands of its vCPUs */
        double *set_load2;      /* [n_llcs] pack-set scratch: sum of squared movable demands */
        double *set_budget;     /* [n_llcs] the tightest budget of the set's vCPUs (set in pack_set_balance) */
        double *set_tot, *set_tot2; /* [n_llcs] pack-set scratch: all its vCPUs' demand, squared (large ones too) */
        double *pre1, *pre2;    /* [nv + 1] lat_rooms scratch: prefix sums of demand, squared demand */
        unsigned *llc_n;        /* [n_llcs] online CPUs per LLC */
        /* NUMA binding (plan_vcpu.nodes) */
        uint64_t *nodes;        /* [nv] its nodes that have an online CPU; 0 = anywhere */
        bool any_nodes;         /* some vCPU is bound */
        bool prev_one_set;      /* the previous plan pinned the sets as one (a saturated host) */
        struct queue_memo *qmemo; /* the wait model's sums, for this plan only */
        struct em_core_memo *cmemo; /* the energy model's core evaluations, for this plan only */
        size_t n_reserved;      /* vCPUs in mode dedicated or spread (place_reserved) */
        size_t n_boost, n_floor; /* vCPUs boosted, with a performance floor (the hints) */
};

static void ws_free(struct ws *w)
{
        free(w->qmemo);
        em_core_memo_free(w->cmemo);
        free(w->dem);
        free(w->wait);
        free(w->boost);
        free(w->floor);
        free(w->fdom_floor);
        free(w->sorted);
        free(w->sib);
        free(w->work);
        free(w->base_work);
        free(w->nvc);
        free(w->base_nvc);
        free(w->resv);
        free(w->cpu_boost);
        free(w->in_set);
        free(w->set_level);
        free(w->set_load);
        free(w->large);
        free(w->cpu_large);
        free(w->set_lambda);
        free(w->set_done);
        free(w->set_flat);
        free(w->set_free);
        free(w->ework);
        free(w->fixed);
        free(w->assign);
        free(w->active);
        free(w->lat);
        free(w->level);
        free(w->fdom_start);
        free(w->fdom_one_llc);
        free(w->fdom_busy);
        free(w->llc_busy);
        free(w->fdom_cores);
        free(w->spread_cores);
        free(w->seg);
        free(w->cpu_pos);
        free(w->corr);
        free(w->corr_floor);
        free(w->measured);
        free(w->sorted_pack);
        free(w->cpu_list);
        free(w->cpu_list2);
        free(w->cpu_mark);
        free(w->work2);
        free(w->base_work2);
        free(w->set_load2);
        free(w->set_tot);
        free(w->set_budget);
        free(w->set_tot2);
        free(w->pre1);
        free(w->pre2);
        free(w->llc_n);
        free(w->nodes);
}

/* The packing order: largest demand first, then by key, then by index */
static inline bool demand_before(const struct ws *w, unsigned i, unsigned j)
{
        if (w->dem[i] != w->dem[j])
                return w->dem[i] > w->dem[j];
        if (w->v[i].key != w->v[j].key)
                return w->v[i].key < w->v[j].key;
        return i < j;
}

/*
 * Sort idx[0..n) in the packing order (a total order: the result is that
 * of any sort): insertion sort of runs of 16, then bottom-up merges through tmp
 * (n entries).  The comparison is inlined: qsort_r's call per comparison took
 * a tenth of a steady plan of 1,000 vCPUs (bench/plan-bench).
 */
static void sort_by_demand(const struct ws *w, unsigned *idx, unsigned *tmp, size_t n)
{
        enum { RUN = 16 };
        unsigned *src = idx, *dst = tmp;

        for (size_t a = 0; a < n; a += RUN) {
                size_t e = MIN(a + RUN, n);
                for (size_t k = a + 1; k < e; k++) {
                        unsigned x = idx[k];
                        size_t j = k;
                        for (; j > a && demand_before(w, x, idx[j - 1]); j--)
                                idx[j] = idx[j - 1];
                        idx[j] = x;
                }
        }
        for (size_t width = RUN; width < n; width *= 2) {
                for (size_t a = 0; a < n; a += 2 * width) {
                        size_t m = MIN(a + width, n), e = MIN(a + 2 * width, n), i = a, j = m, k = a;
                        while (i < m && j < e)
                                dst[k++] = demand_before(w, src[j], src[i]) ? src[j++] : src[i++];
                        while (i < m)
                                dst[k++] = src[i++];
                        while (j < e)
                                dst[k++] = src[j++];
                }
                unsigned *t = src;
                src = dst;
                dst = t;
        }
        if (src != idx)
                memcpy(idx, src, n * sizeof(unsigned));
}

struct spread_key {
        unsigned pos_in_llc, llc_in_pkg, pkg, core;
};

static int cmp_spread(const void *a, const void *b)
{
        const struct spread_key *x = a, *y = b;
        if (x->pos_in_llc != y->pos_in_llc)
                return x->pos_in_llc < y->pos_in_llc ? -1 : 1;
        if (x->llc_in_pkg != y->llc_in_pkg)
                return x->llc_in_pkg < y->llc_in_pkg ? -1 : 1;
        if (x->pkg != y->pkg)
                return x->pkg < y->pkg ? -1 : 1;
        return x->core < y->core ? -1 : (x->core > y->core);
}

static bool cpu_ok(const struct em_host *h, int cpu)
{
        return cpu >= 0 && (unsigned) cpu < h->n_cpus && h->cpu_core[cpu] >= 0;
}

/* Is online cpu in the NUMA nodes of mask (plan_vcpu.nodes; 0 = anywhere)? */
static bool cpu_in_nodes(const struct em_host *h, uint64_t mask, int cpu)
{
        int node = h->cpu_node[cpu];
        return mask == 0 || (node >= 0 && node < 64 && (mask >> node) & 1);
}

/* May vCPU i run on cpu (its NUMA binding)? */
static bool node_ok(const struct ws *w, size_t i, int cpu)
{
        return !w->any_nodes || cpu_in_nodes(w->h, w->nodes[i], cpu);
}

static int cmp_hint_key(const void *a, const void *b, void *ctx)
{
        const struct plan_hint *hints = ctx;
        uint64_t x = hints[*(const unsigned *) a].key, y = hints[*(const unsigned *) b].key;
        if (x != y)
                return x < y ? -1 : 1;
        return *(const unsigned *) a < *(const unsigned *) b ? -1 : (*(const unsigned *) a > *(const unsigned *) b);
}

static int map_previous(const struct ws *w, const struct plan *prev, int *out, int *out_idx);

static bool prev_compatible(const struct em_host *h, const struct plan *prev)
{
        return prev && prev->n_cpus == h->n_cpus && prev->n_fdoms == h->n_fdoms;
}

/*
 * The wait signals of step 1, from the previous plan's placement (map_previous)
 * and the loads the vCPUs showed on it:
 *  - w->wait[i], the wait vCPU i acts on (plan_vcpu_wait): its CPU counts as
 *    overloaded when its load of the last period (util_last) was over the
 *    packing headroom at the top level (a core with both threads busy: over
 *    SmtGain x that; with pack sets, a packed vCPU's set over the set's top
 *    capacity) — the overload cpu_overloaded() sees in the decayed load, seen
 *    one period early;
 *  - dem_out[i], whether that wait counts as demand: the vCPU ran on a CPU
 *    whose decayed utilisation reached the saturation share of its capacity
 *    at the level it ran at (of the core's, SmtGain x that, when the sibling
 *    had work too); with pack sets, for a packed vCPU, whose set's load
 *    reached it of the set's capacity, or whose own utilisation filled its
 *    CPU.  The share is WAIT_SATURATED or the level headroom if higher: a CPU
 *    planned up to 95% of its level is not short of capacity at 90%.  On a
 *    CPU with spare capacity every runnable vCPU gets its work done within
 *    the period: the wait is a delay, not more demand, and the measured
 *    utilisation already is the demand.
 * A vCPU with no known previous CPU (new, or no previous plan) is taken as
 * saturated and its CPU as not overloaded (its decayed wait, or a severe one,
 * still counts).
 */
#define WAIT_SATURATED 0.9

unsigned plan_cpu_capacity(const struct em_host *h, const struct plan *p, int c)
{
        return em_capacity(&h->model, MIN((unsigned) p->fdom_level[h->cpu_fdom[c]], h->model.n_levels - 1u));
}

/* Capacity of CPU c at the level the previous plan ran it at (utilisation units). */
static double prev_cap(const struct em_host *h, const struct plan *prev, int c)
{
        return (double) plan_cpu_capacity(h, prev, c) / EM_CAPACITY_SCALE;
}

/* Is CPU c's load u[c] at least limit (a core with both threads loaded: SmtGain x limit)? */
static bool cpu_load_reaches(const struct ws *w, const double *u, int c, double limit)
{
        int s = w->sib[c];
        return u[c] >= limit - EPS || (s >= 0 && u[s] > 0.0 && u[c] + u[s] >= limit * w->gain - EPS);
}

static int wait_signals(struct ws *w, const struct plan *prev, uint8_t *dem_out)
{
        const struct em_host *h = w->h;
        const unsigned nl = h->n_llcs ? h->n_llcs : 1;
        const double top = (double) em_capacity(&h->model, h->model.n_levels - 1u) / EM_CAPACITY_SCALE;
        _cleanup_free_ int *from = NULL;
        /* decayed and last-period load per CPU and per LLC's pack set; set capacity at the previous
         * levels and at the top level */
        _cleanup_free_ double *u = NULL, *ul = NULL, *set_u = NULL, *set_ul = NULL, *set_cap = NULL,
                              *set_top = NULL;
        _cleanup_free_ uint8_t *in_set = NULL;
        double sat = MAX(WAIT_SATURATED, w->lfrac), hot_share = w->hfrac;
        bool any = false;
        int r;

        for (size_t i = 0; i < w->nv; i++) {
                dem_out[i] = 1;
                w->wait[i] = plan_vcpu_wait(w->pol, &w->v[i], false);
                any |= plan_vcpu_wait(w->pol, &w->v[i], true) > 0.0;
        }
        if (!any || !prev_compatible(h, prev))
                return 0;
        from = malloc((w->nv ? w->nv : 1) * sizeof(int));
        u = calloc(h->n_cpus, sizeof(double));
        ul = calloc(h->n_cpus, sizeof(double));
        if (!from || !u || !ul)
                return -ENOMEM;
        r = map_previous(w, prev, from, NULL);
        if (r < 0)
                return r;
        for (size_t i = 0; i < w->nv; i++) {
                int c = w->v[i].mode == PLACE_EXCLUDE ? (cpu_ok(h, w->v[i].cur_cpu) ? w->v[i].cur_cpu : -1) : from[i];
                double x = w->v[i].util, y = w->v[i].util_last;
                if (c < 0)
                        continue;
                if (x > 0.0) /* also drops NaN */
                        u[c] += MIN(x, 1.0);
                if (y > 0.0)
                        ul[c] += MIN(y, 1.0);
        }
        /*
         * With pack sets the kernel spreads a set's load over its CPUs: a packed vCPU's
         * CPU is its set, saturated when the set's load reaches the saturation share of
         * the set's capacity (SmtGain x a thread's for a core with both threads in the
         * set), or when the vCPU alone fills its CPU.
         */
        if (!w->pol->pin_single_cpu) {
                in_set = calloc(h->n_cpus, 1);
                set_u = calloc(nl, sizeof(double));
                set_ul = calloc(nl, sizeof(double));
                set_cap = calloc(nl, sizeof(double));
                set_top = calloc(nl, sizeof(double));
                if (!in_set || !set_u || !set_ul || !set_cap || !set_top)
                        return -ENOMEM;
                for (size_t i = 0; i < w->nv; i++)
                        if (w->v[i].mode == PLACE_PACK && from[i] >= 0)
                                in_set[from[i]] = 1;
                for (unsigned c = 0; c < h->n_cpus; c++) {
                        if (!in_set[c])
                                continue;
                        unsigned g = h->cores[h->cpu_core[c]].llc;
                        int s = w->sib[c];
                        double share = s >= 0 && in_set[s] ? w->gain / 2.0 : 1.0;
                        set_u[g] += u[c];
                        set_ul[g] += ul[c];
                        set_cap[g] += prev_cap(h, prev, c) * share;
                        set_top[g] += top * share;
                }
        }
        for (size_t i = 0; i < w->nv; i++) {
                int c = from[i];
                double cap;
                bool hot;
                if (c < 0)
                        continue;
                cap = prev_cap(h, prev, c);
                if (in_set && w->v[i].mode == PLACE_PACK) {
                        unsigned g = h->cores[h->cpu_core[c]].llc;
                        dem_out[i] = MIN(w->v[i].util, 1.0) >= sat * cap - EPS || set_u[g] >= sat * set_cap[g] - EPS;
                        hot = set_ul[g] >= hot_share * set_top[g] - EPS;
                } else {
                        dem_out[i] = cpu_load_reaches(w, u, c, sat * cap);
                        hot = cpu_load_reaches(w, ul, c, hot_share * top);
                }
                if (hot)
                        w->wait[i] = plan_vcpu_wait(w->pol, &w->v[i], true);
        }
        return 0;
}

static int set_feedback(struct ws *w, const struct plan *prev);

/* The wait model's inputs: allocations, the vCPUs' size and burst factor, the closed loop. */
static int ws_init_wait_model(struct ws *w, const struct plan *prev)
{
        const struct em_host *h = w->h;
        unsigned nl = h->n_llcs ? h->n_llcs : 1;
        double sd = 0.0, sd2 = 0.0, scv = 0.0;

        w->latency = w->pol->profile == PLAN_PROFILE_LATENCY && !w->pol->pin_single_cpu;
        /* Under 1: a saturated set's share is exactly 1, which must be over any budget (at a
         * budget of 100% every set passed, and the first plan packed every vCPU on one CPU). */
        w->budget = w->pol->queue_budget > 0.0 ? MIN(w->pol->queue_budget, QUEUE_BUDGET_MAX) : 0.01;
        w->corr = calloc(nl, sizeof(double));
        w->corr_floor = calloc(nl, sizeof(double));
        w->measured = calloc(nl, sizeof(double));
        w->sorted_pack = calloc(w->nv + 1, sizeof(unsigned));
        w->cpu_list = calloc(h->n_cpus, sizeof(int));
        w->cpu_list2 = calloc(h->n_cpus, sizeof(int));
        w->cpu_mark = calloc(h->n_cpus, 1);
        w->llc_n = calloc(nl, sizeof(unsigned));
        w->set_load2 = calloc(nl, sizeof(double));
        w->set_tot = calloc(nl, sizeof(double));
        w->set_budget = calloc(nl, sizeof(double));
        w->set_tot2 = calloc(nl, sizeof(double));
        w->pre1 = calloc(w->nv + 1, sizeof(double));
        w->pre2 = calloc(w->nv + 1, sizeof(double));
        w->qmemo = calloc(1, sizeof(*w->qmemo));
        if (!w->corr || !w->corr_floor || !w->measured || !w->sorted_pack || !w->cpu_list || !w->cpu_list2 || !w->cpu_mark || !w->llc_n || !w->set_load2 || !w->set_tot || !w->set_tot2 || !w->set_budget || !w->pre1 ||
            !w->pre2 || !w->qmemo)
                return -ENOMEM;
        for (unsigned c = 0; c < h->n_cpus; c++)
                if (h->cpu_core[c] >= 0) {
                        w->llc_n[h->cores[h->cpu_core[c]].llc]++;
                        w->smt |= w->sib[c] >= 0;
                }
        /* size and burst variability of the packed vCPUs, weighted by demand (what a wake-up meets) */
        for (size_t i = 0; i < w->nv; i++) {
                double d = w->dem[i], cv2 = w->v[i].burst_cv2;
                if (w->v[i].mode != PLACE_PACK || w->boost[i] || !(d > 0.0))
                        continue;
                sd += d;
                sd2 += d * d;
                w->any_vcpu_budget |= w->v[i].queue_budget > 0.0 && w->v[i].queue_budget < w->budget;
                scv += d * (cv2 > 0.0 && cv2 < 100.0 ? cv2 : 1.0);
        }
        w->dbar = sd > 0.0 ? MAX(sd2 / sd, 1e-3) : 1e-3;
        w->acf = queue_ac_factor(1.0, sd > 0.0 ? scv / sd : 1.0);
        for (unsigned g = 0; g < nl; g++)
                w->set_budget[g] = w->budget;
        return set_feedback(w, prev);
}

/* vCPU i's queueing budget: its own when tighter than the policy's. */
static double vcpu_budget(const struct ws *w, size_t i)
{
        double b = w->v[i].queue_budget;
        return b > 0.0 && b < w->budget ? b : w->budget;
}

static int ws_init(struct ws *w, const struct em_host *h, const struct plan_policy *pol, const struct plan_vcpu *v,
                   size_t nv, const struct plan_hint *hints, size_t n_hints, const struct plan *prev)
{
        _cleanup_free_ uint8_t *wdem = NULL;
        int r;
        unsigned n = h->n_cpus;
        size_t nv1 = nv ? nv : 1;

        memset(w, 0, sizeof(*w));
        w->h = h;
        w->pol = pol;
        w->v = v;
        w->nv = nv;
        w->hfrac = pol->headroom_pct / 100.0;
        w->lfrac = pol->level_headroom_pct / 100.0;
        w->gain = h->model.smt_gain_permille / 1000.0;
        w->dem = calloc(nv1, sizeof(double));
        w->wait = calloc(nv1, sizeof(double));
        w->boost = calloc(nv1, 1);
        w->floor = calloc(nv1, sizeof(double));
        w->fdom_floor = calloc(h->n_fdoms ? h->n_fdoms : 1, sizeof(double));
        w->sorted = calloc(nv1, sizeof(unsigned));
        w->assign = calloc(nv1, sizeof(int));
        w->sib = malloc(n * sizeof(int));
        w->work = calloc(n, sizeof(double));
        w->base_work = calloc(n, sizeof(double));
        w->work2 = calloc(n, sizeof(double));
        w->base_work2 = calloc(n, sizeof(double));
        w->nvc = calloc(n, sizeof(unsigned));
        w->base_nvc = calloc(n, sizeof(unsigned));
        w->resv = calloc(n, 1);
        w->cpu_boost = calloc(n, 1);
        w->in_set = calloc(n, 1);
        w->set_level = calloc(h->n_llcs ? h->n_llcs : 1, 1);
        w->set_load = calloc(h->n_llcs ? h->n_llcs : 1, sizeof(double));
        w->large = calloc(nv1, 1);
        w->cpu_large = calloc(n, 1);
        w->set_lambda = calloc(h->n_llcs ? h->n_llcs : 1, sizeof(double));
        w->set_done = calloc(h->n_llcs ? h->n_llcs : 1, 1);
        w->set_flat = calloc(h->n_llcs ? h->n_llcs : 1, 1);
        w->set_free = calloc(h->n_llcs ? h->n_llcs : 1, sizeof(unsigned));
        w->ework = calloc(n, sizeof(double));
        w->fixed = calloc(n, sizeof(double));
        w->active = calloc(n, 1);
        w->lat = calloc(n, sizeof(uint32_t));
        w->level = calloc(h->n_fdoms, 1);
        w->fdom_start = calloc(h->n_fdoms + 1, sizeof(unsigned));
        w->fdom_cores = calloc(h->n_cores, sizeof(unsigned));
        w->fdom_one_llc = calloc(h->n_fdoms ? h->n_fdoms : 1, 1);
        w->fdom_busy = calloc(h->n_fdoms ? h->n_fdoms : 1, sizeof(unsigned));
        w->llc_busy = calloc(h->n_llcs ? h->n_llcs : 1, sizeof(unsigned));
        w->spread_cores = calloc(h->n_cores, sizeof(unsigned));
        for (w->segn = 1; w->segn < h->n_online; w->segn <<= 2)
                ;
        w->leaf0 = (w->segn - 1) / 3;
        w->seg = malloc((w->leaf0 + w->segn) * sizeof(double));
        w->cpu_pos = malloc(n * sizeof(int));
        w->cmemo = em_core_memo_new(0);
        if (!w->cmemo || !w->work2 || !w->base_work2 || !w->dem || !w->wait || !w->boost || !w->floor || !w->fdom_floor || !w->sorted || !w->assign || !w->sib || !w->work || !w->base_work || !w->nvc ||
            !w->base_nvc || !w->resv || !w->cpu_boost || !w->in_set || !w->set_level || !w->set_load || !w->large || !w->cpu_large ||
            !w->set_lambda || !w->set_done || !w->set_flat || !w->set_free || !w->ework || !w->fixed || !w->active || !w->lat || !w->level || !w->fdom_start ||
            !w->fdom_cores || !w->fdom_one_llc || !w->fdom_busy || !w->llc_busy || !w->spread_cores || !w->seg || !w->cpu_pos)
                return -ENOMEM;

        for (unsigned c = 0; c < n; c++) {
                int k = h->cpu_core[c];
                w->sib[c] = -1;
                if (k >= 0 && h->cores[k].n_threads == 2)
                        w->sib[c] = h->cores[k].cpu[h->cores[k].cpu[0] == (int) c ? 1 : 0];
        }
        /*
         * Race to idle: per core, going from level L to L+1 changes the power by
         * W * [(P_L+1 - Pidle) / C_L+1 - (P_L - Pidle) / C_L], linear in Pidle; if
         * that is >= 0 at both ends of the possible Pidle (deepest state .. polling)
         * for every L, the lowest level that fits is always the cheapest and the
         * per-domain level search can be skipped.
         */
        {
                const struct energy_model *m = &h->model;
                double pid[3] = { m->idle[m->n_idle - 1].power_mw, m->idle[0].power_mw, m->levels[0].active_mw };
                for (unsigned L = 0; L + 1 < m->n_levels; L++)
                        for (unsigned k = 0; k < 3; k++) {
                                double a = (m->levels[L].active_mw - pid[k]) / m->levels[L].capacity;
                                double b = (m->levels[L + 1].active_mw - pid[k]) / m->levels[L + 1].capacity;
                                if (b < a)
                                        w->race_to_idle = true;
                        }
        }

        /* Demand (step 1).  Hints are looked up by key in a sorted index: O((V + H) log H). */
        wdem = malloc(nv1);
        if (!wdem)
                return -ENOMEM;
        r = wait_signals(w, prev, wdem);
        if (r < 0)
                return r;
        _cleanup_free_ unsigned *hidx = n_hints ? malloc(n_hints * sizeof(unsigned)) : NULL;
        if (n_hints && !hidx)
                return -ENOMEM;
        for (size_t j = 0; j < n_hints; j++)
                hidx[j] = (unsigned) j;
        if (n_hints)
                qsort_r(hidx, n_hints, sizeof(unsigned), cmp_hint_key, (void *) hints);
        for (size_t i = 0; i < nv; i++) {
                double d = v[i].util;
                size_t lo = 0, hi = n_hints;
                if (!(d >= 0.0))   /* also NaN */
                        d = 0.0;
                while (lo < hi) {
                        size_t mid = (lo + hi) / 2;
                        if (hints[hidx[mid]].key < v[i].key)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                for (size_t j = lo; j < n_hints && hints[hidx[j]].key == v[i].key; j++) {
                        const struct plan_hint *hn = &hints[hidx[j]];
                        if (hn->util_floor > d)
                                d = hn->util_floor;
                        w->boost[i] |= hn->boost;
                        if (hn->perf_floor > w->floor[i]) /* also NaN: not taken */
                                w->floor[i] = hn->perf_floor > 1.0 ? 1.0 : hn->perf_floor;
                }
                w->n_boost += w->boost[i] != 0;
                w->n_floor += w->floor[i] > 0.0;
                if (wdem[i])
                        d += w->wait[i];
                w->dem[i] = d > 1.0 ? 1.0 : d;
                w->sorted[i] = (unsigned) i;
                w->n_reserved += v[i].mode == PLACE_DEDICATED || v[i].mode == PLACE_SPREAD;
        }
        {
                unsigned *tmp = malloc(nv1 * sizeof(unsigned));
                if (!tmp)
                        return -ENOMEM;
                sort_by_demand(w, w->sorted, tmp, nv);
                free(tmp);
        }
        /* NUMA binding: only nodes with an online CPU count; none left = anywhere (the
         * caller warns, plan_input_numa_nodes), and so is every node */
        w->nodes = calloc(nv1, sizeof(uint64_t));
        if (!w->nodes)
                return -ENOMEM;
        {
                uint64_t online = 0;
                for (unsigned c = 0; c < n; c++)
                        if (cpu_ok(h, (int) c) && h->cpu_node[c] >= 0 && h->cpu_node[c] < 64)
                                online |= UINT64_C(1) << h->cpu_node[c];
                for (size_t i = 0; i < nv; i++) {
                        w->nodes[i] = v[i].nodes & online;
                        if (w->nodes[i] == online)
                                w->nodes[i] = 0;
                        w->any_nodes |= w->nodes[i] != 0;
                }
        }
        w->prev_one_set = prev && prev->sets_as_one;
        r = ws_init_wait_model(w, prev);
        if (r < 0)
                return r;
        /* Excluded vCPUs: background load where they run. */
        for (size_t i = 0; i < nv; i++)
                if (v[i].mode == PLACE_EXCLUDE && cpu_ok(h, v[i].cur_cpu)) {
                        w->base_work[v[i].cur_cpu] += w->dem[i];
                        w->base_work2[v[i].cur_cpu] += w->dem[i] * w->dem[i];
                        w->base_nvc[v[i].cur_cpu]++;
                }
        /* Cores of each frequency domain (a core belongs to its thread 0's domain). */
        for (unsigned k = 0; k < h->n_cores; k++)
                w->fdom_start[h->cores[k].fdom + 1]++;
        for (unsigned f = 0; f < h->n_fdoms; f++)
                w->fdom_start[f + 1] += w->fdom_start[f];
        {
                _cleanup_free_ unsigned *fill = calloc(h->n_fdoms ? h->n_fdoms : 1, sizeof(unsigned));
                _cleanup_free_ struct spread_key *sk = calloc(h->n_cores, sizeof(*sk));
                if (!fill || !sk)
                        return -ENOMEM;
                for (unsigned k = 0; k < h->n_cores; k++) {
                        unsigned f = h->cores[k].fdom;
                        w->fdom_cores[w->fdom_start[f] + fill[f]++] = k;
                        unsigned llc = h->cores[k].llc, pkg = h->cores[k].pkg;
                        sk[k] = (struct spread_key) { k - h->llcs[llc].first,
                                                      llc - h->cores[h->pkgs[pkg].first].llc, pkg, k };
                }
                qsort(sk, h->n_cores, sizeof(*sk), cmp_spread);
                for (unsigned k = 0; k < h->n_cores; k++)
                        w->spread_cores[k] = sk[k].core;
        }
        for (unsigned f = 0; f < h->n_fdoms; f++) {
                bool one = w->fdom_start[f] < w->fdom_start[f + 1];
                for (unsigned x = w->fdom_start[f]; one && x < w->fdom_start[f + 1]; x++)
                        one = h->cores[w->fdom_cores[x]].llc == h->cores[w->fdom_cores[w->fdom_start[f]]].llc;
                w->fdom_one_llc[f] = one;
        }
        /* nor a domain holding a thread of a core outside it (a cpufreq policy that splits a core): its
         * level also moves that core, which ws_best_wake's classes do not see (found by review) */
        for (unsigned c = 0; c < n; c++)
                if (h->cpu_core[c] >= 0 && h->cores[h->cpu_core[c]].fdom != h->cpu_fdom[c])
                        w->fdom_one_llc[h->cpu_fdom[c]] = 0;
        return 0;
}

static void state_reset(struct ws *w)
{
        unsigned n = w->h->n_cpus;
        memcpy(w->work, w->base_work, n * sizeof(double));
        memcpy(w->work2, w->base_work2, n * sizeof(double));
        memcpy(w->nvc, w->base_nvc, n * sizeof(unsigned));
        memset(w->resv, 0, n);
        for (size_t i = 0; i < w->nv; i++)
                w->assign[i] = w->v[i].mode == PLACE_EXCLUDE && cpu_ok(w->h, w->v[i].cur_cpu) ? w->v[i].cur_cpu
                                                                                            : -1;
}

static void cpu_put(struct ws *w, size_t i, int cpu)
{
        w->assign[i] = cpu;
        w->work[cpu] += w->dem[i];
        w->work2[cpu] += w->dem[i] * w->dem[i];
        w->nvc[cpu]++;
        if (w->v[i].mode == PLACE_DEDICATED) {
                w->resv[cpu] = 2;
                if (w->sib[cpu] >= 0)
                        w->resv[w->sib[cpu]] = 2;
        } else if (w->v[i].mode == PLACE_SPREAD)
                w->resv[cpu] = 1;
}

static void cpu_take(struct ws *w, size_t i)
{
        int cpu = w->assign[i];
        if (cpu < 0)
                return;
        w->work[cpu] -= w->dem[i];
        w->work2[cpu] -= w->dem[i] * w->dem[i];
        if (w->work[cpu] < EPS)
                w->work[cpu] = w->work2[cpu] = 0.0;
        w->nvc[cpu]--;
        if (w->v[i].mode == PLACE_DEDICATED) {
                w->resv[cpu] = 0;
                if (w->sib[cpu] >= 0)
                        w->resv[w->sib[cpu]] = 0;
        } else if (w->v[i].mode == PLACE_SPREAD)
                w->resv[cpu] = 0;
        w->assign[i] = -1;
}

static bool cpu_empty(const struct ws *w, int cpu)
{
        return w->nvc[cpu] == 0 && w->work[cpu] <= 0.0;
}

/* Room for a pack vCPU on cpu with headroom capacity hc (utilisation units). */
static inline double room(const struct ws *w, int cpu, double hc)
{
        int s = w->sib[cpu];
        double r;

        if (w->resv[cpu])
                return ROOM_NONE;
        if (cpu_empty(w, cpu) && (s < 0 || cpu_empty(w, s)))
                return ROOM_EMPTY_CORE;
        r = hc - w->work[cpu];
        if (s >= 0 && !cpu_empty(w, s))
                r = MIN(r, hc * w->gain - w->work[cpu] - w->work[s]);
        return r;
}

/*
 * Room per position in a 4-ary max tree (implicit heap: children of k are
 * 4k+1..4k+4, leaves from leaf0): half the depth of a binary tree, and the
 * four children of a node share a cache line.
 */
static inline void seg_set(struct ws *w, unsigned pos, double val)
{
        unsigned k = w->leaf0 + pos;
        w->seg[k] = val;
        while (k > 0) {
                const double *c;
                double m;
                k = (k - 1) / 4;
                c = &w->seg[4 * k + 1];
                m = MAX(MAX(c[0], c[1]), MAX(c[2], c[3]));
                if (w->seg[k] == m)
                        break; /* nothing above changes */
                w->seg[k] = m;
        }
}

/* Leftmost position with room >= x, or -1. */
static inline int seg_find(const struct ws *w, double x)
{
        double t = x - EPS;
        unsigned k = 0;
        if (w->seg[0] < t)
                return -1;
        while (k < w->leaf0) {
                const double *c = &w->seg[4 * k + 1];
                unsigned j = c[0] >= t ? 0 : c[1] >= t ? 1 : c[2] >= t ? 2 : 3;
                k = 4 * k + 1 + j;
        }
        return (int) (k - w->leaf0);
}

static void seg_build(struct ws *w, const int *order, double hc)
{
        for (unsigned p = 0; p < w->segn; p++)
                w->seg[w->leaf0 + p] = p < w->h->n_online ? room(w, order[p], hc) : -DBL_MAX; /* never the max */
        for (unsigned k = w->leaf0; k-- > 0;) {
                const double *c = &w->seg[4 * k + 1];
                w->seg[k] = MAX(MAX(c[0], c[1]), MAX(c[2], c[3]));
        }
        for (unsigned p = 0; p < w->h->n_online; p++)
                w->cpu_pos[order[p]] = (int) p;
}

/*
 * First-fit decreasing of the still unassigned pack vCPUs (and any mode
 * whose reservation failed).  Returns true if some vCPU found no CPU with
 * room (it went to the CPU with the most room left).
 */
static bool place_pack(struct ws *w, const int *order, double hc, bool abort_on_overflow)
{
        bool overflow = false;
        double dmin = 0.0;
        unsigned first_open = 0, n = w->h->n_online;

        seg_build(w, order, hc);
        /* The smallest demand to place: CPUs with less room than that are closed for good. */
        for (size_t s = w->nv; s-- > 0;) {
                unsigned i = w->sorted[s];
                if (w->assign[i] < 0 && w->v[i].mode != PLACE_EXCLUDE) {
                        dmin = w->dem[i];
                        break;
                }
        }
        for (size_t s = 0; s < w->nv; s++) {
                unsigned i = w->sorted[s];
                int pos = -1, cpu;
                double x = w->dem[i];

                if (w->assign[i] >= 0 || w->v[i].mode == PLACE_EXCLUDE)
                        continue;
                if (w->nodes[i]) {
                        /* bound to NUMA nodes: first fit over their CPUs alone (a scan: few are) */
                        for (unsigned q = 0; q < n && pos < 0; q++)
                                if (cpu_in_nodes(w->h, w->nodes[i], order[q]) && w->seg[w->leaf0 + q] >= x - EPS)
                                        pos = (int) q;
                        if (pos < 0) {
                                overflow = true;
                                if (abort_on_overflow)
                                        return true;
                                for (unsigned q = 0; q < n; q++) /* the one of them with most room */
                                        if (cpu_in_nodes(w->h, w->nodes[i], order[q]) &&
                                            (pos < 0 || w->seg[w->leaf0 + q] > w->seg[w->leaf0 + pos]))
                                                pos = (int) q;
                        }
                        goto put;
                }
                /*
                 * Fast path, still exact first fit: every position before first_open has
                 * less room than any remaining demand (rooms only shrink), so the first
                 * position with room >= x in a short window after it is the answer.
                 */
                while (first_open < n && w->seg[w->leaf0 + first_open] < dmin - EPS)
                        first_open++;
                for (unsigned q = first_open; q < first_open + FFD_WINDOW && q < n; q++)
                        if (w->seg[w->leaf0 + q] >= x - EPS) {
                                pos = (int) q;
                                break;
                        }
                if (pos < 0)
                        pos = seg_find(w, x);
                if (pos < 0) {
                        overflow = true;
                        if (abort_on_overflow)
                                return true;
                        pos = seg_find(w, w->seg[0]); /* everything full: the CPU with most room */
                }
put:
                if (pos < 0)
                        pos = 0;
                cpu = order[pos];
                /* Mode fallbacks (no free core left) land here as pack vCPUs. */
                w->assign[i] = cpu;
                w->work[cpu] += w->dem[i];
                w->work2[cpu] += w->dem[i] * w->dem[i];
                w->nvc[cpu]++;
                seg_set(w, (unsigned) pos, room(w, cpu, hc));
                if (w->sib[cpu] >= 0)
                        seg_set(w, (unsigned) w->cpu_pos[w->sib[cpu]], room(w, w->sib[cpu], hc));
        }
        return overflow;
}

static bool core_free(const struct ws *w, unsigned k)
{
        const struct em_core *c = &w->h->cores[k];
        for (unsigned t = 0; t < c->n_threads; t++)
                if (w->resv[c->cpu[t]] || !cpu_empty(w, c->cpu[t]))
                        return false;
        return true;
}

static void place_reserved(struct ws *w)
{
        const struct em_host *h = w->h;
        if (w->n_reserved == 0)
                return;
        for (size_t s = 0; s < w->nv; s++) {
                unsigned i = w->sorted[s];
                if (w->assign[i] >= 0 || w->v[i].mode != PLACE_DEDICATED)
                        continue;
                for (unsigned k = 0; k < h->n_cores; k++)
                        if (core_free(w, k) && node_ok(w, i, h->cores[k].cpu[0])) {
                                cpu_put(w, i, h->cores[k].cpu[0]);
                                break;
                        }
        }
        for (size_t s = 0; s < w->nv; s++) {
                unsigned i = w->sorted[s];
                if (w->assign[i] >= 0 || w->v[i].mode != PLACE_SPREAD)
                        continue;
                for (unsigned j = 0; j < h->n_cores; j++) {
                        unsigned k = w->spread_cores[j];
                        if (core_free(w, k) && node_ok(w, i, h->cores[k].cpu[0])) {
                                cpu_put(w, i, h->cores[k].cpu[0]);
                                break;
                        }
                }
        }
}

/* Spread baseline: one vCPU per core round-robin over packages/LLCs, then siblings, then wrap. */
static void place_spread_all(struct ws *w)
{
        const struct em_host *h = w->h;
        size_t j = 0;
        for (size_t s = 0; s < w->nv; s++) {
                unsigned i = w->sorted[s];
                size_t slot;
                unsigned k, t;
                int cpu;

                if (w->v[i].mode == PLACE_EXCLUDE)
                        continue;
                if (w->nodes[i]) {
                        /* bound to NUMA nodes: the least crowded of their CPUs, in the spread
                         * order (threads 0 first); the others' round-robin goes on unchanged */
                        cpu = -1;
                        for (t = 0; t < 2; t++)
                                for (size_t q = 0; q < h->n_cores; q++) {
                                        const struct em_core *co = &h->cores[w->spread_cores[q]];
                                        int x = co->cpu[t];
                                        if (t < co->n_threads && cpu_in_nodes(h, w->nodes[i], x) &&
                                            (cpu < 0 || w->nvc[x] < w->nvc[cpu]))
                                                cpu = x;
                                }
                        goto put;
                }
                slot = j++ % (2 * (size_t) h->n_cores);
                k = w->spread_cores[slot % h->n_cores];
                t = slot < h->n_cores ? 0 : 1;
                if (t >= h->cores[k].n_threads)
                        t = 0;
                cpu = h->cores[k].cpu[t];
put:
                w->assign[i] = cpu;
                w->work[cpu] += w->dem[i];
                w->work2[cpu] += w->dem[i] * w->dem[i];
                w->nvc[cpu]++;
        }
}

/* Core k within headroom capacity hc under per-CPU load work (w->work or w->ework). */
static bool level_fits(const struct ws *w, const double *work, unsigned k, double hc, bool top)
{
        const struct em_core *c = &w->h->cores[k];
        double sum = 0.0;
        unsigned busy_threads = 0;

        for (unsigned t = 0; t < c->n_threads; t++) {
                int cpu = c->cpu[t];
                if (cpu_empty(w, cpu))
                        continue;
                busy_threads++;
                sum += work[cpu];
                if (work[cpu] > hc + EPS && !(top && w->nvc[cpu] <= 1))
                        return false;
        }
        if (busy_threads == 2 && sum > hc * w->gain + EPS) {
                /* A core with one vCPU per thread is as good as it gets at the top level. */
                if (!(top && w->nvc[c->cpu[0]] <= 1 && w->nvc[c->cpu[1]] <= 1))
                        return false;
        }
        return true;
}

/* A vCPU the kernel may move within its LLC's pack set: packed, placed, not boosted. */
static bool in_pack_set(const struct em_host *h, enum place_mode mode, bool boost, int cpu)
{
        return mode == PLACE_PACK && !boost && cpu_ok(h, cpu);
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : (x > y);
}

double plan_water_level(double *fixed, unsigned m, double load)
{
        bool flat = true;
        double sum = load, lambda = 0.0;

        if (m == 0)
                return 0.0;
        for (unsigned j = 0; j < m; j++)
                flat &= fixed[j] == 0.0;
        if (flat)
                return load / m;
        /* the j least loaded CPUs take the water: lambda_j = (load + their fixed) / j */
        qsort(fixed, m, sizeof(double), cmp_double);
        for (unsigned j = 0; j < m; j++) {
                sum += fixed[j];
                lambda = sum / (j + 1);
                if (j + 1 == m || lambda <= fixed[j + 1])
                        break;
        }
        return lambda;
}

/* The water level of LLC g's pack set under the current fixed loads (ework). */
static double set_water_level(struct ws *w, unsigned g, double load)
{
        const struct em_host *h = w->h;
        unsigned m = 0;

        for (unsigned k = h->llcs[g].first; k < h->llcs[g].end; k++)
                for (unsigned t = 0; t < h->cores[k].n_threads; t++) {
                        int c = h->cores[k].cpu[t];
                        if (w->in_set[c])
                                w->fixed[m++] = w->ework[c];
                }
        return plan_water_level(w->fixed, m, load);
}


/* ---- the wait model of a pack set (latency profile) ------------------------ */

/*
 * A candidate whose set queues over the budget even at the top level is
 * charged this many times the top level's power per CPU and unit of excess
 * probability: the target search never prefers it to one within the budget.
 */
#define LAT_PENALTY 10.0
#define CORR_MIN 1.0            /* the closed loop never makes the model more optimistic ... */
#define CORR_MAX 16.0           /* ... and 16x pessimistic */
#define CORR_DECAY 0.8          /* per period, towards the measured ratio, when comfortably under */
#define CORR_INFORMATIVE 0.25   /* a prediction under this share of the budget says too little to lower it */
#define CORR_PROBE 1.25         /* a set over its budget: its floor goes this far past the correction it had */
#define CORR_FLOOR_DECAY 0.999  /* per period: the floor is forgotten over about ten minutes */

/* Per-thread speed of a set with n1 CPUs alone on their core and n2 threads of paired cores. */
static double set_speed(const struct ws *w, unsigned n1, unsigned n2)
{
        unsigned c = n1 + n2;
        return c ? ((double) n1 + (double) n2 * w->gain / 2.0) / (double) c : 1.0;
}

static double set_factor(const struct ws *w, unsigned g)
{
        return w->acf * w->corr[g];
}

/*
 * Predicted queueing share of LLC g's set: c CPUs of per-thread speed spd at
 * capacity cap (utilisation units) carrying load of n vCPUs (n 0: unknown).
 */
static double set_pwait(const struct ws *w, unsigned g, unsigned c, double load, double load2, double spd,
                        double cap)
{
        double unit = cap * spd, A = load / unit, du = (load > 0.0 ? load2 / load : w->dbar) / unit;
        return queue_set_pwait_memo(w->qmemo, c, A, MIN(du, 1.0), set_factor(w, g));
}

/*
 * Whether the packed vCPUs k0..k-1 of place_sets' list on c CPUs of LLC g
 * queue within the tightest budget among them.
 */
static bool run_ok(const struct ws *w, unsigned g, unsigned c, size_t k0, size_t k, double unit)
{
        double s1 = w->pre1[k] - w->pre1[k0], s2 = w->pre2[k] - w->pre2[k0], b = w->budget;
        if (!(s1 > 0.0))
                return true;
        if (w->any_vcpu_budget)
                for (size_t j = k0; j < k; j++)
                        b = MIN(b, vcpu_budget(w, w->sorted_pack[j]));
        return queue_set_pwait_memo(w->qmemo, c, s1 / unit, MIN(s2 / s1 / unit, 1.0), set_factor(w, g)) <= b;
}

/*
 * Put vCPUs sorted_pack[k0..k) (largest first) on cpus[0..n) in snake order
 * (0, 1, .. n-1, n-1, .. 0, 0, 1, ..): about the balance of largest-first
 * onto the least loaded CPU, in O(1) a vCPU; the kernel balances the set
 * anyway, and pack_set_balance() evaluates it balanced.  cpus is reordered
 * cores first (one thread of each core in the given order, then the second
 * threads in reverse): the largest vCPUs, the ones pinned alone, land on
 * different cores, and a core's two threads get a large and a small one.  In
 * the wake order's SMT-first layout the two largest went to one core's
 * threads, two vCPUs pinned alone there got SmtGain x a thread between them,
 * and 95% of the planner's undelivered work on Genoa 2:1 pl-20110303 (2 ms
 * bursts) was such cores (docs/simulator.md §5; test_large_vcpus_apart).
 */
static void put_balanced(struct ws *w, int *cpus, unsigned n, size_t k0, size_t k)
{
        unsigned nf = 0, ns = 0;
        int *second = w->cpu_list2;

        if (n == 0)
                return;
        for (unsigned q = 0; q < n; q++) {
                int x = cpus[q];
                if (w->sib[x] >= 0 && w->cpu_mark[w->sib[x]])
                        second[ns++] = x;
                else
                        cpus[nf++] = x;
                w->cpu_mark[x] = 1;
        }
        for (unsigned q = 0; q < ns; q++)
                cpus[nf + q] = second[ns - 1 - q];
        for (unsigned q = 0; q < n; q++)
                w->cpu_mark[cpus[q]] = 0;
        for (size_t j = k0; j < k; j++) {
                size_t q = (j - k0) % (2 * (size_t) n);
                cpu_put(w, w->sorted_pack[j], cpus[q < n ? q : 2 * n - 1 - q]);
        }
}

/*
 * Cut the packed vCPUs sorted_pack[0..m) (largest first, prefix sums in pre1
 * and pre2) into runs, one per LLC in the wake order (place_sets).  mask: the
 * NUMA nodes of a group of bound vCPUs (plan_vcpu.nodes), which take only
 * CPUs of their nodes that no earlier run took; 0 for the unbound vCPUs, who
 * come first.  Returns how many were placed (m if none is left over).
 */
static size_t cut_runs(struct ws *w, const int *order, double unit, uint64_t mask, size_t m)
{
        const struct em_host *h = w->h;
        size_t k0 = 0;
        int *cpus = w->cpu_list;

        memset(w->set_level, 0, h->n_llcs ? h->n_llcs : 1); /* scratch: LLC seen */
        for (unsigned p = 0; p < h->n_online && k0 < m; p++) {
                unsigned g = h->cores[h->cpu_core[order[p]]].llc, n = 0, c;
                size_t k;
                if (w->set_level[g])
                        continue;
                w->set_level[g] = 1;
                /* its free CPUs, in the wake order: a wake order holds each LLC's CPUs in one run
                 * (energy_model.h), which starts at p */
                for (unsigned q = p; q < h->n_online && h->cores[h->cpu_core[order[q]]].llc == g; q++) {
                        int x = order[q];
                        if (!w->resv[x] && !(w->sib[x] >= 0 && w->resv[w->sib[x]] == 2) &&
                            (!mask || (cpu_in_nodes(h, mask, x) && cpu_empty(w, x))))
                                cpus[n++] = x;
                }
                if (n == 0)
                        continue;
                c = n;
                if (run_ok(w, g, n, k0, m, unit)) {
                        unsigned lo = 1, hi = n; /* the last LLC: least c that carries the rest */
                        while (lo < hi) {
                                unsigned mid = (lo + hi) / 2;
                                if (run_ok(w, g, mid, k0, m, unit))
                                        hi = mid;
                                else
                                        lo = mid + 1;
                        }
                        c = lo;
                        k = m;
                } else {
                        size_t lo = k0 + 1, hi = m; /* longest run within the budget, at least one */
                        while (lo < hi) {
                                size_t mid = (lo + hi + 1) / 2;
                                if (run_ok(w, g, n, k0, mid, unit))
                                        lo = mid;
                                else
                                        hi = mid - 1;
                        }
                        k = lo;
                }
                put_balanced(w, cpus, c, k0, k);
                k0 = k;
        }
        return k0;
}

/*
 * A latency candidate at capacity cap (step 2): pack sets sized by the wait
 * model.  The packed vCPUs, largest first, are cut into consecutive runs, one
 * per LLC in the wake order: each LLC takes the longest run its free CPUs
 * carry within the budget (judged by the run's own demand and
 * demand-weighted mean size: an LLC of a few large vCPUs and one of many
 * small ones each by their own), the last one the fewest CPUs c that carry
 * the rest.  The run goes to the first c free CPUs of its LLC in the wake
 * order, spread over them (put_balanced: the kernel balances a set).  The
 * vCPUs bound to NUMA nodes (plan_vcpu.nodes) are cut the same way after the
 * unbound ones, a group per node mask, onto the CPUs of their nodes the
 * unbound runs left empty: sized as a queue of their own, while the kernel
 * balances them with the unbound run of the same LLC wherever both may run
 * (a conservative estimate).  Returns true if vCPUs were left over (spread
 * over every free CPU, of their nodes for bound ones, then).
 */
static bool place_sets(struct ws *w, const int *order, double cap, bool smt_first)
{
        const struct em_host *h = w->h;
        double spd = smt_first && w->smt ? w->gain / 2.0 : 1.0, unit = cap * spd;
        unsigned *idx = w->sorted_pack;
        int *cpus = w->cpu_list;
        bool left = false;
        uint64_t mask = 0;

        for (;;) {
                size_t m = 0, k0;
                for (size_t s = 0; s < w->nv; s++) {
                        unsigned i = w->sorted[s];
                        if (w->assign[i] >= 0 || w->v[i].mode == PLACE_EXCLUDE || w->nodes[i] != mask)
                                continue;
                        idx[m] = i;
                        w->pre1[m + 1] = w->pre1[m] + w->dem[i];
                        w->pre2[m + 1] = w->pre2[m] + w->dem[i] * w->dem[i];
                        m++;
                }
                k0 = cut_runs(w, order, unit, mask, m);
                if (k0 < m) {
                        unsigned n = 0;
                        for (unsigned q = 0; q < h->n_online; q++)
                                if (!w->resv[order[q]] && cpu_in_nodes(h, mask, order[q]))
                                        cpus[n++] = order[q];
                        /* every CPU (of its nodes) reserved, e.g. dedicated vCPUs on every core: onto
                         * those, or the run would be left unplaced (vcpu_cpu -1, never pinned) */
                        for (unsigned q = 0; n == 0 && q < h->n_online; q++)
                                if (cpu_in_nodes(h, mask, order[q]))
                                        cpus[n++] = order[q];
                        put_balanced(w, cpus, n, k0, m);
                        left = true;
                }
                if (!w->any_nodes)
                        return left;
                /* the next group of bound vCPUs: the node mask of the largest one left */
                mask = 0;
                for (size_t s = 0; s < w->nv && !mask; s++) {
                        unsigned i = w->sorted[s];
                        if (w->assign[i] < 0 && w->v[i].mode != PLACE_EXCLUDE && w->nodes[i])
                                mask = w->nodes[i];
                }
                if (!mask)
                        return left;
        }
}

/*
 * LLC g's set in the current state (w->work) at the top level, with extra
 * load on CPU extra_cpu (-1: none): its predicted queueing share.
 */
static double set_pwait_now(const struct ws *w, unsigned g, double extra, int extra_cpu)
{
        const struct em_host *h = w->h;
        unsigned n1 = 0, n2 = 0;
        double load = extra, load2 = extra * extra;
        double top = (double) em_capacity(&h->model, h->model.n_levels - 1u) / EM_CAPACITY_SCALE;

        for (unsigned k = h->llcs[g].first; k < h->llcs[g].end; k++) {
                const struct em_core *co = &h->cores[k];
                unsigned in = 0;
                for (unsigned t = 0; t < co->n_threads; t++) {
                        int c = co->cpu[t];
                        if (w->resv[c] || (cpu_empty(w, c) && c != extra_cpu))
                                continue;
                        in++;
                        load += w->work[c];
                        load2 += w->work2[c];
                }
                if (in == 1)
                        n1++;
                else
                        n2 += in;
        }
        return set_pwait(w, g, n1 + n2, load, load2, set_speed(w, n1, n2), top);
}

/*
 * The closed loop (L4).  The previous plan's set of each LLC: c CPUs
 * without those it gave a vCPU alone, the other vCPUs' utilisation (A CPUs
 * at the level it ran) and their decayed run-queue wait W: the pool the
 * queue of its movable vCPUs is served by (a vCPU pinned alone waits for
 * nobody's CPU and its CPU serves nobody else; counted in, the pool read
 * 2-9x too large and the measured share 2-9x too high, docs/simulator.md
 * §5).  The queueing share that wait stands for (queue_measured_pwait)
 * against the model's prediction for the same pool gives the correction:
 *  - measured over the budget: the correction rises at once to
 *    measured / predicted (the set grows in this plan), and its floor to
 *    that ratio when the prediction says something, else to CORR_PROBE
 *    times the correction the set was sized with;
 *  - measured under half the budget: it falls by at most CORR_DECAY per
 *    period, towards measured / predicted when the prediction says
 *    something (at least CORR_INFORMATIVE of the budget), else towards 1
 *    (the set may shrink, after the dwell);
 *  - else it is kept.
 * Within max(CORR_MIN, floor)..CORR_MAX; the floor decays by
 * CORR_FLOOR_DECAY a period.  Both live in the plan (plan_set.corr,
 * corr_floor).
 */
static int set_feedback(struct ws *w, const struct plan *prev)
{
        const struct em_host *h = w->h;
        _cleanup_free_ int *from = NULL, *pidx = NULL;
        _cleanup_free_ double *util = NULL, *util2 = NULL, *wait = NULL;
        _cleanup_free_ unsigned *alone_cpus = NULL;
        unsigned nl = h->n_llcs;
        int r;

        for (unsigned g = 0; g < nl; g++)
                w->corr[g] = w->corr_floor[g] = CORR_MIN;
        if (!prev_compatible(h, prev) || prev->n_llcs != nl || !prev->set)
                return 0;
        for (unsigned g = 0; g < nl; g++) {
                if (prev->set[g].corr >= CORR_MIN && prev->set[g].corr <= CORR_MAX)
                        w->corr[g] = prev->set[g].corr;
                if (prev->set[g].corr_floor >= CORR_MIN && prev->set[g].corr_floor <= CORR_MAX)
                        w->corr_floor[g] = MAX(prev->set[g].corr_floor * CORR_FLOOR_DECAY, CORR_MIN);
        }
        from = malloc((w->nv ? w->nv : 1) * sizeof(int));
        pidx = malloc((w->nv ? w->nv : 1) * sizeof(int));
        util = calloc(nl ? nl : 1, sizeof(double));
        wait = calloc(nl ? nl : 1, sizeof(double));
        util2 = calloc(nl ? nl : 1, sizeof(double));
        alone_cpus = calloc(nl ? nl : 1, sizeof(unsigned));
        if (!from || !pidx || !util || !util2 || !wait || !alone_cpus)
                return -ENOMEM;
        r = map_previous(w, prev, from, pidx);
        if (r < 0)
                return r;
        /* the previous plan's CPUs it gave a vCPU alone (one per CPU, pack_set_balance): not servers of
         * its set's movable vCPUs */
        for (unsigned j = 0; j < prev->n_vcpus; j++)
                if (prev->vcpu_alone[j] && cpu_ok(h, prev->vcpu_cpu[j]))
                        alone_cpus[h->cores[h->cpu_core[prev->vcpu_cpu[j]]].llc]++;
        for (size_t i = 0; i < w->nv; i++) {
                if (from[i] < 0 || w->v[i].mode != PLACE_PACK || (pidx[i] >= 0 && prev->vcpu_alone[pidx[i]]))
                        continue;
                unsigned g = h->cores[h->cpu_core[from[i]]].llc;
                if (w->v[i].util > 0.0) {
                        util[g] += MIN(w->v[i].util, 1.0);
                        util2[g] += MIN(w->v[i].util, 1.0) * MIN(w->v[i].util, 1.0);
                }
                if (w->v[i].wait_avg > 0.0)
                        wait[g] += MIN(w->v[i].wait_avg, 1.0);
        }
        for (unsigned g = 0; g < nl; g++) {
                const struct plan_set *ps = &prev->set[g];
                unsigned L = MIN(ps->level, h->model.n_levels - 1u);
                unsigned c = ps->cpus > alone_cpus[g] ? ps->cpus - alone_cpus[g] : 0;
                double cap = (double) em_capacity(&h->model, L) / EM_CAPACITY_SCALE;
                double spd = ps->pool_speed > 0.0 ? ps->pool_speed : ps->speed > 0.0 ? ps->speed : 1.0;
                double A = util[g] / (cap * spd), k = w->corr[g];
                double floor = w->corr_floor[g], meas, pred;
                if (c == 0 || !(A > 0.0))
                        continue;
                meas = queue_measured_pwait(c, A, wait[g]);
                w->measured[g] = meas;
                if (!w->latency)
                        continue;
                pred = w->acf * queue_set_pwait(c, A, MIN(util2[g] / util[g] / (cap * spd), 1.0), 1.0);
                double b = ps->budget > 0.0 ? ps->budget : w->budget;
                if (meas > b) {
                        /* the correction it was sized with was too low: not again; the model's error
                         * where the prediction says something, else a step past it */
                        floor = MIN(MAX(floor, pred >= CORR_INFORMATIVE * b ? meas / pred : k * CORR_PROBE), CORR_MAX);
                        k = MAX(k, meas / MAX(pred, 1e-6));
                } else if (meas < b / 2.0)
                        k = MAX(k * CORR_DECAY, pred >= CORR_INFORMATIVE * b ? meas / pred : CORR_MIN);
                w->corr_floor[g] = floor;
                w->corr[g] = MIN(MAX(k, floor), CORR_MAX);
        }
        return 0;
}

/*
 * Pack sets (plan_pin_sets) let the kernel balance a set's load over its
 * CPUs: a CPU that goes idle pulls a waiting vCPU of its set, a waking vCPU
 * goes to an idle CPU of its set.  Over a period a set is work-conserving,
 * so its load is evaluated balanced (ework), the way the kernel's balancing
 * ends up: what cannot move stays on its CPU (excluded and boosted vCPUs),
 * a vCPU larger than the set's water level keeps a CPU to itself (its
 * planned one, pinned there alone and out of the others' set: plan_pin_sets;
 * one per CPU, a second large one planned there stays movable, as does one
 * beside a large vCPU on its core when the two are over SmtGain x a thread
 * and the previous plan was not saturated),
 * and the other packed
 * vCPUs fill the remaining room up to a common water level lambda:
 *
 *     sum over the set's CPUs of max(0, lambda - fixed_c) = movable load,
 *     ework_c = max(fixed_c, lambda).
 *
 * Large vCPUs are settled largest first: each one that is over the level
 * computed without it settled lowers the level for the rest.  Outside pack
 * sets (and with pin_single_cpu) ework = work.
 */
static void pack_set_balance(struct ws *w)
{
        const struct em_host *h = w->h;

        memcpy(w->ework, w->work, h->n_cpus * sizeof(double));
        memset(w->in_set, 0, h->n_cpus);
        memset(w->cpu_large, 0, h->n_cpus);
        memset(w->large, 0, w->nv);
        if (w->pol->pin_single_cpu)
                return;
        memset(w->set_load, 0, h->n_llcs * sizeof(double));
        memset(w->set_load2, 0, h->n_llcs * sizeof(double));
        memset(w->set_tot, 0, h->n_llcs * sizeof(double));
        for (unsigned g = 0; g < h->n_llcs; g++)
                w->set_budget[g] = w->budget;
        memset(w->set_tot2, 0, h->n_llcs * sizeof(double));
        memset(w->set_done, 0, h->n_llcs);
        for (size_t i = 0; i < w->nv; i++) {
                int c = w->assign[i];
                if (!in_pack_set(h, w->v[i].mode, w->boost[i], c))
                        continue;
                unsigned g = h->cores[h->cpu_core[c]].llc;
                double d = w->dem[i];
                w->in_set[c] = 1;
                w->ework[c] -= d;       /* leaves the CPU's unmovable load */
                w->set_load[g] += d;
                w->set_load2[g] += d * d;
                w->set_tot[g] += d;
                if (w->any_vcpu_budget) /* else every vCPU's is w->budget */
                        w->set_budget[g] = MIN(w->set_budget[g], vcpu_budget(w, i));
                w->set_tot2[g] += d * d;
        }
        memset(w->set_flat, 1, h->n_llcs);
        memset(w->set_free, 0, h->n_llcs * sizeof(unsigned));
        unsigned n_open = 0; /* sets with a vCPU whose level is not known yet */
        for (unsigned c = 0; c < h->n_cpus; c++) {
                if (!w->in_set[c])
                        continue;
                unsigned g = h->cores[h->cpu_core[c]].llc;
                if (w->ework[c] < EPS)
                        w->ework[c] = 0.0;
                w->set_flat[g] &= w->ework[c] == 0.0;
                n_open += w->set_free[g]++ == 0;
        }
        /* In a flat set the level is the load over the CPUs without a large vCPU
         * (never none: a vCPU over load / n is less than the load); else it is
         * computed again from the fixed loads after each large vCPU.  Done when
         * every set is. */
        for (size_t s = 0; s < w->nv && n_open > 0; s++) {
                size_t i = w->sorted[s];
                int c = w->assign[i];
                if (!in_pack_set(h, w->v[i].mode, w->boost[i], c))
                        continue;
                unsigned g = h->cores[h->cpu_core[c]].llc;
                if (w->set_done[g])
                        continue;
                double lambda = w->set_flat[g] ? w->set_load[g] / w->set_free[g]
                                                : set_water_level(w, g, w->set_load[g]);
                if (w->dem[i] > lambda + EPS) {
                        /* one vCPU pinned alone per CPU: a second one there would queue
                         * behind the first beside idle CPUs of the set; it stays movable */
                        if (w->cpu_large[c])
                                continue;
                        /* nor beside one on its core when the two (with the core's fixed
                         * load) are more than the core delivers (SmtGain x a thread at the
                         * top level): a set with more large vCPUs than cores runs the rest
                         * on its other threads as they free up (put_balanced gives each
                         * large vCPU its own core first).  Not on a saturated host (the
                         * previous plan's sets pinned as one): there most cores hold two
                         * busy vCPUs, and left movable they fill the pool (Genoa 4:1
                         * pl-20110306 10 ms: wait p99 14.96 ms with it there, 3.76 without,
                         * the limit 8.93; docs/simulator.md §5) */
                        if (!w->prev_one_set && w->sib[c] >= 0 && w->cpu_large[w->sib[c]] &&
                            w->ework[w->sib[c]] + w->ework[c] + w->dem[i] > w->gain + EPS)
                                continue;
                        w->set_free[g]--;
                        w->large[i] = 1;
                        w->cpu_large[c] = 1;
                        w->ework[c] += w->dem[i];
                        w->set_load[g] -= w->dem[i];
                        w->set_load2[g] -= w->dem[i] * w->dem[i];
                        continue;
                }
                w->set_done[g] = 1;
                w->set_lambda[g] = lambda;
                n_open--;
        }
        for (unsigned c = 0; c < h->n_cpus; c++) {
                if (!w->in_set[c])
                        continue;
                unsigned g = h->cores[h->cpu_core[c]].llc;
                if (w->set_done[g])
                        w->ework[c] = MAX(w->ework[c], w->set_lambda[g]);
        }
}

/*
 * Latency profile: the lowest level from L up at which LLC g's set is
 * predicted within the budget, seen two ways, both of which must hold: all
 * its CPUs and vCPUs (a large vCPU, pinned alone, is still a source of the
 * set's queue, and its CPU a server while it idles), and the CPUs without a
 * large vCPU carrying the movable load (the large vCPUs' CPUs mostly busy).
 */
static unsigned set_level_for_budget(struct ws *w, unsigned g, unsigned L);

/*
 * The kernel balancing a set's load over its CPUs also means that every CPU
 * of a set runs at least the level its water level needs: a CPU capped
 * lower would be handed more than it was planned for (the kernel balances
 * equal load per thread; it does not weigh a frequency cap).  level_fits()
 * on the balanced load already asks that of each core; the set goes further
 * and runs all its CPUs at the highest of those needs (on a core with both
 * threads in the set, 2 lambda within SmtGain x the level headroom), one level per
 * set as before the balance was modelled: conservative for a set that mixes
 * single and paired cores, and in the target search it found the cheaper
 * plan of the worked example (docs/energy-model.md section 6) where per-core
 * levels did not.  Each core keeps whatever more its own load needs (a
 * large vCPU, its sibling's work, race to idle).  Part of every evaluation,
 * so that the target search weighs it.
 */
static unsigned set_level_for_budget(struct ws *w, unsigned g, unsigned L)
{
        const struct em_host *h = w->h;
        const struct energy_model *m = &h->model;
        unsigned n1 = 0, n2 = 0, f1 = 0, f2 = 0; /* all the set's CPUs; those without a large vCPU */
        double spd, fspd;

        for (unsigned k = h->llcs[g].first; k < h->llcs[g].end; k++) {
                const struct em_core *co = &h->cores[k];
                unsigned in = 0, fin = 0;
                for (unsigned t = 0; t < co->n_threads; t++) {
                        int c = co->cpu[t];
                        in += w->in_set[c];
                        fin += w->in_set[c] && !w->cpu_large[c];
                }
                n1 += in == 1;
                n2 += in == 2 ? 2 : 0;
                f1 += fin == 1;
                f2 += fin == 2 ? 2 : 0;
        }
        spd = set_speed(w, n1, n2);
        fspd = set_speed(w, f1, f2);
        for (;; L++) {
                double cap = (double) m->levels[L].capacity / EM_CAPACITY_SCALE;
                double pw = set_pwait(w, g, n1 + n2, w->set_tot[g], w->set_tot2[g], spd, cap);
                if (f1 + f2 > 0 && f1 + f2 < n1 + n2)
                        pw = MAX(pw, set_pwait(w, g, f1 + f2, w->set_load[g], w->set_load2[g], fspd, cap));
                if (pw <= w->set_budget[g])
                        break;
                if (L + 1 >= m->n_levels) {
                        w->lat_over += (double) (n1 + n2) * (pw - w->set_budget[g]);
                        break;
                }
        }
        return L;
}

static void pack_set_levels(struct ws *w)
{
        const struct em_host *h = w->h;
        const struct energy_model *m = &h->model;
        unsigned top = m->n_levels - 1;

        w->lat_over = 0.0;
        for (unsigned g = 0; g < h->n_llcs; g++) {
                double need = 0.0;
                unsigned L = 0;
                w->set_level[g] = 0;
                if (!w->set_done[g])
                        continue;
                for (unsigned k = h->llcs[g].first; k < h->llcs[g].end; k++) {
                        const struct em_core *co = &h->cores[k];
                        unsigned n = 0;
                        for (unsigned t = 0; t < co->n_threads; t++)
                                n += w->in_set[co->cpu[t]] && !w->cpu_large[co->cpu[t]];
                        if (n == 1)
                                need = MAX(need, w->set_lambda[g]);
                        else if (n == 2)
                                need = MAX(need, 2.0 * w->set_lambda[g] / w->gain);
                }
                while (L < top && need > w->lfrac * m->levels[L].capacity / EM_CAPACITY_SCALE + EPS)
                        L++;
                if (w->latency)
                        L = set_level_for_budget(w, g, L);
                w->set_level[g] = (uint8_t) L;
        }
        for (unsigned c = 0; c < h->n_cpus; c++) {
                if (!w->in_set[c])
                        continue;
                unsigned f = h->cpu_fdom[c];
                w->level[f] = MAX(w->level[f], w->set_level[h->cores[h->cpu_core[c]].llc]);
        }
}

/*
 * Guest performance floors (plan_hint.perf_floor): a domain runs at least at
 * the lowest level whose capacity is the largest floor of its placed vCPUs;
 * a packed vCPU may run anywhere in its pack set, so its floor holds for
 * every domain of the set.  A floor never adds demand: an idle vCPU asking
 * for a level below the lowest one costs nothing.
 */
static void perf_floors(struct ws *w)
{
        const struct em_host *h = w->h;
        const struct energy_model *m = &h->model;
        unsigned top = m->n_levels - 1;
        bool any = false;

        memset(w->fdom_floor, 0, h->n_fdoms * sizeof(double));
        for (size_t i = 0; i < w->nv && w->n_floor; i++) {
                int c = w->assign[i];
                if (!(w->floor[i] > 0.0) || !cpu_ok(h, c))
                        continue;
                any = true;
                if (!w->pol->pin_single_cpu && in_pack_set(h, w->v[i].mode, w->boost[i], c)) {
                        const struct em_group *g = &h->llcs[h->cores[h->cpu_core[c]].llc];
                        for (unsigned k = g->first; k < g->end; k++)
                                for (unsigned t = 0; t < h->cores[k].n_threads; t++) {
                                        int s = h->cores[k].cpu[t];
                                        if (w->in_set[s])
                                                w->fdom_floor[h->cpu_fdom[s]] = MAX(w->fdom_floor[h->cpu_fdom[s]],
                                                                                    w->floor[i]);
                                }
                }
                w->fdom_floor[h->cpu_fdom[c]] = MAX(w->fdom_floor[h->cpu_fdom[c]], w->floor[i]);
        }
        if (!any)
                return;
        for (unsigned f = 0; f < h->n_fdoms; f++) {
                unsigned L = w->level[f];
                double need = w->fdom_floor[f] * m->levels[top].capacity;
                if (need <= 0.0)
                        continue;
                while (L < top && m->levels[L].capacity + EPS < need)
                        L++;
                w->level[f] = (uint8_t) L;
        }
}

#define PLAN_MAX_PKGS_CAPPED 64

/* Levels, idle limits and power of the current state. */
static double finalize(struct ws *w, struct em_breakdown *b)
{
        const struct em_host *h = w->h;
        const struct energy_model *m = &h->model;
        struct em_load l = { .cpu_work = w->ework, .cpu_vcpus = w->active, .cpu_max_latency_us = w->lat, .fdom_level = w->level,
                             .memo = w->cmemo };
        unsigned top = m->n_levels - 1;

        pack_set_balance(w);
        memset(w->cpu_boost, 0, h->n_cpus);
        for (size_t i = 0; i < w->nv && w->n_boost; i++)
                if (w->boost[i] && w->assign[i] >= 0)
                        w->cpu_boost[w->assign[i]] = 1;
        for (unsigned c = 0; c < h->n_cpus; c++) {
                w->active[c] = (uint8_t) MIN(w->nvc[c], 255u);
                if (w->active[c] == 0 && w->work[c] > 0.0)
                        w->active[c] = 1;
                w->lat[c] = w->active[c] ? w->pol->active_max_latency_us : EM_LATENCY_ANY;
                /* A boosted vCPU's pCPU stays out of deep idle for the boost: at most the
                 * shallowest state's exit latency (a BOOST hint, DESIGN §5). */
                if (w->cpu_boost[c] && m->n_idle > 0)
                        w->lat[c] = MIN(w->lat[c], m->idle[0].exit_latency_us);
        }
        for (unsigned f = 0; f < h->n_fdoms; f++) {
                unsigned req = top, best;
                bool any = false, boost = false;
                double best_p = DBL_MAX;

                for (unsigned x = w->fdom_start[f]; x < w->fdom_start[f + 1]; x++) {
                        const struct em_core *c = &h->cores[w->fdom_cores[x]];
                        for (unsigned t = 0; t < c->n_threads; t++) {
                                any |= w->active[c->cpu[t]];
                                boost |= w->cpu_boost[c->cpu[t]];
                        }
                }
                if (!any) {
                        w->level[f] = 0;
                        continue;
                }
                if (!boost)
                        for (unsigned L = 0; L < top; L++) {
                                double hc = w->lfrac * m->levels[L].capacity / EM_CAPACITY_SCALE;
                                bool ok = true;
                                for (unsigned x = w->fdom_start[f]; ok && x < w->fdom_start[f + 1]; x++)
                                        ok = level_fits(w, w->ework, w->fdom_cores[x], hc, false);
                                if (ok) {
                                        req = L;
                                        break;
                                }
                        }
                best = req;
                if (!w->race_to_idle) {
                        w->level[f] = (uint8_t) best;
                        continue;
                }
                /* Higher levels only if they cost less (race to idle); energy over levels is
                 * taken as unimodal: stop at the first level that costs more. */
                for (unsigned L = req; L <= top; L++) {
                        double p = 0.0;
                        for (unsigned x = w->fdom_start[f]; x < w->fdom_start[f + 1]; x++)
                                p += em_core_power_at(h, &l, w->fdom_cores[x], L);
                        if (p < best_p - EPS) {
                                best_p = p;
                                best = L;
                        } else
                                break;
                }
                w->level[f] = (uint8_t) best;
        }
        if (!w->pol->pin_single_cpu)
                pack_set_levels(w);
        perf_floors(w);

        w->penalty_mw = w->lat_over * LAT_PENALTY * m->levels[top].active_mw;
        /*
         * The turbo table and the package power limit: a level a package cannot run at with
         * this load is not offered; its domains get the level it is forced to, which is also
         * what em_host_power() charges (docs/energy-model.md §2).
         */
        if (h->has_limits && h->n_pkgs <= PLAN_MAX_PKGS_CAPPED) {
                int caps[PLAN_MAX_PKGS_CAPPED];
                struct em_breakdown cb;
                double mw = em_host_power_caps(h, &l, &cb, caps), over = 0.0;
                if (cb.capped_pkgs > 0)
                        for (unsigned f = 0; f < h->n_fdoms; f++) {
                                if (w->fdom_start[f] == w->fdom_start[f + 1])
                                        continue;
                                int cap = caps[h->cores[w->fdom_cores[w->fdom_start[f]]].pkg];
                                if (cap < 0 || w->level[f] <= (unsigned) cap)
                                        continue;
                                w->level[f] = (uint8_t) cap;
                                /* the work the forced level cannot carry (per thread over its capacity,
                                 * per 2-thread core over SmtGain x that) */
                                double c1 = (double) m->levels[cap].capacity / EM_CAPACITY_SCALE;
                                for (unsigned x = w->fdom_start[f]; x < w->fdom_start[f + 1]; x++) {
                                        const struct em_core *co = &h->cores[w->fdom_cores[x]];
                                        double sum = 0.0, o = 0.0;
                                        for (unsigned t = 0; t < co->n_threads; t++) {
                                                double wk = w->ework[co->cpu[t]];
                                                sum += MIN(wk, c1);
                                                o += MAX(wk - c1, 0.0);
                                        }
                                        if (co->n_threads == 2 && sum > c1 * w->gain)
                                                o += sum - c1 * w->gain;
                                        over += o;
                                }
                        }
                /*
                 * Work left undelivered costs no modelled energy (the busy time saturates): a
                 * candidate that leaves work to a cap would look cheaper than one that runs
                 * it.  It is charged twice the top level's power per unit of that work.
                 */
                w->penalty_mw += over > 0.0 ? 2.0 * over * m->levels[top].active_mw : 0.0;
                if (b)
                        *b = cb;
                return mw + w->penalty_mw;
        }
        return em_host_power(h, &l, b) + w->penalty_mw;
}

/* Any CPU over its headroom at the top level (a lone vCPU is never "over"). */
static bool cpu_overloaded(const struct ws *w, int cpu)
{
        const struct em_host *h = w->h;
        double hc = w->hfrac;
        unsigned k;
        if (cpu_empty(w, cpu))
                return false;
        k = (unsigned) h->cpu_core[cpu];
        /* latency profile: a CPU of a pack set is overloaded when its set is over the budget at the top level */
        if (w->latency && !w->resv[cpu])
                return set_pwait_now(w, h->cores[k].llc, 0.0, -1) > w->set_budget[h->cores[k].llc];
        return !level_fits(w, w->work, k, hc, true);
}

/* Mark both threads of cpu's core (the core's room is shared by its threads). */
static void touch_core(const struct ws *w, uint8_t *touched, int cpu)
{
        touched[cpu] |= 1;
        if (w->sib[cpu] >= 0)
                touched[w->sib[cpu]] |= 1;
}

/*
 * Does moving waiting vCPU i (already taken off src) to cpu relieve its wait?
 * An empty core does; a CPU with vCPUs only if it is, with i, no more loaded
 * than src is without it: then the move lowers the busier of the two and the
 * reverse move is never a relief (no ping-pong of waiting vCPUs).
 */
static bool relieves(const struct ws *w, size_t i, int src, int cpu)
{
        int s = w->sib[cpu];
        if (cpu_empty(w, cpu) && (s < 0 || cpu_empty(w, s)))
                return true;
        return w->work[cpu] + w->dem[i] <= w->work[src] + EPS;
}

/*
 * Queueing estimate used while vCPUs wait (processor sharing, top level): a
 * vCPU with demand u among others of total demand x waits about u x / (1 - x)
 * of the time.  Moving vCPU i onto cpu is wait-safe when neither i nor the
 * largest vCPU already there (umax) is predicted over the wait budget.
 */
static double ps_wait(double u, double others)
{
        return others >= 1.0 - EPS ? DBL_MAX : u * others / (1.0 - others);
}

static bool wait_safe(const struct ws *w, const double *umax, size_t i, int cpu)
{
        const struct energy_model *m = &w->h->model;
        double cap = (double) m->levels[MIN((unsigned) w->level[w->h->cpu_fdom[cpu]], m->n_levels - 1u)].capacity /
                     EM_CAPACITY_SCALE;
        double x = w->work[cpu] / cap, b = w->pol->wait_budget;
        if (cpu_empty(w, cpu))
                return true;
        return ps_wait(w->dem[i] / cap, x) <= b && ps_wait(umax[cpu] / cap, x - (umax[cpu] - w->dem[i]) / cap) <= b;
}

/* Would vCPU i fit on cpu at the top level (respecting reservations)? */
static bool fits(const struct ws *w, size_t i, int cpu)
{
        int s = w->sib[cpu];
        double hc = w->hfrac, d = w->dem[i];

        if (w->resv[cpu] || !node_ok(w, i, cpu))
                return false;
        switch (w->v[i].mode) {
        case PLACE_DEDICATED:
                return cpu_empty(w, cpu) && (s < 0 || (cpu_empty(w, s) && !w->resv[s]));
        case PLACE_SPREAD:
                return cpu_empty(w, cpu) && (s < 0 || w->resv[s] != 2);
        default:
                break;
        }
        if (s >= 0 && w->resv[s] == 2)
                return false;
        if (cpu_empty(w, cpu) && (s < 0 || cpu_empty(w, s)))
                return true;
        /* latency profile: its set with it within the budget at the top level, the CPU within its capacity */
        if (w->latency)
                return w->work[cpu] + d <= 1.0 + EPS &&
                       set_pwait_now(w, w->h->cores[w->h->cpu_core[cpu]].llc, d, cpu) <=
                               MIN(w->set_budget[w->h->cores[w->h->cpu_core[cpu]].llc], vcpu_budget(w, i));
        if (w->work[cpu] + d > hc + EPS)
                return false;
        if (s >= 0 && !cpu_empty(w, s) && w->work[cpu] + w->work[s] + d > hc * w->gain + EPS)
                return false;
        return true;
}

/*
 * The class of an empty CPU as a CPU to wake (ws_best_wake): two CPUs of one
 * class are woken into states that differ only by which of two identical
 * parts holds the probe, so they cost the same (the model has one kind of
 * core, its figures symmetric in the threads; the probe is in no pack set, so
 * it changes only its own core, its frequency domain's level and its LLC's
 * and package's idle terms).  The key: the core's thread count; its domain,
 * as "an empty domain of n cores" when the domain is in one LLC, holds no
 * thread of another core and has no other core with work, else that domain
 * itself; then, for a core with no work, its LLC (that LLC, or "an empty LLC
 * of n cores in package p"), and for a sibling of a CPU with work, its
 * thread, its LLC and everything finalize() reads of the sibling (balanced
 * load, vCPUs, latency limit, set, boost, large vCPU, the domain's floor).
 * false (score it) for a core whose threads are in two domains.
 */
#define WAKE_KEY_N 6
static bool wake_class(const struct ws *w, int cpu, uint64_t key[WAKE_KEY_N])
{
        const struct em_host *h = w->h;
        const struct em_core *co = &h->cores[h->cpu_core[cpu]];
        unsigned f = co->fdom, g = co->llc, busy = 0;
        int s = w->sib[cpu];
        uint64_t bits[2];

        for (unsigned t = 0; t < co->n_threads; t++) {
                if (h->cpu_fdom[co->cpu[t]] != f)
                        return false;
                busy += !cpu_empty(w, co->cpu[t]);
        }
        memset(key, 0, WAKE_KEY_N * sizeof(uint64_t));
        key[0] = (uint64_t) co->n_threads << 8;
        key[1] = w->fdom_busy[f] == busy && w->fdom_one_llc[f] ? 1ULL << 32 | (w->fdom_start[f + 1] - w->fdom_start[f])
                                                               : f;
        if (busy == 0) {
                key[0] |= 1u << 16;
                key[2] = w->llc_busy[g] ? g : 1ULL << 63 | (uint64_t) co->pkg << 32 | (h->llcs[g].end - h->llcs[g].first);
                return true;
        }
        if (s < 0)
                return false;
        key[0] |= 2u << 16 | (uint64_t) h->cpu_thread[cpu];
        key[2] = g;
        memcpy(&bits[0], &w->ework[s], sizeof(double));
        memcpy(&bits[1], &w->fdom_floor[f], sizeof(double));
        key[3] = bits[0];
        key[4] = bits[1];
        key[5] = (uint64_t) w->active[s] | (uint64_t) w->in_set[s] << 8 | (uint64_t) w->cpu_boost[s] << 16 |
                 (uint64_t) w->cpu_large[s] << 24 | (uint64_t) w->lat[s] << 32;
        return true;
}

/* Test hook (placement.h): score every candidate CPU instead of one per class. */
static bool wake_exhaustive;
void plan_test_wake_exhaustive(bool on)
{
        wake_exhaustive = on;
}

/* Score waking cpu: the host's power with a probe load on it, less base. */
static double wake_score(struct ws *w, int cpu, double base)
{
        double d;
        w->work[cpu] = WAKE_PROBE_WORK;
        w->nvc[cpu]++;
        d = finalize(w, NULL) - base;
        w->nvc[cpu]--;
        w->work[cpu] = 0.0;
        return d;
}

/*
 * Inactive CPU with the least marginal power for a probe load (state as in
 * w), other than src; for a waiting vCPU only one that relieves it.  The
 * first CPU of a class in the wake order is scored, the others of the class
 * cost the same and would not win a tie (wake_class): O(classes) host
 * evaluations instead of O(empty CPUs) (plan-bench's grow column).  The state
 * is left as scoring every candidate left it, that of the last one's probe:
 * later steps of the grow read its levels and balance.
 */
#define WAKE_CLASSES_MAX 64
static int ws_best_wake(struct ws *w, size_t i_for_fit, int src, bool waits)
{
        const struct em_host *h = w->h;
        int best = -1, last = -1, last_scored = -1;
        double base, best_d = DBL_MAX;
        uint64_t keys[WAKE_CLASSES_MAX][WAKE_KEY_N], key[WAKE_KEY_N];
        unsigned n_keys = 0;

        /* Also what later steps of the grow read (finalize() sets the domains' levels and balances
         * the sets): evaluated even when no CPU turns out to be a candidate. */
        base = finalize(w, NULL);
        memset(w->fdom_busy, 0, h->n_fdoms * sizeof(unsigned));
        memset(w->llc_busy, 0, h->n_llcs * sizeof(unsigned));
        for (unsigned k = 0; k < h->n_cores; k++)
                for (unsigned t = 0; t < h->cores[k].n_threads; t++)
                        if (!cpu_empty(w, h->cores[k].cpu[t])) {
                                w->fdom_busy[h->cores[k].fdom]++;
                                w->llc_busy[h->cores[k].llc]++;
                        }
        for (unsigned p = 0; p < h->n_online; p++) {
                int cpu = h->order_smt_first[p];
                double d;
                bool classed;
                unsigned x = 0;
                if (!cpu_empty(w, cpu) || w->resv[cpu])
                        continue;
                if (i_for_fit != SIZE_MAX && !fits(w, i_for_fit, cpu))
                        continue;
                /* not back where it came from; a waiting vCPU only where it is relieved */
                if (cpu == src || (waits && i_for_fit != SIZE_MAX && !relieves(w, i_for_fit, src, cpu)))
                        continue;
                last = cpu;
                classed = !wake_exhaustive && wake_class(w, cpu, key);
                if (classed) {
                        while (x < n_keys && memcmp(keys[x], key, sizeof(key)) != 0)
                                x++;
                        if (x < n_keys)
                                continue; /* scored already: the same cost, not a win */
                }
                d = wake_score(w, cpu, base);
                last_scored = cpu;
                if (classed && n_keys < WAKE_CLASSES_MAX)
                        memcpy(keys[n_keys++], key, sizeof(key));
                if (d < best_d - EPS) {
                        best_d = d;
                        best = cpu;
                }
        }
        if (last != last_scored)
                (void) wake_score(w, last, base);
        return best;
}

/* ---- plan object ----------------------------------------------------------- */

void plan_free(struct plan *p)
{
        if (!p)
                return;
        free(p->vcpu_key);
        free(p->vcpu_cpu);
        free(p->vcpu_boost);
        free(p->vcpu_alone);
        free(p->vcpu_moved_ns);
        free(p->vcpu_demand);
        free(p->fdom_level);
        free(p->cpu_idle_state);
        free(p->cpu_max_latency_us);
        free(p->cpu_work);
        free(p->set);
        free(p);
}

static struct plan *plan_alloc(const struct em_host *h, size_t nv)
{
        struct plan *p = calloc(1, sizeof(*p));
        size_t nv1 = nv ? nv : 1;
        if (!p)
                return NULL;
        p->n_cpus = h->n_cpus;
        p->n_fdoms = h->n_fdoms;
        p->n_vcpus = (unsigned) nv;
        p->vcpu_key = calloc(nv1, sizeof(uint64_t));
        p->vcpu_cpu = calloc(nv1, sizeof(int));
        p->vcpu_boost = calloc(nv1, 1);
        p->vcpu_alone = calloc(nv1, 1);
        p->vcpu_moved_ns = calloc(nv1, sizeof(nsec_t));
        p->vcpu_demand = calloc(nv1, sizeof(double));
        p->fdom_level = calloc(h->n_fdoms ? h->n_fdoms : 1, 1);
        p->cpu_idle_state = calloc(h->n_cpus, 1);
        p->cpu_max_latency_us = calloc(h->n_cpus, sizeof(uint32_t));
        p->cpu_work = calloc(h->n_cpus, sizeof(double));
        p->n_llcs = h->n_llcs;
        p->set = calloc(h->n_llcs ? h->n_llcs : 1, sizeof(*p->set));
        if (!p->set || !p->vcpu_key || !p->vcpu_cpu || !p->vcpu_boost || !p->vcpu_alone || !p->vcpu_moved_ns || !p->vcpu_demand || !p->fdom_level || !p->cpu_idle_state || !p->cpu_max_latency_us ||
            !p->cpu_work) {
                plan_free(p);
                return NULL;
        }
        return p;
}

bool plan_equal(const struct plan *a, const struct plan *b)
{
        if (a->n_cpus != b->n_cpus || a->n_fdoms != b->n_fdoms || a->n_vcpus != b->n_vcpus ||
            a->n_llcs != b->n_llcs || (a->n_llcs && (!a->set || !b->set)) ||
            (a->n_llcs && memcmp(a->set, b->set, a->n_llcs * sizeof(*a->set)) != 0))
                return false;
        return cpuset_equal(&a->active, &b->active) &&
               memcmp(a->vcpu_key, b->vcpu_key, a->n_vcpus * sizeof(uint64_t)) == 0 &&
               memcmp(a->vcpu_cpu, b->vcpu_cpu, a->n_vcpus * sizeof(int)) == 0 &&
               memcmp(a->vcpu_boost, b->vcpu_boost, a->n_vcpus) == 0 &&
               memcmp(a->vcpu_alone, b->vcpu_alone, a->n_vcpus) == 0 &&
               memcmp(a->vcpu_moved_ns, b->vcpu_moved_ns, a->n_vcpus * sizeof(nsec_t)) == 0 &&
               memcmp(a->vcpu_demand, b->vcpu_demand, a->n_vcpus * sizeof(double)) == 0 &&
               memcmp(a->fdom_level, b->fdom_level, a->n_fdoms) == 0 &&
               memcmp(a->cpu_idle_state, b->cpu_idle_state, a->n_cpus) == 0 &&
               memcmp(a->cpu_max_latency_us, b->cpu_max_latency_us, a->n_cpus * sizeof(uint32_t)) == 0 &&
               memcmp(a->cpu_work, b->cpu_work, a->n_cpus * sizeof(double)) == 0 &&
               a->shrink_pending_since_ns == b->shrink_pending_since_ns && a->now_ns == b->now_ns &&
               a->sets_as_one == b->sets_as_one && a->saturated_ns == b->saturated_ns &&
               memcmp(&a->why, &b->why, sizeof(a->why)) == 0;
}

/* vCPUs per CPU of a plan (saturating), at least 1 on an active CPU. */
static void plan_counts(const struct em_host *h, const struct plan *p, uint8_t *act)
{
        memset(act, 0, h->n_cpus);
        for (unsigned i = 0; i < p->n_vcpus; i++)
                if (p->vcpu_cpu[i] >= 0 && (unsigned) p->vcpu_cpu[i] < h->n_cpus && act[p->vcpu_cpu[i]] < 255)
                        act[p->vcpu_cpu[i]]++;
        for (unsigned c = 0; c < h->n_cpus; c++)
                if (act[c] == 0 && cpuset_isset(&p->active, c))
                        act[c] = 1;
}

double plan_power(const struct em_host *h, const struct plan *p, struct em_breakdown *b)
{
        _cleanup_free_ uint8_t *act = calloc(h->n_cpus, 1);
        struct em_load l;
        if (!act)
                return -1.0;
        plan_counts(h, p, act);
        l = (struct em_load) { .cpu_work = p->cpu_work, .cpu_vcpus = act, .cpu_max_latency_us = p->cpu_max_latency_us, .fdom_level = p->fdom_level };
        return em_host_power(h, &l, b);
}

/* Evaluate a plan's load with one CPU changed (helper for wake/sleep choice). */
struct probe {
        double *work;
        uint8_t *act;
};

static int probe_init(const struct em_host *h, const struct plan *p, struct probe *pr)
{
        pr->work = malloc(h->n_cpus * sizeof(double));
        pr->act = calloc(h->n_cpus, 1);
        if (!pr->work || !pr->act) {
                free(pr->work);
                free(pr->act);
                return -ENOMEM;
        }
        memcpy(pr->work, p->cpu_work, h->n_cpus * sizeof(double));
        plan_counts(h, p, pr->act);
        return 0;
}

static double probe_power(const struct em_host *h, const struct plan *p, const struct probe *pr,
                          uint32_t *lat_scratch, uint8_t *lvl_scratch)
{
        struct em_load l = { .cpu_work = pr->work, .cpu_vcpus = pr->act, .cpu_max_latency_us = lat_scratch, .fdom_level = lvl_scratch };
        for (unsigned c = 0; c < h->n_cpus; c++)
                lat_scratch[c] = pr->act[c] ? p->cpu_max_latency_us[c] == EM_LATENCY_ANY
                                                      ? EM_LATENCY_ANY : p->cpu_max_latency_us[c]
                                            : EM_LATENCY_ANY;
        /* Levels: the plan's; a domain that was idle runs the probe at the lowest level that fits it. */
        for (unsigned f = 0; f < h->n_fdoms; f++)
                lvl_scratch[f] = p->fdom_level[f];
        for (unsigned c = 0; c < h->n_cpus; c++) {
                if (h->cpu_core[c] < 0 || !pr->act[c])
                        continue;
                unsigned f = h->cpu_fdom[c];
                while (lvl_scratch[f] + 1u < h->model.n_levels &&
                       pr->work[c] * EM_CAPACITY_SCALE > h->model.levels[lvl_scratch[f]].capacity)
                        lvl_scratch[f]++;
        }
        return em_host_power(h, &l, NULL);
}

int plan_best_wake_cpu(const struct em_host *h, const struct plan *p)
{
        struct probe pr;
        _cleanup_free_ uint32_t *lat = malloc(h->n_cpus * sizeof(uint32_t));
        _cleanup_free_ uint8_t *lvl = malloc(h->n_fdoms ? h->n_fdoms : 1);
        double base, best_d = DBL_MAX;
        int best = -1;

        if (!lat || !lvl || probe_init(h, p, &pr) < 0)
                return -ENOMEM;
        base = probe_power(h, p, &pr, lat, lvl);
        for (unsigned pos = 0; pos < h->n_online; pos++) {
                int cpu = h->order_smt_first[pos];
                double d;
                if (pr.act[cpu])
                        continue;
                pr.act[cpu] = 1;
                pr.work[cpu] = WAKE_PROBE_WORK;
                d = probe_power(h, p, &pr, lat, lvl) - base;
                pr.act[cpu] = 0;
                pr.work[cpu] = p->cpu_work[cpu];
                if (d < best_d - EPS) {
                        best_d = d;
                        best = cpu;
                }
        }
        free(pr.work);
        free(pr.act);
        return best;
}

int plan_best_sleep_cpu(const struct em_host *h, const struct plan *p)
{
        struct probe pr;
        _cleanup_free_ uint32_t *lat = malloc(h->n_cpus * sizeof(uint32_t));
        _cleanup_free_ uint8_t *lvl = malloc(h->n_fdoms ? h->n_fdoms : 1);
        double base, best_s = -DBL_MAX;
        int best = -1;

        if (!lat || !lvl || probe_init(h, p, &pr) < 0)
                return -ENOMEM;
        if (cpuset_count(&p->active) < 2)
                goto out;
        base = probe_power(h, p, &pr, lat, lvl);
        for (unsigned pos = 0; pos < h->n_online; pos++) {
                int cpu = h->order_smt_first[pos], dst = -1;
                double s;
                if (!pr.act[cpu])
                        continue;
                /* Destination: the least loaded other active CPU (first in wake order on ties). */
                for (unsigned q = 0; q < h->n_online; q++) {
                        int c2 = h->order_smt_first[q];
                        if (c2 != cpu && pr.act[c2] && (dst < 0 || pr.work[c2] < pr.work[dst] - EPS))
                                dst = c2;
                }
                uint8_t a_cpu = pr.act[cpu], a_dst = pr.act[dst];
                pr.work[dst] += pr.work[cpu];
                pr.work[cpu] = 0.0;
                pr.act[dst] = (uint8_t) MIN(255u, (unsigned) a_dst + a_cpu);
                pr.act[cpu] = 0;
                s = base - probe_power(h, p, &pr, lat, lvl);
                pr.act[cpu] = a_cpu;
                pr.act[dst] = a_dst;
                pr.work[cpu] = p->cpu_work[cpu];
                pr.work[dst] = p->cpu_work[dst];
                if (s > best_s + EPS) {
                        best_s = s;
                        best = cpu;
                }
        }
out:
        free(pr.work);
        free(pr.act);
        return best;
}

/* ---- plan_compute ---------------------------------------------------------- */

static void load_assignment(struct ws *w, const int *a)
{
        state_reset(w);
        for (size_t i = 0; i < w->nv; i++)
                if (w->v[i].mode != PLACE_EXCLUDE && a[i] >= 0)
                        cpu_put(w, i, a[i]);
}

static int cmp_key_idx(const void *a, const void *b, void *ctx)
{
        const uint64_t *key = ctx;
        uint64_t x = key[*(const unsigned *) a], y = key[*(const unsigned *) b];
        return x < y ? -1 : (x > y);
}

/* Was the vCPU of this key in plan prev (placed or not)? */
static bool vcpu_known(const struct plan *prev, uint64_t key)
{
        for (unsigned j = 0; j < prev->n_vcpus; j++)
                if (prev->vcpu_key[j] == key)
                        return true;
        return false;
}

/* Previous CPU of each current vCPU (by key), -1 if new or its CPU went offline. */
static int map_previous(const struct ws *w, const struct plan *prev, int *out, int *out_idx)
{
        _cleanup_free_ unsigned *idx = NULL;
        unsigned n = prev->n_vcpus;

        idx = malloc((n ? n : 1) * sizeof(unsigned));
        if (!idx)
                return -ENOMEM;
        bool sorted = true;
        for (unsigned j = 0; j < n; j++) {
                idx[j] = j;
                sorted &= j == 0 || prev->vcpu_key[j - 1] <= prev->vcpu_key[j];
        }
        /* the plan's vCPUs come in key order from the daemon and the simulator: then the index is
         * the identity, as the (stable) sort would leave it */
        if (!sorted)
                qsort_r(idx, n, sizeof(unsigned), cmp_key_idx, prev->vcpu_key);
        for (size_t i = 0; i < w->nv; i++) {
                unsigned lo = 0, hi = n;
                out[i] = -1;
                if (out_idx)
                        out_idx[i] = -1;
                if (w->v[i].mode == PLACE_EXCLUDE)
                        continue;
                while (lo < hi) {
                        unsigned mid = (lo + hi) / 2;
                        if (prev->vcpu_key[idx[mid]] < w->v[i].key)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                if (lo < n && prev->vcpu_key[idx[lo]] == w->v[i].key && cpu_ok(w->h, prev->vcpu_cpu[idx[lo]])) {
                        out[i] = prev->vcpu_cpu[idx[lo]];
                        if (out_idx)
                                out_idx[i] = (int) idx[lo];
                }
        }
        return 0;
}

/* Each LLC's pack set as planned (after finalize()): size, demand, the model's word on it. */
static void fill_plan_sets(struct ws *w, struct plan *p)
{
        const struct em_host *h = w->h;
        const struct energy_model *m = &h->model;

        for (unsigned g = 0; g < h->n_llcs; g++) {
                struct plan_set *ps = &p->set[g];
                unsigned n1 = 0, n2 = 0, level = 0;
                memset(ps, 0, sizeof(*ps));
                w->set_load2[g] = 0.0;
                ps->corr = w->corr[g];
                ps->corr_floor = w->corr_floor[g];
                ps->measured = w->measured[g];
                ps->budget = w->set_budget[g];
                unsigned f1 = 0, f2 = 0;
                for (unsigned k = h->llcs[g].first; k < h->llcs[g].end; k++) {
                        const struct em_core *co = &h->cores[k];
                        unsigned in = 0, fin = 0;
                        for (unsigned t = 0; t < co->n_threads; t++) {
                                in += w->in_set[co->cpu[t]];
                                fin += w->in_set[co->cpu[t]] && !w->cpu_large[co->cpu[t]];
                        }
                        if (in == 1)
                                n1++;
                        else
                                n2 += in;
                        f1 += fin == 1;
                        f2 += fin == 2 ? 2 : 0;
                        if (in)
                                level = MAX(level, (unsigned) w->level[h->cpu_fdom[co->cpu[0]]]);
                }
                ps->cpus = n1 + n2;
                ps->level = level;
                ps->speed = set_speed(w, n1, n2);
                ps->pool_speed = set_speed(w, f1, f2);
        }
        for (size_t i = 0; i < w->nv; i++) {
                int c = w->assign[i];
                if (w->pol->pin_single_cpu || !in_pack_set(h, w->v[i].mode, w->boost[i], c))
                        continue;
                unsigned g = h->cores[h->cpu_core[c]].llc;
                struct plan_set *ps = &p->set[g];
                ps->vcpus++;
                ps->demand += w->dem[i];
                w->set_load2[g] += w->dem[i] * w->dem[i];
        }
        for (unsigned g = 0; g < h->n_llcs; g++) {
                struct plan_set *ps = &p->set[g];
                double cap = (double) m->levels[MIN(ps->level, m->n_levels - 1u)].capacity / EM_CAPACITY_SCALE;
                if (ps->cpus == 0)
                        continue;
                ps->pwait = set_pwait(w, g, ps->cpus, ps->demand, w->set_load2[g], ps->speed, cap);
                ps->pwait_less = ps->cpus > 1 ? set_pwait(w, g, ps->cpus - 1, ps->demand, w->set_load2[g],
                                                          ps->speed, cap)
                                              : 1.0;
        }
}

static bool all_cores_active(const struct em_host *h, const struct plan *p);

static void fill_plan(struct ws *w, struct plan *p, const struct plan *prev, nsec_t now)
{
        const struct em_host *h = w->h;
        cpuset_zero(&p->active);
        for (size_t i = 0; i < w->nv; i++) {
                p->vcpu_key[i] = w->v[i].key;
                p->vcpu_cpu[i] = w->assign[i];
                p->vcpu_boost[i] = w->boost[i];
                p->vcpu_alone[i] = w->large[i];
                p->vcpu_demand[i] = w->dem[i];
        }
        memcpy(p->fdom_level, w->level, h->n_fdoms);
        for (unsigned c = 0; c < h->n_cpus; c++) {
                p->cpu_work[c] = w->ework[c];
                if (h->cpu_core[c] < 0) {
                        p->cpu_idle_state[c] = -1;
                        p->cpu_max_latency_us[c] = 0;
                        continue;
                }
                if (w->active[c])
                        cpuset_set(&p->active, c);
                p->cpu_max_latency_us[c] = w->lat[c];
                p->cpu_idle_state[c] = (int8_t) em_deepest_idle(&h->model, w->lat[c], UINT32_MAX);
        }
        p->now_ns = now;
        p->why.n_active = cpuset_count(&p->active);
        fill_plan_sets(w, p);
        p->sets_as_one = plan_saturated(h, w->pol, p);
        p->saturated_ns = p->sets_as_one ? now : prev ? prev->saturated_ns : -1;
        /* held while every core stays active: in and out of saturation every few seconds, each
         * exit repins every vCPU to its LLC and each entry lets the kernel spread them again */
        if (!p->sets_as_one && prev && prev->sets_as_one && p->saturated_ns >= 0 &&
            now - p->saturated_ns < SATURATION_HOLD_NS && w->pol->profile == PLAN_PROFILE_LATENCY &&
            !w->pol->pin_single_cpu && all_cores_active(h, p))
                p->sets_as_one = true;
        if (p->sets_as_one) {
                /* the sets pinned as one: the kernel moves load between them, so each runs
                 * the top level (an over-budget set is there already, L3) */
                for (unsigned c = 0; c < h->n_cpus; c++)
                        if (w->in_set[c])
                                w->level[h->cpu_fdom[c]] = (uint8_t) (h->model.n_levels - 1);
                memcpy(p->fdom_level, w->level, h->n_fdoms);
                fill_plan_sets(w, p);
        }
}

struct cand_ctx {
        struct ws *w;
        int *best;
        double *best_mw;
        unsigned *n_cand;
        size_t n_v;
};

/* One target candidate: FFD at level's capacity in order; DBL_MAX if it overflows (unless top). */
static double try_candidate(struct cand_ctx *cc, const int *order, unsigned level, bool top)
{
        struct ws *w = cc->w;
        double hc = w->hfrac * w->h->model.levels[level].capacity / EM_CAPACITY_SCALE, mw;
        bool overflow;

        state_reset(w);
        place_reserved(w);
        if (w->latency)
                overflow = place_sets(w, order, (double) w->h->model.levels[level].capacity / EM_CAPACITY_SCALE,
                                      order == w->h->order_smt_first);
        else
                overflow = place_pack(w, order, hc, !top);
        if (overflow && !top)
                return DBL_MAX;
        mw = finalize(w, NULL);
        (*cc->n_cand)++;
        if (mw < *cc->best_mw - EPS) {
                *cc->best_mw = mw;
                memcpy(cc->best, w->assign, cc->n_v * sizeof(int));
        }
        return mw;
}

/* plan_compute()'s state through its steps. */
struct pc {
        struct ws w;
        struct plan *p;
        const struct plan *prev;
        nsec_t now;
        int *best, *keep, *from;     /* [nv] target, previous placement (with new vCPUs), previous CPU */
        int *pidx;                   /* [nv] its index in the previous plan, -1: none */
        nsec_t *moved;               /* [nv] when the previous plans last moved it, -1: never */
        unsigned *prio;              /* [nv] scratch: move order */
        uint8_t *touched;            /* [n_cpus] cores a grow touched (1), sources not to vacate (2), sources
                                      * holding a vCPU in its move cooldown (4) */
        double *umax;                /* [n_cpus] largest demand per CPU, for the wait estimate after a grow */
        bool grew, grew_acted;
        double best_mw, spread_mw, keep_mw, total_demand;
        unsigned lv[MAX_LEVEL_CANDIDATES], n_lv, n_cand, moves, deferred, n_ded;
        unsigned capped;             /* of deferred, held by the per-period move cap */
        unsigned cooling;            /* of deferred, held by MoveCooldown */
};

/* Step 2: the spread baseline, then the target search (best, best_mw). */
static void plan_target(struct pc *st)
{
        struct ws *w = &st->w;
        const struct em_host *h = w->h;
        const size_t n_v = w->nv;
        const struct energy_model *m = &h->model;

        /* Spread baseline (for the reasons, and a candidate when it respects the modes). */
        state_reset(w);
        place_spread_all(w);
        st->spread_mw = finalize(w, NULL);
        if (st->n_ded == 0 || n_v <= h->n_cores) {
                st->best_mw = st->spread_mw;
                memcpy(st->best, w->assign, n_v * sizeof(int));
        }

        /* Target search (step 2). */
        if (m->n_levels <= MAX_LEVEL_CANDIDATES)
                for (unsigned L = 0; L < m->n_levels; L++)
                        st->lv[st->n_lv++] = L;
        else
                for (unsigned j = 0; j < MAX_LEVEL_CANDIDATES; j++)
                        st->lv[st->n_lv++] = (m->n_levels - 1) * j / (MAX_LEVEL_CANDIDATES - 1);
        /*
         * SMT-first order: the top level (densest packing), then levels ascending
         * from the lowest one whose total room can hold the demand, skipping
         * overflowing candidates (a vCPU found no room), until a candidate costs
         * more than the one before (energy over the level is roughly U-shaped:
         * many slow CPUs .. few fast ones).  Cores-first order: the top level and
         * the best level found so far.
         */
        {
                struct cand_ctx cc = { w, st->best, &st->best_mw, &st->n_cand, n_v };
                double prev_mw = DBL_MAX;
                int best_j = (int) st->n_lv - 1;
                double best_j_mw = try_candidate(&cc, h->order_smt_first, st->lv[st->n_lv - 1], true);

                unsigned lowest_tried = st->n_lv - 1;
                prev_mw = best_j_mw;
                for (unsigned j = st->n_lv - 1; j-- > 0;) {
                        double hc = w->hfrac * m->levels[st->lv[j]].capacity / EM_CAPACITY_SCALE, mw;
                        if (hc * h->n_online * (1.0 + w->gain) / 2.0 < st->total_demand)
                                break; /* cannot hold the demand at this level or below */
                        mw = try_candidate(&cc, h->order_smt_first, st->lv[j], false);
                        if (mw == DBL_MAX) {
                                lowest_tried = j; /* overflows: so do the levels below */
                                break;
                        }
                        if (mw < best_j_mw) {
                                best_j_mw = mw;
                                best_j = (int) j;
                        }
                        if (mw > prev_mw + EPS)
                                break;
                        prev_mw = mw;
                        lowest_tried = j;
                }
                /* and upwards from the lowest level that can hold the demand */
                prev_mw = DBL_MAX;
                for (unsigned j = 0; j < lowest_tried; j++) {
                        double hc = w->hfrac * m->levels[st->lv[j]].capacity / EM_CAPACITY_SCALE, mw;
                        if (hc * h->n_online * (1.0 + w->gain) / 2.0 < st->total_demand)
                                continue;
                        mw = try_candidate(&cc, h->order_smt_first, st->lv[j], false);
                        if (mw == DBL_MAX)
                                continue;
                        if (mw < best_j_mw) {
                                best_j_mw = mw;
                                best_j = (int) j;
                        }
                        if (mw > prev_mw + EPS)
                                break;
                        prev_mw = mw;
                }
                try_candidate(&cc, h->order_cores_first, st->lv[st->n_lv - 1], true);
                if (best_j + 1 < (int) st->n_lv)
                        try_candidate(&cc, h->order_cores_first, st->lv[best_j], false);
        }
}

/* Step 4: the previous placement under the current load (keep). */
static int plan_keep(struct pc *st)
{
        int r;
        struct ws *w = &st->w;
        const struct em_host *h = w->h;
        const size_t n_v = w->nv;

        /* Step 4: the previous placement under the current load.  A new packed vCPU stays on the
         * CPU the kernel runs it on (plan_vcpu.cur_cpu) until a plan has a reason to move it (a
         * grow now, a shrink after the dwell): placed first-fit, every vCPU of a starting guest
         * went to the first CPU of the wake order and, the dwell later, back. The others (and
         * one whose CPU is unknown) first-fit into it. */
        r = map_previous(w, st->prev, st->keep, st->pidx);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_v; i++)
                st->moved[i] = st->pidx[i] >= 0 ? st->prev->vcpu_moved_ns[st->pidx[i]] : -1;
        for (size_t i = 0; i < n_v; i++)
                if (st->keep[i] < 0 && w->v[i].mode == PLACE_PACK && !w->boost[i] && cpu_ok(h, w->v[i].cur_cpu) &&
                    node_ok(w, i, w->v[i].cur_cpu) && !vcpu_known(st->prev, w->v[i].key))
                        st->keep[i] = w->v[i].cur_cpu;
        memcpy(st->from, st->keep, n_v * sizeof(int));
        load_assignment(w, st->keep);
        place_reserved(w);
        place_pack(w, h->order_smt_first, w->hfrac, false);
        memcpy(st->keep, w->assign, n_v * sizeof(int));
        st->keep_mw = finalize(w, NULL);
        st->p->why.prev_mw = st->keep_mw;
        return 0;
}

/* Was vCPU i moved by a plan less than MoveCooldown ago? */
static bool cooling(const struct pc *st, size_t i)
{
        const struct plan_policy *pol = st->w.pol;
        nsec_t cd = pol->move_cooldown_ns >= 0 ? pol->move_cooldown_ns
                    : pol->profile == PLAN_PROFILE_BATCH ? MOVE_COOLDOWN_BATCH_NS
                                                         : 0;
        return st->moved[i] >= 0 && st->now - st->moved[i] < cd;
}

/* Step 4, grow (the comment at the top). */
static int plan_grow(struct pc *st)
{
        struct ws *w = &st->w;
        const struct em_host *h = w->h;
        const struct plan_policy *pol = w->pol;
        const struct plan_vcpu *v = w->v;
        const size_t n_v = w->nv;

        /*
         * Step 4, grow: CPUs over headroom at the top level and vCPUs that wait
         * (plan_vcpu_wait).  The cores involved (sources and destinations) are
         * marked; the energy-motivated change below still runs on the others.
         */
        st->touched = calloc(h->n_cpus, 1);
        if (!st->touched)
                return -ENOMEM;
        {
                size_t np = 0;
                /* cpu_overloaded() of each CPU once: nothing moves in this pass (0 unknown, 1 no, 2 yes) */
                _cleanup_free_ uint8_t *ov = calloc(h->n_cpus, 1);
                if (!ov)
                        return -ENOMEM;
                for (size_t s = 0; s < n_v; s++) {
                        unsigned i = w->sorted[s];
                        int c = w->assign[i];
                        if (v[i].mode == PLACE_EXCLUDE || c < 0)
                                continue;
                        if (w->wait[i] <= 0.0 && !ov[c])
                                ov[c] = cpu_overloaded(w, c) ? 2 : 1;
                        /* also a vCPU outside its NUMA nodes (a binding new since the last plan) */
                        if (w->wait[i] > 0.0 || ov[c] == 2 || !node_ok(w, i, c)) {
                                st->grew = true;
                                touch_core(w, st->touched, c);
                        }
                }
                if (st->grew) {
                        bool capped = false;
                        st->grew_acted = true;
                        /* Wait offenders first, then by demand (largest first): w->sorted order. */
                        for (unsigned pass = 0; pass < 2; pass++)
                                for (size_t s = 0; s < n_v; s++) {
                                        unsigned i = w->sorted[s];
                                        bool waits = w->wait[i] > 0.0;
                                        if (v[i].mode == PLACE_EXCLUDE || w->assign[i] < 0)
                                                continue;
                                        if ((pass == 0) != waits)
                                                continue;
                                        if (!waits && !cpu_overloaded(w, w->assign[i]) &&
                                            node_ok(w, i, w->assign[i]))
                                                continue;
                                        st->prio[np++] = i;
                                }
                        for (size_t s = 0; s < np; s++) {
                                unsigned i = st->prio[s];
                                int src = w->assign[i], dst = -1;
                                bool waits = w->wait[i] > 0.0;
                                if (!waits && !cpu_overloaded(w, src) && node_ok(w, i, src))
                                        continue; /* relieved by earlier moves */
                                if (pol->max_moves && st->moves >= pol->max_moves) {
                                        st->deferred++;
                                        st->capped++;
                                        capped = true;
                                        continue;
                                }
                                cpu_take(w, i);
                                if (st->best[i] >= 0 && st->best[i] != src && fits(w, i, st->best[i]) &&
                                    (!waits || relieves(w, i, src, st->best[i])))
                                        dst = st->best[i];
                                for (unsigned q = 0; dst < 0 && q < h->n_online; q++) {
                                        int c = h->order_smt_first[q];
                                        /* an awake CPU with room; a waiting vCPU needs one without vCPUs */
                                        if (c != src && !cpu_empty(w, c) && fits(w, i, c) && !waits)
                                                dst = c;
                                }
                                if (dst < 0) {
                                        dst = ws_best_wake(w, i, src, waits);
                                        if (dst >= 0 && st->p->why.forced_wake_cpu < 0) {
                                                st->p->why.forced_wake_cpu = dst;
                                                st->p->why.forced_by_key = v[i].key;
                                        }
                                }
                                /* Nothing left to wake: a waiting vCPU still moves to the
                                 * least loaded awake CPU with room (a small host where every
                                 * CPU is active must not keep it behind a busy one) — only to
                                 * a CPU less loaded than the one it leaves, so that wait caused
                                 * by load outside the plan does not make vCPUs ping-pong. */
                                if (dst < 0 && waits) {
                                        for (unsigned q = 0; q < h->n_online; q++) {
                                                int c = h->order_smt_first[q];
                                                if (c != src && fits(w, i, c) && relieves(w, i, src, c) &&
                                                    (dst < 0 || w->work[c] < w->work[dst] - EPS))
                                                        dst = c;
                                        }
                                }
                                if (dst < 0) {
                                        cpu_put(w, i, src);
                                        st->deferred++;
                                        continue;
                                }
                                if (st->p->why.forced_wake_cpu < 0 && st->p->why.forced_by_key == 0)
                                        st->p->why.forced_by_key = v[i].key;
                                cpu_put(w, i, dst);
                                touch_core(w, st->touched, dst);
                                st->moves++;
                        }
                        /* a grow that found nothing to do (no room, no relief) is not reported as one */
                        if (st->moves > 0 || capped)
                                st->p->why.decision = PLAN_GROW;
                        else
                                st->grew_acted = false;
                }
        }
        return 0;
}

/* Step 4, the energy-motivated change: dwell, move cost, the cap (the comment at the top). */
static int plan_shrink(struct pc *st)
{
        struct ws *w = &st->w;
        const struct em_host *h = w->h;
        const struct plan_policy *pol = w->pol;
        const struct plan_vcpu *v = w->v;
        const size_t n_v = w->nv;
        const struct energy_model *m = &h->model;

        /*
         * Step 4, energy-motivated change: dwell and move cost.  After a grow it
         * continues (the pending shrink is kept, and once the dwell is over it is
         * applied) on the cores the grow did not touch.
         */
        {
                unsigned want = 0, smoves = 0, sdeferred = 0;
                double saving_mw = st->keep_mw - st->best_mw;
                /* the saving is earned for at least the dwell (or one period when there is no dwell) */
                double dwell_s = (double) MAX(pol->shrink_dwell_ns, pol->period_ns) / NSEC_PER_SEC;
                double benefit_uj = saving_mw * dwell_s * 1000.0;

                for (size_t i = 0; i < n_v; i++)
                        if (v[i].mode != PLACE_EXCLUDE && st->keep[i] != st->best[i])
                                want++;
                if (want == 0 || saving_mw <= EPS || benefit_uj <= (double) want * m->migration_cost_uj) {
                        if (!st->grew_acted)
                                st->p->why.decision = PLAN_KEEP;
                        return 0;
                }
                st->p->shrink_pending_since_ns = st->prev->shrink_pending_since_ns >= 0 ? st->prev->shrink_pending_since_ns
                                                                                 : st->now;
                if (st->now - st->p->shrink_pending_since_ns < pol->shrink_dwell_ns) {
                        if (!st->grew_acted) {
                                st->p->why.decision = PLAN_SHRINK_PENDING;
                                st->p->why.moves_deferred = want;
                                st->p->why.moves_dwell = want;
                        }
                        return 0;
                }
                /*
                 * After a grow the touched cores neither give nor take vCPUs, and a
                 * source CPU is vacated only as a whole: not when one of its leaving
                 * vCPUs is headed for a touched core (moving the others would cost
                 * moves and save nothing).  Moves onto CPUs with vCPUs must be
                 * wait-safe (the target search does not model wait, and the host
                 * is waiting).
                 */
                for (size_t i = 0; i < n_v; i++) {
                        int c = st->keep[i];
                        if (v[i].mode == PLACE_EXCLUDE || c < 0 || st->best[i] == c)
                                continue;
                        if (st->best[i] < 0 || (st->touched[st->best[i]] & 1))
                                st->touched[c] |= 2;
                        else if (cooling(st, i))
                                st->touched[c] |= 4;
                }
                if (st->grew) {
                        /* largest demand per CPU, for the wait estimate (kept as an upper bound) */
                        st->umax = calloc(h->n_cpus, sizeof(double));
                        if (!st->umax)
                                return -ENOMEM;
                        for (size_t i = 0; i < n_v; i++)
                                if (w->assign[i] >= 0)
                                        st->umax[w->assign[i]] = MAX(st->umax[w->assign[i]], w->dem[i]);
                }
                /* Apply, vacating CPUs last in the wake order first, within the cap. */
                size_t np = 0;
                for (unsigned q = h->n_online; q-- > 0;) {
                        int c = h->order_smt_first[q];
                        for (size_t s = 0; s < n_v; s++) {
                                unsigned i = w->sorted[s];
                                if (v[i].mode != PLACE_EXCLUDE && st->keep[i] == c && st->best[i] != c)
                                        st->prio[np++] = i;
                        }
                }
                for (size_t s = 0; s < np; s++) {
                        unsigned i = st->prio[s];
                        int src = w->assign[i], dst = st->best[i];
                        if (src != st->keep[i] || st->touched[src] || dst < 0) { /* dst < 0: touched[src] & 2 */
                                sdeferred++; /* moved by the grow, or on a core it touched, or cooling */
                                st->cooling += src == st->keep[i] && st->touched[src] == 4;
                                continue;
                        }
                        if (pol->max_moves && st->moves >= pol->max_moves) {
                                sdeferred++;
                                st->capped++;
                                continue;
                        }
                        cpu_take(w, i);
                        if ((st->touched[dst] & 1) || !fits(w, i, dst) || (st->grew && !wait_safe(w, st->umax, i, dst)))
                                dst = -1;
                        if (dst < 0) {
                                cpu_put(w, i, src);
                                sdeferred++;
                                continue;
                        }
                        cpu_put(w, i, dst);
                        if (st->umax)
                                st->umax[dst] = MAX(st->umax[dst], w->dem[i]);
                        st->moves++;
                        smoves++;
                }
                if (!st->grew_acted)
                        st->p->why.decision = smoves > 0 ? PLAN_SHRINK : PLAN_SHRINK_PENDING;
                st->p->why.shrink_moves = smoves;
                st->deferred += sdeferred;
                if (sdeferred == 0)
                        st->p->shrink_pending_since_ns = -1;
        }
        return 0;
}

/*
 * The reason text.  An energy-motivated change is named by what it does to
 * the active CPUs against the previous plan: shrink (fewer), spread (more:
 * the model found spreading cheaper), repack (as many); deferred moves are
 * told apart: held by the per-period cap, waiting out the dwell, held by the
 * move cooldown, or with no room (or on a core a grow touched).
 */
static void plan_text(struct pc *st)
{
        struct plan_reasons *y = &st->p->why;
        const char *what = plan_decision_to_string(y->decision);
        size_t sz = sizeof(y->text);
        int n;

        if (y->decision == PLAN_SHRINK && st->prev)
                what = y->n_active < st->prev->why.n_active   ? "shrink"
                       : y->n_active > st->prev->why.n_active ? "spread"
                                                              : "repack";
        n = snprintf(y->text, sz, "%s: plan %.0f mW, spread %.0f mW, previous %.0f mW, target %.0f mW; %u active CPUs",
                     what, y->plan_mw, y->spread_mw, y->prev_mw, y->target_mw, y->n_active);
        if (st->prev && n > 0 && (size_t) n < sz)
                n += snprintf(y->text + n, sz - (size_t) n, " (%u before)", st->prev->why.n_active);
        if (n > 0 && (size_t) n < sz)
                n += snprintf(y->text + n, sz - (size_t) n, ", %u moves", y->moves);
        if (y->moves_dwell && n > 0 && (size_t) n < sz)
                n += snprintf(y->text + n, sz - (size_t) n, ", %u waiting for the dwell", y->moves_dwell);
        if (y->moves_capped && n > 0 && (size_t) n < sz)
                n += snprintf(y->text + n, sz - (size_t) n, ", %u held by the move cap", y->moves_capped);
        if (y->moves_cooling && n > 0 && (size_t) n < sz)
                n += snprintf(y->text + n, sz - (size_t) n, ", %u held by the move cooldown", y->moves_cooling);
        if (y->decision != PLAN_SHRINK_PENDING && y->moves_deferred > y->moves_capped + y->moves_cooling && n > 0 &&
            (size_t) n < sz)
                n += snprintf(y->text + n, sz - (size_t) n, ", %u without room",
                              y->moves_deferred - y->moves_capped - y->moves_cooling);
        if (y->decision == PLAN_GROW && y->shrink_moves > 0 && n > 0 && (size_t) n < sz)
                n += snprintf(y->text + n, sz - (size_t) n, " (%u to save energy)", y->shrink_moves);
        if (st->p->sets_as_one && st->p->saturated_ns == st->now && n > 0 && (size_t) n < sz)
                n += snprintf(y->text + n, sz - (size_t) n,
                              "; saturated (every core active, a set over its budget): the pack sets pinned as one");
        else if (st->p->sets_as_one && n > 0 && (size_t) n < sz)
                n += snprintf(y->text + n, sz - (size_t) n,
                              "; held after saturation %.0f s ago (every core active): the pack sets pinned as one",
                              (double) (st->now - st->p->saturated_ns) / NSEC_PER_SEC);
        if (y->forced_wake_cpu >= 0 && n > 0 && (size_t) n < sz)
                snprintf(y->text + n, sz - (size_t) n, "; woke CPU %d for vCPU %" PRIu64, y->forced_wake_cpu,
                         y->forced_by_key);
}

/* Moves counted, the plan filled, the reason text. */
static void plan_reason(struct pc *st)
{
        struct ws *w = &st->w;
        const size_t n_v = w->nv;

        /* moves counted against the previous plan (new vCPUs are placements, not moves) */
        if (st->prev && st->p->why.decision != PLAN_INITIAL) {
                st->moves = 0;
                for (size_t i = 0; i < n_v; i++)
                        if (st->from[i] >= 0 && w->assign[i] != st->from[i])
                                st->moves++;
        }
        st->p->why.plan_mw = finalize(w, NULL) - w->penalty_mw; /* the model's power, as plan_power() gives it */
        st->p->why.moves = st->moves;
        if (st->p->why.decision != PLAN_SHRINK_PENDING)
                st->p->why.moves_deferred = st->deferred;
        st->p->why.moves_capped = st->capped;
        st->p->why.moves_cooling = st->cooling;
        fill_plan(w, st->p, st->prev, st->now);
        if (st->p->sets_as_one) /* fill_plan raised the sets' levels */
                st->p->why.plan_mw = plan_power(w->h, st->p, NULL);
        for (size_t i = 0; i < n_v; i++)
                st->p->vcpu_moved_ns[i] = st->p->why.decision != PLAN_INITIAL && st->from[i] >= 0 &&
                                                          w->assign[i] != st->from[i]
                                                  ? st->now
                                                  : st->moved[i];
        plan_text(st);
}

int plan_compute(const struct em_host *h, const struct plan_policy *pol, const struct plan_vcpu *v, size_t n_v,
                 const struct plan_hint *hints, size_t n_hints, const struct plan *prev, nsec_t now,
                 struct plan **ret)
{
        struct pc c = { .prev = prev, .now = now, .best_mw = DBL_MAX, .n_cand = 1 };
        size_t nv1 = n_v ? n_v : 1;
        int r;

        if (pol->headroom_pct == 0 || pol->headroom_pct > 100 || pol->level_headroom_pct == 0 ||
            pol->level_headroom_pct > 100)
                return -EINVAL;
        r = ws_init(&c.w, h, pol, v, n_v, hints, n_hints, prev);
        if (r < 0)
                goto out;
        r = -ENOMEM;
        c.best = malloc(nv1 * sizeof(int));
        c.keep = malloc(nv1 * sizeof(int));
        c.from = malloc(nv1 * sizeof(int));
        c.pidx = malloc(nv1 * sizeof(int));
        c.moved = malloc(nv1 * sizeof(nsec_t));
        c.prio = malloc(nv1 * sizeof(unsigned));
        c.p = plan_alloc(h, n_v);
        if (!c.best || !c.keep || !c.from || !c.pidx || !c.moved || !c.prio || !c.p)
                goto out;
        for (size_t i = 0; i < n_v; i++)
                c.moved[i] = -1;
        for (size_t i = 0; i < n_v; i++) {
                c.n_ded += v[i].mode == PLACE_DEDICATED;
                if (v[i].mode != PLACE_EXCLUDE)
                        c.total_demand += c.w.dem[i];
        }
        plan_target(&c);
        c.p->shrink_pending_since_ns = -1;
        c.p->why.forced_wake_cpu = -1;
        c.p->why.spread_mw = c.spread_mw;
        c.p->why.target_mw = c.best_mw;
        c.p->why.candidates = c.n_cand;
        if (!prev_compatible(h, prev)) {
                load_assignment(&c.w, c.best);
                c.p->why.decision = PLAN_INITIAL;
                c.p->why.prev_mw = c.best_mw;
        } else {
                r = plan_keep(&c);
                if (r >= 0)
                        r = plan_grow(&c);
                if (r >= 0)
                        r = plan_shrink(&c);
                if (r < 0)
                        goto out;
        }
        plan_reason(&c);
        *ret = c.p;
        c.p = NULL;
        r = 0;
out:
        plan_free(c.p);
        free(c.best);
        free(c.keep);
        free(c.from);
        free(c.pidx);
        free(c.moved);
        free(c.prio);
        free(c.touched);
        free(c.umax);
        ws_free(&c.w);
        return r;
}

static bool all_cores_active(const struct em_host *h, const struct plan *p)
{
        for (unsigned k = 0; k < h->n_cores; k++) {
                const struct em_core *co = &h->cores[k];
                bool awake = false;
                for (unsigned t = 0; t < co->n_threads; t++)
                        awake |= cpuset_isset(&p->active, (unsigned) co->cpu[t]);
                if (!awake)
                        return false;
        }
        return true;
}

bool plan_saturated(const struct em_host *h, const struct plan_policy *pol, const struct plan *p)
{
        bool over = false;

        if (pol->pin_single_cpu || pol->profile != PLAN_PROFILE_LATENCY || h->n_cores == 0)
                return false;
        for (unsigned g = 0; g < p->n_llcs; g++)
                over |= p->set[g].cpus > 0 && p->set[g].pwait > p->set[g].budget + EPS;
        return over && all_cores_active(h, p);
}

int plan_pin_sets(const struct em_host *h, const struct plan_policy *pol, const struct plan *p,
                  const struct plan_vcpu *v, size_t n_v, cpuset_t *ret)
{
        _cleanup_free_ cpuset_t *llc = NULL;
        cpuset_t host = { 0 };
        bool host_wide = p->sets_as_one && !pol->pin_single_cpu;

        if (!pol->pin_single_cpu) {
                /* [2g]: every CPU of LLC g's set; [2g + 1]: those of vCPUs pinned alone */
                llc = calloc(2 * (h->n_llcs ? h->n_llcs : 1), sizeof(cpuset_t));
                if (!llc)
                        return -ENOMEM;
                for (size_t i = 0; i < n_v && i < p->n_vcpus; i++) {
                        int c = p->vcpu_cpu[i];
                        /* the CPUs pack_set_balance() spreads the set's load over */
                        if (in_pack_set(h, v[i].mode, p->vcpu_boost[i], c)) {
                                unsigned g = h->cores[h->cpu_core[c]].llc;
                                cpuset_set(&llc[2 * g], (unsigned) c);
                                /* saturated: the sets are one, so that the kernel balances between
                                 * LLCs, the CPUs of vCPUs alone included (all run the top level) */
                                if (host_wide)
                                        cpuset_set(&host, (unsigned) c);
                                if (p->vcpu_alone[i])
                                        cpuset_set(&llc[2 * g + 1], (unsigned) c);
                        }
                }
                /* a CPU given to a vCPU alone is not the others': behind them it would
                 * queue, unable to move (unless it is all the set has) */
                for (unsigned g = 0; g < h->n_llcs; g++) {
                        cpuset_t rest = llc[2 * g];
                        cpuset_andnot(&rest, &llc[2 * g + 1]);
                        if (!cpuset_empty(&rest))
                                llc[2 * g] = rest;
                }
        }
        for (size_t i = 0; i < n_v; i++) {
                int c = i < p->n_vcpus ? p->vcpu_cpu[i] : -1;
                cpuset_zero(&ret[i]);
                if (!cpu_ok(h, c))
                        continue;
                bool packed = llc && in_pack_set(h, v[i].mode, p->vcpu_boost[i], c);
                /* a boosted vCPU stays on the CPU the plan runs at the top level for it, a
                 * large one on the CPU the plan gives it alone (unless the sets are one) */
                if (packed && host_wide)
                        ret[i] = host;
                else if (packed && !p->vcpu_alone[i])
                        ret[i] = llc[2 * h->cores[h->cpu_core[c]].llc];
                else
                        cpuset_set(&ret[i], (unsigned) c);
                /* bound to NUMA nodes: the part of its set in them (an LLC may span two nodes,
                 * sub-NUMA clustering); its planned CPU is in them unless they have no CPU online */
                if (v[i].nodes && cpu_in_nodes(h, v[i].nodes, c))
                        CPUSET_FOREACH(x, &ret[i])
                                if (!cpu_in_nodes(h, v[i].nodes, x))
                                        cpuset_clear(&ret[i], (unsigned) x);
        }
        return 0;
}
