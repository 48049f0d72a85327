/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "burst.h"
#include "energy_model.h"

/*
 * Event simulation of one observation window of the burst model on a host
 * (docs/simulator.md, "Bursts and run-queue wait").
 *
 * Every vCPU produces on/off bursts (burst.h) with its current demand.  A
 * CPU shares itself equally among its runnable vCPUs (processor sharing, as
 * CFS does over a scheduling period); its speed is the capacity of its perf
 * level (capacity / 1024 of the top level's work per ns), times SmtGain / 2
 * while the SMT sibling also has runnable vCPUs.  A runnable vCPU that is
 * not running accrues run-queue wait at (n - 1) / n (what schedstat's
 * run_delay counts).  A wake-up onto a core whose threads are all idle pays
 * the exit latency of the deepest idle state whose target residency fits in
 * the idle gap so far and whose exit latency is within the CPU's limit (an
 * oracle idle governor), plus the exit latency of an idle domain (LLC,
 * package) that was idle for at least its residency; the latency is added to
 * the wake-up's wait.  A wake-up that paid the deepest core state or a
 * domain state counts as a deep wake-up.
 *
 * Placement: pinned (a vCPU runs on its home CPU) or, with wake_balance,
 * Linux-like: a waking vCPU stays on its previous CPU if that CPU has
 * nothing runnable, else goes to an idle core in the same LLC, else to an
 * idle CPU there, else stays (select_idle_sibling) unless it may no longer
 * run there (its CPU left its allowed set: then the allowed CPU of the LLC
 * with the fewest runnable vCPUs); each move is a migration.  With wake_balance a CPU whose run queue goes empty also pulls
 * a waiting vCPU from the busiest allowed CPU of its LLC (newidle balance),
 * unless its average idle time is below the migration cost (0.5 ms).  A
 * vCPU marked pinned stays on its home CPU either way.
 *
 * A wake-up that lands on a CPU with a runnable vCPU already (no idle CPU it may run on was
 * found) is a queued wake-up.
 *
 * A sample of wait is one runnable episode of a vCPU (wake-up to the moment
 * it has no work left, or the end of the window).
 */

#define WAIT_HIST_DECADES 10
#define WAIT_HIST_PER_DECADE 20
#define WAIT_HIST_MIN_NS 100.0     /* below: counted as zero wait */
#define WAIT_HIST_N (WAIT_HIST_DECADES * WAIT_HIST_PER_DECADE + 1)

struct wait_hist {
        uint64_t n, zero;
        uint64_t b[WAIT_HIST_N];
};
void wait_hist_add(struct wait_hist *w, double ns);
double wait_hist_percentile(const struct wait_hist *w, double q); /* ns */

struct ev_input {
        unsigned nv;
        const double *demand;          /* [nv] utilisation 0..1 at the top level */
        const int *home;               /* [nv] CPU, -1 = not simulated */
        const uint8_t *fdom_level;     /* [n_fdoms] */
        const uint32_t *cpu_max_latency_us; /* [n_cpus] */
        bool wake_balance;
        const uint8_t *allowed;        /* [n_cpus] for wake_balance, NULL = all */
        const uint8_t *pinned;         /* [nv] 1: stays on its home CPU even with wake_balance, NULL = none */
        const uint8_t *core_mask;      /* [n_cores] only vCPUs homed on these cores, NULL = all */
        struct burst_params burst;
        uint64_t seed, window_id;
        double window_ns;
        /* for vcpu_wait_last and vcpu_wait_avg: the tracker's period and the half-life of its
         * decayed averages (0: the window's mean) */
        double period_ns, half_life_ns;
};

struct ev_output {
        /* [nv] run-queue wait in the window (written for simulated vCPUs), as schedstat's
         * run_delay counts it: without the exit latency of the idle state the vCPU woke its
         * CPU from, which elapses before a wakee is enqueued on an idle CPU (it is queued on
         * that CPU's wake list, or woken there by its own timer); the wait samples in hist
         * include it (wake-up to running) */
        double *vcpu_wait_ns;
        /* [nv], when both are set: the wait ratio of the window's last period
         * (the tracker's wait_ratio) and its decayed average over the window's periods, the
         * last one weighted most (wait_avg); an episode's wait counts in the period it ended in;
         * a window shorter than period_ns gives its mean for both */
        double *vcpu_wait_last, *vcpu_wait_avg;
        struct wait_hist *hist;        /* episodes added here when not NULL */
        uint64_t wakeups, deep_wakeups, migrations, events;
        /* of the wake-ups: those that found no idle CPU in their allowed set (pinned: their own CPU
         * busy) and queued behind another runnable vCPU — the event the planner's queueing budget
         * bounds (docs/simulator.md §3) */
        uint64_t queued_wakeups;
        uint64_t idle_pulls;           /* of the migrations: newidle pulls */
        double wake_energy_uj;         /* Σ over wake-ups onto an idle core: WakeEnergyUJ of the core state
                                        * (and of each domain) it woke from */
};

struct ev_ws;
int ev_ws_new(const struct em_host *h, unsigned nv, struct ev_ws **ret);
void ev_ws_free(struct ev_ws *w);
int ev_run(struct ev_ws *w, const struct ev_input *in, struct ev_output *out);
