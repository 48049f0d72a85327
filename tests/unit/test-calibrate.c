/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vmmpower-calibrate against a synthetic host.
 *
 * The host: a fixture sysfs tree (tests/data/topology/xeon-spr-2s or
 * epyc-genoa-1s: cpufreq, cpuidle, PM QoS) copied to a temp dir, with
 * powercap zones added (class/powercap/intel-rapl:N "package-N", optionally
 * intel-rapl:N:0 "core" and intel-rapl:N:1 "dram").  Its energy counters are
 * driven by a *planted* model: the power of the state the tree's knob files
 * describe (the level each policy's scaling_max_freq selects, the deepest
 * enabled cpuidle state, PM QoS) and of the load, evaluated by
 * em_host_power(), times the time, with noise; the host's total is split
 * evenly over the package zones, the cores' part over the core zones; each
 * counter wraps after its max_energy_range_uj.
 *
 * Simulated runs (calibrate_run() with test ops): the clock is simulated,
 * the load is the asked duty, sleeping advances the counters.  Real runs
 * (the vmmpower-calibrate program): real busy-loop threads on this host's
 * CPUs 0-1, a real clock; the counters are advanced every 2 ms by a helper
 * thread here from the program's load threads' measured CPU time
 * (/proc/PID/task/TID/schedstat) and the knob files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "calibrate.h"
#include "energy_model.h"
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

static int sh_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh_status(const char *fmt, ...)
{
        char cmd[4096];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        return system(cmd);
}

static void write_file(const char *path, const char *s)
{
        FILE *f = fopen(path, "w");

        assert_non_null(f);
        fputs(s, f);
        assert_int_equal(fclose(f), 0);
}

/* ------------------------------------------------------------ the synthetic host */

struct host {
        char tmp[256], root[300], pristine[300], state[300];
        struct topology *topo;
        struct em_host *planted;
        struct calib_zones zones;
        unsigned n_pkg_zones;
        uint64_t range_uj;
        double acc_uj[CALIB_MAX_ZONES];
        double noise;            /* relative, uniform in [-noise, noise] per step */
        uint64_t rng;
        unsigned wraps;
        unsigned capped;         /* counter steps the planted power limit or turbo table capped */
        /* simulated load and clock */
        nsec_t now;
        uint16_t duty[VP_MAX_CPUS];
        uint64_t busy_ns[VP_MAX_CPUS];
        unsigned sleeps, interrupt_after; /* sleep_until returns -EINTR on that call (0: never) */
        /* scratch for em_host_power */
        double *work;
        uint8_t *vcpus, *fl;
        uint32_t *lat;
};

/* Temp dirs still to remove: a failed assertion skips host_teardown(); the group teardown removes them. */
static char leftover[16][256];

static void leftover_set(const char *dir, bool add)
{
        for (unsigned i = 0; i < ELEMENTSOF(leftover); i++)
                if (add ? !leftover[i][0] : strcmp(leftover[i], dir) == 0) {
                        snprintf(leftover[i], sizeof(leftover[i]), "%s", add ? dir : "");
                        return;
                }
}

static pid_t running_child; /* a vmmpower-calibrate a failed assertion left running */

static int remove_leftovers(void **state)
{
        if (running_child > 0) {
                kill(running_child, SIGKILL);
                waitpid(running_child, NULL, 0);
                running_child = 0;
        }
        for (unsigned i = 0; i < ELEMENTSOF(leftover); i++)
                if (leftover[i][0]) {
                        char cmd[300];
                        snprintf(cmd, sizeof(cmd), "rm -rf '%.255s'", leftover[i]);
                        if (system(cmd) != 0)
                                return -1;
                        leftover[i][0] = '\0';
                }
        return 0;
}

static double rnd(struct host *h)
{
        h->rng ^= h->rng << 13;
        h->rng ^= h->rng >> 7;
        h->rng ^= h->rng << 17;
        return (double) (h->rng >> 11) / (double) (1ull << 53);
}

/* A shipped model (config/models/NAME), or a frozen pre-calibration one ("v0:NAME": tests/data/models/NAME). */
static void load_model(const char *name, struct energy_model *m)
{
        char path[512];
        struct em_error err = { 0 };

        if (strncmp(name, "v0:", 3) == 0)
                snprintf(path, sizeof(path), "%s/models/%s", TEST_DATA_DIR, name + 3);
        else
                snprintf(path, sizeof(path), "%s/../../config/models/%s", TEST_DATA_DIR, name);
        if (energy_model_parse_file(path, m, &err) < 0)
                fail_msg("%s:%u: %s", err.file, err.line, err.message);
}

/* dies > 1: each package's zone split in one per die, "package-N-die-M" (as intel_rapl names them on a
 * multi-die package), intel-rapl:(N dies + M); no core zone, the dram zone below die 0. */
static void host_setup_dies(struct host *h, const char *tree, const struct energy_model *planted, bool core_zone,
                            uint64_t range_uj, unsigned dies)
{
        char p[512];

        memset(h, 0, sizeof(*h));
        strcpy(h->tmp, access("/dev/shm", W_OK) == 0 ? "/dev/shm/test-calibrate.XXXXXX" : "/tmp/test-calibrate.XXXXXX");
        assert_non_null(mkdtemp(h->tmp));
        leftover_set(h->tmp, true);
        snprintf(h->root, sizeof(h->root), "%s/sys", h->tmp);
        snprintf(h->pristine, sizeof(h->pristine), "%s/pristine", h->tmp);
        snprintf(h->state, sizeof(h->state), "%s/state", h->tmp);
        sh("cp -a '%s/topology/%s/sys' '%s'", TEST_DATA_DIR, tree, h->root);
        assert_int_equal(topology_load(h->root, &h->topo), 0);
        for (unsigned pk = 0; pk < h->topo->n_packages && dies > 1; pk++)
                for (unsigned d = 0; d < dies; d++) {
                        unsigned z = pk * dies + d;
                        char v[64];
                        snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:%u", h->root, z);
                        sh("mkdir -p '%s'", p);
                        snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:%u/name", h->root, z);
                        snprintf(v, sizeof(v), "package-%u-die-%u\n", pk, d);
                        write_file(p, v);
                        if (d > 0)
                                continue;
                        snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:%u/intel-rapl:%u:0", h->root, z, z);
                        sh("mkdir -p '%s'", p);
                        sh("ln -s 'intel-rapl:%u/intel-rapl:%u:0' '%s/class/powercap/intel-rapl:%u:0'", z, z, h->root, z);
                        snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:%u:0/name", h->root, z);
                        write_file(p, "dram\n");
                }
        for (unsigned pk = 0; pk < h->topo->n_packages && dies <= 1; pk++) {
                snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:%u", h->root, pk);
                sh("mkdir -p '%s'", p);
                snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:%u/name", h->root, pk);
                char v[64];
                snprintf(v, sizeof(v), "package-%u\n", pk);
                write_file(p, v);
                if (core_zone) {
                        snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:%u/intel-rapl:%u:0", h->root, pk, pk);
                        sh("mkdir -p '%s'", p);
                        /* sysfs has the subzone inside and a link beside it in class/powercap */
                        sh("ln -s 'intel-rapl:%u/intel-rapl:%u:0' '%s/class/powercap/intel-rapl:%u:0'", pk, pk, h->root, pk);
                        snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:%u:0/name", h->root, pk);
                        write_file(p, "core\n");
                }
                snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:%u/intel-rapl:%u:1", h->root, pk, pk);
                sh("mkdir -p '%s'", p);
                sh("ln -s 'intel-rapl:%u/intel-rapl:%u:1' '%s/class/powercap/intel-rapl:%u:1'", pk, pk, h->root, pk);
                snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:%u:1/name", h->root, pk);
                write_file(p, "dram\n");
        }
        /* counters start near the top of the range: the first wrap comes early */
        h->range_uj = range_uj;
        snprintf(p, sizeof(p), "%s/class/powercap", h->root);
        {
                DIR *d = opendir(p);
                struct dirent *de;
                assert_non_null(d);
                while ((de = readdir(d))) {
                        char f[1200], v[32];
                        if (de->d_name[0] == '.')
                                continue;
                        snprintf(f, sizeof(f), "%s/%s/max_energy_range_uj", p, de->d_name);
                        snprintf(v, sizeof(v), "%llu\n", (unsigned long long) range_uj);
                        write_file(f, v);
                        snprintf(f, sizeof(f), "%s/%s/energy_uj", p, de->d_name);
                        snprintf(v, sizeof(v), "%llu\n", (unsigned long long) (range_uj - range_uj / 7));
                        write_file(f, v);
                }
                closedir(d);
        }
        sh("cp -a '%s' '%s'", h->root, h->pristine);
        assert_int_equal(calib_zones_discover(h->root, &h->zones), 0);
        for (unsigned z = 0; z < h->zones.n; z++) {
                h->acc_uj[z] = (double) (range_uj - range_uj / 7);
                h->n_pkg_zones += h->zones.zone[z].kind == CALIB_ZONE_PACKAGE;
        }
        assert_int_equal(em_host_new(h->topo, planted, &h->planted), 0);
        h->work = calloc(h->topo->n_cpus, sizeof(double));
        h->vcpus = calloc(h->topo->n_cpus, 1);
        h->lat = calloc(h->topo->n_cpus, sizeof(uint32_t));
        h->fl = calloc(h->planted->n_fdoms, 1);
        h->rng = 0x9e3779b97f4a7c15ull;
        h->noise = 0.01;
}

static void host_setup(struct host *h, const char *tree, const struct energy_model *planted, bool core_zone,
                       uint64_t range_uj)
{
        host_setup_dies(h, tree, planted, core_zone, range_uj, 1);
}

static void host_teardown(struct host *h)
{
        em_host_free(h->planted);
        topology_free(h->topo);
        free(h->work);
        free(h->vcpus);
        free(h->lat);
        free(h->fl);
        power_driver_sysfs_set_io(NULL);
        sh("rm -rf '%s'", h->tmp);
        leftover_set(h->tmp, false);
}

static bool read_u32_rel(const struct host *h, const char *rel, uint32_t *v)
{
        char path[600], buf[64];

        snprintf(path, sizeof(path), "%s/%s", h->root, rel);
        if (read_small_file(path, buf, sizeof(buf)) < 0)
                return false;
        return parse_u32(buf, v) == 0;
}

/* The planted model's power for the state in the knob files and per-CPU busy fractions. */
static double host_power(struct host *h, const double *busy, struct em_breakdown *bd)
{
        const struct energy_model *m = &h->planted->model;
        const struct topology *t = h->topo;
        char rel[256], buf[64], path[600];

        memset(h->fl, 0, h->planted->n_fdoms);
        for (unsigned c = 0; c < t->n_cpus; c++) {
                const struct topo_cpu *tc = &t->cpus[c];
                unsigned level = m->n_levels - 1;
                uint32_t lat = EM_LATENCY_ANY, khz;

                if (tc->policy >= 0) {
                        snprintf(rel, sizeof(rel), CPU_REL "/cpufreq/policy%u/scaling_max_freq", t->policies[tc->policy].id);
                        assert_true(read_u32_rel(h, rel, &khz));
                        level = 0;
                        for (unsigned l = 0; l < m->n_levels; l++)
                                if (m->levels[l].freq_khz <= khz)
                                        level = l;
                }
                /* A deeper state disabled: the CPU's latency limit is the deepest enabled state's
                 * (as the planner's limits are); all enabled: no limit. */
                for (unsigned k = 0; k < tc->n_idle_states; k++) {
                        uint32_t dis;
                        snprintf(rel, sizeof(rel), CPU_REL "/cpu%u/cpuidle/state%u/disable", c, k);
                        assert_true(read_u32_rel(h, rel, &dis));
                        if (dis) {
                                lat = k > 0 ? tc->idle[k - 1].exit_latency_us : 0;
                                break;
                        }
                }
                snprintf(path, sizeof(path), "%s/" CPU_REL "/cpu%u/power/pm_qos_resume_latency_us", h->root, c);
                if (read_small_file(path, buf, sizeof(buf)) >= 0) {
                        uint32_t q;
                        if (strcmp(buf, "n/a") == 0)
                                lat = 0;
                        else if (parse_u32(buf, &q) == 0 && q > 0)
                                lat = MIN(lat, q);
                }
                h->lat[c] = lat;
                h->vcpus[c] = 0;
                h->work[c] = busy[c] * m->levels[level].capacity / EM_CAPACITY_SCALE;
                if (h->fl[h->planted->cpu_fdom[c]] < level)
                        h->fl[h->planted->cpu_fdom[c]] = (uint8_t) level;
        }
        struct em_load l = { .cpu_work = h->work, .cpu_vcpus = h->vcpus, .cpu_max_latency_us = h->lat, .fdom_level = h->fl };
        return em_host_power(h->planted, &l, bd);
}

static void write_counter(const struct host *h, unsigned z, uint64_t v)
{
        char path[600], tmp[640], s[32];

        snprintf(path, sizeof(path), "%s/%s/energy_uj", h->root, h->zones.zone[z].rel);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        snprintf(s, sizeof(s), "%llu\n", (unsigned long long) v);
        write_file(tmp, s);
        assert_int_equal(rename(tmp, path), 0);
}

/* Advance the counters by dt at the given busy fractions. */
static void host_advance(struct host *h, nsec_t dt, const double *busy)
{
        struct em_breakdown bd;
        double noise = (host_power(h, busy, &bd), 1.0 + h->noise * (2.0 * rnd(h) - 1.0));
        double cores = (bd.active_mw + bd.idle_mw) * noise;
        unsigned n_core_zones = 0;
        /* what RAPL sees: the packages' DC power (cores, domains, wake-ups), not the platform or PSU loss */
        double p = (bd.active_mw + bd.idle_mw + bd.domain_mw + bd.wake_mw) * noise;

        if (bd.capped_pkgs)
                h->capped++;
        for (unsigned z = 0; z < h->zones.n; z++)
                n_core_zones += h->zones.zone[z].kind == CALIB_ZONE_CORE;
        for (unsigned z = 0; z < h->zones.n; z++) {
                double mw;
                switch (h->zones.zone[z].kind) {
                case CALIB_ZONE_PACKAGE:
                        mw = p / h->n_pkg_zones;
                        break;
                case CALIB_ZONE_CORE:
                        mw = cores / n_core_zones;
                        break;
                default:
                        mw = 4000.0; /* dram */
                        break;
                }
                /* mW x ns = 1e-6 µJ */
                h->acc_uj[z] += mw * (double) dt * 1e-6;
                if (h->acc_uj[z] >= (double) h->range_uj) {
                        h->acc_uj[z] -= (double) h->range_uj;
                        h->wraps++;
                }
                write_counter(h, z, (uint64_t) h->acc_uj[z]);
        }
}

/* ---- simulated ops ---- */

static int sim_read_energy(void *ud, uint64_t *ret)
{
        struct host *h = ud;
        return calib_zones_read(h->root, &h->zones, ret);
}

static int sim_load_start(void *ud, const uint16_t *duty, unsigned n, nsec_t period)
{
        struct host *h = ud;

        assert_true(n <= VP_MAX_CPUS);
        memcpy(h->duty, duty, n * sizeof(*duty));
        memset(h->busy_ns, 0, sizeof(h->busy_ns));
        return 0;
}

static int sim_load_busy_ns(void *ud, uint64_t *ret, unsigned n)
{
        struct host *h = ud;
        memcpy(ret, h->busy_ns, n * sizeof(*ret));
        return 0;
}

static void sim_load_stop(void *ud)
{
        struct host *h = ud;
        memset(h->duty, 0, sizeof(h->duty));
}

static nsec_t sim_now(void *ud)
{
        return ((struct host *) ud)->now;
}

static int sim_sleep_until(void *ud, nsec_t deadline)
{
        struct host *h = ud;
        double busy[VP_MAX_CPUS];
        nsec_t dt = deadline - h->now;

        if (h->interrupt_after && ++h->sleeps >= h->interrupt_after)
                return -EINTR;
        if (dt <= 0)
                return 0;
        for (unsigned c = 0; c < h->topo->n_cpus; c++) {
                busy[c] = h->duty[c] / 1000.0;
                h->busy_ns[c] += (uint64_t) (dt * h->duty[c] / 1000);
        }
        host_advance(h, dt, busy);
        h->now = deadline;
        return 0;
}

static const struct calib_ops sim_ops = {
        .read_energy = sim_read_energy,
        .load_start = sim_load_start,
        .load_busy_ns = sim_load_busy_ns,
        .load_stop = sim_load_stop,
        .now = sim_now,
        .sleep_until = sim_sleep_until,
};

static int run_sim(struct host *h, const struct energy_model *base, struct energy_model *fitted,
                   struct calib_report *rep, struct journal **jret)
{
        struct calib_config cc = {
                .sysfs_root = h->root, .topo = h->topo, .base = base, .zones = h->zones,
                .dwell_ns = 4 * NSEC_PER_SEC, .settle_ns = NSEC_PER_SEC, .sample_ns = 100 * NSEC_PER_MSEC,
                .period_ns = 100 * NSEC_PER_MSEC, .name = "fitted", .ops = &sim_ops, .ops_userdata = h,
        };
        struct journal *j;
        int r;

        assert_int_equal(journal_open(h->state, &j), 0);
        journal_set_sync(j, false);
        cc.journal = j;
        r = calibrate_run(&cc, fitted, rep);
        if (jret)
                *jret = j;
        else
                journal_free(j);
        return r;
}

static void assert_restored_x(const struct host *h, const char *exclude)
{
        char path[600];

        /* every knob as it was (the counters under class/powercap move, by design) */
        sh("diff -r -x powercap %s '%s' '%s'", exclude, h->pristine, h->root);
        snprintf(path, sizeof(path), "%s/journal", h->state);
        assert_int_equal(access(path, F_OK), -1);
}

static void assert_restored(const struct host *h)
{
        assert_restored_x(h, "");
}

/* A base model: the planted structure with every watt wrong, except the two the counters cannot see (gauge). */
static void wrong_base(const struct energy_model *planted, struct energy_model *base, bool keep_gauge)
{
        *base = *planted;
        for (unsigned l = 0; l < base->n_levels; l++)
                base->levels[l].active_mw = base->levels[l].active_mw * 3 / 2 + 300;
        for (unsigned i = 0; i < base->n_idle; i++)
                base->idle[i].power_mw = base->idle[i].power_mw * 3 / 2 + 100;
        for (int d = 0; d < _EM_DOMAIN_MAX; d++) {
                base->domain[d].awake_mw = base->domain[d].awake_mw * 7 / 10;
                base->domain[d].quiet_mw = base->domain[d].quiet_mw * 6 / 10;
                base->domain[d].asleep_mw = base->domain[d].asleep_mw * 5 / 10;
        }
        if (keep_gauge) {
                base->idle[base->n_idle - 1].power_mw = planted->idle[planted->n_idle - 1].power_mw;
                base->domain[EM_DOMAIN_LLC].asleep_mw = planted->domain[EM_DOMAIN_LLC].asleep_mw;
        }
        assert_int_equal(energy_model_validate(base, NULL), 0);
}

/* Every watt of the fitted model within pct of the planted one; prints the table. */
static void assert_params_within(const struct energy_model *planted, const struct energy_model *fit, double pct)
{
        const uint32_t *pp[64], *pf[64];
        const char *what[64];
        unsigned n = 0;
        bool ok = true;

        for (unsigned l = 0; l < planted->n_levels; l++) {
                pp[n] = &planted->levels[l].active_mw;
                pf[n] = &fit->levels[l].active_mw;
                what[n++] = "ActivePowerMW";
        }
        for (unsigned i = 0; i < planted->n_idle; i++) {
                pp[n] = &planted->idle[i].power_mw;
                pf[n] = &fit->idle[i].power_mw;
                what[n++] = planted->idle[i].name;
        }
        for (int d = 0; d < _EM_DOMAIN_MAX; d++) {
                if (!planted->domain[d].present)
                        continue;
                pp[n] = &planted->domain[d].awake_mw;
                pf[n] = &fit->domain[d].awake_mw;
                what[n++] = d == EM_DOMAIN_LLC ? "llc awake" : "package awake";
                pp[n] = &planted->domain[d].quiet_mw;
                pf[n] = &fit->domain[d].quiet_mw;
                what[n++] = d == EM_DOMAIN_LLC ? "llc quiet" : "package quiet";
                pp[n] = &planted->domain[d].asleep_mw;
                pf[n] = &fit->domain[d].asleep_mw;
                what[n++] = d == EM_DOMAIN_LLC ? "llc asleep" : "package asleep";
        }
        for (unsigned k = 0; k < n; k++) {
                double e = *pp[k] ? ((double) *pf[k] - *pp[k]) / *pp[k] * 100.0 : (double) *pf[k];
                bool good = fabs(e) <= pct;
                printf("  %-16s planted %7u mW  fitted %7u mW  %+6.2f%%%s\n", what[k], *pp[k], *pf[k], e,
                       good ? "" : "  <-- off");
                ok &= good;
        }
        assert_true(ok);
}

/* What RAPL cannot see or the fit does not touch: the written model has the base model's values. */
static void assert_base_keys_kept(const struct energy_model *base, const struct energy_model *fit)
{
        assert_int_equal(fit->platform_mw, base->platform_mw);
        assert_int_equal(fit->platform_busy_mw, base->platform_busy_mw);
        assert_int_equal(fit->psu_efficiency_permille, base->psu_efficiency_permille);
        assert_int_equal(fit->package_power_limit_mw, base->package_power_limit_mw);
        for (unsigned l = 0; l < base->n_levels; l++)
                assert_int_equal(fit->levels[l].max_active_cores, base->levels[l].max_active_cores);
        for (unsigned i = 0; i < base->n_idle; i++)
                assert_int_equal(fit->idle[i].wake_energy_uj, base->idle[i].wake_energy_uj);
        for (int d = 0; d < _EM_DOMAIN_MAX; d++)
                assert_int_equal(fit->domain[d].wake_energy_uj, base->domain[d].wake_energy_uj);
}

/* ------------------------------------------------------------ simulated runs */

static void recover_xeon(const char *model)
{
        struct energy_model planted, base, fitted;
        struct calib_report *rep = calloc(1, sizeof(*rep));
        struct host h;
        int r;

        printf("planted: %s\n", model);
        load_model(model, &planted);
        wrong_base(&planted, &base, true);
        /* 20 J counters: a package zone wraps every 3..10 samples of 100 ms */
        host_setup(&h, "xeon-spr-2s", &planted, false, 20000000);
        r = run_sim(&h, &base, &fitted, rep, NULL);
        if (r < 0)
                fail_msg("calibrate_run: %d %s", r, rep->error);
        calib_report_print(rep, stdout);
        printf("counter wraps: %u; counter steps capped by the planted limits: %u\n", h.wraps, h.capped);
        /* the same planted idle power at both ends: only the 1% noise between them */
        assert_true(fabs(rep->idle_drift_pct) < 1.0);
        assert_true(h.wraps >= 20);
        /* the points the plan runs stay below the planted turbo table and power limit */
        assert_int_equal(h.capped, 0);
        assert_int_equal(rep->capped, 0);
        assert_params_within(&planted, &fitted, 5.0);
        assert_base_keys_kept(&base, &fitted);
        assert_string_equal(fitted.name, "fitted");
        /* the file it writes is one the daemon's parser takes, and reads back as the same model */
        {
                char *text = NULL;
                size_t len = 0;
                FILE *f = open_memstream(&text, &len);
                struct energy_model back;
                struct em_error err = { 0 };

                assert_non_null(f);
                calib_model_write(&fitted, rep, "synthetic-xeon", f);
                assert_int_equal(fclose(f), 0);
                if (energy_model_parse_string(text, "fitted.model", &back, &err) < 0)
                        fail_msg("%s:%u: %s\n%s", err.file, err.line, err.message, text);
                char *t1 = NULL, *t2 = NULL;
                size_t l1 = 0, l2 = 0;
                FILE *f1 = open_memstream(&t1, &l1), *f2 = open_memstream(&t2, &l2);
                energy_model_write(&back, f1);
                energy_model_write(&fitted, f2);
                fclose(f1);
                fclose(f2);
                assert_string_equal(t1, t2);
                /* and it fits the host, as the daemon's load_energy_model() needs */
                struct em_host *eh = NULL;
                assert_int_equal(em_host_new(h.topo, &back, &eh), 0);
                em_host_free(eh);
                free(t1);
                free(t2);
                assert_non_null(strstr(text, "# Not determined by the counters (base model's values): "
                                             "IdleState C6 PowerMW."));
                free(text);
        }
        assert_true(rep->restore.restored > 0);
        assert_restored(&h);
        host_teardown(&h);
        free(rep);
}

static void test_recover_xeon(void **state)
{
        recover_xeon("xeon-spr-2s.model");
}

static void test_recover_xeon_v0(void **state)
{
        recover_xeon("v0:xeon-spr-2s-v0.model");
}

static void recover_genoa_core_zone(const char *model)
{
        struct energy_model planted, base, fitted;
        struct calib_report *rep = calloc(1, sizeof(*rep));
        struct host h;
        int r;

        printf("planted: %s\n", model);
        load_model(model, &planted);
        /* the core zone gives the deepest state: the base's value is wrong and not used */
        wrong_base(&planted, &base, true);
        base.idle[base.n_idle - 1].power_mw = planted.idle[planted.n_idle - 1].power_mw * 5;
        assert_int_equal(energy_model_validate(&base, NULL), 0);
        host_setup(&h, "epyc-genoa-1s", &planted, true, 30000000);
        r = run_sim(&h, &base, &fitted, rep, NULL);
        if (r < 0)
                fail_msg("calibrate_run: %d %s", r, rep->error);
        calib_report_print(rep, stdout);
        printf("counter steps capped by the planted limits: %u\n", h.capped);
        assert_true(h.wraps > 0);
        assert_int_equal(h.capped, 0);
        assert_int_equal(rep->capped, 0);
        assert_params_within(&planted, &fitted, 5.0);
        assert_base_keys_kept(&base, &fitted);
        for (unsigned j = 0; j < rep->n_params; j++)
                if (strstr(rep->params[j].name, "IdleState C2"))
                        assert_int_equal(rep->params[j].source, CALIB_CORE_ZONE);
        assert_restored(&h);
        host_teardown(&h);
        free(rep);
}

static void test_recover_genoa_core_zone(void **state)
{
        recover_genoa_core_zone("epyc-genoa.model");
}

static void test_recover_genoa_core_zone_v0(void **state)
{
        recover_genoa_core_zone("v0:epyc-genoa-v0.model");
}

/* The model's power of random loads (wake-ups, latency limits, levels, SMT) under two models. */
static double max_power_gap_pct(const struct topology *t, const struct energy_model *a, const struct energy_model *b)
{
        struct em_host *ha, *hb;
        uint64_t rng = 12345;
        double worst = 0.0;

        assert_int_equal(em_host_new(t, a, &ha), 0);
        assert_int_equal(em_host_new(t, b, &hb), 0);
        double *work = calloc(t->n_cpus, sizeof(double));
        uint8_t *vc = calloc(t->n_cpus, 1), *fl = calloc(ha->n_fdoms, 1);
        uint32_t *lat = calloc(t->n_cpus, sizeof(uint32_t));
        for (int it = 0; it < 200; it++) {
                for (unsigned c = 0; c < t->n_cpus; c++) {
                        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                        unsigned x = (unsigned) (rng >> 33);
                        bool used = x % 3 == 0;
                        work[c] = used ? (x % 1000) / 1000.0 * 0.6 : 0.0;
                        vc[c] = used ? (uint8_t) (1 + x % 4) : 0;
                        lat[c] = x % 5 == 0 ? a->idle[x % a->n_idle].exit_latency_us : EM_LATENCY_ANY;
                }
                for (unsigned f = 0; f < ha->n_fdoms; f++)
                        fl[f] = (uint8_t) ((f * 7 + (unsigned) it) % a->n_levels);
                struct em_load l = { .cpu_work = work, .cpu_vcpus = vc, .cpu_max_latency_us = lat, .fdom_level = fl };
                double pa = em_host_power(ha, &l, NULL), pb = em_host_power(hb, &l, NULL);
                worst = MAX(worst, fabs(pb - pa) / pa * 100.0);
        }
        free(work);
        free(vc);
        free(fl);
        free(lat);
        em_host_free(ha);
        em_host_free(hb);
        return worst;
}

static void test_gauge(void **state)
{
        struct energy_model planted, base, fitted;
        struct calib_report *rep = calloc(1, sizeof(*rep));
        struct host h;
        double gap;
        int r;

        /* No core zone and a base whose deepest-state power is 10x too high: the counters cannot tell. */
        load_model("xeon-spr-2s.model", &planted);
        wrong_base(&planted, &base, false);
        base.idle[base.n_idle - 1].power_mw = planted.idle[planted.n_idle - 1].power_mw * 10;
        assert_int_equal(energy_model_validate(&base, NULL), 0);
        host_setup(&h, "xeon-spr-2s", &planted, false, 20000000);
        r = run_sim(&h, &base, &fitted, rep, NULL);
        if (r < 0)
                fail_msg("calibrate_run: %d %s", r, rep->error);
        /* The deepest state is the base's (said so in the report)... */
        assert_int_equal(fitted.idle[fitted.n_idle - 1].power_mw, base.idle[base.n_idle - 1].power_mw);
        for (unsigned j = 0; j < rep->n_params; j++)
                if (strstr(rep->params[j].name, "IdleState C6"))
                        assert_int_equal(rep->params[j].source, CALIB_BASE);
        /* ...every per-core watt moved by the same amount, the package's by N_cores times it... */
        int32_t d = (int32_t) fitted.idle[fitted.n_idle - 1].power_mw - (int32_t) planted.idle[planted.n_idle - 1].power_mw;
        printf("gauge shift %d mW per core; top level %u vs %u; package asleep %u vs %u\n", d,
               fitted.levels[fitted.n_levels - 1].active_mw, planted.levels[planted.n_levels - 1].active_mw,
               fitted.domain[EM_DOMAIN_PACKAGE].asleep_mw, planted.domain[EM_DOMAIN_PACKAGE].asleep_mw);
        assert_true(fabs((double) fitted.levels[fitted.n_levels - 1].active_mw -
                         planted.levels[planted.n_levels - 1].active_mw - d) < 0.05 * planted.levels[planted.n_levels - 1].active_mw);
        /* ...so the modelled power of any load is the planted one. */
        gap = max_power_gap_pct(h.topo, &planted, &fitted);
        printf("largest gap in modelled power over 200 random loads: %.2f%%\n", gap);
        assert_true(gap <= 5.0);
        /* And a deliberately wrong model is seen as such by the same check. */
        assert_true(max_power_gap_pct(h.topo, &planted, &base) > 5.0);
        assert_restored(&h);
        host_teardown(&h);
        free(rep);
}

/* ---- a failed knob write ---- */

static const char *fail_path_suffix;
static unsigned fail_writes;

static int failing_write(void *ud, const char *path, const char *data, size_t len)
{
        size_t lp = strlen(path), ls = strlen(fail_path_suffix);

        if (lp >= ls && strcmp(path + lp - ls, fail_path_suffix) == 0 && strncmp(data, "800000", 6) != 0) {
                fail_writes++;
                return -EIO;
        }
        return power_sysfs_default_write(ud, path, data, len);
}

static void test_failed_knob_write(void **state)
{
        struct energy_model planted, fitted;
        struct calib_report *rep = calloc(1, sizeof(*rep));
        struct power_sysfs_io io = { power_sysfs_default_read, failing_write, NULL };
        struct host h;
        int r;

        load_model("xeon-spr-2s.model", &planted);
        host_setup(&h, "xeon-spr-2s", &planted, false, 20000000);
        /* policy 9's floor cannot be raised (its restore, back to 800000, is let through) */
        fail_path_suffix = CPU_REL "/cpufreq/policy9/scaling_min_freq";
        fail_writes = 0;
        power_driver_sysfs_set_io(&io);
        r = run_sim(&h, &planted, &fitted, rep, NULL);
        power_driver_sysfs_set_io(NULL);
        printf("error: %s\nrestored %u knobs\n", rep->error, rep->restore.restored);
        assert_int_equal(r, -EIO);
        assert_int_equal(fail_writes, 1);
        assert_non_null(strstr(rep->error, "policy9/scaling_min_freq"));
        assert_non_null(strstr(rep->error, "Input/output error"));
        /* policies 0..8 had their floors raised before: all back */
        assert_true(rep->restore.restored >= 9);
        assert_int_equal(rep->restore.failed, 0);
        assert_restored(&h);
        host_teardown(&h);
        free(rep);
}

static void test_interrupted(void **state)
{
        struct energy_model planted, fitted;
        struct calib_report *rep = calloc(1, sizeof(*rep));
        struct host h;
        int r;

        load_model("epyc-genoa.model", &planted);
        host_setup(&h, "epyc-genoa-1s", &planted, false, 30000000);
        h.interrupt_after = 300; /* a signal in the middle of the points (limits and levels written) */
        r = run_sim(&h, &planted, &fitted, rep, NULL);
        printf("error: %s\nrestored %u knobs\n", rep->error, rep->restore.restored);
        assert_int_equal(r, -EINTR);
        assert_non_null(strstr(rep->error, "interrupted at point"));
        assert_true(rep->restore.restored > 0);
        assert_restored(&h);
        host_teardown(&h);
        free(rep);
}

static void test_unreadable_counters(void **state)
{
        struct energy_model planted, fitted;
        struct calib_report *rep = calloc(1, sizeof(*rep));
        struct host h;
        char p[600];
        int r;

        /* a counter that cannot be read (EACCES for non-root on current kernels; here: gone) */
        load_model("xeon-spr-2s.model", &planted);
        host_setup(&h, "xeon-spr-2s", &planted, false, 20000000);
        snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:1/energy_uj", h.root);
        assert_int_equal(unlink(p), 0);
        snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:1/energy_uj", h.pristine);
        assert_int_equal(unlink(p), 0);
        r = run_sim(&h, &planted, &fitted, rep, NULL);
        printf("error: %s\n", rep->error);
        assert_int_equal(r, -ENOENT);
        assert_non_null(strstr(rep->error, "reading the energy counters failed"));
        /* refused before touching anything */
        assert_int_equal(rep->restore.restored, 0);
        sh("diff -r '%s' '%s'", h.pristine, h.root);
        host_teardown(&h);
        free(rep);
}

static void test_zones(void **state)
{
        struct energy_model planted;
        struct calib_zones z;
        struct host h;
        char p[600];

        assert_int_equal(calib_counter_delta(100, 250, 1000), 150);
        assert_int_equal(calib_counter_delta(900, 50, 1000), 150);
        load_model("xeon-spr-2s.model", &planted);
        host_setup(&h, "xeon-spr-2s", &planted, true, 1000000);
        assert_int_equal(calib_zones_discover(h.root, &z), 0);
        assert_int_equal(z.n, 6);
        assert_string_equal(z.zone[0].rel, "class/powercap/intel-rapl:0");
        assert_int_equal(z.zone[0].kind, CALIB_ZONE_PACKAGE);
        assert_int_equal(z.zone[1].kind, CALIB_ZONE_CORE);
        assert_int_equal(z.zone[2].kind, CALIB_ZONE_DRAM);
        assert_int_equal(z.zone[0].max_energy_range_uj, 1000000);
        /* an MMIO duplicate of package 0 is not counted twice */
        snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl-mmio:0", h.root);
        sh("cp -a '%s/class/powercap/intel-rapl:0' '%s'", h.root, p);
        assert_int_equal(calib_zones_discover(h.root, &z), 0);
        assert_int_equal(z.n, 6);
        /* no package zone (psys only, as on a client without package domains) */
        sh("rm -rf '%s' && echo psys >'%s/class/powercap/intel-rapl:0/name' && echo psys >'%s/class/powercap/intel-rapl:1/name'",
           p, h.root, h.root);
        assert_int_equal(calib_zones_discover(h.root, &z), -ENODATA);
        /* no powercap at all */
        sh("rm -rf '%s/class/powercap'", h.root);
        assert_int_equal(calib_zones_discover(h.root, &z), -ENOENT);
        host_teardown(&h);
}

/* ---- points at the package power limit, the most levels, multi-die zones, the model's name ---- */

/*
 * A base whose PackagePowerLimitMW is below what every point draws (here: the lowest the model
 * accepts, the base's package awake power and one core at its slowest level, under the planted
 * host's idle package power): every point is at the limit and left out.  The fit had no row and no
 * free parameter, "succeeded" (residuals rms -nan%) and wrote the base model as if fitted.
 */
static void all_capped_base(const struct energy_model *planted, struct energy_model *base)
{
        wrong_base(planted, base, true);
        base->package_power_limit_mw = energy_model_min_power_limit(base);
        assert_int_equal(energy_model_validate(base, NULL), 0);
}

static void test_all_capped(void **state)
{
        struct energy_model planted, base, fitted;
        struct calib_report *rep = calloc(1, sizeof(*rep));
        struct host h;
        int r;

        load_model("xeon-spr-2s.model", &planted);
        all_capped_base(&planted, &base);
        host_setup(&h, "xeon-spr-2s", &planted, false, 20000000);
        memset(&fitted, 0xa5, sizeof(fitted));
        r = run_sim(&h, &base, &fitted, rep, NULL);
        printf("error: %s (%u points capped)\n", rep->error, rep->capped);
        assert_int_equal(r, -EDOM);
        assert_true(rep->capped > 0);
        assert_non_null(strstr(rep->error, "points reached 97% of the package power limit"));
        assert_non_null(strstr(rep->error, ": 0 points cannot determine"));
        assert_int_equal(((unsigned char *) &fitted)[0], 0xa5); /* nothing written */
        assert_restored(&h);
        host_teardown(&h);
        free(rep);
}

/* A planted model of the xeon-spr-2s watts with n levels spread over the fixture's 0.8..3.8 GHz. */
static void many_levels(struct energy_model *m, unsigned n)
{
        load_model("xeon-spr-2s.model", m);
        m->n_levels = n;
        for (unsigned l = 0; l < n; l++) {
                uint32_t f = 3800000 - (n - 1 - l) * 90000;
                m->levels[l] = (struct em_perf_level) {
                        .freq_khz = f,
                        .capacity = (uint32_t) (((uint64_t) f * EM_CAPACITY_SCALE + 1900000) / 3800000),
                        .active_mw = 1200 + 200 * l,
                };
        }
        assert_int_equal(energy_model_validate(m, NULL), 0);
}

/* EM_MAX_LEVELS (32) levels: 3 points a level and the others, more than the 96 points there was room for. */
static void test_max_levels(void **state)
{
        struct energy_model planted, base, fitted;
        struct calib_report *rep = calloc(1, sizeof(*rep));
        struct host h;
        int r;

        many_levels(&planted, EM_MAX_LEVELS);
        wrong_base(&planted, &base, true);
        host_setup(&h, "xeon-spr-2s", &planted, false, 20000000);
        r = run_sim(&h, &base, &fitted, rep, NULL);
        if (r < 0)
                fail_msg("calibrate_run: %d %s", r, rep->error);
        printf("%u points, %u parameters, residuals rms %.2f%%\n", rep->n_points, rep->n_params, rep->rms_residual_pct);
        assert_true(rep->n_points > 96 && rep->n_points <= CALIB_MAX_POINTS);
        assert_int_equal(rep->capped, 0);
        assert_params_within(&planted, &fitted, 5.0);
        assert_restored(&h);
        host_teardown(&h);
        free(rep);
}

/*
 * A multi-die package: intel_rapl names each die's zone "package-N-die-M".  They are package zones
 * (calib_zones_discover() found none: -ENODATA), and a package's power is the sum of its dies'
 * (the power limit is per package): with the limit of test_all_capped every point is capped, though
 * no single die zone reaches it.
 */
static void test_die_zones(void **state)
{
        struct energy_model planted, base, fitted;
        struct calib_report *rep = calloc(1, sizeof(*rep));
        struct calib_zones z;
        struct host h;
        char p[600];
        int r;

        load_model("xeon-spr-2s.model", &planted);
        host_setup_dies(&h, "xeon-spr-2s", &planted, false, 20000000, 2);
        assert_int_equal(calib_zones_discover(h.root, &z), 0);
        assert_int_equal(h.n_pkg_zones, 4);
        for (unsigned i = 0; i < z.n; i++) {
                printf("%s %s %s package %d\n", z.zone[i].rel, z.zone[i].name,
                       calib_zone_kind_to_string(z.zone[i].kind), z.zone[i].package);
                if (z.zone[i].kind == CALIB_ZONE_PACKAGE)
                        assert_int_equal(z.zone[i].package, (int) (z.zone[i].rel[strlen(z.zone[i].rel) - 1] - '0') / 2);
                else
                        assert_int_equal(z.zone[i].package, -1);
        }
        /* names that are not the driver's: not package zones */
        snprintf(p, sizeof(p), "%s/class/powercap/intel-rapl:3/name", h.root);
        static const char *const odd[] = { "package-1-die-\n", "package--die-1\n", "package-1-dye-1\n", "package-x\n" };
        for (unsigned i = 0; i < ELEMENTSOF(odd); i++) {
                write_file(p, odd[i]);
                assert_int_equal(calib_zones_discover(h.root, &z), 0);
                for (unsigned k = 0; k < z.n; k++)
                        if (strcmp(z.zone[k].rel, "class/powercap/intel-rapl:3") == 0)
                                assert_int_equal(z.zone[k].kind, CALIB_ZONE_OTHER);
        }
        write_file(p, "package-1-die-1\n");

        all_capped_base(&planted, &base);
        r = run_sim(&h, &base, &fitted, rep, NULL);
        printf("error: %s\n", rep->error);
        assert_int_equal(r, -EDOM);
        assert_non_null(strstr(rep->error, "points reached 97% of the package power limit"));
        assert_restored(&h);
        host_teardown(&h);
        free(rep);
}

/*
 * What the run is given is checked before any knob is touched: the fitted model's name (--name
 * 'rack 12 (fitted)' gave a file the parser refuses) and the base model's levels against the host.
 */
static void test_refused_before_measuring(void **state)
{
        struct energy_model planted, base, fitted;
        struct calib_report *rep = calloc(1, sizeof(*rep));
        struct calib_config cc;
        struct journal *j;
        struct host h;
        const char *bd = getenv("VMMPOWER_BUILD_DIR");
        char cmd[1200];
        int r;

        load_model("xeon-spr-2s.model", &planted);
        host_setup(&h, "xeon-spr-2s", &planted, false, 20000000);
        assert_int_equal(journal_open(h.state, &j), 0);
        cc = (struct calib_config) {
                .sysfs_root = h.root, .topo = h.topo, .base = &planted, .zones = h.zones, .journal = j,
                .dwell_ns = NSEC_PER_SEC, .settle_ns = 0, .sample_ns = NSEC_PER_SEC, .period_ns = 100 * NSEC_PER_MSEC,
                .name = "rack 12 (fitted)", .ops = &sim_ops, .ops_userdata = &h,
        };
        r = calibrate_run(&cc, &fitted, rep);
        printf("error: %s\n", rep->error);
        assert_int_equal(r, -EINVAL);
        assert_non_null(strstr(rep->error, "invalid model name 'rack 12 (fitted)'"));
        assert_int_equal(h.now, 0); /* nothing measured */
        cc.name = "";
        assert_int_equal(calibrate_run(&cc, &fitted, rep), -EINVAL);

        /* a base model of another host type: the Genoa model's 1.5..2.4 GHz on this 0.8..3.8 GHz host */
        load_model("epyc-genoa.model", &base);
        cc.name = "fitted";
        cc.base = &base;
        r = calibrate_run(&cc, &fitted, rep);
        printf("error: %s\n", rep->error);
        assert_int_equal(r, -ERANGE);
        assert_non_null(strstr(rep->error, "the base model does not fit this host: model epyc-genoa: top PerfLevel "
                                           "(2400000 kHz) below this host's cpufreq range 800000..3800000 kHz"));
        assert_int_equal(h.now, 0);
        journal_free(j);
        sh("diff -r '%s' '%s'", h.pristine, h.root);

        /* the program: a usage error, before the configuration is read */
        if (bd) {
                snprintf(cmd, sizeof(cmd), "'%s/vmmpower-calibrate' -c '%s/nonexistent.conf' --sysfs-root '%s' "
                         "--state-dir '%s' --name 'rack 12 (fitted)' 2>/dev/null", bd, h.tmp, h.root, h.state);
                int st = sh_status("%s", cmd);
                assert_true(WIFEXITED(st));
                assert_int_equal(WEXITSTATUS(st), 2);
        }
        host_teardown(&h);
        free(rep);
}

/* ------------------------------------------------------------ the real program */

struct driver {
        struct host *h;
        pid_t pid;
        atomic_bool quit;
        pthread_t thread;
        unsigned steps, load_seen;
};

/* The child's "vpcal-load" threads' CPU time since the last call, per CPU, as a fraction of dt. */
#define MAX_TIDS 256
struct tid_run {
        unsigned tid;
        uint64_t run_ns;
};

static void child_busy(struct driver *d, struct tid_run *seen, unsigned *n_seen, double *busy, nsec_t dt)
{
        char dir[64], path[128], buf[1024];
        struct dirent *de;
        DIR *td;

        snprintf(dir, sizeof(dir), "/proc/%d/task", (int) d->pid);
        td = opendir(dir);
        if (!td)
                return;
        while ((de = readdir(td))) {
                unsigned long long run;
                char *p, *tok, *save = NULL;
                unsigned tid, field = 3, k;
                int cpu = -1;

                if (de->d_name[0] == '.' || sscanf(de->d_name, "%u", &tid) != 1)
                        continue;
                snprintf(path, sizeof(path), "%s/%u/comm", dir, tid);
                if (read_small_file(path, buf, sizeof(buf)) < 0 || strcmp(buf, "vpcal-load") != 0)
                        continue;
                snprintf(path, sizeof(path), "%s/%u/schedstat", dir, tid);
                if (read_small_file(path, buf, sizeof(buf)) < 0 || sscanf(buf, "%llu", &run) != 1)
                        continue;
                snprintf(path, sizeof(path), "%s/%u/stat", dir, tid);
                if (read_small_file(path, buf, sizeof(buf)) < 0 || !(p = strrchr(buf, ')')))
                        continue;
                /* proc(5): field 39 is the CPU it last ran on (pinned: its CPU) */
                for (tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save), field++)
                        if (field == 39) {
                                cpu = atoi(tok);
                                break;
                        }
                if (cpu < 0 || cpu >= (int) d->h->topo->n_cpus)
                        continue;
                for (k = 0; k < *n_seen && seen[k].tid != tid; k++)
                        ;
                if (k == *n_seen) {
                        if (k == MAX_TIDS)
                                continue;
                        seen[k] = (struct tid_run) { tid, run };
                        (*n_seen)++;
                        continue;
                }
                if (run > seen[k].run_ns)
                        busy[cpu] += (double) (run - seen[k].run_ns) / (double) dt;
                seen[k].run_ns = run;
                d->load_seen++;
        }
        closedir(td);
}

static void *driver_main(void *arg)
{
        struct driver *d = arg;
        struct tid_run seen[MAX_TIDS];
        unsigned n_seen = 0;
        double busy[VP_MAX_CPUS];
        nsec_t last = now_ns();

        while (!atomic_load(&d->quit)) {
                struct timespec ts = { 0, 2 * NSEC_PER_MSEC };
                nanosleep(&ts, NULL);
                nsec_t now = now_ns();
                memset(busy, 0, sizeof(double) * d->h->topo->n_cpus);
                child_busy(d, seen, &n_seen, busy, now - last);
                for (unsigned c = 0; c < d->h->topo->n_cpus; c++)
                        busy[c] = MIN(busy[c], 1.0);
                host_advance(d->h, now - last, busy);
                last = now;
                d->steps++;
        }
        return NULL;
}

static pid_t spawn(const struct host *h, const char *log, const char *extra)
{
        const char *bd = getenv("VMMPOWER_BUILD_DIR");
        char cmd[4096];
        pid_t pid;

        assert_non_null(bd);
        snprintf(cmd, sizeof(cmd),
                 "exec '%s/vmmpower-calibrate' -c '%s/empty.conf' --sysfs-root '%s' --state-dir '%s' "
                 "--control-socket '%s/control.sock' --cpus 0-1 %s 2>'%s'",
                 bd, h->tmp, h->root, h->state, h->tmp, extra, log);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                execl("/bin/sh", "sh", "-c", cmd, (char *) NULL);
                _exit(127);
        }
        running_child = pid;
        return pid;
}

static int wait_exit(pid_t pid, nsec_t timeout_ns)
{
        nsec_t end = now_ns() + timeout_ns;
        int st;

        while (now_ns() < end) {
                pid_t r = waitpid(pid, &st, WNOHANG);
                assert_true(r >= 0);
                if (r == pid) {
                        running_child = 0;
                        return st;
                }
                struct timespec ts = { 0, 10 * NSEC_PER_MSEC };
                nanosleep(&ts, NULL);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        running_child = 0;
        fail_msg("vmmpower-calibrate did not exit in time");
        return -1;
}

static void real_host(struct host *h, struct energy_model *planted)
{
        static const unsigned keep[] = { 0, 3, 7 };

        /* xeon-spr-2s.model with 3 of its 8 levels (800, 2000, 3800 MHz): 16 points, not 32 */
        load_model("xeon-spr-2s.model", planted);
        for (unsigned i = 0; i < ELEMENTSOF(keep); i++)
                planted->levels[i] = planted->levels[keep[i]];
        planted->n_levels = ELEMENTSOF(keep);
        assert_int_equal(energy_model_validate(planted, NULL), 0);
        host_setup(h, "xeon-spr-2s", planted, false, 50000000);
        h->noise = 0.0;
        /* an empty configuration: the defaults, nothing of this host's /etc */
        sh("touch '%s/empty.conf'", h->tmp);
}

static void test_real_run(void **state)
{
        struct energy_model planted, base, fitted;
        struct em_error err = { 0 };
        struct driver d = { 0 };
        struct host h;
        char log[600], out[600], basef[600], extra[1500];
        FILE *f;
        int st;

        if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
                skip();
        real_host(&h, &planted);
        wrong_base(&planted, &base, true);
        snprintf(basef, sizeof(basef), "%s/base.model", h.tmp);
        f = fopen(basef, "w");
        assert_non_null(f);
        energy_model_write(&base, f);
        assert_int_equal(fclose(f), 0);
        snprintf(log, sizeof(log), "%s/log", h.tmp);
        snprintf(out, sizeof(out), "%s/fitted.model", h.tmp);
        snprintf(extra, sizeof(extra), "-m '%s' -o '%s' --name real-run --dwell 250ms --settle 50ms --sample 50ms "
                 "--period 20ms", basef, out);
        d.h = &h;
        d.pid = spawn(&h, log, extra);
        assert_int_equal(pthread_create(&d.thread, NULL, driver_main, &d), 0);
        st = wait_exit(d.pid, 120 * NSEC_PER_SEC);
        atomic_store(&d.quit, true);
        pthread_join(d.thread, NULL);
        sh_status("cat '%s'", log);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
        printf("helper steps: %u, load-thread samples: %u\n", d.steps, d.load_seen);
        assert_true(d.load_seen > 0);
        if (energy_model_parse_file(out, &fitted, &err) < 0)
                fail_msg("%s:%u: %s", err.file, err.line, err.message);
        assert_string_equal(fitted.name, "real-run");
        /* Printed, not asserted: on this shared 2-CPU VM the numbers depend on the other jobs. */
        printf("real run, fitted vs planted (not asserted):\n");
        for (unsigned l = 0; l < planted.n_levels; l++)
                printf("  level %u kHz: %u vs %u mW\n", planted.levels[l].freq_khz, fitted.levels[l].active_mw,
                       planted.levels[l].active_mw);
        printf("  package awake %u vs %u, quiet %u vs %u, asleep %u vs %u mW\n",
               fitted.domain[EM_DOMAIN_PACKAGE].awake_mw, planted.domain[EM_DOMAIN_PACKAGE].awake_mw,
               fitted.domain[EM_DOMAIN_PACKAGE].quiet_mw, planted.domain[EM_DOMAIN_PACKAGE].quiet_mw,
               fitted.domain[EM_DOMAIN_PACKAGE].asleep_mw, planted.domain[EM_DOMAIN_PACKAGE].asleep_mw);
        assert_restored(&h);
        host_teardown(&h);
}

static bool knobs_changed(const struct host *h)
{
        uint32_t v;
        return read_u32_rel(h, CPU_REL "/cpufreq/policy0/scaling_min_freq", &v) && v != 800000;
}

static void wait_for_change(const struct host *h)
{
        nsec_t end = now_ns() + 30 * NSEC_PER_SEC;

        while (!knobs_changed(h)) {
                struct timespec ts = { 0, 5 * NSEC_PER_MSEC };
                assert_true(now_ns() < end);
                nanosleep(&ts, NULL);
        }
}

static void test_real_sigterm(void **state)
{
        struct energy_model planted;
        struct host h;
        char log[600];
        int st;

        real_host(&h, &planted);
        snprintf(log, sizeof(log), "%s/log", h.tmp);
        pid_t pid = spawn(&h, log, "--dwell 10s --settle 1s -o /dev/null");
        wait_for_change(&h);
        kill(pid, SIGTERM);
        st = wait_exit(pid, 30 * NSEC_PER_SEC);
        sh_status("cat '%s'", log);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 128 + SIGTERM);
        assert_int_equal(sh_status("grep -q 'interrupted at point' '%s'", log), 0);
        assert_restored(&h);
        host_teardown(&h);
}

static void test_real_crash_restore(void **state)
{
        struct energy_model planted;
        const char *bd = getenv("VMMPOWER_BUILD_DIR");
        struct host h;
        char log[600], conf[600], text[1500], jpath[600];
        int st;

        real_host(&h, &planted);
        snprintf(log, sizeof(log), "%s/log", h.tmp);
        pid_t pid = spawn(&h, log, "--dwell 10s --settle 1s -o /dev/null");
        wait_for_change(&h);
        kill(pid, SIGKILL);
        st = wait_exit(pid, 30 * NSEC_PER_SEC);
        assert_true(WIFSIGNALED(st));
        assert_true(knobs_changed(&h));
        snprintf(jpath, sizeof(jpath), "%s/journal", h.state);
        assert_int_equal(access(jpath, F_OK), 0);
        /* the daemon's own --restore puts the host back */
        snprintf(conf, sizeof(conf), "%s/vmmpower.conf", h.tmp);
        snprintf(text, sizeof(text), "[Daemon]\nStateDirectory = %s\nSysfsRoot = %s\n[Libvirt]\nEnabled = no\n",
                 h.state, h.root);
        write_file(conf, text);
        assert_int_equal(sh_status("'%s/vmmpowerd' --restore -c '%s'", bd, conf), 0);
        /* A kill in the middle of a fixture write leaves the writer's temp file beside the knob
         * (power_sysfs_default_write() replaces a regular file by rename; sysfs has none). */
        assert_restored_x(&h, "-x '*.vp-tmp.*'");
        host_teardown(&h);
}

static void test_real_refuses_with_daemon(void **state)
{
        struct energy_model planted;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct host h;
        char log[600], jpath[600];
        int fd, st;

        real_host(&h, &planted);
        snprintf(log, sizeof(log), "%s/log", h.tmp);
        assert_true(strlen(h.tmp) + strlen("/control.sock") < sizeof(sa.sun_path));
        memcpy(sa.sun_path, h.tmp, strlen(h.tmp));
        strcat(sa.sun_path, "/control.sock");
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(fd, 4), 0);
        st = wait_exit(spawn(&h, log, "--dwell 1s -o /dev/null"), 30 * NSEC_PER_SEC);
        close(fd);
        sh_status("cat '%s'", log);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 1);
        assert_int_equal(sh_status("grep -q 'vmmpowerd answers on' '%s'", log), 0);
        snprintf(jpath, sizeof(jpath), "%s/journal", h.state);
        assert_int_equal(access(jpath, F_OK), -1);
        sh("diff -r '%s' '%s'", h.pristine, h.root);
        host_teardown(&h);
}

/* A daemon without a control socket (not bound yet, or none configured) still holds its instance lock. */
static void test_real_refuses_with_daemon_lock(void **state)
{
        struct energy_model planted;
        struct host h;
        char log[600], lpath[600], jpath[600];
        int fd, st;

        real_host(&h, &planted);
        snprintf(log, sizeof(log), "%s/log", h.tmp);
        sh("mkdir -p '%s'", h.state);
        snprintf(lpath, sizeof(lpath), "%s/vmmpowerd.pid", h.state);
        fd = open(lpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
        assert_int_equal(pwrite(fd, "4242\n", 5, 0), 5);
        st = wait_exit(spawn(&h, log, "--dwell 1s -o /dev/null"), 30 * NSEC_PER_SEC);
        sh_status("cat '%s'", log);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 1);
        assert_int_equal(sh_status("grep -q 'vmmpowerd (pid 4242) holds .*vmmpowerd.pid' '%s'", log), 0);
        snprintf(jpath, sizeof(jpath), "%s/journal", h.state);
        assert_int_equal(access(jpath, F_OK), -1);
        sh("diff -r '%s' '%s'", h.pristine, h.root);
        close(fd);
        host_teardown(&h);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_zones),
                cmocka_unit_test(test_recover_xeon),
                cmocka_unit_test(test_recover_genoa_core_zone),
                cmocka_unit_test(test_recover_xeon_v0),
                cmocka_unit_test(test_recover_genoa_core_zone_v0),
                cmocka_unit_test(test_gauge),
                cmocka_unit_test(test_failed_knob_write),
                cmocka_unit_test(test_interrupted),
                cmocka_unit_test(test_unreadable_counters),
                cmocka_unit_test(test_all_capped),
                cmocka_unit_test(test_max_levels),
                cmocka_unit_test(test_die_zones),
                cmocka_unit_test(test_refused_before_measuring),
                cmocka_unit_test(test_real_refuses_with_daemon),
                cmocka_unit_test(test_real_refuses_with_daemon_lock),
                cmocka_unit_test(test_real_run),
                cmocka_unit_test(test_real_sigterm),
                cmocka_unit_test(test_real_crash_restore),
        };
        if (getenv("TEST_FILTER"))
                cmocka_set_test_filter(getenv("TEST_FILTER"));
        return cmocka_run_group_tests(tests, NULL, remove_leftovers);
}
