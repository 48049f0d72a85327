/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Coexistence with other tuners: the start-up (and reload) check of
 * coexist.h.  Two scans, both read-only:
 *
 *  1. Tuners: every /proc/<pid> whose comm is a known tuner's name (comm is
 *     cut at 15 bytes: a longer name must also be the basename of one of the
 *     first three cmdline arguments, so "power-profiles-" alone is not
 *     power-profiles-daemon).  Only root's processes count: anyone may name
 *     a process "tuned".  Kernel threads and zombies (empty cmdline) are
 *     skipped; processes vanishing mid-walk are normal.
 *  2. Knobs: every cpufreq policy, every CPU's cpuidle state `disable` and
 *     PM QoS resume latency, compared with the kernel's default (coexist.h).
 *     A missing file is "no such knob", not an error.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coexist.h"
#include "log.h"
#include "topology.h"
#include "util.h"

#define C_FREQ (1u << POWER_KNOB_CPUFREQ)
#define C_IDLE (1u << POWER_KNOB_CPUIDLE)
#define C_QOS (1u << POWER_KNOB_PM_QOS)
#define COMM_MAX 15 /* TASK_COMM_LEN - 1 */

static const struct tuner_def {
        const char *name;
        unsigned classes;
        bool refuses;
} tuner_defs[] = {
        /* tuned's cpu plugin: governor, EPB/EPP, min_perf_pct, force_latency
         * (cpuidle state disable or /dev/cpu_dma_latency), pm_qos_resume_latency_us */
        { "tuned", C_FREQ | C_IDLE | C_QOS, true },
        /* profiles write EPP (and platform_profile) */
        { "power-profiles-daemon", C_FREQ, true },
        /* Intel low power mode daemon: EPP/EPB per mode */
        { "intel_lpmd", C_FREQ, true },
        { "auto-cpufreq", C_FREQ, true },
        /* cpupower frequency-set / idle-set (a running one: monitor loops, scripts) */
        { "cpupower", C_FREQ | C_IDLE, true },
        /* thermal protection: never refused, never pre-empted (see coexist.h) */
        { "thermald", 0, false },
};

void coexist_report_init(struct coexist_report *r)
{
        *r = (struct coexist_report) { 0 };
}

void coexist_report_clear(struct coexist_report *r)
{
        for (size_t i = 0; i < r->n_knobs; i++)
                free(r->knobs[i].path);
        free(r->knobs);
        coexist_report_init(r);
}

/* ---------------------------------------------------------------- tuners */

/* The first size-1 bytes of a file (cmdline may be long), NUL-terminated; length or -errno. */
static ssize_t read_head(const char *path, char *buf, size_t size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        ssize_t n;

        if (fd < 0)
                return -errno;
        n = read(fd, buf, size - 1);
        if (n < 0)
                n = -errno;
        else
                buf[n] = '\0';
        close(fd);
        return n;
}

static bool argv_has_basename(const char *cmdline, size_t len, const char *name)
{
        size_t off = 0;

        for (unsigned i = 0; i < 3 && off < len; i++) {
                const char *arg = cmdline + off, *slash = strrchr(arg, '/');

                if (strcmp(slash ? slash + 1 : arg, name) == 0)
                        return true;
                off += strlen(arg) + 1;
        }
        return false;
}

static const struct tuner_def *match_tuner(const char *comm, const char *cmdline, size_t len)
{
        for (size_t i = 0; i < ELEMENTSOF(tuner_defs); i++) {
                const char *name = tuner_defs[i].name;
                size_t nl = strlen(name);

                if (nl <= COMM_MAX) {
                        if (strcmp(comm, name) == 0)
                                return &tuner_defs[i];
                } else if (strlen(comm) == COMM_MAX && strncmp(comm, name, COMM_MAX) == 0 &&
                           argv_has_basename(cmdline, len, name))
                        return &tuner_defs[i];
        }
        return NULL;
}

static void add_tuner(struct coexist_report *r, const struct tuner_def *t, pid_t pid)
{
        struct coexist_tuner *x;

        if (r->n_tuners >= COEXIST_MAX_TUNERS)
                return;
        x = &r->tuners[r->n_tuners++];
        snprintf(x->name, sizeof(x->name), "%s", t->name);
        x->pid = pid;
        x->classes = t->classes;
        x->refuses = t->refuses;
}

int coexist_scan_tuners(const char *procfs_root, struct coexist_report *r)
{
        const char *root = procfs_root ? procfs_root : "/proc";
        DIR *d = opendir(root);
        struct dirent *de;

        r->n_tuners = 0;
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char path[PATH_MAX], comm[64], cmdline[1024];
                const struct tuner_def *t;
                struct stat st;
                ssize_t n, len;
                uint32_t pid;

                if (parse_u32(de->d_name, &pid) < 0 || pid == 0 || pid > INT_MAX)
                        continue;
                /* Tuners run as root: any user may name a process "tuned" (prctl
                 * PR_SET_NAME), and must not make vmmpower back off or refuse. */
                if (fstatat(dirfd(d), de->d_name, &st, 0) < 0 || st.st_uid != 0)
                        continue;
                if (path_printf(path, sizeof(path), "%s/%s/comm", root, de->d_name) < 0)
                        continue;
                n = read_small_file(path, comm, sizeof(comm));
                if (n < 0) {
                        if (n != -ENOENT && n != -ESRCH)
                                r->proc_errors++;
                        continue;
                }
                if (path_printf(path, sizeof(path), "%s/%s/cmdline", root, de->d_name) < 0)
                        continue;
                len = read_head(path, cmdline, sizeof(cmdline));
                if (len <= 0) { /* gone, kernel thread or zombie */
                        if (len < 0 && len != -ENOENT && len != -ESRCH)
                                r->proc_errors++;
                        continue;
                }
                t = match_tuner(comm, cmdline, (size_t) len);
                if (t)
                        add_tuner(r, t, (pid_t) pid);
        }
        closedir(d);
        return 0;
}

/* ---------------------------------------------------------------- knobs */

static int add_knob(struct coexist_report *r, enum power_knob_class cls, const char *found, const char *expected,
                    bool refuses, bool implied, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static int add_knob(struct coexist_report *r, enum power_knob_class cls, const char *found, const char *expected,
                    bool refuses, bool implied, const char *fmt, ...)
{
        struct coexist_knob *k;
        va_list ap;
        int n;

        if (r->n_knobs == r->alloc_knobs) {
                size_t na = r->alloc_knobs ? 2 * r->alloc_knobs : 16;
                struct coexist_knob *nk = realloc(r->knobs, na * sizeof(*nk));

                if (!nk)
                        return -ENOMEM;
                r->knobs = nk;
                r->alloc_knobs = na;
        }
        k = &r->knobs[r->n_knobs];
        *k = (struct coexist_knob) { .cls = cls, .refuses = refuses, .implied = implied };
        va_start(ap, fmt);
        n = vasprintf(&k->path, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -ENOMEM;
        escape_bytes(found, strlen(found), k->found, sizeof(k->found));
        snprintf(k->expected, sizeof(k->expected), "%s", expected);
        r->n_knobs++;
        return 0;
}

/* 1 and the value, 0 if the file does not exist, or -errno (counted). */
static int read_knob(const char *root, struct coexist_report *r, const char *rel, char *buf, size_t size)
{
        char path[PATH_MAX];
        ssize_t n;

        if (path_printf(path, sizeof(path), "%s/%s", root, rel) < 0)
                return -ENAMETOOLONG;
        n = read_small_file(path, buf, size);
        if (n == -ENOENT || n == -ENODEV || n == -ENXIO)
                return 0;
        if (n < 0) {
                r->sysfs_errors++;
                return (int) n;
        }
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
                buf[--n] = '\0';
        return 1;
}

static int read_knob_u32(const char *root, struct coexist_report *r, const char *rel, uint32_t *ret)
{
        char buf[64];
        int k = read_knob(root, r, rel, buf, sizeof(buf));

        if (k <= 0)
                return k;
        if (parse_u32(buf, ret) < 0) {
                r->sysfs_errors++;
                return -EINVAL;
        }
        return 1;
}

/* The governor a policy starts with: setpolicy drivers start in powersave. */
static const char *default_governor(const char *driver)
{
        if (strcmp(driver, "intel_pstate") == 0 || strcmp(driver, "amd-pstate-epp") == 0)
                return "powersave";
        return "schedutil";
}

static int scan_policy(const char *root, struct coexist_report *r, const char *pol)
{
        char rel[PATH_MAX], gov[64], drv[64] = "", num[32];
        uint32_t cmin, cmax, smin, smax;
        bool gov_away = false;
        int k;

#define REL(name) (path_printf(rel, sizeof(rel), "devices/system/cpu/cpufreq/%s/" name, pol) < 0 ? "" : rel)
        (void) read_knob(root, r, REL("scaling_driver"), drv, sizeof(drv));
        if (read_knob(root, r, REL("scaling_governor"), gov, sizeof(gov)) > 0 &&
            strcmp(gov, default_governor(drv)) != 0) {
                gov_away = true;
                k = add_knob(r, POWER_KNOB_CPUFREQ, gov, default_governor(drv), true, false,
                             "devices/system/cpu/cpufreq/%s/scaling_governor", pol);
                if (k < 0)
                        return k;
        }
        if (read_knob_u32(root, r, REL("cpuinfo_min_freq"), &cmin) <= 0 ||
            read_knob_u32(root, r, REL("cpuinfo_max_freq"), &cmax) <= 0)
                return 0; /* not a policy we can judge (nor one the driver will use) */
        if (read_knob_u32(root, r, REL("scaling_max_freq"), &smax) > 0 && (smax < cmax || gov_away)) {
                snprintf(num, sizeof(num), "%u", smax);
                k = add_knob(r, POWER_KNOB_CPUFREQ, num, smax < cmax ? "cpuinfo_max_freq" : "-", smax < cmax,
                             smax >= cmax, "devices/system/cpu/cpufreq/%s/scaling_max_freq", pol);
                if (k < 0)
                        return k;
        }
        if (read_knob_u32(root, r, REL("scaling_min_freq"), &smin) > 0 && (smin > cmin || gov_away)) {
                snprintf(num, sizeof(num), "%u", smin);
                k = add_knob(r, POWER_KNOB_CPUFREQ, num, smin > cmin ? "cpuinfo_min_freq" : "-", smin > cmin,
                             smin <= cmin, "devices/system/cpu/cpufreq/%s/scaling_min_freq", pol);
                if (k < 0)
                        return k;
        }
        if (gov_away && read_knob(root, r, REL("energy_performance_preference"), num, sizeof(num)) > 0) {
                k = add_knob(r, POWER_KNOB_CPUFREQ, num, "-", false, true,
                             "devices/system/cpu/cpufreq/%s/energy_performance_preference", pol);
                if (k < 0)
                        return k;
        }
#undef REL
        return 0;
}

static int scan_cpu(const char *root, struct coexist_report *r, const char *cpu)
{
        char rel[PATH_MAX], val[64];
        int k;

        if (path_printf(rel, sizeof(rel), "devices/system/cpu/%s/power/pm_qos_resume_latency_us", cpu) >= 0 &&
            read_knob(root, r, rel, val, sizeof(val)) > 0 && strcmp(val, "0") != 0) {
                k = add_knob(r, POWER_KNOB_PM_QOS, val, "0", true, false, "%s", rel);
                if (k < 0)
                        return k;
        }
        for (unsigned s = 0; s < 64; s++) {
                if (path_printf(rel, sizeof(rel), "devices/system/cpu/%s/cpuidle/state%u/disable", cpu, s) < 0)
                        break;
                k = read_knob(root, r, rel, val, sizeof(val));
                if (k == 0)
                        break;
                if (k > 0 && strcmp(val, "0") != 0) {
                        k = add_knob(r, POWER_KNOB_CPUIDLE, val, "0", false, false, "%s", rel);
                        if (k < 0)
                                return k;
                }
        }
        return 0;
}

/* Entries "<prefix><number>" of dir, in readdir order; fn for each. */
static int for_numbered(const char *root, const char *dir, const char *prefix, struct coexist_report *r,
                        int (*fn)(const char *, struct coexist_report *, const char *))
{
        char path[PATH_MAX];
        size_t pl = strlen(prefix);
        struct dirent *de;
        DIR *d;
        int ret = 0;

        if (path_printf(path, sizeof(path), "%s/%s", root, dir) < 0)
                return -ENAMETOOLONG;
        d = opendir(path);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        while ((de = readdir(d))) {
                uint32_t x;
                int k;

                if (strncmp(de->d_name, prefix, pl) != 0 || parse_u32(de->d_name + pl, &x) < 0)
                        continue;
                k = fn(root, r, de->d_name);
                if (k == -ENOMEM) {
                        ret = k;
                        break;
                }
        }
        closedir(d);
        return ret;
}

int coexist_scan_knobs(const char *sysfs_root, struct coexist_report *r)
{
        const char *root = sysfs_root ? sysfs_root : "/sys";
        int k;

        for (size_t i = 0; i < r->n_knobs; i++)
                free(r->knobs[i].path);
        r->n_knobs = 0;
        r->sysfs_errors = 0;
        k = for_numbered(root, "devices/system/cpu/cpufreq", "policy", r, scan_policy);
        if (k < 0)
                return k;
        k = for_numbered(root, "devices/system/cpu", "cpu", r, scan_cpu);
        if (k < 0)
                return k;
        r->knobs_scanned = true;
        return 0;
}

/* ---------------------------------------------------------------- verdict */

unsigned coexist_foreign_classes(const struct coexist_report *r)
{
        unsigned c = 0;

        for (size_t i = 0; i < r->n_tuners; i++)
                c |= r->tuners[i].classes;
        return c;
}

size_t coexist_refusals(const struct coexist_report *r)
{
        size_t n = 0;

        for (size_t i = 0; i < r->n_tuners; i++)
                n += r->tuners[i].refuses;
        for (size_t i = 0; i < r->n_knobs; i++)
                n += r->knobs[i].refuses;
        return n;
}

const char **coexist_foreign_paths(const struct coexist_report *r)
{
        const char **v = calloc(r->n_knobs + 1, sizeof(*v));
        size_t n = 0;

        if (!v)
                return NULL;
        for (size_t i = 0; i < r->n_knobs; i++)
                if (strstr(r->knobs[i].path, "/scaling_governor") == NULL) /* not a knob we write */
                        v[n++] = r->knobs[i].path;
        return v;
}

static void classes_string(unsigned c, char *buf, size_t size)
{
        size_t off = 0;

        buf[0] = '\0';
        for (unsigned i = 0; i < _POWER_KNOB_CLASS_MAX; i++)
                if (c & (1u << i))
                        off += (size_t) snprintf(buf + off, off < size ? size - off : 0, "%s%s", off ? ", " : "",
                                                 power_knob_class_to_string((enum power_knob_class) i));
        if (!buf[0])
                snprintf(buf, size, "none up front");
}

int coexist_log(const struct coexist_report *r, enum coexist_mode mode, const char *sysfs_root)
{
        const char *root = sysfs_root ? sysfs_root : "/sys";
        bool refuse = mode == COEXIST_REFUSE && coexist_refusals(r) > 0;
        size_t implied = 0;

        for (size_t i = 0; i < r->n_tuners; i++) {
                const struct coexist_tuner *t = &r->tuners[i];
                char cls[96];

                classes_string(t->classes, cls, sizeof(cls));
                if (refuse && t->refuses)
                        log_error("Another tuner is running: %s (pid %d); OtherTuners=refuse.", t->name, (int) t->pid);
                else
                        log_warning("Another tuner is running: %s (pid %d); leaving it these knobs: %s.", t->name,
                                    (int) t->pid, cls);
        }
        for (size_t i = 0; i < r->n_knobs; i++) {
                const struct coexist_knob *k = &r->knobs[i];

                if (k->implied) {
                        implied++;
                        continue;
                }
                if (refuse && k->refuses)
                        log_error("%s/%s holds \"%s\", not its default (%s): set by someone else; OtherTuners=refuse.",
                                  root, k->path, k->found, k->expected);
                else
                        log_internal(k->refuses ? LOG_LEVEL_WARNING : LOG_LEVEL_INFO, 0,
                                 "%s/%s holds \"%s\", not its default (%s): set by someone else, leaving it to them.",
                                 root, k->path, k->found, k->expected);
        }
        if (implied > 0 && !refuse)
                log_info("%zu more cpufreq knob(s) left alone because their policy's governor is not the default.",
                         implied);
        if (r->proc_errors + r->sysfs_errors > 0)
                log_warning("Coexistence check: %u procfs and %u sysfs entries unreadable, ignoring.", r->proc_errors,
                            r->sysfs_errors);
        if (refuse) {
                log_error("Refusing to run beside another tuner ([Host] OtherTuners=refuse): stop it and put the "
                          "knobs back to their defaults, or set OtherTuners=coexist.");
                return -EBUSY;
        }
        return 0;
}

/* ---------------------------------------------------------------- daemon */

int coexist_check(const char *procfs_root, const char *sysfs_root, enum coexist_mode mode, bool scan_knobs,
                  struct coexist_report *ret)
{
        int r;

        coexist_report_init(ret);
        r = coexist_scan_tuners(procfs_root, ret);
        if (r < 0)
                log_warning_errno(r, "Coexistence check: cannot list %s, not looking for other tuners: %m",
                                  procfs_root ? procfs_root : "/proc");
        if (scan_knobs) {
                r = coexist_scan_knobs(sysfs_root, ret);
                if (r == -ENOMEM)
                        return log_error_errno(r, "Coexistence check: %m");
                if (r < 0)
                        log_warning_errno(r, "Coexistence check: cannot read the knobs below %s, ignoring: %m",
                                          sysfs_root ? sysfs_root : "/sys");
        }
        r = coexist_log(ret, mode, sysfs_root);
        if (r < 0)
                coexist_report_clear(ret);
        return r;
}

void coexist_report_move_knobs(struct coexist_report *to, struct coexist_report *from)
{
        for (size_t i = 0; i < to->n_knobs; i++)
                free(to->knobs[i].path);
        free(to->knobs);
        to->knobs = from->knobs;
        to->n_knobs = from->n_knobs;
        to->alloc_knobs = from->alloc_knobs;
        to->knobs_scanned = from->knobs_scanned;
        to->sysfs_errors = from->sysfs_errors;
        from->knobs = NULL;
        from->n_knobs = from->alloc_knobs = 0;
}

void coexist_render(const struct coexist_report *r, enum coexist_mode mode, bool json, struct strbuf *out)
{
        size_t n_knobs = 0;

        for (size_t i = 0; i < r->n_knobs; i++)
                n_knobs += strstr(r->knobs[i].path, "/scaling_governor") == NULL;
        if (json) {
                strbuf_printf(out, ",\"coexist\":{\"mode\":\"%s\",\"tuners\":[", coexist_mode_to_string(mode));
                for (size_t i = 0; i < r->n_tuners; i++) {
                        strbuf_printf(out, "%s{\"name\":", i ? "," : "");
                        strbuf_json_string(out, r->tuners[i].name);
                        strbuf_printf(out, ",\"pid\":%d}", (int) r->tuners[i].pid);
                }
                strbuf_puts(out, "],\"knobs_set_by_others\":[");
                for (size_t i = 0; i < r->n_knobs; i++) {
                        strbuf_printf(out, "%s{\"path\":", i ? "," : "");
                        strbuf_json_string(out, r->knobs[i].path);
                        strbuf_puts(out, ",\"found\":");
                        strbuf_json_string(out, r->knobs[i].found);
                        strbuf_printf(out, ",\"class\":\"%s\"}", power_knob_class_to_string(r->knobs[i].cls));
                }
                strbuf_printf(out, "],\"foreign_classes\":%u}", coexist_foreign_classes(r));
                return;
        }
        strbuf_printf(out, "other tuners:  %s", coexist_mode_to_string(mode));
        if (r->n_tuners == 0)
                strbuf_puts(out, ", none running");
        for (size_t i = 0; i < r->n_tuners; i++)
                strbuf_printf(out, "%s%s (pid %d)", i ? ", " : "; running: ", r->tuners[i].name,
                              (int) r->tuners[i].pid);
        strbuf_printf(out, "; %zu knob(s) set by others at start, left to them\n", n_knobs);
}

/* ---------------------------------------------------------------- NUMA memory binding */

int coexist_numa_cpus(const struct topology *topo, const char *nodeset, cpuset_t *ret)
{
        cpuset_t nodes;
        int r;

        cpuset_zero(ret);
        if (!nodeset || !nodeset[0])
                return 0;
        r = cpuset_parse_list(nodeset, &nodes); /* the same list syntax: "0-1,3" */
        if (r < 0)
                return r;
        for (unsigned c = 0; c < topo->n_cpus; c++)
                if (topo->cpus[c].present && topo->cpus[c].node >= 0 &&
                    cpuset_isset(&nodes, (unsigned) topo->cpus[c].node))
                        cpuset_set(ret, c);
        return cpuset_count(ret) > 0 ? 0 : -ENOENT;
}
