/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Energy model: model file parser (good and bad files under
 * tests/data/models/, the shipped config/models/ files), defaults derived
 * from each topology fixture, the model bound to a topology (cores,
 * frequency and idle domains, wake orders) and the power arithmetic against
 * values recomputed here from the equations in docs/energy-model.md.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "energy_model.h"
#include "topology.h"
#include "util.h"

static void data_path(char *buf, size_t size, const char *rel)
{
        assert_true(path_printf(buf, size, "%s/%s", TEST_DATA_DIR, rel) > 0);
}

static void load_model(const char *rel, struct energy_model *m)
{
        char path[512];
        struct em_error err = {};
        data_path(path, sizeof(path), rel);
        if (energy_model_parse_file(path, m, &err) < 0)
                fail_msg("%s:%u: %s", err.file, err.line, err.message);
}

static struct topology *load_topology(const char *name)
{
        char path[512];
        struct topology *t = NULL;
        assert_true(path_printf(path, sizeof(path), "%s/topology/%s/sys", TEST_DATA_DIR, name) > 0);
        assert_int_equal(topology_load(path, &t), 0);
        return t;
}

/* ---- parser ------------------------------------------------------------------ */

static void test_good_minimal(void **state)
{
        struct energy_model m;
        load_model("models/good-minimal.model", &m);
        assert_string_equal(m.name, "minimal");
        assert_int_equal(m.n_levels, 1);
        assert_int_equal(m.levels[0].freq_khz, 0);
        assert_int_equal(m.levels[0].capacity, 1024);
        assert_int_equal(m.levels[0].active_mw, 3000);
        assert_int_equal(m.n_idle, 1);
        assert_string_equal(m.idle[0].name, "C1");
        assert_false(m.domain[EM_DOMAIN_LLC].present);
        assert_false(m.domain[EM_DOMAIN_PACKAGE].present);
        /* documented defaults of the optional [Model] keys */
        assert_int_equal(m.freq_scope, EM_FREQ_CORE);
        assert_int_equal(m.smt_gain_permille, 1250);
        assert_int_equal(m.migration_cost_uj, 50);
        assert_int_equal(m.active_idle_interval_us, 1000);
        assert_false(m.package_idle_all_packages);
}

static void test_good_full(void **state)
{
        struct energy_model m;
        load_model("models/good-full.model", &m);
        assert_string_equal(m.name, "full-1.0");
        assert_int_equal(m.freq_scope, EM_FREQ_PACKAGE);
        assert_int_equal(m.smt_gain_permille, 1300);
        assert_int_equal(m.migration_cost_uj, 10);
        assert_int_equal(m.active_idle_interval_us, 4000);
        assert_true(m.package_idle_all_packages);
        assert_int_equal(m.n_levels, 2);
        assert_int_equal(m.levels[1].freq_khz, 2000000);
        assert_int_equal(m.n_idle, 2);
        assert_int_equal(m.idle[1].exit_latency_us, 100);
        assert_int_equal(m.idle[1].target_residency_us, 400);
        assert_true(m.domain[EM_DOMAIN_LLC].present);
        /* QuietPowerMW defaults to AwakePowerMW */
        assert_int_equal(m.domain[EM_DOMAIN_LLC].quiet_mw, 2000);
        assert_int_equal(m.domain[EM_DOMAIN_PACKAGE].quiet_mw, 15000);
        assert_int_equal(m.domain[EM_DOMAIN_PACKAGE].asleep_mw, 5000);
}

static void assert_round_trip(const struct energy_model *m);

/* The keys of issue 18, and their defaults leaving an older file meaning what it meant. */
static void test_good_features(void **state)
{
        struct energy_model m, old;
        struct em_error err = {};

        load_model("models/good-features.model", &m);
        assert_int_equal(m.package_power_limit_mw, 350000);
        assert_int_equal(m.platform_mw, 40000);
        assert_int_equal(m.platform_busy_mw, 25000);
        assert_int_equal(m.psu_efficiency_permille, 940);
        assert_int_equal(m.levels[0].max_active_cores, 0);
        assert_int_equal(m.levels[1].max_active_cores, 32);
        assert_int_equal(m.levels[2].max_active_cores, 4);
        assert_int_equal(m.idle[1].wake_energy_uj, 30);
        assert_int_equal(m.domain[EM_DOMAIN_PACKAGE].wake_energy_uj, 200);
        assert_round_trip(&m);
        /* defaults: no limit, no turbo table, no platform, PSU 1.0, no wake-up energy */
        load_model("models/good-full.model", &old);
        assert_int_equal(old.package_power_limit_mw, 0);
        assert_int_equal(old.platform_mw + old.platform_busy_mw, 0);
        assert_int_equal(old.psu_efficiency_permille, 1000);
        for (unsigned i = 0; i < old.n_levels; i++)
                assert_int_equal(old.levels[i].max_active_cores, 0);
        for (unsigned i = 0; i < old.n_idle; i++)
                assert_int_equal(old.idle[i].wake_energy_uj, 0);
        /* a faster level cannot allow more busy cores, nor lift the limit (0) above a limited one */
        const char *head = "[Model]\nName = x\n[PerfLevel]\nFrequencyKHz = 1\nCapacity = 500\nActivePowerMW = 10\n"
                           "MaxActiveCores = 8\n[PerfLevel]\nFrequencyKHz = 2\nCapacity = 1024\nActivePowerMW = 20\n";
        char buf[512];
        snprintf(buf, sizeof(buf), "%sMaxActiveCores = 16\n[IdleState]\nName = C1\nExitLatencyUs = 1\n"
                 "TargetResidencyUs = 1\nPowerMW = 1\n", head);
        assert_int_equal(energy_model_parse_string(buf, "s", &m, &err), -EINVAL);
        assert_non_null(strstr(err.message, "MaxActiveCores must not increase"));
        snprintf(buf, sizeof(buf), "%s[IdleState]\nName = C1\nExitLatencyUs = 1\nTargetResidencyUs = 1\nPowerMW = 1\n",
                 head);
        assert_int_equal(energy_model_parse_string(buf, "s", &m, &err), -EINVAL);
        assert_non_null(strstr(err.message, "MaxActiveCores must not increase"));
        assert_int_equal(energy_model_parse_string("[Model]\nName = x\nPsuEfficiency = 0.4\n", "s", &m, &err), -EINVAL);
        assert_non_null(strstr(err.message, "invalid PsuEfficiency"));
        assert_int_equal(energy_model_parse_string("[Model]\nName = x\nPsuEfficiency = 1.01\n", "s", &m, &err), -EINVAL);
}

static void test_shipped_models(void **state)
{
        static const char *const files[] = { "../../config/models/xeon-spr-2s.model",
                                             "../../config/models/epyc-genoa.model" };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                struct energy_model m, again;
                char *buf = NULL;
                size_t len = 0;
                FILE *f;
                struct em_error err = {};

                load_model(files[i], &m);
                assert_true(m.n_levels >= 3);
                assert_int_equal(m.levels[m.n_levels - 1].capacity, 1024);
                assert_true(m.domain[EM_DOMAIN_PACKAGE].present);
                /* write + parse gives the same model */
                f = open_memstream(&buf, &len);
                assert_non_null(f);
                energy_model_write(&m, f);
                assert_int_equal(fclose(f), 0);
                if (energy_model_parse_string(buf, "written", &again, &err) < 0)
                        fail_msg("written model: line %u: %s", err.line, err.message);
                assert_memory_equal(&m, &again, sizeof(m));
                free(buf);
        }
        struct energy_model spr;
        load_model("../../config/models/xeon-spr-2s.model", &spr);
        assert_true(spr.package_idle_all_packages);
        assert_false(spr.domain[EM_DOMAIN_LLC].present);
        /* idle states as intel_idle's spr_cstates[] */
        assert_string_equal(spr.idle[2].name, "C6");
        assert_int_equal(spr.idle[2].exit_latency_us, 290);
        assert_int_equal(spr.idle[2].target_residency_us, 800);
}

struct bad_case {
        const char *file;
        unsigned line;
        const char *message;
};

static void test_bad_files(void **state)
{
        static const struct bad_case cases[] = {
                { "bad-unknown-key.model", 3, "unknown key 'Nmae' in section [Model]" },
                { "bad-unknown-section.model", 1, "unknown section [Modle]" },
                { "bad-duplicate-key.model", 6, "duplicate key 'Capacity' in [PerfLevel] (first set on line 5)" },
                { "bad-capacity-order.model", 0, "PerfLevel 2: capacities must increase (500 after 600)" },
                { "bad-last-capacity.model", 0, "the last PerfLevel must have Capacity 1024 (it is 1000)" },
                { "bad-residency.model", 0, "IdleState C1: TargetResidencyUs 1 < ExitLatencyUs 5" },
                { "bad-negative-power.model", 16, "invalid value for PowerMW: '-5'" },
                { "bad-missing-key.model", 3, "section [PerfLevel] lacks the required key ActivePowerMW" },
                { "bad-no-model.model", 0, "no [Model] section" },
                { "bad-smt-gain.model", 3, "invalid SmtGain '2.5'" },
                { "bad-domain-order.model", 0, "IdleDomain llc: need AsleepPowerMW <= QuietPowerMW <= AwakePowerMW" },
                { "bad-key-outside.model", 1, "key 'Name' outside of any section" },
                { "bad-idle-power-order.model", 0, "IdleState C6: PowerMW 200 above the shallower C1's 100" },
                { "bad-pkg-flag.model", 0, "PackageIdleAllPackages = yes needs an [IdleDomain] with Scope = package" },
                { "bad-scope.model", 4, "invalid Scope 'die'" },
                { "bad-header.model", 1, "malformed section header" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char rel[128], path[512];
                struct energy_model m;
                struct em_error err = {};

                snprintf(rel, sizeof(rel), "models/%s", cases[i].file);
                data_path(path, sizeof(path), rel);
                memset(&m, 0xa5, sizeof(m));
                int r = energy_model_parse_file(path, &m, &err);
                if (r != -EINVAL)
                        fail_msg("%s: expected -EINVAL, got %d", cases[i].file, r);
                if (err.line != cases[i].line || !strstr(err.message, cases[i].message))
                        fail_msg("%s: got %s:%u: '%s', expected line %u: '%s'", cases[i].file, err.file, err.line,
                                 err.message, cases[i].line, cases[i].message);
                assert_string_equal(err.file, path);
                /* nothing written on failure */
                assert_int_equal(((unsigned char *) &m)[0], 0xa5);
        }
}

static void test_bad_strings(void **state)
{
        struct energy_model m;
        struct em_error err = {};

        assert_int_equal(energy_model_parse_string("[Model]\nName = a\001b\n", "s", &m, &err), -EINVAL);
        assert_int_equal(err.line, 2);
        assert_non_null(strstr(err.message, "control character 0x01"));
        assert_int_equal(energy_model_parse_string("[Model]\nName = a b\n", "s", &m, &err), -EINVAL);
        assert_non_null(strstr(err.message, "invalid Name"));
        assert_int_equal(energy_model_parse_string("[Model]\nName = x\nSmtGain = 1.2345\n", "s", &m, &err), -EINVAL);
        assert_int_equal(energy_model_parse_string("[Model]\nName = x\n[PerfLevel]\nCapacity = 2000\n", "s", &m, &err),
                         -EINVAL);
        assert_non_null(strstr(err.message, "Capacity 2000 outside 1..1024"));
        assert_int_equal(energy_model_parse_string("[Model]\nName = x\nMigrationCostUJ = 99999999999\n", "s", &m, &err),
                         -EINVAL);
        assert_int_equal(energy_model_parse_string("[Model]\nName =\n", "s", &m, &err), -EINVAL);
        assert_non_null(strstr(err.message, "empty value for Name"));
        assert_int_equal(energy_model_parse_string("", "s", &m, &err), -EINVAL);
        assert_non_null(strstr(err.message, "no [Model] section"));
        assert_int_equal(energy_model_parse_file("/nonexistent/x.model", &m, &err), -ENOENT);
}

/* ---- defaults from topology fixtures ------------------------------------------ */

/* A derived model is a valid model file too: write, parse back, same model. */
static void assert_round_trip(const struct energy_model *m)
{
        struct energy_model again;
        struct em_error err = {};
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        assert_non_null(f);
        energy_model_write(m, f);
        assert_int_equal(fclose(f), 0);
        if (energy_model_parse_string(buf, "written", &again, &err) < 0)
                fail_msg("written model: line %u: %s\n%s", err.line, err.message, buf);
        assert_memory_equal(m, &again, sizeof(*m));
        free(buf);
}

static void test_defaults_debian(void **state)
{
        struct topology *t = load_topology("debian-2cpu-haltpoll");
        struct energy_model m;
        struct em_host *h = NULL;

        assert_int_equal(energy_model_from_topology(t, &m), 0);
        assert_round_trip(&m);
        assert_int_equal(energy_model_validate(&m, NULL), 0);
        /* no cpufreq: one level of unknown frequency */
        assert_int_equal(m.n_levels, 1);
        assert_int_equal(m.levels[0].freq_khz, 0);
        assert_int_equal(m.levels[0].capacity, 1024);
        /* cpuidle without POLL: "haltpoll idle" 1/1 us, name made safe */
        assert_int_equal(m.n_idle, 1);
        assert_string_equal(m.idle[0].name, "haltpoll_idle");
        assert_int_equal(m.idle[0].exit_latency_us, 1);
        assert_false(m.domain[EM_DOMAIN_LLC].present);
        assert_true(m.domain[EM_DOMAIN_PACKAGE].present);
        assert_false(m.package_idle_all_packages);

        assert_int_equal(em_host_new(t, &m, &h), 0);
        assert_int_equal(h->n_cores, 2);
        assert_int_equal(h->n_pkgs, 1);
        assert_int_equal(h->n_fdoms, 2);
        assert_int_equal(h->cores[0].n_threads, 1);
        em_host_free(h);
        topology_free(t);
}

/*
 * A cpufreq table whose only entry is 0 kHz (found by fuzz-topology: the
 * largest frequency was the divisor of every level's capacity) gives the
 * one-level model of a host without a table, and a table with a 0 among real
 * entries its real levels; cpuinfo_min above cpuinfo_max spans nothing.
 */
static void test_defaults_zero_freq(void **state)
{
        struct topology *t = load_topology("xeon-spr-2s");
        struct topo_cpufreq_policy *p;
        struct energy_model m;

        (void) state;
        p = &t->policies[t->cpus[0].policy];
        p->n_freqs = 1;
        p->freqs_khz[0] = 0;
        assert_int_equal(energy_model_from_topology(t, &m), 0);
        assert_int_equal(m.n_levels, 1);
        assert_int_equal(m.levels[0].capacity, EM_CAPACITY_SCALE);
        assert_int_equal(energy_model_validate(&m, &(struct em_error) { 0 }), 0);

        p->n_freqs = 3;
        p->freqs_khz[1] = 1000000;
        p->freqs_khz[2] = 2000000;
        assert_int_equal(energy_model_from_topology(t, &m), 0);
        assert_int_equal(m.n_levels, 2);
        assert_int_equal(m.levels[0].freq_khz, 1000000);
        assert_int_equal(m.levels[1].capacity, EM_CAPACITY_SCALE);

        p->n_freqs = 0;
        for (unsigned i = 0; i < t->n_policies; i++) {
                t->policies[i].cpuinfo_min_khz = 3000000;
                t->policies[i].cpuinfo_max_khz = 2000000;
        }
        assert_int_equal(energy_model_from_topology(t, &m), 0);
        assert_int_equal(m.levels[m.n_levels - 1].freq_khz, 2000000);
        for (unsigned i = 0; i < m.n_levels; i++)
                assert_true(m.levels[i].freq_khz <= 2000000);
        topology_free(t);
}

static void test_defaults_spr(void **state)
{
        struct topology *t = load_topology("xeon-spr-2s");
        struct energy_model m;
        struct em_host *h = NULL;

        assert_int_equal(energy_model_from_topology(t, &m), 0);
        assert_round_trip(&m);
        /* intel_pstate without a table: min..max with base_frequency among the levels */
        assert_int_equal(m.levels[0].freq_khz, 800000);
        assert_int_equal(m.levels[m.n_levels - 1].freq_khz, 3800000);
        bool has_base = false;
        for (unsigned i = 0; i < m.n_levels; i++)
                has_base |= m.levels[i].freq_khz == 2000000;
        assert_true(has_base);
        assert_int_equal(m.levels[0].capacity, (800000 * 1024 + 1900000) / 3800000);
        assert_int_equal(m.n_idle, 3);
        assert_string_equal(m.idle[2].name, "C6");
        assert_int_equal(m.idle[2].exit_latency_us, 290);
        assert_int_equal(m.idle[2].target_residency_us, 800);
        /* LLC = package: no LLC domain; Intel 2 sockets: package idle needs all packages */
        assert_false(m.domain[EM_DOMAIN_LLC].present);
        assert_true(m.package_idle_all_packages);

        assert_int_equal(em_host_new(t, &m, &h), 0);
        assert_int_equal(h->n_cores, 16);
        assert_int_equal(h->n_pkgs, 2);
        assert_int_equal(h->n_llcs, 2);
        /* per-CPU policies joined with SMT siblings: one domain per core */
        assert_int_equal(h->n_fdoms, 16);
        assert_int_equal(h->cpu_fdom[0], h->cpu_fdom[16]);
        assert_int_not_equal(h->cpu_fdom[0], h->cpu_fdom[1]);
        /* wake orders: sibling right after its core / all first threads of the package first */
        assert_int_equal(h->order_smt_first[0], 0);
        assert_int_equal(h->order_smt_first[1], 16);
        assert_int_equal(h->order_cores_first[0], 0);
        assert_int_equal(h->order_cores_first[1], 1);
        assert_int_equal(h->order_cores_first[8], 16);
        assert_int_equal(h->cores[h->cpu_core[24]].pkg, 1);
        em_host_free(h);

        /* FrequencyScope = policy keeps the kernel's per-CPU domains; package joins a package */
        m.freq_scope = EM_FREQ_POLICY;
        assert_int_equal(em_host_new(t, &m, &h), 0);
        assert_int_equal(h->n_fdoms, 32);
        em_host_free(h);
        m.freq_scope = EM_FREQ_PACKAGE;
        assert_int_equal(em_host_new(t, &m, &h), 0);
        assert_int_equal(h->n_fdoms, 2);
        em_host_free(h);
        topology_free(t);
}

static void test_defaults_genoa(void **state)
{
        struct topology *t = load_topology("epyc-genoa-1s");
        struct energy_model m;
        struct em_host *h = NULL;

        assert_int_equal(energy_model_from_topology(t, &m), 0);
        assert_round_trip(&m);
        /* acpi-cpufreq table 1.5/2.2/2.4 GHz */
        assert_int_equal(m.n_levels, 3);
        assert_int_equal(m.levels[0].freq_khz, 1500000);
        assert_int_equal(m.levels[0].capacity, 640);
        assert_int_equal(m.levels[1].capacity, 939);
        assert_int_equal(m.n_idle, 2);
        assert_string_equal(m.idle[1].name, "C2");
        /* CCX smaller than the package: an LLC idle domain; AMD: no all-packages rule */
        assert_true(m.domain[EM_DOMAIN_LLC].present);
        assert_false(m.package_idle_all_packages);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        assert_int_equal(h->n_cores, 32);
        assert_int_equal(h->n_llcs, 4);
        assert_int_equal(h->n_pkgs, 1);
        assert_int_equal(h->llcs[1].first, 8);
        assert_int_equal(h->llcs[1].end, 16);
        assert_int_equal(h->cores[h->cpu_core[40]].llc, 1);
        em_host_free(h);
        topology_free(t);
}

/* ---- power arithmetic ------------------------------------------------------------ */

struct load_buf {
        double work[64];
        uint8_t vcpus[64];
        uint32_t lat[64];
        uint8_t level[64];
};

static struct em_load load_of(struct load_buf *b)
{
        return (struct em_load) { .cpu_work = b->work, .cpu_vcpus = b->vcpus, .cpu_max_latency_us = b->lat, .fdom_level = b->level };
}

static void load_init(struct load_buf *b)
{
        memset(b, 0, sizeof(*b));
        for (unsigned i = 0; i < 64; i++)
                b->lat[i] = EM_LATENCY_ANY;
}

static double F(double n, double r, double interval)
{
        double x = n * r / interval;
        return n == 0 ? 1.0 : exp(-x) * (1.0 + x);
}

static void assert_close(double got, double want)
{
        if (fabs(got - want) > 1e-6 * MAX(1.0, fabs(want)))
                fail_msg("got %.6f, want %.6f", got, want);
}

/* The terms of docs/energy-model.md §2 alone: no limit, turbo table, platform, PSU or wake-up energy. */
static void core_terms_only(struct energy_model *m)
{
        m->package_power_limit_mw = 0;
        m->platform_mw = m->platform_busy_mw = 0;
        m->psu_efficiency_permille = 1000;
        for (unsigned i = 0; i < m->n_levels; i++)
                m->levels[i].max_active_cores = 0;
        for (unsigned i = 0; i < m->n_idle; i++)
                m->idle[i].wake_energy_uj = 0;
        for (unsigned d = 0; d < _EM_DOMAIN_MAX; d++)
                m->domain[d].wake_energy_uj = 0;
}

static void test_power_genoa(void **state)
{
        struct topology *t = load_topology("epyc-genoa-1s");
        struct energy_model m;
        struct em_host *h = NULL;
        struct load_buf b;
        struct em_load l;
        struct em_breakdown br;

        load_model("../../config/models/epyc-genoa.model", &m);
        core_terms_only(&m);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        load_init(&b);
        l = load_of(&b);

        /* all idle: every core in C2, every CCX and the package asleep */
        double want = 32.0 * m.idle[1].power_mw + 4.0 * m.domain[EM_DOMAIN_LLC].asleep_mw +
                      m.domain[EM_DOMAIN_PACKAGE].asleep_mw;
        assert_close(em_host_power(h, &l, &br), want);
        assert_close(br.active_mw, 0.0);

        /* one vCPU at 50% on cpu 0, level 0 (capacity 640) */
        b.work[0] = 0.5;
        b.vcpus[0] = 1;
        double I = m.active_idle_interval_us, busy = 0.5 * 1024 / 640.0, idle = 1 - busy;
        double f_c2 = F(1, 800, I);
        double core0 = busy * m.levels[0].active_mw + idle * (f_c2 * 30 + (1 - f_c2) * 330);
        double q = idle * f_c2, a_llc = idle * F(1, 1500, I), a_pkg = idle * F(1, 3000, I);
        const struct em_idle_domain *dl = &m.domain[EM_DOMAIN_LLC], *dp = &m.domain[EM_DOMAIN_PACKAGE];
        double llc0 = (1 - q) * dl->awake_mw + (q - a_llc) * dl->quiet_mw + a_llc * dl->asleep_mw;
        double pkg = (1 - q) * dp->awake_mw + (q - a_pkg) * dp->quiet_mw + a_pkg * dp->asleep_mw;
        want = core0 + 31.0 * 30 + llc0 + 3.0 * dl->asleep_mw + pkg;
        assert_close(em_host_power(h, &l, &br), want);
        assert_close(br.active_mw, busy * m.levels[0].active_mw);

        /* a latency limit below C2's 400 us keeps that core in C1 and its CCX/package awake or quiet */
        b.lat[0] = 100;
        double p_lat = em_host_power(h, &l, &br);
        assert_true(p_lat > want);
        em_host_free(h);
        topology_free(t);
}

static void test_power_spr_all_packages(void **state)
{
        struct topology *t = load_topology("xeon-spr-2s");
        struct energy_model m;
        struct em_host *h = NULL;
        struct load_buf b;
        struct em_load l;

        load_model("../../config/models/xeon-spr-2s.model", &m);
        core_terms_only(&m);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        load_init(&b);
        l = load_of(&b);
        const struct em_idle_domain *dp = &m.domain[EM_DOMAIN_PACKAGE];

        /* all idle: both packages in PC6 */
        assert_close(em_host_power(h, &l, NULL), 16.0 * m.idle[2].power_mw + 2.0 * dp->asleep_mw);

        /* one busy vCPU in package 0: package 1 is idle but can only be quiet, not asleep */
        b.work[0] = 0.1;
        b.vcpus[0] = 1;
        double I = m.active_idle_interval_us, busy = 0.1 * 1024 / m.levels[0].capacity, idle = 1 - busy;
        double f_c6 = F(1, 800, I), a_sys = idle * F(1, dp->target_residency_us, I), q0 = idle * f_c6;
        double core0 = busy * m.levels[0].active_mw +
                       idle * (f_c6 * m.idle[2].power_mw + (F(1, 4, I) - f_c6) * m.idle[1].power_mw +
                               (1 - F(1, 4, I)) * m.idle[0].power_mw);
        double pkg0 = (1 - q0) * dp->awake_mw + (q0 - a_sys) * dp->quiet_mw + a_sys * dp->asleep_mw;
        /* package 1: all its cores idle (q = 1), asleep only as much as the whole host (a_sys) */
        double pkg1 = (1 - a_sys) * dp->quiet_mw + a_sys * dp->asleep_mw;
        double want = core0 + 15.0 * m.idle[2].power_mw + pkg0 + pkg1;
        assert_close(em_host_power(h, &l, NULL), want);

        /* without the all-packages rule package 1 sleeps fully */
        h->model.package_idle_all_packages = false;
        double want2 = want - pkg1 + dp->asleep_mw - pkg0 +
                       ((1 - q0) * dp->awake_mw + (q0 - a_sys) * dp->quiet_mw + a_sys * dp->asleep_mw);
        assert_close(em_host_power(h, &l, NULL), want2);
        assert_true(want2 < want);
        em_host_free(h);
        topology_free(t);
}

/* All 64 CPUs of the Genoa fixture at work w, every frequency domain at level L. */
static void full_load(struct load_buf *b, const struct em_host *h, double w, unsigned L)
{
        load_init(b);
        for (unsigned c = 0; c < 64; c++) {
                b->work[c] = w;
                b->vcpus[c] = 1;
        }
        for (unsigned f = 0; f < h->n_fdoms; f++)
                b->level[f] = (uint8_t) L;
}

/* Turbo table (MaxActiveCores) and package power limit: the level they force, and its cost. */
static void test_power_limits(void **state)
{
        struct topology *t = load_topology("epyc-genoa-1s");
        struct energy_model m;
        struct em_host *h = NULL, *hl = NULL;
        struct load_buf b;
        struct em_load l;
        struct em_breakdown br;
        int cap[4];

        load_model("../../config/models/epyc-genoa.model", &m);
        core_terms_only(&m);
        assert_int_equal(m.n_levels, 3);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        /* without limits: 0.3 of a CPU on every thread, at the top level and at the middle one */
        full_load(&b, h, 0.3, 2);
        l = load_of(&b);
        double p_top = em_host_power(h, &l, &br);
        assert_int_equal(br.capped_pkgs, 0);
        full_load(&b, h, 0.3, 1);
        double p_mid = em_host_power(h, &l, NULL);
        assert_true(p_mid < p_top);

        /* the top level only while at most 4 cores are busy: 32 busy cores get the middle level */
        struct energy_model mt = m;
        mt.levels[2].max_active_cores = 4;
        assert_int_equal(energy_model_validate(&mt, NULL), 0);
        assert_int_equal(em_host_new(t, &mt, &hl), 0);
        full_load(&b, h, 0.3, 2);
        assert_close(em_host_power(hl, &l, &br), p_mid);
        assert_int_equal(br.capped_pkgs, 1);
        assert_int_equal(br.capped_level, 1);
        assert_int_equal(em_host_level_caps(hl, &l, cap), 1);
        assert_int_equal(cap[0], 1);
        /* one busy CPU (0.3 busy cores): turbo stays */
        load_init(&b);
        b.work[0] = 0.3;
        b.vcpus[0] = 1;
        for (unsigned f = 0; f < h->n_fdoms; f++)
                b.level[f] = 2;
        assert_close(em_host_power(hl, &l, &br), em_host_power(h, &l, NULL));
        assert_int_equal(br.capped_pkgs, 0);
        assert_int_equal(em_host_level_caps(hl, &l, cap), 0);
        assert_int_equal(cap[0], -1);
        em_host_free(hl);

        /* a package power limit between the two: the full load runs at the middle level */
        struct energy_model mp = m;
        mp.package_power_limit_mw = (uint32_t) ((p_mid + p_top) / 2);
        assert_int_equal(em_host_new(t, &mp, &hl), 0);
        full_load(&b, h, 0.3, 2);
        double p_lim = em_host_power(hl, &l, &br);
        assert_close(p_lim, p_mid);
        assert_true(p_lim <= mp.package_power_limit_mw);
        assert_int_equal(br.capped_pkgs, 1);
        assert_int_equal(br.capped_level, 1);
        /* a limit below every level's power: the lowest level, over the limit (nothing lower exists) */
        em_host_free(hl);
        mp.package_power_limit_mw = energy_model_min_power_limit(&mp);
        assert_int_equal(em_host_new(t, &mp, &hl), 0);
        full_load(&b, h, 0.3, 0);
        double p_low = em_host_power(h, &l, NULL);
        full_load(&b, h, 0.3, 2);
        assert_close(em_host_power(hl, &l, &br), p_low);
        assert_int_equal(br.capped_level, 0);
        em_host_free(hl);
        em_host_free(h);
        topology_free(t);
}

/* Platform term and PSU efficiency: wall = (DC + platform + busy share x busy platform) / efficiency. */
static void test_power_platform(void **state)
{
        struct topology *t = load_topology("epyc-genoa-1s");
        struct energy_model m, mp;
        struct em_host *h = NULL, *hp = NULL;
        struct load_buf b;
        struct em_load l;
        struct em_breakdown br, bp;

        load_model("../../config/models/epyc-genoa.model", &m);
        core_terms_only(&m);
        mp = m;
        mp.platform_mw = 50000;
        mp.platform_busy_mw = 20000;
        mp.psu_efficiency_permille = 900;
        assert_int_equal(em_host_new(t, &m, &h), 0);
        assert_int_equal(em_host_new(t, &mp, &hp), 0);
        full_load(&b, h, 0.2, 1);
        l = load_of(&b);
        double dc = em_host_power(h, &l, &br);
        assert_close(br.platform_mw + br.psu_loss_mw, 0.0);
        /* the busy share: Σ busy_c / n_cores, busy_c = smt_core_busy of the two threads */
        double d = 0.2 * 1024 / m.levels[1].capacity, share = smt_core_busy(d, d, m.smt_gain_permille / 1000.0);
        double want = (dc + 50000 + 20000 * share) / 0.9;
        assert_close(em_host_power(hp, &l, &bp), want);
        assert_close(bp.platform_mw, 50000 + 20000 * share);
        assert_close(bp.active_mw + bp.idle_mw + bp.domain_mw + bp.wake_mw + bp.platform_mw + bp.psu_loss_mw,
                     bp.total_mw);
        /* the per-core power the planner picks levels with carries the core's share of the busy
         * platform power (the PSU scales every level alike) */
        assert_close(em_core_power_at(hp, &l, 0, 1) - em_core_power_at(h, &l, 0, 1), 20000 * share / 32);
        /* all idle: the constant platform power only */
        load_init(&b);
        assert_close(em_host_power(hp, &l, NULL), (em_host_power(h, &l, NULL) + 50000) / 0.9);
        em_host_free(h);
        em_host_free(hp);
        topology_free(t);
}

/* Wake-up energy: per exit from the state a gap reached (rate model), or given by the caller. */
static void test_power_wake(void **state)
{
        struct topology *t = load_topology("epyc-genoa-1s");
        struct energy_model m, mw;
        struct em_host *h = NULL, *hw = NULL;
        struct load_buf b;
        struct em_load l;
        struct em_breakdown br, bw;

        load_model("../../config/models/epyc-genoa.model", &m);
        core_terms_only(&m);
        mw = m;
        mw.idle[0].wake_energy_uj = 2;
        mw.idle[1].wake_energy_uj = 20;
        mw.domain[EM_DOMAIN_LLC].wake_energy_uj = 50;
        assert_int_equal(em_host_new(t, &m, &h), 0);
        assert_int_equal(em_host_new(t, &mw, &hw), 0);
        load_init(&b);
        b.work[0] = 0.5;
        b.vcpus[0] = 1;
        l = load_of(&b);
        double base = em_host_power(h, &l, &br);
        assert_close(br.wake_mw, 0.0);
        /* core 0: idle share x 1/I wake-ups per us; the gap ends in C1 below C2's residency, else in C2;
         * its CCX: asleep in gaps >= 1500 us, woken from there */
        double I = m.active_idle_interval_us, idle = 1 - 0.5 * 1024 / m.levels[0].capacity;
        double r2 = m.idle[1].target_residency_us, rl = m.domain[EM_DOMAIN_LLC].target_residency_us;
        double core = idle / I * ((1 - exp(-r2 / I)) * 2 + exp(-r2 / I) * 20) * 1000;
        double llc = idle / I * exp(-rl / I) * 50 * 1000;
        double got = em_host_power(hw, &l, &bw);
        assert_close(bw.wake_mw, core + llc);
        assert_close(got, base + core + llc);
        /* more vCPUs on it: more wake-ups, fewer of them from the deep states */
        b.vcpus[0] = 4;
        em_host_power(hw, &l, &bw);
        double core4 = idle * 4 / I * ((1 - exp(-4 * r2 / I)) * 2 + exp(-4 * r2 / I) * 20) * 1000;
        double llc4 = idle * 4 / I * exp(-4 * rl / I) * 50 * 1000;
        assert_close(bw.wake_mw, core4 + llc4);
        /* given by the caller (the simulator's counted episodes): replaces the rate */
        b.vcpus[0] = 1;
        l.wake_given = true;
        l.wake_mw = 1234.5;
        assert_close(em_host_power(hw, &l, &bw), base + 1234.5);
        assert_close(bw.wake_mw, 1234.5);
        em_host_free(h);
        em_host_free(hw);
        topology_free(t);
}

/*
 * The memo of core evaluations (em_load.memo): em_host_power() and em_core_power_at() give the
 * same figures bit for bit with it and without it, over random loads whose cores repeat (work
 * drawn from a few values, as the CPUs of a pack set share one water level), with the shipped
 * model's every term and wake-up energy; and a core evaluated again with only one input changed
 * (a thread's work, the sibling's vCPUs, a latency limit, the level, wake_given) is evaluated
 * anew, not taken from the memo.
 */
static void test_core_memo(void **state)
{
        struct topology *t = load_topology("epyc-genoa-1s");
        struct energy_model m;
        struct em_host *h = NULL;
        struct em_core_memo *memo = em_core_memo_new(0);
        struct load_buf b;
        static const double works[] = { 0.0, 0.05, 0.125, 0.3, 0.3000000000000001, 0.7, 1.0 };
        static const uint32_t lats[] = { EM_LATENCY_ANY, 1, 100, 2000 };
        unsigned long hits = 0, misses = 0, n = 0;
        uint64_t rng = 12345;

        load_model("../../config/models/epyc-genoa.model", &m);
        m.idle[0].wake_energy_uj = 2;
        m.idle[1].wake_energy_uj = 20;
        m.domain[EM_DOMAIN_LLC].wake_energy_uj = 50;
        assert_non_null(memo);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        assert_true(h->n_cpus <= 64 && h->n_fdoms <= 64);
        for (unsigned it = 0; it < 400; it++) {
                /* four thread states and two levels this round, drawn at random: cores repeat */
                double pw[4];
                uint8_t pv[4], pl[2];
                uint32_t pt[4];
                load_init(&b);
                for (unsigned j = 0; j < 4; j++) {
                        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
                        pw[j] = works[(rng >> 33) % 7];
                        pv[j] = pw[j] > 0.0 ? (uint8_t) (1 + (rng >> 40) % 3) : 0;
                        pt[j] = lats[(rng >> 45) % 4];
                        pl[j % 2] = (uint8_t) ((rng >> 50) % m.n_levels);
                }
                for (unsigned c = 0; c < h->n_cpus; c++) {
                        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
                        unsigned j = (rng >> 33) % 4;
                        b.work[c] = pw[j];
                        b.vcpus[c] = pv[j];
                        b.lat[c] = pt[j];
                }
                for (unsigned f = 0; f < h->n_fdoms; f++) {
                        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
                        b.level[f] = pl[(rng >> 35) % 2];
                }
                struct em_load plain = load_of(&b), memoed = load_of(&b);
                struct em_breakdown b0, b1;
                memoed.memo = memo;
                plain.wake_given = memoed.wake_given = it % 5 == 4;
                plain.wake_mw = memoed.wake_mw = 321.0;
                double p0 = em_host_power(h, &plain, &b0), p1 = em_host_power(h, &memoed, &b1);
                assert_memory_equal(&p0, &p1, sizeof(p0));
                assert_memory_equal(&b0, &b1, sizeof(b0));
                for (unsigned k = 0; k < h->n_cores; k += 3)
                        for (unsigned L = 0; L < m.n_levels; L++) {
                                double c0 = em_core_power_at(h, &plain, k, L), c1 = em_core_power_at(h, &memoed, k, L);
                                assert_memory_equal(&c0, &c1, sizeof(c0));
                                n++;
                        }
        }
        em_core_memo_counts(memo, &hits, &misses);
        printf("# %lu core evaluations compared; memo %lu hits, %lu misses\n", n, hits, misses);
        assert_true(hits > misses); /* the cores repeat: most are found */

        /* one input changed at a time on core 0 (2 threads), each evaluated right after the last */
        {
                const struct em_core *co = &h->cores[0];
                int c0 = co->cpu[0], c1 = co->cpu[1];
                assert_int_equal(co->n_threads, 2);
                load_init(&b);
                b.work[c0] = 0.3;
                b.work[c1] = 0.125;
                b.vcpus[c0] = b.vcpus[c1] = 1;
                struct em_load plain = load_of(&b), memoed = load_of(&b);
                memoed.memo = memo;
                double last = em_core_power_at(h, &memoed, 0, 1);
                for (unsigned step = 0; step < 6; step++) {
                        unsigned L = step == 4 ? 2 : 1;
                        switch (step) {
                        case 0: b.work[c1] = 0.3; break;               /* the sibling's work */
                        case 1: b.vcpus[c1] = 3; break;                /* the sibling's vCPUs */
                        case 2: b.lat[c1] = 1; break;                  /* a latency limit */
                        case 3: b.work[c0] = 0.0; b.vcpus[c0] = 0; break;
                        case 4: break;                                 /* the level */
                        case 5: plain.wake_given = memoed.wake_given = true; plain.wake_mw = memoed.wake_mw = 5.0; break;
                        }
                        double want = em_core_power_at(h, &plain, 0, L), got = em_core_power_at(h, &memoed, 0, L);
                        assert_memory_equal(&want, &got, sizeof(want));
                        assert_true(got != last); /* each input counts (wake_given drops the rate's wake-ups) */
                        last = got;
                }
                /* sweeps of one input at a time through a memo of one slot: each key meets the
                 * last one there, so the slot's every input is compared, not only the hash */
                em_core_memo_free(memo);
                memo = em_core_memo_new(1);
                assert_non_null(memo);
                memoed.memo = memo;
                plain.wake_given = memoed.wake_given = false;
                for (unsigned x = 0; x < 3 * 2048; x++) {
                        unsigned L = 1;
                        b.lat[c1] = x < 2048 ? 1 + x : EM_LATENCY_ANY;
                        b.vcpus[c1] = x >= 2048 && x < 4096 ? (uint8_t) (x % 256) : 1;
                        b.work[c1] = x >= 4096 ? (x % 1000) / 1000.0 : 0.125;
                        double want = em_core_power_at(h, &plain, 0, L), got = em_core_power_at(h, &memoed, 0, L);
                        assert_memory_equal(&want, &got, sizeof(want));
                }
                for (unsigned x = 0; x < 1000; x++) /* every level of one load, load after load */
                        for (unsigned L = 0; L < m.n_levels; L++) {
                                b.work[c1] = (x + 1) / 1000.0;
                                double want = em_core_power_at(h, &plain, 0, L), got = em_core_power_at(h, &memoed, 0, L);
                                assert_memory_equal(&want, &got, sizeof(want));
                        }
        }
        em_core_memo_free(memo);
        em_host_free(h);
        topology_free(t);
}

/*
 * The wake orders hold each LLC's CPUs in one run, and every online CPU once (the planner's
 * cut_runs() takes an LLC's CPUs as the run from its first one), on every fixture, the
 * two-socket SPR among them.
 */
static void test_wake_orders_llc_runs(void **state)
{
        static const char *const fixtures[] = { "debian-2cpu-haltpoll", "firecracker-2cpu-noidle", "epyc-genoa-1s",
                                                "xeon-spr-2s" };

        (void) state;
        for (unsigned f = 0; f < ELEMENTSOF(fixtures); f++) {
                struct topology *t = load_topology(fixtures[f]);
                struct energy_model m;
                struct em_host *h = NULL;
                assert_int_equal(energy_model_from_topology(t, &m), 0);
                assert_int_equal(em_host_new(t, &m, &h), 0);
                for (unsigned o = 0; o < 2; o++) {
                        const int *order = o ? h->order_cores_first : h->order_smt_first;
                        uint8_t done[4096] = { 0 }, seen[4096] = { 0 };
                        unsigned runs = 0;
                        assert_true(h->n_llcs <= 4096 && h->n_cpus <= 4096);
                        for (unsigned p = 0; p < h->n_online; p++) {
                                unsigned g = h->cores[h->cpu_core[order[p]]].llc;
                                assert_false(seen[order[p]]);
                                seen[order[p]] = 1;
                                if (p == 0 || h->cores[h->cpu_core[order[p - 1]]].llc != g) {
                                        assert_false(done[g]); /* an LLC met again after another: two runs */
                                        done[g] = 1;
                                        runs++;
                                }
                        }
                        assert_int_equal(runs, h->n_llcs);
                }
                print_message("# %s: %u CPUs, %u LLCs, one run each in both orders\n", fixtures[f], h->n_online,
                              h->n_llcs);
                em_host_free(h);
                topology_free(t);
        }
}

/* SMT contention: the core's busy time for two threads' work (smt_core_busy). */
static void test_smt_core_busy(void **state)
{
        (void) state;
        /* g = 2: two independent CPUs */
        assert_float_equal(smt_core_busy(0.5, 0.5, 2.0), 0.75, 1e-12);
        /* worked case, g = 1.25 (k = 0.375): o = 4/9, t = 2/3 each, busy = 4/3 - 4/9 = 8/9 */
        assert_float_equal(smt_core_busy(0.5, 0.5, 1.25), 8.0 / 9.0, 1e-9);
        for (double g = 1.0; g <= 2.0; g += 0.125)
                for (double a = 0.01; a < 1.0; a += 0.07)
                        for (double b = 0.01; b < 1.0; b += 0.07) {
                                double x = smt_core_busy(a, b, g);
                                assert_true(x <= 1.0 + 1e-12);
                                /* never less than the throughput limit, nor either thread alone,
                                 * nor what two independent CPUs would be busy */
                                assert_true(x >= MIN(1.0, (a + b) / g) - 1e-9);
                                assert_true(x >= MAX(a, b) - 1e-12);
                                assert_true(x >= 1.0 - (1.0 - a) * (1.0 - b) - 1e-12);
                                /* symmetric */
                                assert_float_equal(x, smt_core_busy(b, a, g), 1e-9);
                        }
        /* more than the core can do: saturated (g / 2 each is the limit with both always busy) */
        assert_float_equal(smt_core_busy(0.64, 0.64, 1.25), 1.0, 0.0);
        assert_true(smt_core_busy(0.55, 0.55, 1.25) < 1.0);
}

/*
 * Every online CPU of the host in exactly one core, and once in each wake order (the orders are
 * n_online long: a CPU in two cores wrote past their end).
 */
static void assert_cores_disjoint(const struct em_host *h, const struct topology *t)
{
        unsigned threads = 0;
        uint8_t in_core[VP_MAX_CPUS] = { 0 };

        for (unsigned k = 0; k < h->n_cores; k++) {
                assert_true(h->cores[k].n_threads >= 1 && h->cores[k].n_threads <= 2);
                for (unsigned th = 0; th < h->cores[k].n_threads; th++) {
                        int c = h->cores[k].cpu[th];
                        assert_true(c >= 0 && (unsigned) c < t->n_cpus);
                        assert_int_equal(in_core[c], 0);
                        in_core[c] = 1;
                        assert_int_equal(h->cpu_core[c], (int) k);
                        assert_int_equal(h->cpu_thread[c], (int) th);
                        threads++;
                }
        }
        assert_int_equal(threads, h->n_online);
        for (unsigned o = 0; o < 2; o++) {
                const int *order = o ? h->order_cores_first : h->order_smt_first;
                uint8_t seen[VP_MAX_CPUS] = { 0 };
                for (unsigned p = 0; p < h->n_online; p++) {
                        assert_true(in_core[order[p]]);
                        assert_int_equal(seen[order[p]], 0);
                        seen[order[p]] = 1;
                }
        }
        for (unsigned k = 0; k < h->n_cores; k++)
                assert_true(h->cores[k].fdom < h->n_fdoms);
}

/*
 * SMT sibling lists that disagree (cpu1 "1,17", cpu17 "17": cpu1 went offline while
 * topology_load() read cpu17): cpu17 was in two cores and the wake orders, sized by the online
 * CPU count, overflowed (ASan: heap-buffer-overflow WRITE in em_host_precompute()).  A CPU is
 * taken by the first core that lists it; a core left without a thread is none.
 */
static void test_host_smt_disagree(void **state)
{
        struct topology *t = load_topology("xeon-spr-2s");
        struct energy_model m;
        struct em_host *h = NULL;

        (void) state;
        assert_int_equal(energy_model_from_topology(t, &m), 0);
        cpuset_zero(&t->cpus[17].smt_siblings);
        cpuset_set(&t->cpus[17].smt_siblings, 17);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        assert_int_equal(h->n_online, 32);
        assert_int_equal(h->n_cores, 16);
        assert_int_equal(h->cores[h->cpu_core[1]].n_threads, 2);
        assert_int_equal(h->cpu_core[17], h->cpu_core[1]);
        assert_cores_disjoint(h, t);
        em_host_free(h);

        /* the other way round (cpu1 "1", cpu17 "1,17"): cpu17's first sibling's core does not take it,
         * it is not modelled (topology_load() makes both lists "itself") */
        cpuset_zero(&t->cpus[1].smt_siblings);
        cpuset_set(&t->cpus[1].smt_siblings, 1);
        cpuset_set(&t->cpus[17].smt_siblings, 1);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        assert_int_equal(h->n_online, 31);
        assert_int_equal(h->cpu_core[17], -1);
        assert_cores_disjoint(h, t);
        em_host_free(h);
        topology_free(t);

        /* a hand-made 4-CPU host: cores {0,2} and {1,3}, cpu3's list "3" */
        struct topo_cpu cpus[4] = { 0 };
        struct topology small = { .n_cpus = 4, .cpus = cpus };
        for (unsigned i = 0; i < 4; i++) {
                cpus[i] = (struct topo_cpu) { .id = i, .present = true, .online = true, .core_id = (int) i % 2,
                                              .policy = -1 };
                cpuset_set(&cpus[i].smt_siblings, i);
                cpuset_set(&cpus[i].smt_siblings, i % 2);
                cpuset_set(&cpus[i].smt_siblings, i % 2 + 2);
        }
        cpuset_zero(&cpus[3].smt_siblings);
        cpuset_set(&cpus[3].smt_siblings, 3);
        assert_int_equal(energy_model_parse_string("[Model]\nName = x\n[PerfLevel]\nFrequencyKHz = 1\n"
                                                   "Capacity = 1024\nActivePowerMW = 1000\n[IdleState]\nName = C1\n"
                                                   "ExitLatencyUs = 1\nTargetResidencyUs = 1\nPowerMW = 10\n",
                                                   "s", &m, NULL), 0);
        assert_int_equal(em_host_new(&small, &m, &h), 0);
        assert_int_equal(h->n_online, 4);
        assert_int_equal(h->n_cores, 2);
        assert_cores_disjoint(h, &small);
        em_host_free(h);
}

static void set_cpuinfo(struct topology *t, uint32_t min_khz, uint32_t max_khz)
{
        for (unsigned i = 0; i < t->n_policies; i++) {
                t->policies[i].cpuinfo_min_khz = min_khz;
                t->policies[i].cpuinfo_max_khz = max_khz;
        }
}

static void assert_host_refused(const struct topology *t, const struct energy_model *m, const char *what)
{
        struct em_error err = { 0 };
        struct em_host *h = NULL;

        assert_int_equal(em_host_check(t, m, &err), -ERANGE);
        print_message("# %s\n", err.message);
        if (!strstr(err.message, what))
                fail_msg("'%s' not in '%s'", what, err.message);
        assert_int_equal(em_host_new(t, m, &h), -ERANGE);
        assert_null(h);
}

/*
 * A model for another host type: its levels against the host's cpufreq.  The shipped SPR model
 * (top level 3.8 GHz) on a host whose cpuinfo_max_freq is 4.0 GHz would cap it at 3.8 GHz for
 * good: refused, as a level outside the host's range is.
 */
static void test_host_cpufreq_range(void **state)
{
        struct topology *t = load_topology("xeon-spr-2s");
        struct energy_model spr, genoa, m;
        struct em_error err = { 0 };
        struct em_host *h = NULL;

        (void) state;
        load_model("../../config/models/xeon-spr-2s.model", &spr);
        load_model("../../config/models/epyc-genoa.model", &genoa);
        /* the host it was written for: 800000..3800000 kHz */
        assert_int_equal(em_host_check(t, &spr, &err), 0);
        assert_int_equal(em_host_new(t, &spr, &h), 0);
        em_host_free(h);

        set_cpuinfo(t, 800000, 4000000);
        assert_host_refused(t, &spr, "top PerfLevel (3800000 kHz) below this host's cpufreq range 800000..4000000 kHz");
        set_cpuinfo(t, 1000000, 3800000);
        assert_host_refused(t, &spr, "PerfLevel 1 (800000 kHz) below this host's cpufreq range 1000000..3800000 kHz");
        set_cpuinfo(t, 800000, 3800000);
        /* the Genoa model (1.5..2.4 GHz) here: its top level caps the host */
        assert_host_refused(t, &genoa, "top PerfLevel (2400000 kHz) below");
        m = spr;
        m.levels[m.n_levels - 1].freq_khz = 3900000;
        assert_host_refused(t, &m, "PerfLevel 8 (3900000 kHz) above this host's cpufreq range 800000..3800000 kHz");

        /* favoured cores (Turbo Boost Max 3.0): some policies publish a higher maximum; the top level
         * is the host's highest, the other policies run it at their own maximum */
        for (unsigned i = 0; i < t->n_policies; i += 4)
                t->policies[i].cpuinfo_max_khz = 4000000;
        assert_host_refused(t, &spr, "below this host's cpufreq range 800000..4000000 kHz");
        m = spr;
        m.levels[m.n_levels - 1].freq_khz = 4000000;
        assert_int_equal(em_host_check(t, &m, &err), 0);
        /* the model derived from sysfs takes the host's highest maximum too */
        assert_int_equal(energy_model_from_topology(t, &m), 0);
        assert_int_equal(m.levels[m.n_levels - 1].freq_khz, 4000000);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        em_host_free(h);
        topology_free(t);

        /* the Genoa model on its own host, the SPR one on it */
        t = load_topology("epyc-genoa-1s");
        assert_int_equal(em_host_check(t, &genoa, &err), 0);
        assert_host_refused(t, &spr, "PerfLevel 1 (800000 kHz) below this host's cpufreq range 1500000..2400000 kHz");
        topology_free(t);

        /* no cpufreq (this project's test VM): nothing to check against */
        t = load_topology("debian-2cpu-haltpoll");
        assert_int_equal(em_host_check(t, &spr, &err), 0);
        assert_int_equal(em_host_new(t, &spr, &h), 0);
        em_host_free(h);
        topology_free(t);

        /* a synthetic host's cpufreq stands for no real one (vmmpower-sim runs the Genoa model on synth:PxC) */
        assert_int_equal(topology_synthetic(1, 8, &t), 0);
        assert_int_equal(em_host_check(t, &genoa, &err), 0);
        topology_free(t);
}

/*
 * docs/energy-model.md §4 against the parser: a comment after a section header, ActiveIdleIntervalUs 0
 * (no idle time left to model), PackagePowerLimitMW below one busy core at the slowest level with its
 * domains awake (every busy package held at the slowest level), the 32-level limit.
 */
static void test_parser_doc_rules(void **state)
{
        static const char *const tail = "[PerfLevel]\nFrequencyKHz = 1\nCapacity = 1024\nActivePowerMW = 1000\n"
                                         "[IdleState]\nName = C1\nExitLatencyUs = 1\nTargetResidencyUs = 1\nPowerMW = 10\n"
                                         "[IdleDomain]  # comment\nScope = package\nAwakePowerMW = 20000\n"
                                         "AsleepPowerMW = 5000\nExitLatencyUs = 10\nTargetResidencyUs = 20\n";
        struct energy_model m;
        struct em_error err = { 0 };
        char buf[4096];

        (void) state;
        snprintf(buf, sizeof(buf), "[Model] # the main section\nName = x\n%s", tail);
        if (energy_model_parse_string(buf, "s", &m, &err) < 0)
                fail_msg("line %u: %s", err.line, err.message);
        snprintf(buf, sizeof(buf), "[Model]# no blank before '#': part of the header\nName = x\n%s", tail);
        assert_int_equal(energy_model_parse_string(buf, "s", &m, &err), -EINVAL);
        assert_int_equal(err.line, 1);
        assert_non_null(strstr(err.message, "malformed section header"));

        snprintf(buf, sizeof(buf), "[Model]\nName = x\nActiveIdleIntervalUs = 0\n%s", tail);
        assert_int_equal(energy_model_parse_string(buf, "s", &m, &err), -EINVAL);
        assert_int_equal(err.line, 3);
        assert_non_null(strstr(err.message, "ActiveIdleIntervalUs 0 outside 1..4294967295"));
        snprintf(buf, sizeof(buf), "[Model]\nName = x\nActiveIdleIntervalUs = 1\n%s", tail);
        assert_int_equal(energy_model_parse_string(buf, "s", &m, &err), 0);
        m.active_idle_interval_us = 0;
        assert_int_equal(energy_model_validate(&m, &err), -EINVAL);

        /* the lowest limit: 1000 (slowest level) + 20000 (package awake) */
        snprintf(buf, sizeof(buf), "[Model]\nName = x\nPackagePowerLimitMW = 1\n%s", tail);
        assert_int_equal(energy_model_parse_string(buf, "s", &m, &err), -EINVAL);
        assert_non_null(strstr(err.message, "PackagePowerLimitMW 1 below 21000"));
        snprintf(buf, sizeof(buf), "[Model]\nName = x\nPackagePowerLimitMW = 20999\n%s", tail);
        assert_int_equal(energy_model_parse_string(buf, "s", &m, &err), -EINVAL);
        snprintf(buf, sizeof(buf), "[Model]\nName = x\nPackagePowerLimitMW = 21000\n%s", tail);
        assert_int_equal(energy_model_parse_string(buf, "s", &m, &err), 0);
        assert_int_equal(energy_model_min_power_limit(&m), 21000);
        m.package_power_limit_mw = 0; /* none */
        assert_int_equal(energy_model_validate(&m, &err), 0);
        /* the shipped models' limits are far above theirs */
        load_model("../../config/models/xeon-spr-2s.model", &m);
        assert_true(m.package_power_limit_mw >= 4 * energy_model_min_power_limit(&m));

        /* 32 levels at most (EM_MAX_LEVELS) */
        size_t n = (size_t) snprintf(buf, sizeof(buf), "[Model]\nName = x\n");
        for (unsigned l = 0; l <= EM_MAX_LEVELS; l++)
                n += (size_t) snprintf(buf + n, sizeof(buf) - n, "[PerfLevel]\nFrequencyKHz=%u\nCapacity=%u\n"
                                       "ActivePowerMW=1000\n", l + 1, l + 1);
        assert_true(n < sizeof(buf));
        assert_int_equal(energy_model_parse_string(buf, "s", &m, &err), -EINVAL);
        assert_non_null(strstr(err.message, "too many [PerfLevel] sections (at most 32)"));
}

/*
 * The Name rule of the parser in energy_model_validate(): what energy_model_write() prints parses
 * back (vmmpower-calibrate --name 'rack 12 (fitted)' wrote a model no parser took).
 */
static void test_validate_names(void **state)
{
        struct energy_model m, back;
        struct em_error err = { 0 };
        char *buf = NULL;
        size_t len = 0;
        FILE *f;

        (void) state;
        load_model("models/good-full.model", &m);
        assert_true(energy_model_name_valid("rack-12_fitted.2"));
        snprintf(m.name, sizeof(m.name), "%s", "rack 12 (fitted)");
        assert_false(energy_model_name_valid(m.name));
        assert_int_equal(energy_model_validate(&m, &err), -EINVAL);
        assert_non_null(strstr(err.message, "invalid Name 'rack 12 (fitted)'"));
        m.name[0] = '\0';
        assert_int_equal(energy_model_validate(&m, &err), -EINVAL);
        memset(m.name, 'a', sizeof(m.name) - 1);
        m.name[sizeof(m.name) - 1] = '\0'; /* 63 characters: the most */
        assert_int_equal(energy_model_validate(&m, &err), 0);
        snprintf(m.idle[0].name, sizeof(m.idle[0].name), "%s", "C1 E");
        assert_int_equal(energy_model_validate(&m, &err), -EINVAL);
        assert_non_null(strstr(err.message, "IdleState 1: invalid Name 'C1 E'"));
        snprintf(m.idle[0].name, sizeof(m.idle[0].name), "%s", "C1E");
        /* valid: written, it parses back the same */
        assert_int_equal(energy_model_validate(&m, &err), 0);
        f = open_memstream(&buf, &len);
        assert_non_null(f);
        energy_model_write(&m, f);
        assert_int_equal(fclose(f), 0);
        if (energy_model_parse_string(buf, "written", &back, &err) < 0)
                fail_msg("line %u: %s", err.line, err.message);
        assert_memory_equal(&m, &back, sizeof(m));
        free(buf);
}

/*
 * A cpufreq table of 33..64 entries: the derived model had its lowest 32 and never the top speed.
 * Now 32 spread over the table, its first and last included.
 */
static void test_defaults_long_table(void **state)
{
        struct topology *t = load_topology("xeon-spr-2s");
        struct energy_model m;
        struct em_host *h = NULL;

        (void) state;
        for (unsigned p = 0; p < t->n_policies; p++) {
                /* 61 entries, 800..3800 MHz in 50 MHz steps, within the fixture's cpuinfo range */
                t->policies[p].n_freqs = 61;
                for (unsigned i = 0; i < 61; i++)
                        t->policies[p].freqs_khz[i] = 800000 + 50000 * i;
        }
        assert_int_equal(energy_model_from_topology(t, &m), 0);
        assert_int_equal(m.n_levels, EM_MAX_LEVELS);
        assert_int_equal(m.levels[0].freq_khz, 800000);
        assert_int_equal(m.levels[EM_MAX_LEVELS - 1].freq_khz, 3800000);
        assert_int_equal(m.levels[EM_MAX_LEVELS - 1].capacity, EM_CAPACITY_SCALE);
        for (unsigned l = 1; l < m.n_levels; l++) {
                uint32_t step = m.levels[l].freq_khz - m.levels[l - 1].freq_khz;
                assert_true(step == 50000 || step == 100000); /* 60 steps over 31: one or two entries each */
        }
        assert_round_trip(&m);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        em_host_free(h);

        /* 33 entries: all but one */
        t->policies[t->cpus[0].policy].n_freqs = 33;
        assert_int_equal(energy_model_from_topology(t, &m), 0);
        assert_int_equal(m.n_levels, EM_MAX_LEVELS);
        assert_int_equal(m.levels[0].freq_khz, 800000);
        assert_int_equal(m.levels[EM_MAX_LEVELS - 1].freq_khz, 800000 + 50000 * 32);
        topology_free(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_good_minimal),
                cmocka_unit_test(test_good_full),
                cmocka_unit_test(test_good_features),
                cmocka_unit_test(test_shipped_models),
                cmocka_unit_test(test_bad_files),
                cmocka_unit_test(test_bad_strings),
                cmocka_unit_test(test_defaults_debian),
                cmocka_unit_test(test_defaults_spr),
                cmocka_unit_test(test_defaults_zero_freq),
                cmocka_unit_test(test_defaults_genoa),
                cmocka_unit_test(test_power_genoa),
                cmocka_unit_test(test_power_spr_all_packages),
                cmocka_unit_test(test_power_limits),
                cmocka_unit_test(test_power_platform),
                cmocka_unit_test(test_power_wake),
                cmocka_unit_test(test_smt_core_busy),
                cmocka_unit_test(test_core_memo),
                cmocka_unit_test(test_wake_orders_llc_runs),
                cmocka_unit_test(test_host_smt_disagree),
                cmocka_unit_test(test_host_cpufreq_range),
                cmocka_unit_test(test_parser_doc_rules),
                cmocka_unit_test(test_validate_names),
                cmocka_unit_test(test_defaults_long_table),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
