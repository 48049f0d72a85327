/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The latency-constrained bound (docs/simulator.md §5, "Latency-constrained bound"): per trace
 * interval, the least modelled energy of a placement whose predicted queueing probability, Erlang
 * C with the interval's demand known exactly, is within the queueing budget.
 *
 * Terms: W the interval's total demand (top-level CPUs), C_L / 1024 one CPU's capacity at level L,
 * A_L = W / (C_L / 1024) the offered load in CPUs of level L, c a pack set's size in CPUs, ε the
 * budget (share of the wake-ups allowed to find every CPU of their set busy), g SmtGain (a core's
 * capacity with both threads busy, in threads), U(S) a set S's capacity in threads: 1 for each
 * core with one thread in S, g for each core with both.
 *
 * The prediction: the set's c threads are c servers of the mean capacity U(S) / c of a thread's,
 * so P = ErlangC(c, A_L c / U(S)).  Where both threads of a core are in the set, they are two
 * servers of g / 2 of a thread each, as the planner's wait model has them (placement.c L1): run
 * through the burst simulation, which slows a core's two busy threads to g / 2 each, a set sized
 * with every thread a whole server queued 37% of its wake-ups against the 1% it was sized for
 * (Genoa 2:1, pl-20110303, 2 ms; 0.76% with U(S); docs/simulator.md §5).  The mean over the
 * set's cores is the optimistic side of the planner's (which takes g / 2 for every thread of an
 * SMT-first set): a bound may not ask more of a placement than the planner does.
 *
 * Steps, per level L:
 *  1. c_L = the least c with ErlangC(c, A_L) <= ε (sim_erlang_servers(); U(S) <= c, so no smaller
 *     set meets the budget); none when c_L > the online CPUs: the level cannot meet the budget.
 *  2. for every size c from c_L to all online CPUs whose set meets the budget with U(S), and for
 *     three orders of the CPUs (SMT-first: both threads of a core before the next core;
 *     cores-first: thread 0 of every core of an LLC before any sibling; host cores-first: thread 0
 *     of every core of the host before any sibling, the set of c CPUs with the most capacity,
 *     U(S) = c, while c is at most the cores), the set = the first c CPUs of the order, each carrying W / c (the
 *     water level: a work-conserving set, as the simulator evaluates vmmpower's pack sets), level
 *     L on the frequency domains it uses and the lowest level on the others, no wake-ups counted
 *     and no idle limit (as the bin-packing reference), evaluated by em_host_power();
 *  3. a placement whose thread or 2-thread core carries more than it can deliver (W / c above a
 *     thread's capacity, 2 W / c above SmtGain x it), or that the turbo table or the power limit
 *     caps below L, is not one (its work would not all run).
 * The bound is the least power of every placement of step 2 that step 3 keeps.  One set for the
 * whole host is searched because it needs the fewest CPUs: Erlang C pools (sets of A_1 and A_2
 * each within ε need at least as many CPUs in all as one set of A_1 + A_2), and every larger size
 * is searched too, so a placement that spreads wider to let domains sleep less is not missed.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

double sim_erlang_c(unsigned c, double a)
{
        double b = 1.0; /* Erlang B by the recursion B(k) = a B(k-1) / (k + a B(k-1)), stable for large c */

        if (!(a > 0.0))
                return 0.0;
        if (a >= (double) c)
                return 1.0;
        for (unsigned k = 1; k <= c; k++)
                b = a * b / ((double) k + a * b);
        return (double) c * b / ((double) c - a * (1.0 - b));
}

unsigned sim_erlang_servers(double a, double budget, unsigned max_c)
{
        if (!(a > 0.0))
                return 0;
        for (unsigned c = (unsigned) floor(a) + 1; c <= max_c; c++)
                if (sim_erlang_c(c, a) <= budget)
                        return c;
        return max_c + 1;
}

/*
 * The power of a placement (work per CPU, level L on the domains in lvl), NAN when it is not one
 * of the bound's: a 2-thread core carries more than SmtGain x a thread at L, or the turbo table
 * or the power limit caps it below L.
 */
static double placed_power(const struct em_host *h, unsigned L, double *work, uint8_t *lvl, const uint8_t *zero,
                           const uint32_t *lat)
{
        const struct energy_model *m = &h->model;
        double cap = m->levels[L].capacity / 1024.0, g = m->smt_gain_permille / 1000.0;
        struct em_breakdown br;

        for (unsigned k = 0; k < h->n_cores; k++) {
                const struct em_core *co = &h->cores[k];
                double sum = 0;
                for (unsigned t = 0; t < co->n_threads; t++)
                        sum += work[co->cpu[t]];
                if (co->n_threads > 1 && sum > cap * g + 1e-12)
                        return NAN;
        }
        struct em_load l = { .cpu_work = work, .cpu_vcpus = zero, .cpu_max_latency_us = lat, .fdom_level = lvl };
        double p = em_host_power(h, &l, &br);
        if (br.capped_pkgs > 0 && br.capped_level < L)
                return NAN;
        return p;
}

/*
 * units[j] = U(the first j CPUs of order), j = 0 .. n_online: the set's capacity in threads (1 for
 * a core with one of them, SmtGain for a core with two or more).  A run of the order inside one
 * LLC (a core's threads are in one LLC) has U = units[end] - units[start].
 */
static void order_units(const struct em_host *h, const int *order, double *units, uint8_t *seen)
{
        double g = h->model.smt_gain_permille / 1000.0;

        memset(seen, 0, h->n_cores);
        units[0] = 0;
        for (unsigned j = 0; j < h->n_online; j++) {
                unsigned k = h->cpu_core[order[j]], n = ++seen[k];
                units[j + 1] = units[j] + (n == 1 ? 1.0 : n == 2 ? g - 1.0 : 0.0);
        }
}

/* Does a set of c CPUs with capacity u threads carry offered load a (CPUs of the level) within budget? */
static bool set_meets(unsigned c, double u, double a, double budget)
{
        return c > 0 && u > 0 && sim_erlang_c(c, a * (double) c / u) <= budget;
}

/* The least c in [from, len] whose run units[start .. start + c] meets budget with load a; len + 1 when none. */
static unsigned run_servers(const double *units, unsigned start, unsigned len, unsigned from, double a,
                            double budget)
{
        for (unsigned c = from ? from : 1; c <= len; c++)
                if (set_meets(c, units[start + c] - units[start], a, budget))
                        return c;
        return len + 1;
}

/* Power of W spread evenly on the first c CPUs of order at level L (NAN: not a placement of the bound). */
static double set_power(const struct em_host *h, const int *order, unsigned c, unsigned L, double W, double *work,
                        uint8_t *lvl, const uint8_t *zero, const uint32_t *lat)
{
        const struct energy_model *m = &h->model;
        double cap = m->levels[L].capacity / 1024.0, x = W / c;

        if (x > cap + 1e-12)
                return NAN;
        memset(work, 0, h->n_cpus * sizeof(double));
        memset(lvl, 0, h->n_fdoms);
        for (unsigned j = 0; j < c; j++) {
                work[order[j]] = x;
                lvl[h->cpu_fdom[order[j]]] = (uint8_t) L;
        }
        return placed_power(h, L, work, lvl, zero, lat);
}

/* The bound's CPU orders: SMT-first, cores-first by LLC, cores-first over the host. */
#define N_ORDERS 3

/* Record the one set of the first c CPUs of order, W spread evenly at level L, as a placement (ret_pl). */
static void record_set(const struct em_host *h, const int *order, unsigned c, unsigned L, double W,
                       struct sim_ref_placement *pl)
{
        memset(pl->in_set, 0, h->n_cpus);
        for (unsigned g = 0; g < h->n_llcs; g++)
                pl->llc_w[g] = 0.0;
        pl->level = L;
        for (unsigned j = 0; j < c; j++) {
                pl->in_set[order[j]] = 1;
                pl->llc_w[h->cores[h->cpu_core[order[j]]].llc] += W / c;
        }
}

int sim_latency_bound_mw(const struct em_host *h, const double *demand, unsigned nv, double budget, double *ret_mw,
                         unsigned *ret_cpus, struct sim_ref_placement *ret_pl)
{
        const struct energy_model *m = &h->model;
        _cleanup_free_ double *work = calloc(h->n_cpus, sizeof(double));
        _cleanup_free_ uint8_t *zero = calloc(h->n_cpus, 1);
        _cleanup_free_ uint32_t *lat = calloc(h->n_cpus, sizeof(uint32_t));
        _cleanup_free_ uint8_t *lvl = calloc(h->n_fdoms, 1);
        _cleanup_free_ double *units = calloc(N_ORDERS * (h->n_online + 1), sizeof(double));
        _cleanup_free_ uint8_t *seen = calloc(h->n_cores ? h->n_cores : 1, 1);
        _cleanup_free_ int *host_cores_first = calloc(h->n_online ? h->n_online : 1, sizeof(int));
        const int *orders[N_ORDERS] = { h->order_smt_first, h->order_cores_first, host_cores_first };
        double W = 0, dmax = 0, best = INFINITY;
        unsigned best_c = 0, best_L = 0, best_o = 0, n = 0;

        if (!work || !zero || !lat || !lvl || !units || !seen || !host_cores_first)
                return -ENOMEM;
        /* thread 0 of every core of the host (package by package, LLC by LLC), then the siblings */
        for (unsigned th = 0; th < 2; th++)
                for (unsigned k = 0; k < h->n_cores; k++)
                        if (th < h->cores[k].n_threads && n < h->n_online)
                                host_cores_first[n++] = h->cores[k].cpu[th];
        if (ret_pl) /* no set until one is found */
                record_set(h, orders[0], 0, 0, 0.0, ret_pl);
        for (unsigned o = 0; o < N_ORDERS; o++)
                order_units(h, orders[o], units + o * (h->n_online + 1), seen);
        for (unsigned c = 0; c < h->n_cpus; c++)
                lat[c] = EM_LATENCY_ANY;
        for (unsigned i = 0; i < nv; i++) {
                W += demand[i] > 0 ? demand[i] : 0;
                dmax = fmax(dmax, demand[i]);
        }
        if (W <= 0) { /* nothing to run: the idle host */
                struct em_load l = { .cpu_work = work, .cpu_vcpus = zero, .cpu_max_latency_us = lat, .fdom_level = lvl };
                *ret_mw = em_host_power(h, &l, NULL);
                if (ret_cpus)
                        *ret_cpus = 0;
                return 1;
        }
        for (unsigned L = 0; L < m->n_levels; L++) {
                double cap = m->levels[L].capacity / 1024.0;
                if (cap <= 0 || dmax > cap + 1e-12)
                        continue; /* a vCPU this level cannot run */
                unsigned c0 = sim_erlang_servers(W / cap, budget, h->n_online);
                for (unsigned c = c0; c <= h->n_online; c++)
                        for (unsigned o = 0; o < N_ORDERS; o++) {
                                if (!set_meets(c, units[o * (h->n_online + 1) + c], W / cap, budget))
                                        continue;
                                double p = set_power(h, orders[o], c, L, W, work, lvl, zero, lat);
                                if (p < best) {
                                        best = p;
                                        best_c = c;
                                        best_L = L;
                                        best_o = o;
                                }
                        }
        }
        if (ret_pl && isfinite(best))
                record_set(h, orders[best_o], best_c, best_L, W, ret_pl);
        if (ret_cpus)
                *ret_cpus = best_c;
        *ret_mw = best;
        return isfinite(best) ? 1 : 0;
}

/* ---- the same with sets that stay within an LLC ---- */

/* The largest offered load (CPUs) n servers of capacity u threads in all carry within budget (bisection). */
static double erlang_max_load(unsigned n, double u, double budget)
{
        double lo = 0, hi = u;

        for (int it = 0; it < 60; it++) {
                double mid = (lo + hi) / 2;
                if (set_meets(n, u, mid, budget))
                        lo = mid;
                else
                        hi = mid;
        }
        return lo;
}

/* A CPU's count of the nv vCPUs of total demand W when it carries x of it: nv x / W, at least one. */
static uint8_t cpu_vcpu_share(unsigned nv, double x, double W)
{
        double n = W > 0 ? nv * x / W : 0;

        return (uint8_t) (n < 1.0 ? 1.0 : n > 255.0 ? 255.0 : floor(n + 0.5));
}

/*
 * Power of the per-LLC sets: the first c[g] CPUs of LLC segment g of order (seg_start[g],
 * seg_len[g]) carry w[g] evenly, level L where used (NAN: not a placement of the reference).
 * Unlike the bound, the reference is a placement of the run's nv vCPUs (W their demand) and is
 * charged as the policies are: each CPU of a set counts its share of them, nv w[g] / W / c[g]
 * (at least one), in the model's idle gaps and wake-ups (cpu_vcpus).  Counted as none (the
 * bound's optimism), every idle gap of its CPUs and LLCs was long enough to sleep in, which no
 * placement of vCPUs that wake gets: 0.8 point of B0's energy on Genoa 2:1 pl-20110303 2 ms.
 */
static double llc_sets_power(const struct em_host *h, const int *order, const unsigned *seg_start, unsigned n_seg,
                             const unsigned *c, const double *w, unsigned L, unsigned nv, double W, double *work,
                             uint8_t *lvl, uint8_t *cnt, const uint32_t *lat)
{
        const struct energy_model *m = &h->model;
        double cap = m->levels[L].capacity / 1024.0;

        memset(work, 0, h->n_cpus * sizeof(double));
        memset(lvl, 0, h->n_fdoms);
        memset(cnt, 0, h->n_cpus);
        for (unsigned s = 0; s < n_seg; s++) {
                if (c[s] == 0)
                        continue;
                double x = w[s] / c[s];
                if (x > cap + 1e-12)
                        return NAN;
                for (unsigned j = 0; j < c[s]; j++) {
                        int cpu = order[seg_start[s] + j];
                        work[cpu] = x;
                        cnt[cpu] = cpu_vcpu_share(nv, x, W);
                        lvl[h->cpu_fdom[cpu]] = (uint8_t) L;
                }
        }
        return placed_power(h, L, work, lvl, cnt, lat);
}

/* Record the per-LLC sets c[] (demand w[]) of order's segments at level L as the best placement. */
static void record_placement(const struct em_host *h, const int *order, const unsigned *seg_start, unsigned n_seg,
                             const unsigned *c, const double *w, unsigned L, struct sim_ref_placement *pl)
{
        if (!pl)
                return;
        pl->level = L;
        memset(pl->in_set, 0, h->n_cpus);
        for (unsigned g = 0; g < h->n_llcs; g++)
                pl->llc_w[g] = 0.0;
        for (unsigned s = 0; s < n_seg; s++) {
                if (c[s] == 0)
                        continue;
                pl->llc_w[h->cores[h->cpu_core[order[seg_start[s]]]].llc] += w[s];
                for (unsigned j = 0; j < c[s]; j++)
                        pl->in_set[order[seg_start[s] + j]] = 1;
        }
}

double sim_ref_placement_mw(const struct em_host *h, const struct sim_ref_placement *pl, unsigned nv, double W)
{
        _cleanup_free_ double *work = calloc(h->n_cpus, sizeof(double));
        _cleanup_free_ uint8_t *cnt = calloc(h->n_cpus, 1);
        _cleanup_free_ uint32_t *lat = calloc(h->n_cpus, sizeof(uint32_t));
        _cleanup_free_ uint8_t *lvl = calloc(h->n_fdoms ? h->n_fdoms : 1, 1);
        _cleanup_free_ unsigned *per = calloc(h->n_llcs ? h->n_llcs : 1, sizeof(unsigned));

        if (!work || !cnt || !lat || !lvl || !per)
                return NAN;
        for (unsigned c = 0; c < h->n_cpus; c++) {
                lat[c] = EM_LATENCY_ANY;
                per[h->cores[h->cpu_core[c]].llc] += pl->in_set[c];
        }
        for (unsigned c = 0; c < h->n_cpus; c++) {
                if (!pl->in_set[c])
                        continue;
                unsigned g = h->cores[h->cpu_core[c]].llc;
                work[c] = pl->llc_w[g] / per[g];
                cnt[c] = cpu_vcpu_share(nv, work[c], W);
                lvl[h->cpu_fdom[c]] = (uint8_t) pl->level;
        }
        struct em_load l = { .cpu_work = work, .cpu_vcpus = cnt, .cpu_max_latency_us = lat, .fdom_level = lvl };
        return em_host_power(h, &l, NULL);
}

void sim_ref_homes(const struct em_host *h, const struct sim_ref_placement *pl, const double *demand, unsigned nv,
                   int *home)
{
        _cleanup_free_ unsigned *idx = malloc((nv ? nv : 1) * sizeof(unsigned));
        _cleanup_free_ double *left = calloc(h->n_llcs ? h->n_llcs : 1, sizeof(double));
        _cleanup_free_ double *load = calloc(h->n_cpus, sizeof(double));
        _cleanup_free_ uint8_t *has_set = calloc(h->n_llcs ? h->n_llcs : 1, 1);

        for (unsigned i = 0; i < nv; i++)
                home[i] = -1;
        if (!idx || !left || !load || !has_set)
                return;
        for (unsigned g = 0; g < h->n_llcs; g++)
                left[g] = pl->llc_w[g];
        for (unsigned c = 0; c < h->n_cpus; c++)
                if (pl->in_set[c])
                        has_set[h->cores[h->cpu_core[c]].llc] = 1;
        for (unsigned i = 0; i < nv; i++)
                idx[i] = i;
        /* largest first (insertion sort: nv is a host's vCPUs) */
        for (unsigned a = 1; a < nv; a++) {
                unsigned x = idx[a], b = a;
                for (; b > 0 && demand[idx[b - 1]] < demand[x]; b--)
                        idx[b] = idx[b - 1];
                idx[b] = x;
        }
        for (unsigned a = 0; a < nv; a++) {
                unsigned i = idx[a];
                int g_best = -1, c_best = -1;
                for (unsigned g = 0; g < h->n_llcs; g++)
                        if (has_set[g] && (g_best < 0 || left[g] > left[g_best]))
                                g_best = (int) g;
                if (g_best < 0)
                        return;
                for (unsigned k = h->llcs[g_best].first; k < h->llcs[g_best].end; k++)
                        for (unsigned t = 0; t < h->cores[k].n_threads; t++) {
                                int cpu = h->cores[k].cpu[t];
                                if (pl->in_set[cpu] && (c_best < 0 || load[cpu] < load[c_best]))
                                        c_best = cpu;
                        }
                home[i] = c_best;
                load[c_best] += demand[i] > 0 ? demand[i] : 0;
                left[g_best] -= demand[i] > 0 ? demand[i] : 0;
        }
}

int sim_latency_bound_llc_mw(const struct em_host *h, const double *demand, unsigned nv, double budget,
                             double *ret_mw, unsigned *ret_cpus, struct sim_ref_placement *ret_pl)
{
        const struct energy_model *m = &h->model;
        _cleanup_free_ double *work = calloc(h->n_cpus, sizeof(double));
        _cleanup_free_ uint8_t *cnt = calloc(h->n_cpus, 1);
        _cleanup_free_ uint32_t *lat = calloc(h->n_cpus, sizeof(uint32_t));
        _cleanup_free_ uint8_t *lvl = calloc(h->n_fdoms ? h->n_fdoms : 1, 1);
        _cleanup_free_ unsigned *seg_start = calloc(h->n_online + 1, sizeof(unsigned));
        _cleanup_free_ unsigned *seg_len = calloc(h->n_online + 1, sizeof(unsigned));
        _cleanup_free_ unsigned *c = calloc(h->n_online + 1, sizeof(unsigned));
        _cleanup_free_ double *w = calloc(h->n_online + 1, sizeof(double));
        _cleanup_free_ double *units = calloc(h->n_online + 1, sizeof(double));
        _cleanup_free_ uint8_t *seen = calloc(h->n_cores ? h->n_cores : 1, 1);
        const int *orders[2] = { h->order_smt_first, h->order_cores_first };
        double W = 0, dmax = 0, best = INFINITY;
        unsigned best_c = 0;

        if (!work || !cnt || !lat || !lvl || !seg_start || !seg_len || !c || !w || !units || !seen)
                return -ENOMEM;
        for (unsigned k = 0; k < h->n_cpus; k++)
                lat[k] = EM_LATENCY_ANY;
        for (unsigned i = 0; i < nv; i++) {
                W += demand[i] > 0 ? demand[i] : 0;
                dmax = fmax(dmax, demand[i]);
        }
        if (W <= 0) /* nothing to place: no set */
                return sim_latency_bound_mw(h, demand, nv, budget, ret_mw, ret_cpus, ret_pl);
        for (unsigned o = 0; o < 2; o++) {
                const int *order = orders[o];
                unsigned n_seg = 0;

                order_units(h, order, units, seen);

                /* the order's LLC segments (an order runs LLC by LLC) */
                for (unsigned j = 0; j < h->n_online; j++) {
                        unsigned llc = h->cores[h->cpu_core[order[j]]].llc;
                        if (j == 0 || llc != h->cores[h->cpu_core[order[j - 1]]].llc) {
                                seg_start[n_seg] = j;
                                seg_len[n_seg++] = 0;
                        }
                        seg_len[n_seg - 1]++;
                }
                for (unsigned L = 0; L < m->n_levels; L++) {
                        double cap = m->levels[L].capacity / 1024.0, rest = W / (cap > 0 ? cap : 1);
                        unsigned last = 0, used = 0;

                        if (cap <= 0 || dmax > cap + 1e-12)
                                continue;
                        /* 1. greedy: each LLC in order carries the most its CPUs carry within the
                         *    budget, the last one the rest on the fewest CPUs, or more */
                        memset(c, 0, n_seg * sizeof(*c));
                        memset(w, 0, n_seg * sizeof(*w));
                        for (unsigned s = 0; s < n_seg && rest > 1e-12; s++) {
                                unsigned st = seg_start[s], n = seg_len[s];
                                double amax = erlang_max_load(n, units[st + n] - units[st], budget);
                                if (rest <= amax) {
                                        c[s] = run_servers(units, st, n, sim_erlang_servers(rest, budget, n), rest,
                                                           budget);
                                        if (c[s] > n) /* (at the bisection's edge) */
                                                c[s] = n;
                                        w[s] = rest * cap;
                                        rest = 0;
                                        last = s;
                                } else {
                                        c[s] = seg_len[s];
                                        w[s] = amax * cap;
                                        rest -= amax;
                                }
                                used += c[s];
                        }
                        if (rest <= 1e-12) {
                                unsigned c_last = c[last];
                                unsigned st = seg_start[last];
                                for (unsigned k = c_last; k <= seg_len[last]; k++) {
                                        if (!set_meets(k, units[st + k] - units[st], w[last] / cap, budget))
                                                continue;
                                        c[last] = k;
                                        double p = llc_sets_power(h, order, seg_start, n_seg, c, w, L, nv, W, work,
                                                                  lvl, cnt, lat);
                                        if (p < best) {
                                                best = p;
                                                best_c = used - c_last + k;
                                                record_placement(h, order, seg_start, n_seg, c, w, L, ret_pl);
                                        }
                                }
                        }
                        /* 2. even: the demand split evenly over k LLCs, each on the fewest CPUs, or more */
                        for (unsigned k = 1; k <= n_seg; k++) {
                                double a = W / cap / k;
                                unsigned cmin = 0, n_min = UINT32_MAX;
                                for (unsigned s = 0; s < k; s++)
                                        n_min = seg_len[s] < n_min ? seg_len[s] : n_min;
                                cmin = sim_erlang_servers(a, budget, n_min);
                                if (cmin > n_min)
                                        continue;
                                for (unsigned cc = cmin; cc <= n_min; cc++) {
                                        bool meets = true;
                                        for (unsigned s = 0; s < k && meets; s++)
                                                meets = set_meets(cc, units[seg_start[s] + cc] - units[seg_start[s]],
                                                                  a, budget);
                                        if (!meets)
                                                continue;
                                        memset(c, 0, n_seg * sizeof(*c));
                                        memset(w, 0, n_seg * sizeof(*w));
                                        for (unsigned s = 0; s < k; s++) {
                                                c[s] = cc;
                                                w[s] = W / k;
                                        }
                                        double p = llc_sets_power(h, order, seg_start, n_seg, c, w, L, nv, W, work,
                                                                  lvl, cnt, lat);
                                        if (p < best) {
                                                best = p;
                                                best_c = k * cc;
                                                record_placement(h, order, seg_start, n_seg, c, w, L, ret_pl);
                                        }
                                }
                        }
                }
        }
        if (ret_cpus)
                *ret_cpus = best_c;
        *ret_mw = best;
        return isfinite(best) ? 1 : 0;
}
