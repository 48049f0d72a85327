/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The model's power at SPECpower_ssj2008's load levels, and measured curves to
 * compare it with (docs/energy-model.md §7, `vmmpower-sim --power-curve`).
 *
 * SPECpower's load level x is a share of the throughput calibrated at full
 * load: the benchmark runs one worker per hardware thread and throttles every
 * worker to x of that throughput, so every thread carries the same work, and
 * the governor (here: any level the turbo table and the power limit allow)
 * picks the frequency.  The model's uniform load at x:
 *  - T_max: every thread busy at L_max, the highest level a fully busy host may
 *    run at (no package capped below it), i.e. n_cores x T x C_Lmax / 1024 with
 *    T = SmtGain on an SMT host, 1 otherwise;
 *  - every online CPU gets work x T_max / n_online and hosts one vCPU (its
 *    worker), no idle latency limit;
 *  - every frequency domain at the same level L, for every L that carries the
 *    work (each thread within C_L, each 2-thread core within SmtGain x C_L)
 *    and that no cap lowers; a governor free to choose switches levels every
 *    few ms, so over a benchmark interval it reaches any time mix of two
 *    operating points (a level at the load, or a level at its full capacity):
 *    the least power is the lower convex hull of those points at x;
 *  - x = 0 (active idle): no work, nothing hosted (no wake-ups), every state.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct curve_ws {
        double *work;
        uint8_t *vcpus, *level;
        uint32_t *lat;
};

static double eval_uniform(const struct em_host *h, struct curve_ws *w, double per_cpu, unsigned L,
                           struct em_breakdown *b)
{
        for (unsigned c = 0; c < h->n_cpus; c++) {
                bool on = h->cpu_core[c] >= 0;
                w->work[c] = on ? per_cpu : 0.0;
                w->vcpus[c] = on && per_cpu > 0 ? 1 : 0;
                w->lat[c] = EM_LATENCY_ANY;
        }
        for (unsigned f = 0; f < h->n_fdoms; f++)
                w->level[f] = (uint8_t) L;
        struct em_load l = { .cpu_work = w->work, .cpu_vcpus = w->vcpus, .cpu_max_latency_us = w->lat,
                             .fdom_level = w->level };
        return em_host_power(h, &l, b);
}

/* Throughput of one core at level L, in CPUs at the top level. */
static double core_throughput(const struct em_host *h, unsigned L)
{
        double T = h->n_online > h->n_cores ? h->model.smt_gain_permille / 1000.0 : 1.0;
        return T * h->model.levels[L].capacity / 1024.0;
}

int sim_power_curve(const struct em_host *h, const double *load, unsigned n, struct sim_curve_point *ret)
{
        const struct energy_model *m = &h->model;
        struct curve_ws w = { calloc(h->n_cpus, sizeof(double)), calloc(h->n_cpus, 1), calloc(h->n_fdoms, 1),
                              calloc(h->n_cpus, sizeof(uint32_t)) };
        int r = 0;

        if (!w.work || !w.vcpus || !w.level || !w.lat) {
                r = -ENOMEM;
                goto out;
        }
        /* L_max: the highest level a fully busy host runs at */
        unsigned Lmax = 0;
        for (unsigned L = m->n_levels; L-- > 0;) {
                struct em_breakdown b;
                eval_uniform(h, &w, core_throughput(h, L) * h->n_cores / h->n_online, L, &b);
                if (b.capped_pkgs == 0 || b.capped_level >= L) {
                        Lmax = L;
                        break;
                }
        }
        double tmax = core_throughput(h, Lmax) * h->n_cores;
        /*
         * Operating points: every level at every requested load it carries, and every level
         * at its full capacity (busy all the time).  Over a benchmark interval (240 s) the
         * governor switches levels every few ms, so it reaches any time mix of two points:
         * the least power at load x is the lower convex hull of the points at x.
         */
        unsigned npt = 0, maxpt = (n + 1) * m->n_levels;
        struct { double y, mw; int L; struct em_breakdown b; } *op = calloc(maxpt, sizeof(*op));
        if (!op) {
                r = -ENOMEM;
                goto out;
        }
        for (unsigned L = 0; L <= Lmax; L++) {
                double y_full = core_throughput(h, L) * h->n_cores / tmax;
                for (unsigned i = 0; i <= n; i++) {
                        double y = i < n ? load[i] : y_full, per_cpu;
                        struct em_breakdown b;
                        if (i < n && (y <= 0 || y > y_full * (1 + 1e-12)))
                                continue; /* idle is its own point; over capacity: not carried */
                        if (y > 1)
                                y = 1;
                        per_cpu = y * tmax / h->n_online;
                        double mw = eval_uniform(h, &w, per_cpu, L, &b);
                        if (b.capped_pkgs > 0 && b.capped_level < L)
                                continue; /* the level this load would be held below */
                        op[npt].y = y;
                        op[npt].mw = mw;
                        op[npt].L = (int) L;
                        op[npt].b = b;
                        npt++;
                }
        }
        for (unsigned i = 0; i < n; i++) {
                struct sim_curve_point *p = &ret[i];
                double x = load[i] < 0 ? 0 : load[i] > 1 ? 1 : load[i];

                memset(p, 0, sizeof(*p));
                p->load = x;
                p->throughput = x * tmax;
                p->level = p->level_hi = -1;
                p->mw = INFINITY;
                if (x == 0) { /* active idle: nothing runs, nothing is hosted */
                        p->mw = eval_uniform(h, &w, 0.0, 0, &p->b);
                        p->level = p->level_hi = 0;
                        continue;
                }
                for (unsigned a = 0; a < npt; a++) {
                        if (op[a].y > x * (1 + 1e-12))
                                continue;
                        for (unsigned c = 0; c < npt; c++) {
                                double t, mw;
                                if (op[c].y < x * (1 - 1e-12))
                                        continue;
                                /* θ of the time at c, 1 - θ at a, θ y_c + (1 - θ) y_a = x */
                                t = op[c].y - op[a].y > 1e-12 ? (x - op[a].y) / (op[c].y - op[a].y) : 1.0;
                                if (op[c].y - op[a].y <= 1e-12 && c != a)
                                        continue;
                                mw = (1 - t) * op[a].mw + t * op[c].mw;
                                if (mw < p->mw - 1e-9) {
                                        p->mw = mw;
                                        p->level = op[a].L;
                                        p->level_hi = op[c].L;
                                        p->mix = t;
                                        /* the breakdown of the mix, term by term */
                                        const struct em_breakdown *ba = &op[a].b, *bc = &op[c].b;
                                        p->b = *bc;
                                        p->b.active_mw = (1 - t) * ba->active_mw + t * bc->active_mw;
                                        p->b.idle_mw = (1 - t) * ba->idle_mw + t * bc->idle_mw;
                                        p->b.domain_mw = (1 - t) * ba->domain_mw + t * bc->domain_mw;
                                        p->b.wake_mw = (1 - t) * ba->wake_mw + t * bc->wake_mw;
                                        p->b.platform_mw = (1 - t) * ba->platform_mw + t * bc->platform_mw;
                                        p->b.psu_loss_mw = (1 - t) * ba->psu_loss_mw + t * bc->psu_loss_mw;
                                        p->b.total_mw = mw;
                                }
                        }
                }
        }
        for (unsigned i = 0; i < n; i++) { /* a mix that is all one level is that level */
                struct sim_curve_point *p = &ret[i];
                if (p->mix > 1 - 1e-9)
                        p->level = p->level_hi;
                else if (p->mix < 1e-9)
                        p->level_hi = p->level;
        }
        free(op);
out:
        free(w.work);
        free(w.vcpus);
        free(w.level);
        free(w.lat);
        return r;
}

/*
 * A measured curve: '#' comments and blank lines, then "LOAD_PCT WATTS" lines
 * (load 0 = active idle, 10..100), loads increasing.  Errors as FILE:LINE.
 */
int sim_measured_load(const char *path, struct sim_measured *ret, struct sim_error *err)
{
        FILE *f = fopen(path, "re");
        char line[512];
        unsigned ln = 0;

        memset(ret, 0, sizeof(*ret));
        if (!f) {
                int e = errno;
                if (err) {
                        snprintf(err->file, sizeof(err->file), "%s", path);
                        err->line = 0;
                        snprintf(err->message, sizeof(err->message), "cannot read: %s", strerror(e));
                }
                return -e;
        }
        while (fgets(line, sizeof(line), f)) {
                char *s = line, *end;
                double pct, watts;

                ln++;
                while (*s == ' ' || *s == '\t')
                        s++;
                if (*s == '#' || *s == '\n' || *s == '\0')
                        continue;
                pct = strtod(s, &end);
                if (end == s)
                        goto bad;
                s = end;
                watts = strtod(s, &end);
                if (end == s)
                        goto bad;
                while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
                        end++;
                if (*end || !(pct >= 0 && pct <= 100) || !(watts > 0 && watts < 1e6) ||
                    ret->n >= SIM_MEASURED_MAX || (ret->n > 0 && pct <= ret->load_pct[ret->n - 1] + 1e-9))
                        goto bad;
                ret->load_pct[ret->n] = pct;
                ret->watts[ret->n] = watts;
                ret->n++;
        }
        fclose(f);
        if (ret->n == 0) {
                if (err) {
                        snprintf(err->file, sizeof(err->file), "%s", path);
                        err->line = 0;
                        snprintf(err->message, sizeof(err->message), "no load levels");
                }
                return -EINVAL;
        }
        return 0;
bad:
        fclose(f);
        if (err) {
                snprintf(err->file, sizeof(err->file), "%s", path);
                err->line = ln;
                snprintf(err->message, sizeof(err->message),
                         "expected 'LOAD_PCT WATTS' (load 0..100 increasing, at most %d levels)", SIM_MEASURED_MAX);
        }
        return -EINVAL;
}
