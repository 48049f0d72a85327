/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The simulation loop (sim.h; docs/simulator.md has the full description).
 *
 * Time advances in control periods (plan_period_ns, the daemon's
 * ControlPeriod).  Per period:
 *  - every vCPU's demand is the trace value of the current interval; the
 *    planner sees what the daemon's tracker would report: the work that ran in
 *    the previous period (the demand, scaled down where the CPU or pack set was
 *    over its level's capacity), as is (util) and decayed with LoadHalfLife
 *    (util_avg), and the
 *    run-queue wait measured by the burst simulation, of the last period
 *    (wait_ratio) and decayed with LoadHalfLife (wait_avg);
 *  - vmmpower calls plan_compute() through sim_plan_step() (the daemon's
 *    construction of the inputs) and takes the plan's actions from
 *    plan_to_actions(), as the daemon's applier does: pins (homes, and the
 *    CPUs the pack sets allow) and the levels and idle limits that changed,
 *    applied through the "sim" power driver; the baselines apply theirs
 *    through their own sim driver instance;
 *  - every policy's energy is em_host_power() of its placement, levels and
 *    idle limits with the true demand, times the period.
 * Every observation step (step_ns) every policy runs one burst window
 * (evsim.h) with its current placement: wait percentiles, wake-ups and deep
 * wake-ups come from these windows; the vCPUs' wait ratios feed the planner
 * (vmmpower's windows are at least three LoadHalfLife long, for wait_avg).
 * When the planner moves vCPUs, the cores it touched are
 * simulated again at once (a fresh window) so that its wait input reflects
 * the new placement, as the daemon's next period would.
 * The fluid bound and the bin-packing reference are computed per trace interval
 * from the demand alone.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "power_driver.h"
#include "plan_actions.h"
#include "plan_input.h"
#include "sim.h"

#define VMM_WINDOW_MAX_NS 30e9     /* vmmpower's burst windows: at most this (or the baselines' window) */
#define B0_IMBALANCE 0.20         /* util difference of busiest and idlest CPU that makes the balancer move */
#define B1_SCHEDUTIL_MARGIN 1.25  /* schedutil: f = 1.25 x f_max x util */
#define B2_ENTER_UTIL 0.10        /* lpmd: enter the low-power set below 10% host utilisation */
#define B2_EXIT_UTIL 0.95         /* ... leave it above 95% busy on the set */
#define B2_SET_SHARE 0.10         /* the set: 10% of the CPUs, whole cores, SMT-first from CPU 0's core */
#define B3_EPP_MARGIN 1.0         /* HWP with EPP balance_power: no margin over the busiest CPU's util */
#define RESIM_WINDOW_ID_BASE (1ULL << 40)

static const char *const policy_names[_SIM_POLICY_MAX] = { "vmmpower", "B0", "B1", "B2", "B3", "fluid", "binpack-ref",
                                                                 "lat-bound" };
static const char *const policy_desc[_SIM_POLICY_MAX] = {
        "vmmpower planner (plan_compute + sim power driver)",
        "Linux default: spread, performance governor, all idle states",
        "static 1:1 pinning, schedutil-like frequency",
        "intel-lpmd-like threshold packer",
        "spread, powersave/EPP-style frequency",
        "fluid lower bound (cores at the most efficient level)",
        "bin-packing reference (first-fit decreasing, no wake-ups; not a bound)",
        "latency-constrained bound (least energy of a set meeting the queueing budget by Erlang C)",
};

const char *sim_policy_name(enum sim_policy p)
{
        return p < _SIM_POLICY_MAX ? policy_names[p] : "?";
}

const char *sim_policy_description(enum sim_policy p)
{
        return p < _SIM_POLICY_MAX ? policy_desc[p] : "?";
}

void sim_policy_from_config(const struct vp_config *cfg, struct plan_policy *pol)
{
        plan_policy_from_config(cfg, pol); /* the daemon's own mapping (plan_input.c) */
}

double sim_undelivered_mw(const struct energy_model *m, unsigned n_cores)
{
        double idle = m->n_idle ? m->idle[0].power_mw : 0.0;
        double busy = m->n_levels ? m->levels[m->n_levels - 1].active_mw : 0.0;
        double plat = n_cores ? (double) m->platform_busy_mw / n_cores : 0.0;
        double eff = m->psu_efficiency_permille ? m->psu_efficiency_permille / 1000.0 : 1.0;
        return MAX(busy - idle, 0.0) / eff + plat / eff;
}

void sim_config_defaults(struct sim_config *c)
{
        struct vp_config cfg;

        config_defaults(&cfg);
        *c = (struct sim_config) {
                .oversub = 1.0,
                .vcpu_balance = 0.25,
                .seed = 1,
                .plan_period_ns = cfg.period_ns,
                .step_ns = 60 * NSEC_PER_SEC,
                .burst = { .mean_ns = 10e6, .dist = BURST_EXP },
                .half_life_ns = cfg.load_half_life_ns,
                .resim_on_change = true,
                .queue_budget = 0.01,
        };
        sim_policy_from_config(&cfg, &c->policy);
        c->hint_policy = cfg.hint_defaults;
}

/* sim_plan_step() with the inputs built in *in (kept by the caller: vmm_period() needs them). */
static int plan_step(const struct em_host *h, const struct plan_policy *pol, const struct sim_vcpu_sample *s,
                     size_t n, struct sim_hint_replay *hints, const struct plan *prev, nsec_t now,
                     struct plan_input *in, struct plan **ret)
{
        _cleanup_free_ struct vcpu_load *l = calloc(n ? n : 1, sizeof(*l));
        _cleanup_free_ struct vm_load *vm = calloc(n ? n : 1, sizeof(*vm));
        _cleanup_free_ const struct vm_load **vp = calloc(n ? n : 1, sizeof(*vp));
        struct plan_input_sources src = { .n_cpus = h->n_cpus, .prev = prev, .now = now,
                                          .vm_hints = hints ? sim_hint_replay_vm_state : NULL, .userdata = hints };
        size_t n_vms = 0;
        int r;

        if (!l || !vm || !vp)
                return -ENOMEM;
        /* Each sample as the tracker would hold it (a VM: the samples of one pid in a row),
         * through the daemon's own input step. */
        for (size_t i = 0; i < n; i++) {
                l[i] = (struct vcpu_load) { .index = (int) s[i].index, .valid = true, .util = s[i].util_last,
                                            .util_avg = s[i].util_avg, .wait_ratio = s[i].wait_ratio,
                                            .wait_avg = s[i].wait_avg };
                if (i == 0 || s[i].pid != s[i - 1].pid) {
                        vm[n_vms] = (struct vm_load) { .info = { .pid = (pid_t) s[i].pid }, .vcpus = &l[i] };
                        vp[n_vms] = &vm[n_vms];
                        n_vms++;
                }
                vm[n_vms - 1].n_vcpus++;
        }
        r = plan_input_build(in, vp, n_vms, &src);
        if (r >= 0)
                r = plan_compute(h, pol, in->v, in->n, in->hints, in->n_hints, prev, now, ret);
        return r;
}

int sim_plan_step(const struct em_host *h, const struct plan_policy *pol, const struct sim_vcpu_sample *s,
                  size_t n, struct sim_hint_replay *hints, const struct plan *prev, nsec_t now, struct plan **ret)
{
        struct plan_input in = { 0 };
        int r = plan_step(h, pol, s, n, hints, prev, now, &in, ret);

        plan_input_done(&in);
        return r;
}

/* ---- bounds ---------------------------------------------------------------- */

static unsigned max_group_cores(const struct em_group *g, unsigned n)
{
        unsigned m = 1;
        for (unsigned i = 0; i < n; i++)
                if (g[i].end - g[i].first > m)
                        m = g[i].end - g[i].first;
        return m;
}

/*
 * Power of the idle domains with T core-seconds per second of busy time (T
 * "busy cores"), at least.  em_host_power() charges a domain
 * (1 - q) P_awake + (q - a) P_quiet + a P_asleep with q the share of time its
 * cores are all idle (long enough) and a <= q the share it may sleep: the
 * model takes the cores' busy periods as independent, so
 * q <= Π_c (1 - busy_c) <= exp(-x) for busy time x in the domain.  Without
 * the all-packages rule a = q: at least P_asleep + (P_awake - P_asleep)(1 - e^-x).
 * With it (packages sleep only together) a <= exp(-T) for every package: at
 * least P_awake - e^-x (P_awake - P_quiet) - e^-T (P_quiet - P_asleep).
 * Both are concave in x: the least total has the busy time concentrated,
 * domains filled one after the other (n_s cores each, the largest group's).
 */
static double fill_floor(double T, double size, unsigned groups)
{
        double full = floor(T / size), rest;

        if (full > groups)
                full = groups;
        rest = T - full * size;
        return full * (1.0 - exp(-size)) + (rest > 0.0 ? 1.0 - exp(-rest) : 0.0);
}

static double domain_floor_mw(const struct em_host *h, double T)
{
        const struct energy_model *m = &h->model;
        double sum = 0.0;

        if (T < 0.0)
                T = 0.0;
        for (int d = 0; d < _EM_DOMAIN_MAX; d++) {
                const struct em_idle_domain *dom = &m->domain[d];
                unsigned groups = d == EM_DOMAIN_LLC ? h->n_llcs : h->n_pkgs;
                double size = d == EM_DOMAIN_LLC ? max_group_cores(h->llcs, h->n_llcs)
                                                 : max_group_cores(h->pkgs, h->n_pkgs);
                double A = dom->awake_mw, Q = dom->quiet_mw, S = dom->asleep_mw, x = fill_floor(T, size, groups);

                if (!dom->present)
                        continue;
                if (d == EM_DOMAIN_PACKAGE && m->package_idle_all_packages)
                        sum += groups * (Q - exp(-T) * (Q - S)) + (A - Q) * x;
                else
                        sum += groups * S + (A - S) * x;
        }
        return sum;
}

double sim_fluid_bound_mw(const struct em_host *h, const double *demand, unsigned nv)
{
        const struct energy_model *m = &h->model;
        double W = 0, p_deep = m->idle[m->n_idle - 1].power_mw, base, best = INFINITY;
        /* busy core-time also costs its share of the platform's busy power (PlatformBusyPowerMW) */
        double plat_busy = h->n_cores ? (double) m->platform_busy_mw / h->n_cores : 0.0;
        /* the platform's constant power and the PSU's loss on the whole: wall = (dc + platform) / efficiency */
        double wall = 1000.0 / m->psu_efficiency_permille;
        /* a core's throughput: one thread's capacity, SmtGain x that with two threads */
        double threads = h->n_online > h->n_cores ? m->smt_gain_permille / 1000.0 : 1.0;

        for (unsigned i = 0; i < nv; i++)
                W += demand[i];
        base = h->n_cores * p_deep; /* the domains: domain_floor_mw() of the busy time */
        /*
         * Busy core-time at level L costs P_active(L) - P_deep and delivers
         * threads x C_L / 1024 of work; at most n_cores of core-time exist; the
         * domains cost domain_floor_mw() of the total busy time.  Core-time per
         * level is the variable: a linear cost plus a concave one over a
         * polytope, so the least is at a vertex: one level (when it alone can
         * hold W), or two levels using all the core-time.  Demand beyond the top
         * level's capacity cannot be delivered (and is not charged).
         */
        double N = h->n_cores, cap_top = threads * m->levels[m->n_levels - 1].capacity / 1024.0;
        if (W > N * cap_top)
                W = N * cap_top;
        if (W <= 0)
                return (base + domain_floor_mw(h, 0.0) + m->platform_mw) * wall;
        for (unsigned a = 0; a < m->n_levels; a++) {
                double ca = threads * m->levels[a].capacity / 1024.0;
                double ka = (double) m->levels[a].active_mw - p_deep + plat_busy;
                if (W <= N * ca + 1e-12) {
                        double T = W / ca, cost = T * ka + domain_floor_mw(h, T);
                        if (cost < best)
                                best = cost;
                }
                for (unsigned b = a + 1; b < m->n_levels; b++) {
                        double cb = threads * m->levels[b].capacity / 1024.0;
                        double kb = (double) m->levels[b].active_mw - p_deep + plat_busy;
                        /* all N of core-time: x at a, N - x at b, x ca + (N - x) cb = W */
                        if (cb <= ca || W > N * cb + 1e-12 || W < N * ca)
                                continue;
                        double x = (N * cb - W) / (cb - ca);
                        double cost = x * ka + (N - x) * kb + domain_floor_mw(h, N);
                        if (cost < best)
                                best = cost;
                }
        }
        return (base + best + m->platform_mw) * wall;
}

struct ffd_item {
        double d;
        unsigned i;
};

static int cmp_item(const void *a, const void *b)
{
        const struct ffd_item *x = a, *y = b;
        if (x->d != y->d)
                return x->d > y->d ? -1 : 1;
        return x->i < y->i ? -1 : (x->i > y->i);
}

/*
 * First fit decreasing of the items it[nv] (largest first) at level L: each onto the first CPU in
 * SMT-first order (densest) where it fits within fill x a thread's capacity and, on a 2-thread
 * core, SmtGain x that for the core.  work[] the CPUs' demand, home[] (or NULL) each vCPU's CPU
 * (-1: no demand).  False when an item fits nowhere below the top level; at the top level such an
 * item goes to the least loaded CPU (overload).
 */
static bool ffd_level(const struct em_host *h, const struct ffd_item *it, unsigned nv, unsigned L, double fill,
                      double *work, int *home)
{
        const struct energy_model *m = &h->model;
        double cap = fill * m->levels[L].capacity / 1024.0, g = m->smt_gain_permille / 1000.0;

        memset(work, 0, h->n_cpus * sizeof(double));
        for (unsigned k = 0; home && k < nv; k++)
                home[it[k].i] = -1;
        for (unsigned k = 0; k < nv; k++) {
                double d = it[k].d;
                int cpu = -1;
                if (d <= 0)
                        break;
                for (unsigned j = 0; j < h->n_online && cpu < 0; j++) {
                        int c = h->order_smt_first[j];
                        const struct em_core *co = &h->cores[h->cpu_core[c]];
                        double core_sum = d;
                        for (unsigned t = 0; t < co->n_threads; t++)
                                core_sum += work[co->cpu[t]];
                        /* a thread's capacity, and SmtGain x that for the core */
                        if (work[c] + d <= cap + 1e-12 && (co->n_threads < 2 || core_sum <= cap * g + 1e-12))
                                cpu = c;
                }
                if (cpu < 0) {
                        if (L + 1 < m->n_levels)
                                return false;
                        cpu = h->order_smt_first[0]; /* top level: the least loaded CPU (overload) */
                        for (unsigned j = 0; j < h->n_online; j++)
                                if (work[h->order_smt_first[j]] < work[cpu])
                                        cpu = h->order_smt_first[j];
                }
                work[cpu] += d;
                if (home)
                        home[it[k].i] = cpu;
        }
        return true;
}

int sim_binpack_reference_fill(const struct em_host *h, const double *demand, unsigned nv, double fill,
                               double *ret_mw, struct sim_binpack_placement *ret_pl)
{
        const struct energy_model *m = &h->model;
        _cleanup_free_ struct ffd_item *it = calloc(nv ? nv : 1, sizeof(*it));
        _cleanup_free_ double *work = calloc(h->n_cpus, sizeof(double));
        _cleanup_free_ uint8_t *zero = calloc(h->n_cpus, 1);
        _cleanup_free_ uint32_t *lat = calloc(h->n_cpus, sizeof(uint32_t));
        _cleanup_free_ uint8_t *lvl = calloc(h->n_fdoms, 1);
        double best = INFINITY, best_capped = INFINITY;
        unsigned best_L = 0, capped_L = 0;

        if (!(fill > 0 && fill <= 1))
                return -EINVAL;
        if (!it || !work || !zero || !lat || !lvl)
                return -ENOMEM;
        for (unsigned i = 0; i < nv; i++)
                it[i] = (struct ffd_item) { demand[i] > 1 ? 1 : demand[i], i };
        qsort(it, nv, sizeof(*it), cmp_item);
        for (unsigned c = 0; c < h->n_cpus; c++)
                lat[c] = EM_LATENCY_ANY;
        for (unsigned L = 0; L < m->n_levels; L++) {
                if (!ffd_level(h, it, nv, L, fill, work, NULL))
                        continue;
                for (unsigned f = 0; f < h->n_fdoms; f++)
                        lvl[f] = 0;
                for (unsigned c = 0; c < h->n_cpus; c++)
                        if (work[c] > 0)
                                lvl[h->cpu_fdom[c]] = (uint8_t) L;
                struct em_load l = { .cpu_work = work, .cpu_vcpus = zero, .cpu_max_latency_us = lat, .fdom_level = lvl };
                struct em_breakdown br;
                double p = em_host_power(h, &l, &br);
                /* a level the turbo table or the power limit does not let the packing run at is
                 * not a packing at that level (its work would not all run) */
                if (br.capped_pkgs > 0 && br.capped_level < L) {
                        if (p < best_capped) {
                                best_capped = p;
                                capped_L = L;
                        }
                        continue;
                }
                if (p < best) {
                        best = p;
                        best_L = L;
                }
        }
        *ret_mw = isfinite(best) ? best : best_capped;
        if (ret_pl) {
                ret_pl->level = isfinite(best) ? best_L : capped_L;
                /* the top level always fits: some level was taken */
                ffd_level(h, it, nv, ret_pl->level, fill, ret_pl->work, ret_pl->home);
        }
        return 0;
}

int sim_binpack_reference(const struct em_host *h, const double *demand, unsigned nv, double *ret_mw,
                          struct sim_binpack_placement *ret_pl)
{
        return sim_binpack_reference_fill(h, demand, nv, 1.0, ret_mw, ret_pl);
}

int sim_binpack_reference_mw(const struct em_host *h, const double *demand, unsigned nv, double *ret_mw)
{
        return sim_binpack_reference(h, demand, nv, ret_mw, NULL);
}

/* ---- policy state ---------------------------------------------------------- */

struct pstate {
        enum sim_policy id;
        int *home;                  /* [nv] */
        uint8_t *level;             /* [n_fdoms] as read back from the driver */
        uint32_t *lat;              /* [n_cpus] as read back from the driver */
        uint8_t *want_level;        /* [n_fdoms] */
        uint32_t *want_lat;         /* [n_cpus] */
        double *cpu_work;           /* [n_cpus] */
        uint8_t *cpu_vcpus;         /* [n_cpus] */
        uint8_t *allowed;           /* [n_cpus] */
        uint8_t *kbal;              /* [nv] vmmpower: pinned to CPUs of more than one LLC (plan->sets_as_one),
                                     * so the kernel's periodic balancer places it (kernel_balance) */
        uint8_t *kpin;              /* [nv] vmmpower: pinned alone (vcpu_alone), evsim keeps it home */
        double *wait_ns;            /* [nv] last window */
        double *wait_last, *wait_avg; /* [nv] last window's last period, decayed (vmmpower's wait inputs) */
        double *cpu_deliv;          /* [n_cpus] share of the CPU's work its level delivers (evaluate) */
        double *ran;                /* [nv] work that ran per vCPU in the state last evaluated */
        struct power_driver *drv;
        struct ev_ws *ev;
        struct plan *plan;
        uint8_t *eff_level;         /* [n_fdoms] level after the turbo table and power limit (evaluate) */
        double wake_mw;             /* wake-up power counted in the last full window (episodes x WakeEnergyUJ) */
        double power_mw, overload;  /* cached for the current state */
        bool dirty, lp;
};

struct run {
        const struct sim_host *host;
        const struct em_host *h;
        const struct sim_trace *tr;
        const struct sim_config *cfg;
        struct sim_result *res;
        unsigned nv;
        unsigned *vm_of;            /* [nv] trace VM */
        uint32_t *pid;              /* [nv] */
        struct sim_hint_replay *hints; /* cfg->hints over the run's VMs, NULL without */
        unsigned *vidx;             /* [nv] vCPU index in its VM */
        double *demand;             /* [nv] current interval */
        double demand_scale;        /* a fully busy vCPU's demand (sim_demand_scale) */
        struct sim_vcpu_sample *samples; /* [nv] planner inputs */
        int *spread_rank;           /* [n_cpus] position in the spread order, -1 offline */
        int *spread_order;          /* [n_online] */
        uint8_t *lp_set;            /* [n_cpus] */
        unsigned lp_n;
        uint32_t *level_permille;   /* [n_levels] as the sim driver computes it */
        uint32_t max_khz;
        uint8_t *core_mask;         /* [n_cores] scratch */
        double *load, *sibload;     /* [n_cpus] scratch */
        double *llc_tmp;            /* [2 n_llcs] scratch */
        struct plan_cpu_action *knobs; /* [n_cpus] scratch: a baseline's knob changes */
        struct plan_input plan_in;  /* the inputs of vmmpower's plan in force (plan_in.v[i] is its vCPU i) */
        struct plan_input plan_scratch; /* inputs being built for the next plan */
        struct plan_actions act;    /* plan_to_actions() output, kept across periods */
        double window_ns;
        double vmm_window_ns;       /* vmmpower's windows: long enough for the tracker's decayed wait */
        struct pstate ps[_SIM_RUN_MAX];
};

static void pstate_free(struct pstate *p)
{
        free(p->home);
        free(p->level);
        free(p->eff_level);
        free(p->lat);
        free(p->want_level);
        free(p->want_lat);
        free(p->cpu_work);
        free(p->cpu_vcpus);
        free(p->allowed);
        free(p->kbal);
        free(p->kpin);
        free(p->wait_ns);
        free(p->wait_last);
        free(p->wait_avg);
        free(p->cpu_deliv);
        free(p->ran);
        power_driver_free(p->drv);
        ev_ws_free(p->ev);
        plan_free(p->plan);
}

static int pstate_init(struct run *R, struct pstate *p, enum sim_policy id)
{
        const struct em_host *h = R->h;
        struct power_driver_config dc = { .n_cpus = h->n_cpus, .sim_max_khz = R->max_khz };
        int r;

        p->id = id;
        p->home = malloc(R->nv * sizeof(int) + 1);
        p->level = calloc(h->n_fdoms, 1);
        p->eff_level = calloc(h->n_fdoms, 1);
        p->want_level = calloc(h->n_fdoms, 1);
        p->lat = calloc(h->n_cpus, sizeof(uint32_t));
        p->want_lat = calloc(h->n_cpus, sizeof(uint32_t));
        p->cpu_work = calloc(h->n_cpus, sizeof(double));
        p->cpu_vcpus = calloc(h->n_cpus, 1);
        p->allowed = calloc(h->n_cpus, 1);
        p->kbal = calloc(R->nv + 1, 1);
        p->kpin = calloc(R->nv + 1, 1);
        p->wait_ns = calloc(R->nv + 1, sizeof(double));
        p->wait_last = calloc(R->nv + 1, sizeof(double));
        p->wait_avg = calloc(R->nv + 1, sizeof(double));
        p->cpu_deliv = calloc(h->n_cpus, sizeof(double));
        p->ran = calloc(R->nv + 1, sizeof(double));
        if (!p->home || !p->level || !p->eff_level || !p->want_level || !p->lat || !p->want_lat || !p->cpu_work || !p->cpu_vcpus ||
            !p->allowed || !p->kbal || !p->kpin || !p->wait_ns || !p->wait_last || !p->wait_avg || !p->cpu_deliv || !p->ran)
                return -ENOMEM;
        for (unsigned i = 0; i < R->nv; i++)
                p->home[i] = -1;
        /* the sim driver starts every CPU at level 1000 permille (top) with no idle limit */
        for (unsigned f = 0; f < h->n_fdoms; f++)
                p->level[f] = p->want_level[f] = p->eff_level[f] = (uint8_t) (h->model.n_levels - 1);
        for (unsigned c = 0; c < h->n_cpus; c++) {
                p->cpu_deliv[c] = 1.0;
                p->lat[c] = p->want_lat[c] = EM_LATENCY_ANY;
                p->allowed[c] = h->cpu_core[c] >= 0;
        }
        r = power_driver_new("sim", &dc, &p->drv);
        if (r < 0)
                return r;
        r = ev_ws_new(h, R->nv, &p->ev);
        if (r < 0)
                return r;
        p->dirty = true;
        return 0;
}

/*
 * Levels and idle limits go through the sim power driver as the knob values
 * the daemon's applier writes (plan_cpu_action: plan_to_actions() for
 * vmmpower, baseline_knobs() for the baselines), for the CPUs whose level or
 * limit changed; what the driver reports back is what is evaluated.
 */
static int drive_knobs(struct run *R, struct pstate *p, const struct plan_cpu_action *a)
{
        const struct em_host *h = R->h;
        const struct energy_model *m = &h->model;
        bool any = false;
        int r;

        for (unsigned c = 0; c < h->n_cpus; c++) {
                if (!a[c].online)
                        continue;
                if (a[c].level_changed && a[c].max_khz > 0) {
                        struct power_perf_request req = { .flags = POWER_PERF_MAX_KHZ, .max_khz = a[c].max_khz };
                        r = power_driver_set_perf(p->drv, c, &req);
                        if (r < 0)
                                return r;
                }
                if (a[c].latency_changed) {
                        struct power_idle_constraint ic = { .deepest_state = -1, .latency_us = a[c].latency_us };
                        r = power_driver_enter_idle(p->drv, c, &ic);
                        if (r < 0)
                                return r;
                        const struct power_sim_cpu *sc = power_sim_cpu(p->drv, c);
                        p->lat[c] = sc->idle.latency_us < 0 ? EM_LATENCY_ANY : (uint32_t) sc->idle.latency_us;
                        any = true;
                }
        }
        for (unsigned c = 0; c < h->n_cpus; c++) {
                if (!a[c].online || !a[c].level_changed)
                        continue;
                unsigned f = h->cpu_fdom[c];
                if (a[c].max_khz == 0) {
                        p->level[f] = a[c].level;
                } else {
                        unsigned pm = power_sim_cpu(p->drv, c)->level_permille, L = 0;
                        for (unsigned k = 0; k < m->n_levels; k++)
                                if (R->level_permille[k] <= pm)
                                        L = k;
                        p->level[f] = (uint8_t) L;
                }
                any = true;
        }
        if (any)
                p->dirty = true;
        return 0;
}

/* A baseline's levels and limits (want_level, want_lat) where they differ from the driver's. */
static int baseline_knobs(struct run *R, struct pstate *p)
{
        const struct em_host *h = R->h;

        for (unsigned c = 0; c < h->n_cpus; c++) {
                struct plan_cpu_action *a = &R->knobs[c];
                unsigned f = h->cpu_fdom[c];

                *a = (struct plan_cpu_action) { .online = h->cpu_core[c] >= 0 };
                if (!a->online)
                        continue;
                plan_cpu_knobs(h, p->want_level[f], p->want_lat[c], a);
                a->level_changed = p->want_level[f] != p->level[f];
                a->latency_changed = p->want_lat[c] != p->lat[c];
        }
        return drive_knobs(R, p, R->knobs);
}

/*
 * vCPU i's load counts on its home CPU: pinned alone there by the plan in
 * force (plan->vcpu_alone), or placed by the kernel's periodic balancer
 * (p->kbal), which is evaluated as B0's placement is, by its homes.
 */
static bool by_home(const struct pstate *p, unsigned i)
{
        return p->kbal[i] || (p->plan && i < p->plan->n_vcpus && p->plan->vcpu_alone[i]);
}

/*
 * vmmpower with pack sets (PinSingleCPU = no): a vCPU may run on every CPU of
 * its LLC's pack set.  Over a step a set is work-conserving (a waking vCPU
 * goes to an idle CPU of its set, a CPU that goes idle pulls a waiting one),
 * so its load is evaluated spread the way plan_water_level() spreads it: a
 * vCPU the plan pins alone (plan->vcpu_alone), or one the kernel balances
 * between LLCs (kernel_balance), counts on its CPU, the rest of the
 * set's demand fills the set's CPUs up to a common level.  The demand is the
 * step's, not the planner's estimate, so a set whose level is too low shows
 * as undelivered work.  The plan's own per-CPU placement stays the planner's
 * input; levels and idle limits are the plan's.
 */
static void balance_pack_sets(struct run *R, struct pstate *p)
{
        const struct em_host *h = R->h;
        double *set_load = R->load, *fixed = R->sibload; /* scratch, >= n_llcs and n_cpus */

        memset(set_load, 0, h->n_llcs * sizeof(double));
        for (unsigned i = 0; i < R->nv; i++) {
                int c = p->home[i];
                if (c < 0)
                        continue;
                if (p->cpu_vcpus[c] < 255)
                        p->cpu_vcpus[c]++;
                if (by_home(p, i))
                        p->cpu_work[c] += R->demand[i];
                else
                        set_load[h->cores[h->cpu_core[c]].llc] += R->demand[i];
        }
        for (unsigned g = 0; g < h->n_llcs; g++) {
                unsigned m = 0;
                double lambda;
                if (set_load[g] <= 0.0)
                        continue;
                for (unsigned k = h->llcs[g].first; k < h->llcs[g].end; k++)
                        for (unsigned t = 0; t < h->cores[k].n_threads; t++)
                                if (p->allowed[h->cores[k].cpu[t]])
                                        fixed[m++] = p->cpu_work[h->cores[k].cpu[t]];
                /* m > 0: the vCPUs' homes are the allowed CPUs (the plan step sets them so) */
                lambda = plan_water_level(fixed, m, set_load[g]);
                for (unsigned k = h->llcs[g].first; k < h->llcs[g].end; k++)
                        for (unsigned t = 0; t < h->cores[k].n_threads; t++) {
                                int c = h->cores[k].cpu[t];
                                if (p->allowed[c])
                                        p->cpu_work[c] = MAX(p->cpu_work[c], lambda);
                        }
        }
}

/*
 * What the daemon's tracker would see of each vCPU: the work that ran.  A
 * vCPU on a CPU over its level's capacity gets that CPU's delivered share;
 * a packed vCPU that is not pinned alone shares its pack set's water, so it
 * gets the set's share (delivered water over water, over the set's CPUs).
 */
static void record_ran(struct run *R, struct pstate *p)
{
        const struct em_host *h = R->h;
        bool sets = p->id == SIM_VMM && !R->cfg->policy.pin_single_cpu;
        double *alone = R->load, *water = R->llc_tmp, *dwater = R->llc_tmp + h->n_llcs;

        if (sets) {
                memset(alone, 0, h->n_cpus * sizeof(double));
                memset(R->llc_tmp, 0, 2 * h->n_llcs * sizeof(double));
                for (unsigned i = 0; i < R->nv; i++)
                        if (p->home[i] >= 0 && by_home(p, i))
                                alone[p->home[i]] += R->demand[i];
                for (unsigned c = 0; c < h->n_cpus; c++) {
                        if (h->cpu_core[c] < 0 || !p->allowed[c])
                                continue;
                        unsigned g = h->cores[h->cpu_core[c]].llc;
                        double wc = MAX(p->cpu_work[c] - alone[c], 0.0);
                        water[g] += wc;
                        dwater[g] += wc * p->cpu_deliv[c];
                }
        }
        for (unsigned i = 0; i < R->nv; i++) {
                int c = p->home[i];
                double f = 1.0;
                if (c >= 0) {
                        f = p->cpu_deliv[c];
                        if (sets && !by_home(p, i)) {
                                unsigned g = h->cores[h->cpu_core[c]].llc;
                                f = water[g] > 0.0 ? dwater[g] / water[g] : 1.0;
                        }
                }
                p->ran[i] = R->demand[i] * f;
        }
}

/*
 * What placement l delivers: its domains' levels after the turbo table and the package power limit
 * (eff_level[n_fdoms]), each CPU's delivered share of its work (cpu_deliv[n_cpus]) and the work it
 * cannot deliver (returned, CPUs of top-level demand).  Every policy's (evaluate) and the placed
 * bin-packing reference's (binpack_window).
 */
static double deliver(const struct em_host *h, const struct em_load *l, uint8_t *eff_level, double *cpu_deliv)
{
        double over = 0;

        /* The turbo table and the package power limit cap a package's level (the model's
         * em_host_level_caps()): the capped level is what runs, in the power, in the work
         * delivered and in the next burst windows (eff_level). */
        int caps[64];
        bool capped = h->has_limits && h->n_pkgs <= 64 && em_host_level_caps(h, l, caps) > 0;
        for (unsigned f = 0; f < h->n_fdoms; f++)
                eff_level[f] = l->fdom_level[f];
        if (capped)
                for (unsigned k = 0; k < h->n_cores; k++) {
                        const struct em_core *co = &h->cores[k];
                        int c = caps[co->pkg];
                        for (unsigned t = 0; t < co->n_threads && c >= 0; t++) {
                                unsigned f = h->cpu_fdom[co->cpu[t]];
                                if (eff_level[f] > c)
                                        eff_level[f] = (uint8_t) c;
                        }
                }
        /* Work the placement cannot deliver: per CPU over its level's capacity, per
         * 2-thread core over SmtGain x that (the evsim's speed rule).  cpu_deliv: the
         * share of each CPU's work that ran (every vCPU on it scaled alike). */
        for (unsigned k = 0; k < h->n_cores; k++) {
                const struct em_core *co = &h->cores[k];
                unsigned lv = 0;
                for (unsigned t = 0; t < co->n_threads; t++) /* the core runs at its threads' highest level */
                        lv = MAX(lv, (unsigned) eff_level[h->cpu_fdom[co->cpu[t]]]);
                double cap = em_capacity(&h->model, lv) / 1024.0;
                double sum = 0, o = 0, core_f = 1.0;
                for (unsigned t = 0; t < co->n_threads; t++) {
                        double wk = l->cpu_work[co->cpu[t]];
                        sum += MIN(wk, cap);
                        o += MAX(wk - cap, 0.0);
                }
                if (co->n_threads == 2 && sum > cap * h->model.smt_gain_permille / 1000.0) {
                        o += sum - cap * h->model.smt_gain_permille / 1000.0;
                        core_f = cap * h->model.smt_gain_permille / 1000.0 / sum;
                }
                for (unsigned t = 0; t < co->n_threads; t++) {
                        double wk = l->cpu_work[co->cpu[t]];
                        cpu_deliv[co->cpu[t]] = wk > cap ? cap / wk * core_f : core_f;
                }
                over += o;
        }
        return over;
}

static void evaluate(struct run *R, struct pstate *p)
{
        const struct em_host *h = R->h;

        memset(p->cpu_work, 0, h->n_cpus * sizeof(double));
        memset(p->cpu_vcpus, 0, h->n_cpus);
        if (p->id == SIM_VMM && !R->cfg->policy.pin_single_cpu)
                balance_pack_sets(R, p);
        else
                for (unsigned i = 0; i < R->nv; i++) {
                        int c = p->home[i];
                        if (c < 0)
                                continue;
                        p->cpu_work[c] += R->demand[i];
                        if (p->cpu_vcpus[c] < 255)
                                p->cpu_vcpus[c]++;
                }
        struct em_load l = { .cpu_work = p->cpu_work, .cpu_vcpus = p->cpu_vcpus, .cpu_max_latency_us = p->lat,
                             .fdom_level = p->level, .wake_given = true, .wake_mw = p->wake_mw };
        p->overload = deliver(h, &l, p->eff_level, p->cpu_deliv);
        record_ran(R, p);
        p->power_mw = em_host_power(h, &l, NULL);
        p->dirty = false;
}

/* ---- baselines ------------------------------------------------------------- */

/*
 * Per frequency domain the lowest level at which every CPU's busy time, times
 * margin, stays within the CPU's time: what a utilisation-driven governor
 * settles on.  Busy time as the kernel sees it (PELT util is scaled by the
 * frequency but not by SMT contention): a thread whose sibling is busy too
 * runs slower and shows more util (smt_thread_busy), so a governor raises the
 * frequency of a contended core; a saturated core gets the top level.
 */
static void util_levels(struct run *R, struct pstate *p, double margin)
{
        const struct em_host *h = R->h;
        const struct energy_model *m = &h->model;
        double g = m->smt_gain_permille / 1000.0;

        memset(R->load, 0, h->n_cpus * sizeof(double));
        for (unsigned i = 0; i < R->nv; i++)
                if (p->home[i] >= 0)
                        R->load[p->home[i]] += R->demand[i];
        for (unsigned f = 0; f < h->n_fdoms; f++)
                p->want_level[f] = 0;
        for (unsigned k = 0; k < h->n_cores; k++) {
                const struct em_core *c = &h->cores[k];
                double w0 = R->load[c->cpu[0]], w1 = c->n_threads > 1 ? R->load[c->cpu[1]] : 0.0;
                unsigned L;

                for (L = 0; L + 1 < m->n_levels; L++) {
                        double cap = m->levels[L].capacity / 1024.0, t0, t1, o;
                        if (w0 <= 0.0 || w1 <= 0.0) {
                                if (margin * MAX(w0, w1) <= cap + 1e-12)
                                        break;
                        } else if (smt_thread_busy(w0 / cap, w1 / cap, g, &t0, &t1, &o) &&
                                   margin * MAX(t0, t1) <= 1.0 + 1e-12)
                                break;
                }
                /* every thread's domain (FrequencyScope = policy may split a core's threads) */
                for (unsigned t = 0; t < c->n_threads; t++) {
                        unsigned f = h->cpu_fdom[c->cpu[t]];
                        if (L > p->want_level[f])
                                p->want_level[f] = (uint8_t) L;
                }
        }
}

static void top_levels(struct run *R, struct pstate *p)
{
        for (unsigned f = 0; f < R->h->n_fdoms; f++)
                p->want_level[f] = (uint8_t) (R->h->model.n_levels - 1);
}

/* The least loaded allowed CPU: util, then its sibling's util (idle cores first), then the spread order. */
static int least_loaded(struct run *R, const uint8_t *allowed, const unsigned *nr)
{
        const struct em_host *h = R->h;
        int best = -1;

        for (unsigned j = 0; j < h->n_online; j++) {
                int c = R->spread_order[j];
                if (!allowed[c])
                        continue;
                if (best < 0)
                        best = c;
                else {
                        double a = R->load[c], b = R->load[best];
                        if (a < b - 1e-12 || (fabs(a - b) <= 1e-12 && (R->sibload[c] < R->sibload[best] - 1e-12 ||
                                                                       (fabs(R->sibload[c] - R->sibload[best]) <= 1e-12 &&
                                                                        nr[c] < nr[best]))))
                                best = c;
                }
        }
        return best;
}

static int sibling_of(const struct em_host *h, int c)
{
        const struct em_core *k = &h->cores[h->cpu_core[c]];
        if (k->n_threads < 2)
                return -1;
        return k->cpu[0] == c ? k->cpu[1] : k->cpu[0];
}

static void add_load(struct run *R, unsigned *nr, int c, double d)
{
        int s = sibling_of(R->h, c);
        R->load[c] += d;
        nr[c]++;
        if (s >= 0)
                R->sibload[s] += d;
}

static void sub_load(struct run *R, unsigned *nr, int c, double d)
{
        int s = sibling_of(R->h, c);
        R->load[c] -= d;
        nr[c]--;
        if (s >= 0)
                R->sibload[s] -= d;
}

/*
 * Linux-like spread: vCPUs without a CPU (or outside the allowed set) go to
 * the least loaded allowed CPU, largest first; then the periodic balancer
 * moves one vCPU at a time from the busiest to the idlest CPU while their
 * utilisation differs by more than B0_IMBALANCE and the move narrows it.
 * movable: the vCPUs it may place and move (NULL: all); the others' load
 * stays where they are.  Returns the number of moves of already placed vCPUs.
 */
static unsigned spread_balance(struct run *R, struct pstate *p, const uint8_t *movable)
{
        const struct em_host *h = R->h;
        _cleanup_free_ unsigned *nr = calloc(h->n_cpus, sizeof(unsigned));
        _cleanup_free_ struct ffd_item *it = calloc(R->nv + 1, sizeof(*it));
        unsigned moves = 0, n_it = 0;

        if (!nr || !it)
                return 0;
        memset(R->load, 0, h->n_cpus * sizeof(double));
        memset(R->sibload, 0, h->n_cpus * sizeof(double));
        for (unsigned i = 0; i < R->nv; i++) {
                if (p->home[i] >= 0 && (p->allowed[p->home[i]] || (movable && !movable[i])))
                        add_load(R, nr, p->home[i], R->demand[i]);
                else if (!movable || movable[i])
                        it[n_it++] = (struct ffd_item) { R->demand[i], i };
        }
        qsort(it, n_it, sizeof(*it), cmp_item);
        for (unsigned k = 0; k < n_it; k++) {
                unsigned i = it[k].i;
                int c = least_loaded(R, p->allowed, nr);
                if (p->home[i] >= 0)
                        moves++;
                p->home[i] = c;
                add_load(R, nr, c, R->demand[i]);
        }
        for (unsigned iter = 0; iter < h->n_online; iter++) {
                int busiest = -1, idlest = least_loaded(R, p->allowed, nr);
                double diff, bestd = -1;
                unsigned bi = 0;

                for (unsigned j = 0; j < h->n_online; j++) {
                        int c = R->spread_order[j];
                        if (p->allowed[c] && nr[c] >= 2 && (busiest < 0 || R->load[c] > R->load[busiest]))
                                busiest = c;
                }
                if (busiest < 0 || idlest < 0 || busiest == idlest)
                        break;
                diff = R->load[busiest] - R->load[idlest];
                if (diff <= B0_IMBALANCE)
                        break;
                for (unsigned i = 0; i < R->nv; i++)
                        if (p->home[i] == busiest && (!movable || movable[i]) && R->demand[i] < diff &&
                            R->demand[i] > bestd) {
                                bestd = R->demand[i];
                                bi = i;
                        }
                if (bestd <= 0)
                        break;
                sub_load(R, nr, busiest, bestd);
                add_load(R, nr, idlest, bestd);
                p->home[bi] = idlest;
                moves++;
        }
        p->dirty = true;
        return moves;
}

static void b1_pin(struct run *R, struct pstate *p)
{
        for (unsigned i = 0; i < R->nv; i++)
                p->home[i] = R->spread_order[i % R->h->n_online];
        p->dirty = true;
}

/* ---- the run --------------------------------------------------------------- */

/*
 * One burst window of policy p's current state (all cores, or those of
 * core_mask).  vmmpower's windows are vmm_window_ns long and also give the
 * planner's wait inputs: the last period's wait ratio and the decayed average
 * over the window's periods, the tracker's wait_ratio and wait_avg.
 */
static int window(struct run *R, struct pstate *p, uint64_t window_id, const uint8_t *core_mask, bool observe)
{
        bool vmm = p->id == SIM_VMM;
        double wl = vmm ? R->vmm_window_ns : R->window_ns;
        struct ev_input in = {
                .nv = R->nv,
                .demand = R->demand,
                .home = p->home,
                .fdom_level = p->eff_level,
                .cpu_max_latency_us = p->lat,
                .wake_balance = p->id == SIM_B0 || p->id == SIM_B2 || p->id == SIM_B3 ||
                                (p->id == SIM_VMM && !R->cfg->policy.pin_single_cpu),
                .allowed = p->allowed,
                .pinned = p->id == SIM_VMM && p->plan ? p->kpin : NULL,
                .core_mask = core_mask,
                .burst = R->cfg->burst,
                .seed = R->cfg->seed,
                .window_id = window_id,
                .window_ns = wl,
                .period_ns = vmm ? (double) R->cfg->plan_period_ns : 0.0,
                .half_life_ns = vmm ? (double) R->cfg->half_life_ns : 0.0,
        };
        struct sim_policy_result *pr = &R->res->p[p->id];
        struct ev_output out = { .vcpu_wait_ns = p->wait_ns,
                                 .vcpu_wait_last = vmm ? p->wait_last : NULL,
                                 .vcpu_wait_avg = vmm ? p->wait_avg : NULL,
                                 .hist = observe ? &pr->hist : NULL };
        int r = ev_run(p->ev, &in, &out);

        if (r < 0)
                return r;
        R->res->events += out.events;
        if (!core_mask) {
                /* a full window: its wake-ups, each charged the energy of the state it woke from,
                 * are the wake-up power until the next one */
                p->wake_mw = out.wake_energy_uj * 1e6 / wl;
                p->dirty = true;
        }
        if (observe) {
                pr->wakeups += out.wakeups;
                pr->deep_wakeups += out.deep_wakeups;
                pr->queued_wakeups += out.queued_wakeups;
                pr->migrations += out.migrations * (double) R->cfg->step_ns / wl;
        }
        return 0;
}

static void update_wait_inputs(struct run *R, struct pstate *p, const uint8_t *core_mask)
{
        for (unsigned i = 0; i < R->nv; i++) {
                int c = p->home[i];
                if (c < 0 || (core_mask && !core_mask[R->h->cpu_core[c]]))
                        continue;
                double w = p->wait_last[i], a = p->wait_avg[i];
                R->samples[i].wait_ratio = w < 0 ? 0 : w > 1 ? 1 : w;
                R->samples[i].wait_avg = a < 0 ? 0 : a > 1 ? 1 : a;
        }
}

/*
 * p->allowed: the CPUs the vCPUs not pinned alone may run on, the union of
 * their pins' sets (plan_to_actions(): each packed vCPU's LLC pack set
 * without the CPUs of vCPUs pinned alone, unless those are all the set has).
 * The window's wake-up balancing stays in the waking vCPU's LLC, so allowing
 * every CPU of every pack set is the same thing as the daemon's pins (a vCPU
 * pinned alone is pinned: evsim keeps it home).
 */
static void pin_allowed(struct run *R, struct pstate *p, const struct plan *next)
{
        const struct plan_actions *act = &R->act;

        memset(p->allowed, 0, R->h->n_cpus);
        for (size_t i = 0; i < act->n_vcpus; i++) {
                int c = act->pin[i].cpu;
                if (c < 0 || (next->vcpu_alone[i] && !p->kbal[i]))
                        continue;
                if (cpuset_empty(&act->set[i]))
                        p->allowed[c] = 1;
                CPUSET_FOREACH(x, &act->set[i])
                        p->allowed[x] = 1;
        }
}

/*
 * vmmpower's vCPUs pinned to CPUs of more than one LLC (the pack sets pinned
 * as one, plan_pin_sets()): the kernel's periodic balancer places them, as
 * it places B0's vCPUs (spread_balance(), at the same moments), among the
 * CPUs they may use; the others' load stays where the plan put it.  Its
 * moves are migrations, not the planner's moves.  Returns them.
 */
static unsigned kernel_balance(struct run *R, struct pstate *p)
{
        bool any = false;
        for (unsigned i = 0; i < R->nv && !any; i++)
                any = p->kbal[i];
        return any ? spread_balance(R, p, p->kbal) : 0;
}

/* Which vCPUs' pins (R->act) span more than one LLC (p->kbal); true if one is new. */
static bool take_kbal(struct run *R, struct pstate *p)
{
        const struct em_host *h = R->h;
        bool fresh = false;

        for (unsigned i = 0; i < R->nv; i++) {
                int first = -1;
                bool multi = false;
                if (i < R->act.n_vcpus)
                        CPUSET_FOREACH(x, &R->act.set[i]) {
                                int g = (int) h->cores[h->cpu_core[x]].llc;
                                if (first < 0)
                                        first = g;
                                else if (g != first) {
                                        multi = true;
                                        break;
                                }
                        }
                fresh |= multi && !p->kbal[i];
                p->kbal[i] = multi;
        }
        return fresh;
}

/*
 * The vCPUs' homes from the pins (R->act): the number of vCPUs moved, their
 * cores in R->core_mask.  A vCPU the kernel balances between LLCs (p->kbal)
 * keeps its home while its pins allow it.
 */
static unsigned take_homes(struct run *R, struct pstate *p)
{
        const struct em_host *h = R->h;
        unsigned moved = 0;

        memset(R->core_mask, 0, h->n_cores);
        for (unsigned i = 0; i < R->nv; i++) {
                int c = i < R->act.n_vcpus ? R->act.pin[i].cpu : -1, old = p->home[i];
                if (c < 0)
                        c = -1; /* not placed (vmmpower-sim has no excluded VM to release) */
                if (c == old || (c >= 0 && old >= 0 && p->kbal[i] && cpuset_isset(&R->act.set[i], (unsigned) old)))
                        continue;
                if (old >= 0) {
                        moved++;
                        R->core_mask[h->cpu_core[old]] = 1;
                }
                if (c >= 0)
                        R->core_mask[h->cpu_core[c]] = 1;
                p->home[i] = c;
                p->dirty = true;
        }
        return moved;
}

/*
 * One period of vmmpower: the plan, then its actions as the daemon's applier
 * gets them (plan_to_actions() against the plan in force): the pins give the
 * vCPUs' homes and, with pack sets, the allowed CPUs; the levels and limits
 * that changed go through the sim power driver.
 */
static int vmm_period(struct run *R, struct pstate *p, nsec_t now, uint64_t period_idx)
{
        const struct em_host *h = R->h;
        const struct plan_policy *pol = &R->cfg->policy;
        struct sim_policy_result *pr = &R->res->p[SIM_VMM];
        struct plan *next = NULL;
        nsec_t c0 = thread_cputime_ns();
        unsigned moved;
        int r;

        if (R->hints)
                sim_hint_replay_advance(R->hints, now);
        r = plan_step(h, pol, R->samples, R->nv, R->hints, p->plan, now, &R->plan_scratch, &next);
        pr->decide_cpu_ns += thread_cputime_ns() - c0;
        pr->decisions++;
        if (r < 0)
                return r;
        /* where the plan keeps its vCPUs: CPUs and LLCs (diagnostics, printed with the plan count) */
        pr->active_cpus += cpuset_count(&next->active);
        memset(R->core_mask, 0, h->n_cores);
        for (unsigned c = 0; c < h->n_cpus; c++)
                if (h->cpu_core[c] >= 0 && cpuset_isset(&next->active, c))
                        R->core_mask[h->cores[h->cpu_core[c]].llc] = 1; /* as scratch: n_llcs <= n_cores */
        for (unsigned g = 0; g < h->n_llcs; g++)
                pr->active_llcs += R->core_mask[g];
        pr->host_wide += next->sets_as_one;
        pr->host_wide_entries += next->sets_as_one && !(p->plan && p->plan->sets_as_one);
        if (next->why.decision == PLAN_GROW)
                pr->grows++;
        else if (next->why.decision == PLAN_SHRINK)
                pr->shrinks++;
        r = plan_to_actions(h, pol, p->plan, R->plan_in.v, R->plan_in.n, next, R->plan_scratch.v, R->plan_scratch.n,
                            &R->act);
        if (r < 0) {
                plan_free(next);
                return r;
        }
        bool fresh = take_kbal(R, p);
        for (unsigned i = 0; i < R->nv; i++)
                p->kpin[i] = i < next->n_vcpus && next->vcpu_alone[i] && !p->kbal[i];
        moved = take_homes(R, p);
        pr->migrations += moved;
        pr->moves += moved;
        if (!pol->pin_single_cpu)
                pin_allowed(R, p, next);
        if (fresh) { /* newly pinned across LLCs: the kernel balances them now, not at the next step */
                unsigned km = kernel_balance(R, p);
                pr->migrations += km;
                if (km > 0) { /* any core may have changed: the re-simulation takes them all */
                        memset(R->core_mask, 1, h->n_cores);
                        moved += km;
                }
        }
        r = drive_knobs(R, p, R->act.cpu);
        if (r < 0) {
                plan_free(next);
                return r;
        }
        /* a vCPU pinned alone, or no longer, changes how its set's load spreads */
        if (!p->plan || p->plan->n_vcpus != next->n_vcpus ||
            memcmp(p->plan->vcpu_alone, next->vcpu_alone, next->n_vcpus) != 0)
                p->dirty = true;
        plan_free(p->plan);
        p->plan = next;
        plan_input_swap(&R->plan_in, &R->plan_scratch);
        if (R->cfg->resim_on_change && p->plan->why.decision != PLAN_INITIAL) {
                /* only cores whose vCPUs changed: a level change alone is seen at the next step */
                if (moved > 0) {
                        r = window(R, p, RESIM_WINDOW_ID_BASE + period_idx, R->core_mask, false);
                        if (r < 0)
                                return r;
                        update_wait_inputs(R, p, R->core_mask);
                }
        }
        return 0;
}

static int baseline_step(struct run *R, struct pstate *p, bool interval_start)
{
        struct sim_policy_result *pr = &R->res->p[p->id];
        nsec_t c0 = thread_cputime_ns();
        unsigned moves = 0;

        switch (p->id) {
        case SIM_B0:
                moves = spread_balance(R, p, NULL);
                top_levels(R, p);
                break;
        case SIM_B1:
                if (p->home[0] < 0)
                        b1_pin(R, p);
                util_levels(R, p, B1_SCHEDUTIL_MARGIN);
                break;
        case SIM_B2: {
                double total = 0;
                for (unsigned i = 0; i < R->nv; i++)
                        total += R->demand[i];
                if (interval_start) {
                        bool lp = p->lp;
                        if (!lp && total < B2_ENTER_UTIL * R->h->n_online)
                                lp = true;
                        else if (lp && total > B2_EXIT_UTIL * R->lp_n)
                                lp = false;
                        if (lp != p->lp) {
                                p->lp = lp;
                                for (unsigned c = 0; c < R->h->n_cpus; c++)
                                        p->allowed[c] = R->h->cpu_core[c] >= 0 && (!lp || R->lp_set[c]);
                        }
                }
                moves = spread_balance(R, p, NULL);
                top_levels(R, p);
                break;
        }
        case SIM_B3:
                moves = spread_balance(R, p, NULL);
                util_levels(R, p, B3_EPP_MARGIN);
                break;
        default:
                break;
        }
        pr->migrations += moves;
        pr->moves += moves;
        pr->decide_cpu_ns += thread_cputime_ns() - c0;
        pr->decisions++;
        return baseline_knobs(R, p);
}

double sim_demand_scale(const struct em_host *h, enum sim_demand_unit u, unsigned *level_out)
{
        const struct energy_model *m = &h->model;
        unsigned L = m->n_levels - 1, cores = 0;

        if (u == SIM_DEMAND_ALLCORE) {
                for (unsigned p = 0; p < h->n_pkgs; p++)
                        cores = MAX(cores, h->pkgs[p].end - h->pkgs[p].first);
                L = em_turbo_level(m, (double) cores);
        }
        if (level_out)
                *level_out = L;
        return m->levels[L].capacity / 1024.0;
}

static int run_setup(struct run *R)
{
        const struct em_host *h = R->h;
        const struct sim_trace *tr = R->tr;
        const struct sim_config *cfg = R->cfg;
        unsigned want_vcpus, n_vms = 0, nv = 0, *perm;
        uint64_t rng = rng_seed3(cfg->seed, 0x7261636b, 0);

        R->demand_scale = sim_demand_scale(h, cfg->demand_unit, &R->res->demand_level);
        R->res->demand_scale = R->demand_scale;

        if (cfg->n_vms)
                want_vcpus = UINT32_MAX;
        else
                want_vcpus = (unsigned) lround(cfg->oversub * h->n_online);
        if (want_vcpus == 0)
                return -EINVAL;
        perm = malloc(tr->n_vms * sizeof(unsigned));
        if (!perm)
                return -ENOMEM;
        /* Whole VMs in a seeded random order; a trace with too few VMs is reused in a new order.  A VM
         * that would take the vCPUs over the target is passed over for the next one that fits, so the
         * target is met with whole VMs, or as nearly as they allow without going above it (a pass over
         * the whole trace that adds nothing ends the draw; res->want_vcpus reports the target). */
        unsigned maxv = 1;
        for (unsigned i = 0; i < tr->n_vms; i++)
                maxv = MAX(maxv, tr->vcpus[i]);
        size_t cap = cfg->n_vms ? (size_t) cfg->n_vms * maxv : want_vcpus;
        R->vm_of = malloc(cap * sizeof(unsigned));
        R->pid = malloc(cap * sizeof(uint32_t));
        R->vidx = malloc(cap * sizeof(unsigned));
        if (!R->vm_of || !R->pid || !R->vidx) {
                free(perm);
                return -ENOMEM;
        }
        for (bool added = true; added && nv < want_vcpus && (!cfg->n_vms || n_vms < cfg->n_vms);) {
                added = false;
                for (unsigned i = 0; i < tr->n_vms; i++)
                        perm[i] = i;
                for (unsigned i = tr->n_vms; i > 1; i--) {
                        unsigned j = (unsigned) (splitmix64(&rng) % i), t = perm[i - 1];
                        perm[i - 1] = perm[j];
                        perm[j] = t;
                }
                for (unsigned k = 0; k < tr->n_vms && nv < want_vcpus && (!cfg->n_vms || n_vms < cfg->n_vms); k++) {
                        unsigned vm = perm[k];
                        if (nv + tr->vcpus[vm] > cap)
                                continue; /* would go over the target: the next VM that fits */
                        for (unsigned j = 0; j < tr->vcpus[vm]; j++) {
                                R->vm_of[nv] = vm;
                                R->pid[nv] = SIM_VM_PID0 + n_vms;
                                R->vidx[nv] = j;
                                nv++;
                        }
                        n_vms++;
                        added = true;
                }
        }
        free(perm);
        R->nv = nv;
        R->res->n_vms = n_vms;
        R->res->n_vcpus = nv;
        R->res->want_vcpus = cfg->n_vms ? 0 : want_vcpus;
        R->demand = calloc(nv + 1, sizeof(double));
        R->samples = calloc(nv + 1, sizeof(*R->samples));
        R->spread_rank = malloc(h->n_cpus * sizeof(int));
        R->spread_order = malloc(h->n_online * sizeof(int));
        R->lp_set = calloc(h->n_cpus, 1);
        R->level_permille = calloc(h->model.n_levels, sizeof(uint32_t));
        R->core_mask = calloc(h->n_cores, 1);
        R->load = calloc(h->n_cpus + h->n_fdoms, sizeof(double));
        R->sibload = calloc(h->n_cpus + h->n_fdoms, sizeof(double));
        R->llc_tmp = calloc(2 * (size_t) h->n_llcs + 1, sizeof(double));
        R->knobs = calloc(h->n_cpus, sizeof(*R->knobs));
        if (!R->demand || !R->samples || !R->spread_rank || !R->spread_order || !R->lp_set || !R->level_permille ||
            !R->core_mask || !R->load || !R->sibload || !R->llc_tmp || !R->knobs)
                return -ENOMEM;
        for (unsigned i = 0; i < nv; i++)
                R->samples[i] = (struct sim_vcpu_sample) { .pid = R->pid[i], .index = R->vidx[i] };

        /* spread order: thread 0 of every core, interleaved over packages and their LLCs, then thread 1 */
        {
                unsigned k = 0;
                for (unsigned c = 0; c < h->n_cpus; c++)
                        R->spread_rank[c] = -1;
                for (unsigned t = 0; t < 2; t++)
                        for (unsigned pos = 0; pos < h->n_cores; pos++)
                                for (unsigned l = 0; l < h->n_llcs; l++) {
                                        /* LLCs in order pkg0 llc0, pkg1 llc0, pkg0 llc1 ... */
                                        unsigned per = h->n_llcs / h->n_pkgs ? h->n_llcs / h->n_pkgs : 1;
                                        unsigned li = (l % h->n_pkgs) * per + l / h->n_pkgs;
                                        if (li >= h->n_llcs)
                                                li = l;
                                        const struct em_group *g = &h->llcs[li];
                                        if (pos >= g->end - g->first)
                                                continue;
                                        const struct em_core *core = &h->cores[g->first + pos];
                                        if (t >= core->n_threads)
                                                continue;
                                        int cpu = core->cpu[t];
                                        if (cpu < 0 || R->spread_rank[cpu] >= 0)
                                                continue;
                                        R->spread_rank[cpu] = (int) k;
                                        R->spread_order[k++] = cpu;
                                }
                for (unsigned j = 0; j < h->n_online && k < h->n_online; j++) { /* anything missed */
                        int cpu = h->order_smt_first[j];
                        if (R->spread_rank[cpu] < 0) {
                                R->spread_rank[cpu] = (int) k;
                                R->spread_order[k++] = cpu;
                        }
                }
        }
        /* lpmd set: 10% of the CPUs rounded up to whole cores, SMT-first from the first core */
        {
                unsigned want = (unsigned) ceil(B2_SET_SHARE * h->n_online);
                for (unsigned j = 0; j < h->n_online && R->lp_n < want; j++) {
                        int cpu = h->order_smt_first[j];
                        R->lp_set[cpu] = 1;
                        R->lp_n++;
                        int s = sibling_of(h, cpu);
                        if (R->lp_n == want && s >= 0 && !R->lp_set[s]) {
                                R->lp_set[s] = 1;
                                R->lp_n++;
                        }
                }
        }
        R->max_khz = h->model.levels[h->model.n_levels - 1].freq_khz;
        if (R->max_khz == 0)
                R->max_khz = 1000000;
        for (unsigned k = 0; k < h->model.n_levels; k++)
                R->level_permille[k] = (uint32_t) MIN((uint64_t) h->model.levels[k].freq_khz * 1000 / R->max_khz, 1000u);
        for (int p = 0; p < _SIM_RUN_MAX; p++) {
                int r = pstate_init(R, &R->ps[p], (enum sim_policy) p);
                if (r < 0)
                        return r;
        }
        return 0;
}

void sim_result_free(struct sim_result *r)
{
        for (int p = 0; p < _SIM_POLICY_MAX; p++) {
                free(r->p[p].interval_w);
                r->p[p].interval_w = NULL;
        }
}

/* The replay of cfg->hints over the run's VMs (VM k: pid 10000 + k, run_setup()). */
static int setup_hints(struct run *R)
{
        _cleanup_free_ unsigned *vcpus = calloc(R->res->n_vms + 1, sizeof(unsigned));
        struct sim_error err = { 0 };
        int r;

        if (!vcpus)
                return -ENOMEM;
        for (unsigned i = 0; i < R->nv; i++)
                vcpus[R->pid[i] - SIM_VM_PID0]++;
        r = sim_hint_replay_new(R->cfg->hints, &R->cfg->hint_policy, SIM_VM_PID0, vcpus, R->res->n_vms, &R->hints,
                                &err);
        if (r == -EINVAL)
                fprintf(stderr, "vmmpower-sim: %s\n", err.message);
        return r;
}

/*
 * sim_config.check_reference: interval k's per-LLC reference placement pl through the burst
 * simulation, one window: the vCPUs homed by sim_ref_homes(), free to run on the sets' CPUs
 * (the kernel's wake-up and newidle balancing, within an LLC as everywhere in evsim), the
 * reference's level on the sets' domains and the lowest elsewhere, no idle limit (as the
 * reference is powered).  Its wake-ups, queued wake-ups and waits go to rr.  The burst
 * simulation's workspace and inputs are the run's (struct ref_ws), kept across windows as each
 * policy keeps its own.
 */
struct ref_ws {
        struct ev_ws *ev;
        int *home;      /* [nv] */
        uint8_t *lvl;   /* [n_fdoms] */
        uint32_t *lat;  /* [n_cpus] EM_LATENCY_ANY */
        double *wait;   /* [nv] */
        /* binpack_window() */
        double *work, *deliv;   /* [n_cpus] */
        uint8_t *cnt, *allowed; /* [n_cpus] */
        uint8_t *plvl;          /* [n_fdoms] the packing's levels (lvl: after the caps) */
};

static void ref_ws_free(struct ref_ws *x)
{
        ev_ws_free(x->ev);
        free(x->home);
        free(x->lvl);
        free(x->lat);
        free(x->wait);
        free(x->work);
        free(x->deliv);
        free(x->cnt);
        free(x->allowed);
        free(x->plvl);
}

static int ref_ws_init(struct run *R, struct ref_ws *x)
{
        const struct em_host *h = R->h;

        x->home = calloc(R->nv ? R->nv : 1, sizeof(int));
        x->lvl = calloc(h->n_fdoms ? h->n_fdoms : 1, 1);
        x->lat = calloc(h->n_cpus, sizeof(uint32_t));
        x->wait = calloc(R->nv ? R->nv : 1, sizeof(double));
        x->work = calloc(h->n_cpus, sizeof(double));
        x->deliv = calloc(h->n_cpus, sizeof(double));
        x->cnt = calloc(h->n_cpus, 1);
        x->allowed = calloc(h->n_cpus, 1);
        x->plvl = calloc(h->n_fdoms ? h->n_fdoms : 1, 1);
        if (!x->home || !x->lvl || !x->lat || !x->wait || !x->work || !x->deliv || !x->cnt || !x->allowed || !x->plvl)
                return -ENOMEM;
        for (unsigned c = 0; c < h->n_cpus; c++)
                x->lat[c] = EM_LATENCY_ANY;
        return ev_ws_new(h, R->nv, &x->ev);
}

/* One window of a reference's placement: x->home on x->lvl, free to run on allowed; into rr. */
static int ref_run_window(struct run *R, struct ref_ws *x, const uint8_t *allowed, uint64_t window_id,
                          struct sim_ref_result *rr, double *ret_wake_uj)
{
        struct ev_input in = {
                .nv = R->nv, .demand = R->demand, .home = x->home, .fdom_level = x->lvl,
                .cpu_max_latency_us = x->lat, .wake_balance = true, .allowed = allowed, .burst = R->cfg->burst,
                .seed = R->cfg->seed, .window_id = window_id, .window_ns = R->window_ns,
        };
        struct ev_output out = { .vcpu_wait_ns = x->wait, .hist = &rr->hist };
        int r = ev_run(x->ev, &in, &out);

        if (r < 0)
                return r;
        rr->wakeups += out.wakeups;
        rr->queued_wakeups += out.queued_wakeups;
        rr->windows++;
        if (ret_wake_uj)
                *ret_wake_uj = out.wake_energy_uj;
        return 0;
}

static int ref_window(struct run *R, struct ref_ws *x, const struct sim_ref_placement *pl, uint64_t window_id,
                      struct sim_ref_result *rr)
{
        const struct em_host *h = R->h;

        sim_ref_homes(h, pl, R->demand, R->nv, x->home);
        memset(x->lvl, 0, h->n_fdoms ? h->n_fdoms : 1);
        for (unsigned c = 0; c < h->n_cpus; c++)
                if (pl->in_set[c])
                        x->lvl[h->cpu_fdom[c]] = (uint8_t) pl->level;
        return ref_run_window(R, x, pl->in_set, window_id, rr, NULL);
}

/*
 * sim_config.check_binpack: interval k's bin-packing reference placement through the burst
 * simulation, one window, and charged as a policy is (evaluate): each vCPU homed where the packing
 * put it (x->home, x->work: sim_binpack_reference's output; a vCPU with no demand on the packed CPU
 * with the fewest vCPUs), free to run on the packing's CPUs
 * (wake-up and newidle balancing within an LLC), the packing's level on their domains after the
 * turbo table and power limit and the lowest elsewhere, no idle limit; its power with the vCPUs
 * packed onto each CPU in the idle gaps and the window's wake-ups, each charged the energy of the
 * state it woke from, and its work over capacity, for an interval of iv_s seconds into rr.
 */
static int binpack_window(struct run *R, struct ref_ws *x, unsigned level, uint64_t window_id,
                          struct sim_ref_result *rr, double iv_s)
{
        const struct em_host *h = R->h;
        int r;

        memset(x->cnt, 0, h->n_cpus);
        memset(x->plvl, 0, h->n_fdoms ? h->n_fdoms : 1);
        for (unsigned i = 0; i < R->nv; i++)
                if (x->home[i] >= 0 && x->cnt[x->home[i]] < 255)
                        x->cnt[x->home[i]]++;
        for (unsigned c = 0; c < h->n_cpus; c++) {
                x->allowed[c] = x->cnt[c] > 0;
                if (x->allowed[c])
                        x->plvl[h->cpu_fdom[c]] = (uint8_t) level;
        }
        /* a vCPU with no demand is packed nowhere, but sits on some CPU as every policy's vCPUs do
         * (counted in its idle gaps): the packed CPU with the fewest vCPUs (ties: the lowest) */
        for (unsigned i = 0; i < R->nv; i++) {
                int best = -1;
                if (x->home[i] >= 0)
                        continue;
                for (unsigned c = 0; c < h->n_cpus; c++)
                        if (x->allowed[c] && (best < 0 || x->cnt[c] < x->cnt[best]))
                                best = (int) c;
                if (best < 0)
                        break; /* nothing packed */
                x->home[i] = best;
                if (x->cnt[best] < 255)
                        x->cnt[best]++;
        }
        struct em_load l = { .cpu_work = x->work, .cpu_vcpus = x->cnt, .cpu_max_latency_us = x->lat,
                             .fdom_level = x->plvl, .wake_given = true };
        double wake_uj = 0, over = deliver(h, &l, x->lvl, x->deliv);
        r = ref_run_window(R, x, x->allowed, window_id, rr, &wake_uj);
        if (r < 0)
                return r;
        l.wake_mw = wake_uj * 1e6 / R->window_ns;
        rr->energy_j += em_host_power(h, &l, NULL) / 1000.0 * iv_s;
        rr->overload_s += over * iv_s;
        return 0;
}

/*
 * The bin-packing placement in bp (homes after binpack_window(): every vCPU on a packed CPU) at
 * level carrying this interval's demand, through binpack_window() in lag (its own workspace).
 * Its vCPUs run on the packed CPUs of their LLC as a pack set's do, so each LLC's demand is
 * spread evenly over its packed CPUs (as the simulator spreads vmmpower's pack sets,
 * balance_pack_sets()): over capacity only where the LLC's packed CPUs together are.  Into rr
 * as binpack_window() puts it.
 */
static int lagged_binpack(struct run *R, const struct ref_ws *bp, struct ref_ws *lag, unsigned level,
                          uint64_t window_id, struct sim_ref_result *rr, double iv_s)
{
        const struct em_host *h = R->h;
        double *llc_w = R->llc_tmp, *llc_n = R->llc_tmp + h->n_llcs;

        memcpy(lag->home, bp->home, R->nv * sizeof(int));
        memset(lag->cnt, 0, h->n_cpus);
        memset(R->llc_tmp, 0, 2 * h->n_llcs * sizeof(double));
        for (unsigned i = 0; i < R->nv; i++) {
                int c = lag->home[i];
                if (c < 0)
                        continue;
                lag->cnt[c] = 1;
                llc_w[h->cores[h->cpu_core[c]].llc] += R->demand[i];
        }
        for (unsigned c = 0; c < h->n_cpus; c++)
                llc_n[h->cores[h->cpu_core[c]].llc] += lag->cnt[c];
        for (unsigned c = 0; c < h->n_cpus; c++) {
                unsigned g = h->cores[h->cpu_core[c]].llc;
                lag->work[c] = lag->cnt[c] ? llc_w[g] / llc_n[g] : 0.0;
        }
        return binpack_window(R, lag, level, window_id, rr, iv_s);
}

int sim_run(const struct sim_host *host, const struct sim_trace *tr, const struct sim_config *cfg,
            struct sim_result *res)
{
        struct run R = { .host = host, .h = host->em, .tr = tr, .cfg = cfg, .res = res };
        const struct em_host *h = host->em;
        unsigned first = cfg->first_interval, n_int;
        nsec_t per = cfg->plan_period_ns, t = 0, c0 = process_cputime_ns(), w0 = now_ns();
        uint64_t period_idx = 0, step_idx = 0;
        double alpha = 1.0 - exp2(-(double) per / (double) cfg->half_life_ns);
        _cleanup_free_ double *bound_mw = NULL;
        _cleanup_free_ uint8_t *ref_in_set = NULL;
        _cleanup_free_ double *ref_llc_w = NULL;
        struct sim_ref_placement ref_pl = { 0 };
        struct ref_ws ref_ws = { 0 }, bp_ws = { 0 }, lag_ws = { 0 }, bpf_ws = { 0 };
        unsigned prev_level = 0;     /* --check-binpack: the last interval's packing level */
        bool prev_packed = false;    /* ... and whether it packed anything (bp_ws.home its homes) */
        int r;

        memset(res, 0, sizeof(*res));
        if (first >= tr->n_intervals || per <= 0 || cfg->step_ns < per || cfg->step_ns % per != 0 ||
            tr->interval_ns % per != 0 || cfg->half_life_ns <= 0 || cfg->burst.mean_ns <= 0 ||
            !(cfg->queue_budget > 0 && cfg->queue_budget < 1))
                return -EINVAL;
        n_int = cfg->n_intervals ? MIN(cfg->n_intervals, tr->n_intervals - first) : tr->n_intervals - first;
        res->n_intervals = n_int;
        res->queue_budget = cfg->queue_budget;
        res->n_cpus = h->n_online;
        res->interval_ns = tr->interval_ns;
        {
                static const double frac[SIM_N_REF] = SIM_REF_FRACTIONS;
                for (unsigned j = 0; j < SIM_N_REF; j++)
                        res->ref[j].budget = res->ref_one[j].budget = cfg->queue_budget * frac[j];
        }
        R.window_ns = cfg->window_ns > 0 ? (double) cfg->window_ns : fmax(1e9, 50 * cfg->burst.mean_ns);
        if (R.window_ns > (double) cfg->step_ns)
                R.window_ns = (double) cfg->step_ns;
        /* vmmpower's: at least three half-lives of the tracker's decay (7/8 of wait_avg's weight),
         * when they span periods; with periods of a half-life or more wait_avg is about the last
         * period's wait, which a window of the usual length samples.  At most 30 s (a long
         * LoadHalfLife would make every window a step): the weights are normalised over the
         * window's periods, so a shorter one only averages fewer of them. */
        R.vmm_window_ns = R.window_ns;
        if (3.0 * (double) cfg->half_life_ns >= 2.0 * (double) per)
                R.vmm_window_ns = fmin(fmax(R.window_ns, fmin(3.0 * (double) cfg->half_life_ns, VMM_WINDOW_MAX_NS)),
                                       (double) cfg->step_ns);
        res->window_ns = (nsec_t) R.window_ns;
        res->vmm_window_ns = (nsec_t) R.vmm_window_ns;
        for (int p = 0; p < _SIM_POLICY_MAX; p++) {
                res->p[p].interval_w = calloc(n_int, sizeof(double));
                if (!res->p[p].interval_w) {
                        r = -ENOMEM;
                        goto out;
                }
        }
        r = run_setup(&R);
        if (r < 0)
                goto out;
        if (cfg->hints) {
                r = setup_hints(&R);
                if (r < 0)
                        goto out;
        }
        bound_mw = calloc(3, sizeof(double));
        if (cfg->check_reference) {
                ref_pl.in_set = ref_in_set = calloc(h->n_cpus, 1);
                ref_pl.llc_w = ref_llc_w = calloc(h->n_llcs ? h->n_llcs : 1, sizeof(double));
                r = ref_ws_init(&R, &ref_ws);
                if (r < 0)
                        goto out;
        }
        if (cfg->check_binpack) {
                r = ref_ws_init(&R, &bp_ws);
                if (r < 0)
                        goto out;
                r = ref_ws_init(&R, &lag_ws);
                if (r < 0)
                        goto out;
                r = ref_ws_init(&R, &bpf_ws);
                if (r < 0)
                        goto out;
                res->binpack_fill = cfg->policy.level_headroom_pct / 100.0;
        }
        if (!bound_mw || (cfg->check_reference && (!ref_in_set || !ref_llc_w))) {
                r = -ENOMEM;
                goto out;
        }

        unsigned periods_per_interval = (unsigned) (tr->interval_ns / per);
        nsec_t step_periods = cfg->step_ns / per;
        double per_s = (double) per / 1e9, util_sum = 0;
        /* Each step's windows start at a seeded random period of the step, the same for every
         * policy: a load change at a trace interval's start is then observed in proportion to
         * the time it lasts, not in every window (at the step's first period, before the planner
         * had seen the new demand, every vmmpower window measured the transient) nor in none. */
        uint64_t obs_rng = rng_seed3(cfg->seed, 0x6f627376 /* "obsv" */, 0);
        uint64_t obs_next = splitmix64(&obs_rng) % (uint64_t) step_periods;

        for (unsigned k = 0; k < n_int; k++) {
                for (unsigned i = 0; i < R.nv; i++) {
                        unsigned vm = R.vm_of[i];
                        double d = sim_trace_vcpu_share(sim_trace_util(tr, vm, first + k), tr->vcpus[vm],
                                                        R.vidx[i], cfg->vcpu_balance);
                        d *= R.demand_scale;
                        R.demand[i] = d < 0 ? 0 : d > 1 ? 1 : d;
                        util_sum += R.demand[i];
                }
                /* bounds: from the demand alone */
                bound_mw[0] = sim_fluid_bound_mw(h, R.demand, R.nv);
                /* --check-binpack, one interval late: the last interval's packing (its packed CPUs
                 * and level) carrying this interval's demand, as a packer with no margin that
                 * re-packs once an interval on the last interval's demand would run it */
                if (cfg->check_binpack && prev_packed) {
                        r = lagged_binpack(&R, &bp_ws, &lag_ws, prev_level, k, &res->binpack_lag,
                                           (double) tr->interval_ns / 1e9);
                        if (r < 0)
                                goto out;
                }
                struct sim_binpack_placement bp = { .home = bp_ws.home, .work = bp_ws.work };
                r = sim_binpack_reference(h, R.demand, R.nv, &bound_mw[1], cfg->check_binpack ? &bp : NULL);
                if (r < 0)
                        goto out;
                if (cfg->check_binpack) { /* its placement simulated and charged as a policy */
                        double iv_s = (double) tr->interval_ns / 1e9;
                        r = binpack_window(&R, &bp_ws, bp.level, k, &res->binpack_placed, iv_s);
                        if (r < 0)
                                goto out;
                        /* the first interval (or one after nothing was packed): no packing before
                         * it, the late packing is this one */
                        if (!prev_packed) {
                                r = lagged_binpack(&R, &bp_ws, &lag_ws, bp.level, k, &res->binpack_lag, iv_s);
                                if (r < 0)
                                        goto out;
                        }
                        prev_level = bp.level;
                        prev_packed = false;
                        for (unsigned i = 0; i < R.nv && !prev_packed; i++)
                                prev_packed = bp_ws.home[i] >= 0;
                        /* the same packing within the level headroom: its energy, and its
                         * placement charged as a policy */
                        struct sim_binpack_placement bpf = { .home = bpf_ws.home, .work = bpf_ws.work };
                        double fill_mw;
                        r = sim_binpack_reference_fill(h, R.demand, R.nv, res->binpack_fill, &fill_mw, &bpf);
                        if (r < 0)
                                goto out;
                        res->binpack_fill_j += fill_mw / 1000.0 * iv_s;
                        r = binpack_window(&R, &bpf_ws, bpf.level, k, &res->binpack_fill_placed, iv_s);
                        if (r < 0)
                                goto out;
                }
                unsigned lb_cpus = 0;
                r = sim_latency_bound_mw(h, R.demand, R.nv, cfg->queue_budget, &bound_mw[2], &lb_cpus,
                                         cfg->check_reference ? &ref_pl : NULL);
                if (r < 0)
                        goto out;
                /* --check-reference: the bound's set at each budget, its placement simulated and
                 * charged as a placement of the run's vCPUs (of total demand W) */
                double W = 0;
                for (unsigned i = 0; i < R.nv; i++)
                        W += R.demand[i];
                for (unsigned j = 0; cfg->check_reference && j < SIM_N_REF; j++) {
                        struct sim_ref_result *rr = &res->ref_one[j];
                        double mw = bound_mw[2];
                        int ok = r;
                        if (j > 0) {
                                ok = sim_latency_bound_mw(h, R.demand, R.nv, rr->budget, &mw, NULL, &ref_pl);
                                if (ok < 0) {
                                        r = ok;
                                        goto out;
                                }
                        }
                        if (ok == 0) {
                                rr->infeasible++;
                                mw = bound_mw[0];
                        } else {
                                if (W > 0)
                                        mw = sim_ref_placement_mw(h, &ref_pl, R.nv, W);
                                if (!isfinite(mw)) {
                                        r = -ENOMEM;
                                        goto out;
                                }
                                int e = ref_window(&R, &ref_ws, &ref_pl, k, rr);
                                if (e < 0) {
                                        r = e;
                                        goto out;
                                }
                        }
                        rr->energy_j += mw / 1000.0 * (double) tr->interval_ns / 1e9;
                }
                if (r == 0) { /* no placement meets the budget: the fluid bound is a bound of every placement */
                        bound_mw[2] = bound_mw[0];
                        res->latbound_infeasible++;
                } else
                        res->latbound_cpus += lb_cpus;
                double llc_mw = 0;
                r = sim_latency_bound_llc_mw(h, R.demand, R.nv, cfg->queue_budget, &llc_mw, &lb_cpus,
                                             cfg->check_reference ? &ref_pl : NULL);
                if (r < 0)
                        goto out;
                int llc_ok = r;
                if (r == 0) {
                        llc_mw = bound_mw[0];
                        res->latbound_llc_infeasible++;
                } else
                        res->latbound_llc_cpus += lb_cpus;
                /* --check-reference: the reference at each budget, its placement simulated */
                for (unsigned j = 0; cfg->check_reference && j < SIM_N_REF; j++) {
                        struct sim_ref_result *rr = &res->ref[j];
                        double mw = llc_mw;
                        if (j > 0) {
                                r = sim_latency_bound_llc_mw(h, R.demand, R.nv, rr->budget, &mw, NULL, &ref_pl);
                                if (r < 0)
                                        goto out;
                                if (r == 0)
                                        mw = bound_mw[0];
                        } else
                                r = llc_ok; /* the budget itself: the placement of the call above */
                        if (r == 0)
                                rr->infeasible++;
                        else {
                                r = ref_window(&R, &ref_ws, &ref_pl, k, rr);
                                if (r < 0)
                                        goto out;
                        }
                        rr->energy_j += mw / 1000.0 * (double) tr->interval_ns / 1e9;
                }
                res->latbound_llc_j += llc_mw / 1000.0 * (double) tr->interval_ns / 1e9;
                res->p[SIM_LATBOUND].interval_w[k] = bound_mw[2] / 1000.0;
                res->p[SIM_LATBOUND].energy_j += bound_mw[2] / 1000.0 * (double) tr->interval_ns / 1e9;
                res->p[SIM_FLUID].interval_w[k] = bound_mw[0] / 1000.0;
                res->p[SIM_BINPACK_REF].interval_w[k] = bound_mw[1] / 1000.0;
                res->p[SIM_FLUID].energy_j += bound_mw[0] / 1000.0 * (double) tr->interval_ns / 1e9;
                res->p[SIM_BINPACK_REF].energy_j += bound_mw[1] / 1000.0 * (double) tr->interval_ns / 1e9;
                for (int p = 0; p < _SIM_RUN_MAX; p++)
                        R.ps[p].dirty = true;

                for (unsigned q = 0; q < periods_per_interval; q++, period_idx++, t += per) {
                        bool step = period_idx == obs_next;
                        if (step)
                                obs_next = (period_idx / (uint64_t) step_periods + 1) * (uint64_t) step_periods +
                                           splitmix64(&obs_rng) % (uint64_t) step_periods;

                        /* the tracker's view: decayed utilisation of the work that ran in the
                         * last period (record_ran(); before the first plan, the demand) */
                        for (unsigned i = 0; i < R.nv; i++) {
                                double ran = period_idx == 0 ? R.demand[i] : R.ps[SIM_VMM].ran[i];
                                R.samples[i].util_last = ran;
                                if (period_idx == 0)
                                        R.samples[i].util_avg = ran;
                                else
                                        R.samples[i].util_avg += alpha * (ran - R.samples[i].util_avg);
                        }
                        for (int p = SIM_B0; p < _SIM_RUN_MAX; p++)
                                if (step || (q == 0)) {
                                        r = baseline_step(&R, &R.ps[p], q == 0);
                                        if (r < 0)
                                                goto out;
                                }
                        if (step) {
                                for (int p = 0; p < _SIM_RUN_MAX; p++) {
                                        if (p == SIM_VMM && period_idx == 0)
                                                continue; /* nothing placed yet */
                                        r = window(&R, &R.ps[p], step_idx, NULL, true);
                                        if (r < 0)
                                                goto out;
                                }
                                if (period_idx > 0)
                                        update_wait_inputs(&R, &R.ps[SIM_VMM], NULL);
                                step_idx++;
                        }
                        if (step || q == 0) /* the kernel balances vmmpower's vCPUs pinned across LLCs */
                                res->p[SIM_VMM].migrations += kernel_balance(&R, &R.ps[SIM_VMM]);
                        r = vmm_period(&R, &R.ps[SIM_VMM], t, period_idx);
                        if (r < 0)
                                goto out;
                        if (period_idx == 0 && step) { /* first observation of the planner after its initial plan */
                                r = window(&R, &R.ps[SIM_VMM], step_idx - 1, NULL, true);
                                if (r < 0)
                                        goto out;
                                update_wait_inputs(&R, &R.ps[SIM_VMM], NULL);
                        }
                        for (int p = 0; p < _SIM_RUN_MAX; p++) {
                                struct pstate *ps = &R.ps[p];
                                if (ps->dirty)
                                        evaluate(&R, ps);
                                res->p[p].energy_j += ps->power_mw / 1000.0 * per_s;
                                res->p[p].interval_w[k] += ps->power_mw / 1000.0 / periods_per_interval;
                                res->p[p].overload_s += ps->overload * per_s;
                        }
                }
                if (cfg->progress) {
                        fprintf(stderr, "\rvmmpower-sim: interval %u/%u (%.0f%%), %.1f s", k + 1, n_int,
                                100.0 * (k + 1) / n_int, (double) (now_ns() - w0) / 1e9);
                        if (k + 1 == n_int)
                                fputc('\n', stderr);
                        fflush(stderr);
                }
        }
        if (n_int > res->latbound_infeasible)
                res->latbound_cpus /= n_int - res->latbound_infeasible;
        if (n_int > res->latbound_llc_infeasible)
                res->latbound_llc_cpus /= n_int - res->latbound_llc_infeasible;
        res->vcpu_hours = (double) R.nv * n_int * (double) tr->interval_ns / 3.6e12;
        res->mean_util = R.nv && n_int ? util_sum / ((double) R.nv * n_int) : 0;
        res->demand_cpu_s = util_sum * (double) tr->interval_ns / 1e9;
        res->undelivered_mw = sim_undelivered_mw(&h->model, h->n_cores);
        res->free_undelivered = cfg->free_undelivered;
        for (int p = 0; p < _SIM_RUN_MAX; p++) {
                res->p[p].undelivered_j = res->p[p].overload_s * res->undelivered_mw / 1000.0;
                if (!cfg->free_undelivered)
                        res->p[p].energy_j += res->p[p].undelivered_j;
        }
        if (!cfg->free_undelivered) { /* the placed bin-packing too, as a policy */
                res->binpack_placed.energy_j += res->binpack_placed.overload_s * res->undelivered_mw / 1000.0;
                res->binpack_lag.energy_j += res->binpack_lag.overload_s * res->undelivered_mw / 1000.0;
                res->binpack_fill_placed.energy_j += res->binpack_fill_placed.overload_s * res->undelivered_mw / 1000.0;
        }
        r = 0;
out:
        if (R.hints)
                sim_hint_replay_counts(R.hints, &res->hints_fed, &res->hints_actuating);
        sim_hint_replay_free(R.hints);
        ref_ws_free(&ref_ws);
        ref_ws_free(&bp_ws);
        ref_ws_free(&lag_ws);
        ref_ws_free(&bpf_ws);
        res->cpu_ns = process_cputime_ns() - c0;
        res->wall_ns = now_ns() - w0;
        for (int p = 0; p < _SIM_RUN_MAX; p++)
                pstate_free(&R.ps[p]);
        free(R.vm_of);
        free(R.pid);
        free(R.vidx);
        free(R.demand);
        free(R.samples);
        free(R.spread_rank);
        free(R.spread_order);
        free(R.lp_set);
        free(R.level_permille);
        free(R.core_mask);
        free(R.load);
        free(R.sibload);
        free(R.llc_tmp);
        free(R.knobs);
        plan_input_done(&R.plan_in);
        plan_input_done(&R.plan_scratch);
        plan_actions_done(&R.act);
        if (r < 0)
                sim_result_free(res);
        return r;
}
