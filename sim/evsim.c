/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Window event simulation (evsim.h has the model).  Indexed binary heap of
 * at most one pending event per vCPU (its next wake-up) and per CPU (its
 * next completion); a CPU's runnable vCPUs are advanced lazily, always both
 * threads of a core together so that the SMT speed factor is constant
 * between two updates.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "evsim.h"

#define DONE_EPS_NS 1e-3
/* Linux's sysctl_sched_migration_cost (kernel/sched/fair.c): newidle balancing is skipped on
 * a CPU whose average idle time is below it; avg_idle is capped at twice it (the kernel's
 * 2 x max_idle_balance_cost, which starts at this value) and starts there. */
#define MIGRATION_COST_NS 500e3

void wait_hist_add(struct wait_hist *w, double ns)
{
        w->n++;
        if (!(ns >= WAIT_HIST_MIN_NS)) {
                w->zero++;
                return;
        }
        int i = (int) (log10(ns / WAIT_HIST_MIN_NS) * WAIT_HIST_PER_DECADE);
        if (i >= WAIT_HIST_N)
                i = WAIT_HIST_N - 1;
        w->b[i]++;
}

double wait_hist_percentile(const struct wait_hist *w, double q)
{
        uint64_t rank, acc;

        if (w->n == 0)
                return 0;
        rank = (uint64_t) ceil(q * (double) w->n);
        if (rank < 1)
                rank = 1;
        acc = w->zero;
        if (acc >= rank)
                return 0;
        for (int i = 0; i < WAIT_HIST_N; i++) {
                acc += w->b[i];
                if (acc >= rank) /* geometric middle of the bucket */
                        return WAIT_HIST_MIN_NS * pow(10.0, (i + 0.5) / WAIT_HIST_PER_DECADE);
        }
        return WAIT_HIST_MIN_NS * pow(10.0, WAIT_HIST_DECADES);
}

struct ev_vcpu {
        double rem;          /* work left, ns at the top level */
        double ep_wait;      /* wait of the current episode */
        double ep_lat;       /* of which the idle exit latency paid at its wake-up */
        double total_wait;
        double last_wait;    /* of episodes that ended in the window's last period */
        double avg_wait;     /* decayed over the window's periods (ev_input.period_ns, half_life_ns) */
        double on_mean, off_mean;
        uint64_t rng;
        int cpu;             /* where it runs / ran last */
        bool runnable;
};

struct ev_cpu {
        unsigned n, alloc;
        unsigned *q;         /* runnable vCPUs */
        double last;
        double speed;        /* capacity / 1024 at its level */
        double idle_since;   /* when its run queue went empty (valid while n == 0) */
        double avg_idle;     /* the kernel's rq->avg_idle: mean idle time, 1/8 per sample */
        int core, sib;
};

struct ev_dom {
        unsigned busy_cores;
        double idle_since;
};

struct ev_hent {
        double key;
        unsigned id;
};

struct ev_ws {
        const struct em_host *h;
        unsigned nv, n_ids;
        struct ev_vcpu *v;
        struct ev_cpu *c;
        double *core_idle_since;   /* [n_cores], < 0 when busy */
        struct ev_dom *llc, *pkg, host;
        unsigned *llc_over;        /* [n_llcs] CPUs with 2 or more runnable vCPUs (newidle: anything to pull?) */
        /* heap: 4-ary, ordered by (time, id) — a total order, so the pop sequence does not
         * depend on the heap's shape; the time kept beside the id saves an indirection */
        struct ev_hent *heap;
        unsigned hn;
        int *pos;
        double *key;
        int deep_state;
        double gain;
        double T, P, alpha;        /* the window, its period, the decay per period (0: none) */
};

void ev_ws_free(struct ev_ws *w)
{
        if (!w)
                return;
        if (w->c)
                for (unsigned i = 0; i < w->h->n_cpus; i++)
                        free(w->c[i].q);
        free(w->v);
        free(w->c);
        free(w->core_idle_since);
        free(w->llc);
        free(w->pkg);
        free(w->llc_over);
        free(w->heap);
        free(w->pos);
        free(w->key);
        free(w);
}

int ev_ws_new(const struct em_host *h, unsigned nv, struct ev_ws **ret)
{
        struct ev_ws *w = calloc(1, sizeof(*w));

        if (!w)
                return -ENOMEM;
        w->h = h;
        w->nv = nv;
        w->n_ids = nv + h->n_cpus;
        w->v = calloc(nv ? nv : 1, sizeof(*w->v));
        w->c = calloc(h->n_cpus, sizeof(*w->c));
        w->core_idle_since = calloc(h->n_cores, sizeof(double));
        w->llc = calloc(h->n_llcs, sizeof(*w->llc));
        w->pkg = calloc(h->n_pkgs, sizeof(*w->pkg));
        w->llc_over = calloc(h->n_llcs ? h->n_llcs : 1, sizeof(unsigned));
        w->heap = calloc(w->n_ids, sizeof(*w->heap));
        w->pos = calloc(w->n_ids, sizeof(int));
        w->key = calloc(w->n_ids, sizeof(double));
        if (!w->v || !w->c || !w->core_idle_since || !w->llc || !w->pkg || !w->llc_over || !w->heap || !w->pos || !w->key) {
                ev_ws_free(w);
                return -ENOMEM;
        }
        for (unsigned i = 0; i < h->n_cpus; i++) {
                int core = h->cpu_core[i];
                w->c[i].core = core;
                w->c[i].sib = -1;
                if (core >= 0) {
                        const struct em_core *k = &h->cores[core];
                        if (k->n_threads == 2)
                                w->c[i].sib = k->cpu[0] == (int) i ? k->cpu[1] : k->cpu[0];
                }
        }
        w->deep_state = (int) h->model.n_idle - 1;
        w->gain = h->model.smt_gain_permille / 1000.0;
        *ret = w;
        return 0;
}

/* ---- heap ---- */

static bool hent_less(const struct ev_hent *a, const struct ev_hent *b)
{
        if (a->key != b->key)
                return a->key < b->key;
        return a->id < b->id;
}

static void heap_put(struct ev_ws *w, unsigned i, struct ev_hent e)
{
        w->heap[i] = e;
        w->pos[e.id] = (int) i;
}

/* Place e at the hole i, moving it up while it is less than its parent. */
static void heap_up(struct ev_ws *w, unsigned i, struct ev_hent e)
{
        while (i > 0) {
                unsigned p = (i - 1) / 4;
                if (!hent_less(&e, &w->heap[p]))
                        break;
                heap_put(w, i, w->heap[p]);
                i = p;
        }
        heap_put(w, i, e);
}

/* Place e at the hole i, moving it down while a child is less. */
static void heap_down(struct ev_ws *w, unsigned i, struct ev_hent e)
{
        for (;;) {
                unsigned c = 4 * i + 1, end = c + 4, m = c;
                if (c >= w->hn)
                        break;
                if (end > w->hn)
                        end = w->hn;
                for (unsigned k = c + 1; k < end; k++)
                        if (hent_less(&w->heap[k], &w->heap[m]))
                                m = k;
                if (!hent_less(&w->heap[m], &e))
                        break;
                heap_put(w, i, w->heap[m]);
                i = m;
        }
        heap_put(w, i, e);
}

/* Set the event time of id; INFINITY removes it. */
static void heap_set(struct ev_ws *w, unsigned id, double t)
{
        int p = w->pos[id];

        if (isinf(t)) {
                if (p < 0)
                        return;
                struct ev_hent last = w->heap[--w->hn];
                w->pos[id] = -1;
                if ((unsigned) p < w->hn) {
                        if (hent_less(&last, &w->heap[p]))
                                heap_up(w, (unsigned) p, last);
                        else
                                heap_down(w, (unsigned) p, last);
                }
                return;
        }
        w->key[id] = t;
        struct ev_hent e = { t, id };
        if (p < 0)
                heap_up(w, w->hn++, e);
        else if (hent_less(&e, &w->heap[p]))
                heap_up(w, (unsigned) p, e);
        else
                heap_down(w, (unsigned) p, e);
}

/* ---- CPUs ---- */

static double cpu_speed(const struct ev_ws *w, unsigned cpu)
{
        const struct ev_cpu *c = &w->c[cpu];
        if (c->sib >= 0 && w->c[c->sib].n > 0)
                return c->speed * w->gain / 2;
        return c->speed;
}

static void cpu_advance(struct ev_ws *w, unsigned cpu, double t)
{
        struct ev_cpu *c = &w->c[cpu];
        double dt = t - c->last;

        if (c->n > 0 && dt > 0) {
                double share = dt * cpu_speed(w, cpu) / c->n, wait = dt * (c->n - 1) / c->n;
                for (unsigned i = 0; i < c->n; i++) {
                        struct ev_vcpu *v = &w->v[c->q[i]];
                        v->rem -= share;
                        v->ep_wait += wait;
                }
        }
        c->last = t;
}

static void core_advance(struct ev_ws *w, unsigned cpu, double t)
{
        cpu_advance(w, cpu, t);
        if (w->c[cpu].sib >= 0)
                cpu_advance(w, (unsigned) w->c[cpu].sib, t);
}

static void cpu_schedule(struct ev_ws *w, unsigned cpu)
{
        const struct ev_cpu *c = &w->c[cpu];
        double min_rem = INFINITY;

        if (c->n == 0) {
                heap_set(w, w->nv + cpu, INFINITY);
                return;
        }
        for (unsigned i = 0; i < c->n; i++)
                if (w->v[c->q[i]].rem < min_rem)
                        min_rem = w->v[c->q[i]].rem;
        if (min_rem < 0)
                min_rem = 0;
        heap_set(w, w->nv + cpu, c->last + min_rem * c->n / cpu_speed(w, cpu));
}

static void core_schedule(struct ev_ws *w, unsigned cpu)
{
        cpu_schedule(w, cpu);
        if (w->c[cpu].sib >= 0)
                cpu_schedule(w, (unsigned) w->c[cpu].sib);
}

static bool core_idle(const struct ev_ws *w, unsigned cpu)
{
        const struct ev_cpu *c = &w->c[cpu];
        return c->n == 0 && (c->sib < 0 || w->c[c->sib].n == 0);
}

static int cpu_push(struct ev_ws *w, unsigned cpu, unsigned v)
{
        struct ev_cpu *c = &w->c[cpu];
        if (c->n == c->alloc) {
                unsigned na = c->alloc ? c->alloc * 2 : 4;
                unsigned *q = realloc(c->q, na * sizeof(*q));
                if (!q)
                        return -ENOMEM;
                c->q = q;
                c->alloc = na;
        }
        c->q[c->n++] = v;
        if (c->n == 2)
                w->llc_over[w->h->cores[c->core].llc]++;
        return 0;
}

/* Bookkeeping after a vCPU left cpu's queue. */
static void cpu_popped(struct ev_ws *w, unsigned cpu)
{
        const struct ev_cpu *c = &w->c[cpu];
        if (c->n == 1)
                w->llc_over[w->h->cores[c->core].llc]--;
}

/*
 * Exit latency paid by a wake-up at t onto the idle core of cpu (ns); *deep set when deep;
 * *energy_uj += the wake-up energy of the state and of the domains it woke from.
 */
static double wake_latency(struct ev_ws *w, const struct ev_input *in, unsigned cpu, double t, bool *deep,
                           double *energy_uj)
{
        const struct em_host *h = w->h;
        const struct energy_model *m = &h->model;
        unsigned core = (unsigned) w->c[cpu].core;
        uint32_t lim = in->cpu_max_latency_us[cpu];
        double gap_us = (t - w->core_idle_since[core]) / 1000.0, lat = 0;
        int s = -1;

        if (w->c[cpu].sib >= 0 && in->cpu_max_latency_us[w->c[cpu].sib] < lim)
                lim = in->cpu_max_latency_us[w->c[cpu].sib];
        for (unsigned i = 0; i < m->n_idle; i++)
                if (m->idle[i].target_residency_us <= gap_us && m->idle[i].exit_latency_us <= lim)
                        s = (int) i;
        if (s < 0)
                return 0;
        lat = m->idle[s].exit_latency_us;
        *energy_uj += m->idle[s].wake_energy_uj;
        if (s == w->deep_state && m->n_idle > 1)
                *deep = true;
        if (s != w->deep_state)
                return lat * 1000.0;
        /* domains: all their cores idle (so at least as long as this one) */
        const struct em_core *k = &h->cores[core];
        for (int d = 0; d < _EM_DOMAIN_MAX; d++) {
                const struct em_idle_domain *dom = &m->domain[d];
                struct ev_dom *st;
                if (!dom->present || dom->exit_latency_us > lim)
                        continue;
                if (d == EM_DOMAIN_LLC)
                        st = &w->llc[k->llc];
                else
                        st = m->package_idle_all_packages ? &w->host : &w->pkg[k->pkg];
                if (st->busy_cores == 0 && (t - st->idle_since) / 1000.0 >= dom->target_residency_us) {
                        if (dom->exit_latency_us > lat)
                                lat = dom->exit_latency_us;
                        *energy_uj += dom->wake_energy_uj;
                        *deep = true;
                }
        }
        return lat * 1000.0;
}

static void core_busy_change(struct ev_ws *w, unsigned core, bool busy, double t)
{
        const struct em_core *k = &w->h->cores[core];
        struct ev_dom *d[3] = { &w->llc[k->llc], &w->pkg[k->pkg], &w->host };

        w->core_idle_since[core] = busy ? -1 : t;
        for (int i = 0; i < 3; i++) {
                if (busy) {
                        d[i]->busy_cores++;
                } else {
                        d[i]->busy_cores--;
                        if (d[i]->busy_cores == 0)
                                d[i]->idle_since = t;
                }
        }
}

static bool cpu_allowed(const struct ev_input *in, int cpu)
{
        return !in->allowed || in->allowed[cpu];
}

/* select_idle_sibling-like choice for a waking vCPU last on prev. */
static int wake_cpu(struct ev_ws *w, const struct ev_input *in, int prev)
{
        const struct em_host *h = w->h;
        const struct em_group *g;
        int idle_thread = -1;

        if (w->c[prev].n == 0 && cpu_allowed(in, prev))
                return prev;
        g = &h->llcs[h->cores[w->c[prev].core].llc];
        for (unsigned k = g->first; k < g->end; k++) {
                const struct em_core *c = &h->cores[k];
                for (unsigned t = 0; t < c->n_threads; t++) {
                        int cpu = c->cpu[t];
                        if (!cpu_allowed(in, cpu) || w->c[cpu].n > 0)
                                continue;
                        if (core_idle(w, (unsigned) cpu))
                                return cpu;
                        if (idle_thread < 0)
                                idle_thread = cpu;
                }
        }
        if (idle_thread >= 0)
                return idle_thread;
        if (cpu_allowed(in, prev))
                return prev;
        /* its CPU is no longer its to use (the kernel's select_fallback_rq()): the allowed CPU
         * of the LLC with the fewest runnable vCPUs, the lowest-numbered on a tie */
        int best = -1;
        for (unsigned k = g->first; k < g->end; k++)
                for (unsigned t = 0; t < h->cores[k].n_threads; t++) {
                        int cpu = h->cores[k].cpu[t];
                        if (cpu_allowed(in, cpu) && (best < 0 || w->c[cpu].n < w->c[best].n ||
                                                     (w->c[cpu].n == w->c[best].n && cpu < best)))
                                best = cpu;
                }
        return best;
}

static int vcpu_wake(struct ev_ws *w, const struct ev_input *in, struct ev_output *out, unsigned id, double t,
                     double work)
{
        struct ev_vcpu *v = &w->v[id];
        int cpu;
        bool deep = false;

        if (v->runnable) {
                core_advance(w, (unsigned) v->cpu, t);
                v->rem += work;
                core_schedule(w, (unsigned) v->cpu);
                return 0;
        }
        cpu = v->cpu;
        if (in->wake_balance && !(in->pinned && in->pinned[id])) {
                int c = wake_cpu(w, in, v->cpu);
                if (c >= 0 && c != v->cpu) {
                        cpu = c;
                        out->migrations++;
                }
        }
        core_advance(w, (unsigned) cpu, t);
        if (w->c[cpu].n == 0) {
                /* ttwu_do_activate(): the CPU's idle time so far is a sample of avg_idle */
                struct ev_cpu *c = &w->c[cpu];
                c->avg_idle += (t - c->idle_since - c->avg_idle) / 8.0;
                if (c->avg_idle > 2.0 * MIGRATION_COST_NS)
                        c->avg_idle = 2.0 * MIGRATION_COST_NS;
        }
        out->wakeups++;
        if (w->c[cpu].n > 0)
                out->queued_wakeups++; /* no idle CPU it may run on: it queues */
        v->ep_wait = 0;
        v->ep_lat = 0;
        if (core_idle(w, (unsigned) cpu)) {
                v->ep_wait = v->ep_lat = wake_latency(w, in, (unsigned) cpu, t, &deep, &out->wake_energy_uj);
                if (deep)
                        out->deep_wakeups++;
                core_busy_change(w, (unsigned) w->c[cpu].core, true, t);
        }
        v->cpu = cpu;
        v->runnable = true;
        v->rem = work;
        if (cpu_push(w, (unsigned) cpu, id) < 0)
                return -ENOMEM;
        core_schedule(w, (unsigned) cpu);
        return 0;
}

static void episode_end(struct ev_ws *w, struct ev_output *out, unsigned id, double t)
{
        struct ev_vcpu *v = &w->v[id];
        /* the planner's input is run-queue wait as schedstat counts it: without the exit latency */
        double wait = v->ep_wait - v->ep_lat;
        v->total_wait += wait;
        if (w->P > 0.0) {
                /* counted in the period it ended in, k periods before the window's end */
                double k = floor((w->T - t) / w->P);
                if (k <= 0.0)
                        v->last_wait += wait;
                if (w->alpha > 0.0)
                        v->avg_wait += wait * pow(1.0 - w->alpha, fmax(k, 0.0));
        }
        if (out->hist)
                wait_hist_add(out->hist, v->ep_wait);
        v->runnable = false;
        v->ep_wait = 0;
        v->ep_lat = 0;
}

/*
 * Newidle balancing (the kernel's newidle_balance()/sched_balance_newidle(), run when a
 * CPU's run queue goes empty): unless the CPU's avg_idle is below the migration cost, it
 * pulls a runnable vCPU that is waiting on the busiest allowed CPU of its LLC (the one
 * with most runnable vCPUs, at least 2; the lowest-numbered on a tie) — the vCPU queued
 * last there, unless pinned.  A pull is a migration.  1 if it pulled, 0 if not, or -ENOMEM.
 */
static int newidle_pull(struct ev_ws *w, const struct ev_input *in, struct ev_output *out, unsigned cpu, double t)
{
        const struct em_host *h = w->h;
        unsigned llc = h->cores[w->c[cpu].core].llc;
        const struct em_group *g = &h->llcs[llc];
        int src = -1;

        if (!in->wake_balance || !cpu_allowed(in, (int) cpu) || w->c[cpu].avg_idle < MIGRATION_COST_NS ||
            w->llc_over[llc] == 0)
                return 0;
        for (unsigned k = g->first; k < g->end; k++)
                for (unsigned th = 0; th < h->cores[k].n_threads; th++) {
                        int c = h->cores[k].cpu[th];
                        if (c == (int) cpu || !cpu_allowed(in, c) || w->c[c].n < 2)
                                continue;
                        if (src < 0 || w->c[c].n > w->c[src].n || (w->c[c].n == w->c[src].n && c < src))
                                src = c;
                }
        if (src < 0)
                return 0;
        struct ev_cpu *s = &w->c[src];
        for (unsigned j = s->n; j-- > 0;) {
                unsigned id = s->q[j];
                if (in->pinned && in->pinned[id])
                        continue;
                core_advance(w, (unsigned) src, t);
                core_advance(w, cpu, t);
                memmove(&s->q[j], &s->q[j + 1], (s->n - j - 1) * sizeof(*s->q));
                s->n--;
                cpu_popped(w, (unsigned) src);
                if (core_idle(w, cpu))
                        core_busy_change(w, (unsigned) w->c[cpu].core, true, t);
                if (cpu_push(w, cpu, id) < 0)
                        return -ENOMEM;
                w->v[id].cpu = (int) cpu;
                out->migrations++;
                out->idle_pulls++;
                core_schedule(w, (unsigned) src);
                core_schedule(w, cpu);
                return 1;
        }
        return 0;
}

static int cpu_complete(struct ev_ws *w, const struct ev_input *in, struct ev_output *out, unsigned cpu, double t)
{
        struct ev_cpu *c = &w->c[cpu];
        bool was_busy = !core_idle(w, cpu);
        int r;

        core_advance(w, cpu, t);
        for (unsigned i = 0; i < c->n;) {
                struct ev_vcpu *v = &w->v[c->q[i]];
                if (v->rem <= DONE_EPS_NS) {
                        episode_end(w, out, c->q[i], t);
                        c->q[i] = c->q[--c->n];
                        cpu_popped(w, cpu);
                } else
                        i++;
        }
        if (c->n == 0) {
                c->idle_since = t;
                if (was_busy && core_idle(w, cpu))
                        core_busy_change(w, (unsigned) c->core, false, t);
                r = newidle_pull(w, in, out, cpu, t);
                if (r != 0)
                        return r < 0 ? r : 0; /* pulled: newidle_pull scheduled this core */
        }
        core_schedule(w, cpu);
        return 0;
}

int ev_run(struct ev_ws *w, const struct ev_input *in, struct ev_output *out)
{
        const struct em_host *h = w->h;
        double T = in->window_ns;
        int r = 0;

        if (in->nv != w->nv)
                return -EINVAL;
        w->T = T;
        w->P = in->period_ns > 0.0 && in->period_ns <= T ? in->period_ns : 0.0;
        w->alpha = w->P > 0.0 && in->half_life_ns > 0.0 ? 1.0 - exp2(-w->P / in->half_life_ns) : 0.0;
        w->hn = 0;
        for (unsigned i = 0; i < w->n_ids; i++)
                w->pos[i] = -1;
        for (unsigned i = 0; i < h->n_cpus; i++) {
                int core = h->cpu_core[i];
                w->c[i].n = 0;
                w->c[i].last = 0;
                w->c[i].idle_since = -1e18;
                w->c[i].avg_idle = 2.0 * MIGRATION_COST_NS;
                w->c[i].speed = core >= 0 ? em_capacity(&h->model, in->fdom_level[h->cpu_fdom[i]]) / 1024.0 : 0;
        }
        for (unsigned k = 0; k < h->n_cores; k++)
                w->core_idle_since[k] = -1e18; /* idle "forever": the window starts in steady state */
        for (unsigned k = 0; k < h->n_llcs; k++) {
                w->llc[k] = (struct ev_dom) { 0, -1e18 };
                w->llc_over[k] = 0;
        }
        for (unsigned k = 0; k < h->n_pkgs; k++)
                w->pkg[k] = (struct ev_dom) { 0, -1e18 };
        w->host = (struct ev_dom) { 0, -1e18 };

        for (unsigned i = 0; i < w->nv; i++) {
                struct ev_vcpu *v = &w->v[i];
                int home = in->home[i];

                *v = (struct ev_vcpu) { .cpu = home };
                if (home < 0 || (unsigned) home >= h->n_cpus || h->cpu_core[home] < 0 ||
                    (in->core_mask && !in->core_mask[h->cpu_core[home]]) || in->demand[i] <= 0)
                        continue;
                v->rng = rng_seed3(in->seed, i, in->window_id);
                burst_means(&in->burst, in->demand[i], &v->on_mean, &v->off_mean);
                /* stationary start: on with probability m */
                if (rng_unit(&v->rng) <= in->demand[i])
                        heap_set(w, i, 0);
                else
                        heap_set(w, i, burst_draw(&v->rng, in->burst.dist, v->off_mean) * rng_unit(&v->rng));
        }
        while (w->hn > 0) {
                unsigned id = w->heap[0].id;
                double t = w->heap[0].key;

                if (t >= T)
                        break;
                out->events++;
                if (id < w->nv) {
                        struct ev_vcpu *v = &w->v[id];
                        double on = burst_draw(&v->rng, in->burst.dist, v->on_mean);
                        double off = burst_draw(&v->rng, in->burst.dist, v->off_mean);
                        heap_set(w, id, t + on + off);
                        r = vcpu_wake(w, in, out, id, t, on);
                        if (r < 0)
                                return r;
                } else {
                        r = cpu_complete(w, in, out, id - w->nv, t);
                        if (r < 0)
                                return r;
                }
        }
        /* close the window: wait so far of episodes still open */
        for (unsigned i = 0; i < h->n_cpus; i++)
                if (w->c[i].n > 0)
                        cpu_advance(w, i, T);
        for (unsigned i = 0; i < h->n_cpus; i++)
                while (w->c[i].n > 0)
                        episode_end(w, out, w->c[i].q[--w->c[i].n], T);
        /* the decay's weights over the window's whole periods: alpha (1 - alpha)^k, k < K */
        double K = w->P > 0.0 ? floor(T / w->P) : 0.0;
        double norm = w->alpha > 0.0 ? 1.0 - pow(1.0 - w->alpha, K) : 0.0;
        for (unsigned i = 0; i < w->nv; i++) {
                if (in->home[i] < 0 || in->home[i] >= (int) h->n_cpus || h->cpu_core[in->home[i]] < 0 ||
                    (in->core_mask && !in->core_mask[h->cpu_core[in->home[i]]]))
                        continue; /* not simulated in this window */
                if (out->vcpu_wait_ns)
                        out->vcpu_wait_ns[i] = w->v[i].total_wait;
                if (out->vcpu_wait_last && out->vcpu_wait_avg) {
                        /* a window shorter than a period samples the last one */
                        out->vcpu_wait_last[i] = w->P > 0.0 ? w->v[i].last_wait / w->P : w->v[i].total_wait / T;
                        out->vcpu_wait_avg[i] = norm > 0.0 ? w->alpha * w->v[i].avg_wait / w->P / norm
                                                           : out->vcpu_wait_last[i];
                }
        }
        return 0;
}
