/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * plan-bench: CPU time of one plan_compute() call (CLOCK_THREAD_CPUTIME_ID,
 * so that other load on the machine does not inflate it).
 *
 * Synthetic hosts built in memory (no sysfs): 2 packages, SMT (2 threads per
 * core, siblings numbered in the second half as Linux does on x86), one LLC
 * per 8 cores, one cpufreq policy per CPU (800 MHz..3.8 GHz, base 2.0 GHz, as
 * intel_pstate), cpuidle C1/C1E/C6 with SPR's latencies; the energy model is
 * energy_model_from_topology() of that host (8 perf levels, LLC and package
 * idle domains).  vCPU utilisations are random (fixed seed) with a total of
 * 30% of the host's cores.
 *
 * For each (pCPUs, vCPUs) it reports the median (and the minimum, less
 * sensitive to other load on a shared machine) over R runs of:
 *   initial   plan_compute() without a previous plan
 *   steady    plan_compute() with the previous plan and the same load (the
 *             daemon's usual call: target search + hysteresis)
 *   grow      the same, but 16 vCPUs (every nv/16-th) wait 30% of the time:
 *             the grow step looks for a CPU to wake for each, scoring one
 *             empty CPU per class of identical ones with a whole-host power
 *             evaluation (placement.c ws_best_wake(): about one per LLC with
 *             work, two per empty LLC's package), so it costs a few steady
 *             plans
 * in microseconds per plan, plus the active CPUs and plan/spread energy.
 * Prints numbers; asserts nothing.  Usage: plan-bench [RUNS [PCPUS VCPUS]]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "energy_model.h"
#include "placement.h"
#include "topology.h"
#include "util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double rnd(void)
{
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        return (double) (rng >> 11) / (double) (1ULL << 53);
}

static int cmp_ns(const void *a, const void *b)
{
        nsec_t x = *(const nsec_t *) a, y = *(const nsec_t *) b;
        return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
        static const unsigned cpus[] = { 64, 256, 512 };
        static const unsigned vcpus[] = { 100, 1000, 10000 };
        unsigned runs = argc > 1 ? (unsigned) atoi(argv[1]) : 21;

        if (runs == 0 || runs > 10000)
                runs = 21;
        printf("%6s %7s %11s %11s %11s %11s %7s %6s %12s %11s %11s\n", "pCPUs", "vCPUs", "initial_us", "(min)",
               "steady_us", "(min)", "active", "cands", "plan/spread", "grow_us", "(min)");
        unsigned only_p = argc > 3 ? (unsigned) atoi(argv[2]) : 0, only_v = argc > 3 ? (unsigned) atoi(argv[3]) : 0;
        for (unsigned a = 0; a < ELEMENTSOF(cpus); a++) {
                if (only_p && cpus[a] != only_p)
                        continue;
                /* 2 packages, 2 threads per core */
                struct topology *t = NULL;
                struct energy_model m;
                struct em_host *h = NULL;
                struct plan_policy pol;
                int r = topology_synthetic(2, cpus[a] / 4, &t);

                if (r >= 0)
                        r = energy_model_from_topology(t, &m);
                if (r >= 0)
                        r = em_host_new(t, &m, &h);
                if (r < 0) {
                        fprintf(stderr, "model for %u CPUs: %s\n", cpus[a], strerror(-r));
                        return 1;
                }
                plan_policy_defaults(&pol);
                for (unsigned b = 0; b < ELEMENTSOF(vcpus); b++) {
                        unsigned nv = vcpus[b];
                        if (only_v && nv != only_v)
                                continue;
                        struct plan_vcpu *v = calloc(nv, sizeof(*v));
                        nsec_t *ti = calloc(runs, sizeof(nsec_t)), *ts = calloc(runs, sizeof(nsec_t));
                        nsec_t *tg = calloc(runs, sizeof(nsec_t));
                        double mean = 0.3 * h->n_cores / nv;
                        struct plan *p0 = NULL;

                        if (!v || !ti || !ts || !tg)
                                return 1;
                        for (unsigned i = 0; i < nv; i++)
                                v[i] = (struct plan_vcpu) { .key = ((uint64_t) (i / 4) << 16) | (i % 4), .vm = i / 4,
                                                            .util = MIN(1.0, 2.0 * mean * rnd()),
                                                            .wait_ratio = 0.01 * rnd(), .cur_cpu = -1 };
                        for (unsigned k = 0; k < runs; k++) {
                                struct plan *p = NULL, *q = NULL, *g = NULL;
                                nsec_t t0 = thread_cputime_ns();
                                r = plan_compute(h, &pol, v, nv, NULL, 0, NULL, 0, &p);
                                nsec_t t1 = thread_cputime_ns();
                                if (r >= 0)
                                        r = plan_compute(h, &pol, v, nv, NULL, 0, p, NSEC_PER_SEC, &q);
                                nsec_t t2 = thread_cputime_ns(), t3 = t2;
                                if (r >= 0) {
                                        for (unsigned i = 0; i < 16; i++)
                                                v[(size_t) i * nv / 16].wait_avg = 0.3;
                                        t2 = thread_cputime_ns();
                                        r = plan_compute(h, &pol, v, nv, NULL, 0, p, NSEC_PER_SEC, &g);
                                        t3 = thread_cputime_ns();
                                        for (unsigned i = 0; i < 16; i++)
                                                v[(size_t) i * nv / 16].wait_avg = 0.0;
                                }
                                if (r < 0) {
                                        fprintf(stderr, "plan_compute: %s\n", strerror(-r));
                                        return 1;
                                }
                                ti[k] = t1 - t0;
                                ts[k] = t2 - t1;
                                tg[k] = t3 - t2;
                                plan_free(g);
                                if (k == 0)
                                        p0 = p;
                                else
                                        plan_free(p);
                                plan_free(q);
                        }
                        qsort(ti, runs, sizeof(nsec_t), cmp_ns);
                        qsort(ts, runs, sizeof(nsec_t), cmp_ns);
                        qsort(tg, runs, sizeof(nsec_t), cmp_ns);
                        printf("%6u %7u %11.1f %11.1f %11.1f %11.1f %7u %6u %12.3f %11.1f %11.1f\n", cpus[a], nv,
                               ti[runs / 2] / 1000.0, ti[0] / 1000.0, ts[runs / 2] / 1000.0, ts[0] / 1000.0,
                               p0->why.n_active, p0->why.candidates,
                               p0->why.plan_mw / p0->why.spread_mw, tg[runs / 2] / 1000.0, tg[0] / 1000.0);
                        fflush(stdout);
                        plan_free(p0);
                        free(v);
                        free(ti);
                        free(ts);
                        free(tg);
                }
                em_host_free(h);
                topology_free(t);
        }
        return 0;
}
