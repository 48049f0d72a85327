/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Topology reader against recorded and synthesized sysfs trees
 * (tests/data/topology/<name>/sys) with golden dumps (expected.txt).
 * VMMPOWER_UPDATE_GOLDEN=1 rewrites the golden files instead of comparing;
 * review the diff before committing.
 */
#include <errno.h>
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "energy_model.h"
#include "log.h"
#include "topology.h"
#include "util.h"

static const char *const fixtures[] = { "debian-2cpu-haltpoll", "firecracker-2cpu-noidle", "xeon-spr-2s", "epyc-genoa-1s" };

static void fixture_root(const char *name, char *buf, size_t size)
{
        assert_true(path_printf(buf, size, "%s/topology/%s/sys", TEST_DATA_DIR, name) > 0);
}

static struct topology *load_fixture(const char *name)
{
        char root[512];
        struct topology *t = NULL;

        fixture_root(name, root, sizeof(root));
        assert_int_equal(topology_load(root, &t), 0);
        assert_non_null(t);
        return t;
}

static char *dump_string(const struct topology *t)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        assert_non_null(f);
        topology_dump(t, f);
        assert_int_equal(fclose(f), 0);
        return buf;
}

static char *slurp(const char *path)
{
        FILE *f = fopen(path, "re");
        char *buf;
        long n;

        if (!f)
                return NULL;
        assert_int_equal(fseek(f, 0, SEEK_END), 0);
        n = ftell(f);
        rewind(f);
        buf = malloc((size_t) n + 1);
        assert_non_null(buf);
        assert_int_equal(fread(buf, 1, (size_t) n, f), (size_t) n);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

/* Print the first differing line of two dumps, diff-style. */
static void report_mismatch(const char *name, const char *want, const char *got)
{
        unsigned line = 1;
        const char *a = want, *b = got;

        while (*a && *b) {
                const char *ea = strchrnul(a, '\n'), *eb = strchrnul(b, '\n');
                if (ea - a != eb - b || memcmp(a, b, (size_t) (ea - a)) != 0)
                        break;
                line++;
                a = *ea ? ea + 1 : ea;
                b = *eb ? eb + 1 : eb;
        }
        fprintf(stderr, "golden mismatch for %s at line %u of expected.txt:\n-%.*s\n+%.*s\n"
                "(rerun with VMMPOWER_UPDATE_GOLDEN=1 to rewrite, then review `git diff`)\n",
                name, line, (int) (strchrnul(a, '\n') - a), a, (int) (strchrnul(b, '\n') - b), b);
}

static void test_golden(void **state)
{
        for (size_t i = 0; i < ELEMENTSOF(fixtures); i++) {
                struct topology *t = load_fixture(fixtures[i]);
                _cleanup_free_ char *got = dump_string(t);
                _cleanup_free_ char *want = NULL;
                char path[512];

                assert_true(path_printf(path, sizeof(path), "%s/topology/%s/expected.txt", TEST_DATA_DIR,
                                        fixtures[i]) > 0);
                if (getenv("VMMPOWER_UPDATE_GOLDEN")) {
                        assert_int_equal(write_file_atomic(path, got, strlen(got), 0644), 0);
                        fprintf(stderr, "wrote %s\n", path);
                }
                want = slurp(path);
                if (!want)
                        fprintf(stderr, "missing %s (run with VMMPOWER_UPDATE_GOLDEN=1)\n", path);
                assert_non_null(want);
                if (strcmp(want, got) != 0) {
                        report_mismatch(fixtures[i], want, got);
                        fail();
                }
                topology_free(t);
        }
}

static cpuset_t set_of(const char *list)
{
        cpuset_t s;
        assert_int_equal(cpuset_parse_list(list, &s), 0);
        return s;
}

static void test_xeon(void **state)
{
        struct topology *t = load_fixture("xeon-spr-2s");
        cpuset_t s;

        assert_int_equal(t->n_cpus, 32);
        assert_int_equal(t->n_packages, 2);
        assert_int_equal(t->n_dies, 2);
        assert_int_equal(t->n_llcs, 2);
        assert_int_equal(t->n_cores, 16);
        assert_int_equal(t->n_nodes, 2);
        assert_true(t->smt_active);
        s = set_of("0,16");
        assert_true(cpuset_equal(&t->cpus[0].smt_siblings, &s));
        s = set_of("8-15,24-31");
        assert_true(cpuset_equal(&t->cpus[9].core_siblings, &s));
        assert_true(cpuset_equal(&t->cpus[25].llc_cpus, &s));
        assert_int_equal(t->cpus[25].package_id, 1);
        assert_int_equal(t->cpus[25].node, 1);
        assert_int_equal(t->cpus[25].llc_id, 8);
        assert_int_equal(t->cpus[25].core_id, 1);
        /* cpu0 has no online file: online by definition */
        assert_true(t->cpus[0].online);
        assert_int_equal(t->n_policies, 32);
        for (unsigned i = 0; i < t->n_cpus; i++)
                assert_int_equal(t->cpus[i].policy, (int) i);
        assert_string_equal(t->policies[5].driver, "intel_pstate");
        assert_string_equal(t->policies[5].governor, "powersave");
        assert_true(t->policies[5].has_epp);
        assert_string_equal(t->policies[5].epp, "balance_performance");
        assert_int_equal(t->policies[5].n_freqs, 0);
        assert_int_equal(t->policies[5].base_khz, 2000000);
        assert_int_equal(t->policies[5].cpuinfo_max_khz, 3800000);
        assert_string_equal(t->cpuidle_driver, "intel_idle");
        assert_int_equal(t->cpus[31].n_idle_states, 4);
        assert_string_equal(t->cpus[31].idle[3].name, "C6");
        assert_int_equal(t->cpus[31].idle[3].exit_latency_us, 290);
        assert_int_equal(t->cpus[31].idle[3].target_residency_us, 800);
        assert_int_equal(t->cpus[31].idle[2].target_residency_us, 4);
        assert_false(t->cpus[31].idle[0].has_power); /* 4294967295 = unknown */
        topology_free(t);
}

static void test_epyc(void **state)
{
        struct topology *t = load_fixture("epyc-genoa-1s");
        cpuset_t s;

        assert_int_equal(t->n_cpus, 64);
        assert_int_equal(t->n_packages, 1);
        assert_int_equal(t->n_llcs, 4); /* one L3 per CCX */
        assert_int_equal(t->n_cores, 32);
        assert_int_equal(t->n_nodes, 1);
        s = set_of("8-15,40-47");
        assert_true(cpuset_equal(&t->cpus[40].llc_cpus, &s));
        assert_int_equal(t->cpus[40].llc_id, 8);
        s = set_of("3,35");
        assert_true(cpuset_equal(&t->cpus[35].smt_siblings, &s));
        assert_string_equal(t->policies[0].driver, "acpi-cpufreq");
        assert_false(t->policies[0].has_epp);
        /* sysfs lists P0 first; the reader sorts ascending */
        assert_int_equal(t->policies[0].n_freqs, 3);
        assert_int_equal(t->policies[0].freqs_khz[0], 1500000);
        assert_int_equal(t->policies[0].freqs_khz[2], 2400000);
        assert_string_equal(t->cpuidle_driver, "acpi_idle");
        assert_int_equal(t->cpus[63].n_idle_states, 3);
        assert_string_equal(t->cpus[63].idle[2].name, "C2");
        assert_int_equal(t->cpus[63].idle[2].exit_latency_us, 400);
        topology_free(t);
}

static void test_debian_fixture(void **state)
{
        struct topology *t = load_fixture("debian-2cpu-haltpoll");

        assert_int_equal(t->n_cpus, 2);
        assert_string_equal(t->cpuidle_driver, "haltpoll");
        assert_int_equal(t->n_policies, 0);
        assert_int_equal(t->cpus[0].policy, -1);
        assert_int_equal(t->cpus[1].n_idle_states, 2);
        assert_string_equal(t->cpus[1].idle[0].name, "POLL");
        assert_non_null(strstr(t->cpus[1].idle[1].name, "haltpoll"));
        assert_false(t->smt_active);
        topology_free(t);
}

/* Number of paths matching a glob pattern (0 when none). */
static unsigned count_glob(const char *pattern)
{
        glob_t g;
        unsigned n = 0;

        if (glob(pattern, 0, NULL, &g) == 0)
                n = (unsigned) g.gl_pathc;
        globfree(&g);
        return n;
}

/*
 * Number of distinct contents among the files matching a pattern, over
 * online CPUs only (the reader's domain counts are over online CPUs).
 * Each path is /sys/devices/system/cpu/cpuN/...; N is parsed from it.
 */
static unsigned count_distinct(const char *pattern, const cpuset_t *online)
{
        char seen[64][64];
        unsigned n = 0;
        glob_t g;

        if (glob(pattern, 0, NULL, &g) != 0) {
                globfree(&g);
                return 0;
        }
        for (size_t i = 0; i < g.gl_pathc; i++) {
                char buf[64];
                unsigned cpu;
                bool dup = false;

                assert_int_equal(sscanf(g.gl_pathv[i], "/sys/devices/system/cpu/cpu%u/", &cpu), 1);
                if (!cpuset_isset(online, cpu))
                        continue;
                assert_true(read_small_file(g.gl_pathv[i], buf, sizeof(buf)) >= 0);
                for (unsigned k = 0; k < n; k++)
                        dup = dup || strcmp(seen[k], buf) == 0;
                if (!dup) {
                        assert_true(n < 64);
                        strcpy(seen[n++], buf);
                }
        }
        globfree(&g);
        return n;
}

/*
 * The live host, read by the loader, against the same facts counted here
 * another way (glob and plain reads of /sys): CPUs, packages, cores, LLCs
 * (distinct shared_cpu_list of the highest cache level), nodes, cpufreq
 * policies, the cpuidle driver and each CPU's idle states.  This holds on
 * any host: a cpuidle driver "none" with no states (a Firecracker guest)
 * as much as haltpoll with two.
 */
static void test_real_sys(void **state)
{
        struct topology *real = NULL, *again = NULL;
        char path[128], drv[64];
        unsigned top_level = 0;
        glob_t g;

        assert_int_equal(topology_load(NULL, &real), 0);
        assert_string_equal(real->root, "/sys");
        assert_int_equal(real->n_cpus, count_glob("/sys/devices/system/cpu/cpu[0-9]*/topology"));
        assert_int_equal(real->n_cpus, (unsigned) sysconf(_SC_NPROCESSORS_CONF));
        assert_int_equal(cpuset_count(&real->online), (unsigned) sysconf(_SC_NPROCESSORS_ONLN));
        assert_int_equal(real->n_packages,
                         count_distinct("/sys/devices/system/cpu/cpu[0-9]*/topology/physical_package_id", &real->online));
        assert_int_equal(real->n_cores,
                         count_distinct("/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list", &real->online));

        /* the LLC is the highest cache level the host publishes; none: 0 LLCs */
        if (glob("/sys/devices/system/cpu/cpu[0-9]*/cache/index[0-9]*/level", 0, NULL, &g) == 0) {
                for (size_t i = 0; i < g.gl_pathc; i++) {
                        char buf[16];
                        assert_true(read_small_file(g.gl_pathv[i], buf, sizeof(buf)) >= 0);
                        if ((unsigned) atoi(buf) > top_level)
                                top_level = (unsigned) atoi(buf);
                }
        }
        globfree(&g);
        if (top_level == 0) {
                assert_int_equal(real->n_llcs, 0);
        } else {
                /* the index whose level is the top one, per CPU: distinct shared_cpu_list */
                unsigned n_llc_files = 0;
                char pat[128];
                for (unsigned k = 0; k < 8; k++) {
                        char buf[16];
                        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%u/level", k);
                        if (read_small_file(path, buf, sizeof(buf)) >= 0 && (unsigned) atoi(buf) == top_level) {
                                snprintf(pat, sizeof(pat), "/sys/devices/system/cpu/cpu[0-9]*/cache/index%u/shared_cpu_list", k);
                                n_llc_files = count_distinct(pat, &real->online);
                                break;
                        }
                }
                assert_int_equal(real->n_llcs, n_llc_files);
        }
        unsigned nodes = count_glob("/sys/devices/system/node/node[0-9]*");
        assert_int_equal(real->n_nodes, nodes ? nodes : 1);
        assert_int_equal(real->n_policies, count_glob("/sys/devices/system/cpu/cpufreq/policy[0-9]*"));

        assert_true(read_small_file("/sys/devices/system/cpu/cpuidle/current_driver", drv, sizeof(drv)) >= 0);
        drv[strcspn(drv, "\n")] = '\0';
        assert_string_equal(real->cpuidle_driver, drv);
        for (unsigned c = 0; c < real->n_cpus; c++) {
                snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%u/cpuidle/state[0-9]*", c);
                assert_int_equal(real->cpus[c].n_idle_states, count_glob(path));
        }
        printf("live /sys: %u CPUs, %u packages, %u cores, %u LLCs, %u nodes, %u cpufreq policies, "
               "cpuidle \"%s\" with %u states on cpu0\n", real->n_cpus, real->n_packages, real->n_cores,
               real->n_llcs, real->n_nodes, real->n_policies, real->cpuidle_driver, real->cpus[0].n_idle_states);

        /* "" means /sys too */
        assert_int_equal(topology_load("", &again), 0);
        assert_int_equal(again->n_cpus, real->n_cpus);
        topology_free(again);
        topology_free(real);
}

/* Copy a fixture into a temp dir so tests can remove or break files. */
static char *copy_fixture(const char *name)
{
        char tmpl[] = "/tmp/vmmpower-topo-XXXXXX", root[512], cmd[2048];
        char *dir = mkdtemp(tmpl);

        assert_non_null(dir);
        fixture_root(name, root, sizeof(root));
        assert_true(path_printf(cmd, sizeof(cmd), "cp -a '%s' '%s/sys'", root, dir) > 0);
        assert_int_equal(system(cmd), 0);
        return strdup(dir);
}

static void rm_rf(const char *dir)
{
        char cmd[1024];
        assert_true(path_printf(cmd, sizeof(cmd), "rm -rf '%s'", dir) > 0);
        assert_int_equal(system(cmd), 0);
}

static void tree_rm(const char *dir, const char *rel)
{
        char cmd[1024];
        assert_true(path_printf(cmd, sizeof(cmd), "rm -rf '%s/sys/%s'", dir, rel) > 0);
        assert_int_equal(system(cmd), 0);
}

static void tree_write(const char *dir, const char *rel, const char *content)
{
        char p[1024];
        assert_true(path_printf(p, sizeof(p), "%s/sys/%s", dir, rel) > 0);
        assert_int_equal(write_file_atomic(p, content, strlen(content), 0644), 0);
}

static int load_tree(const char *dir, struct topology **t)
{
        char root[512];
        assert_true(path_printf(root, sizeof(root), "%s/sys", dir) > 0);
        return topology_load(root, t);
}

static void test_missing_defaults(void **state)
{
        _cleanup_free_ char *dir = copy_fixture("xeon-spr-2s");
        struct topology *t = NULL;
        cpuset_t s;

        tree_rm(dir, "devices/system/cpu/possible");
        tree_rm(dir, "devices/system/cpu/present");
        tree_rm(dir, "devices/system/cpu/online");
        tree_rm(dir, "devices/system/cpu/smt");
        tree_rm(dir, "devices/system/cpu/cpuidle/current_governor");
        tree_rm(dir, "devices/system/node");
        tree_rm(dir, "devices/system/cpu/cpu5/topology");
        tree_rm(dir, "devices/system/cpu/cpu5/cache");
        tree_rm(dir, "devices/system/cpu/cpu6/topology/thread_siblings_list"); /* core_cpus_list remains */
        tree_rm(dir, "devices/system/cpu/cpu7/topology/die_cpus_list");
        tree_rm(dir, "devices/system/cpu/cpu7/topology/core_siblings_list");
        tree_rm(dir, "devices/system/cpu/cpu7/cache/index3");
        tree_rm(dir, "devices/system/cpu/cpu8/cpuidle/state2/desc");
        tree_rm(dir, "devices/system/cpu/cpu8/cpuidle/state3"); /* fewer states */
        tree_rm(dir, "devices/system/cpu/cpufreq/policy3/affected_cpus");
        tree_rm(dir, "devices/system/cpu/cpufreq/policy3/energy_performance_preference");
        tree_rm(dir, "devices/system/cpu/cpufreq/policy3/base_frequency");
        tree_write(dir, "devices/system/cpu/cpu9/online", "0\n");
        /* like a real offline CPU: no topology/ and cache/ */
        tree_rm(dir, "devices/system/cpu/cpu9/topology");
        tree_rm(dir, "devices/system/cpu/cpu9/cache");

        assert_int_equal(load_tree(dir, &t), 0);
        /* possible/present default to the cpuN dirs; online to cpuN/online != 0 */
        assert_int_equal(t->n_cpus, 32);
        s = set_of("0-31");
        assert_true(cpuset_equal(&t->possible, &s));
        s = set_of("0-8,10-31");
        assert_true(cpuset_equal(&t->online, &s));
        assert_false(t->cpus[9].online);
        assert_true(t->cpus[9].present);
        assert_int_equal(t->cpus[9].package_id, -1);
        assert_int_equal(t->cpus[9].llc_id, -1);
        /* governor falls back to current_governor_ro */
        assert_string_equal(t->cpuidle_governor, "menu");
        /* smt/active absent: derived from siblings */
        assert_true(t->smt_active);
        /* no node dir: everything on node 0 */
        assert_int_equal(t->n_nodes, 1);
        assert_int_equal(t->cpus[20].node, 0);
        /* cpu5 without topology/ and cache/ */
        assert_int_equal(t->cpus[5].package_id, -1);
        assert_int_equal(t->cpus[5].die_id, 0);
        assert_int_equal(t->cpus[5].cluster_id, -1);
        assert_int_equal(t->cpus[5].core_id, 5);
        assert_int_equal(t->cpus[5].llc_id, -1);
        s = set_of("5");
        assert_true(cpuset_equal(&t->cpus[5].smt_siblings, &s));
        assert_true(cpuset_equal(&t->cpus[5].llc_cpus, &s));
        assert_true(cpuset_equal(&t->cpus[5].core_siblings, &s));
        assert_true(cpuset_equal(&t->cpus[5].die_cpus, &s));
        /* cpu6 falls back to core_cpus_list */
        s = set_of("6,22");
        assert_true(cpuset_equal(&t->cpus[6].smt_siblings, &s));
        /* cpu7: package_cpus_list used, die = package, LLC = highest remaining (L2) */
        s = set_of("0-7,16-23");
        assert_true(cpuset_equal(&t->cpus[7].core_siblings, &s));
        assert_true(cpuset_equal(&t->cpus[7].die_cpus, &s));
        s = set_of("7,23");
        assert_true(cpuset_equal(&t->cpus[7].llc_cpus, &s));
        assert_int_equal(t->cpus[7].llc_id, 7);
        /* idle state defaults */
        assert_int_equal(t->cpus[8].n_idle_states, 3);
        assert_string_equal(t->cpus[8].idle[2].desc, "");
        assert_string_equal(t->cpus[8].idle[2].name, "C1E");
        /* cpufreq defaults */
        s = set_of("3");
        assert_true(cpuset_equal(&t->policies[3].affected_cpus, &s));
        assert_false(t->policies[3].has_epp);
        assert_int_equal(t->policies[3].base_khz, 0);
        /* counts over online CPUs: cpu5 is now its own package (-1) and core;
         * offline cpu9 (also package -1, core 9) is not counted */
        assert_int_equal(t->n_packages, 3);
        /* cores: the 16 real ones (pkg0 core5 still has cpu21, pkg1 core1 still has cpu25
         * while cpu9 is offline) plus cpu5's defaulted (-1, 0, 5) */
        assert_int_equal(t->n_cores, 17);
        topology_free(t);

        /* No cpufreq at all and no cpuidle at all. */
        tree_rm(dir, "devices/system/cpu/cpufreq");
        tree_rm(dir, "devices/system/cpu/cpuidle");
        for (int i = 0; i < 32; i++) {
                char rel[64];
                snprintf(rel, sizeof(rel), "devices/system/cpu/cpu%d/cpuidle", i);
                tree_rm(dir, rel);
        }
        assert_int_equal(load_tree(dir, &t), 0);
        assert_int_equal(t->n_policies, 0);
        assert_null(t->policies);
        assert_int_equal(t->cpus[0].policy, -1);
        assert_string_equal(t->cpuidle_driver, "");
        assert_string_equal(t->cpuidle_governor, "");
        assert_int_equal(t->cpus[0].n_idle_states, 0);
        topology_free(t);
        rm_rf(dir);
}

/* Break one file of a copied tree, expect the load to fail, restore it. */
static void expect_load_error(const char *dir, const char *rel, const char *content, int err)
{
        struct topology *t = NULL;
        _cleanup_free_ char *orig = NULL;
        char p[1024];

        assert_true(path_printf(p, sizeof(p), "%s/sys/%s", dir, rel) > 0);
        orig = slurp(p);
        assert_non_null(orig);
        tree_write(dir, rel, content);
        if (load_tree(dir, &t) != err) {
                fprintf(stderr, "%s = \"%s\" did not give %d\n", rel, content, err);
                fail();
        }
        assert_null(t);
        tree_write(dir, rel, orig);
        assert_int_equal(load_tree(dir, &t), 0); /* restored: loads again */
        topology_free(t);
}

static void test_unparsable(void **state)
{
        /* one copy for all cases: copying a 64-CPU tree is slow on the 2-CPU test VM */
        _cleanup_free_ char *dir = copy_fixture("epyc-genoa-1s");

        expect_load_error(dir, "devices/system/cpu/cpu3/topology/core_id", "abc\n", -EINVAL);
        expect_load_error(dir, "devices/system/cpu/cpu3/topology/thread_siblings_list", "3-1\n", -EINVAL);
        expect_load_error(dir, "devices/system/cpu/possible", "0-63x\n", -EINVAL);
        expect_load_error(dir, "devices/system/cpu/possible", "0-5000\n", -E2BIG);
        expect_load_error(dir, "devices/system/cpu/cpu1/online", "2\n", -EINVAL);
        expect_load_error(dir, "devices/system/cpu/cpu2/cpuidle/state1/latency", "-1\n", -EINVAL);
        expect_load_error(dir, "devices/system/cpu/cpu2/cache/index3/level", "\n", -EINVAL);
        expect_load_error(dir, "devices/system/node/node0/cpulist", "0-63,\n", -EINVAL);
        expect_load_error(dir, "devices/system/cpu/cpufreq/policy4/cpuinfo_max_freq", "2.4GHz\n", -EINVAL);
        expect_load_error(dir, "devices/system/cpu/cpufreq/policy4/scaling_available_frequencies",
                          "2400000 fast\n", -EINVAL);
        expect_load_error(dir, "devices/system/cpu/cpuidle/current_driver", "bad\001driver\n", -EINVAL);
        rm_rf(dir);
}

static void test_too_many_cpus(void **state)
{
        _cleanup_free_ char *dir = copy_fixture("debian-2cpu-haltpoll");
        struct topology *t = NULL;
        char cmd[1024];

        /* a cpuN directory beyond VP_MAX_CPUS, with the mask files gone */
        tree_rm(dir, "devices/system/cpu/possible");
        assert_true(path_printf(cmd, sizeof(cmd), "mkdir -p '%s/sys/devices/system/cpu/cpu%d'", dir,
                                VP_MAX_CPUS) > 0);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(load_tree(dir, &t), -E2BIG);
        rm_rf(dir);
        assert_int_equal(topology_load("/nonexistent-vmmpower-root", &t), -ENOENT);
}

/* tools/record-sysfs-topology.sh must copy everything the reader uses:
 * a recording of the live /sys dumps exactly like the live /sys. */
static void test_record_script(void **state)
{
        const char *src = getenv("VMMPOWER_SOURCE_DIR");
        char tmpl[] = "/tmp/vmmpower-rec-XXXXXX", cmd[1024], root[256];
        struct topology *live = NULL, *rec = NULL;
        _cleanup_free_ char *a = NULL, *b = NULL;
        char *dir = mkdtemp(tmpl);

        assert_non_null(dir);
        if (!src)
                src = TEST_DATA_DIR "/../..";
        assert_true(path_printf(cmd, sizeof(cmd), "sh '%s/tools/record-sysfs-topology.sh' '%s/host' >/dev/null",
                                src, dir) > 0);
        assert_int_equal(system(cmd), 0);
        assert_true(path_printf(root, sizeof(root), "%s/host/sys", dir) > 0);
        assert_int_equal(topology_load(NULL, &live), 0);
        assert_int_equal(topology_load(root, &rec), 0);
        a = dump_string(live);
        b = dump_string(rec);
        if (strcmp(a, b) != 0) {
                report_mismatch("recording of /sys", a, b);
                fail();
        }
        topology_free(live);
        topology_free(rec);
        rm_rf(dir);
}

/*
 * SMT sibling lists that disagree: cpu1 read "1,17", then cpu1 went offline and cpu17 read "17"
 * (or a broken tree).  cpu17 was in two cores of the energy model, whose wake orders overflowed.
 * Each CPU whose list disagrees with a sibling's is reduced to itself, the others keep theirs.
 */
static void test_smt_disagree(void **state)
{
        _cleanup_free_ char *dir = copy_fixture("xeon-spr-2s");
        struct topology *t = NULL;
        struct energy_model m;
        struct em_host *h = NULL;
        cpuset_t s;

        tree_write(dir, "devices/system/cpu/cpu17/topology/thread_siblings_list", "17\n");
        /* a broken tree: cpu2 "2,18,19", cpu18 "2,18", cpu3 and cpu19 "3,19" (the last two agree) */
        tree_write(dir, "devices/system/cpu/cpu2/topology/thread_siblings_list", "2,18-19\n");
        tree_write(dir, "devices/system/cpu/cpu18/topology/thread_siblings_list", "2,18\n");
        tree_write(dir, "devices/system/cpu/cpu19/topology/thread_siblings_list", "3,19\n");
        assert_int_equal(load_tree(dir, &t), 0);
        /* cpu17's own list "17" agrees with itself: it is not one of them */
        s = set_of("1-2,18");
        assert_true(cpuset_equal(&t->smt_inconsistent, &s));
        static const char *const want[][2] = { { "1", "1" }, { "17", "17" }, { "2", "2" }, { "18", "18" },
                                                { "3", "3,19" }, { "19", "3,19" }, { "0", "0,16" }, { "16", "0,16" } };
        for (unsigned i = 0; i < ELEMENTSOF(want); i++) {
                unsigned cpu = (unsigned) atoi(want[i][0]);
                s = set_of(want[i][1]);
                if (!cpuset_equal(&t->cpus[cpu].smt_siblings, &s))
                        fail_msg("cpu%u: smt siblings are not %s", cpu, want[i][1]);
        }
        /* the energy model has every online CPU in one core */
        assert_int_equal(energy_model_from_topology(t, &m), 0);
        assert_int_equal(em_host_new(t, &m, &h), 0);
        assert_int_equal(h->n_online, 32);
        assert_int_equal(h->n_cores, 18);
        em_host_free(h);
        topology_free(t);

        /* a consistent tree: nothing reduced (the fixtures' golden dumps hold the lists) */
        tree_write(dir, "devices/system/cpu/cpu17/topology/thread_siblings_list", "1,17\n");
        tree_write(dir, "devices/system/cpu/cpu2/topology/thread_siblings_list", "2,18\n");
        tree_write(dir, "devices/system/cpu/cpu19/topology/thread_siblings_list", "3,19\n");
        assert_int_equal(load_tree(dir, &t), 0);
        assert_true(cpuset_empty(&t->smt_inconsistent));
        topology_free(t);
        rm_rf(dir);
}

/*
 * topology_read_online(), the daemon's per-period hotplug check: cpu/online as read; without it
 * the default topology_load() takes (present minus cpuN/online = 0); an unparsable file and a
 * missing root are errors that leave *ret alone.
 */
static void test_read_online(void **state)
{
        _cleanup_free_ char *dir = copy_fixture("xeon-spr-2s");
        char root[512];
        struct topology *t = NULL;
        cpuset_t s, want, keep;

        assert_true(path_printf(root, sizeof(root), "%s/sys", dir) > 0);
        assert_int_equal(topology_read_online(root, &s), 0);
        want = set_of("0-31");
        assert_true(cpuset_equal(&s, &want));

        /* cpu5 and cpu20 go offline: the kernel updates cpu/online and cpuN/online */
        tree_write(dir, "devices/system/cpu/online", "0-4,6-19,21-31\n");
        tree_write(dir, "devices/system/cpu/cpu5/online", "0\n");
        tree_write(dir, "devices/system/cpu/cpu20/online", "0\n");
        assert_int_equal(topology_read_online(root, &s), 0);
        want = set_of("0-4,6-19,21-31");
        assert_true(cpuset_equal(&s, &want));
        assert_int_equal(load_tree(dir, &t), 0);
        assert_true(cpuset_equal(&t->online, &want));
        topology_free(t);

        /* no cpu/online: the same default topology_load() takes */
        tree_rm(dir, "devices/system/cpu/online");
        assert_int_equal(topology_read_online(root, &s), 0);
        assert_true(cpuset_equal(&s, &want));

        /* errors leave *ret as it was */
        tree_write(dir, "devices/system/cpu/online", "0-31,garbage\n");
        keep = s;
        assert_int_equal(topology_read_online(root, &s), -EINVAL);
        assert_true(cpuset_equal(&s, &keep));
        assert_true(path_printf(root, sizeof(root), "%s/nonexistent", dir) > 0);
        assert_int_equal(topology_read_online(root, &s), -ENOENT);
        assert_true(cpuset_equal(&s, &keep));
        rm_rf(dir);
}

/*
 * Reads below the directory busy_dir (relative to the sysfs root) fail with EBUSY, as every
 * file of an inactive cpufreq policy does (cpufreq.c show(): all the policy's CPUs offline).
 * Linked with -Wl,--wrap=read_small_file_at (tests/meson.build).
 */
ssize_t __real_read_small_file_at(int dirfd, const char *path, char *buf, size_t size);
ssize_t __wrap_read_small_file_at(int dirfd, const char *path, char *buf, size_t size);
static const char *busy_dir;
ssize_t __wrap_read_small_file_at(int dirfd, const char *path, char *buf, size_t size)
{
        if (busy_dir && strncmp(path, busy_dir, strlen(busy_dir)) == 0)
                return -EBUSY;
        return __real_read_small_file_at(dirfd, path, buf, size);
}

/*
 * CPU 5 offline on the intel_pstate host (a policy per CPU): its policy is inactive and
 * unreadable (EBUSY), and the topology is still read, without that policy (before stop 40 the
 * read failed: the daemon would not start with a CPU offline, nor follow one going offline).
 * Any other read error still fails it.
 */
static void test_inactive_policy(void **state)
{
        _cleanup_free_ char *dir = copy_fixture("xeon-spr-2s");
        struct topology *t = NULL, *all = NULL;

        assert_int_equal(load_tree(dir, &all), 0);
        tree_write(dir, "devices/system/cpu/online", "0-4,6-31\n");
        tree_write(dir, "devices/system/cpu/cpu5/online", "0\n");
        busy_dir = "devices/system/cpu/cpufreq/policy5/";
        assert_int_equal(load_tree(dir, &t), 0);
        assert_int_equal(t->n_policies, all->n_policies - 1);
        assert_int_equal(t->cpus[5].policy, -1);
        assert_false(t->cpus[5].online);
        for (unsigned i = 0; i < t->n_policies; i++) {
                assert_int_not_equal(t->policies[i].id, 5);
                CPUSET_FOREACH(c, &t->policies[i].related_cpus)
                        assert_int_equal(t->cpus[c].policy, (int) i);
        }
        assert_int_equal(t->cpus[6].policy, all->cpus[6].policy - 1);
        topology_free(t);
        busy_dir = "devices/system/cpu/cpu6/topology/";
        t = NULL;
        assert_true(load_tree(dir, &t) < 0);
        busy_dir = NULL;
        topology_free(all);
        rm_rf(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_golden),
                cmocka_unit_test(test_xeon),
                cmocka_unit_test(test_epyc),
                cmocka_unit_test(test_debian_fixture),
                cmocka_unit_test(test_real_sys),
                cmocka_unit_test(test_missing_defaults),
                cmocka_unit_test(test_unparsable),
                cmocka_unit_test(test_too_many_cpus),
                cmocka_unit_test(test_record_script),
                cmocka_unit_test(test_smt_disagree),
                cmocka_unit_test(test_read_online),
                cmocka_unit_test(test_inactive_policy),
        };

        log_set_max_level(LOG_LEVEL_ERR);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
