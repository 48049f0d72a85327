/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Coexistence check (coexist.h): tuners found in a planted /proc tree
 * (a python-run tuned, power-profiles-daemon whose comm is cut at 15 bytes,
 * thermald, and look-alikes that must not match), knobs away from their
 * defaults on copies of recorded sysfs trees (the four recorded machines at
 * their defaults give no finding; each changed knob gives exactly one), the
 * messages and the verdict per OtherTuners value, the [Host] OtherTuners
 * key, and the sysfs power driver leaving preset foreign knobs untouched.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "coexist.h"
#include "config.h"
#include "journal.h"
#include "power_driver.h"
#include "topology.h"
#include "util.h"

#define CPU_REL "devices/system/cpu"

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
        char cmd[4096];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        assert_int_equal(system(cmd), 0);
}

static void make_tmp(char *buf, size_t size)
{
        snprintf(buf, size, "%s", access("/dev/shm", W_OK) == 0 ? "/dev/shm/test-coexist.XXXXXX"
                                                                 : "/tmp/test-coexist.XXXXXX");
        assert_non_null(mkdtemp(buf));
}

/* A process entry: comm, and cmdline given as NUL-separated bytes of length len. */
static void plant(const char *proc, unsigned pid, const char *comm, const char *cmdline, size_t len)
{
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%u", proc, pid);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/%u/comm", proc, pid);
        assert_non_null(f = fopen(path, "w"));
        fprintf(f, "%s\n", comm);
        fclose(f);
        snprintf(path, sizeof(path), "%s/%u/cmdline", proc, pid);
        assert_non_null(f = fopen(path, "w"));
        fwrite(cmdline, 1, len, f);
        fclose(f);
}

#define PLANT(proc, pid, comm, lit) plant(proc, pid, comm, lit, sizeof(lit) - 1)

/* Run fn with stderr captured into buf. */
static int capture(int (*fn)(void *), void *arg, char *buf, size_t size)
{
        char path[] = "/tmp/test-coexist-log.XXXXXX";
        int fd = mkstemp(path), saved = dup(2), r;
        ssize_t n;

        assert_true(fd >= 0 && saved >= 0);
        fflush(stderr);
        dup2(fd, 2);
        r = fn(arg);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        n = pread(fd, buf, size - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        close(fd);
        unlink(path);
        fprintf(stderr, "%s", buf); /* still shown in the test log */
        return r;
}

struct log_args {
        struct coexist_report *r;
        enum coexist_mode mode;
};

static int do_log(void *p)
{
        struct log_args *a = p;

        return coexist_log(a->r, a->mode, "/sysroot");
}

static void test_tuners(void **state)
{
        char tmp[64], log[8192];
        struct coexist_report r;
        struct log_args a = { &r, COEXIST_COEXIST };

        (void) state;
        make_tmp(tmp, sizeof(tmp));
        /* tuned is a python script: comm is the script's name, argv[0] the interpreter */
        PLANT(tmp, 4242, "tuned", "/usr/bin/python3\0-Es\0/usr/sbin/tuned\0-l\0-P\0");
        PLANT(tmp, 77, "power-profiles-", "/usr/libexec/power-profiles-daemon\0");
        PLANT(tmp, 78, "power-profiles-", "/opt/power-profiles-tool\0"); /* cut comm, other program */
        PLANT(tmp, 90, "thermald", "/usr/sbin/thermald\0--systemd\0--dbus-enable\0");
        PLANT(tmp, 91, "tuned", "");         /* kernel thread or zombie: no cmdline */
        PLANT(tmp, 92, "tuned-adm", "/usr/bin/python3\0/usr/sbin/tuned-adm\0list\0");
        PLANT(tmp, 93, "bash", "bash\0");
        PLANT(tmp, 94, "tuned", "/home/mallory/tuned\0"); /* a user's process named tuned */
        sh("chown -R 65534 %s/94", tmp);
        sh("mkdir -p %s/self %s/sys", tmp, tmp); /* non-numeric entries */

        assert_int_equal(coexist_scan_tuners(tmp, &r), 0);
        assert_int_equal(r.n_tuners, 3);
        unsigned seen = 0;
        for (size_t i = 0; i < r.n_tuners; i++) {
                const struct coexist_tuner *t = &r.tuners[i];
                if (strcmp(t->name, "tuned") == 0) {
                        assert_int_equal(t->pid, 4242);
                        assert_int_equal(t->classes, (1u << POWER_KNOB_CPUFREQ) | (1u << POWER_KNOB_CPUIDLE) |
                                                             (1u << POWER_KNOB_PM_QOS));
                        assert_true(t->refuses);
                        seen |= 1;
                } else if (strcmp(t->name, "power-profiles-daemon") == 0) {
                        assert_int_equal(t->pid, 77);
                        assert_int_equal(t->classes, 1u << POWER_KNOB_CPUFREQ);
                        seen |= 2;
                } else if (strcmp(t->name, "thermald") == 0) {
                        assert_int_equal(t->pid, 90);
                        assert_int_equal(t->classes, 0);
                        assert_false(t->refuses);
                        seen |= 4;
                } else
                        fail_msg("unexpected tuner %s", t->name);
        }
        assert_int_equal(seen, 7);
        assert_int_equal(coexist_refusals(&r), 2);
        assert_int_equal(coexist_foreign_classes(&r),
                         (1u << POWER_KNOB_CPUFREQ) | (1u << POWER_KNOB_CPUIDLE) | (1u << POWER_KNOB_PM_QOS));

        /* coexist: named, goes on */
        assert_int_equal(capture(do_log, &a, log, sizeof(log)), 0);
        assert_non_null(strstr(log, "Another tuner is running: tuned (pid 4242); leaving it these knobs: cpufreq, "
                                    "cpuidle, pm_qos."));
        assert_non_null(strstr(log, "power-profiles-daemon (pid 77)"));
        assert_non_null(strstr(log, "thermald (pid 90); leaving it these knobs: none up front"));
        assert_null(strstr(log, "Refusing"));
        /* refuse: named as an error, -EBUSY */
        a.mode = COEXIST_REFUSE;
        assert_int_equal(capture(do_log, &a, log, sizeof(log)), -EBUSY);
        assert_non_null(strstr(log, "Another tuner is running: tuned (pid 4242); OtherTuners=refuse."));
        assert_non_null(strstr(log, "Refusing to run beside another tuner"));
        coexist_report_clear(&r);

        /* thermald alone never refuses */
        sh("rm -rf %s/4242 %s/77", tmp, tmp);
        assert_int_equal(coexist_scan_tuners(tmp, &r), 0);
        assert_int_equal(r.n_tuners, 1);
        assert_int_equal(coexist_refusals(&r), 0);
        assert_int_equal(capture(do_log, &a, log, sizeof(log)), 0);
        coexist_report_clear(&r);

        assert_int_equal(coexist_scan_tuners("/nonexistent-procfs", &r), -ENOENT);
        sh("rm -rf %s", tmp);
}

/* The recorded machines hold the kernel's defaults: no finding on any of them. */
static void test_recorded_trees_at_defaults(void **state)
{
        static const char *const trees[] = { "topology/xeon-spr-2s/sys", "topology/epyc-genoa-1s/sys",
                                             "topology/debian-2cpu-haltpoll/sys",
                                             "topology/firecracker-2cpu-noidle/sys", "sysfs-cpufreq/small-2cpu/sys" };
        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(trees); i++) {
                struct coexist_report r;
                char root[512];

                coexist_report_init(&r);
                snprintf(root, sizeof(root), "%s/%s", TEST_DATA_DIR, trees[i]);
                assert_int_equal(coexist_scan_knobs(root, &r), 0);
                if (r.n_knobs)
                        fail_msg("%s: %s holds %s", trees[i], r.knobs[0].path, r.knobs[0].found);
                assert_int_equal(r.sysfs_errors, 0);
                coexist_report_clear(&r);
        }
}

static const struct coexist_knob *find_knob(const struct coexist_report *r, const char *path)
{
        for (size_t i = 0; i < r->n_knobs; i++)
                if (strcmp(r->knobs[i].path, path) == 0)
                        return &r->knobs[i];
        return NULL;
}

static void test_knobs_away(void **state)
{
        char tmp[64], root[128], log[8192];
        struct coexist_report r;
        struct log_args a = { &r, COEXIST_COEXIST };
        const struct coexist_knob *k;
        const char **paths;

        (void) state;
        make_tmp(tmp, sizeof(tmp));
        snprintf(root, sizeof(root), "%s/sys", tmp);
        sh("cp -a %s/sysfs-cpufreq/small-2cpu/sys %s", TEST_DATA_DIR, root);
        coexist_report_init(&r);

        /* one cpuidle state disabled: foreign, never a refusal */
        sh("echo 1 > %s/" CPU_REL "/cpu1/cpuidle/state2/disable", root);
        assert_int_equal(coexist_scan_knobs(root, &r), 0);
        assert_int_equal(r.n_knobs, 1);
        assert_string_equal(r.knobs[0].path, CPU_REL "/cpu1/cpuidle/state2/disable");
        assert_int_equal(r.knobs[0].cls, POWER_KNOB_CPUIDLE);
        assert_false(r.knobs[0].refuses);
        a.mode = COEXIST_REFUSE;
        assert_int_equal(capture(do_log, &a, log, sizeof(log)), 0);
        assert_non_null(strstr(log, "/sysroot/" CPU_REL "/cpu1/cpuidle/state2/disable holds \"1\", not its default (0)"));

        /* governor, a lowered cap, a raised floor, a PM QoS limit */
        sh("echo performance > %s/" CPU_REL "/cpufreq/policy0/scaling_governor", root);
        sh("echo 2000000 > %s/" CPU_REL "/cpufreq/policy1/scaling_max_freq", root);
        sh("echo 20 > %s/" CPU_REL "/cpu0/power/pm_qos_resume_latency_us", root);
        assert_int_equal(coexist_scan_knobs(root, &r), 0);
        assert_non_null(k = find_knob(&r, CPU_REL "/cpufreq/policy0/scaling_governor"));
        assert_string_equal(k->found, "performance");
        assert_string_equal(k->expected, "powersave"); /* intel_pstate starts in powersave */
        assert_true(k->refuses);
        /* the governor's policy: its min, max and EPP are left too (implied, not refusals) */
        assert_non_null(k = find_knob(&r, CPU_REL "/cpufreq/policy0/scaling_max_freq"));
        assert_true(k->implied);
        assert_false(k->refuses);
        assert_non_null(find_knob(&r, CPU_REL "/cpufreq/policy0/scaling_min_freq"));
        assert_non_null(find_knob(&r, CPU_REL "/cpufreq/policy0/energy_performance_preference"));
        assert_non_null(k = find_knob(&r, CPU_REL "/cpufreq/policy1/scaling_max_freq"));
        assert_string_equal(k->found, "2000000");
        assert_true(k->refuses);
        assert_false(k->implied);
        assert_null(find_knob(&r, CPU_REL "/cpufreq/policy1/scaling_min_freq"));
        assert_non_null(k = find_knob(&r, CPU_REL "/cpu0/power/pm_qos_resume_latency_us"));
        assert_string_equal(k->found, "20");
        assert_true(k->refuses);
        assert_null(find_knob(&r, CPU_REL "/cpu1/power/pm_qos_resume_latency_us"));
        assert_int_equal(r.n_knobs, 7);
        assert_int_equal(coexist_refusals(&r), 3);

        a.mode = COEXIST_REFUSE;
        assert_int_equal(capture(do_log, &a, log, sizeof(log)), -EBUSY);
        assert_non_null(strstr(log, CPU_REL "/cpufreq/policy1/scaling_max_freq holds \"2000000\", not its default "
                                    "(cpuinfo_max_freq): set by someone else; OtherTuners=refuse."));
        assert_non_null(strstr(log, "scaling_governor holds \"performance\", not its default (powersave)"));
        assert_non_null(strstr(log, "pm_qos_resume_latency_us holds \"20\""));
        a.mode = COEXIST_COEXIST;
        assert_int_equal(capture(do_log, &a, log, sizeof(log)), 0);
        assert_non_null(strstr(log, "3 more cpufreq knob(s) left alone because their policy's governor"));

        /* the driver's list: every finding but the governor (a knob vmmpower never writes) */
        assert_non_null(paths = coexist_foreign_paths(&r));
        size_t n = 0;
        for (; paths[n]; n++)
                assert_null(strstr(paths[n], "scaling_governor"));
        assert_int_equal(n, 6);
        free(paths);

        /* PM QoS "n/a" (no latency tolerated) is away from the default "0" too */
        sh("echo n/a > %s/" CPU_REL "/cpu1/power/pm_qos_resume_latency_us", root);
        assert_int_equal(coexist_scan_knobs(root, &r), 0);
        assert_non_null(k = find_knob(&r, CPU_REL "/cpu1/power/pm_qos_resume_latency_us"));
        assert_string_equal(k->found, "n/a");

        /* an unparsable frequency is counted, not a crash */
        sh("echo garbage > %s/" CPU_REL "/cpufreq/policy1/cpuinfo_max_freq", root);
        assert_int_equal(coexist_scan_knobs(root, &r), 0);
        assert_int_equal(r.sysfs_errors, 1);
        coexist_report_clear(&r);
        sh("rm -rf %s", tmp);
}

/* The sysfs backend never writes a knob handed over as foreign. */
static void test_driver_preset_foreign(void **state)
{
        char tmp[64], root[128], jdir[128], buf[64], path[256];
        const char *paths[] = { CPU_REL "/cpufreq/policy1/scaling_max_freq", NULL };
        struct power_driver_config cfg = { 0 };
        struct power_perf_request req = { .flags = POWER_PERF_MAX_KHZ, .max_khz = 1800000 };
        struct power_idle_constraint idle = { .deepest_state = -1, .latency_us = 10 };
        struct power_driver *drv;
        struct journal *j;

        (void) state;
        make_tmp(tmp, sizeof(tmp));
        snprintf(root, sizeof(root), "%s/sys", tmp);
        snprintf(jdir, sizeof(jdir), "%s/state", tmp);
        sh("cp -a %s/sysfs-cpufreq/small-2cpu/sys %s", TEST_DATA_DIR, root);
        assert_int_equal(journal_open(jdir, &j), 0);
        journal_set_sync(j, false);
        cfg.sysfs_root = root;
        cfg.journal = j;
        cfg.foreign_paths = paths;
        cfg.foreign_classes = 1u << POWER_KNOB_PM_QOS;
        assert_int_equal(power_driver_new("sysfs", &cfg, &drv), 0);
        assert_null(power_driver_get_config(drv)->foreign_paths); /* not kept past init */
        /* policy1's cap + the PM QoS knob of each of the 2 CPUs */
        assert_int_equal(power_driver_stats(drv)->foreign, 3);

        assert_int_equal(power_driver_set_perf(drv, 1, &req), -POWER_KNOB_FOREIGN);
        snprintf(path, sizeof(path), "%s/" CPU_REL "/cpufreq/policy1/scaling_max_freq", root);
        assert_true(read_small_file(path, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "3800000");
        /* policy0 is ours to cap */
        assert_int_equal(power_driver_set_perf(drv, 0, &req), 0);
        snprintf(path, sizeof(path), "%s/" CPU_REL "/cpufreq/policy0/scaling_max_freq", root);
        assert_true(read_small_file(path, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "1800000");
        /* the PM QoS class is someone else's: never written */
        assert_int_equal(power_driver_enter_idle(drv, 0, &idle), -POWER_KNOB_FOREIGN);
        snprintf(path, sizeof(path), "%s/" CPU_REL "/cpu0/power/pm_qos_resume_latency_us", root);
        assert_true(read_small_file(path, buf, sizeof(buf)) > 0);
        assert_string_equal(buf, "0");
        assert_true(power_driver_stats(drv)->foreign_refused >= 2);
        assert_null(journal_original(j, JOURNAL_KIND_SYSFS, CPU_REL "/cpufreq/policy1/scaling_max_freq"));
        assert_null(journal_original(j, JOURNAL_KIND_SYSFS, CPU_REL "/cpu0/power/pm_qos_resume_latency_us"));
        power_driver_free(drv);
        journal_free(j);
        sh("rm -rf %s", tmp);
}

static void test_config_key(void **state)
{
        struct config_error err = { 0 };
        struct vp_config c;
        static const char good[] = "[Host]\nOtherTuners = refuse\n";
        static const char bad[] = "[Host]\nOtherTuners = fight\n";
        char *dump = NULL;
        size_t dlen = 0;
        FILE *f;

        (void) state;
        config_defaults(&c);
        assert_int_equal(c.other_tuners, COEXIST_COEXIST);
        assert_int_equal(config_parse_buffer("t.conf", good, sizeof(good) - 1, &c, &err), 0);
        assert_int_equal(c.other_tuners, COEXIST_REFUSE);
        assert_non_null(f = open_memstream(&dump, &dlen));
        config_dump(&c, f);
        fclose(f);
        assert_non_null(strstr(dump, "[Host]\nOtherTuners = refuse\n"));
        free(dump);
        assert_int_equal(config_parse_buffer("t.conf", bad, sizeof(bad) - 1, &c, &err), -EINVAL);
        assert_int_equal(err.line, 2);
        assert_non_null(strstr(err.message, "expected coexist or refuse"));
        assert_int_equal(c.other_tuners, COEXIST_REFUSE); /* untouched on error */
}

/* A <numatune> nodeset as CPUs, on the two-node recorded Sapphire Rapids tree. */
static void test_numa_cpus(void **state)
{
        char root[512], path[600], list[4096];
        struct topology *topo;
        cpuset_t got, want, all;

        (void) state;
        snprintf(root, sizeof(root), "%s/topology/xeon-spr-2s/sys", TEST_DATA_DIR);
        assert_int_equal(topology_load(root, &topo), 0);
        snprintf(path, sizeof(path), "%s/devices/system/node/node1/cpulist", root);
        assert_true(read_small_file(path, list, sizeof(list)) > 0);
        assert_int_equal(cpuset_parse_list(list, &want), 0);
        assert_int_equal(coexist_numa_cpus(topo, "1", &got), 0);
        assert_true(cpuset_equal(&got, &want));
        assert_true(cpuset_count(&got) > 0 && cpuset_count(&got) < cpuset_count(&topo->present));
        assert_int_equal(coexist_numa_cpus(topo, "0-1", &all), 0);
        assert_true(cpuset_equal(&all, &topo->present));
        assert_int_equal(coexist_numa_cpus(topo, "", &got), 0);
        assert_int_equal(cpuset_count(&got), 0);
        assert_int_equal(coexist_numa_cpus(topo, "5", &got), -ENOENT);
        assert_int_equal(coexist_numa_cpus(topo, "x", &got), -EINVAL);
        topology_free(topo);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_tuners),
                cmocka_unit_test(test_recorded_trees_at_defaults),
                cmocka_unit_test(test_knobs_away),
                cmocka_unit_test(test_driver_preset_foreign),
                cmocka_unit_test(test_config_key),
                cmocka_unit_test(test_numa_cpus),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
