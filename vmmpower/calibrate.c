/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Calibration: the watts of an energy model fitted to a host's RAPL counters.
 *
 * Terms.  A *point* is one host state held for a dwell: every cpufreq policy
 * pinned to one perf level (scaling_min_freq = scaling_max_freq = the level's
 * frequency), some CPUs running a busy loop with a duty cycle, some CPUs
 * limited to an idle state (cpuidle stateN/disable of every deeper state)
 * and possibly every CPU under a PM QoS resume-latency limit.  Its *measured
 * power* is the energy of the package zones (Σ intel-rapl:N) over the dwell
 * divided by the time.  The *parameters* are the watts of the model: the
 * active power of each perf level, the power of each idle state, the awake,
 * quiet and asleep power of each idle domain (LLC, package).
 *
 * Why a linear fit in the daemon's own equations: em_host_power() is linear
 * in the parameters once the structure (levels, capacities, latencies,
 * residencies) is fixed, so the coefficient of parameter j in a point is
 * em_host_power() of that point's load with parameter j = 1 W and all
 * others 0.  The points' measured powers are then a linear system in the
 * parameters, solved by least squares.  The fitted model is, by
 * construction, the model vmmpowerd evaluates: the same equations, the same
 * treatment of SMT, latency limits and domains (docs/energy-model.md §2).
 * The equations are those of the base model's CPU part (cpu_part()): what
 * the package counters see.  The platform and PSU terms (wall power), the
 * power limit, the turbo table and the wake-up energies are not fitted and
 * are written back from the base model; points the turbo table does not
 * grant are not run, points at the package power limit are not fitted
 * (docs/calibration.md §2 says why).
 * The load of a point is the busy fraction each loaded CPU *achieved*
 * (its thread's CPU time over the dwell), not the one asked for.  Loads run
 * one thread per core, no vCPU wake-ups (a busy loop or a long duty period
 * idles in gaps far longer than every residency).
 *
 * What the counters cannot tell apart.  Every core of a package is always
 * either busy or in some idle state, and the package counter sees them all:
 * adding δ to every per-core parameter (every level's active power and every
 * idle state's power) and subtracting N_cores δ from every package-domain
 * parameter changes no point's power, and no modelled power of any load
 * either.  The same holds between each LLC and its package.  These two
 * directions are fixed from outside: the deepest idle state's power from the
 * core (PP0) zone where the host has one (its power with every core idle,
 * over the cores), else from the base model; the LLC domain's asleep power
 * from the base model.  A parameter that no point reaches (a quiet state
 * that the latencies make unreachable) keeps the base model's value; a quiet
 * power not measured is placed between the fitted awake and asleep powers
 * where the base model has it.
 *
 * Steps.
 *  1. Restore what a previous run left in the journal.
 *  2. Choose the cores (first package with an allowed CPU): c1, c2 in the
 *     same LLC, the allowed cores of c1's LLC, the first allowed core of
 *     every LLC of that package.
 *  3. Points: idle (first and last); at every level c1 busy, c1 and c2 busy,
 *     every allowed core of c1's LLC busy (more than 2); one core per LLC
 *     busy at the top level; c1 at 50% duty; for every idle
 *     state but the deepest, c1's core limited to it, then the whole package
 *     limited to it; every CPU under PM QoS at the deepest core state's exit
 *     latency and at each domain exit latency above it (quiet domains).
 *  4. Per point: write the knobs (journal first, power driver sysfs backend),
 *     start the load, settle, read the counters, sleep in slices of at most
 *     sample_ns reading the counters after each (a counter wraps to 0 after
 *     max_energy_range_uj: one wrap per slice at most), stop the load.
 *  5. Fit; round; make the model's order rules hold (levels' powers
 *     non-decreasing, idle powers non-increasing, asleep <= quiet <= awake),
 *     counting every value moved; validate.
 *  6. Restore every knob from the journal, in every case.
 *
 * Constants: duty 50% for the partial-load point (the middle of the range,
 * where the awake/asleep split of the domains is most visible); the rank
 * tolerance 1e-9 of a column's norm (coefficients are O(1..100) W per W);
 * a point is "starved" when a load thread ran under 90% of its duty (the
 * fit still uses what ran; the report warns); the first and last points are
 * both idle, and a difference over 3% between them is reported as drift
 * (RAPL's idle package power is steady to well under that on a quiet host;
 * temperature raises leakage over a long run).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "calibrate.h"
#include "journal_builtin.h"
#include "log.h"
#include "power_driver.h"

#define PARTIAL_DUTY_PERMILLE 500
#define RANK_TOL 1e-9
#define STARVED_RATIO 0.9
#define IDLE_DRIFT_WARN_PCT 3.0
#define LIMIT_CAPPED_RATIO 0.97
#define MAX_PARAMS (EM_MAX_LEVELS + EM_MAX_IDLE_STATES + 3 * _EM_DOMAIN_MAX)

static const char *const zone_kind_names[_CALIB_ZONE_KIND_MAX] = {
        [CALIB_ZONE_PACKAGE] = "package",
        [CALIB_ZONE_CORE] = "core",
        [CALIB_ZONE_DRAM] = "dram",
        [CALIB_ZONE_PSYS] = "psys",
        [CALIB_ZONE_OTHER] = "other",
};

const char *calib_zone_kind_to_string(enum calib_zone_kind k)
{
        return k < _CALIB_ZONE_KIND_MAX ? zone_kind_names[k] : NULL;
}

/* ------------------------------------------------------------ powercap zones */

/* "intel-rapl:N" or "intel-rapl:N:M", digits only (intel-rapl-mmio:N duplicates package N: not matched). */
static bool zone_dir_name(const char *s)
{
        const char *p = s + strlen("intel-rapl:");
        unsigned groups = 0;

        if (strncmp(s, "intel-rapl:", strlen("intel-rapl:")) != 0)
                return false;
        for (;;) {
                if (*p < '0' || *p > '9')
                        return false;
                while (*p >= '0' && *p <= '9')
                        p++;
                groups++;
                if (*p == '\0')
                        return groups <= 2;
                if (*p != ':')
                        return false;
                p++;
        }
}

/*
 * The kernel's powercap intel-rapl driver (intel_rapl_common.c) names a package zone "package-N" (N the
 * physical package id) and, on a package of several dies (topology_max_dies_per_package() > 1), one
 * zone per die "package-N-die-M", each counting its die's energy: the package's is their sum.
 */
static enum calib_zone_kind zone_kind(const char *name, int *package)
{
        char num[16];
        const char *die;
        uint32_t n, m;
        size_t len;

        *package = -1;
        if (strncmp(name, "package-", 8) == 0) {
                die = strstr(name + 8, "-die-");
                len = die ? (size_t) (die - (name + 8)) : strlen(name + 8);
                if (len > 0 && len < sizeof(num)) {
                        memcpy(num, name + 8, len);
                        num[len] = '\0';
                        if (parse_u32(num, &n) == 0 && n <= INT32_MAX && (!die || parse_u32(die + 5, &m) == 0)) {
                                *package = (int) n;
                                return CALIB_ZONE_PACKAGE;
                        }
                }
        }
        if (strcmp(name, "core") == 0)
                return CALIB_ZONE_CORE;
        if (strcmp(name, "dram") == 0)
                return CALIB_ZONE_DRAM;
        if (strcmp(name, "psys") == 0)
                return CALIB_ZONE_PSYS;
        return CALIB_ZONE_OTHER;
}

static int cmp_zone(const void *a, const void *b)
{
        return strcmp(((const struct calib_zone *) a)->rel, ((const struct calib_zone *) b)->rel);
}

int calib_zones_discover(const char *sysfs_root, struct calib_zones *ret)
{
        struct calib_zones z = { 0 };
        char dir[PATH_MAX], path[PATH_MAX], buf[64];
        struct dirent *de;
        bool package = false;
        DIR *d;
        int r;

        r = path_printf(dir, sizeof(dir), "%s/class/powercap", sysfs_root);
        if (r < 0)
                return r;
        d = opendir(dir);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                struct calib_zone *zn;
                uint64_t range;

                if (!zone_dir_name(de->d_name))
                        continue;
                if (z.n == CALIB_MAX_ZONES) {
                        closedir(d);
                        return -E2BIG;
                }
                zn = &z.zone[z.n];
                *zn = (struct calib_zone) { 0 };
                if (path_printf(zn->rel, sizeof(zn->rel), "class/powercap/%s", de->d_name) < 0)
                        continue;
                if (path_printf(path, sizeof(path), "%s/%s/name", sysfs_root, zn->rel) < 0 ||
                    read_small_file(path, zn->name, sizeof(zn->name)) < 0)
                        zn->name[0] = '\0'; /* no name: not a zone the fit uses */
                zn->kind = zone_kind(zn->name, &zn->package);
                if (path_printf(path, sizeof(path), "%s/%s/max_energy_range_uj", sysfs_root, zn->rel) < 0 ||
                    (r = (int) read_small_file(path, buf, sizeof(buf))) < 0 || parse_u64(buf, &range) < 0 ||
                    range == 0) {
                        log_debug("%s: no usable max_energy_range_uj", path);
                        closedir(d);
                        return -EINVAL;
                }
                zn->max_energy_range_uj = range;
                package |= zn->kind == CALIB_ZONE_PACKAGE;
                z.n++;
        }
        closedir(d);
        if (z.n == 0)
                return -ENOENT;
        if (!package)
                return -ENODATA;
        qsort(z.zone, z.n, sizeof(z.zone[0]), cmp_zone);
        *ret = z;
        return 0;
}

int calib_zones_read(const char *sysfs_root, const struct calib_zones *z, uint64_t *ret_uj)
{
        char path[PATH_MAX], buf[64];
        uint64_t v[CALIB_MAX_ZONES];
        ssize_t n;
        int r;

        for (unsigned i = 0; i < z->n; i++) {
                r = path_printf(path, sizeof(path), "%s/%s/energy_uj", sysfs_root, z->zone[i].rel);
                if (r < 0)
                        return r;
                n = read_small_file(path, buf, sizeof(buf));
                if (n < 0)
                        return (int) n;
                r = parse_u64(buf, &v[i]);
                if (r < 0)
                        return r;
        }
        memcpy(ret_uj, v, z->n * sizeof(*v));
        return 0;
}

/* ------------------------------------------------------------ points */

struct spec {
        char name[40];
        unsigned level;
        uint16_t *duty;    /* [n_cpus] permille */
        int8_t *state;     /* [n_cpus] model idle state limit, -1 none */
        int32_t qos_us;    /* every online CPU, -1 none */
        double *busy;      /* [n_cpus] achieved */
        double pkg_mw, core_mw, dram_mw, psys_mw;
        double pkg_max_mw; /* the largest single package zone */
};

struct run {
        const struct calib_config *cfg;
        const struct topology *t;
        struct em_host *h;       /* the CPU part of the base model (cpu_part()): what RAPL sees */
        struct power_driver *drv;
        struct calib_report *rep;
        unsigned n_cpus;
        struct spec *specs;
        unsigned n_specs;
        int *cpuidle_index; /* [n_cpus * n_idle] cpuidle state index of model state i, -1 absent */
        int cur_level;
};

static int fail(struct run *run, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct run *run, int r, const char *fmt, ...)
{
        va_list ap;

        if (!run->rep->error[0]) {
                va_start(ap, fmt);
                vsnprintf(run->rep->error, sizeof(run->rep->error), fmt, ap);
                va_end(ap);
        }
        return r < 0 ? r : -EINVAL;
}

static struct spec *spec_add(struct run *run, unsigned level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static struct spec *spec_add(struct run *run, unsigned level, const char *fmt, ...)
{
        struct spec *s;
        va_list ap;

        if (run->n_specs == CALIB_MAX_POINTS)
                return NULL;
        s = &run->specs[run->n_specs];
        s->duty = calloc(run->n_cpus, sizeof(*s->duty));
        s->state = malloc(run->n_cpus * sizeof(*s->state));
        s->busy = calloc(run->n_cpus, sizeof(*s->busy));
        if (!s->duty || !s->state || !s->busy) {
                free(s->duty);
                free(s->state);
                free(s->busy);
                return NULL;
        }
        memset(s->state, -1, run->n_cpus);
        s->level = level;
        s->qos_us = -1;
        va_start(ap, fmt);
        vsnprintf(s->name, sizeof(s->name), fmt, ap);
        va_end(ap);
        run->n_specs++;
        return s;
}

static bool cpu_allowed(const struct run *run, int cpu)
{
        return cpu >= 0 && cpuset_isset(&run->t->online, (unsigned) cpu) &&
               (cpuset_empty(&run->cfg->cpus) || cpuset_isset(&run->cfg->cpus, (unsigned) cpu));
}

static void limit_core(struct run *run, struct spec *s, unsigned core, int state)
{
        const struct em_core *c = &run->h->cores[core];

        for (unsigned t = 0; t < c->n_threads; t++)
                if (c->cpu[t] >= 0)
                        s->state[c->cpu[t]] = (int8_t) state;
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
}

static int plan_points(struct run *run)
{
        const struct energy_model *m = &run->h->model;
        const struct em_host *h = run->h;
        int c1 = -1, c2 = -1, llc_first[64];
        unsigned top = m->n_levels - 1, pkg = 0, n_llc_cores = 0, n_llcs = 0;
        char path[PATH_MAX];
        struct spec *s;

        for (unsigned k = 0; k < h->n_cores && c1 < 0; k++)
                if (cpu_allowed(run, h->cores[k].cpu[0])) {
                        c1 = (int) k;
                        pkg = h->cores[k].pkg;
                }
        if (c1 < 0)
                return fail(run, -ENOENT, "no allowed online CPU to load");
        for (unsigned k = h->pkgs[pkg].first; k < h->pkgs[pkg].end; k++) {
                if (!cpu_allowed(run, h->cores[k].cpu[0]))
                        continue;
                if (h->cores[k].llc == h->cores[c1].llc) {
                        n_llc_cores++;
                        if ((int) k != c1 && c2 < 0)
                                c2 = (int) k;
                }
                if ((n_llcs == 0 || h->cores[llc_first[n_llcs - 1]].llc != h->cores[k].llc) &&
                    n_llcs < ELEMENTSOF(llc_first))
                        llc_first[n_llcs++] = (int) k;
        }

#define ADD(...)                                                                                   \
        do {                                                                                       \
                if (run->n_specs == CALIB_MAX_POINTS)                                              \
                        return fail(run, -E2BIG, "more than %d points", CALIB_MAX_POINTS);         \
                if (!(s = spec_add(run, __VA_ARGS__)))                                             \
                        return fail(run, -ENOMEM, "out of memory");                                \
        } while (0)
        ADD(top, "idle");
        for (unsigned l = 0; l < m->n_levels; l++) {
                ADD(l, "busy1@%u", m->levels[l].freq_khz);
                s->duty[h->cores[c1].cpu[0]] = 1000;
                if (c2 >= 0) {
                        ADD(l, "busy2@%u", m->levels[l].freq_khz);
                        s->duty[h->cores[c1].cpu[0]] = 1000;
                        s->duty[h->cores[c2].cpu[0]] = 1000;
                }
                if (n_llc_cores > 2) {
                        ADD(l, "busyllc%u@%u", n_llc_cores, m->levels[l].freq_khz);
                        for (unsigned k = h->pkgs[pkg].first; k < h->pkgs[pkg].end; k++)
                                if (h->cores[k].llc == h->cores[c1].llc && cpu_allowed(run, h->cores[k].cpu[0]))
                                        s->duty[h->cores[k].cpu[0]] = 1000;
                }
        }
        if (n_llcs > 1) {
                ADD(top, "busy-llcs%u@%u", n_llcs, m->levels[top].freq_khz);
                for (unsigned i = 0; i < n_llcs; i++)
                        s->duty[h->cores[llc_first[i]].cpu[0]] = 1000;
        }
        ADD(top, "duty%u@%u", PARTIAL_DUTY_PERMILLE / 10, m->levels[top].freq_khz);
        s->duty[h->cores[c1].cpu[0]] = PARTIAL_DUTY_PERMILLE;
        for (unsigned i = 0; i + 1 < m->n_idle; i++) {
                ADD(top, "limit1-%s", m->idle[i].name);
                limit_core(run, s, (unsigned) c1, (int) i);
                ADD(top, "limitpkg-%s", m->idle[i].name);
                for (unsigned k = h->pkgs[pkg].first; k < h->pkgs[pkg].end; k++)
                        limit_core(run, s, k, (int) i);
        }
        /* PM QoS: latencies where the deepest core state is allowed but a domain's deep state is not. */
        if (path_printf(path, sizeof(path), "%s/devices/system/cpu/cpu%d/power/pm_qos_resume_latency_us",
                        run->cfg->sysfs_root, h->cores[c1].cpu[0]) >= 0 && access(path, F_OK) == 0) {
                uint32_t lat[1 + _EM_DOMAIN_MAX], deep = m->idle[m->n_idle - 1].exit_latency_us, dmax = 0;
                unsigned n = 0;

                for (int d = 0; d < _EM_DOMAIN_MAX; d++)
                        if (m->domain[d].present)
                                dmax = MAX(dmax, m->domain[d].exit_latency_us);
                if (dmax > deep && deep > 0) {
                        lat[n++] = deep;
                        for (int d = 0; d < _EM_DOMAIN_MAX; d++)
                                if (m->domain[d].present && m->domain[d].exit_latency_us > deep &&
                                    m->domain[d].exit_latency_us < dmax)
                                        lat[n++] = m->domain[d].exit_latency_us;
                }
                qsort(lat, n, sizeof(lat[0]), cmp_u32);
                for (unsigned i = 0; i < n; i++) {
                        if (i > 0 && lat[i] == lat[i - 1])
                                continue;
                        ADD(top, "qos%uus", lat[i]);
                        s->qos_us = (int32_t) lat[i];
                }
        }
        ADD(top, "idle-end");
#undef ADD
        /* The turbo table: a level the hardware does not grant with this many busy cores is not a point. */
        unsigned kept = 0;
        for (unsigned i = 0; i < run->n_specs; i++) {
                struct spec *sp = &run->specs[i];
                double busy = 0.0;
                for (unsigned c = 0; c < run->n_cpus; c++)
                        busy += sp->duty[c] / 1000.0;
                if (em_turbo_level(run->cfg->base, busy) < sp->level) {
                        free(sp->duty);
                        free(sp->state);
                        free(sp->busy);
                        run->rep->turbo_skipped++;
                        continue;
                }
                run->specs[kept++] = *sp;
        }
        run->n_specs = kept;
        return 0;
}

/* ------------------------------------------------------------ knobs */

static int knob_failed(struct run *run, int r, const char *what)
{
        const struct power_write_info *w = power_driver_last_write(run->drv);

        if (w->path[0])
                return fail(run, r, "%s: writing \"%s\" to %s failed: %s%s%s%s", what, w->wanted, w->path,
                            strerror(-r), r == -ERANGE ? " (the kernel holds \"" : "",
                            r == -ERANGE ? w->actual : "", r == -ERANGE ? "\")" : "");
        return fail(run, r, "%s: %s", what, strerror(-r));
}

static int apply_knobs(struct run *run, const struct spec *s)
{
        const struct energy_model *m = &run->h->model;
        const struct topology *t = run->t;
        int r;

        if ((int) s->level != run->cur_level && m->levels[s->level].freq_khz > 0) {
                uint32_t khz = m->levels[s->level].freq_khz, cap;
                struct power_perf_request rmin = { .flags = POWER_PERF_MIN_KHZ, .min_khz = khz };
                struct power_perf_request rmax = { .flags = POWER_PERF_MAX_KHZ, .max_khz = khz };
                for (unsigned p = 0; p < t->n_policies; p++) {
                        int cpu = -1;
                        CPUSET_FOREACH(c, &t->policies[p].related_cpus)
                                if (cpuset_isset(&t->online, (unsigned) c)) {
                                        cpu = c;
                                        break;
                                }
                        if (cpu < 0)
                                continue;
                        /* One knob per call (the error names it), in the order that keeps min <= max. */
                        bool up = power_sysfs_policy_cap_khz(run->drv, (unsigned) cpu, &cap) == 0 && khz > cap;
                        r = power_driver_set_perf(run->drv, (unsigned) cpu, up ? &rmax : &rmin);
                        if (r == 0)
                                r = power_driver_set_perf(run->drv, (unsigned) cpu, up ? &rmin : &rmax);
                        if (r < 0)
                                return knob_failed(run, r, s->name);
                }
                run->cur_level = (int) s->level;
        }
        CPUSET_FOREACH(c, &t->online) {
                struct power_idle_constraint ic = { .deepest_state = -1, .latency_us = s->qos_us };
                if ((unsigned) c >= run->n_cpus)
                        break;
                if (s->state[c] >= 0) {
                        ic.deepest_state = run->cpuidle_index[(unsigned) c * m->n_idle + (unsigned) s->state[c]];
                        if (ic.deepest_state < 0)
                                return fail(run, -ENOENT, "%s: CPU %d has no cpuidle state named %s", s->name, c,
                                            m->idle[s->state[c]].name);
                }
                r = power_driver_enter_idle(run->drv, (unsigned) c, &ic);
                if (r < 0)
                        return knob_failed(run, r, s->name);
        }
        return 0;
}

/* ------------------------------------------------------------ measuring */

static int read_counters(struct run *run, uint64_t *uj)
{
        int r = run->cfg->ops->read_energy(run->cfg->ops_userdata, uj);

        if (r < 0)
                return fail(run, r, "reading the energy counters failed: %s", strerror(-r));
        return 0;
}

static int measure(struct run *run, struct spec *s)
{
        const struct calib_config *cfg = run->cfg;
        const struct calib_ops *ops = cfg->ops;
        uint64_t prev[CALIB_MAX_ZONES], cur[CALIB_MAX_ZONES], sum[CALIB_MAX_ZONES] = { 0 };
        uint64_t *busy0 = NULL, *busy1 = NULL;
        double kind_uj[_CALIB_ZONE_KIND_MAX] = { 0 };
        bool has_kind[_CALIB_ZONE_KIND_MAX] = { false };
        nsec_t t0, t1, end;
        int r;

        busy0 = calloc(run->n_cpus, sizeof(*busy0));
        busy1 = calloc(run->n_cpus, sizeof(*busy1));
        if (!busy0 || !busy1) {
                r = -ENOMEM;
                goto out;
        }
        r = ops->load_start(cfg->ops_userdata, s->duty, run->n_cpus, cfg->period_ns);
        if (r < 0) {
                r = fail(run, r, "%s: starting the load failed: %s", s->name, strerror(-r));
                goto stop;
        }
        r = ops->sleep_until(cfg->ops_userdata, ops->now(cfg->ops_userdata) + cfg->settle_ns);
        if (r < 0)
                goto stop;
        if ((r = read_counters(run, prev)) < 0)
                goto stop;
        r = ops->load_busy_ns(cfg->ops_userdata, busy0, run->n_cpus);
        if (r < 0)
                goto stop;
        t0 = ops->now(cfg->ops_userdata);
        end = t0 + cfg->dwell_ns;
        for (nsec_t t = t0; t < end;) {
                r = ops->sleep_until(cfg->ops_userdata, MIN(end, t + cfg->sample_ns));
                if (r < 0)
                        goto stop;
                if ((r = read_counters(run, cur)) < 0)
                        goto stop;
                for (unsigned z = 0; z < cfg->zones.n; z++) {
                        sum[z] += calib_counter_delta(prev[z], cur[z], cfg->zones.zone[z].max_energy_range_uj);
                        prev[z] = cur[z];
                }
                t = ops->now(cfg->ops_userdata);
        }
        r = ops->load_busy_ns(cfg->ops_userdata, busy1, run->n_cpus);
        if (r < 0)
                goto stop;
        t1 = ops->now(cfg->ops_userdata);
        if (t1 <= t0) {
                r = fail(run, -EINVAL, "%s: the clock did not advance", s->name);
                goto stop;
        }
        for (unsigned c = 0; c < run->n_cpus; c++) {
                double b = s->duty[c] ? (double) (busy1[c] - MIN(busy0[c], busy1[c])) / (double) (t1 - t0) : 0.0;
                s->busy[c] = b < 0.0 ? 0.0 : b > 1.0 ? 1.0 : b;
        }
        for (unsigned z = 0; z < cfg->zones.n; z++) {
                kind_uj[cfg->zones.zone[z].kind] += (double) sum[z];
                has_kind[cfg->zones.zone[z].kind] = true;
        }
        /* µJ / ns = kW: x 1e6 for mW */
        s->pkg_mw = kind_uj[CALIB_ZONE_PACKAGE] / (double) (t1 - t0) * 1e6;
        /* the largest package: the sum of its zones (one per die on a multi-die package) */
        s->pkg_max_mw = 0.0;
        for (unsigned z = 0; z < cfg->zones.n; z++) {
                const struct calib_zone *zz = &cfg->zones.zone[z];
                double pkg_uj = 0.0;

                if (zz->kind != CALIB_ZONE_PACKAGE)
                        continue;
                for (unsigned y = 0; y < cfg->zones.n; y++)
                        if (cfg->zones.zone[y].kind == CALIB_ZONE_PACKAGE && cfg->zones.zone[y].package == zz->package)
                                pkg_uj += (double) sum[y];
                s->pkg_max_mw = MAX(s->pkg_max_mw, pkg_uj / (double) (t1 - t0) * 1e6);
        }
        s->core_mw = has_kind[CALIB_ZONE_CORE] ? kind_uj[CALIB_ZONE_CORE] / (double) (t1 - t0) * 1e6 : -1.0;
        s->dram_mw = has_kind[CALIB_ZONE_DRAM] ? kind_uj[CALIB_ZONE_DRAM] / (double) (t1 - t0) * 1e6 : -1.0;
        s->psys_mw = has_kind[CALIB_ZONE_PSYS] ? kind_uj[CALIB_ZONE_PSYS] / (double) (t1 - t0) * 1e6 : -1.0;
        r = 0;
stop:
        ops->load_stop(cfg->ops_userdata);
out:
        free(busy0);
        free(busy1);
        if (r == -ENOMEM)
                fail(run, r, "out of memory");
        return r;
}

/* ------------------------------------------------------------ fit */

struct params {
        unsigned n;
        uint32_t *field[MAX_PARAMS]; /* in run->h->model */
        char name[MAX_PARAMS][48];
        bool fixed[MAX_PARAMS];
        enum calib_param_source source[MAX_PARAMS];
        bool capped_only[MAX_PARAMS]; /* reached only by points at the package power limit: the base's */
        double value[MAX_PARAMS];    /* mW */
        int quiet_of[MAX_PARAMS];    /* for a quiet parameter: the domain scope, else -1 */
};

static void params_add(struct params *p, uint32_t *field, int quiet_scope, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static void params_add(struct params *p, uint32_t *field, int quiet_scope, const char *fmt, ...)
{
        va_list ap;

        p->field[p->n] = field;
        p->quiet_of[p->n] = quiet_scope;
        va_start(ap, fmt);
        vsnprintf(p->name[p->n], sizeof(p->name[p->n]), fmt, ap);
        va_end(ap);
        p->n++;
}

static const char *const scope_names[_EM_DOMAIN_MAX] = { "llc", "package" };

static void params_build(struct em_host *h, struct params *p)
{
        struct energy_model *m = &h->model;

        memset(p, 0, sizeof(*p));
        for (unsigned l = 0; l < m->n_levels; l++)
                params_add(p, &m->levels[l].active_mw, -1, "PerfLevel %u kHz ActivePowerMW", m->levels[l].freq_khz);
        for (unsigned i = 0; i < m->n_idle; i++)
                params_add(p, &m->idle[i].power_mw, -1, "IdleState %s PowerMW", m->idle[i].name);
        for (int d = 0; d < _EM_DOMAIN_MAX; d++) {
                if (!m->domain[d].present)
                        continue;
                params_add(p, &m->domain[d].awake_mw, -1, "IdleDomain %s AwakePowerMW", scope_names[d]);
                params_add(p, &m->domain[d].quiet_mw, d, "IdleDomain %s QuietPowerMW", scope_names[d]);
                params_add(p, &m->domain[d].asleep_mw, -1, "IdleDomain %s AsleepPowerMW", scope_names[d]);
        }
}

static void spec_load(const struct run *run, const struct spec *s, double *work, uint8_t *vcpus, uint32_t *lat,
                      uint8_t *fdom_level)
{
        const struct energy_model *m = &run->h->model;
        double cap = (double) m->levels[s->level].capacity / EM_CAPACITY_SCALE;

        for (unsigned c = 0; c < run->h->n_cpus; c++) {
                work[c] = c < run->n_cpus ? s->busy[c] * cap : 0.0;
                vcpus[c] = 0;
                lat[c] = EM_LATENCY_ANY;
                if (c < run->n_cpus && s->state[c] >= 0)
                        lat[c] = m->idle[s->state[c]].exit_latency_us;
                if (s->qos_us >= 0)
                        lat[c] = MIN(lat[c], (uint32_t) s->qos_us);
        }
        for (unsigned f = 0; f < run->h->n_fdoms; f++)
                fdom_level[f] = (uint8_t) s->level;
}

/* Least squares min |A x - b| by modified Gram-Schmidt (A: rows x cols, row-major).  -EDOM: rank deficient (*bad). */
static int lstsq(double *A, double *b, unsigned rows, unsigned cols, double *x, unsigned *bad)
{
        double *R = calloc((size_t) cols * cols, sizeof(*R)), *qb = calloc(cols, sizeof(*qb));
        int r = 0;

        if (!R || !qb) {
                free(R);
                free(qb);
                return -ENOMEM;
        }
        for (unsigned j = 0; j < cols; j++) {
                double n0 = 0.0, n1 = 0.0;
                for (unsigned i = 0; i < rows; i++)
                        n0 += A[i * cols + j] * A[i * cols + j];
                for (unsigned k = 0; k < j; k++) {
                        double d = 0.0;
                        for (unsigned i = 0; i < rows; i++)
                                d += A[i * cols + k] * A[i * cols + j];
                        R[k * cols + j] = d;
                        for (unsigned i = 0; i < rows; i++)
                                A[i * cols + j] -= d * A[i * cols + k];
                }
                for (unsigned i = 0; i < rows; i++)
                        n1 += A[i * cols + j] * A[i * cols + j];
                if (n0 == 0.0 || sqrt(n1) <= RANK_TOL * sqrt(n0)) {
                        *bad = j;
                        r = -EDOM;
                        goto out;
                }
                R[j * cols + j] = sqrt(n1);
                for (unsigned i = 0; i < rows; i++)
                        A[i * cols + j] /= R[j * cols + j];
        }
        for (unsigned j = 0; j < cols; j++) {
                double d = 0.0;
                for (unsigned i = 0; i < rows; i++)
                        d += A[i * cols + j] * b[i];
                qb[j] = d;
        }
        for (unsigned j = cols; j-- > 0;) {
                double v = qb[j];
                for (unsigned k = j + 1; k < cols; k++)
                        v -= R[j * cols + k] * x[k];
                x[j] = v / R[j * cols + j];
        }
out:
        free(R);
        free(qb);
        return r;
}

static double spec_power(const struct run *run, const struct spec *s, double *work, uint8_t *vcpus, uint32_t *lat,
                         uint8_t *fl)
{
        /* no vCPUs: no wake-ups (the CPU part has no WakeEnergyUJ either) */
        struct em_load load = { .cpu_work = work, .cpu_vcpus = vcpus, .cpu_max_latency_us = lat, .fdom_level = fl,
                                .wake_given = true, .wake_mw = 0.0 };

        spec_load(run, s, work, vcpus, lat, fl);
        return em_host_power(run->h, &load, NULL);
}

static uint32_t to_mw(double v, unsigned *adjusted)
{
        if (v < 0.0) {
                (*adjusted)++;
                return 0;
        }
        if (v > 4e9) {
                (*adjusted)++;
                return UINT32_MAX;
        }
        return (uint32_t) lround(v);
}

/* A point at the package power limit: the hardware may have run it below its level (PL1/PPT). */
static bool spec_capped(const struct run *run, const struct spec *s)
{
        uint32_t limit = run->cfg->base->package_power_limit_mw;
        return limit > 0 && s->pkg_max_mw >= LIMIT_CAPPED_RATIO * limit;
}

/* fit()'s points and buffers. */
struct fit_work {
        unsigned n;                     /* points the fit uses: not those at the package power limit */
        unsigned n_all;                 /* those and, after them in use[], the ones at the limit */
        unsigned use[CALIB_MAX_POINTS]; /* their indices in run->specs */
        double *coef;                   /* [n_all][p.n]: each point's power per mW of each parameter */
        double *A, *b;                  /* the least-squares system over the free parameters */
        double *work;                   /* spec_power()'s load arrays */
        uint8_t *vcpus, *fl;
        uint32_t *lat;
};

static int fit_work_alloc(struct run *run, const struct params *p, struct fit_work *fw)
{
        fw->coef = calloc((size_t) fw->n_all * p->n, sizeof(*fw->coef));
        fw->A = calloc((size_t) fw->n * p->n, sizeof(*fw->A));
        fw->b = calloc(fw->n, sizeof(*fw->b));
        fw->work = calloc(run->h->n_cpus, sizeof(*fw->work));
        fw->vcpus = calloc(run->h->n_cpus, sizeof(*fw->vcpus));
        fw->lat = calloc(run->h->n_cpus, sizeof(*fw->lat));
        fw->fl = calloc(MAX(run->h->n_fdoms, 1u), sizeof(*fw->fl));
        if (!fw->coef || !fw->A || !fw->b || !fw->work || !fw->vcpus || !fw->lat || !fw->fl)
                return fail(run, -ENOMEM, "out of memory");
        return 0;
}

static void fit_work_free(struct fit_work *fw)
{
        free(fw->coef);
        free(fw->A);
        free(fw->b);
        free(fw->work);
        free(fw->vcpus);
        free(fw->lat);
        free(fw->fl);
}

static double fit_spec_power(const struct run *run, const struct spec *s, struct fit_work *fw)
{
        return spec_power(run, s, fw->work, fw->vcpus, fw->lat, fw->fl);
}

/* Step 5a, coefficients: the power of each point with one parameter at 1000 mW, the others 0 (the model is
 * left so: the caller restores it). */
static void fit_coefficients(const struct run *run, const struct params *p, struct fit_work *fw)
{
        for (unsigned j = 0; j < p->n; j++) {
                for (unsigned k = 0; k < p->n; k++)
                        *p->field[k] = k == j ? 1000 : 0;
                for (unsigned i = 0; i < fw->n_all; i++)
                        fw->coef[i * p->n + j] = fit_spec_power(run, &run->specs[fw->use[i]], fw) / 1000.0;
        }
}

/* Step 5b, what is fixed rather than fitted: the gauge (see the top), the deepest idle state (from the core
 * zone where there is one, else the base model) and the LLC's asleep power; and every parameter no point
 * reaches (the base model's value), noting those only points at the package power limit reach. */
static void fit_gauge(const struct run *run, struct params *p, const struct fit_work *fw)
{
        const struct energy_model *m = &run->h->model;

        for (unsigned j = 0; j < p->n; j++) {
                bool reached = false, reached_capped = false;
                p->value[j] = *p->field[j];
                p->source[j] = CALIB_FITTED;
                for (unsigned i = 0; i < fw->n_all; i++)
                        if (fabs(fw->coef[i * p->n + j]) > RANK_TOL) {
                                reached |= i < fw->n;
                                reached_capped |= i >= fw->n;
                        }
                if (!reached) {
                        p->fixed[j] = true;
                        p->source[j] = CALIB_BASE;
                        p->capped_only[j] = reached_capped;
                }
        }
        for (unsigned j = 0; j < p->n; j++) {
                if (p->field[j] == &m->idle[m->n_idle - 1].power_mw) {
                        double sum = 0.0;
                        unsigned k = 0;
                        for (unsigned i = 0; i < run->n_specs; i++)
                                if (run->specs[i].core_mw >= 0.0 && strncmp(run->specs[i].name, "idle", 4) == 0) {
                                        sum += run->specs[i].core_mw;
                                        k++;
                                }
                        p->fixed[j] = true;
                        p->capped_only[j] = false;
                        if (k > 0 && run->h->n_cores > 0) {
                                p->value[j] = sum / k / run->h->n_cores;
                                p->source[j] = CALIB_CORE_ZONE;
                        } else
                                p->source[j] = CALIB_BASE;
                }
                if (m->domain[EM_DOMAIN_LLC].present && p->field[j] == &m->domain[EM_DOMAIN_LLC].asleep_mw) {
                        p->fixed[j] = true;
                        p->capped_only[j] = false;
                        p->source[j] = CALIB_BASE;
                }
        }
}

/*
 * Step 5c, least squares for the free parameters, the fixed ones moved to the right-hand side.  The points
 * at the package power limit are not in it; fewer points left than the parameters the points were planned
 * to determine (the free ones and those only points at the limit reached) is a failure, not a model of the
 * base's values: every point at the limit leaves no point and no free parameter, and "succeeded".
 */
static int fit_solve(struct run *run, struct params *p, struct fit_work *fw)
{
        unsigned n = fw->n, n_free = 0, n_capped_only = 0, idx[MAX_PARAMS], bad = 0;
        double x[MAX_PARAMS];
        int r;

        for (unsigned j = 0; j < p->n; j++) {
                if (!p->fixed[j])
                        idx[n_free++] = j;
                n_capped_only += p->capped_only[j];
        }
        if (fw->n_all > n && (n == 0 || n < n_free + n_capped_only))
                return fail(run, -EDOM, "%u of the %u points reached 97%% of the package power limit "
                            "(PackagePowerLimitMW = %u of the base model) and were left out: %u points cannot "
                            "determine %u parameters", fw->n_all - n, fw->n_all,
                            run->cfg->base->package_power_limit_mw, n, n_free + n_capped_only);
        if (n == 0)
                return fail(run, -EDOM, "no point to fit");
        for (unsigned i = 0; i < n; i++) {
                fw->b[i] = run->specs[fw->use[i]].pkg_mw;
                for (unsigned j = 0; j < p->n; j++)
                        if (p->fixed[j])
                                fw->b[i] -= fw->coef[i * p->n + j] * p->value[j];
        }
        if (n_free > n)
                return fail(run, -EDOM, "%u points cannot determine %u parameters", n, n_free);
        for (unsigned i = 0; i < n; i++)
                for (unsigned f = 0; f < n_free; f++)
                        fw->A[i * n_free + f] = fw->coef[i * p->n + idx[f]];
        r = lstsq(fw->A, fw->b, n, n_free, x, &bad);
        if (r == -EDOM)
                return fail(run, r, "the points do not determine %s", p->name[idx[bad]]);
        if (r < 0)
                return fail(run, r, "out of memory");
        for (unsigned f = 0; f < n_free; f++)
                p->value[idx[f]] = x[f];
        return 0;
}

/* Step 5d, a quiet power no point reached: where the base model has it between awake and asleep. */
static void fit_quiet(struct params *p, const struct energy_model *base)
{
        for (unsigned j = 0; j < p->n; j++) {
                int d = p->quiet_of[j];
                if (d < 0 || p->source[j] != CALIB_BASE)
                        continue;
                const struct em_idle_domain *bd = &base->domain[d];
                double w = p->value[j - 1], s = p->value[j + 1]; /* awake, quiet, asleep are added in that order */
                double frac = bd->awake_mw > bd->asleep_mw
                                      ? (double) (bd->quiet_mw - bd->asleep_mw) / (bd->awake_mw - bd->asleep_mw) : 1.0;
                p->value[j] = s + frac * (w - s);
        }
}

/* Step 5e, round into the model, then the model's order rules (counting every value moved); name; validate. */
static int fit_round(struct run *run, const struct params *p, unsigned *adjusted)
{
        struct energy_model *m = &run->h->model;
        struct em_error err = { 0 };

        for (unsigned j = 0; j < p->n; j++)
                *p->field[j] = to_mw(p->value[j], adjusted);
        for (unsigned l = 1; l < m->n_levels; l++)
                if (m->levels[l].active_mw < m->levels[l - 1].active_mw) {
                        m->levels[l].active_mw = m->levels[l - 1].active_mw;
                        (*adjusted)++;
                }
        for (unsigned i = 0; i < m->n_idle; i++) {
                uint32_t cap = i == 0 ? m->levels[0].active_mw : m->idle[i - 1].power_mw;
                if (m->idle[i].power_mw > cap) {
                        m->idle[i].power_mw = cap;
                        (*adjusted)++;
                }
        }
        for (int d = 0; d < _EM_DOMAIN_MAX; d++) {
                struct em_idle_domain *dd = &m->domain[d];
                if (!dd->present)
                        continue;
                if (dd->quiet_mw > dd->awake_mw) {
                        dd->quiet_mw = dd->awake_mw;
                        (*adjusted)++;
                }
                if (dd->asleep_mw > dd->quiet_mw) {
                        dd->asleep_mw = dd->quiet_mw;
                        (*adjusted)++;
                }
        }
        snprintf(m->name, sizeof(m->name), "%s", run->cfg->name ? run->cfg->name : "calibrated");
        if (energy_model_validate(m, &err) < 0)
                return fail(run, -EINVAL, "the fitted model is not valid: %s", err.message);
        return 0;
}

/* Report: the fitted model against every point. */
static void fit_report(struct run *run, const struct params *p, unsigned adjusted, struct fit_work *fw)
{
        struct calib_report *rep = run->rep;
        double ss = 0.0, mx = 0.0;

        rep->n_params = p->n;
        for (unsigned j = 0; j < p->n; j++) {
                snprintf(rep->params[j].name, sizeof(rep->params[j].name), "%s", p->name[j]);
                rep->params[j].value_mw = p->value[j];
                rep->params[j].source = p->source[j];
        }
        rep->adjusted = adjusted;
        rep->n_points = run->n_specs;
        for (unsigned i = 0; i < run->n_specs; i++) {
                const struct spec *s = &run->specs[i];
                struct calib_point *pt = &rep->points[i];
                double busy = 0.0;
                unsigned nb = 0;

                for (unsigned c = 0; c < run->n_cpus; c++)
                        if (s->duty[c]) {
                                busy += s->busy[c];
                                nb++;
                        }
                *pt = (struct calib_point) {
                        .level = s->level, .n_busy = nb, .measured_mw = s->pkg_mw, .core_mw = s->core_mw,
                        .dram_mw = s->dram_mw, .psys_mw = s->psys_mw,
                        .fitted_mw = fit_spec_power(run, s, fw),
                        .busy_ratio = nb ? busy / nb : 0.0, .pkg_max_mw = s->pkg_max_mw,
                        .capped = spec_capped(run, s),
                };
                snprintf(pt->name, sizeof(pt->name), "%s", s->name);
                for (unsigned c = 0; c < run->n_cpus; c++)
                        if (s->duty[c] && s->busy[c] < STARVED_RATIO * s->duty[c] / 1000.0) {
                                rep->starved++;
                                break;
                        }
                if (pt->capped)
                        continue;
                double res = s->pkg_mw > 0 ? (pt->fitted_mw - s->pkg_mw) / s->pkg_mw * 100.0 : 0.0;
                ss += res * res;
                mx = MAX(mx, fabs(res));
        }
        if (run->n_specs >= 2 && run->specs[0].pkg_mw > 0)
                rep->idle_drift_pct = (run->specs[run->n_specs - 1].pkg_mw - run->specs[0].pkg_mw) /
                                      run->specs[0].pkg_mw * 100.0;
        rep->rms_residual_pct = fw->n ? sqrt(ss / fw->n) : 0.0;
        rep->max_residual_pct = mx;
}

/* The written model: the base model (its platform, PSU, power limit, turbo table and wake-up
 * energies: not seen by RAPL, not fitted) with the fitted CPU watts. */
static int fit_output(struct run *run, struct energy_model *ret)
{
        const struct energy_model *m = &run->h->model;
        struct energy_model out = *run->cfg->base;
        struct em_error err = { 0 };

        for (unsigned l = 0; l < m->n_levels; l++)
                out.levels[l].active_mw = m->levels[l].active_mw;
        for (unsigned i = 0; i < m->n_idle; i++)
                out.idle[i].power_mw = m->idle[i].power_mw;
        for (int d = 0; d < _EM_DOMAIN_MAX; d++) {
                out.domain[d].awake_mw = m->domain[d].awake_mw;
                out.domain[d].quiet_mw = m->domain[d].quiet_mw;
                out.domain[d].asleep_mw = m->domain[d].asleep_mw;
        }
        snprintf(out.name, sizeof(out.name), "%s", m->name);
        if (energy_model_validate(&out, &err) < 0)
                return fail(run, -EINVAL, "the fitted model is not valid: %s", err.message);
        *ret = out;
        return 0;
}

/* Step 5 (see the top).  The host's model (run->h->model) serves as scratch and is restored in every case. */
static int fit(struct run *run, struct energy_model *ret)
{
        struct energy_model *m = &run->h->model;
        const struct energy_model saved = *m;
        struct fit_work fw = { 0 };
        unsigned adjusted = 0;
        struct params p;
        int r;

        for (unsigned i = 0; i < run->n_specs; i++)
                if (!spec_capped(run, &run->specs[i]))
                        fw.use[fw.n++] = i;
        fw.n_all = fw.n;
        for (unsigned i = 0; i < run->n_specs; i++)
                if (spec_capped(run, &run->specs[i]))
                        fw.use[fw.n_all++] = i;
        run->rep->capped = run->n_specs - fw.n;
        params_build(run->h, &p);
        r = fit_work_alloc(run, &p, &fw);
        if (r < 0)
                goto out;
        fit_coefficients(run, &p, &fw);
        *m = saved;
        fit_gauge(run, &p, &fw);
        r = fit_solve(run, &p, &fw);
        if (r < 0)
                goto out;
        fit_quiet(&p, &saved);
        r = fit_round(run, &p, &adjusted);
        if (r < 0)
                goto out;
        fit_report(run, &p, adjusted, &fw);
        r = fit_output(run, ret);
out:
        *m = saved;
        fit_work_free(&fw);
        return r;
}

/* What the sysfs driver has for the operator (a knob class denied, a write failed). */
static void calib_on_event(void *userdata, const struct power_event *ev)
{
        char msg[512];

        power_event_format(ev, msg, sizeof(msg));
        log_full_errno(power_event_level(ev), 0, "%s", msg);
}

/* ------------------------------------------------------------ run */

static int restore(struct run *run, const char *when)
{
        struct restore_stats st = { 0 };
        int r;

        r = journal_restore_builtin(run->cfg->journal, run->cfg->sysfs_root, NULL, &st);
        run->rep->restore.restored += st.restored;
        run->rep->restore.unchanged += st.unchanged;
        run->rep->restore.foreign += st.foreign;
        run->rep->restore.gone += st.gone;
        run->rep->restore.failed += st.failed;
        run->rep->restore.skipped += st.skipped;
        if (r < 0)
                return r;
        if (r > 0) {
                snprintf(run->rep->error, sizeof(run->rep->error),
                         "%s: %d knob(s) could not be restored and stay in the journal: run vmmpowerd --restore", when, r);
                return -EBUSY;
        }
        return 0;
}

/*
 * What the package counters see of a model: the cores and the idle domains.  The platform (PlatformPowerMW,
 * PlatformBusyPowerMW) is outside the packages and the PSU loss (PsuEfficiency) is wall power; the power limit and
 * the turbo table are handled by the points (plan_points(), spec_capped()), not by the equations; the points have
 * no vCPU wake-ups (WakeEnergyUJ).  None of them is fitted: the written model keeps the base model's.
 */
static void cpu_part(const struct energy_model *base, struct energy_model *ret)
{
        *ret = *base;
        ret->platform_mw = 0;
        ret->platform_busy_mw = 0;
        ret->psu_efficiency_permille = 1000;
        ret->package_power_limit_mw = 0;
        for (unsigned l = 0; l < ret->n_levels; l++)
                ret->levels[l].max_active_cores = 0;
        for (unsigned i = 0; i < ret->n_idle; i++)
                ret->idle[i].wake_energy_uj = 0;
        for (int d = 0; d < _EM_DOMAIN_MAX; d++)
                ret->domain[d].wake_energy_uj = 0;
}

static int setup(struct run *run)
{
        const struct calib_config *cfg = run->cfg;
        const struct energy_model *m;
        struct energy_model cpu;
        struct em_error err;
        struct power_driver_config pc = { .sysfs_root = cfg->sysfs_root, .journal = cfg->journal,
                                          .on_event = calib_on_event };
        int r;

        cpu_part(cfg->base, &cpu);
        r = em_host_check(cfg->topo, &cpu, &err);
        if (r < 0)
                return fail(run, r, "the base model does not fit this host: %s", err.message);
        r = em_host_new(cfg->topo, &cpu, &run->h);
        if (r < 0)
                return fail(run, r, "the base model does not fit this host: %s", strerror(-r));
        m = &run->h->model;
        if (m->n_levels > 1 && run->t->n_policies == 0)
                return fail(run, -EOPNOTSUPP, "the base model has %u perf levels but the host has no cpufreq "
                            "policy to hold them", m->n_levels);
        run->n_cpus = run->t->n_cpus;
        run->specs = calloc(CALIB_MAX_POINTS, sizeof(*run->specs));
        run->cpuidle_index = malloc((size_t) MAX(run->n_cpus, 1u) * m->n_idle * sizeof(int));
        if (!run->specs || !run->cpuidle_index)
                return fail(run, -ENOMEM, "out of memory");
        for (unsigned c = 0; c < run->n_cpus; c++)
                for (unsigned i = 0; i < m->n_idle; i++) {
                        int *ix = &run->cpuidle_index[c * m->n_idle + i];
                        *ix = -1;
                        for (unsigned k = 0; k < run->t->cpus[c].n_idle_states; k++)
                                if (strcmp(run->t->cpus[c].idle[k].name, m->idle[i].name) == 0)
                                        *ix = (int) k;
                }
        r = power_driver_new("sysfs", &pc, &run->drv);
        if (r < 0)
                return fail(run, r, "the sysfs power driver failed: %s", strerror(-r));
        return 0;
}

int calibrate_run(const struct calib_config *cfg, struct energy_model *ret, struct calib_report *report)
{
        struct run run = { .cfg = cfg, .t = cfg->topo, .rep = report, .cur_level = -1 };
        struct energy_model fitted;
        nsec_t start;
        int r, rr;

        *report = (struct calib_report) { 0 };
        if (!cfg->ops || !cfg->ops->read_energy || !cfg->ops->load_start || !cfg->ops->load_busy_ns ||
            !cfg->ops->load_stop || !cfg->ops->now || !cfg->ops->sleep_until || !cfg->journal || !cfg->base ||
            !cfg->topo || cfg->zones.n == 0 || cfg->dwell_ns <= 0 || cfg->sample_ns <= 0 || cfg->period_ns <= 0 ||
            cfg->settle_ns < 0)
                return fail(&run, -EINVAL, "invalid configuration");
        /* before measuring for minutes: the name must be one the written file parses back with */
        if (cfg->name && !energy_model_name_valid(cfg->name)) {
                char shown[80];
                escape_bytes(cfg->name, strlen(cfg->name), shown, sizeof(shown));
                return fail(&run, -EINVAL, "invalid model name '%s' (1..63 letters, digits, '-', '_', '.')", shown);
        }
        start = cfg->ops->now(cfg->ops_userdata);
        /* The counters must be readable (root only on current kernels) before any knob changes. */
        {
                uint64_t uj[CALIB_MAX_ZONES];
                r = read_counters(&run, uj);
                if (r < 0)
                        return r;
        }
        /* A previous run that died: put the host back before measuring it. */
        r = restore(&run, "before starting");
        if (r < 0)
                return r;
        r = setup(&run);
        if (r == 0)
                r = plan_points(&run);
        for (unsigned i = 0; r == 0 && i < run.n_specs; i++) {
                struct spec *s = &run.specs[i];
                r = apply_knobs(&run, s);
                if (r == 0)
                        r = measure(&run, s);
                if (r == -EINTR)
                        fail(&run, r, "interrupted at point %s", s->name);
                if (r == 0 && cfg->progress) {
                        fprintf(cfg->progress, "point %2u/%u %-22s %10.1f mW", i + 1, run.n_specs, s->name, s->pkg_mw);
                        if (s->core_mw >= 0)
                                fprintf(cfg->progress, "  core %10.1f mW", s->core_mw);
                        fputc('\n', cfg->progress);
                        fflush(cfg->progress);
                }
        }
        /* Every knob back before the numbers are crunched (or the error returned). */
        power_driver_free(run.drv);
        run.drv = NULL;
        rr = restore(&run, r < 0 ? "after the failure" : "after measuring");
        if (r == 0 && rr < 0)
                r = rr;
        if (r == 0)
                r = fit(&run, &fitted);
        report->elapsed_ns = cfg->ops->now(cfg->ops_userdata) - start;
        for (unsigned i = 0; i < run.n_specs; i++) {
                free(run.specs[i].duty);
                free(run.specs[i].state);
                free(run.specs[i].busy);
        }
        free(run.specs);
        free(run.cpuidle_index);
        em_host_free(run.h);
        if (r < 0)
                return r;
        *ret = fitted;
        return 0;
}

/* ------------------------------------------------------------ output */

static const char *source_name(enum calib_param_source s)
{
        switch (s) {
        case CALIB_FITTED:
                return "fitted";
        case CALIB_CORE_ZONE:
                return "core zone";
        case CALIB_BASE:
                return "base model (not determined by the counters)";
        }
        return "?";
}

void calib_report_print(const struct calib_report *r, FILE *f)
{
        fprintf(f, "%-24s %5s %6s %12s %12s %8s %10s %10s\n", "point", "busy", "ratio", "measured_mw", "fitted_mw",
                "resid%", "core_mw", "dram_mw");
        for (unsigned i = 0; i < r->n_points; i++) {
                const struct calib_point *p = &r->points[i];
                fprintf(f, "%-24s %5u %6.3f %12.1f %12.1f %8.2f", p->name, p->n_busy, p->busy_ratio, p->measured_mw,
                        p->fitted_mw, p->measured_mw > 0 ? (p->fitted_mw - p->measured_mw) / p->measured_mw * 100 : 0.0);
                if (p->core_mw >= 0)
                        fprintf(f, " %10.1f", p->core_mw);
                else
                        fprintf(f, " %10s", "-");
                if (p->dram_mw >= 0)
                        fprintf(f, " %10.1f", p->dram_mw);
                else
                        fprintf(f, " %10s", "-");
                if (p->capped)
                        fprintf(f, "  capped: not fitted");
                fputc('\n', f);
        }
        if (r->turbo_skipped)
                fprintf(f, "%u point(s) not run: more busy cores than their level's MaxActiveCores (turbo table)\n",
                        r->turbo_skipped);
        if (r->capped)
                fprintf(f, "note: %u point(s) left out of the fit: a package zone at %.0f%% or more of "
                        "PackagePowerLimitMW, where the hardware may run below the asked level\n",
                        r->capped, LIMIT_CAPPED_RATIO * 100);
        fprintf(f, "not fitted, the base model's: PlatformPowerMW, PlatformBusyPowerMW, PsuEfficiency (wall power: "
                "RAPL does not see them), PackagePowerLimitMW, MaxActiveCores, WakeEnergyUJ\n");
        fprintf(f, "residuals: rms %.2f%%, max %.2f%%; %u value(s) moved to satisfy the model's order rules\n",
                r->rms_residual_pct, r->max_residual_pct, r->adjusted);
        fprintf(f, "idle at the end against the start: %+.2f%%\n", r->idle_drift_pct);
        if (fabs(r->idle_drift_pct) > IDLE_DRIFT_WARN_PCT)
                fprintf(f, "warning: idle power drifted by more than %.0f%% over the run: the host's background or "
                        "temperature changed\n", IDLE_DRIFT_WARN_PCT);
        if (r->starved)
                fprintf(f, "warning: in %u point(s) a load thread ran less than %.0f%% of its duty: other work on "
                        "this host; the active powers are less certain (run it on an idle host)\n",
                        r->starved, STARVED_RATIO * 100);
        for (unsigned j = 0; j < r->n_params; j++)
                fprintf(f, "%-40s %12.1f mW  %s\n", r->params[j].name, r->params[j].value_mw,
                        source_name(r->params[j].source));
        fprintf(f, "knobs restored: %u, already original: %u, changed by someone else: %u, gone: %u, failed: %u\n",
                r->restore.restored, r->restore.unchanged, r->restore.foreign, r->restore.gone, r->restore.failed);
}

void calib_model_write(const struct energy_model *m, const struct calib_report *r, const char *host, FILE *f)
{
        double dram = 0.0, psys = 0.0;
        unsigned nd = 0, np = 0;

        fprintf(f, "# Fitted by vmmpower-calibrate on %s from its powercap (RAPL) package counters:\n", host);
        fprintf(f, "# %u points, residuals rms %.2f%% max %.2f%%, %u value(s) moved by the order rules.\n",
                r->n_points, r->rms_residual_pct, r->max_residual_pct, r->adjusted);
        fprintf(f, "# Not determined by the counters (base model's values): ");
        bool any = false;
        for (unsigned j = 0; j < r->n_params; j++)
                if (r->params[j].source == CALIB_BASE) {
                        fprintf(f, "%s%s", any ? ", " : "", r->params[j].name);
                        any = true;
                }
        fprintf(f, "%s.\n", any ? "" : "none");
        fprintf(f, "# Not fitted (base model's values): PlatformPowerMW, PlatformBusyPowerMW, PsuEfficiency (outside\n"
                   "# the packages: RAPL does not see them), PackagePowerLimitMW, MaxActiveCores, WakeEnergyUJ.\n");
        if (r->capped)
                fprintf(f, "# %u point(s) at the package power limit left out of the fit.\n", r->capped);
        if (r->starved)
                fprintf(f, "# Warning: %u point(s) had load threads running under %.0f%% of their duty (a busy host).\n",
                        r->starved, STARVED_RATIO * 100);
        for (unsigned i = 0; i < r->n_points; i++) {
                if (r->points[i].dram_mw >= 0) {
                        dram += r->points[i].dram_mw;
                        nd++;
                }
                if (r->points[i].psys_mw >= 0) {
                        psys += r->points[i].psys_mw;
                        np++;
                }
        }
        if (nd)
                fprintf(f, "# DRAM zones (not in the model): %.0f mW on average over the points.\n", dram / nd);
        if (np)
                fprintf(f, "# psys zone (platform, not in the model): %.0f mW on average over the points.\n", psys / np);
        fprintf(f, "# RAPL package power is CPU package power, not wall power (docs/calibration.md).\n");
        energy_model_write(m, f);
}
