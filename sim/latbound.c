/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The latency-constrained bound (docs/simulator.md §5, "Latency-constrained bound"): per trace
 * interval, the least modelled energy of a placement whose predicted queueing probability, Erlang
 * C with the interval's demand known exactly, is within the queueing budget.
 *
 * Terms: W the interval's total demand (top-level CPUs), C_L / 1024 one CPU's capacity at level L,
 * A_L = W / (C_L / 1024) the offered load in CPUs of level L, c a pack set's size in CPUs, ε the
 * budget (share of the wake-ups allowed to find every CPU of their set busy).
 *
 * Steps, per level L:
 *  1. c_L = the least c with ErlangC(c, A_L) <= ε (sim_erlang_servers()); none when c_L > the
 *     online CPUs: the level cannot meet the budget.
 *  2. for every size c from c_L to all online CPUs, and for two orders of the CPUs (SMT-first:
 *     both threads of a core before the next core; cores-first: thread 0 of every core of an LLC
 *     before any sibling), the set = the first c CPUs of the order, each carrying W / c (the
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

int sim_latency_bound_mw(const struct em_host *h, const double *demand, unsigned nv, double budget, double *ret_mw,
                         unsigned *ret_cpus)
{
        const struct energy_model *m = &h->model;
        _cleanup_free_ double *work = calloc(h->n_cpus, sizeof(double));
        _cleanup_free_ uint8_t *zero = calloc(h->n_cpus, 1);
        _cleanup_free_ uint32_t *lat = calloc(h->n_cpus, sizeof(uint32_t));
        _cleanup_free_ uint8_t *lvl = calloc(h->n_fdoms, 1);
        const int *orders[2] = { h->order_smt_first, h->order_cores_first };
        double W = 0, dmax = 0, best = INFINITY;
        unsigned best_c = 0;

        if (!work || !zero || !lat || !lvl)
                return -ENOMEM;
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
                        for (unsigned o = 0; o < 2; o++) {
                                double p = set_power(h, orders[o], c, L, W, work, lvl, zero, lat);
                                if (p < best) {
                                        best = p;
                                        best_c = c;
                                }
                        }
        }
        if (ret_cpus)
                *ret_cpus = best_c;
        *ret_mw = best;
        return isfinite(best) ? 1 : 0;
}

/* ---- the same with sets that stay within an LLC ---- */

/* The largest offered load (CPUs) n servers carry with sim_erlang_c() <= budget (bisection). */
static double erlang_max_load(unsigned n, double budget)
{
        double lo = 0, hi = n;

        for (int it = 0; it < 60; it++) {
                double mid = (lo + hi) / 2;
                if (sim_erlang_c(n, mid) <= budget)
                        lo = mid;
                else
                        hi = mid;
        }
        return lo;
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
                double x = w[s] / c[s], n = W > 0 ? nv * x / W : 0;
                if (x > cap + 1e-12)
                        return NAN;
                for (unsigned j = 0; j < c[s]; j++) {
                        int cpu = order[seg_start[s] + j];
                        work[cpu] = x;
                        cnt[cpu] = (uint8_t) (n < 1.0 ? 1.0 : n > 255.0 ? 255.0 : floor(n + 0.5));
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
        const int *orders[2] = { h->order_smt_first, h->order_cores_first };
        double W = 0, dmax = 0, best = INFINITY;
        unsigned best_c = 0;

        if (!work || !cnt || !lat || !lvl || !seg_start || !seg_len || !c || !w)
                return -ENOMEM;
        for (unsigned k = 0; k < h->n_cpus; k++)
                lat[k] = EM_LATENCY_ANY;
        for (unsigned i = 0; i < nv; i++) {
                W += demand[i] > 0 ? demand[i] : 0;
                dmax = fmax(dmax, demand[i]);
        }
        if (W <= 0) {
                if (ret_pl) { /* no set: nothing to place */
                        memset(ret_pl->in_set, 0, h->n_cpus);
                        for (unsigned g = 0; g < h->n_llcs; g++)
                                ret_pl->llc_w[g] = 0.0;
                }
                return sim_latency_bound_mw(h, demand, nv, budget, ret_mw, ret_cpus);
        }
        for (unsigned o = 0; o < 2; o++) {
                const int *order = orders[o];
                unsigned n_seg = 0;

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
                                double amax = erlang_max_load(seg_len[s], budget);
                                if (rest <= amax) {
                                        c[s] = sim_erlang_servers(rest, budget, seg_len[s]);
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
                                for (unsigned k = c_last; k <= seg_len[last]; k++) {
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
