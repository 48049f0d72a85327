/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Planner tests on the fixture topologies (xeon-spr-2s, epyc-genoa-1s) with
 * the shipped model files (config/models/).
 *
 * The seed's question: for task sets with global utilisation below one CPU,
 * and for sets up to 50% of the host, the plan's modelled energy is below
 * spreading the same vCPUs one per core, asserted case by case with the
 * numbers in the failure message.  Random sets come from a fixed-seed LCG
 * so every run checks the same cases.
 */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "energy_model.h"
#include "hint_proto.h"
#include "placement.h"
#include "plan_actions.h"
#include "plan_input.h"
#include "queueing.h"
#include "topology.h"
#include "util.h"
#include "vm_policy.h"

struct host_fixture {
        struct topology *t;
        struct em_host *h;
};

static void load_host(const char *topo, const char *model, struct host_fixture *f)
{
        char path[512];
        struct energy_model m;
        struct em_error err = {};

        assert_true(path_printf(path, sizeof(path), "%s/topology/%s/sys", TEST_DATA_DIR, topo) > 0);
        assert_int_equal(topology_load(path, &f->t), 0);
        /* NAME-v0: the shipped model before its calibration (tests/data/models/), for the tests
         * whose expectations were written against its numbers */
        if (strlen(model) > 3 && strcmp(model + strlen(model) - 3, "-v0") == 0)
                assert_true(path_printf(path, sizeof(path), "%s/models/%s.model", TEST_DATA_DIR, model) > 0);
        else
                assert_true(path_printf(path, sizeof(path), "%s/../../config/models/%s.model", TEST_DATA_DIR,
                                        model) > 0);
        if (energy_model_parse_file(path, &m, &err) < 0)
                fail_msg("%s:%u: %s", err.file, err.line, err.message);
        assert_int_equal(em_host_new(f->t, &m, &f->h), 0);
}

static void free_host(struct host_fixture *f)
{
        em_host_free(f->h);
        topology_free(f->t);
}

static uint64_t rng_state;
static double rnd(void) /* [0, 1) */
{
        rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
        return (double) (rng_state >> 11) / (double) (1ULL << 53);
}

/*
 * The cases below were written for the utilisation-headroom rule: they run
 * the batch profile, which keeps it.  The latency profile (the default) has
 * its own tests (test_latency_*).
 */
static void policy(struct plan_policy *p)
{
        plan_policy_defaults(p);
        p->profile = PLAN_PROFILE_BATCH;
}

/*
 * Whether lvl is the highest level CPU c's package can run at with the plan's load (the top
 * level, or the level the turbo table or the power limit holds it to when c's domain asks for
 * the top).
 */
static bool highest_reachable(const struct em_host *h, const struct plan *p, const unsigned *cnt, int c,
                              unsigned lvl)
{
        unsigned top = h->model.n_levels - 1;
        int caps[64];
        if (lvl == top)
                return true;
        if (!h->has_limits || h->n_pkgs > 64)
                return false;
        _cleanup_free_ uint8_t *act = calloc(h->n_cpus, 1), *lv = malloc(h->n_fdoms);
        assert_true(act && lv);
        for (unsigned i = 0; i < h->n_cpus; i++)
                act[i] = (uint8_t) MIN(cnt[i], 255u);
        memcpy(lv, p->fdom_level, h->n_fdoms);
        lv[h->cpu_fdom[c]] = (uint8_t) top;
        struct em_load l = { .cpu_work = p->cpu_work, .cpu_vcpus = act, .cpu_max_latency_us = p->cpu_max_latency_us,
                             .fdom_level = lv };
        em_host_level_caps(h, &l, caps);
        int cap = caps[h->cores[h->cpu_core[c]].pkg];
        return cap >= 0 && (unsigned) cap <= lvl;
}

/*
 * Every active CPU within the level headroom at its domain's level, unless it holds a
 * single vCPU at the highest level its package can run at (the top level, or the
 * level the turbo table or the power limit holds it to).  cpu_work is balanced within pack sets: a CPU
 * of a large vCPU (vcpu_alone) carries that vCPU alone, the others' load is
 * spread over the set.
 */
static void assert_feasible(const struct em_host *h, const struct plan *p, const struct plan_policy *pol)
{
        _cleanup_free_ unsigned *cnt = calloc(h->n_cpus, sizeof(unsigned));
        _cleanup_free_ unsigned *large = calloc(h->n_cpus, sizeof(unsigned));
        assert_non_null(cnt);
        assert_non_null(large);
        for (unsigned i = 0; i < p->n_vcpus; i++)
                if (p->vcpu_cpu[i] >= 0) {
                        cnt[p->vcpu_cpu[i]]++;
                        large[p->vcpu_cpu[i]] += p->vcpu_alone[i];
                }
        for (unsigned c = 0; c < h->n_cpus; c++) {
                unsigned lvl, n = large[c] ? large[c] : cnt[c];
                double hc;
                if (!cpuset_isset(&p->active, c))
                        continue;
                lvl = p->fdom_level[h->cpu_fdom[c]];
                hc = pol->level_headroom_pct / 100.0 * h->model.levels[lvl].capacity / EM_CAPACITY_SCALE;
                if (p->cpu_work[c] > hc + 1e-9 && !(n <= 1 && highest_reachable(h, p, cnt, (int) c, lvl)))
                        fail_msg("cpu %u work %.3f over headroom %.3f at level %u (%u vCPUs)", c, p->cpu_work[c], hc,
                                 lvl, n);
        }
}

static unsigned n_active_cpus(const struct plan *p)
{
        return cpuset_count(&p->active);
}

/* ---- the seed's question ----------------------------------------------------- */

/* Water level over m CPUs with fixed loads fx: sum of max(0, lambda - fx) = load (bisection). */
static double water(const double *fx, unsigned m, double load)
{
        double lo = 0.0, hi = 2.0;
        for (unsigned it = 0; it < 100; it++) {
                double mid = (lo + hi) / 2, fill = 0.0;
                for (unsigned j = 0; j < m; j++)
                        fill += MAX(0.0, mid - fx[j]);
                if (fill < load)
                        lo = mid;
                else
                        hi = mid;
        }
        return hi;
}

/*
 * The densest packing, computed here independently of the planner: first
 * fit at the top level (HeadroomPercent, SMT gain for a core with two busy
 * threads) in the SMT-first wake order, each frequency domain at the lowest
 * level that keeps its CPUs within LevelHeadroomPercent.  Used to check that a case
 * where the plan equals spread is one where the model really prefers
 * spreading to packing.
 */
static double packed_power(const struct em_host *h, const struct plan_policy *pol, const struct plan_vcpu *v,
                           unsigned nv)
{
        double hr = pol->headroom_pct / 100.0, lh = pol->level_headroom_pct / 100.0;
        const struct energy_model *m = &h->model;
        double gain = m->smt_gain_permille / 1000.0, pw;
        double *work = calloc(h->n_cpus, sizeof(double)), *bal = calloc(h->n_cpus, sizeof(double));
        uint8_t *cnt = calloc(h->n_cpus, 1), *lvl = calloc(h->n_fdoms, 1);
        uint32_t *lat = malloc(h->n_cpus * sizeof(uint32_t));
        int *at = calloc(nv ? nv : 1, sizeof(int));
        double *fx = calloc(h->n_cpus, sizeof(double));
        int *cpus = calloc(h->n_cpus, sizeof(int));
        struct em_load l = { .cpu_work = bal, .cpu_vcpus = cnt, .cpu_max_latency_us = lat, .fdom_level = lvl };

        assert_true(work && bal && cnt && lvl && lat && at && fx && cpus);
        for (unsigned c = 0; c < h->n_cpus; c++)
                lat[c] = EM_LATENCY_ANY;
        for (unsigned i = 0; i < nv; i++) {
                unsigned pos;
                for (pos = 0; pos < h->n_online; pos++) {
                        int c = h->order_smt_first[pos], k = h->cpu_core[c];
                        const struct em_core *core = &h->cores[k];
                        int sib = core->n_threads == 2 ? core->cpu[core->cpu[0] == c ? 1 : 0] : -1;
                        bool sib_busy = sib >= 0 && cnt[sib] > 0;
                        if (cnt[c] == 0 && !sib_busy)
                                break;
                        if (work[c] + v[i].util <= hr &&
                            (!sib_busy || work[c] + work[sib] + v[i].util <= hr * gain))
                                break;
                }
                assert_true(pos < h->n_online);
                at[i] = h->order_smt_first[pos];
                work[at[i]] += v[i].util;
                cnt[at[i]]++;
        }
        /*
         * Pack sets: the used CPUs of an LLC share its load (the kernel balances
         * it), a vCPU larger than the water level keeps its CPU, largest first.
         * Each CPU's domain at the lowest level that holds its balanced load,
         * every CPU of a set at least at the level of the water.
         */
        for (unsigned g = 0; g < h->n_llcs; g++) {
                unsigned n = 0;
                double load = 0.0, lambda = 0.0;
                _cleanup_free_ uint8_t *done = calloc(nv ? nv : 1, 1);
                assert_non_null(done);
                for (unsigned k = h->llcs[g].first; k < h->llcs[g].end; k++)
                        for (unsigned t = 0; t < h->cores[k].n_threads; t++)
                                if (cnt[h->cores[k].cpu[t]])
                                        cpus[n++] = h->cores[k].cpu[t];
                if (n == 0)
                        continue;
                for (unsigned i = 0; i < nv; i++)
                        if ((unsigned) h->cores[h->cpu_core[at[i]]].llc == g)
                                load += v[i].util;
                for (;;) {
                        int big = -1;
                        for (unsigned j = 0; j < n; j++)
                                fx[j] = bal[cpus[j]];
                        lambda = water(fx, n, load);
                        for (unsigned i = 0; i < nv; i++)
                                if (!done[i] && (unsigned) h->cores[h->cpu_core[at[i]]].llc == g &&
                                    (big < 0 || v[i].util > v[big].util))
                                        big = (int) i;
                        if (big < 0 || v[big].util <= lambda + 1e-9)
                                break;
                        done[big] = 1;
                        bal[at[big]] += v[big].util;
                        load -= v[big].util;
                }
                /* a core with both threads in the set holds 2 lambda within SmtGain x level headroom */
                double need = lambda;
                for (unsigned j = 0; j < n; j++) {
                        const struct em_core *co = &h->cores[h->cpu_core[cpus[j]]];
                        if (co->n_threads == 2 && cnt[co->cpu[0]] && cnt[co->cpu[1]])
                                need = MAX(need, 2.0 * lambda / gain);
                }
                unsigned L = 0;
                while (L + 1u < m->n_levels && need > lh * m->levels[L].capacity / 1024.0 + 1e-9)
                        L++;
                for (unsigned j = 0; j < n; j++) {
                        unsigned f = h->cpu_fdom[cpus[j]];
                        bal[cpus[j]] = MAX(bal[cpus[j]], lambda);
                        lvl[f] = (uint8_t) MAX(lvl[f], L);
                }
        }
        /* every core within the level headroom at its domain's level, SmtGain x that with both threads busy */
        for (unsigned k = 0; k < h->n_cores; k++) {
                const struct em_core *co = &h->cores[k];
                unsigned f = co->fdom;
                double sum = 0.0, mx = 0.0;
                unsigned busy = 0;
                for (unsigned t = 0; t < co->n_threads; t++)
                        if (cnt[co->cpu[t]]) {
                                busy++;
                                sum += bal[co->cpu[t]];
                                mx = MAX(mx, bal[co->cpu[t]]);
                        }
                if (!busy)
                        continue;
                while (lvl[f] + 1u < m->n_levels &&
                       (mx > lh * m->levels[lvl[f]].capacity / 1024.0 + 1e-9 ||
                        (busy == 2 && sum > lh * gain * m->levels[lvl[f]].capacity / 1024.0 + 1e-9)))
                        lvl[f]++;
        }
        pw = em_host_power(h, &l, NULL);
        free(work);
        free(bal);
        free(cnt);
        free(lvl);
        free(lat);
        free(at);
        free(fx);
        free(cpus);
        return pw;
}

static void check_random_sets(const char *topo, const char *model, uint64_t seed, unsigned n_cases, bool half_host)
{
        struct host_fixture f;
        struct plan_policy pol;
        double sum_ratio = 0.0, worst_ratio = 0.0;
        unsigned strict = 0, ties = 0;

        load_host(topo, model, &f);
        policy(&pol);
        rng_state = seed;
        for (unsigned c = 0; c < n_cases; c++) {
                unsigned n_cpus = f.h->n_online, nv;
                double target, total = 0.0;
                struct plan_vcpu v[256];
                struct plan *p = NULL;

                if (!half_host) {
                        /* Σ util < 1: below the capacity of one CPU at its top level; 2..16 vCPUs. */
                        nv = 2 + (unsigned) (rnd() * 15);
                        target = 0.05 + 0.9 * rnd();
                } else {
                        /*
                         * Σ util up to half the host: half of its physical cores at the top
                         * level (SMT gain not counted); 2..2 x CPUs vCPUs, each <= 1.
                         */
                        nv = 2 + (unsigned) (rnd() * MIN(2 * n_cpus - 1, 255u));
                        target = MIN((double) nv * 0.9, (0.02 + 0.48 * rnd()) * f.h->n_cores);
                }
                for (unsigned i = 0; i < nv; i++) {
                        v[i] = (struct plan_vcpu) { .key = 1000 + i, .vm = i / 4, .mode = PLACE_PACK,
                                                    .util = 0.05 + rnd(), .wait_ratio = 0.0, .cur_cpu = -1 };
                        total += v[i].util;
                }
                for (unsigned i = 0; i < nv; i++) {
                        v[i].util *= target / total;
                        if (v[i].util > 1.0)
                                v[i].util = 1.0;
                }
                assert_int_equal(plan_compute(f.h, &pol, v, nv, NULL, 0, NULL, 0, &p), 0);
                if (!(p->why.plan_mw <= p->why.spread_mw + 1e-6))
                        fail_msg("%s case %u (seed %llu): %u vCPUs, total util %.3f: plan %.1f mW is above "
                                 "spread %.1f mW (%u active CPUs)", topo, c, (unsigned long long) seed, nv, target,
                                 p->why.plan_mw, p->why.spread_mw, n_active_cpus(p));
                if (p->why.plan_mw < p->why.spread_mw - 1e-6)
                        strict++;
                else {
                        /* A tie: the model must really prefer spreading to the densest packing. */
                        double packed = packed_power(f.h, &pol, v, nv);
                        if (!(p->why.spread_mw <= packed + 1e-6))
                                fail_msg("%s case %u (seed %llu): %u vCPUs, total util %.3f: plan = spread %.1f mW "
                                         "but packing gives %.1f mW", topo, c, (unsigned long long) seed, nv,
                                         target, p->why.spread_mw, packed);
                        ties++;
                }
                assert_feasible(f.h, p, &pol);
                /* the reported number is the model's number for the plan's load */
                double again = plan_power(f.h, p, NULL);
                if (again < p->why.plan_mw - 1e-6 || again > p->why.plan_mw + 1e-6)
                        fail_msg("plan_power %.6f != reported %.6f", again, p->why.plan_mw);
                sum_ratio += p->why.plan_mw / p->why.spread_mw;
                worst_ratio = MAX(worst_ratio, p->why.plan_mw / p->why.spread_mw);
                plan_free(p);
        }
        printf("# %s %s: %u cases, plan < spread in %u, plan = spread (model prefers spread to packing) in %u; "
               "plan/spread energy mean %.3f, worst %.3f\n", topo,
               half_host ? "up to 50% of host" : "total util < 1 CPU", n_cases, strict, ties, sum_ratio / n_cases,
               worst_ratio);
        /* Most cases must be strict wins: spread being optimal is the exception. */
        assert_true(strict * 10 >= n_cases * 9);
        free_host(&f);
}

static void test_below_one_cpu_spr(void **state)
{
        check_random_sets("xeon-spr-2s", "xeon-spr-2s", 42, 200, false);
}

static void test_below_one_cpu_genoa(void **state)
{
        check_random_sets("epyc-genoa-1s", "epyc-genoa", 43, 200, false);
}

static void test_half_host_spr(void **state)
{
        check_random_sets("xeon-spr-2s", "xeon-spr-2s", 44, 200, true);
}

static void test_half_host_genoa(void **state)
{
        check_random_sets("epyc-genoa-1s", "epyc-genoa", 45, 200, true);
}

/* A worked example (also in docs/energy-model.md): 4 vCPUs at 10% on the SPR fixture. */
/* Pin sets: a packed vCPU may use every CPU of its LLC the plan packs onto; others their CPU. */
static void test_pin_sets(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[8];
        struct plan *p = NULL;
        cpuset_t sets[8];
        _cleanup_free_ cpuset_t *pack = NULL;

        (void) state;
        load_host("xeon-spr-2s", "xeon-spr-2s-v0", &f);
        policy(&pol);
        for (unsigned i = 0; i < 8; i++)
                v[i] = (struct plan_vcpu) { .key = i + 1, .vm = 1 + i / 2, .util = 0.35, .cur_cpu = -1 };
        v[7].mode = PLACE_DEDICATED;
        assert_int_equal(plan_compute(f.h, &pol, v, 8, NULL, 0, NULL, 0, &p), 0);
        assert_int_equal(plan_pin_sets(f.h, &pol, p, v, 8, sets), 0);
        /* the expected pack set of each LLC */
        pack = calloc(f.h->n_llcs, sizeof(cpuset_t));
        assert_non_null(pack);
        for (unsigned i = 0; i < 7; i++) {
                int c = p->vcpu_cpu[i];
                assert_true(c >= 0);
                cpuset_set(&pack[f.h->cores[f.h->cpu_core[c]].llc], (unsigned) c);
        }
        unsigned multi = 0;
        for (unsigned i = 0; i < 7; i++) {
                int c = p->vcpu_cpu[i];
                assert_true(cpuset_isset(&sets[i], (unsigned) c));
                assert_true(cpuset_equal(&sets[i], &pack[f.h->cores[f.h->cpu_core[c]].llc]));
                assert_false(cpuset_isset(&sets[i], (unsigned) p->vcpu_cpu[7])); /* never the dedicated core */
                multi += cpuset_count(&sets[i]) > 1;
        }
        assert_true(multi > 0); /* 7 x 0.35 does not fit on one CPU: the sets are not all single */
        assert_int_equal(cpuset_count(&sets[7]), 1);
        assert_true(cpuset_isset(&sets[7], (unsigned) p->vcpu_cpu[7]));
        /* a boosted vCPU (hint) keeps the CPU the plan runs at the top level for it */
        {
                struct plan_hint hint = { .key = v[0].key, .boost = true };
                struct plan *pb = NULL;
                assert_int_equal(plan_compute(f.h, &pol, v, 8, &hint, 1, NULL, 0, &pb), 0);
                assert_int_equal(plan_pin_sets(f.h, &pol, pb, v, 8, sets), 0);
                assert_int_equal(cpuset_count(&sets[0]), 1);
                assert_true(cpuset_isset(&sets[0], (unsigned) pb->vcpu_cpu[0]));
                assert_int_equal(pb->fdom_level[f.h->cpu_fdom[pb->vcpu_cpu[0]]], f.h->model.n_levels - 1);
                plan_free(pb);
        }
        /* PinSingleCPU: every vCPU its planned CPU alone */
        pol.pin_single_cpu = true;
        assert_int_equal(plan_pin_sets(f.h, &pol, p, v, 8, sets), 0);
        for (unsigned i = 0; i < 8; i++) {
                assert_int_equal(cpuset_count(&sets[i]), 1);
                assert_true(cpuset_isset(&sets[i], (unsigned) p->vcpu_cpu[i]));
        }
        plan_free(p);
        free_host(&f);
}

/*
 * plan_to_actions(): the pins and knobs of a plan, and what changed from the
 * previous one.  Four packed vCPUs on one LLC, the fourth pinned alone, and
 * an excluded VM (one vCPU on a CPU, one without).
 */
static void plan_actions_fixture(struct plan *p, const int *cpu)
{
        for (unsigned i = 0; i < 6; i++) {
                p->vcpu_cpu[i] = cpu[i];
                p->vcpu_alone[i] = i == 3;
                p->vcpu_boost[i] = 0;
        }
}

static void test_plan_actions(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[6];
        struct plan *prev = NULL, *next = NULL, *small = NULL;
        struct plan_actions act = { 0 };
        cpuset_t three, four;
        int cpu[6];
        unsigned k = 0, fd, lvl;

        (void) state;
        load_host("xeon-spr-2s", "xeon-spr-2s", &f);
        policy(&pol);
        /* four CPUs of the first LLC, each of its own core */
        for (unsigned c = f.h->llcs[0].first; k < 4 && c < f.h->llcs[0].end; c++)
                cpu[k++] = f.h->cores[c].cpu[0];
        assert_int_equal(k, 4);
        cpu[4] = f.h->cores[f.h->llcs[0].end].cpu[0];
        cpu[5] = -1;
        for (unsigned i = 0; i < 6; i++)
                v[i] = (struct plan_vcpu) { .key = i + 1, .vm = 1 + i / 4, .util = 0.2, .cur_cpu = cpu[i],
                                            .mode = i < 4 ? PLACE_PACK : PLACE_EXCLUDE };
        assert_int_equal(plan_compute(f.h, &pol, v, 6, NULL, 0, NULL, 0, &prev), 0);
        assert_int_equal(plan_compute(f.h, &pol, v, 6, NULL, 0, NULL, 0, &next), 0);
        plan_actions_fixture(prev, cpu);
        plan_actions_fixture(next, cpu);
        cpuset_zero(&three);
        for (unsigned i = 0; i < 3; i++)
                cpuset_set(&three, (unsigned) cpu[i]);
        four = three;
        cpuset_set(&four, (unsigned) cpu[3]);

        /* no previous plan: every pin and every knob is a change */
        assert_int_equal(plan_to_actions(f.h, &pol, NULL, NULL, 0, next, v, 6, &act), 0);
        assert_int_equal(act.n_vcpus, 6);
        assert_int_equal(act.n_cpus, f.h->n_cpus);
        for (unsigned i = 0; i < 3; i++) {
                assert_int_equal(act.pin[i].cpu, cpu[i]);
                /* the LLC's pack set without the CPU of the vCPU pinned alone */
                assert_true(cpuset_equal(&act.set[i], &three));
        }
        assert_int_equal(act.pin[3].cpu, cpu[3]);
        assert_int_equal(cpuset_count(&act.set[3]), 1);
        assert_true(cpuset_isset(&act.set[3], (unsigned) cpu[3]));
        assert_int_equal(act.pin[4].cpu, PLAN_PIN_RELEASE);
        assert_int_equal(act.pin[5].cpu, PLAN_PIN_RELEASE);
        assert_true(cpuset_empty(&act.set[4]));
        assert_int_equal(act.n_pins_changed, 6);
        assert_int_equal(act.n_cpus_changed, f.h->n_online);
        for (unsigned c = 0; c < f.h->n_cpus; c++) {
                const struct plan_cpu_action *a = &act.cpu[c];
                assert_int_equal(a->online, f.h->cpu_core[c] >= 0);
                if (!a->online)
                        continue;
                assert_true(a->level_changed && a->latency_changed);
                assert_int_equal(a->level, next->fdom_level[f.h->cpu_fdom[c]]);
                assert_int_equal(a->max_khz, f.h->model.levels[a->level].freq_khz);
                assert_int_equal(a->latency_us, plan_latency_knob(next->cpu_max_latency_us[c]));
        }

        /* a previous plan without inputs (a daemon with no VM yet): its knobs still count */
        assert_int_equal(plan_to_actions(f.h, &pol, prev, NULL, 0, next, v, 6, &act), 0);
        assert_int_equal(act.n_pins_changed, 6);
        assert_int_equal(act.n_cpus_changed, 0);
        assert_int_equal(plan_to_actions(f.h, &pol, prev, NULL, 0, next, NULL, 0, &act), 0);
        assert_int_equal(act.n_vcpus, 0);
        assert_int_equal(act.n_cpus_changed, 0);

        /* the same plan again: nothing changed */
        assert_int_equal(plan_to_actions(f.h, &pol, prev, v, 6, next, v, 6, &act), 0);
        assert_int_equal(act.n_pins_changed, 0);
        assert_int_equal(act.n_cpus_changed, 0);
        for (unsigned i = 0; i < 6; i++)
                assert_false(act.pin[i].changed);

        /* vCPU 3 no longer alone (the set takes its CPU: the four packed pins change), one
         * domain one level lower, one CPU's idle limit changed */
        next->vcpu_alone[3] = 0;
        fd = f.h->cpu_fdom[cpu[0]];
        lvl = next->fdom_level[fd] > 0 ? next->fdom_level[fd] - 1u : 1u;
        next->fdom_level[fd] = (uint8_t) lvl;
        next->cpu_max_latency_us[cpu[1]] = prev->cpu_max_latency_us[cpu[1]] == 10 ? 20 : 10;
        assert_int_equal(plan_to_actions(f.h, &pol, prev, v, 6, next, v, 6, &act), 0);
        for (unsigned i = 0; i < 4; i++) {
                assert_true(act.pin[i].changed);
                assert_true(cpuset_equal(&act.set[i], &four));
        }
        assert_false(act.pin[4].changed);
        assert_false(act.pin[5].changed);
        assert_int_equal(act.n_pins_changed, 4);
        for (unsigned c = 0; c < f.h->n_cpus; c++) {
                const struct plan_cpu_action *a = &act.cpu[c];
                if (!a->online)
                        continue;
                assert_int_equal(a->level_changed, f.h->cpu_fdom[c] == fd);
                assert_int_equal(a->latency_changed, c == (unsigned) cpu[1]);
        }
        assert_int_equal(act.cpu[cpu[0]].level, lvl);
        assert_int_equal(act.cpu[cpu[0]].max_khz, f.h->model.levels[lvl].freq_khz);
        assert_int_equal(act.cpu[cpu[1]].latency_us, (int32_t) next->cpu_max_latency_us[cpu[1]]);

        /* against a previous plan without vCPU 0 (its VM came since) and in another order:
         * pins are matched by key, so only vCPU 0 changed */
        {
                struct plan_vcpu w[5];
                for (unsigned i = 0; i < 5; i++)
                        w[i] = v[5 - i];
                assert_int_equal(plan_compute(f.h, &pol, w, 5, NULL, 0, NULL, 0, &small), 0);
                for (unsigned i = 0; i < 5; i++) {
                        small->vcpu_cpu[i] = cpu[5 - i];
                        small->vcpu_alone[i] = 0;
                        small->vcpu_boost[i] = 0;
                }
                /* vCPUs 1..3 had {cpu1..cpu3}, now {cpu0..cpu2} and {cpu3}; 4 and 5 are released in both */
                assert_int_equal(plan_to_actions(f.h, &pol, small, w, 5, prev, v, 6, &act), 0);
                assert_true(act.pin[0].changed);
                for (unsigned i = 1; i < 6; i++)
                        assert_true(act.pin[i].changed == (i < 4));
        }
        plan_actions_done(&act);
        plan_free(small);
        plan_free(prev);
        plan_free(next);
        free_host(&f);
}

/*
 * A pack set's load is evaluated balanced (the kernel balances a set's vCPUs
 * over its CPUs).  On random loads every plan conserves the demand; each set
 * has a water level lambda that all its CPUs but those of its large vCPUs sit
 * at; a vCPU over the level is pinned alone (vcpu_alone) on a CPU that
 * carries at least its demand and no water, one per CPU (a second large vCPU
 * planned on that CPU stays movable, as one planned beside a large vCPU on
 * its core when the two are over SmtGain); every CPU of a set runs at least
 * the level lambda needs (2 lambda within SmtGain x level headroom on a core whose
 * two threads carry the water); and the balance is what sets the levels: some
 * CPUs run below the level their own vCPUs would need unbalanced.
 */
static void test_pack_set_balance(void **state)
{
        struct host_fixture f;
        struct plan_policy pol, single;
        struct plan_vcpu v[48];
        unsigned below = 0, alone = 0, paired = 0, excluded = 0, host_wide = 0;
        double mw_sets = 0.0, mw_single = 0.0;
        static cpuset_t pins[48];

        (void) state;
        load_host("xeon-spr-2s", "xeon-spr-2s-v0", &f);
        const struct energy_model *m = &f.h->model;
        double gain = m->smt_gain_permille / 1000.0;
        policy(&pol);
        single = pol;
        single.pin_single_cpu = true;
        rng_state = 20261203;
        for (unsigned t = 0; t < 300; t++) {
                unsigned nv = 2 + (unsigned) (rnd() * 46);
                double total = 0.0, sum = 0.0;
                struct plan *p = NULL, *q = NULL;
                _cleanup_free_ double *own = calloc(f.h->n_cpus, sizeof(double));
                _cleanup_free_ uint8_t *big = calloc(f.h->n_cpus, 1);
                _cleanup_free_ double *lambda = calloc(f.h->n_llcs, sizeof(double));
                assert_true(own && big && lambda);
                for (unsigned i = 0; i < nv; i++) {
                        double u = rnd();
                        u = t % 2 ? u * u : u * 0.6; /* half the cases: a few large among many small */
                        v[i] = (struct plan_vcpu) { .key = 100 + i, .vm = 1 + i / 4, .util = u, .cur_cpu = -1 };
                        total += u;
                }
                assert_int_equal(plan_compute(f.h, &pol, v, nv, NULL, 0, NULL, 0, &p), 0);
                assert_int_equal(plan_compute(f.h, &single, v, nv, NULL, 0, NULL, 0, &q), 0);
                mw_sets += p->why.plan_mw;
                mw_single += q->why.plan_mw;
                assert_feasible(f.h, p, &pol);
                for (unsigned c = 0; c < f.h->n_cpus; c++)
                        sum += p->cpu_work[c];
                assert_float_equal(sum, total, 1e-9);
                for (unsigned g = 0; g < f.h->n_llcs; g++)
                        lambda[g] = DBL_MAX;
                for (unsigned i = 0; i < nv; i++) {
                        own[p->vcpu_cpu[i]] += v[i].util;
                        big[p->vcpu_cpu[i]] |= p->vcpu_alone[i];
                }
                for (unsigned c = 0; c < f.h->n_cpus; c++)
                        if (own[c] > 0.0) {
                                unsigned g = f.h->cores[f.h->cpu_core[c]].llc;
                                lambda[g] = MIN(lambda[g], p->cpu_work[c]);
                        }
                for (unsigned c = 0; c < f.h->n_cpus; c++) {
                        if (own[c] <= 0.0)
                                continue;
                        unsigned g = f.h->cores[f.h->cpu_core[c]].llc;
                        if (p->cpu_work[c] > lambda[g] + 1e-9)
                                assert_true(big[c] || p->cpu_work[c] <= own[c] + 1e-9);
                        else
                                assert_false(big[c]); /* a large vCPU's CPU carries no water */
                }
                for (unsigned i = 0; i < nv; i++) {
                        int c = p->vcpu_cpu[i];
                        unsigned g = f.h->cores[f.h->cpu_core[c]].llc;
                        if (p->vcpu_alone[i]) {
                                alone++;
                                assert_true(v[i].util > lambda[g] + 1e-9);
                                assert_true(p->cpu_work[c] >= v[i].util - 1e-9);
                        } else { /* over the level only beside a vCPU pinned alone there (one per CPU), or
                                  * on its core's other thread when the two are more than the core delivers */
                                const struct em_core *co = &f.h->cores[f.h->cpu_core[c]];
                                int sib = co->n_threads == 2 ? co->cpu[co->cpu[0] == c ? 1 : 0] : -1;
                                assert_true(v[i].util <= lambda[g] + 1e-9 || big[c] ||
                                            (sib >= 0 && big[sib] && p->cpu_work[sib] + v[i].util > gain));
                        }
                }
                /* pins: a vCPU alone has its CPU, and only it of the set: the others' set leaves
                 * that CPU out (behind them it would queue, unable to move), unless the set has
                 * no other CPU */
                assert_int_equal(plan_pin_sets(f.h, &pol, p, v, nv, pins), 0);
                bool one_set = p->sets_as_one;
                memset(big, 0, f.h->n_cpus);
                for (unsigned i = 0; i < nv; i++)
                        if (p->vcpu_alone[i]) {
                                assert_int_equal(big[p->vcpu_cpu[i]], 0); /* one per CPU */
                                big[p->vcpu_cpu[i]] = 1;
                                if (one_set)
                                        continue;
                                assert_int_equal(cpuset_count(&pins[i]), 1);
                                assert_true(cpuset_isset(&pins[i], (unsigned) p->vcpu_cpu[i]));
                        }
                if (one_set) {
                        /* saturated (every core awake, a set over its budget): one set for all,
                         * large vCPUs included (test_pin_sets_host_wide) */
                        host_wide++;
                        for (unsigned i = 0; i < nv; i++)
                                if (!cpuset_equal(&pins[i], &pins[0]) || !cpuset_isset(&pins[i], (unsigned) p->vcpu_cpu[i]))
                                        fail_msg("case %u: vCPU %u not pinned to the one set", t, i);
                }
                for (unsigned i = 0; i < nv && !one_set; i++) {
                        if (p->vcpu_alone[i])
                                continue;
                        bool only_big = true;
                        CPUSET_FOREACH(c, &pins[i])
                                only_big &= big[c] != 0;
                        CPUSET_FOREACH(c, &pins[i])
                                if (big[c] && !only_big)
                                        fail_msg("case %u: vCPU %u may run on CPU %d, held by a vCPU alone", t, i, c);
                        /* the rule at work: a CPU of its LLC held alone, left out of its set */
                        unsigned g = f.h->cores[f.h->cpu_core[p->vcpu_cpu[i]]].llc;
                        for (unsigned c = 0; c < f.h->n_cpus; c++)
                                if (big[c] && f.h->cores[f.h->cpu_core[c]].llc == g && !cpuset_isset(&pins[i], c)) {
                                        excluded++;
                                        break;
                                }
                }
                for (unsigned c = 0; c < f.h->n_cpus; c++) {
                        if (own[c] <= 0.0)
                                continue;
                        unsigned g = f.h->cores[f.h->cpu_core[c]].llc, L = p->fdom_level[f.h->cpu_fdom[c]];
                        const struct em_core *co = &f.h->cores[f.h->cpu_core[c]];
                        double hc = pol.level_headroom_pct / 100.0 * m->levels[L].capacity / EM_CAPACITY_SCALE;
                        bool pair = co->n_threads == 2 && own[co->cpu[0]] > 0.0 && own[co->cpu[1]] > 0.0 &&
                                    !big[co->cpu[0]] && !big[co->cpu[1]];
                        double need = pair ? 2.0 * lambda[g] / gain : lambda[g];
                        paired += pair;
                        if (need > hc + 1e-9 && L + 1 < m->n_levels)
                                fail_msg("case %u: cpu %u at level %u below its set's water level %.3f (need %.3f)", t,
                                         c, L, lambda[g], need);
                        if (own[c] > hc + 1e-9 && !big[c])
                                below++; /* its own vCPUs alone would need more: the balance carries them */
                }
                plan_free(p);
                plan_free(q);
        }
        printf("# pack-set balance: 300 random loads: %u CPUs below the level of their own vCPUs, %u vCPUs "
               "alone (%u other vCPUs' sets without their CPUs), %u CPUs on cores whose threads share the water, %u plans "
               "of a saturated host (one set); modelled power %.0f mW with pack sets, "
               "%.0f mW with PinSingleCPU\n", below, alone, excluded, paired, host_wide, mw_sets / 300, mw_single / 300);
        assert_true(below > 0);
        assert_true(alone > 0);
        assert_true(excluded > 0);
        assert_true(paired > 0);
        free_host(&f);
}

static void test_worked_example(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[4];
        struct plan *p = NULL;

        load_host("xeon-spr-2s", "xeon-spr-2s-v0", &f);
        policy(&pol);
        for (unsigned i = 0; i < 4; i++)
                v[i] = (struct plan_vcpu) { .key = i + 1, .vm = 1, .util = 0.10, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, 4, NULL, 0, NULL, 0, &p), 0);
        printf("# worked example: %s\n", p->why.text);
        {
                struct em_breakdown bd;
                double mw = plan_power(f.h, p, &bd);
                printf("# worked example: vCPUs on CPUs %d %d %d %d, levels (kHz)", p->vcpu_cpu[0], p->vcpu_cpu[1],
                       p->vcpu_cpu[2], p->vcpu_cpu[3]);
                for (unsigned c = 0; c < f.h->n_cpus; c++)
                        if (cpuset_isset(&p->active, c))
                                printf(" cpu%u=%u", c, f.h->model.levels[p->fdom_level[f.h->cpu_fdom[c]]].freq_khz);
                printf("; total %.0f mW = active %.0f + core idle %.0f + domains %.0f\n", mw, bd.active_mw, bd.idle_mw,
                       bd.domain_mw);
        }
        /* packed on one package: package 1 has no active CPU */
        for (unsigned c = 0; c < f.t->n_cpus; c++)
                if (cpuset_isset(&p->active, c))
                        assert_int_equal(f.t->cpus[c].package_id, 0);
        assert_true(p->why.plan_mw < p->why.spread_mw);
        plan_free(p);
        free_host(&f);
}

/*
 * LevelHeadroomPercent: a lone vCPU's domain runs at the lowest level whose
 * capacity holds its load within the level headroom (SPR levels: 323/1024 =
 * 0.315 at 1.2 GHz, 431/1024 = 0.421 at 1.6 GHz).  0.28 is within 95% of
 * 1.2 GHz, not within 80% of it.  A CPU whose tracked load is exactly its
 * level's capacity (what a CPU short of capacity shows) is over 95% of it and
 * goes up a level; at 100% it would stay.
 */
static void test_level_headroom(void **state)
{
        static const struct { double util; uint32_t pct; unsigned khz; } cases[] = {
                { 0.28, 80, 1600000 },
                { 0.28, 95, 1200000 },
                { 323.0 / 1024, 95, 1600000 },
                { 323.0 / 1024, 100, 1200000 },
        };
        struct host_fixture f;

        load_host("xeon-spr-2s", "xeon-spr-2s-v0", &f);
        for (unsigned k = 0; k < ELEMENTSOF(cases); k++) {
                struct plan_policy pol;
                struct plan_vcpu v = { .key = 1, .vm = 1, .util = cases[k].util, .cur_cpu = -1 };
                struct plan *p = NULL;
                policy(&pol);
                pol.level_headroom_pct = cases[k].pct;
                assert_int_equal(plan_compute(f.h, &pol, &v, 1, NULL, 0, NULL, 0, &p), 0);
                assert_true(p->vcpu_cpu[0] >= 0);
                unsigned khz = f.h->model.levels[p->fdom_level[f.h->cpu_fdom[p->vcpu_cpu[0]]]].freq_khz;
                if (khz != cases[k].khz)
                        fail_msg("util %.4f at %u%%: %u kHz, expected %u", cases[k].util, cases[k].pct, khz,
                                 cases[k].khz);
                plan_free(p);
        }
        {
                struct plan_policy pol;
                struct plan_vcpu v = { .key = 1, .vm = 1, .util = 0.1, .cur_cpu = -1 };
                struct plan *p = NULL;
                policy(&pol);
                pol.level_headroom_pct = 0;
                assert_int_equal(plan_compute(f.h, &pol, &v, 1, NULL, 0, NULL, 0, &p), -EINVAL);
                pol.level_headroom_pct = 101;
                assert_int_equal(plan_compute(f.h, &pol, &v, 1, NULL, 0, NULL, 0, &p), -EINVAL);
                assert_null(p);
        }
        free_host(&f);
}

/*
 * The turbo table and the power limit are seen by the planner: no plan offers a frequency domain
 * a level its package cannot run at with the plan's load (em_host_level_caps() of the plan is
 * empty), and the plan's modelled power is the model's for those levels.  Xeon fixture
 * (8 cores per package), 3.8 GHz for at most 2 busy cores, 3.2 GHz for at most 4; 12 vCPUs of
 * 0.8 (each needs 3.2 GHz alone on a core).
 */
static void test_plan_sees_limits(void **state)
{
        struct host_fixture f;
        struct energy_model m;
        struct em_host *h = NULL;
        struct plan_vcpu v[12];
        struct plan_policy pol;
        struct plan *p = NULL;
        int caps[2];

        load_host("xeon-spr-2s", "xeon-spr-2s-v0", &f);
        m = f.h->model;
        m.levels[m.n_levels - 1].max_active_cores = 2;
        m.levels[m.n_levels - 2].max_active_cores = 4;
        assert_int_equal(em_host_new(f.t, &m, &h), 0);
        for (unsigned i = 0; i < 12; i++)
                v[i] = (struct plan_vcpu) { .key = i + 1, .vm = i + 1, .util = 0.8, .cur_cpu = -1 };
        policy(&pol);
        assert_int_equal(plan_compute(h, &pol, v, 12, NULL, 0, NULL, 0, &p), 0);
        unsigned top_used = 0;
        for (unsigned fd = 0; fd < h->n_fdoms; fd++)
                top_used = MAX(top_used, p->fdom_level[fd]);
        _cleanup_free_ uint8_t *act = calloc(h->n_cpus, 1);
        assert_non_null(act);
        for (unsigned i = 0; i < p->n_vcpus; i++)
                if (p->vcpu_cpu[i] >= 0)
                        act[p->vcpu_cpu[i]]++;
        struct em_load l = { .cpu_work = p->cpu_work, .cpu_vcpus = act, .cpu_max_latency_us = p->cpu_max_latency_us,
                             .fdom_level = p->fdom_level };
        unsigned capped = em_host_level_caps(h, &l, caps);
        print_message("# plan with a turbo table: highest level %u kHz, packages capped at its levels: %u\n",
                      m.levels[top_used].freq_khz, capped);
        if (capped != 0)
                fail_msg("the plan offers a level its package cannot run at (caps %d %d)", caps[0], caps[1]);
        plan_free(p);
        em_host_free(h);
        free_host(&f);
}

/*
 * Frequency invariance round trip (plan_load_scale, the daemon's load_scale
 * feed): the worked example's plan runs its pCPUs capped at 1.2 GHz, where a
 * vCPU of 0.1 (top-level units) is busy 0.1 x 1024/323 of the time.  Busy
 * time scaled by the capacity it ran at gives back 0.1, and the same plan;
 * unscaled busy time reads as 0.32 per vCPU and plans more.
 */
static void test_load_scale_round_trip(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[4], sv[4], uv[4];
        struct plan *p = NULL, *ps = NULL, *pu = NULL;

        load_host("xeon-spr-2s", "xeon-spr-2s-v0", &f);
        policy(&pol);
        for (unsigned i = 0; i < 4; i++)
                v[i] = (struct plan_vcpu) { .key = i + 1, .vm = 1, .util = 0.10, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, 4, NULL, 0, NULL, 0, &p), 0);
        for (unsigned i = 0; i < 4; i++) {
                unsigned sc = plan_load_scale(f.h, p, i);
                assert_int_equal(sc, 323); /* 1.2 GHz */
                double busy = v[i].util * 1024.0 / sc;
                sv[i] = uv[i] = v[i];
                sv[i].util = busy * sc / 1024.0;
                uv[i].util = busy;
        }
        assert_int_equal(plan_compute(f.h, &pol, sv, 4, NULL, 0, NULL, 0, &ps), 0);
        assert_int_equal(plan_compute(f.h, &pol, uv, 4, NULL, 0, NULL, 0, &pu), 0);
        assert_memory_equal(p->vcpu_cpu, ps->vcpu_cpu, 4 * sizeof(int));
        assert_memory_equal(p->fdom_level, ps->fdom_level, f.h->n_fdoms);
        assert_true(pu->why.plan_mw > p->why.plan_mw + 1.0);
        /* not placed, or a plan of another host: unscaled */
        assert_int_equal(plan_load_scale(f.h, p, 4), 0);
        assert_int_equal(plan_load_scale(f.h, NULL, 0), 0);
        plan_free(p);
        plan_free(ps);
        plan_free(pu);
        free_host(&f);
}

/* ---- best wake / best sleep -------------------------------------------------- */

/* Plan whose only load is excluded vCPUs at the given CPUs (they are never moved). */
static struct plan *plan_with_load(const struct em_host *h, const int *cpus, const double *util, unsigned n)
{
        struct plan_policy pol;
        struct plan_vcpu v[16];
        struct plan *p = NULL;

        policy(&pol);
        for (unsigned i = 0; i < n; i++)
                v[i] = (struct plan_vcpu) { .key = 100 + i, .vm = 9, .mode = PLACE_EXCLUDE, .util = util[i],
                                            .cur_cpu = cpus[i] };
        assert_int_equal(plan_compute(h, &pol, v, n, NULL, 0, NULL, 0, &p), 0);
        for (unsigned i = 0; i < n; i++)
                assert_int_equal(p->vcpu_cpu[i], cpus[i]);
        return p;
}

static void test_best_wake(void **state)
{
        struct host_fixture f;
        struct plan *p;
        int c;

        load_host("xeon-spr-2s", "xeon-spr-2s-v0", &f);
        /* A lightly busy CPU in a package kept awake by another core: its idle SMT
         * sibling is cheapest (no core to wake; the threads seldom overlap). */
        p = plan_with_load(f.h, (int[]) { 0, 1, 17 }, (double[]) { 0.1, 0.9, 0.9 }, 3);
        assert_int_equal(plan_best_wake_cpu(f.h, p), 16);
        plan_free(p);
        /* The same CPU alone: the package sleeps only while all its cores idle, and two
         * threads of one core stretch each other's busy time (SMT contention), so the
         * package is awake longer than with the probe on a second core. */
        p = plan_with_load(f.h, (int[]) { 0 }, (double[]) { 0.1 }, 1);
        c = plan_best_wake_cpu(f.h, p);
        assert_true(c >= 0 && c != 16);
        assert_int_equal(f.t->cpus[c].package_id, 0);
        plan_free(p);
        /* both threads of core 0 busy: a core in the awake package 0, not in package 1 */
        p = plan_with_load(f.h, (int[]) { 0, 16 }, (double[]) { 0.3, 0.3 }, 2);
        c = plan_best_wake_cpu(f.h, p);
        assert_true(c >= 0);
        assert_int_equal(f.t->cpus[c].package_id, 0);
        plan_free(p);
        /* package 1 busy instead: stay in package 1 */
        p = plan_with_load(f.h, (int[]) { 9, 25 }, (double[]) { 0.3, 0.3 }, 2);
        c = plan_best_wake_cpu(f.h, p);
        assert_true(c >= 0);
        assert_int_equal(f.t->cpus[c].package_id, 1);
        plan_free(p);
        free_host(&f);

        load_host("epyc-genoa-1s", "epyc-genoa-v0", &f);
        /* core 10 (CCX 1) full: next in the awake CCX 1, not a sleeping CCX */
        p = plan_with_load(f.h, (int[]) { 10, 42 }, (double[]) { 0.3, 0.3 }, 2);
        c = plan_best_wake_cpu(f.h, p);
        assert_true(c >= 0);
        assert_int_equal(f.t->cpus[c].llc_id, 8);
        plan_free(p);
        /* one busy CPU: its sibling or another core of the same (awake) CCX */
        p = plan_with_load(f.h, (int[]) { 10 }, (double[]) { 0.3 }, 1);
        c = plan_best_wake_cpu(f.h, p);
        assert_true(c >= 0);
        assert_int_equal(f.t->cpus[c].llc_id, 8);
        plan_free(p);
        free_host(&f);
}

static void test_best_sleep(void **state)
{
        struct host_fixture f;
        struct plan *p;

        load_host("xeon-spr-2s", "xeon-spr-2s", &f);
        /* CPUs 0, 1 busy in package 0, CPU 12 alone in package 1: releasing 12 lets package 1 go quiet */
        p = plan_with_load(f.h, (int[]) { 0, 1, 12 }, (double[]) { 0.2, 0.2, 0.2 }, 3);
        assert_int_equal(plan_best_sleep_cpu(f.h, p), 12);
        plan_free(p);
        free_host(&f);

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        /* CCX 0 has 0, 1, 2; CCX 2 only 17: releasing 17 lets CCX 2 sleep */
        p = plan_with_load(f.h, (int[]) { 0, 1, 2, 17 }, (double[]) { 0.2, 0.2, 0.2, 0.2 }, 4);
        assert_int_equal(plan_best_sleep_cpu(f.h, p), 17);
        plan_free(p);
        free_host(&f);
}

/* ---- hysteresis ---------------------------------------------------------------- */

static void set_util(struct plan_vcpu *v, unsigned n, double u)
{
        for (unsigned i = 0; i < n; i++)
                v[i].util = u;
}

static void test_hysteresis(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[12];
        struct plan *p0 = NULL, *p1 = NULL, *p2 = NULL, *p3 = NULL, *p4 = NULL, *p5 = NULL;
        const nsec_t S = NSEC_PER_SEC;

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        policy(&pol);
        pol.max_moves = 0; /* unlimited here; the cap has its own test */
        for (unsigned i = 0; i < 12; i++)
                v[i] = (struct plan_vcpu) { .key = 500 + i, .vm = 1 + i / 4, .util = 0.7, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, 12, NULL, 0, NULL, 0, &p0), 0);
        assert_int_equal(p0->why.decision, PLAN_INITIAL);
        unsigned big = n_active_cpus(p0);
        assert_true(big >= 12);

        /* load drops: a saving is predicted, but nothing moves before the dwell */
        set_util(v, 12, 0.05);
        assert_int_equal(plan_compute(f.h, &pol, v, 12, NULL, 0, p0, 1 * S, &p1), 0);
        assert_int_equal(p1->why.decision, PLAN_SHRINK_PENDING);
        assert_memory_equal(p1->vcpu_cpu, p0->vcpu_cpu, 12 * sizeof(int));
        assert_true(p1->why.target_mw < p1->why.prev_mw);
        assert_int_equal(p1->shrink_pending_since_ns, 1 * S);
        assert_int_equal(plan_compute(f.h, &pol, v, 12, NULL, 0, p1, 6 * S, &p2), 0);
        assert_int_equal(p2->why.decision, PLAN_SHRINK_PENDING);
        assert_memory_equal(p2->vcpu_cpu, p0->vcpu_cpu, 12 * sizeof(int));
        /* dwell over: shrink */
        assert_int_equal(plan_compute(f.h, &pol, v, 12, NULL, 0, p2, 11 * S, &p3), 0);
        assert_int_equal(p3->why.decision, PLAN_SHRINK);
        assert_true(p3->why.moves > 0);
        assert_true(n_active_cpus(p3) < big);
        assert_true(p3->why.plan_mw < p3->why.prev_mw);
        assert_int_equal(p3->shrink_pending_since_ns, -1);

        /* one vCPU waits over budget: grow at once, without any dwell */
        v[3].wait_ratio = v[3].wait_avg = 0.2;
        assert_int_equal(plan_compute(f.h, &pol, v, 12, NULL, 0, p3, 11 * S + 1, &p4), 0);
        assert_int_equal(p4->why.decision, PLAN_GROW);
        assert_int_not_equal(p4->vcpu_cpu[3], p3->vcpu_cpu[3]);
        for (unsigned i = 0; i < 12; i++)
                if (i != 3)
                        assert_int_not_equal(p4->vcpu_cpu[i], p4->vcpu_cpu[3]); /* it got a CPU of its own */
        assert_int_equal(p4->why.forced_by_key, 503);

        /* everything overloads: grow at once, nothing over headroom afterwards */
        v[3].wait_ratio = v[3].wait_avg = 0.0;
        set_util(v, 12, 0.75);
        assert_int_equal(plan_compute(f.h, &pol, v, 12, NULL, 0, p4, 11 * S + 2, &p5), 0);
        assert_int_equal(p5->why.decision, PLAN_GROW);
        assert_feasible(f.h, p5, &pol);
        assert_true(n_active_cpus(p5) >= 12);

        plan_free(p0);
        plan_free(p1);
        plan_free(p2);
        plan_free(p3);
        plan_free(p4);
        plan_free(p5);
        free_host(&f);
}

/*
 * A new vCPU (a guest that just started) stays on the CPU the kernel runs it on until a plan
 * has a reason to move it (issue 14): four idle vCPUs are packed (onto one CPU, batch; two,
 * latency); two new idle ones running on CPUs 20 and 21 are kept there, not first-fit onto the packed CPUs, until the
 * dwell's shrink packs them too (within two periods).  Latency and batch profiles both; a new vCPU whose CPU is
 * unknown still goes first-fit.  Fails with first-fit for every new vCPU.
 */
static void test_new_vcpu_stays(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[7];
        const nsec_t S = NSEC_PER_SEC;

        (void) state;
        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        for (int prof = 0; prof < 2; prof++) {
                struct plan *p0 = NULL, *p1 = NULL, *p2 = NULL;
                policy(&pol);
                if (prof)
                        pol.profile = PLAN_PROFILE_LATENCY;
                for (unsigned i = 0; i < 7; i++)
                        v[i] = (struct plan_vcpu) { .key = 700 + i, .vm = 1 + i / 2, .util = 0.02, .cur_cpu = -1 };
                assert_int_equal(plan_compute(f.h, &pol, v, 4, NULL, 0, NULL, 0, &p0), 0);
                int packed = p0->vcpu_cpu[0];
                uint8_t in_p0[64] = { 0 };
                for (unsigned i = 0; i < 4; i++)
                        in_p0[p0->vcpu_cpu[i]] = 1;
                assert_true(n_active_cpus(p0) <= 2); /* batch: one; latency: two (four on one would queue) */
                assert_false(in_p0[20] || in_p0[21]);
                v[4].cur_cpu = 20;
                v[5].cur_cpu = 21;
                /* v[6]: new, CPU unknown */
                assert_int_equal(plan_compute(f.h, &pol, v, 7, NULL, 0, p0, 1 * S, &p1), 0);
                printf("# new vCPUs (%s): on CPUs %d %d (kernel's 20 21), unknown one on %d, packed CPU %d; %s\n",
                       prof ? "latency" : "batch", p1->vcpu_cpu[4], p1->vcpu_cpu[5], p1->vcpu_cpu[6], packed,
                       plan_decision_to_string(p1->why.decision));
                assert_int_equal(p1->vcpu_cpu[4], 20);
                assert_int_equal(p1->vcpu_cpu[5], 21);
                assert_true(in_p0[p1->vcpu_cpu[6]]);
                for (unsigned i = 0; i < 4; i++)
                        assert_int_equal(p1->vcpu_cpu[i], p0->vcpu_cpu[i]);
                /* the dwell later the shrink packs them (a reason: energy); a move whose destination
                 * would take its set over the budget before the others have left waits a period
                 * (latency: 3 moves, then the last one) */
                assert_int_equal(plan_compute(f.h, &pol, v, 7, NULL, 0, p1, 1 * S + pol.shrink_dwell_ns + 1, &p2), 0);
                if (n_active_cpus(p2) >= n_active_cpus(p1)) {
                        struct plan *p3 = NULL;
                        printf("# new vCPUs (%s): after the dwell %s\n", prof ? "latency" : "batch", p2->why.text);
                        assert_int_equal(plan_compute(f.h, &pol, v, 7, NULL, 0, p2, 2 * S + pol.shrink_dwell_ns + 1,
                                                      &p3), 0);
                        plan_free(p2);
                        p2 = p3;
                }
                printf("# new vCPUs (%s): %s\n", prof ? "latency" : "batch", p2->why.text);
                assert_int_equal(p2->why.decision, PLAN_SHRINK);
                assert_true(n_active_cpus(p2) < n_active_cpus(p1));
                plan_free(p0);
                plan_free(p1);
                plan_free(p2);
        }
        free_host(&f);
}

/*
 * The wait that grows the plan (plan_vcpu_wait): the decayed wait over the
 * budget; one period's over the budget when the CPU was overloaded in that
 * period (last-period load over the packing headroom); one period's over
 * WAIT_SEVERE_FACTOR x the budget.  One noisy period on a CPU with room leaves
 * the packed plan as it is.
 */
static void test_wait_filter(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[12];
        struct plan *p0 = NULL, *p1 = NULL;
        const double b = 0.05;
        const struct {
                double ratio, avg, last; /* v[3]'s wait_ratio, wait_avg; every vCPU's util_last */
                bool grows;
        } cases[] = {
                { 3.0 * b, 0.4 * b, 0.05, false },   /* one period at 3x the budget, room: noise */
                { 3.0 * b, 0.4 * b, 0.5, true },     /* the same on CPUs the last period overloaded */
                { 1.1 * b, 0.4 * b, 0.5, true },     /* just over the budget, overloaded */
                { 0.9 * b, 0.4 * b, 0.5, false },    /* overloaded, no wait over the budget */
                { 0.9 * WAIT_SEVERE_FACTOR * b, 0.9 * b, 0.05, false },
                { 1.1 * WAIT_SEVERE_FACTOR * b, 0.4 * b, 0.05, true }, /* one period at 4.4x: at once */
                { 0.5 * b, 1.2 * b, 0.05, true },    /* the decayed wait over the budget */
                { NAN, NAN, NAN, false },
        };

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        policy(&pol);
        pol.wait_budget = b;
        pol.max_moves = 0;
        for (unsigned i = 0; i < 12; i++)
                v[i] = (struct plan_vcpu) { .key = 700 + i, .vm = 1 + i / 4, .util = 0.05, .util_last = 0.05,
                                            .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, 12, NULL, 0, NULL, 0, &p0), 0);
        assert_true(n_active_cpus(p0) < 12); /* packed: the vCPUs share CPUs */
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
                v[3].wait_ratio = cases[k].ratio;
                v[3].wait_avg = cases[k].avg;
                for (unsigned i = 0; i < 12; i++)
                        v[i].util_last = cases[k].last;
                assert_true((plan_vcpu_wait(&pol, &v[3], cases[k].last > 0.3) > 0.0) == cases[k].grows);
                assert_int_equal(plan_compute(f.h, &pol, v, 12, NULL, 0, p0, NSEC_PER_SEC, &p1), 0);
                if (cases[k].grows) {
                        assert_int_equal(p1->why.decision, PLAN_GROW);
                        assert_int_not_equal(p1->vcpu_cpu[3], p0->vcpu_cpu[3]);
                } else {
                        assert_int_not_equal(p1->why.decision, PLAN_GROW);
                        assert_memory_equal(p1->vcpu_cpu, p0->vcpu_cpu, 12 * sizeof(int));
                }
                plan_free(p1);
                p1 = NULL;
        }
        /* the wait counted as demand is the one that triggered */
        v[3].wait_ratio = 0.3;
        v[3].wait_avg = 0.02;
        assert_true(fabs(plan_vcpu_wait(&pol, &v[3], false) - 0.3) < 1e-12);
        v[3].wait_ratio = 0.1;
        v[3].wait_avg = 0.07;
        assert_true(fabs(plan_vcpu_wait(&pol, &v[3], false) - 0.07) < 1e-12);
        assert_true(fabs(plan_vcpu_wait(&pol, &v[3], true) - 0.1) < 1e-12);
        v[3].wait_avg = 0.02;
        assert_true(fabs(plan_vcpu_wait(&pol, &v[3], true) - 0.1) < 1e-12);
        assert_true(plan_vcpu_wait(&pol, &v[3], false) == 0.0);
        plan_free(p0);
        free_host(&f);
        (void) state;
}

/*
 * A shrink reaches its target's energy: loads drop on a spread plan; after the
 * dwell the plan gets within 1% of the target's power in a few periods, in
 * every run.  (Sending a vCPU whose target CPU is still full to another CPU
 * the target keeps busy, tried against a shrink that stalled in the
 * simulator, stalled here instead: 1.4% over the target after 40 periods in
 * one run of eight.)
 */
static void test_shrink_reaches_target(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[96];
        struct plan *prev = NULL, *p = NULL;
        const nsec_t S = NSEC_PER_SEC;
        unsigned reached = 0;

        load_host("epyc-genoa-1s", "epyc-genoa-v0", &f);
        policy(&pol);
        rng_state = 11;
        for (unsigned run = 0; run < 8; run++) {
                unsigned n = 48 + 6 * run, t;
                for (unsigned i = 0; i < n; i++)
                        v[i] = (struct plan_vcpu) { .key = 900 + i, .vm = 1 + i, .util = 0.3 + 0.3 * rnd(),
                                                    .cur_cpu = -1 };
                assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, NULL, 0, &prev), 0);
                for (unsigned i = 0; i < n; i++)
                        v[i].util = 0.02 + 0.2 * rnd();
                for (t = 1; t <= 40; t++) {
                        assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, prev, (nsec_t) t * S, &p), 0);
                        assert_feasible(f.h, p, &pol);
                        plan_free(prev);
                        prev = p;
                        p = NULL;
                        if (t > 10 && prev->why.plan_mw <= 1.01 * prev->why.target_mw)
                                break;
                }
                printf("# shrink run %u: %u vCPUs, %u periods, plan %.0f mW, target %.0f mW, %u active CPUs\n", run, n,
                       t, prev->why.plan_mw, prev->why.target_mw, n_active_cpus(prev));
                reached += t <= 40;
                plan_free(prev);
                prev = NULL;
        }
        assert_int_equal(reached, 8);
        free_host(&f);
        (void) state;
}

/* A saving smaller than the move cost over the dwell is not worth moving for. */
static void test_move_cost(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[2];
        struct plan *p0 = NULL, *p1 = NULL;

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        policy(&pol);
        f.h->model.migration_cost_uj = UINT32_MAX; /* moving is never worth it */
        v[0] = (struct plan_vcpu) { .key = 1, .util = 0.7, .cur_cpu = -1 };
        v[1] = (struct plan_vcpu) { .key = 2, .util = 0.7, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, 2, NULL, 0, NULL, 0, &p0), 0);
        v[0].util = v[1].util = 0.01;
        assert_int_equal(plan_compute(f.h, &pol, v, 2, NULL, 0, p0, 100 * NSEC_PER_SEC, &p1), 0);
        assert_int_equal(p1->why.decision, PLAN_KEEP);
        assert_memory_equal(p1->vcpu_cpu, p0->vcpu_cpu, 2 * sizeof(int));
        plan_free(p0);
        plan_free(p1);
        free_host(&f);
}

static void test_move_cap(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[16];
        struct plan *p0 = NULL, *p1 = NULL, *p2 = NULL, *p3 = NULL;

        load_host("xeon-spr-2s", "xeon-spr-2s", &f);
        policy(&pol);
        pol.shrink_dwell_ns = 0; /* isolate the cap */
        pol.max_moves = 2;
        for (unsigned i = 0; i < 16; i++)
                v[i] = (struct plan_vcpu) { .key = 70 + i, .util = 0.7, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, 16, NULL, 0, NULL, 0, &p0), 0);
        set_util(v, 16, 0.02);
        assert_int_equal(plan_compute(f.h, &pol, v, 16, NULL, 0, p0, NSEC_PER_SEC, &p1), 0);
        assert_int_equal(p1->why.decision, PLAN_SHRINK);
        assert_int_equal(p1->why.moves, 2);
        assert_true(p1->why.moves_deferred > 0);
        assert_true(p1->shrink_pending_since_ns >= 0); /* continues next period */
        unsigned moved = 0;
        for (unsigned i = 0; i < 16; i++)
                moved += p1->vcpu_cpu[i] != p0->vcpu_cpu[i];
        assert_int_equal(moved, 2);
        assert_int_equal(plan_compute(f.h, &pol, v, 16, NULL, 0, p1, 2 * NSEC_PER_SEC, &p2), 0);
        assert_int_equal(p2->why.decision, PLAN_SHRINK);
        assert_true(p2->why.moves <= 2 && p2->why.moves > 0);
        assert_true(p2->why.plan_mw < p1->why.plan_mw);
        /* grow is capped too */
        set_util(v, 16, 0.9);
        assert_int_equal(plan_compute(f.h, &pol, v, 16, NULL, 0, p2, 3 * NSEC_PER_SEC, &p3), 0);
        assert_int_equal(p3->why.decision, PLAN_GROW);
        assert_true(p3->why.moves <= 2);
        plan_free(p0);
        plan_free(p1);
        plan_free(p2);
        plan_free(p3);
        free_host(&f);
}

/*
 * MoveCooldown: a shrink does not move a vCPU a plan moved less than the cooldown ago, nor empty the
 * CPU it is on; a grow still moves it at once.  Twelve idle vCPUs packed, one waits: the grow moves it
 * (the plan keeps when); quiet again, the shrink that would take it back is held, and shown as held by
 * the cooldown, until the cooldown is over (the batch profile's default, 60 s), then made.  With
 * MoveCooldown = 0 the same shrink is made once the dwell is over, and the latency profile's default is
 * 0.  Fails with the cooldown not applied, or its time not carried from plan to plan.
 */
static unsigned cooldown_run(const struct plan_policy *pol, nsec_t *back_at, unsigned *cooling_plans)
{
        struct host_fixture f;
        struct plan_vcpu v[12];
        struct plan *prev = NULL, *p = NULL;
        const nsec_t S = NSEC_PER_SEC;
        unsigned active0;
        int grown_to;

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        for (unsigned i = 0; i < 12; i++)
                v[i] = (struct plan_vcpu) { .key = 500 + i, .vm = 1 + i / 4, .util = 0.05, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, pol, v, 12, NULL, 0, NULL, 0, &prev), 0);
        active0 = n_active_cpus(prev);
        for (unsigned i = 0; i < 12; i++)
                assert_true(prev->vcpu_moved_ns[i] == -1);
        /* one vCPU waits: grow at once, whatever the cooldown */
        v[3].wait_ratio = v[3].wait_avg = 0.2;
        assert_int_equal(plan_compute(f.h, pol, v, 12, NULL, 0, prev, 1 * S, &p), 0);
        assert_int_equal(p->why.decision, PLAN_GROW);
        assert_int_not_equal(p->vcpu_cpu[3], prev->vcpu_cpu[3]);
        for (unsigned i = 0; i < 12; i++)
                assert_true(p->vcpu_moved_ns[i] == (p->vcpu_cpu[i] != prev->vcpu_cpu[i] ? 1 * S : -1));
        grown_to = p->vcpu_cpu[3];
        assert_true(n_active_cpus(p) > active0);
        plan_free(prev);
        prev = p;
        /* quiet again: one plan a second for 70 s */
        v[3].wait_ratio = v[3].wait_avg = 0.0;
        *back_at = -1;
        *cooling_plans = 0;
        for (nsec_t t = 2 * S; t <= 70 * S; t += S) {
                assert_int_equal(plan_compute(f.h, pol, v, 12, NULL, 0, prev, t, &p), 0);
                *cooling_plans += p->why.moves_cooling > 0;
                if (p->why.moves_cooling)
                        assert_non_null(strstr(p->why.text, "held by the move cooldown"));
                if (*back_at < 0 && p->vcpu_cpu[3] != grown_to)
                        *back_at = t;
                plan_free(prev);
                prev = p;
        }
        unsigned active = n_active_cpus(prev);
        plan_free(prev);
        free_host(&f);
        return active;
}

static void test_move_cooldown(void **state)
{
        struct plan_policy pol;
        nsec_t back_at;
        unsigned cooling, active;

        (void) state;
        policy(&pol); /* batch, MoveCooldown the profile's */
        pol.max_moves = 0;
        active = cooldown_run(&pol, &back_at, &cooling);
        print_message("# batch, default cooldown: taken back at %.0f s, %u plans held by the cooldown\n",
                      (double) back_at / NSEC_PER_SEC, cooling);
        assert_true(back_at >= 61 * NSEC_PER_SEC && back_at <= 63 * NSEC_PER_SEC);
        assert_true(cooling >= 40); /* from the end of the dwell (12 s) to 61 s */
        assert_true(active <= 2);

        pol.move_cooldown_ns = 0;
        active = cooldown_run(&pol, &back_at, &cooling);
        print_message("# batch, MoveCooldown = 0: taken back at %.0f s\n", (double) back_at / NSEC_PER_SEC);
        assert_true(back_at > 0 && back_at <= 1 * NSEC_PER_SEC + pol.shrink_dwell_ns + 2 * NSEC_PER_SEC);
        assert_int_equal(cooling, 0);
        assert_true(active <= 2);

        pol.move_cooldown_ns = 30 * NSEC_PER_SEC;
        (void) cooldown_run(&pol, &back_at, &cooling);
        assert_true(back_at >= 31 * NSEC_PER_SEC && back_at <= 33 * NSEC_PER_SEC);

        plan_policy_defaults(&pol); /* latency: the profile's cooldown is 0 */
        pol.max_moves = 0;
        assert_true(pol.move_cooldown_ns == -1);
        (void) cooldown_run(&pol, &back_at, &cooling);
        print_message("# latency, default cooldown: taken back at %.0f s\n", (double) back_at / NSEC_PER_SEC);
        assert_int_equal(cooling, 0);
}

/* ---- determinism and modes -------------------------------------------------------- */

static void test_determinism(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[100];
        struct plan *a = NULL, *b = NULL, *a2 = NULL, *b2 = NULL;

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        policy(&pol);
        rng_state = 7;
        for (unsigned i = 0; i < 100; i++)
                v[i] = (struct plan_vcpu) { .key = 1 + i * 7919 % 1000, .vm = i / 5, .util = rnd() * 0.5,
                                            .wait_ratio = rnd() * 0.02, .cur_cpu = -1 };
        v[10].util = v[11].util = v[12].util; /* ties broken by key */
        assert_int_equal(plan_compute(f.h, &pol, v, 100, NULL, 0, NULL, 5, &a), 0);
        assert_int_equal(plan_compute(f.h, &pol, v, 100, NULL, 0, NULL, 5, &b), 0);
        assert_true(plan_equal(a, b));
        assert_memory_equal(a->vcpu_cpu, b->vcpu_cpu, 100 * sizeof(int));
        assert_memory_equal(a->fdom_level, b->fdom_level, a->n_fdoms);
        assert_memory_equal(a->cpu_work, b->cpu_work, a->n_cpus * sizeof(double));
        assert_memory_equal(&a->why, &b->why, sizeof(a->why));
        /* and with a previous plan */
        for (unsigned i = 0; i < 100; i++)
                v[i].util *= 0.3;
        assert_int_equal(plan_compute(f.h, &pol, v, 100, NULL, 0, a, 20 * NSEC_PER_SEC, &a2), 0);
        assert_int_equal(plan_compute(f.h, &pol, v, 100, NULL, 0, b, 20 * NSEC_PER_SEC, &b2), 0);
        assert_true(plan_equal(a2, b2));
        assert_false(plan_equal(a, a2));
        /* and through a grow next to a due shrink (waits over budget, dwell over) */
        struct plan *a3 = NULL, *b3 = NULL;
        for (unsigned i = 0; i < 100; i++)
                v[i].wait_ratio = v[i].wait_avg = i % 7 == 0 ? 0.3 : 0.0;
        assert_int_equal(plan_compute(f.h, &pol, v, 100, NULL, 0, a2, 40 * NSEC_PER_SEC, &a3), 0);
        assert_int_equal(plan_compute(f.h, &pol, v, 100, NULL, 0, b2, 40 * NSEC_PER_SEC, &b3), 0);
        assert_int_equal(a3->why.decision, PLAN_GROW);
        assert_true(plan_equal(a3, b3));
        plan_free(a);
        plan_free(b);
        plan_free(a2);
        plan_free(b2);
        plan_free(a3);
        plan_free(b3);
        free_host(&f);
}

/*
 * The grow scores one empty CPU per class of identical ones (placement.c
 * wake_class) where it scored them all: the plans must be the same, bit for
 * bit.  Random grows (a first plan, then a fifth of the vCPUs waiting) on both
 * fixture hosts and on synthetic 2 x 20-core hosts with every frequency scope
 * (core, per-thread policy, package, policies of two cores, some across two
 * LLCs, and a policy that splits a core: found by review, where the classes
 * were wrong), one-thread cores, MaxActiveCores, a package power limit, wake
 * energies and the all-packages rule; vCPUs packed, spread, dedicated and
 * excluded, NUMA-bound, with per-VM budgets, boosts, perf and util floors;
 * both profiles, PinSingleCPU, idle limits, the move cap (the review's fuzz).
 */
static unsigned wake_runs, wake_woken;

static void wake_classes_on(const struct em_host *h, unsigned nv, uint64_t seed)
{
        struct plan_policy pol;
        _cleanup_free_ struct plan_vcpu *v = calloc(nv, sizeof(*v));
        _cleanup_free_ struct plan_hint *hn = calloc(nv, sizeof(*hn));
        _cleanup_free_ int *cpus = calloc(h->n_cpus, sizeof(int));
        struct plan *p0 = NULL, *a = NULL, *b = NULL;
        size_t nh = 0;
        unsigned ncpu = 0;
        double mean;

        assert_true(v && hn && cpus);
        for (unsigned x = 0; x < h->n_cpus; x++)
                if (h->cpu_core[x] >= 0)
                        cpus[ncpu++] = (int) x;
        rng_state = seed;
        plan_policy_defaults(&pol);
        pol.profile = rnd() < 0.5 ? PLAN_PROFILE_LATENCY : PLAN_PROFILE_BATCH;
        pol.pin_single_cpu = rnd() < 0.15;
        pol.active_max_latency_us = rnd() < 0.6 ? EM_LATENCY_ANY : rnd() < 0.5 ? 2 : 300;
        pol.max_moves = rnd() < 0.5 ? 16 : 0;
        mean = (0.1 + 0.5 * rnd()) * h->n_cores / nv;
        for (unsigned i = 0; i < nv; i++) {
                double r = rnd();
                v[i] = (struct plan_vcpu) { .key = 1 + i, .vm = i / 4, .util = MIN(1.0, 2.0 * mean * rnd()),
                                            .wait_ratio = 0.01 * rnd(), .cur_cpu = -1 };
                v[i].mode = r < 0.78 ? PLACE_PACK : r < 0.86 ? PLACE_SPREAD : r < 0.92 ? PLACE_DEDICATED : PLACE_EXCLUDE;
                if (v[i].mode == PLACE_EXCLUDE)
                        v[i].cur_cpu = cpus[(unsigned) (rnd() * ncpu)];
                if (rnd() < 0.1)
                        v[i].nodes = 1u << (unsigned) (rnd() * 2);
                if (rnd() < 0.1)
                        v[i].queue_budget = 0.002;
                if (rnd() < 0.15) {
                        hn[nh] = (struct plan_hint) { .key = v[i].key };
                        r = rnd();
                        if (r < 0.3)
                                hn[nh].boost = true;
                        else if (r < 0.8)
                                hn[nh].perf_floor = rnd();
                        else
                                hn[nh].util_floor = rnd() * 0.5;
                        nh++;
                }
        }
        assert_int_equal(plan_compute(h, &pol, v, nv, hn, nh, NULL, 0, &p0), 0);
        for (unsigned i = 0; i < nv; i++) {
                if (v[i].mode != PLACE_EXCLUDE)
                        v[i].cur_cpu = p0->vcpu_cpu[i];
                if (rnd() < 0.2)
                        v[i].wait_avg = v[i].wait_ratio = 0.3;
                if (rnd() < 0.05)
                        v[i].util = MIN(1.0, v[i].util * 3);
        }
        plan_test_wake_exhaustive(true);
        assert_int_equal(plan_compute(h, &pol, v, nv, hn, nh, p0, NSEC_PER_SEC, &a), 0);
        plan_test_wake_exhaustive(false);
        assert_int_equal(plan_compute(h, &pol, v, nv, hn, nh, p0, NSEC_PER_SEC, &b), 0);
        if (!plan_equal(a, b))
                fail_msg("plans differ: seed %" PRIu64 ", %u vCPUs", seed, nv);
        wake_runs++;
        wake_woken += a->why.forced_wake_cpu >= 0;
        plan_free(p0);
        plan_free(a);
        plan_free(b);
}

enum { WK_CORE, WK_POLICY, WK_PACKAGE, WK_ONE_THREAD, WK_LIMITS, WK_SPLIT_CORE, WK_PAIRS, WK_PAIRS_SPAN };

/* cores k and k+1's CPUs (and, with split, only thread 1 of k+1) in the policy of CPU k */
static void wake_policy_of(struct topology *t, unsigned nc, unsigned k, bool split)
{
        cpuset_t s;
        unsigned cpu[4] = { k, nc + k, nc + k + 1, k + 1 };
        unsigned n = split ? 3 : 4;
        cpuset_zero(&s);
        for (unsigned x = 0; x < n; x++)
                cpuset_set(&s, cpu[x]);
        for (unsigned x = 0; x < n; x++) {
                t->policies[cpu[x]].related_cpus = s;
                t->cpus[cpu[x]].policy = (int) k;
        }
}

static void wake_classes_host(unsigned variant, unsigned n_seeds)
{
        struct topology *t = NULL;
        struct energy_model m;
        struct em_host *h = NULL;
        unsigned nc = 40;

        assert_int_equal(topology_synthetic(2, 20, &t), 0);
        if (variant == WK_ONE_THREAD)
                for (unsigned k = 0; k < nc; k += 3)
                        t->cpus[nc + k].online = false;
        for (unsigned k = variant == WK_PAIRS_SPAN ? 1 : 0; k + 1 < nc; k += 2)
                if (variant == WK_SPLIT_CORE || variant == WK_PAIRS || variant == WK_PAIRS_SPAN)
                        wake_policy_of(t, nc, k, variant == WK_SPLIT_CORE);
        assert_int_equal(energy_model_from_topology(t, &m), 0);
        if (variant != WK_CORE && variant != WK_LIMITS)
                m.freq_scope = variant == WK_PACKAGE ? EM_FREQ_PACKAGE : EM_FREQ_POLICY;
        if (variant == WK_LIMITS || variant == WK_ONE_THREAD || variant == WK_POLICY) {
                unsigned n = m.n_levels;
                m.levels[n - 1].max_active_cores = 2;
                m.levels[n - 2].max_active_cores = 5;
                m.levels[n - 3].max_active_cores = 9;
                m.package_power_limit_mw = energy_model_min_power_limit(&m) + 12000;
                m.idle[m.n_idle - 1].wake_energy_uj = 20;
                m.domain[EM_DOMAIN_LLC].wake_energy_uj = 100;
                m.domain[EM_DOMAIN_PACKAGE].wake_energy_uj = 200;
                m.platform_busy_mw = 30000;
                m.package_idle_all_packages = variant != WK_ONE_THREAD;
        }
        assert_int_equal(em_host_new(t, &m, &h), 0);
        for (unsigned s = 0; s < n_seeds; s++)
                wake_classes_on(h, 8 + s * 7 % 90, 1000 * variant + s);
        em_host_free(h);
        topology_free(t);
}

static void test_wake_classes(void **state)
{
        static const char *const hosts[][2] = { { "xeon-spr-2s", "xeon-spr-2s" }, { "epyc-genoa-1s", "epyc-genoa" } };

        for (unsigned x = 0; x < ELEMENTSOF(hosts); x++) {
                struct host_fixture f;
                load_host(hosts[x][0], hosts[x][1], &f);
                for (unsigned s = 0; s < 10; s++)
                        wake_classes_on(f.h, 16 + 37 * s % 200, 777 + 13 * x + s);
                free_host(&f);
        }
        for (unsigned var = WK_CORE; var <= WK_PAIRS_SPAN; var++)
                wake_classes_host(var, 40);
        print_message("wake classes: %u of %u grows woke a CPU\n", wake_woken, wake_runs);
        assert_true(wake_woken >= wake_runs / 2);
}

/*
 * The latency profile at its edges (found by review): at QueueBudgetPercent
 * 100 a saturated set (predicted share exactly 1) was within the budget, so
 * the first plan put all 64 vCPUs (19.2 CPUs of demand) on one CPU; and with
 * a dedicated vCPU on every core the packed vCPUs were left unplaced
 * (vcpu_cpu -1: never pinned, and the plan never settled).
 */
static void test_latency_edges(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[72];
        struct plan *p = NULL;
        unsigned n = 0;

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        plan_policy_defaults(&pol); /* the latency profile */
        pol.queue_budget = 1.0;
        for (unsigned i = 0; i < 64; i++)
                v[n++] = (struct plan_vcpu) { .key = 100 + i, .vm = 1 + i / 8, .mode = PLACE_PACK, .util = 0.3,
                                              .util_last = 0.3, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, NULL, 0, &p), 0);
        for (unsigned c = 0; c < p->n_cpus; c++)
                assert_true(p->cpu_work[c] <= 1.0 + 1e-9);
        assert_true(p->why.n_active >= 20);
        plan_free(p);
        p = NULL;

        /* 32 cores, 32 dedicated vCPUs and 8 packed ones */
        n = 0;
        for (unsigned i = 0; i < 32; i++)
                v[n++] = (struct plan_vcpu) { .key = 200 + i, .vm = 10, .mode = PLACE_DEDICATED, .util = 0.2,
                                              .util_last = 0.2, .cur_cpu = -1 };
        for (unsigned i = 0; i < 8; i++)
                v[n++] = (struct plan_vcpu) { .key = 300 + i, .vm = 11, .mode = PLACE_PACK, .util = 0.05,
                                              .util_last = 0.05, .cur_cpu = -1 };
        plan_policy_defaults(&pol);
        assert_int_equal(f.h->n_cores, 32);
        assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, NULL, 0, &p), 0);
        for (unsigned i = 0; i < n; i++)
                assert_true(p->vcpu_cpu[i] >= 0);
        plan_free(p);
        free_host(&f);
}

static void test_modes(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[12];
        struct plan *p = NULL, *p2 = NULL;
        unsigned n = 0;

        load_host("xeon-spr-2s", "xeon-spr-2s", &f);
        policy(&pol);
        pol.shrink_dwell_ns = 0;
        /* VM 1 dedicated (2 vCPUs), VM 2 spread (4), VM 3 excluded on CPU 5, VM 4 packed (5) */
        for (unsigned i = 0; i < 2; i++)
                v[n++] = (struct plan_vcpu) { .key = 10 + i, .vm = 1, .mode = PLACE_DEDICATED, .util = 0.1, .cur_cpu = -1 };
        for (unsigned i = 0; i < 4; i++)
                v[n++] = (struct plan_vcpu) { .key = 20 + i, .vm = 2, .mode = PLACE_SPREAD, .util = 0.1, .cur_cpu = -1 };
        v[n++] = (struct plan_vcpu) { .key = 30, .vm = 3, .mode = PLACE_EXCLUDE, .util = 0.3, .cur_cpu = 5 };
        for (unsigned i = 0; i < 5; i++)
                v[n++] = (struct plan_vcpu) { .key = 40 + i, .vm = 4, .mode = PLACE_PACK, .util = 0.05, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, NULL, 0, &p), 0);

        /* dedicated: own core, nobody on either thread */
        for (unsigned i = 0; i < 2; i++) {
                int c = p->vcpu_cpu[i], k = f.h->cpu_core[c];
                for (unsigned j = 0; j < n; j++)
                        if (j != i && p->vcpu_cpu[j] >= 0)
                                assert_int_not_equal(f.h->cpu_core[p->vcpu_cpu[j]], k);
        }
        /* spread: distinct cores, alone on their CPU, over both packages */
        unsigned pk[2] = { 0, 0 };
        for (unsigned i = 2; i < 6; i++) {
                int c = p->vcpu_cpu[i];
                for (unsigned j = 0; j < n; j++)
                        if (j != i && p->vcpu_cpu[j] >= 0)
                                assert_int_not_equal(p->vcpu_cpu[j], c);
                for (unsigned j = 2; j < 6; j++)
                        if (j != i)
                                assert_int_not_equal(f.h->cpu_core[p->vcpu_cpu[j]], f.h->cpu_core[c]);
                pk[f.t->cpus[c].package_id]++;
        }
        assert_true(pk[0] >= 1);
        assert_true(pk[1] >= 1);
        /* exclude: untouched, its CPU counted active */
        assert_int_equal(p->vcpu_cpu[6], 5);
        assert_true(cpuset_isset(&p->active, 5));
        /* packed: few CPUs */
        unsigned distinct = 0;
        for (unsigned i = 7; i < n; i++) {
                bool seen = false;
                for (unsigned j = 7; j < i; j++)
                        seen |= p->vcpu_cpu[j] == p->vcpu_cpu[i];
                distinct += !seen;
        }
        assert_true(distinct <= 2);

        /* later periods: the excluded vCPU is never moved, even when it waits */
        v[6].wait_ratio = v[6].wait_avg = 0.5;
        v[6].cur_cpu = 5;
        assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, p, NSEC_PER_SEC, &p2), 0);
        assert_int_equal(p2->vcpu_cpu[6], 5);
        plan_free(p);
        plan_free(p2);
        free_host(&f);
}

static void test_hints(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[1] = { { .key = 1, .util = 0.05, .cur_cpu = -1 } };
        struct plan_hint hint = { .key = 1, .util_floor = 0.0, .boost = true };
        struct plan *p = NULL, *q = NULL;

        load_host("xeon-spr-2s", "xeon-spr-2s", &f);
        policy(&pol);
        assert_int_equal(plan_compute(f.h, &pol, v, 1, NULL, 0, NULL, 0, &p), 0);
        assert_int_equal(plan_compute(f.h, &pol, v, 1, &hint, 1, NULL, 0, &q), 0);
        unsigned fd = f.h->cpu_fdom[q->vcpu_cpu[0]];
        assert_int_equal(q->fdom_level[fd], f.h->model.n_levels - 1);
        assert_true(p->fdom_level[f.h->cpu_fdom[p->vcpu_cpu[0]]] < f.h->model.n_levels - 1);
        /* ... and its pCPU stays out of deep idle for the boost (shallowest state's latency) */
        assert_int_equal(q->cpu_max_latency_us[q->vcpu_cpu[0]], f.h->model.idle[0].exit_latency_us);
        assert_int_equal(p->cpu_max_latency_us[p->vcpu_cpu[0]], EM_LATENCY_ANY);
        plan_free(p);
        plan_free(q);

        /* util floors (go_faster): the planned work is the floor; several hints for one key merge */
        struct plan_hint hs[3] = {
                { .key = 7, .util_floor = 0.6 },
                { .key = 1, .util_floor = 0.3 },
                { .key = 1, .util_floor = 0.5 },
        };
        assert_int_equal(plan_compute(f.h, &pol, v, 1, hs, 3, NULL, 0, &p), 0);
        assert_true(p->cpu_work[p->vcpu_cpu[0]] > 0.5 - 1e-12 && p->cpu_work[p->vcpu_cpu[0]] < 0.5 + 1e-12);
        plan_free(p);
        free_host(&f);
}

/*
 * Performance floors (a guest's LEVEL, a BOOST capped by MaxLevel): a floor raises the
 * domain's level, never the planned work; a floor under the lowest level's capacity (an idle
 * guest's agent at its lowest step, 128) changes nothing: issue 16 (13), the same plan as
 * without the hint (advisory trust).
 */
static void test_perf_floor(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[3] = {
                { .key = 1, .vm = 1, .util = 0.02, .cur_cpu = -1 },
                { .key = 2, .vm = 1, .util = 0.03, .cur_cpu = -1 },
                { .key = 3, .vm = 2, .util = 0.20, .cur_cpu = -1 },
        };
        struct plan *p = NULL, *q = NULL;
        const struct energy_model *m;
        unsigned top, want = 0;
        double low;

        /* the model before calibration: with it the 0.2 vCPU runs below half speed
         * unhinted, so the half-speed floor below has something to raise */
        load_host("xeon-spr-2s", "xeon-spr-2s-v0", &f);
        m = &f.h->model;
        top = m->n_levels - 1;
        low = (double) m->levels[0].capacity / m->levels[top].capacity;
        assert_true(low > 128.0 / 1024.0); /* the fixture has a lowest level above the idle step */
        policy(&pol);
        assert_int_equal(plan_compute(f.h, &pol, v, 3, NULL, 0, NULL, 0, &p), 0);

        /* idle guest: floors of 128/1024 on both its vCPUs: the plan is the same */
        struct plan_hint idle[2] = { { .key = 1, .perf_floor = 128.0 / 1024 }, { .key = 2, .perf_floor = 128.0 / 1024 } };
        assert_int_equal(plan_compute(f.h, &pol, v, 3, idle, 2, NULL, 0, &q), 0);
        assert_true(plan_equal(p, q));
        assert_true(fabs(plan_power(f.h, p, NULL) - plan_power(f.h, q, NULL)) < 1e-9);
        plan_free(q);

        /* full speed asked: the domain at the top level, the work unchanged */
        struct plan_hint full = { .key = 1, .perf_floor = 1.0 };
        assert_int_equal(plan_compute(f.h, &pol, v, 3, &full, 1, NULL, 0, &q), 0);
        assert_int_equal(q->fdom_level[f.h->cpu_fdom[q->vcpu_cpu[0]]], top);
        {       /* the placement may change (the floor costs energy where it lands), the work not */
                double wp = 0.0, wq = 0.0;
                for (unsigned c = 0; c < q->n_cpus; c++) {
                        wp += p->cpu_work[c];
                        wq += q->cpu_work[c];
                }
                assert_true(fabs(wq - wp) < 1e-9);
        }
        assert_true(p->fdom_level[f.h->cpu_fdom[p->vcpu_cpu[0]]] < top);
        /* the pCPU's idle is not limited (that is a boost's) */
        assert_int_equal(q->cpu_max_latency_us[q->vcpu_cpu[0]], p->cpu_max_latency_us[p->vcpu_cpu[0]]);
        /* every domain of its pack set runs at the floor */
        for (unsigned c = 0; c < q->n_cpus; c++)
                if (cpuset_isset(&q->active, c) && f.h->cores[f.h->cpu_core[c]].llc ==
                                                           f.h->cores[f.h->cpu_core[q->vcpu_cpu[0]]].llc)
                        assert_int_equal(q->fdom_level[f.h->cpu_fdom[c]], top);
        plan_free(q);

        /* half speed: the lowest level with half the top capacity, not more unless it is cheaper */
        while (want < top && m->levels[want].capacity < 0.5 * m->levels[top].capacity)
                want++;
        struct plan_hint half = { .key = 3, .perf_floor = 0.5 };
        assert_int_equal(plan_compute(f.h, &pol, v, 3, &half, 1, NULL, 0, &q), 0);
        assert_true(q->fdom_level[f.h->cpu_fdom[q->vcpu_cpu[2]]] >= want);
        assert_true(m->levels[q->fdom_level[f.h->cpu_fdom[q->vcpu_cpu[2]]]].capacity >= 0.5 * m->levels[top].capacity);
        assert_true(p->fdom_level[f.h->cpu_fdom[p->vcpu_cpu[2]]] < want);
        plan_free(q);

        /* a floor of 0 and NaN are no floor */
        struct plan_hint none[2] = { { .key = 1, .perf_floor = 0.0 }, { .key = 2, .perf_floor = NAN } };
        assert_int_equal(plan_compute(f.h, &pol, v, 3, none, 2, NULL, 0, &q), 0);
        assert_true(plan_equal(p, q));
        plan_free(q);
        plan_free(p);
        free_host(&f);
}

static void test_idle_limits(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[1] = { { .key = 1, .util = 0.2, .cur_cpu = -1 } };
        struct plan *p = NULL;

        load_host("xeon-spr-2s", "xeon-spr-2s", &f);
        policy(&pol);
        pol.active_max_latency_us = 10; /* C6 (290 us) not allowed where guests run */
        assert_int_equal(plan_compute(f.h, &pol, v, 1, NULL, 0, NULL, 0, &p), 0);
        for (unsigned c = 0; c < f.h->n_cpus; c++) {
                if (cpuset_isset(&p->active, c))
                        assert_string_equal(f.h->model.idle[p->cpu_idle_state[c]].name, "C1E");
                else
                        assert_string_equal(f.h->model.idle[p->cpu_idle_state[c]].name, "C6");
        }
        plan_free(p);
        free_host(&f);
}

/* No SMT, no cpufreq (this build host's recording), defaults from sysfs; no vCPUs; vCPUs that come and go. */
static void test_small_host_and_churn(void **state)
{
        char path[512];
        struct topology *t = NULL;
        struct energy_model m;
        struct em_host *h = NULL;
        struct plan_policy pol;
        struct plan *p0 = NULL, *p1 = NULL, *p2 = NULL;
        struct plan_vcpu v[3] = {
                { .key = 1, .util = 0.3, .cur_cpu = -1 },
                { .key = 2, .util = 0.2, .cur_cpu = -1 },
                { .key = 3, .util = 0.1, .cur_cpu = -1 },
        };

        assert_true(path_printf(path, sizeof(path), "%s/topology/debian-2cpu-haltpoll/sys", TEST_DATA_DIR) > 0);
        assert_int_equal(topology_load(path, &t), 0);
        assert_int_equal(energy_model_from_topology(t, &m), 0);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        policy(&pol);

        assert_int_equal(plan_compute(h, &pol, NULL, 0, NULL, 0, NULL, 0, &p0), 0);
        assert_int_equal(n_active_cpus(p0), 0);
        assert_int_equal(p0->n_vcpus, 0);
        assert_int_equal(plan_best_wake_cpu(h, p0), 0);
        assert_int_equal(plan_best_sleep_cpu(h, p0), -1);

        assert_int_equal(plan_compute(h, &pol, v, 2, NULL, 0, p0, NSEC_PER_SEC, &p1), 0);
        assert_true(p1->vcpu_cpu[0] >= 0 && p1->vcpu_cpu[1] >= 0);
        assert_int_equal(p1->why.moves, 0); /* new vCPUs are placements, not moves */
        assert_feasible(h, p1, &pol);

        /* vCPU 1 gone, vCPU 3 new: vCPU 2 stays where it was */
        assert_int_equal(plan_compute(h, &pol, v + 1, 2, NULL, 0, p1, 2 * NSEC_PER_SEC, &p2), 0);
        assert_int_equal(p2->vcpu_cpu[0], p1->vcpu_cpu[1]);
        assert_true(p2->vcpu_cpu[1] >= 0);
        assert_int_equal(p2->why.moves, 0);

        plan_free(p0);
        plan_free(p1);
        plan_free(p2);
        em_host_free(h);
        topology_free(t);
}

/* Both CPUs of a small host active, a vCPU waiting behind one that turned busy: with
 * nothing left to wake, growth moves the waiting vCPU to the less loaded CPU. */
static void test_grow_without_wake(void **state)
{
        char path[512];
        struct topology *t = NULL;
        struct energy_model m;
        struct em_host *h = NULL;
        struct plan_policy pol;
        struct plan *p1 = NULL, *p2 = NULL;
        struct plan_vcpu v[3] = {
                { .key = 1, .util = 0.5, .cur_cpu = -1 },
                { .key = 2, .util = 0.4, .cur_cpu = -1 },
                { .key = 3, .util = 0.05, .cur_cpu = -1 },
        };
        int shared;

        assert_true(path_printf(path, sizeof(path), "%s/topology/debian-2cpu-haltpoll/sys", TEST_DATA_DIR) > 0);
        assert_int_equal(topology_load(path, &t), 0);
        assert_int_equal(energy_model_from_topology(t, &m), 0);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        policy(&pol);
        assert_int_equal(plan_compute(h, &pol, v, 3, NULL, 0, NULL, 0, &p1), 0);
        assert_int_equal(n_active_cpus(p1), 2);
        assert_int_not_equal(p1->vcpu_cpu[0], p1->vcpu_cpu[1]);
        /* the small vCPU shares a CPU with one of the two */
        shared = p1->vcpu_cpu[2] == p1->vcpu_cpu[0] ? 0 : 1;
        assert_int_equal(p1->vcpu_cpu[2], p1->vcpu_cpu[shared]);

        /* its neighbour turns busy and it waits */
        v[shared].util = 0.95;
        v[2].wait_ratio = v[2].wait_avg = 0.3;
        assert_int_equal(plan_compute(h, &pol, v, 3, NULL, 0, p1, NSEC_PER_SEC, &p2), 0);
        assert_int_equal(p2->why.decision, PLAN_GROW);
        assert_int_not_equal(p2->vcpu_cpu[2], p2->vcpu_cpu[shared]);
        assert_int_equal(p2->vcpu_cpu[2], p2->vcpu_cpu[1 - shared]);
        assert_feasible(h, p2, &pol);
        plan_free(p1);
        plan_free(p2);
        em_host_free(h);
        topology_free(t);
}

/* More demand than the host has (every CPU over twice its room): the FFD's
 * "most room" fallback must pick a real CPU, not one of the padding leaves of
 * its tree (found by vmmpower-sim: 1,500 VMs on a 224-CPU host). */
static void test_heavy_overload(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[200];
        struct plan *p = NULL, *q = NULL;

        load_host("xeon-spr-2s", "xeon-spr-2s", &f);
        policy(&pol);
        for (unsigned i = 0; i < ELEMENTSOF(v); i++)
                v[i] = (struct plan_vcpu) { .key = ((uint64_t) (100 + i) << 16), .vm = 100 + i, .mode = PLACE_PACK,
                                            .util = 1.0, .wait_ratio = 1.0, .wait_avg = 1.0, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, ELEMENTSOF(v), NULL, 0, NULL, 0, &p), 0);
        assert_int_equal(plan_compute(f.h, &pol, v, ELEMENTSOF(v), NULL, 0, p, NSEC_PER_SEC, &q), 0);
        for (unsigned i = 0; i < ELEMENTSOF(v); i++) {
                assert_true(p->vcpu_cpu[i] >= 0 && (unsigned) p->vcpu_cpu[i] < f.h->n_cpus);
                assert_true(q->vcpu_cpu[i] >= 0 && (unsigned) q->vcpu_cpu[i] < f.h->n_cpus);
                assert_true(f.h->cpu_core[p->vcpu_cpu[i]] >= 0);
        }
        plan_free(p);
        plan_free(q);
        free_host(&f);
}

/* Other placed vCPUs on vCPU i's core (either thread). */
static unsigned core_users(const struct em_host *h, const struct plan *p, unsigned i)
{
        unsigned n = 0;
        for (unsigned j = 0; j < p->n_vcpus; j++)
                if (j != i && p->vcpu_cpu[j] >= 0 && h->cpu_core[p->vcpu_cpu[j]] == h->cpu_core[p->vcpu_cpu[i]])
                        n++;
        return n;
}

/*
 * One waiting vCPU on an otherwise quiet host grows at once, but only where
 * it runs: the shrink pending elsewhere keeps its dwell (before, any wait
 * cancelled it and the dwell restarted, so a host with an occasional waiter
 * never re-packed).
 */
static void test_local_grow_keeps_shrink(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[14];
        struct plan *p0 = NULL, *p1 = NULL, *p2 = NULL, *p3 = NULL;
        const nsec_t S = NSEC_PER_SEC;

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        policy(&pol);
        pol.max_moves = 0;
        for (unsigned i = 0; i < 14; i++)
                v[i] = (struct plan_vcpu) { .key = 900 + i, .vm = 1 + i / 4, .util = i < 12 ? 0.7 : 0.1,
                                            .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, 14, NULL, 0, NULL, 0, &p0), 0);
        /* the small ones are packed: v13 shares its core (a CPU or its SMT sibling) with others */
        assert_true(core_users(f.h, p0, 13) > 0);
        unsigned big = n_active_cpus(p0);

        /* load drops on the twelve: a shrink is predicted and pending */
        set_util(v, 12, 0.05);
        assert_int_equal(plan_compute(f.h, &pol, v, 14, NULL, 0, p0, 1 * S, &p1), 0);
        assert_int_equal(p1->why.decision, PLAN_SHRINK_PENDING);
        assert_int_equal(p1->shrink_pending_since_ns, 1 * S);

        /* v13 waits: it moves at once to a core of its own (not back onto its own CPU, which
         * its busy sibling makes look free), the pending shrink stays pending */
        v[13].wait_ratio = v[13].wait_avg = 0.2;
        assert_int_equal(plan_compute(f.h, &pol, v, 14, NULL, 0, p1, 6 * S, &p2), 0);
        assert_int_equal(p2->why.decision, PLAN_GROW);
        assert_int_not_equal(p2->vcpu_cpu[13], p1->vcpu_cpu[13]);
        assert_int_equal(core_users(f.h, p2, 13), 0); /* relieved: a core of its own */
        assert_int_equal(p2->why.forced_by_key, 913);
        assert_int_equal(p2->shrink_pending_since_ns, 1 * S);
        for (unsigned i = 0; i < 13; i++)
                assert_int_equal(p2->vcpu_cpu[i], p1->vcpu_cpu[i]); /* nothing else moved: dwell not over */

        /* the dwell counted from 1 s is over at 11 s: the shrink is applied */
        v[13].wait_ratio = v[13].wait_avg = 0.0;
        assert_int_equal(plan_compute(f.h, &pol, v, 14, NULL, 0, p2, 11 * S, &p3), 0);
        assert_int_equal(p3->why.decision, PLAN_SHRINK);
        assert_true(p3->why.moves > 0);
        assert_true(n_active_cpus(p3) < big);
        assert_true(p3->why.plan_mw < p3->why.prev_mw);
        assert_feasible(f.h, p3, &pol);
        plan_free(p0);
        plan_free(p1);
        plan_free(p2);
        plan_free(p3);
        free_host(&f);
}

/*
 * Grow and shrink in one plan: with the dwell over, a vCPU that waits is
 * moved and the rest of the host is packed in the same period; the cores the
 * grow touched give and take nothing for the shrink.
 */
static void test_grow_and_shrink_disjoint(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[14];
        struct plan *p0 = NULL, *p1 = NULL, *p2 = NULL;
        const nsec_t S = NSEC_PER_SEC;

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        policy(&pol);
        pol.max_moves = 0;
        for (unsigned i = 0; i < 14; i++)
                v[i] = (struct plan_vcpu) { .key = 900 + i, .vm = 1 + i / 4, .util = 0.7, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, 14, NULL, 0, NULL, 0, &p0), 0);
        int src13 = p0->vcpu_cpu[13];
        for (unsigned i = 0; i < 13; i++)
                assert_int_not_equal(f.h->cpu_core[p0->vcpu_cpu[i]], f.h->cpu_core[src13]); /* a core of its own */
        set_util(v, 12, 0.05);
        assert_int_equal(plan_compute(f.h, &pol, v, 14, NULL, 0, p0, 1 * S, &p1), 0);
        assert_int_equal(p1->why.decision, PLAN_SHRINK_PENDING);

        /* dwell over, and v13 waits (alone on its core: load outside the plan) */
        v[13].wait_ratio = v[13].wait_avg = 0.2;
        assert_int_equal(plan_compute(f.h, &pol, v, 14, NULL, 0, p1, 11 * S, &p2), 0);
        assert_int_equal(p2->why.decision, PLAN_GROW);
        assert_int_not_equal(p2->vcpu_cpu[13], src13);
        assert_int_equal(p2->why.forced_by_key, 913);
        assert_true(p2->why.shrink_moves > 0);
        assert_true(p2->why.moves > p2->why.shrink_moves);
        assert_non_null(strstr(p2->why.text, "to save energy"));
        assert_true(n_active_cpus(p2) < n_active_cpus(p1));
        for (unsigned i = 0; i < 13; i++) {
                /* shrink moves neither entered nor left the cores the grow touched */
                int c = p2->vcpu_cpu[i];
                assert_int_not_equal(f.h->cpu_core[c], f.h->cpu_core[src13]);
                if (c != p1->vcpu_cpu[i])
                        assert_int_not_equal(f.h->cpu_core[c], f.h->cpu_core[p2->vcpu_cpu[13]]);
        }
        assert_feasible(f.h, p2, &pol);
        plan_free(p0);
        plan_free(p1);
        plan_free(p2);
        free_host(&f);
}

static int load_2cpu(struct topology **t, struct em_host **h)
{
        char path[512];
        struct energy_model m;
        assert_true(path_printf(path, sizeof(path), "%s/topology/debian-2cpu-haltpoll/sys", TEST_DATA_DIR) > 0);
        assert_int_equal(topology_load(path, t), 0);
        assert_int_equal(energy_model_from_topology(*t, &m), 0);
        return em_host_new(*t, &m, h);
}

/*
 * A waiting vCPU moves only where it waits less: to an empty core, or to a
 * CPU that with it is no more loaded than the one it leaves is without it.
 * Both CPUs of a small host equally busy: moving would only swap the queue,
 * so the vCPU stays and the plan is not a grow.
 */
static void test_wait_no_relief(void **state)
{
        struct topology *t = NULL;
        struct em_host *h = NULL;
        struct plan_policy pol;
        struct plan *p1 = NULL, *p2 = NULL;
        struct plan_vcpu v[3] = {
                { .key = 1, .util = 0.5, .cur_cpu = -1 },
                { .key = 2, .util = 0.5, .cur_cpu = -1 },
                { .key = 3, .util = 0.05, .cur_cpu = -1 },
        };

        assert_int_equal(load_2cpu(&t, &h), 0);
        policy(&pol);
        assert_int_equal(plan_compute(h, &pol, v, 3, NULL, 0, NULL, 0, &p1), 0);
        assert_int_not_equal(p1->vcpu_cpu[0], p1->vcpu_cpu[1]);
        v[2].wait_ratio = v[2].wait_avg = 0.3;
        assert_int_equal(plan_compute(h, &pol, v, 3, NULL, 0, p1, NSEC_PER_SEC, &p2), 0);
        assert_int_not_equal(p2->why.decision, PLAN_GROW);
        assert_memory_equal(p2->vcpu_cpu, p1->vcpu_cpu, 3 * sizeof(int));
        plan_free(p1);
        plan_free(p2);
        em_host_free(h);
        topology_free(t);
}

/*
 * Wait is demand only where the CPU ran out of capacity: a vCPU that waited
 * behind a neighbour on a CPU with room to spare did all its work, so its
 * planned work stays its utilisation.
 */
static void test_wait_not_demand_when_unsaturated(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[3];
        struct plan *p0 = NULL, *p1 = NULL;

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        policy(&pol);
        for (unsigned i = 0; i < 3; i++)
                v[i] = (struct plan_vcpu) { .key = 40 + i, .util = 0.1, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, 3, NULL, 0, NULL, 0, &p0), 0);
        assert_int_equal(p0->vcpu_cpu[0], p0->vcpu_cpu[1]);
        assert_int_equal(p0->vcpu_cpu[0], p0->vcpu_cpu[2]);
        v[0].wait_ratio = v[0].wait_avg = 0.2;
        assert_int_equal(plan_compute(f.h, &pol, v, 3, NULL, 0, p0, NSEC_PER_SEC, &p1), 0);
        assert_int_equal(p1->why.decision, PLAN_GROW);
        assert_int_not_equal(p1->vcpu_cpu[0], p0->vcpu_cpu[0]);
        double total = 0.0;
        for (unsigned c = 0; c < f.h->n_cpus; c++)
                total += p1->cpu_work[c];
        assert_true(total < 0.3 + 1e-6); /* not 0.5: the wait was not added */
        /* without a previous plan nothing is known about where it waited: counted */
        plan_free(p1);
        assert_int_equal(plan_compute(f.h, &pol, v, 3, NULL, 0, NULL, 0, &p1), 0);
        total = 0.0;
        for (unsigned c = 0; c < f.h->n_cpus; c++)
                total += p1->cpu_work[c];
        assert_true(total > 0.5 - 1e-6);
        plan_free(p0);
        plan_free(p1);
        free_host(&f);
}

/*
 * With pack sets a packed vCPU's wait counts as demand only when its set is
 * saturated (the kernel spreads the set's load), not when its own CPU's
 * assigned load is: the worked example's set {0, 16, 1} at 1200 MHz, two
 * vCPUs of 0.155 planned on CPU 0 (0.31 >= the default level headroom, 97%,
 * of its 0.315) and the rest idle.
 * One-pCPU pins judge the CPU: the wait is added.
 */
static void test_wait_demand_pack_set(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[4];
        struct plan *p0 = NULL, *p1 = NULL;
        double total;

        (void) state;
        load_host("xeon-spr-2s", "xeon-spr-2s-v0", &f);
        policy(&pol);
        for (unsigned i = 0; i < 4; i++)
                v[i] = (struct plan_vcpu) { .key = 1 + i, .vm = 1, .util = 0.1, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, 4, NULL, 0, NULL, 0, &p0), 0);
        assert_int_equal(p0->vcpu_cpu[0], p0->vcpu_cpu[1]);
        assert_int_equal(p0->fdom_level[f.h->cpu_fdom[p0->vcpu_cpu[0]]], 1);
        v[0].util = v[1].util = 0.155;
        v[2].util = v[3].util = 0.0;
        v[0].wait_ratio = v[0].wait_avg = 0.2;
        for (unsigned single = 0; single < 2; single++) {
                pol.pin_single_cpu = single;
                assert_int_equal(plan_compute(f.h, &pol, v, 4, NULL, 0, p0, NSEC_PER_SEC, &p1), 0);
                total = 0.0;
                for (unsigned c = 0; c < f.h->n_cpus; c++)
                        total += p1->cpu_work[c];
                if (single)
                        assert_float_equal(total, 0.51, 1e-9); /* the CPU was saturated: wait added */
                else
                        assert_float_equal(total, 0.31, 1e-9); /* the set had room: a delay */
                plan_free(p1);
                p1 = NULL;
        }
        plan_free(p0);
        free_host(&f);
}


/*
 * The "true" host of the closed-loop tests: each pack set queues factor times
 * what the planner's model (acf 1) predicts for it; the vCPUs' measured wait
 * is the wait that queueing share stands for (queue_measured_pwait inverted),
 * shared in proportion to their utilisation.  Returns the worst set's true share.
 */
static double true_host(const struct em_host *h, const struct plan *p, struct plan_vcpu *v, size_t n, double factor)
{
        double worst = 0.0;
        for (size_t i = 0; i < n; i++)
                v[i].wait_ratio = v[i].wait_avg = 0.0;
        for (unsigned g = 0; g < p->n_llcs; g++) {
                const struct plan_set *ps = &p->set[g];
                double cap = (double) em_capacity(&h->model, ps->level) / EM_CAPACITY_SCALE, unit = cap * ps->speed;
                double s1 = 0.0, s2 = 0.0, A, P, W;
                if (ps->cpus == 0)
                        continue;
                for (size_t i = 0; i < n; i++)
                        if (p->vcpu_cpu[i] >= 0 && h->cores[h->cpu_core[p->vcpu_cpu[i]]].llc == g) {
                                s1 += v[i].util;
                                s2 += v[i].util * v[i].util;
                        }
                A = s1 / unit;
                P = MIN(1.0, factor * queue_set_pwait(ps->cpus, A, MIN(s2 / s1 / unit, 1.0), 1.0));
                W = A < ps->cpus ? P * A / (ps->cpus - A) : 1.0;
                worst = MAX(worst, P);
                for (size_t i = 0; i < n; i++)
                        if (p->vcpu_cpu[i] >= 0 && h->cores[h->cpu_core[p->vcpu_cpu[i]]].llc == g)
                                v[i].wait_ratio = v[i].wait_avg = W * v[i].util / s1;
        }
        return worst;
}

/*
 * Closed loop (planted error): the host queues 3x what the model predicts
 * (bursts burstier than assumed).  Sized by the model alone, a set is over
 * the budget; fed the measured wait, the plan corrects itself at once (the
 * next period within the budget) and stays within it from period
 * CLOSED_LOOP_PERIODS on: the correction falls back while the set is quiet,
 * but not under the floor its overrun left (without the floor it probes the
 * over-budget point again every few periods).  With an accurate model
 * nothing is corrected.
 */
#define CLOSED_LOOP_PERIODS 3
static void test_latency_closed_loop(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        const size_t n = 48;
        struct plan_vcpu v[48];
        (void) state;

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        plan_policy_defaults(&pol);
        assert_int_equal(pol.profile, PLAN_PROFILE_LATENCY);
        for (unsigned planted = 0; planted < 2; planted++) {
                double factor = planted ? 3.0 : 1.0, first = 0.0, last = 0.0;
                struct plan *prev = NULL;
                unsigned fixed_at = 0, over = 0;
                bool next_ok = false;
                for (size_t i = 0; i < n; i++)
                        v[i] = (struct plan_vcpu) { .key = i + 1, .vm = (uint32_t) i, .mode = PLACE_PACK,
                                                    .util = 0.1 + 0.3 * (double) (i % 4) / 3.0,
                                                    .util_last = 0.1 + 0.3 * (double) (i % 4) / 3.0, .cur_cpu = -1 };
                for (unsigned t = 0; t < 30; t++) {
                        struct plan *p = NULL;
                        double worst;
                        assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, prev, (nsec_t) t * NSEC_PER_SEC, &p),
                                         0);
                        worst = true_host(f.h, p, v, n, factor);
                        if (t == 0)
                                first = worst;
                        if (worst > pol.queue_budget + 1e-12) {
                                fixed_at = t + 1;
                                over++;
                        } else if (t == 1)
                                next_ok = true;
                        last = worst;
                        if (t == 29)
                                for (unsigned g = 0; g < p->n_llcs; g++)
                                        if (p->set[g].cpus)
                                                print_message("# planted %gx: set %u: %u CPUs, level %u, %u vCPUs, demand %.2f, predicted %.4f, measured %.4f, corr %.2f\n",
                                                              factor, g, p->set[g].cpus, p->set[g].level,
                                                              p->set[g].vcpus, p->set[g].demand, p->set[g].pwait,
                                                              p->set[g].measured, p->set[g].corr);
                        plan_free(prev);
                        prev = p;
                }
                print_message("# planted %gx: worst set's true queueing %.4f in the first plan, %.4f in the last; "
                              "%u of 30 periods over the budget, within it from period %u\n", factor, first, last,
                              over, fixed_at);
                if (planted) {
                        /* the planted error shows: the model alone sizes a set over the budget */
                        assert_true(first > pol.queue_budget);
                        assert_true(next_ok);
                        assert_true(fixed_at <= CLOSED_LOOP_PERIODS);
                        double kmax = 0.0;
                        for (unsigned g = 0; g < prev->n_llcs; g++)
                                kmax = MAX(kmax, prev->set[g].corr);
                        assert_true(kmax > 1.5);
                } else {
                        assert_true(first <= pol.queue_budget);
                        assert_int_equal(fixed_at, 0);
                }
                assert_true(last <= pol.queue_budget);
                plan_free(prev);
        }
        free_host(&f);
}

/*
 * Latency profile against batch on the same vCPUs: every set within the
 * budget by the model at its planned level; batch's deep packing is not.
 */
static void test_latency_sets_within_budget(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[64];
        double worst[2] = { 0, 0 };
        unsigned active[2];
        (void) state;

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        rng_state = 7;
        for (size_t i = 0; i < 64; i++) {
                double u = MIN(1.0, -0.13 * log(1.0 - rnd()));
                v[i] = (struct plan_vcpu) { .key = i + 1, .vm = (uint32_t) i, .mode = PLACE_PACK, .util = u,
                                            .util_last = u, .cur_cpu = -1 };
        }
        for (unsigned b = 0; b < 2; b++) {
                struct plan *p = NULL;
                plan_policy_defaults(&pol);
                if (b)
                        pol.profile = PLAN_PROFILE_BATCH;
                assert_int_equal(plan_compute(f.h, &pol, v, 64, NULL, 0, NULL, 0, &p), 0);
                for (unsigned g = 0; g < p->n_llcs; g++)
                        worst[b] = MAX(worst[b], p->set[g].pwait);
                active[b] = p->why.n_active;
                plan_free(p);
        }
        print_message("# 64 vCPUs on epyc-genoa-1s: latency %u active CPUs, worst set %.4f; batch %u, %.4f\n",
                      active[0], worst[0], active[1], worst[1]);
        assert_true(worst[0] <= 0.01);
        assert_true(worst[1] > 0.01);
        free_host(&f);
}

/*
 * Large vCPUs pinned alone go to different cores first: two on the threads of
 * one core get SmtGain x a thread between them, not two threads' worth (two
 * such vCPUs of 0.75 would leave 0.25 of a CPU undelivered).  Stop 30 found
 * this in vmmpower-sim: on Genoa 2:1 pl-20110303 (2 ms bursts) 95% of the
 * planner's undelivered work was cores holding two vCPUs pinned alone.  Eight
 * busy vCPUs and 24 light ones, on epyc-genoa-1s (32 cores x 2) and
 * xeon-spr-2s (2 x 8 cores x 2): each core of the set gets one of them pinned
 * alone (both hosts' sets have 7 cores here), the eighth stays movable
 * (1.5 on one core is over SmtGain 1.25), and no core carries two.  Fails
 * with the snake over the wake order's SMT-first layout (4 alone on Genoa)
 * or with the eighth pinned beside another (a core of SPR over SmtGain).
 * After a saturated plan (sets pinned as one) the eighth is pinned alone
 * again (the rule is off on a saturated host: docs/simulator.md §5).
 */
static void test_large_vcpus_apart(void **state)
{
        static const char *const hosts[2][2] = { { "epyc-genoa-1s", "epyc-genoa" }, { "xeon-spr-2s", "xeon-spr-2s" } };
        struct plan_policy pol;
        struct plan_vcpu v[32];
        (void) state;

        for (size_t i = 0; i < 32; i++) {
                double u = i < 8 ? 0.75 : 0.05;
                v[i] = (struct plan_vcpu) { .key = i + 1, .vm = (uint32_t) i, .mode = PLACE_PACK, .util = u,
                                            .util_last = u, .cur_cpu = -1 };
        }
        for (unsigned b = 0; b < 2; b++) {
                struct host_fixture f;
                struct plan *p = NULL;
                unsigned alone = 0, pairs_over = 0, cores = 0;
                load_host(hosts[b][0], hosts[b][1], &f);
                double gain = f.h->model.smt_gain_permille / 1000.0;
                plan_policy_defaults(&pol);
                assert_int_equal(plan_compute(f.h, &pol, v, 32, NULL, 0, NULL, 0, &p), 0);
                for (unsigned k = 0; k < f.h->n_cores; k++) {
                        const struct em_core *co = &f.h->cores[k];
                        double sum = 0;
                        unsigned n = 0;
                        for (size_t j = 0; j < p->n_vcpus; j++)
                                if (p->vcpu_alone[j] && f.h->cpu_core[p->vcpu_cpu[j]] == (int) k) {
                                        sum += v[j].util;
                                        n++;
                                }
                        alone += n;
                        pairs_over += co->n_threads == 2 && n == 2 && sum > gain;
                        for (size_t j = 0; j < p->n_vcpus; j++)
                                if (f.h->cpu_core[p->vcpu_cpu[j]] == (int) k) {
                                        cores++;
                                        break;
                                }
                }
                print_message("# 8 vCPUs at 0.75 among 24 at 0.05 on %s: %u pinned alone on the set's %u cores, %u "
                              "cores with two over SmtGain %.2f between them\n", hosts[b][0], alone, cores, pairs_over,
                              gain);
                /* the case this is about: they are pinned alone, one a core, the rest movable */
                assert_int_equal(alone, MIN(8u, cores));
                assert_int_equal(pairs_over, 0);
                /* after a saturated plan (its sets pinned as one) the eighth is pinned alone
                 * beside another again: movable, the busy vCPUs of a full host fill the pool */
                struct plan *q = NULL;
                unsigned alone_sat = 0;
                p->sets_as_one = true;
                assert_int_equal(plan_compute(f.h, &pol, v, 32, NULL, 0, p, NSEC_PER_SEC, &q), 0);
                for (size_t j = 0; j < q->n_vcpus; j++)
                        alone_sat += q->vcpu_alone[j];
                print_message("# the same after a saturated plan: %u pinned alone\n", alone_sat);
                assert_int_equal(alone_sat, 8);
                plan_free(q);
                plan_free(p);
                free_host(&f);
        }
}

/*
 * Per-VM budget: one VM of a pack set asks for 0.1% (its metadata); the set
 * it lands in is sized for that, the others keep the host's 1%.
 */
static void test_latency_vm_budget(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[48];
        unsigned cpus[2];
        double tight = 1.0;
        (void) state;

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        plan_policy_defaults(&pol);
        for (unsigned k = 0; k < 2; k++) {
                struct plan *p = NULL;
                for (size_t i = 0; i < 48; i++)
                        v[i] = (struct plan_vcpu) { .key = i + 1, .vm = (uint32_t) i, .mode = PLACE_PACK,
                                                    .util = 0.15, .util_last = 0.15, .cur_cpu = -1,
                                                    .queue_budget = k && i == 0 ? 0.001 : 0.0 };
                assert_int_equal(plan_compute(f.h, &pol, v, 48, NULL, 0, NULL, 0, &p), 0);
                cpus[k] = p->why.n_active;
                if (k) {
                        unsigned g = f.h->cores[f.h->cpu_core[p->vcpu_cpu[0]]].llc;
                        assert_true(p->set[g].budget == 0.001);
                        assert_true(p->set[g].pwait <= 0.001);
                        tight = p->set[g].pwait;
                        for (unsigned h = 0; h < p->n_llcs; h++)
                                if (h != g && p->set[h].cpus)
                                        assert_true(p->set[h].budget == pol.queue_budget);
                }
                plan_free(p);
        }
        print_message("# 48 vCPUs of 0.15: %u active CPUs at 1%%, %u with one VM at 0.1%% (its set %.5f)\n",
                      cpus[0], cpus[1], tight);
        assert_true(cpus[1] > cpus[0]);
        free_host(&f);
}

/*
 * The reason text tells deferred moves apart (waiting for the dwell, held by
 * the move cap) and names an energy move by what it does to the active CPUs.
 */
static void test_reason_text(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[8];
        struct plan *p0 = NULL, *p1 = NULL, *p2 = NULL;
        (void) state;

        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        policy(&pol);
        pol.max_moves = 2;
        for (size_t i = 0; i < 8; i++)
                v[i] = (struct plan_vcpu) { .key = i + 1, .vm = (uint32_t) i, .mode = PLACE_PACK, .util = 0.7,
                                            .util_last = 0.7, .cur_cpu = -1 };
        assert_int_equal(plan_compute(f.h, &pol, v, 8, NULL, 0, NULL, 0, &p0), 0);
        for (size_t i = 0; i < 8; i++)
                v[i].util = v[i].util_last = 0.02;
        assert_int_equal(plan_compute(f.h, &pol, v, 8, NULL, 0, p0, NSEC_PER_SEC, &p1), 0);
        print_message("# %s\n# ", p1->why.text);
        assert_int_equal(p1->why.decision, PLAN_SHRINK_PENDING);
        assert_non_null(strstr(p1->why.text, "waiting for the dwell"));
        assert_null(strstr(p1->why.text, "move cap"));
        assert_int_equal(plan_compute(f.h, &pol, v, 8, NULL, 0, p1, 12 * NSEC_PER_SEC, &p2), 0);
        print_message("%s\n", p2->why.text);
        assert_int_equal(p2->why.decision, PLAN_SHRINK);
        assert_int_equal(p2->why.moves, 2);
        assert_true(p2->why.moves_capped > 0);
        assert_non_null(strstr(p2->why.text, "held by the move cap"));
        assert_null(strstr(p2->why.text, "dwell"));
        assert_true(strncmp(p2->why.text, p2->why.n_active < p1->why.n_active ? "shrink:" : "repack:", 7) == 0);
        plan_free(p0);
        plan_free(p1);
        plan_free(p2);
        free_host(&f);
}

/* ---- NUMA memory binding (plan_vcpu.nodes, <numatune>) ------------------------------ */

/* CPU c of the xeon-spr-2s fixture is node 1's: its node1/cpulist is 8-15,24-31. */
static bool spr_node1(int c)
{
        return (c >= 8 && c <= 15) || (c >= 24 && c <= 31);
}

/*
 * Every vCPU of v[first..n) of plan p (bound to node 1) on node 1, and its pin set inside it,
 * under both pin styles.
 */
static void check_node1(const struct host_fixture *f, const struct plan_policy *pol, const struct plan *p,
                        const struct plan_vcpu *v, unsigned first, unsigned n, const char *when)
{
        struct plan_policy pp = *pol;
        cpuset_t sets[32];

        assert_true(n <= 32);
        for (unsigned single = 0; single < 2; single++) {
                pp.pin_single_cpu = single;
                assert_int_equal(plan_pin_sets(f->h, &pp, p, v, n, sets), 0);
                for (unsigned i = first; i < n; i++) {
                        int c = p->vcpu_cpu[i];
                        if (!spr_node1(c))
                                fail_msg("%s: bound vCPU %u planned on CPU %d, outside node 1 (%s)", when, i, c,
                                         p->why.text);
                        assert_false(cpuset_empty(&sets[i]));
                        CPUSET_FOREACH(x, &sets[i])
                                if (!spr_node1(x))
                                        fail_msg("%s: bound vCPU %u's pin set holds CPU %d (outside node 1)",
                                                 when, i, x);
                }
        }
}

/*
 * A VM whose memory is bound to node 1 of the two-node fixture is packed only
 * on node 1's CPUs, its pin sets inside them, while its unbound neighbours are
 * packed where they were without it (node 0, the first in the wake order);
 * through a grow and a shrink over several periods, in both profiles.  A
 * binding new since the last plan moves the VM into its node at once (a grow),
 * and a binding to a node with no CPU here is no binding.  Without the
 * restriction the bound VM is packed next to its neighbours on node 0.
 */
static void test_numa_binding(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[16];
        const unsigned nn = 8, n = 16; /* v[0..8) neighbours, v[8..16) the bound VM, the same size */

        (void) state;
        load_host("xeon-spr-2s", "xeon-spr-2s", &f);
        for (unsigned c = 0; c < f.h->n_cpus; c++) /* the host's nodes, as read from the fixture */
                assert_int_equal(f.h->cpu_node[c], spr_node1((int) c) ? 1 : 0);
        for (unsigned prof = 0; prof < 2; prof++) {
                struct plan *ref = NULL, *p[6] = {};
                const char *name = prof ? "batch" : "latency";

                plan_policy_defaults(&pol);
                pol.profile = prof ? PLAN_PROFILE_BATCH : PLAN_PROFILE_LATENCY;
                pol.move_cooldown_ns = 0; /* the shrink right after the grow below (the cooldown has its test) */
                pol.shrink_dwell_ns = 0;
                for (unsigned i = 0; i < n; i++)
                        v[i] = (struct plan_vcpu) { .key = 100 + i, .vm = i < nn ? 1 : 2, .util = 0.1,
                                                    .cur_cpu = -1, .nodes = i < nn ? 0 : UINT64_C(1) << 1 };
                /* the neighbours alone */
                assert_int_equal(plan_compute(f.h, &pol, v, nn, NULL, 0, NULL, 0, &ref), 0);
                for (unsigned i = 0; i < nn; i++)
                        assert_false(spr_node1(ref->vcpu_cpu[i]));
                /* with the bound VM: it on node 1, the neighbours as before */
                assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, NULL, 0, &p[0]), 0);
                check_node1(&f, &pol, p[0], v, nn, n, name);
                {
                        struct plan *again = NULL; /* deterministic with bound vCPUs too */
                        assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, NULL, 0, &again), 0);
                        assert_true(plan_equal(p[0], again));
                        plan_free(again);
                }
                for (unsigned i = 0; i < nn; i++)
                        assert_int_equal(p[0]->vcpu_cpu[i], ref->vcpu_cpu[i]);
                /* packed there as its neighbours are on node 0: on as many CPUs, fewer than its vCPUs */
                {
                        cpuset_t used;
                        cpuset_zero(&used);
                        for (unsigned i = nn; i < n; i++)
                                cpuset_set(&used, (unsigned) p[0]->vcpu_cpu[i]);
                        cpuset_t nb;
                        cpuset_zero(&nb);
                        for (unsigned i = 0; i < nn; i++)
                                cpuset_set(&nb, (unsigned) ref->vcpu_cpu[i]);
                        print_message("# %s: neighbours on %u CPUs, bound VM on %u\n", name, cpuset_count(&nb),
                                      cpuset_count(&used));
                        assert_int_equal(cpuset_count(&used), cpuset_count(&nb));
                        assert_true(cpuset_count(&used) < n - nn);
                }
                /* grow: every vCPU busy, the neighbours' waits too */
                set_util(v, n, 0.6);
                for (unsigned i = 0; i < n; i++)
                        v[i].wait_ratio = v[i].wait_avg = 0.2;
                assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, p[0], NSEC_PER_SEC, &p[1]), 0);
                assert_int_equal(p[1]->why.decision, PLAN_GROW);
                check_node1(&f, &pol, p[1], v, nn, n, "grow");
                /* quiet again: shrink over the next periods (the cap may take more than one) */
                set_util(v, n, 0.02);
                for (unsigned i = 0; i < n; i++)
                        v[i].wait_ratio = v[i].wait_avg = 0.0;
                unsigned shrinks = 0;
                for (unsigned k = 2; k < 6; k++) {
                        assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, p[k - 1], (nsec_t) k * NSEC_PER_SEC,
                                                      &p[k]), 0);
                        shrinks += p[k]->why.decision == PLAN_SHRINK;
                        check_node1(&f, &pol, p[k], v, nn, n, "shrink");
                }
                assert_true(shrinks > 0);
                assert_true(p[5]->why.n_active < p[1]->why.n_active);
                for (unsigned k = 0; k < 6; k++)
                        plan_free(p[k]);
                memset(p, 0, sizeof(p));

                /* a binding new since the last plan: moved into its node at once */
                set_util(v, n, 0.1);
                for (unsigned i = nn; i < n; i++)
                        v[i].nodes = 0;
                assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, NULL, 0, &p[0]), 0);
                unsigned on1 = 0;
                for (unsigned i = nn; i < n; i++)
                        on1 += spr_node1(p[0]->vcpu_cpu[i]);
                assert_int_equal(on1, 0); /* unbound, it is packed with its neighbours on node 0 */
                for (unsigned i = nn; i < n; i++)
                        v[i].nodes = UINT64_C(1) << 1;
                assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, p[0], NSEC_PER_SEC, &p[1]), 0);
                assert_int_equal(p[1]->why.decision, PLAN_GROW);
                check_node1(&f, &pol, p[1], v, nn, n, "binding added");
                /* bound to a node with no CPU here (node 5): no binding, placed like the unbound */
                for (unsigned i = nn; i < n; i++)
                        v[i].nodes = UINT64_C(1) << 5;
                assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, NULL, 0, &p[2]), 0);
                assert_memory_equal(p[2]->vcpu_cpu, p[0]->vcpu_cpu, n * sizeof(int));
                for (unsigned k = 0; k < 3; k++)
                        plan_free(p[k]);
                plan_free(ref);
        }
        free_host(&f);
}

/*
 * A saturated host (4:1, busy): every core active and a set over its budget.
 * The LLCs' pack sets are pinned as one (plan->sets_as_one), large vCPUs
 * with them, so the kernel's periodic balancer can move load between LLCs,
 * and every set runs the top level; nothing is asleep for a per-LLC pin to
 * protect.  A dedicated vCPU keeps its CPU, out of the set.  With every set
 * within its budget, or cores left asleep, the sets are per LLC again.
 * Fails with plan_pin_sets' per-LLC sets only (every set within one LLC, a
 * large vCPU on its CPU alone), or with the levels left below the top.
 */
static void test_pin_sets_host_wide(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        const unsigned n = 257;
        _cleanup_free_ struct plan_vcpu *v = calloc(n, sizeof(*v));
        _cleanup_free_ cpuset_t *sets = calloc(n, sizeof(cpuset_t));
        struct plan *p = NULL;
        cpuset_t want = { 0 };

        (void) state;
        assert_non_null(v);
        assert_non_null(sets);
        load_host("epyc-genoa-1s", "epyc-genoa", &f);
        assert_true(f.h->n_llcs > 1);
        plan_policy_defaults(&pol);
        for (unsigned i = 0; i < n; i++)
                v[i] = (struct plan_vcpu) { .key = 1000 + i, .vm = 1 + i, .util = 0.15, .cur_cpu = -1 };
        v[0].util = 1.0; /* larger than any set's water level: pinned alone */
        v[n - 1].mode = PLACE_DEDICATED;
        assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, NULL, 0, &p), 0);
        for (unsigned k = 0; k < f.h->n_cores; k++) /* every core awake (the dedicated one's sibling empty) */
                assert_true(cpuset_isset(&p->active, (unsigned) f.h->cores[k].cpu[0]) ||
                            (f.h->cores[k].n_threads > 1 && cpuset_isset(&p->active, (unsigned) f.h->cores[k].cpu[1])));
        assert_true(p->sets_as_one);
        assert_non_null(strstr(p->why.text, "pack sets pinned as one"));
        assert_true(p->vcpu_alone[0]);
        bool over = false;
        for (unsigned g = 0; g < f.h->n_llcs; g++)
                if (p->set[g].cpus > 0) {
                        assert_int_equal(p->set[g].level, f.h->model.n_levels - 1);
                        over |= p->set[g].pwait > p->set[g].budget;
                }
        assert_true(over);
        for (unsigned i = 0; i + 1 < n; i++)
                cpuset_set(&want, (unsigned) p->vcpu_cpu[i]);
        assert_int_equal(plan_pin_sets(f.h, &pol, p, v, n, sets), 0);
        unsigned llcs = 0;
        for (unsigned g = 0; g < f.h->n_llcs; g++) {
                bool in = false;
                CPUSET_FOREACH(x, &want)
                        in |= f.h->cores[f.h->cpu_core[x]].llc == g;
                llcs += in;
        }
        assert_true(llcs > 1);
        for (unsigned i = 0; i + 1 < n; i++) {
                if (!cpuset_equal(&sets[i], &want))
                        fail_msg("vCPU %u on CPU %d: pinned to %u CPUs, not the %u of every set", i, p->vcpu_cpu[i],
                                 cpuset_count(&sets[i]), cpuset_count(&want));
        }
        assert_false(cpuset_isset(&want, (unsigned) p->vcpu_cpu[n - 1]));
        assert_int_equal(cpuset_count(&sets[n - 1]), 1);
        assert_true(plan_saturated(f.h, &pol, p));
        /* PinSingleCPU or the batch profile: not saturated in this sense */
        {
                struct plan_policy q = pol;
                q.pin_single_cpu = true;
                assert_false(plan_saturated(f.h, &q, p));
                q = pol;
                q.profile = PLAN_PROFILE_BATCH;
                assert_false(plan_saturated(f.h, &q, p));
        }
        /* every set within its budget: the per-LLC sets keep their promise */
        for (unsigned g = 0; g < f.h->n_llcs; g++)
                p->set[g].pwait = MIN(p->set[g].pwait, p->set[g].budget);
        assert_false(plan_saturated(f.h, &pol, p));
        p->sets_as_one = false;
        assert_int_equal(plan_pin_sets(f.h, &pol, p, v, n, sets), 0);
        assert_int_equal(cpuset_count(&sets[0]), 1);
        plan_free(p);
        p = NULL;

        /* the hold: after a saturated plan the sets stay one while every core stays active, for
         * SATURATION_HOLD_NS (30 s): the load falls within the budget at once, the shrink waits
         * (a long dwell keeps every core awake); held at 1..29 s, released at 30 s */
        {
                struct plan_policy hp = pol;
                struct plan *prev = NULL;
                unsigned held = 0;
                int released_at = -1;
                hp.shrink_dwell_ns = 3600 * NSEC_PER_SEC;
                for (unsigned i = 0; i < n; i++)
                        v[i].util = 0.15;
                assert_int_equal(plan_compute(f.h, &hp, v, n, NULL, 0, NULL, 0, &prev), 0);
                assert_true(prev->sets_as_one);
                assert_non_null(strstr(prev->why.text, "; saturated (every core active"));
                for (unsigned i = 0; i < n; i++)
                        v[i].util = 0.04;
                for (int t = 1; t <= 40; t++) {
                        struct plan *q = NULL;
                        assert_int_equal(plan_compute(f.h, &hp, v, n, NULL, 0, prev, (nsec_t) t * NSEC_PER_SEC, &q),
                                         0);
                        assert_false(plan_saturated(f.h, &hp, q)); /* within the budget from the first */
                        if (q->sets_as_one) {
                                held++;
                                assert_non_null(strstr(q->why.text, "; held after saturation"));
                        } else {
                                assert_null(strstr(q->why.text, "pinned as one"));
                                if (released_at < 0)
                                        released_at = t;
                        }
                        plan_free(prev);
                        prev = q;
                }
                printf("# saturation hold: held %u plans, released at %d s\n", held, released_at);
                assert_int_equal(held, 29);
                assert_int_equal(released_at, 30);
                plan_free(prev);
        }

        /* the levels: on the two-package host, loads from light to saturated; wherever the sets
         * are pinned as one, every set's CPUs run the top level (the kernel may move another
         * LLC's load onto them), where the planner alone keeps a set within its budget lower */
        {
                struct host_fixture s2;
                unsigned one = 0, below = 0;
                load_host("xeon-spr-2s", "xeon-spr-2s", &s2);
                const unsigned n2 = 3 * s2.h->n_online, top = s2.h->model.n_levels - 1;
                _cleanup_free_ struct plan_vcpu *v2 = calloc(n2, sizeof(*v2));
                assert_non_null(v2);
                for (unsigned k = 0; k < 16; k++) {
                        struct plan *q = NULL;
                        for (unsigned i = 0; i < n2; i++)
                                v2[i] = (struct plan_vcpu) { .key = 5000 + i, .vm = 1 + i,
                                                             .util = 0.02 + 0.02 * k + (i % 7 == 0 ? 0.3 : 0.0),
                                                             .cur_cpu = -1 };
                        assert_int_equal(plan_compute(s2.h, &pol, v2, n2, NULL, 0, NULL, 0, &q), 0);
                        bool hw = q->sets_as_one;
                        one += hw;
                        for (unsigned g = 0; g < s2.h->n_llcs; g++)
                                if (q->set[g].cpus > 0 && q->set[g].level < top) {
                                        if (hw)
                                                fail_msg("load %u: sets pinned as one, LLC %u's at level %u", k, g,
                                                         q->set[g].level);
                                        below++;
                                }
                        plan_free(q);
                }
                printf("# sets pinned as one in %u of 16 loads; %u sets below the top level in the others\n", one,
                       below);
                assert_true(one > 0 && one < 16);
                free_host(&s2);
        }

        /* a light host: CPUs asleep, each set within its LLC */
        for (unsigned i = 0; i < n; i++)
                v[i].util = 0.02;
        assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, NULL, 0, &p), 0);
        assert_false(p->sets_as_one);
        assert_null(strstr(p->why.text, "pinned as one"));
        assert_int_equal(plan_pin_sets(f.h, &pol, p, v, n, sets), 0);
        for (unsigned i = 0; i < n; i++) {
                int g = -1;
                CPUSET_FOREACH(x, &sets[i]) {
                        int gx = (int) f.h->cores[f.h->cpu_core[x]].llc;
                        if (g >= 0 && gx != g)
                                fail_msg("vCPU %u's set spans LLCs %d and %d on a host with CPUs asleep", i, g, gx);
                        g = gx;
                }
        }
        plan_free(p);
        free_host(&f);
}

/*
 * Sub-NUMA clustering: an LLC that spans two nodes.  The xeon-spr-2s host with
 * CPUs 4-7,20-23 of LLC 0 moved to a node 2 of their own: a VM bound to node 2
 * joins LLC 0's pack set with its unbound neighbours, and its pin set is the
 * part of that set inside node 2 (the neighbours' CPUs on node 0 are not in
 * it).  Fails without the intersection in plan_pin_sets (its set then holds
 * the neighbours' CPUs 0, 16, ...).
 */
static void test_numa_binding_llc_split(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[10];
        struct plan *p = NULL;
        cpuset_t sets[10];
        const unsigned nn = 8, n = 10;

        (void) state;
        load_host("xeon-spr-2s", "xeon-spr-2s", &f);
        for (int c = 4; c < 8; c++)
                f.h->cpu_node[c] = f.h->cpu_node[c + 16] = 2;
        assert_int_equal(f.h->cores[f.h->cpu_core[4]].llc, f.h->cores[f.h->cpu_core[0]].llc);
        plan_policy_defaults(&pol);
        for (unsigned i = 0; i < n; i++)
                v[i] = (struct plan_vcpu) { .key = 200 + i, .vm = i < nn ? 1 : 2, .util = 0.1, .cur_cpu = -1,
                                            .nodes = i < nn ? 0 : UINT64_C(1) << 2 };
        assert_int_equal(plan_compute(f.h, &pol, v, n, NULL, 0, NULL, 0, &p), 0);
        assert_int_equal(plan_pin_sets(f.h, &pol, p, v, n, sets), 0);
        unsigned shared = 0;
        for (unsigned i = nn; i < n; i++) {
                int c = p->vcpu_cpu[i];
                if (f.h->cpu_node[c] != 2)
                        fail_msg("bound vCPU %u planned on CPU %d (node %d)", i, c, f.h->cpu_node[c]);
                assert_true(cpuset_isset(&sets[i], (unsigned) c));
                CPUSET_FOREACH(x, &sets[i])
                        if (f.h->cpu_node[x] != 2)
                                fail_msg("bound vCPU %u's pin set holds CPU %d of node %d", i, x, f.h->cpu_node[x]);
                /* the same LLC's set as a neighbour: the case the intersection is for */
                for (unsigned j = 0; j < nn; j++)
                        shared += cpuset_isset(&sets[j], (unsigned) c);
        }
        assert_true(shared > 0);
        plan_free(p);
        free_host(&f);
}

/* plan_input_sources for test_plan_input_build: thread tid runs on CPU tid % 100, counted. */
struct input_probe {
        unsigned asked[4096];
        unsigned n_asked;
};

static int probe_thread_cpu(void *userdata, pid_t pid, pid_t tid)
{
        struct input_probe *pr = userdata;

        (void) pid;
        if (pr->n_asked < 4096)
                pr->asked[pr->n_asked++] = (unsigned) tid;
        return tid % 100;
}

/* Thread 2010 (VM 300's vCPU 10) was pinned by someone else (the applier's list). */
static bool probe_pinned_by_others(void *userdata, pid_t pid, pid_t tid)
{
        (void) userdata;
        return pid == 300 && tid == 2010;
}

/* VM 300 (70 vCPUs) has full-trust hints on vCPUs 2 and 64, a boost on 65, an advisory one on 3. */
static int probe_vm_hints(void *userdata, pid_t pid, nsec_t now, struct hint_effective *ret, size_t max)
{
        (void) userdata;
        (void) now;
        if (pid != 300)
                return -ENOENT;
        for (size_t j = 0; j < 70 && j < max; j++)
                ret[j] = (struct hint_effective) { 0 };
        ret[2] = (struct hint_effective) { .level = 512, .weight = 1024, .may_actuate = true };
        ret[3] = (struct hint_effective) { .level = 900, .weight = 1024, .may_actuate = false };
        ret[64] = (struct hint_effective) { .level = 256, .weight = 1024, .may_actuate = true };
        ret[65] = (struct hint_effective) { .boosted = true, .boost_level = HINT_LEVEL_MAX, .may_actuate = true };
        return 70;
}

/*
 * The daemon's one input step (plan_input_build, what plan_period calls):
 * each VM's wanted vCPUs in order with their threads; the CPU the kernel runs
 * a vCPU on (cur_cpu) asked for every excluded vCPU and every vCPU the plan
 * in force does not know, and for no other (a vCPU the plan knows keeps -1:
 * the plan places it); hints of every vCPU index, 64 and up included, keyed
 * by vcpu_ref_key; advisory hints left out.  Fails with cur_cpu -1 for all
 * (the daemon before), or with hints of the first 64 vCPUs only.
 */
static void test_plan_input_build(void **state)
{
        struct host_fixture f;
        struct plan_policy pol;
        struct vcpu_load la[2], lb[70], lc[2];
        struct vm_load a = { .info = { .pid = 100 }, .n_vcpus = 2, .vcpus = la },
                       b = { .info = { .pid = 300 }, .n_vcpus = 70, .vcpus = lb },
                       c = { .info = { .pid = 200 }, .n_vcpus = 2, .vcpus = lc };
        const struct vm_load *vms[] = { &a, &b, &c };
        struct plan_input in = { 0 };
        struct input_probe pr = { 0 };
        struct plan *p = NULL;
        struct plan_input_sources src = { .thread_cpu = probe_thread_cpu, .vm_hints = probe_vm_hints,
                                          .userdata = &pr };

        (void) state;
        load_host("xeon-spr-2s", "xeon-spr-2s", &f);
        plan_policy_defaults(&pol);
        src.topo = f.t;
        src.n_cpus = f.h->n_cpus;
        for (unsigned j = 0; j < 2; j++) {
                la[j] = (struct vcpu_load) { .index = (int) j, .tid = (pid_t) (1010 + j), .valid = true, .util_avg = 0.1 };
                lc[j] = (struct vcpu_load) { .index = (int) j, .tid = (pid_t) (3020 + j), .valid = true, .util_avg = 0.1 };
        }
        for (unsigned j = 0; j < 70; j++)
                lb[j] = (struct vcpu_load) { .index = (int) j, .tid = (pid_t) (2000 + j), .valid = j != 5,
                                             .util_avg = 0.05 };
        c.info.policy.place_mode = PLACE_EXCLUDE;

        /* first period: no plan in force, every vCPU's CPU is asked for */
        assert_int_equal(plan_input_build(&in, vms, 3, &src), 0);
        assert_int_equal(in.n, 2 + 69 + 2);
        assert_int_equal(pr.n_asked, 73);
        assert_true(in.v[0].key == vcpu_ref_key((struct vcpu_ref) { 100, 0 }) && in.tid[0] == 1010);
        assert_int_equal(in.v[0].cur_cpu, 10);
        assert_int_equal(in.v[2 + 5].cur_cpu, 2006 % 100); /* vCPU 5 (no measurement) left out */
        assert_true(vcpu_ref_of_key(in.v[2 + 5].key).index == 6 && vcpu_ref_of_key(in.v[2 + 5].key).pid == 300);
        assert_int_equal(in.v[71].mode, PLACE_EXCLUDE);
        assert_int_equal(in.v[71].cur_cpu, 20);
        assert_int_equal(in.n_hints, 3);
        assert_true(in.hints[0].key == vcpu_ref_key((struct vcpu_ref) { 300, 2 }) &&
                    fabs(in.hints[0].perf_floor - 0.5) < 1e-9 && !in.hints[0].boost);
        assert_true(in.hints[1].key == vcpu_ref_key((struct vcpu_ref) { 300, 64 }) &&
                    fabs(in.hints[1].perf_floor - 0.25) < 1e-9);
        assert_true(in.hints[2].key == vcpu_ref_key((struct vcpu_ref) { 300, 65 }) && in.hints[2].boost);

        /* with a plan in force over these inputs, only the excluded vCPUs and a new one are asked */
        assert_int_equal(plan_compute(f.h, &pol, in.v, in.n, in.hints, in.n_hints, NULL, 0, &p), 0);
        lb[5].valid = true; /* vCPU 5 is measured now: new to the plan */
        src.prev = p;
        pr.n_asked = 0;
        assert_int_equal(plan_input_build(&in, vms, 3, &src), 0);
        assert_int_equal(in.n, 74);
        assert_int_equal(pr.n_asked, 3);
        assert_true(pr.asked[0] == 2005 && pr.asked[1] == 3020 && pr.asked[2] == 3021);
        for (size_t i = 0; i < in.n; i++)
                if (in.v[i].mode == PLACE_PACK && in.tid[i] != 2005 && in.v[i].cur_cpu != -1)
                        fail_msg("input %zu (known to the plan) has cur_cpu %d", i, in.v[i].cur_cpu);
        assert_int_equal(in.v[2 + 5].cur_cpu, 5);
        assert_int_equal(in.n_pinned_by_others, 0);

        /* a vCPU whose pin someone else changed is planned as excluded, where it runs, and the plan
         * neither pins nor moves it */
        src.pinned_by_others = probe_pinned_by_others;
        pr.n_asked = 0;
        assert_int_equal(plan_input_build(&in, vms, 3, &src), 0);
        assert_int_equal(in.n_pinned_by_others, 1);
        assert_int_equal(pr.n_asked, 4); /* 2005 is still new to the plan in force */
        assert_true(pr.asked[1] == 2010 && in.tid[2 + 10] == 2010);
        assert_int_equal(in.v[2 + 10].mode, PLACE_EXCLUDE);
        assert_int_equal(in.v[2 + 10].cur_cpu, 10);
        assert_int_equal(in.v[2 + 11].mode, PLACE_PACK);
        plan_free(p);
        p = NULL;
        assert_int_equal(plan_compute(f.h, &pol, in.v, in.n, in.hints, in.n_hints, NULL, 0, &p), 0);
        assert_int_equal(p->vcpu_cpu[2 + 10], 10);
        plan_free(p);
        plan_input_done(&in);
        free_host(&f);
}

/*
 * From a domain's persistent XML to the planner's input, as vmmpowerd builds it
 * (plan_period: vm_policy_apply_domain, then plan_input_apply_policy): the
 * <numatune> nodes reach plan_vcpu.nodes in every mode and the plan keeps the
 * VM on node 1; a binding that cannot hold here is refused (the daemon warns)
 * and leaves the vCPUs unbound.
 */
static void test_numa_policy_input(void **state)
{
        static const char *const modes[] = { "strict", "restrictive", "preferred", "interleave" };
        struct host_fixture f;
        struct plan_policy pol;
        struct plan_vcpu v[6];
        struct vm_domain_pins d;
        struct vm_policy vp;
        char xml[512];

        (void) state;
        load_host("xeon-spr-2s", "xeon-spr-2s", &f);
        plan_policy_defaults(&pol);
        for (unsigned m = 0; m < 4; m++) {
                struct plan *p = NULL;
                int len = snprintf(xml, sizeof(xml),
                                   "<domain type='kvm'><name>numa</name><vcpu placement='static'>2</vcpu>"
                                   "<numatune><memory mode='%s' nodeset='1'/></numatune></domain>", modes[m]);
                assert_int_equal(vm_policy_parse_domain_xml(xml, (size_t) len, &d), 0);
                vm_policy_init(&vp);
                vm_policy_apply_domain(&vp, &d);
                for (unsigned i = 0; i < 6; i++) /* v[0..4) unbound neighbours, v[4..6) the domain */
                        v[i] = (struct plan_vcpu) { .key = 10 + i, .vm = i < 4 ? 1 : 2, .util = 0.1, .cur_cpu = -1 };
                assert_int_equal(plan_input_apply_policy(f.t, &vp, v + 4, 2), 0);
                assert_true(v[4].nodes == UINT64_C(1) << 1 && v[5].nodes == UINT64_C(1) << 1);
                assert_int_equal(plan_compute(f.h, &pol, v, 6, NULL, 0, NULL, 0, &p), 0);
                check_node1(&f, &pol, p, v, 4, 6, modes[m]);
                plan_free(p);
        }
        /* the list forms; bad ones leave the vCPUs unbound */
        static const struct {
                const char *nodeset;
                int r;
                uint64_t nodes;
        } cases[] = {
                { "", 0, 0 }, { "1", 0, 2 }, { "0-1", 0, 3 }, { "0,5", 0, 0x21 },
                { "5", -ENOENT, 0 }, { "?", -EINVAL, 0 }, { "1-", -EINVAL, 0 },
        };
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
                vm_policy_init(&vp);
                snprintf(vp.mem_nodeset, sizeof(vp.mem_nodeset), "%s", cases[c].nodeset);
                v[0].nodes = 0xff;
                assert_int_equal(plan_input_apply_policy(f.t, &vp, v, 1), cases[c].r);
                if (v[0].nodes != cases[c].nodes)
                        fail_msg("nodeset \"%s\": nodes %#" PRIx64 ", expected %#" PRIx64, cases[c].nodeset,
                                 v[0].nodes, cases[c].nodes);
        }
        /* the queueing budget goes the same way */
        vm_policy_init(&vp);
        vp.queue_budget_bp = 10;
        v[0].queue_budget = 0.0;
        assert_int_equal(plan_input_apply_policy(f.t, &vp, v, 1), 0);
        assert_true(fabs(v[0].queue_budget - 0.001) < 1e-12);
        free_host(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_below_one_cpu_spr),
                cmocka_unit_test(test_below_one_cpu_genoa),
                cmocka_unit_test(test_half_host_spr),
                cmocka_unit_test(test_half_host_genoa),
                cmocka_unit_test(test_worked_example),
                cmocka_unit_test(test_level_headroom),
                cmocka_unit_test(test_plan_sees_limits),
                cmocka_unit_test(test_load_scale_round_trip),
                cmocka_unit_test(test_pin_sets),
                cmocka_unit_test(test_plan_actions),
                cmocka_unit_test(test_pack_set_balance),
                cmocka_unit_test(test_best_wake),
                cmocka_unit_test(test_best_sleep),
                cmocka_unit_test(test_hysteresis),
                cmocka_unit_test(test_new_vcpu_stays),
                cmocka_unit_test(test_wait_filter),
                cmocka_unit_test(test_shrink_reaches_target),
                cmocka_unit_test(test_move_cost),
                cmocka_unit_test(test_move_cap),
                cmocka_unit_test(test_move_cooldown),
                cmocka_unit_test(test_determinism),
                cmocka_unit_test(test_wake_classes),
                cmocka_unit_test(test_modes),
                cmocka_unit_test(test_latency_edges),
                cmocka_unit_test(test_hints),
                cmocka_unit_test(test_perf_floor),
                cmocka_unit_test(test_idle_limits),
                cmocka_unit_test(test_grow_without_wake),
                cmocka_unit_test(test_small_host_and_churn),
                cmocka_unit_test(test_heavy_overload),
                cmocka_unit_test(test_local_grow_keeps_shrink),
                cmocka_unit_test(test_grow_and_shrink_disjoint),
                cmocka_unit_test(test_wait_no_relief),
                cmocka_unit_test(test_wait_not_demand_when_unsaturated),
                cmocka_unit_test(test_wait_demand_pack_set),
                cmocka_unit_test(test_latency_closed_loop),
                cmocka_unit_test(test_latency_sets_within_budget),
                cmocka_unit_test(test_large_vcpus_apart),
                cmocka_unit_test(test_latency_vm_budget),
                cmocka_unit_test(test_reason_text),
                cmocka_unit_test(test_numa_binding),
                cmocka_unit_test(test_pin_sets_host_wide),
                cmocka_unit_test(test_numa_binding_llc_split),
                cmocka_unit_test(test_numa_policy_input),
                cmocka_unit_test(test_plan_input_build),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
