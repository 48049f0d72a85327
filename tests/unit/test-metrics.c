/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The pack-set gauges of the metrics (render_pack_set_metrics, metrics.c)
 * against the plan they come from: a plan computed on the xeon-spr-2s fixture
 * (two LLCs), with a measured wait so that "measured" is not 0.  And the
 * statistics render_metrics and render_status take from a struct daemon_view
 * (daemon_view.h) built by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "coexist.h"
#include "config.h"
#include "daemon_view.h"
#include "energy_model.h"
#include "placement.h"
#include "plan_input.h"
#include "procscan.h"
#include "topology.h"
#include "util.h"
#include "vcpu_track.h"

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

/* The xeon-spr-2s fixture with the shipped model of that host. */
static void load_spr(struct topology **t, struct em_host **h)
{
        char path[512];
        struct energy_model m;
        struct em_error err = {};

        assert_true(path_printf(path, sizeof(path), "%s/topology/xeon-spr-2s/sys", TEST_DATA_DIR) > 0);
        assert_int_equal(topology_load(path, t), 0);
        assert_true(path_printf(path, sizeof(path), "%s/../../config/models/xeon-spr-2s.model", TEST_DATA_DIR) > 0);
        if (energy_model_parse_file(path, &m, &err) < 0)
                fail_msg("%s:%u: %s", err.file, err.line, err.message);
        assert_int_equal(em_host_new(*t, &m, h), 0);
}

static void test_pack_set_gauges(void **state)
{
        char key[128];
        struct topology *t = NULL;
        struct em_host *h = NULL;
        struct plan_policy pol;
        struct plan_vcpu v[48];
        struct plan *p0 = NULL, *p1 = NULL;
        struct strbuf sb;
        unsigned predicted = 0, measured = 0;

        (void) state;
        load_spr(&t, &h);
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

/* The text between the first "key" of text and the next ',' or '}' (its JSON value), or fail. */
static void assert_json(const char *text, const char *key, const char *want)
{
        char k[128], got[128];
        const char *at;
        size_t n;

        snprintf(k, sizeof(k), "\"%s\":", key);
        at = strstr(text, k);
        if (!at)
                fail_msg("no %s in:\n%s", k, text);
        at += strlen(k);
        n = strcspn(at, ",}");
        snprintf(got, sizeof(got), "%.*s", (int) n, at);
        if (strcmp(got, want) != 0)
                fail_msg("%s %s, not %s", k, got, want);
}

/*
 * vmmpowerctl plan's reason for a pack set's size: a set over its budget that already holds every
 * CPU of its LLC says it cannot grow (it used to promise a grow at the next period that no plan
 * could make), and a set within its budget does not say so.
 */
static void test_plan_set_reason(void **state)
{
        struct topology *t = NULL;
        struct em_host *h = NULL;
        struct plan_policy pol;
        struct plan_vcpu v[128];
        struct plan *p = NULL;
        struct vp_config cfg;
        struct daemon_counters counters = { 0 };
        struct plan_input in = { 0 };
        struct daemon_view view;
        struct strbuf sb;
        static const char full[] = "over the budget with every CPU of its LLC";

        (void) state;
        load_spr(&t, &h);
        assert_int_equal(h->n_llcs, 2);
        plan_policy_defaults(&pol); /* latency profile */
        config_defaults(&cfg);
        strbuf_init(&sb);
        for (unsigned round = 0; round < 2; round++) {
                /* round 0: 128 vCPUs of 0.24 (30.7 CPUs of demand on 32): every set whole and over its
                 * budget; round 1: 8 of them, sets within it */
                unsigned n = round ? 8 : 128, over_full = 0, sets = 0;
                for (unsigned i = 0; i < n; i++)
                        v[i] = (struct plan_vcpu) { .key = 1 + i, .vm = 1 + i, .util = 0.24, .cur_cpu = -1 };
                assert_int_equal(plan_compute(h, &pol, v, n, NULL, 0, NULL, 0, &p), 0);
                for (unsigned g = 0; g < p->n_llcs; g++) {
                        sets += p->set[g].cpus > 0;
                        over_full += p->set[g].cpus == 16 && p->set[g].pwait > p->set[g].budget;
                }
                view = (struct daemon_view) { .now = NSEC_PER_SEC, .cfg = &cfg, .topo = t, .em = h, .plan = p,
                                              .plan_in = &in, .counters = &counters, .model_source = "" };
                strbuf_reset(&sb);
                render_plan(&view, false, &sb);
                assert_false(sb.oom);
                print_message("# %u vCPUs: %u sets, %u whole and over the budget\n", n, sets, over_full);
                assert_true(sets > 0);
                if (round == 0) {
                        assert_int_equal(over_full, 2);
                        assert_non_null(strstr(sb.data, full));
                        assert_null(strstr(sb.data, "grows at the next period"));
                } else {
                        assert_int_equal(over_full, 0);
                        assert_null(strstr(sb.data, full));
                }
                plan_free(p);
                p = NULL;
        }
        strbuf_free(&sb);
        em_host_free(h);
        topology_free(t);
}

/*
 * The applier's and the libvirt source's statistics are kept by their threads
 * under their locks: daemon_view() copies them into the view, and render_status
 * and render_metrics print those copies (zeros, and "enabled":false, without
 * an applier or a libvirt source), the time from view.now.
 */
/* <root>/<pid>/task/<tid>/schedstat with run ns on CPU */
static void fake_vcpu_thread(const char *root, int pid, int tid, unsigned long long run)
{
        char cmd[512];

        snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%d/task/%d' && echo '%llu 1000 10' > '%s/%d/task/%d/schedstat'", root,
                 pid, tid, run, root, pid, tid);
        assert_int_equal(system(cmd), 0);
}

/*
 * Two plain QEMUs with one -name and no -uuid (and a third with that name and a uuid): the
 * first two would write the same series twice, which makes node-exporter's textfile collector
 * drop the whole file; their domain label names the pid, the third keeps its name.
 */
static void test_shared_vm_labels(void **state)
{
        char root[] = "/tmp/vmmpt-metrics-proc-XXXXXX", cmd[128];
        static const struct vcpu_info v1[] = { { 0, 101 } }, v2[] = { { 0, 201 } }, v3[] = { { 0, 301 } };
        struct vm_info vms[3] = {
                { .pid = 100, .name = "web", .libvirt_id = -1, .n_vcpus = 1, .vcpus = (struct vcpu_info *) v1 },
                { .pid = 200, .name = "web", .libvirt_id = -1, .n_vcpus = 1, .vcpus = (struct vcpu_info *) v2 },
                { .pid = 300, .name = "web", .uuid = "6f1c2d9e-0000-4000-8000-000000000003", .libvirt_id = -1,
                  .n_vcpus = 1, .vcpus = (struct vcpu_info *) v3 },
        };
        struct topology *t = NULL;
        struct tracker *tr = NULL;
        struct vp_config cfg;
        struct daemon_counters counters = { 0 };
        struct coexist_report coexist = { 0 };
        struct procscan_stats scans = { 0 };
        struct plan_input in = { 0 };
        struct daemon_view v;
        struct strbuf sb;
        char path[512];

        (void) state;
        assert_non_null(mkdtemp(root));
        fake_vcpu_thread(root, 100, 101, 1000000000ULL);
        fake_vcpu_thread(root, 200, 201, 2000000000ULL);
        fake_vcpu_thread(root, 300, 301, 3000000000ULL);
        assert_true(path_printf(path, sizeof(path), "%s/topology/debian-2cpu-haltpoll/sys", TEST_DATA_DIR) > 0);
        assert_int_equal(topology_load(path, &t), 0);
        assert_int_equal(tracker_new(root, NSEC_PER_SEC, &tr), 0);
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, vms, 3, 0), 0);
        assert_true(tracker_sample(tr, NSEC_PER_SEC) >= 0);
        config_defaults(&cfg);
        v = (struct daemon_view) { .now = 2 * NSEC_PER_SEC, .config_path = "/nonexistent/vmmpower.conf", .cfg = &cfg,
                                   .topo = t, .tracker = tr, .model_source = "", .plan_in = &in,
                                   .counters = &counters, .coexist = &coexist, .procscan_stats = &scans };
        strbuf_init(&sb);
        render_metrics(&v, &sb);
        assert_false(sb.oom);
        assert_close(sample(sb.data, "vmmpower_vcpu_run_seconds_total{domain=\"web [pid 100]\",uuid=\"\",vcpu=\"0\"}"), 1);
        assert_close(sample(sb.data, "vmmpower_vcpu_run_seconds_total{domain=\"web [pid 200]\",uuid=\"\",vcpu=\"0\"}"), 2);
        assert_close(sample(sb.data, "vmmpower_vcpu_run_seconds_total{domain=\"web\",uuid=\"6f1c2d9e-0000-4000-8000-"
                                     "000000000003\",vcpu=\"0\"}"), 3);
        /* one of them renamed: no longer shared, both plain again */
        snprintf(vms[1].name, sizeof(vms[1].name), "db");
        assert_int_equal(tracker_set_source(tr, VM_SOURCE_PROC, vms, 3, NSEC_PER_SEC), 0);
        strbuf_reset(&sb);
        render_metrics(&v, &sb);
        assert_false(sb.oom);
        assert_non_null(strstr(sb.data, "vmmpower_vcpu_run_seconds_total{domain=\"web\",uuid=\"\",vcpu=\"0\"}"));
        assert_null(strstr(sb.data, "[pid "));
        strbuf_free(&sb);
        tracker_free(tr);
        topology_free(t);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        assert_int_equal(system(cmd), 0);
}

static void test_view_stats(void **state)
{
        char path[512], dir[] = "/tmp/vmmpt-metrics-XXXXXX", line[512];
        struct topology *t = NULL;
        struct tracker *tr = NULL;
        struct vp_config cfg;
        struct daemon_counters counters = { .periods = 3 };
        struct coexist_report coexist = { 0 };
        struct procscan_stats scans = { .scans = 2, .other_user = 9, .last_other_user = 3 };
        struct plan_input in = { 0 };
        struct daemon_view v;
        struct strbuf sb;

        (void) state;
        assert_true(path_printf(path, sizeof(path), "%s/topology/debian-2cpu-haltpoll/sys", TEST_DATA_DIR) > 0);
        assert_int_equal(topology_load(path, &t), 0);
        assert_int_equal(tracker_new("/proc", NSEC_PER_SEC, &tr), 0);
        assert_non_null(mkdtemp(dir));
        config_defaults(&cfg);
        snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", dir); /* no corrupt journal copies */
        v = (struct daemon_view) {
                .now = 5 * NSEC_PER_SEC, .start_ns = NSEC_PER_SEC, .config_path = "/nonexistent/vmmpower.conf",
                .cfg = &cfg, .topo = t, .tracker = tr, .model_source = "", .plan_in = &in, .counters = &counters,
                .coexist = &coexist, .procscan_stats = &scans, .qmp_failing = 1,
                .applier = true, .apply = { .passes = 13, .pins = 7, .pin_errors = 2, .knob_changes = 11, .journal_errors = 4 },
                .libvirt = true, .libvirt_stats = { .connected = true, .connects = 5, .events = 17 },
        };

        strbuf_init(&sb);
        render_metrics(&v, &sb);
        assert_false(sb.oom);
        assert_close(sample(sb.data, "vmmpower_plans_applied"), 1);
        assert_close(sample(sb.data, "vmmpower_apply_pins_total"), 7);
        assert_close(sample(sb.data, "vmmpower_apply_pin_errors_total"), 2);
        assert_close(sample(sb.data, "vmmpower_apply_knob_changes_total"), 11);
        assert_close(sample(sb.data, "vmmpower_apply_journal_errors_total"), 4);
        assert_close(sample(sb.data, "vmmpower_libvirt_connected"), 1);
        assert_close(sample(sb.data, "vmmpower_libvirt_connects_total"), 5);
        assert_close(sample(sb.data, "vmmpower_libvirt_events_total"), 17);
        assert_close(sample(sb.data, "vmmpower_procscan_scans_total"), 2);
        assert_close(sample(sb.data, "vmmpower_procscan_other_user_total"), 9);
        assert_close(sample(sb.data, "vmmpower_periods_total"), 3);

        strbuf_reset(&sb);
        render_status(&v, true, &sb);
        assert_false(sb.oom);
        assert_json(sb.data, "uptime_s", "4.0");
        assert_json(sb.data, "other_user", "9");
        assert_json(sb.data, "apply\":{\"enabled", "true");
        assert_json(sb.data, "passes", "13");
        assert_json(sb.data, "journal_errors", "4");
        assert_json(sb.data, "pins", "7");
        assert_json(sb.data, "libvirt\":{\"enabled", "true");
        assert_json(sb.data, "connected", "true");
        assert_json(sb.data, "connects", "5");
        assert_json(sb.data, "failing", "1");
        strbuf_reset(&sb);
        render_status(&v, false, &sb);
        assert_non_null(strstr(sb.data, ", up 4 s\n"));
        assert_non_null(strstr(sb.data, "\nplans:         applied: 13 passes, 7 pins, 2 pin errors, 11 knob changes, "
                                        "0 knob errors\n"));
        snprintf(line, sizeof(line), "\nlibvirt:       connected (%s), 5 connects, 17 events, 0 errors\n",
                 cfg.libvirt_uri);
        assert_non_null(strstr(sb.data, line));
        assert_non_null(strstr(sb.data, "(1 failing, "));

        /* advisory, libvirt off: zeros */
        v.applier = v.libvirt = false;
        v.apply = (struct apply_stats) { 0 };
        v.libvirt_stats = (struct libvirt_src_stats) { 0 };
        strbuf_reset(&sb);
        render_metrics(&v, &sb);
        assert_close(sample(sb.data, "vmmpower_plans_applied"), 0);
        assert_close(sample(sb.data, "vmmpower_apply_pins_total"), 0);
        assert_close(sample(sb.data, "vmmpower_libvirt_connected"), 0);
        assert_close(sample(sb.data, "vmmpower_libvirt_connects_total"), 0);
        strbuf_reset(&sb);
        render_status(&v, true, &sb);
        assert_json(sb.data, "apply\":{\"enabled", "false");
        assert_json(sb.data, "why", "\"planner off\"");
        assert_json(sb.data, "libvirt\":{\"enabled", "false");
        strbuf_reset(&sb);
        render_status(&v, false, &sb);
        assert_non_null(strstr(sb.data, "\nlibvirt:       disabled\n"));

        /* a dry run's applier on the sim driver: shown as what would be done, never as applied */
        v.dry_run = v.simulated = true;
        v.sim_apply = (struct apply_stats) { .passes = 4, .pins = 6, .pins_current = 3, .knob_changes = 9 };
        strbuf_reset(&sb);
        render_metrics(&v, &sb);
        assert_close(sample(sb.data, "vmmpower_plans_applied"), 0);
        assert_close(sample(sb.data, "vmmpower_apply_pins_total"), 0);
        assert_close(sample(sb.data, "vmmpower_dry_run"), 1);
        strbuf_reset(&sb);
        render_status(&v, true, &sb);
        assert_json(sb.data, "apply\":{\"enabled", "false");
        assert_json(sb.data, "why", "\"dry run\"");
        assert_non_null(strstr(sb.data, "\"simulated\":{\"passes\":4,\"pins\":6,\"pins_current\":3,\"knob_changes\":9}"));
        strbuf_reset(&sb);
        render_status(&v, false, &sb);
        assert_non_null(strstr(sb.data, "\nplans:         advisory, --dry-run: nothing on the host is changed; on the sim "
                                        "power driver: 4 passes, 6 pins and 9 knob changes would have been made\n"));

        strbuf_free(&sb);
        assert_int_equal(rmdir(dir), 0);
        tracker_free(tr);
        topology_free(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pack_set_gauges),
                cmocka_unit_test(test_view_stats),
                cmocka_unit_test(test_shared_vm_labels),
                cmocka_unit_test(test_plan_set_reason),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
