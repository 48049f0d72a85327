/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pcpu_stat against fixture snapshots (tests/data/procstat/<name>: two
 * /proc/stat snapshots + cpuidle counters, expected ratios computed by
 * tools/gen-fixture-procstat.py independently of the C code) and against the
 * live /proc and /sys of this machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "pcpu_stat.h"
#include "topology.h"
#include "util.h"

static void test_parse_line(void **state)
{
        uint64_t v[10];

        assert_int_equal(pcpu_parse_stat_line("cpu  5768 0 8077 4252008 602 0 102 1759 0 0", v), -1);
        assert_int_equal(v[0], 5768);
        assert_int_equal(v[7], 1759);
        assert_int_equal(pcpu_parse_stat_line("cpu17 1 2 3 4 5 6 7 8 9 10\n", v), 17);
        assert_int_equal(v[0], 1);
        assert_int_equal(v[9], 10);
        /* old kernels: only 4..7 fields; missing ones are 0 */
        assert_int_equal(pcpu_parse_stat_line("cpu1 1 2 3 4", v), 1);
        assert_int_equal(v[3], 4);
        assert_int_equal(v[4], 0);
        assert_int_equal(v[9], 0);
        /* future fields beyond 10 are ignored */
        assert_int_equal(pcpu_parse_stat_line("cpu2 1 2 3 4 5 6 7 8 9 10 11 12", v), 2);
        assert_int_equal(v[9], 10);
        assert_int_equal(pcpu_parse_stat_line("cpu0 18446744073709551615 0 0 0", v), 0);
        assert_true(v[0] == UINT64_MAX);

        static const char *const bad[] = {
                "cpu", "cpu ", "cpu0", "cpu0 ", "cpu0 1 2 3", "cpux 1 2 3 4", "cpu0 1 2 3 -4",
                "cpu0  1  2 3 4", "cpu0 1 2 3 4x", "intr 1 2 3 4", "cpu4096 1 2 3 4",
                "cpu0 18446744073709551616 0 0 0", "cpu0\t1 2 3 4", "xcpu0 1 2 3 4",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                uint64_t w[10] = { 42 };
                if (pcpu_parse_stat_line(bad[i], w) != -EINVAL) {
                        fprintf(stderr, "accepted bad line \"%s\"\n", bad[i]);
                        fail();
                }
                assert_int_equal(w[0], 42); /* untouched */
        }
}

/* Overwrite in place (O_TRUNC): the sampler keeps the file open. */
static void write_in_place(const char *path, const char *data)
{
        int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
        size_t len = strlen(data);

        if (fd < 0)
                fprintf(stderr, "cannot open %s: %m\n", path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, len), (ssize_t) len);
        close(fd);
}

static char *slurp(const char *path)
{
        FILE *f = fopen(path, "re");
        char *buf = NULL;
        size_t len = 0;

        assert_non_null(f);
        assert_true(getdelim(&buf, &len, '\0', f) >= 0);
        fclose(f);
        return buf;
}

static void run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void run(const char *fmt, ...)
{
        char cmd[2048];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        assert_true(n > 0 && n < (int) sizeof(cmd));
        assert_int_equal(system(cmd), 0);
}

/* Apply an idle.N file ("cpu state time usage" lines) to the tree at sysroot. */
static void apply_idle(const char *sysroot, const char *idle_path)
{
        FILE *f = fopen(idle_path, "re");
        unsigned cpu, st;
        unsigned long long tm, us;

        assert_non_null(f);
        while (fscanf(f, "%u %u %llu %llu", &cpu, &st, &tm, &us) == 4) {
                char p[1024], v[32];
                snprintf(p, sizeof(p), "%s/devices/system/cpu/cpu%u/cpuidle/state%u/time", sysroot, cpu, st);
                snprintf(v, sizeof(v), "%llu\n", tm);
                write_in_place(p, v);
                snprintf(p, sizeof(p), "%s/devices/system/cpu/cpu%u/cpuidle/state%u/usage", sysroot, cpu, st);
                snprintf(v, sizeof(v), "%llu\n", us);
                write_in_place(p, v);
        }
        fclose(f);
}

struct env {
        char dir[64];
        char sysroot[128], procroot[128], stat[160];
        struct topology *t;
        nsec_t wall_ns;
};

static void env_setup(struct env *e, const char *fixture)
{
        char p[512], topo[64];
        _cleanup_free_ char *meta = NULL;
        long long wall;

        strcpy(e->dir, "/tmp/vmmpower-pcpu-XXXXXX");
        assert_non_null(mkdtemp(e->dir));
        snprintf(p, sizeof(p), "%s/procstat/%s/meta", TEST_DATA_DIR, fixture);
        meta = slurp(p);
        assert_int_equal(sscanf(meta, "topology %63s wall_ns %lld", topo, &wall), 2);
        e->wall_ns = wall;
        snprintf(e->sysroot, sizeof(e->sysroot), "%s/sys", e->dir);
        snprintf(e->procroot, sizeof(e->procroot), "%s/proc", e->dir);
        snprintf(e->stat, sizeof(e->stat), "%s/stat", e->procroot);
        /* Topology from the fixture itself; only the cpuidle counters the
         * sampler reads are copied, so that they can be rewritten. */
        snprintf(p, sizeof(p), "%s/topology/%s/sys", TEST_DATA_DIR, topo);
        assert_int_equal(topology_load(p, &e->t), 0);
        run("mkdir '%s' '%s' && cd '%s' && find . -path '*/cpuidle/state*/*' \\( -name time -o -name usage \\) "
            "-exec cp --parents -t '%s' {} +", e->sysroot, e->procroot, p, e->sysroot);
        run("touch '%s'", e->stat);
}

static void env_step(struct env *e, const char *fixture, int n)
{
        char p[512];
        _cleanup_free_ char *data = NULL;

        snprintf(p, sizeof(p), "%s/procstat/%s/stat.%d", TEST_DATA_DIR, fixture, n);
        data = slurp(p);
        write_in_place(e->stat, data);
        snprintf(p, sizeof(p), "%s/procstat/%s/idle.%d", TEST_DATA_DIR, fixture, n);
        apply_idle(e->sysroot, p);
}

static void env_teardown(struct env *e)
{
        topology_free(e->t);
        run("rm -rf '%s'", e->dir);
}

static void check_fixture(const char *fixture)
{
        struct env e;
        struct pcpu_stat *ps = NULL;
        const nsec_t t0 = 5 * NSEC_PER_SEC;
        char p[512];
        FILE *f;
        unsigned checked = 0;

        env_setup(&e, fixture);
        env_step(&e, fixture, 0);
        assert_int_equal(pcpu_stat_new(e.t, e.procroot, e.sysroot, &ps), 0);
        assert_int_equal(pcpu_stat_sample(ps, t0), 0);
        for (unsigned c = 0; c < e.t->n_cpus; c++) {
                assert_null(pcpu_stat_load(ps, c)); /* one sample only */
                assert_non_null(pcpu_stat_raw(ps, c));
        }
        env_step(&e, fixture, 1);
        assert_int_equal(pcpu_stat_sample(ps, t0 + e.wall_ns), 0);

        snprintf(p, sizeof(p), "%s/procstat/%s/expected.txt", TEST_DATA_DIR, fixture);
        f = fopen(p, "re");
        assert_non_null(f);
        for (;;) {
                unsigned cpu;
                double busy, steal;
                const struct pcpu_load *l;
                const struct pcpu_sample *s;

                if (fscanf(f, "%u %lf %lf", &cpu, &busy, &steal) != 3)
                        break;
                l = pcpu_stat_load(ps, cpu);
                s = pcpu_stat_raw(ps, cpu);
                assert_non_null(l);
                assert_non_null(s);
                if (fabs(l->busy_ratio - busy) > 1e-6 || fabs(l->steal_ratio - steal) > 1e-6) {
                        fprintf(stderr, "%s cpu%u: busy %.9f (want %.9f) steal %.9f (want %.9f)\n", fixture,
                                cpu, l->busy_ratio, busy, l->steal_ratio, steal);
                        fail();
                }
                for (unsigned k = 0; k < s->n_states; k++) {
                        double r;
                        assert_int_equal(fscanf(f, "%lf", &r), 1);
                        if (fabs(l->state_residency[k] - r) > 1e-6) {
                                fprintf(stderr, "%s cpu%u state%u: residency %.9f want %.9f\n", fixture, cpu, k,
                                        l->state_residency[k], r);
                                fail();
                        }
                }
                assert_int_equal(fscanf(f, " |"), 0);
                for (unsigned k = 0; k < s->n_states; k++) {
                        unsigned long long w;
                        assert_int_equal(fscanf(f, "%llu", &w), 1);
                        assert_int_equal(l->state_wakeups[k], w);
                }
                checked++;
        }
        fclose(f);
        assert_int_equal(checked, e.t->n_cpus);
        pcpu_stat_free(ps);
        env_teardown(&e);
}

static void test_fixtures(void **state)
{
        check_fixture("debian-2cpu-haltpoll");
        check_fixture("xeon-spr-2s");
}

static void test_raw_and_edge_cases(void **state)
{
        struct env e;
        struct pcpu_stat *ps = NULL;
        const struct pcpu_sample *s;
        const struct pcpu_load *l;
        long hz = sysconf(_SC_CLK_TCK);

        env_setup(&e, "xeon-spr-2s");
        env_step(&e, "xeon-spr-2s", 0);
        assert_int_equal(pcpu_stat_new(e.t, e.procroot, e.sysroot, &ps), 0);
        assert_int_equal(pcpu_stat_sample(ps, NSEC_PER_SEC), 0);
        /* cpu3 at t0: user 100003 nice 50 system 20021 irq 10 softirq 20 steal 0 */
        s = pcpu_stat_raw(ps, 3);
        assert_non_null(s);
        assert_true(s->busy_ns == (uint64_t) (100003 + 50 + 20021 + 10 + 20) * (uint64_t) (NSEC_PER_SEC / hz));
        assert_true(s->idle_ns == (uint64_t) (9000000 + 300) * (uint64_t) (NSEC_PER_SEC / hz));
        assert_int_equal(s->n_states, 4);
        assert_int_equal(s->state_time_us[2], 3000003);
        assert_int_equal(s->state_usage[3], 20000);

        /* time must advance */
        assert_int_equal(pcpu_stat_sample(ps, NSEC_PER_SEC), -EINVAL);

        /* an unparsable cpu line fails the whole sample and changes nothing */
        write_in_place(e.stat, "cpu  1 2 3 4\ncpu0 1 2 x 4\n");
        assert_int_equal(pcpu_stat_sample(ps, 2 * NSEC_PER_SEC), -EINVAL);
        assert_true(pcpu_stat_raw(ps, 3)->busy_ns == s->busy_ns);

        /* cpu5 vanishes (offline), cpu6 goes backwards: no load for them */
        {
                _cleanup_free_ char *data = NULL;
                char p[512], *line, *nl;
                struct strbuf sb;

                snprintf(p, sizeof(p), "%s/procstat/xeon-spr-2s/stat.1", TEST_DATA_DIR);
                data = slurp(p);
                strbuf_init(&sb);
                for (line = data; *line; line = nl + 1) {
                        nl = strchr(line, '\n');
                        assert_non_null(nl);
                        if (strncmp(line, "cpu5 ", 5) == 0)
                                continue;
                        if (strncmp(line, "cpu6 ", 5) == 0) {
                                strbuf_puts(&sb, "cpu6 1 0 1 1 0 0 0 0 0 0\n");
                                continue;
                        }
                        strbuf_append(&sb, line, (size_t) (nl - line + 1));
                }
                write_in_place(e.stat, sb.data);
                strbuf_free(&sb);
                snprintf(p, sizeof(p), "%s/procstat/xeon-spr-2s/idle.1", TEST_DATA_DIR);
                apply_idle(e.sysroot, p);
        }
        assert_int_equal(pcpu_stat_sample(ps, 2 * NSEC_PER_SEC), 0);
        assert_null(pcpu_stat_load(ps, 5));
        assert_null(pcpu_stat_raw(ps, 5));
        assert_null(pcpu_stat_load(ps, 6));
        l = pcpu_stat_load(ps, 7);
        assert_non_null(l);
        assert_true(fabs(l->busy_ratio - 0.29) < 1e-9); /* (3*7)+5+1+2 = 29 of 100 ticks */
        assert_null(pcpu_stat_load(ps, 32)); /* out of range */
        assert_null(pcpu_stat_raw(ps, 1000));

        /* residency overshoot (idle credited on exit) is clamped and normalized */
        env_step(&e, "xeon-spr-2s", 1); /* also: cpu5's line is back */
        {
                char p[512];
                snprintf(p, sizeof(p), "%s/devices/system/cpu/cpu7/cpuidle/state3/time", e.sysroot);
                write_in_place(p, "999999999\n");
        }
        assert_int_equal(pcpu_stat_sample(ps, 3 * NSEC_PER_SEC), 0);
        l = pcpu_stat_load(ps, 7);
        assert_non_null(l);
        {
                double sum = 0;
                for (unsigned k = 0; k < 4; k++) {
                        assert_true(l->state_residency[k] >= 0 && l->state_residency[k] <= 1);
                        sum += l->state_residency[k];
                }
                assert_true(sum <= 1 + 1e-9);
                assert_true(l->state_residency[3] > 0.99);
        }
        /* cpu5 came back with a line: raw again, but no load until two good samples */
        assert_non_null(pcpu_stat_raw(ps, 5));
        assert_null(pcpu_stat_load(ps, 5));

        pcpu_stat_free(ps);
        pcpu_stat_free(NULL);
        env_teardown(&e);
}

static void test_missing_stat(void **state)
{
        struct topology *t = NULL;
        struct pcpu_stat *ps = NULL;
        char root[512];

        snprintf(root, sizeof(root), "%s/topology/debian-2cpu-haltpoll/sys", TEST_DATA_DIR);
        assert_int_equal(topology_load(root, &t), 0);
        assert_int_equal(pcpu_stat_new(t, "/nonexistent-vmmpower", root, &ps), -ENOENT);
        assert_null(ps);
        topology_free(t);
}

/* 2 fds per CPU and state: a low RLIMIT_NOFILE is a clear -EMFILE, no leak. */
static void test_emfile(void **state)
{
        struct topology *t = NULL;
        struct pcpu_stat *ps = NULL;
        struct rlimit old, low;
        char root[512];
        int fd;

        snprintf(root, sizeof(root), "%s/topology/xeon-spr-2s/sys", TEST_DATA_DIR);
        assert_int_equal(topology_load(root, &t), 0);
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
        low = old;
        low.rlim_cur = 64; /* xeon-spr-2s needs 1 + 2 x 32 x 4 = 257 */
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
        assert_int_equal(pcpu_stat_new(t, "/proc", root, &ps), -EMFILE);
        assert_null(ps);
        /* every fd it opened was closed again: a new one gets a low number */
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0 && fd < 16);
        close(fd);
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
        assert_int_equal(pcpu_stat_new(t, "/proc", root, &ps), 0);
        pcpu_stat_free(ps);
        topology_free(t);
}

/* The live host: sanity of ratios while this thread spins on one CPU. */
static void test_real_host(void **state)
{
        struct topology *t = NULL;
        struct pcpu_stat *ps = NULL;
        nsec_t start, t0, cost = 0;
        volatile uint64_t x = 0;
        double max_busy = 0;
        const int rounds = 5;

        assert_int_equal(topology_load(NULL, &t), 0);
        assert_int_equal(pcpu_stat_new(t, NULL, NULL, &ps), 0);
        assert_int_equal(pcpu_stat_sample(ps, now_ns()), 0);
        for (int r = 0; r < rounds; r++) {
                start = now_ns();
                while (now_ns() - start < 150 * NSEC_PER_MSEC)
                        x++;
                usleep(50000);
                t0 = now_ns();
                assert_int_equal(pcpu_stat_sample(ps, t0), 0);
                cost += now_ns() - t0;
                for (unsigned c = 0; c < t->n_cpus; c++) {
                        const struct pcpu_load *l = pcpu_stat_load(ps, c);
                        double sum = 0;

                        if (!t->cpus[c].online)
                                continue;
                        assert_non_null(l);
                        assert_true(l->busy_ratio >= 0 && l->busy_ratio <= 1);
                        assert_true(l->steal_ratio >= 0 && l->steal_ratio <= l->busy_ratio + 1e-9);
                        for (unsigned k = 0; k < t->cpus[c].n_idle_states; k++) {
                                assert_true(l->state_residency[k] >= 0 && l->state_residency[k] <= 1);
                                sum += l->state_residency[k];
                        }
                        assert_true(sum <= 1 + 1e-6);
                        if (l->busy_ratio > max_busy)
                                max_busy = l->busy_ratio;
                }
        }
        /* we spun 75% of each period on some CPU */
        assert_true(max_busy > 0.3);
        fprintf(stderr, "pcpu_stat_sample on this host (%u CPUs): %.1f us per sample, max busy %.2f\n",
                t->n_cpus, (double) cost / rounds / 1000.0, max_busy);
        pcpu_stat_free(ps);
        topology_free(t);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_line),
                cmocka_unit_test(test_fixtures),
                cmocka_unit_test(test_raw_and_edge_cases),
                cmocka_unit_test(test_missing_stat),
                cmocka_unit_test(test_emfile),
                cmocka_unit_test(test_real_host),
        };

        log_set_max_level(LOG_LEVEL_ERR);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
