/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Per-pCPU load and idle residency, sampled once per control period.
 *
 * Sources (both opened once at pcpu_stat_new() and re-read with pread() at
 * offset 0, which makes procfs/sysfs regenerate the content):
 *
 *  - <procfs>/stat "cpuN" lines: cumulative USER_HZ ticks (sysconf(_SC_CLK_TCK))
 *    of user nice system idle iowait irq softirq steal guest guest_nice.
 *    busy = user+nice+system+irq+softirq+steal (guest time is already part of
 *    user/nice), idle = idle+iowait.  Ticks are converted to ns.
 *  - <sysfs>/devices/system/cpu/cpuN/cpuidle/stateK/{time,usage}: cumulative
 *    residency (us) and entry count per idle state.
 *
 * Derived per period (struct pcpu_load):
 *
 *    busy_ratio  = Δbusy / (Δbusy + Δidle)   (0 when both are 0)
 *    steal_ratio = Δsteal / (Δbusy + Δidle)
 *
 *  The denominator is the CPU's own accounted time rather than the wall
 *  clock, so tick granularity (10 ms at USER_HZ=100) cancels out.
 *
 *    state_residency[k] = Δtime_us[k] * 1000 / Δwall_ns
 *
 *  The kernel adds a state's residency when the CPU *leaves* it, so an idle
 *  period that spans a sample boundary is credited to the next period and a
 *  single period can show more than 100%.  Each residency is therefore
 *  clamped to [0,1] and, if the sum still exceeds 1, all are scaled so that
 *  they sum to 1 (documented approximation; the long-run totals are exact).
 *
 * A counter that goes backwards (CPU re-onlined, driver reloaded) makes that
 * CPU's load invalid for one period instead of producing a huge delta.  A
 * CPU whose "cpuN" line is missing (offline) has no load.  An idle-state file
 * that does not exist is left out (its counters read as 0); any other open
 * failure (EMFILE: 1 + 2 x CPUs x states fds are kept) fails pcpu_stat_new().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "pcpu_stat.h"
#include "util.h"

struct pcpu {
        int time_fd[TOPO_MAX_IDLE_STATES];
        int usage_fd[TOPO_MAX_IDLE_STATES];
        unsigned n_states;
        bool have_cur, have_prev, load_valid;
        struct pcpu_sample cur, prev;
        struct pcpu_load load;
};

struct stat_line {
        bool seen;              /* "cpuN" line present in the current read */
        uint64_t busy_ns, idle_ns, steal_ns;
};

struct pcpu_stat {
        unsigned n_cpus;
        struct pcpu *cpus;
        struct stat_line *lines; /* parse target, committed only when the whole read parsed */
        int stat_fd;
        char *buf;
        size_t buf_size;
        long clk_tck;
        nsec_t prev_now, cur_now;
        unsigned n_samples;
};

static uint64_t ticks_to_ns(uint64_t ticks, long hz)
{
        uint64_t h = (uint64_t) hz;
        return ticks / h * (uint64_t) NSEC_PER_SEC + ticks % h * (uint64_t) NSEC_PER_SEC / h;
}

int pcpu_parse_stat_line(const char *line, uint64_t ticks[10])
{
        uint64_t v[10] = { 0 };
        const char *p = line;
        unsigned n = 0;
        int cpu = -1;

        if (strncmp(p, "cpu", 3) != 0)
                return -EINVAL;
        p += 3;
        if (*p >= '0' && *p <= '9') {
                unsigned c = 0;
                for (; *p >= '0' && *p <= '9'; p++) {
                        c = c * 10 + (unsigned) (*p - '0');
                        if (c >= VP_MAX_CPUS)
                                return -EINVAL;
                }
                cpu = (int) c;
        }
        if (*p != ' ')
                return -EINVAL;
        /* The kernel separates the aggregate line's name with two spaces. */
        while (*p == ' ')
                p++;
        for (;;) {
                uint64_t x = 0;

                if (*p < '0' || *p > '9')
                        return -EINVAL;
                for (; *p >= '0' && *p <= '9'; p++) {
                        uint64_t d = (uint64_t) (*p - '0');
                        if (x > (UINT64_MAX - d) / 10)
                                return -EINVAL;
                        x = x * 10 + d;
                }
                if (n < 10)
                        v[n] = x; /* fields beyond the 10 known ones are ignored */
                n++;
                if (*p == ' ' && p[1] != '\0' && p[1] != '\n') {
                        p++;
                        continue;
                }
                if (*p == ' ')
                        p++;
                if (*p == '\n')
                        p++;
                if (*p != '\0')
                        return -EINVAL;
                break;
        }
        if (n < 4) /* user nice system idle exist since forever */
                return -EINVAL;
        memcpy(ticks, v, sizeof(v));
        return cpu;
}

static void close_fds(struct pcpu *c)
{
        for (unsigned k = 0; k < TOPO_MAX_IDLE_STATES; k++) {
                if (c->time_fd[k] >= 0)
                        close(c->time_fd[k]);
                if (c->usage_fd[k] >= 0)
                        close(c->usage_fd[k]);
                c->time_fd[k] = c->usage_fd[k] = -1;
        }
}

void pcpu_stat_free(struct pcpu_stat *ps)
{
        if (!ps)
                return;
        if (ps->cpus)
                for (unsigned i = 0; i < ps->n_cpus; i++)
                        close_fds(&ps->cpus[i]);
        if (ps->stat_fd >= 0)
                close(ps->stat_fd);
        free(ps->cpus);
        free(ps->lines);
        free(ps->buf);
        free(ps);
}

/* Any error but ENOENT (state gone: left out) is fatal; EMFILE is the likely one
 * on big hosts: 1 + 2 x CPUs x idle states fds are kept open. */
static int open_failed(const char *path)
{
        int err = errno;

        if (err == EMFILE || err == ENFILE)
                return log_error_errno(err, "Failed to open %s: %m (pcpu_stat keeps 2 fds per CPU and "
                                       "idle state open; raise RLIMIT_NOFILE)", path);
        return log_error_errno(err, "Failed to open %s: %m", path);
}

int pcpu_stat_new(const struct topology *t, const char *procfs_root, const char *sysfs_root,
                  struct pcpu_stat **ret)
{
        struct pcpu_stat *ps;
        char path[512];
        int r;

        if (!procfs_root || !*procfs_root)
                procfs_root = "/proc";
        if (!sysfs_root || !*sysfs_root)
                sysfs_root = "/sys";
        ps = calloc(1, sizeof(*ps));
        if (!ps)
                return -ENOMEM;
        ps->stat_fd = -1;
        ps->n_cpus = t->n_cpus;
        ps->cpus = calloc(t->n_cpus ? t->n_cpus : 1, sizeof(*ps->cpus));
        ps->lines = calloc(t->n_cpus ? t->n_cpus : 1, sizeof(*ps->lines));
        ps->buf_size = 64 * 1024;
        ps->buf = malloc(ps->buf_size);
        if (!ps->cpus || !ps->lines || !ps->buf) {
                pcpu_stat_free(ps);
                return -ENOMEM;
        }
        for (unsigned i = 0; i < ps->n_cpus; i++)
                for (unsigned k = 0; k < TOPO_MAX_IDLE_STATES; k++)
                        ps->cpus[i].time_fd[k] = ps->cpus[i].usage_fd[k] = -1;

        ps->clk_tck = sysconf(_SC_CLK_TCK);
        if (ps->clk_tck <= 0)
                ps->clk_tck = 100; /* USER_HZ is 100 on every Linux architecture we run on */

        r = path_printf(path, sizeof(path), "%s/stat", procfs_root);
        if (r < 0)
                goto fail;
        ps->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (ps->stat_fd < 0) {
                r = log_error_errno(errno, "Failed to open %s: %m", path);
                goto fail;
        }

        for (unsigned i = 0; i < ps->n_cpus; i++) {
                struct pcpu *c = &ps->cpus[i];

                c->n_states = MIN(t->cpus[i].n_idle_states, (unsigned) TOPO_MAX_IDLE_STATES);
                for (unsigned k = 0; k < c->n_states; k++) {
                        r = path_printf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/cpuidle/state%u/time",
                                        sysfs_root, i, k);
                        if (r < 0)
                                goto fail;
                        c->time_fd[k] = open(path, O_RDONLY | O_CLOEXEC);
                        if (c->time_fd[k] < 0 && errno != ENOENT) {
                                r = open_failed(path);
                                goto fail;
                        }
                        r = path_printf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/cpuidle/state%u/usage",
                                        sysfs_root, i, k);
                        if (r < 0)
                                goto fail;
                        c->usage_fd[k] = open(path, O_RDONLY | O_CLOEXEC);
                        if (c->usage_fd[k] < 0 && errno != ENOENT) {
                                r = open_failed(path);
                                goto fail;
                        }
                }
        }
        *ret = ps;
        return 0;
fail:
        pcpu_stat_free(ps);
        return r;
}

/* Whole /proc/stat into ps->buf, growing it as needed. */
static int read_stat(struct pcpu_stat *ps)
{
        for (;;) {
                ssize_t n = pread_all0(ps->stat_fd, ps->buf, ps->buf_size);
                char *nb;

                if (n < 0)
                        return (int) n;
                if ((size_t) n + 1 < ps->buf_size)
                        return 0;
                if (ps->buf_size >= 64 * 1024 * 1024)
                        return -EFBIG;
                nb = realloc(ps->buf, ps->buf_size * 2);
                if (!nb)
                        return -ENOMEM;
                ps->buf = nb;
                ps->buf_size *= 2;
        }
}

static int read_counter(int fd, uint64_t *ret)
{
        char b[32];
        ssize_t n;

        if (fd < 0) {
                *ret = 0;
                return 0;
        }
        n = pread_all0(fd, b, sizeof(b));
        if (n < 0)
                return (int) n;
        return parse_u64(b, ret);
}

static double clamp01(double x)
{
        return x < 0 ? 0 : x > 1 ? 1 : x;
}

static void compute_load(struct pcpu *c, nsec_t dt_ns)
{
        const struct pcpu_sample *a = &c->prev, *b = &c->cur;
        struct pcpu_load l = { 0 };
        uint64_t dbusy, didle, dsteal, total;
        double sum = 0;

        c->load_valid = false;
        if (b->busy_ns < a->busy_ns || b->idle_ns < a->idle_ns || b->steal_ns < a->steal_ns)
                return;
        dbusy = b->busy_ns - a->busy_ns;
        didle = b->idle_ns - a->idle_ns;
        dsteal = b->steal_ns - a->steal_ns;
        total = dbusy + didle;
        if (total > 0) {
                l.busy_ratio = clamp01((double) dbusy / (double) total);
                l.steal_ratio = clamp01((double) dsteal / (double) total);
        }
        for (unsigned k = 0; k < b->n_states && k < a->n_states; k++) {
                if (b->state_time_us[k] < a->state_time_us[k] || b->state_usage[k] < a->state_usage[k])
                        return;
                l.state_residency[k] = clamp01((double) (b->state_time_us[k] - a->state_time_us[k]) *
                                               (double) NSEC_PER_USEC / (double) dt_ns);
                l.state_wakeups[k] = b->state_usage[k] - a->state_usage[k];
                sum += l.state_residency[k];
        }
        if (sum > 1)
                for (unsigned k = 0; k < b->n_states; k++)
                        l.state_residency[k] /= sum;
        c->load = l;
        c->load_valid = true;
}

int pcpu_stat_sample(struct pcpu_stat *ps, nsec_t now)
{
        char *line, *save = NULL;
        int r;

        if (ps->n_samples > 0 && now <= ps->cur_now)
                return -EINVAL;
        r = read_stat(ps);
        if (r < 0)
                return log_error_errno(r, "Failed to read stat: %m");

        for (unsigned i = 0; i < ps->n_cpus; i++)
                ps->lines[i].seen = false;
        for (line = strtok_r(ps->buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                struct stat_line *sl;
                uint64_t v[10];
                int cpu;

                if (strncmp(line, "cpu", 3) != 0)
                        continue;
                cpu = pcpu_parse_stat_line(line, v);
                if (cpu == -1)
                        continue; /* aggregate */
                if (cpu < 0) {
                        char esc[96];
                        escape_bytes(line, strlen(line), esc, sizeof(esc));
                        return log_error_errno(EINVAL, "stat: cannot parse \"%s\"", esc);
                }
                if ((unsigned) cpu >= ps->n_cpus)
                        continue; /* hot-added beyond the topology we were built for */
                sl = &ps->lines[cpu];
                sl->seen = true;
                sl->busy_ns = ticks_to_ns(v[0] + v[1] + v[2] + v[5] + v[6] + v[7], ps->clk_tck);
                sl->idle_ns = ticks_to_ns(v[3] + v[4], ps->clk_tck);
                sl->steal_ns = ticks_to_ns(v[7], ps->clk_tck);
        }

        /* Everything parsed: commit. */
        for (unsigned i = 0; i < ps->n_cpus; i++) {
                struct pcpu *c = &ps->cpus[i];
                const struct stat_line *sl = &ps->lines[i];
                bool ok = sl->seen;

                c->prev = c->cur;
                c->have_prev = c->have_cur;
                c->cur.busy_ns = sl->busy_ns;
                c->cur.idle_ns = sl->idle_ns;
                c->cur.steal_ns = sl->steal_ns;
                c->cur.n_states = c->n_states;
                for (unsigned k = 0; ok && k < c->n_states; k++)
                        if (read_counter(c->time_fd[k], &c->cur.state_time_us[k]) < 0 ||
                            read_counter(c->usage_fd[k], &c->cur.state_usage[k]) < 0)
                                ok = false; /* e.g. CPU went offline between the reads */
                c->have_cur = ok;
                if (ok && c->have_prev)
                        compute_load(c, now - ps->cur_now);
                else
                        c->load_valid = false;
        }
        ps->prev_now = ps->cur_now;
        ps->cur_now = now;
        ps->n_samples++;
        return 0;
}

const struct pcpu_load *pcpu_stat_load(const struct pcpu_stat *ps, unsigned cpu)
{
        if (cpu >= ps->n_cpus || !ps->cpus[cpu].load_valid)
                return NULL;
        return &ps->cpus[cpu].load;
}

const struct pcpu_sample *pcpu_stat_raw(const struct pcpu_stat *ps, unsigned cpu)
{
        if (cpu >= ps->n_cpus || !ps->cpus[cpu].have_cur)
                return NULL;
        return &ps->cpus[cpu].cur;
}
