/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The pack-set gauges of the metrics (render_pack_set_metrics, metrics.c)
 * against the plan they come from: a plan computed on the xeon-spr-2s fixture
 * (two LLCs), with a measured wait so that "measured" is not 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "daemon_view.h"
#include "energy_model.h"
#include "placement.h"
#include "topology.h"
#include "util.h"

/* The value of the sample line "NAME{LABELS} VALUE" in text, or fail. */
static double sample(const char *text, const char *name_labels)
{
        char key[256];
        const char *at;
        double v;

        snprintf(key, sizeof(key), "\n%s ", name_labels);
        at = strstr(text, key);
        if (!at)
                fail_msg("no sample %s in:\n%s", name_labels, text);
        assert_int_equal(sscanf(at + strlen(key), "%lf", &v), 1);
        assert_null(strstr(at + 1, key)); /* once */
        return v;
}

/* Within the %.6g the gauges are printed with. */
static void assert_close(double got, double want)
{
        if (!(fabs(got - want) <= 1e-5 * fabs(want) + 1e-12))
                fail_msg("%.9g != %.9g", got, want);
}

static void test_pack_set_gauges(void **state)
{
        char path[512], key[128];
        struct topology *t = NULL;
        struct em_host *h = NULL;
        struct energy_model m;
        struct em_error err = {};
        struct plan_policy pol;
        struct plan_vcpu v[48];
        struct plan *p0 = NULL, *p1 = NULL;
        struct strbuf sb;
        unsigned predicted = 0, measured = 0;

        (void) state;
        assert_true(path_printf(path, sizeof(path), "%s/topology/xeon-spr-2s/sys", TEST_DATA_DIR) > 0);
        assert_int_equal(topology_load(path, &t), 0);
        assert_true(path_printf(path, sizeof(path), "%s/../../config/models/xeon-spr-2s.model", TEST_DATA_DIR) > 0);
        if (energy_model_parse_file(path, &m, &err) < 0)
                fail_msg("%s:%u: %s", err.file, err.line, err.message);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        plan_policy_defaults(&pol); /* latency profile */

        /* no plan, and a plan without sets: no pack-set series at all */
        strbuf_init(&sb);
        render_pack_set_metrics(NULL, &sb);
        assert_int_equal(sb.len, 0);

        /* 48 vCPUs of 0.15: fewer CPUs than vCPUs in a set (it queues); then their waits measured there */
        for (unsigned i = 0; i < 48; i++)
                v[i] = (struct plan_vcpu) { .key = 1 + i, .vm = 1 + i / 4, .util = 0.15, .cur_cpu = -1 };
        assert_int_equal(plan_compute(h, &pol, v, 48, NULL, 0, NULL, 0, &p0), 0);
        for (unsigned i = 0; i < 48; i++)
                v[i].wait_avg = v[i].wait_ratio = 0.02;
        assert_int_equal(plan_compute(h, &pol, v, 48, NULL, 0, p0, NSEC_PER_SEC, &p1), 0);
        for (unsigned k = 0; k < 2; k++) {
                const struct plan *p = k ? p1 : p0;
                unsigned with_cpus = 0;

                strbuf_reset(&sb);
                render_pack_set_metrics(p, &sb);
                assert_non_null(strstr(sb.data, "# HELP vmmpower_pack_set_queued_ratio "));
                assert_non_null(strstr(sb.data, "# TYPE vmmpower_pack_set_queued_ratio gauge\n"));
                assert_non_null(strstr(sb.data, "# TYPE vmmpower_pack_set_queue_budget_ratio gauge\n"));
                for (unsigned g = 0; g < p->n_llcs; g++) {
                        const struct plan_set *ps = &p->set[g];
                        snprintf(key, sizeof(key), "llc=\"%u\"", g);
                        if (ps->cpus == 0) {
                                assert_null(strstr(sb.data, key)); /* only sets with CPUs */
                                continue;
                        }
                        with_cpus++;
                        predicted += ps->pwait > 0.0;
                        measured += ps->measured > 0.0;
                        snprintf(key, sizeof(key), "vmmpower_pack_set_cpus{llc=\"%u\"}", g);
                        assert_close(sample(sb.data, key), ps->cpus);
                        snprintf(key, sizeof(key), "vmmpower_pack_set_queued_ratio{llc=\"%u\",kind=\"predicted\"}", g);
                        assert_close(sample(sb.data, key), ps->pwait);
                        snprintf(key, sizeof(key), "vmmpower_pack_set_queued_ratio{llc=\"%u\",kind=\"measured\"}", g);
                        assert_close(sample(sb.data, key), ps->measured);
                        snprintf(key, sizeof(key), "vmmpower_pack_set_queue_budget_ratio{llc=\"%u\"}", g);
                        assert_close(sample(sb.data, key), ps->budget);
                        assert_close(ps->budget, 0.01); /* QueueBudgetPercent's default */
                        snprintf(key, sizeof(key), "vmmpower_pack_set_model_correction{llc=\"%u\"}", g);
                        assert_close(sample(sb.data, key), ps->corr);
                }
                print_message("# plan %u: %u sets with CPUs\n", k, with_cpus);
                assert_true(with_cpus > 0);
        }
        /* two small vCPUs: one set, in LLC 0; LLC 1 has no series */
        {
                struct plan *p2 = NULL;
                assert_int_equal(plan_compute(h, &pol, v, 2, NULL, 0, NULL, 0, &p2), 0);
                assert_true(p2->set[0].cpus > 0 && p2->set[1].cpus == 0);
                strbuf_reset(&sb);
                render_pack_set_metrics(p2, &sb);
                assert_close(sample(sb.data, "vmmpower_pack_set_cpus{llc=\"0\"}"), p2->set[0].cpus);
                assert_null(strstr(sb.data, "llc=\"1\""));
                plan_free(p2);
        }
        /* the values were not all 0: a predicted share (first plan), a measured one (second) */
        print_message("# %u predicted and %u measured shares over 0\n", predicted, measured);
        assert_true(predicted > 0);
        assert_true(measured > 0);
        strbuf_free(&sb);
        plan_free(p0);
        plan_free(p1);
        em_host_free(h);
        topology_free(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pack_set_gauges),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
