/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * powerhintd: the guest's hint agent (docs/protocol.md).
 *
 * Every period (default 1 s) it samples per-vCPU utilisation from /proc/stat
 * (busy = everything but idle and iowait, steal included: time the vCPU wanted
 * to run) and CPU pressure from /proc/pressure/cpu when present, chooses a
 * level per vCPU and sends its whole state to the host:
 *
 *     "\n" HELLO 1 vcpus=N agent=powerhintd/0.1
 *     LEVEL <cpu> <level>   UTIL <cpu> <util>   (for every online vCPU)
 *
 * The state is re-sent every period because virtio-serial drops what the guest
 * writes while no host end is connected: after the host (re)connects it has
 * the full picture within one period.  The leading empty line lets the host
 * resynchronise if it connected in the middle of a line or a write was cut.
 *
 * Level choice.  If virtio_powerhint.ko is loaded, the level is what the
 * guest's own cpufreq governor (schedutil) asked for, read from
 * cpuN/cpufreq/powerhint_request.  Otherwise it is utilisation plus 25%
 * headroom (schedutil's own margin), plus one step when more than 10% of the
 * period had runnable tasks stalled (PSI "some").  Levels are quantised to 8
 * steps of 128.  Hysteresis: a higher level is sent at once (capacity must
 * grow without delay), a lower one only after it has been wanted for
 * DOWN_PERIODS = 3 consecutive periods, so a bursty vCPU does not flap.
 * Levels are clamped to the host's LIMIT for that vCPU and WELCOME max_level.
 *
 * Host replies: GRANT <cpu> <level> is stored and, with the module loaded,
 * written to cpuN/cpufreq/powerhint_grant, where the module reports it (it is
 * not made the current frequency: virtio_powerhint.c says why).  LIMIT is stored and
 * applied.  ERR is counted and logged escaped.
 *
 * The host end going away (EOF or POLLHUP on the port) and coming back are
 * logged at the default level, rate-limited (host_change()), and counted in
 * the status (host_losses).
 *
 * Applications ask for a boost over a local stream socket (default
 * /run/powerhintd.sock; its directory is created if missing, as in a busybox
 * initramfs without /run): one request line per connection, "BOOST <ms> <cpu>"
 * or "STATUS"; answered with "OK", "ERR <text>" or the status text.  A boost is
 * forwarded to the host at once (the host caps and rate-limits it).
 *
 * The socket is open to every user of the guest (0666), so a client must not
 * be able to hold the agent: accepted connections are non-blocking and served
 * from the main poll loop, at most CLIENTS_MAX at a time (the rest wait in
 * the listen backlog) and at most ACCEPTS_PER_WAKEUP accepted per wake-up;
 * each has one deadline, CLIENT_DEADLINE_MS from its accept, for the whole
 * request and its answer; past it the client gets "ERR request timed out" (if
 * its line was not complete) and is closed (counted: clients_timed_out).  The
 * periods and the port are served whatever the local clients do.
 *
 * For tests every path is configurable: --port (a character device, or a unix
 * socket that stands in for the host end), --proc-root, --sys-root, --socket.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hostmsg.h"

#define AGENT "powerhintd/0.1"
#define PORT_NAME "org.vmmpower.hint.0"
#define DEFAULT_PORT "/dev/virtio-ports/" PORT_NAME
#define DEFAULT_SOCKET "/run/powerhintd.sock"
#define LEVEL_MAX 1024
#define LEVEL_STEP 128
#define DOWN_PERIODS 3
#define HEADROOM_PCT 125
#define PSI_STEP_PERMILLE 100
#define BOOST_MS_MAX 10000
#define MAX_CPUS 4096
#define CLIENTS_MAX 8           /* local requests served at once */
#define ACCEPTS_PER_WAKEUP 4    /* local connections accepted per poll wake-up */
#define CLIENT_DEADLINE_MS 500  /* from accept to the end of the answer */
#define CLIENT_REQ_MAX 128      /* request line, '\n' included */
#define CLIENT_REPLY_MAX 65536
/* At most one "host end went away" message (and its "connected again") per minute. */
#define HOST_LOG_INTERVAL_MS 60000

struct cpu_state {
        bool online;
        bool have_prev;
        uint64_t prev_busy, prev_total;
        uint32_t util;
        uint32_t level;
        int down_count;
        bool has_request;
        uint32_t request;
        bool has_grant;
        uint32_t granted;
        uint32_t lim_min, lim_max;
};

/* A local client (the request socket): reading its line, then writing the answer. */
struct client {
        int fd;                 /* -1: free slot */
        int64_t deadline_ms;
        char req[CLIENT_REQ_MAX];
        size_t len;
        char *reply;            /* non-NULL: answering */
        size_t reply_len, reply_off;
};

struct daemon {
        const char *port_path; /* NULL: find by name */
        const char *proc_root;
        const char *sys_root;
        const char *sock_path;
        unsigned interval_ms;
        unsigned max_periods;
        int verbose;

        char port_found[512];
        int port_fd;
        bool port_is_socket;
        bool host_hup;
        int listen_fd;
        struct client clients[CLIENTS_MAX];
        unsigned n_clients;

        /* the host end as last seen, for the log: see host_change() */
        bool host_up;
        bool down_logged;       /* this loss of the host end was logged */
        bool down_log_ever;
        int64_t down_since_ms, last_down_log_ms;
        uint64_t host_losses, losses_unlogged;

        unsigned n_cpus;
        struct cpu_state cpus[MAX_CPUS];
        bool psi_have_prev;
        uint64_t psi_prev_us;
        uint32_t psi_permille;

        bool welcomed;
        struct hostmsg welcome;
        struct hostmsg_framer framer;

        uint64_t periods, lines_sent, writes_dropped, host_lines, host_bad, host_errs, port_opens, boosts;
        uint64_t clients_timed_out;
};

static volatile sig_atomic_t stop;

static void log_msg(struct daemon *d, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void log_msg(struct daemon *d, int level, const char *fmt, ...)
{
        va_list ap;

        if (level > d->verbose)
                return;
        va_start(ap, fmt);
        fputs("powerhintd: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
}

static void escape(const char *s, size_t n, char *out, size_t size)
{
        size_t o = 0;

        for (size_t i = 0; i < n && o + 5 < size; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c >= 0x20 && c < 0x7f && c != '\\')
                        out[o++] = (char) c;
                else
                        o += (size_t) snprintf(out + o, size - o, "\\x%02x", c);
        }
        out[o] = 0;
}

static int64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static ssize_t read_file(const char *path, char *buf, size_t size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n, total = 0;

        if (fd < 0)
                return -errno;
        while ((size_t) total < size - 1) {
                n = read(fd, buf + total, size - 1 - (size_t) total);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        n = -errno;
                        close(fd);
                        return n;
                }
                if (n == 0)
                        break;
                total += n;
        }
        close(fd);
        buf[total] = 0;
        return total;
}

static int parse_u32_strict(const char *s, size_t len, uint32_t max, uint32_t *ret)
{
        uint64_t v = 0;

        if (len == 0 || len > 10 || (len > 1 && s[0] == '0'))
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned) (s[i] - '0');
        }
        if (v > max)
                return -ERANGE;
        *ret = (uint32_t) v;
        return 0;
}

/* ---- sampling ---- */

static int sample_stat(struct daemon *d)
{
        static char buf[1 << 18];
        char path[512];
        ssize_t n;
        char *line, *save = NULL;
        unsigned max_cpu = 0;
        bool any = false;

        snprintf(path, sizeof(path), "%s/stat", d->proc_root);
        n = read_file(path, buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        for (unsigned i = 0; i < MAX_CPUS; i++)
                d->cpus[i].online = false;
        for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                unsigned long long v[10] = {};
                unsigned cpu;
                int k;

                if (strncmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9')
                        continue;
                k = sscanf(line + 3, "%u %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1],
                           &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
                if (k < 5 || cpu >= MAX_CPUS)
                        continue;
                struct cpu_state *c = &d->cpus[cpu];
                /* user nice system idle iowait irq softirq steal; guest time is inside user */
                uint64_t total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
                uint64_t busy = total - v[3] - v[4];

                c->online = true;
                any = true;
                if (c->have_prev && total > c->prev_total && busy >= c->prev_busy) {
                        uint64_t db = busy - c->prev_busy, dt = total - c->prev_total;
                        c->util = (uint32_t) (db > dt ? LEVEL_MAX : db * LEVEL_MAX / dt);
                } else if (c->have_prev && total == c->prev_total)
                        ; /* no time passed for this CPU: keep */
                else if (c->have_prev)
                        c->util = 0; /* counters went backwards (hotplug): start again */
                c->prev_busy = busy;
                c->prev_total = total;
                c->have_prev = true;
                if (cpu + 1 > max_cpu)
                        max_cpu = cpu + 1;
        }
        if (!any)
                return -ENODATA;
        d->n_cpus = max_cpu;
        return 0;
}

static void sample_psi(struct daemon *d, unsigned elapsed_ms)
{
        char path[512], buf[512], *p;
        uint64_t total = 0;

        snprintf(path, sizeof(path), "%s/pressure/cpu", d->proc_root);
        if (read_file(path, buf, sizeof(buf)) < 0) {
                d->psi_have_prev = false; /* absent (no CONFIG_PSI / psi=0): no pressure input */
                d->psi_permille = 0;
                return;
        }
        /* "some avg10=0.00 avg60=0.00 avg300=0.00 total=12345" */
        p = strstr(buf, "some ");
        if (p)
                p = strstr(p, " total=");
        if (!p || sscanf(p, " total=%" SCNu64, &total) != 1) {
                d->psi_have_prev = false;
                return;
        }
        if (d->psi_have_prev && total >= d->psi_prev_us && elapsed_ms > 0) {
                uint64_t stall_us = total - d->psi_prev_us;
                uint64_t pm = stall_us / elapsed_ms; /* us per ms = permille */
                d->psi_permille = (uint32_t) (pm > 1000 ? 1000 : pm);
        }
        d->psi_prev_us = total;
        d->psi_have_prev = true;
}

static void cpufreq_path(struct daemon *d, unsigned cpu, const char *attr, char *buf, size_t size)
{
        snprintf(buf, size, "%s/devices/system/cpu/cpu%u/cpufreq/%s", d->sys_root, cpu, attr);
}

static void sample_requests(struct daemon *d)
{
        char path[512], buf[64];

        for (unsigned i = 0; i < d->n_cpus; i++) {
                struct cpu_state *c = &d->cpus[i];
                uint32_t v;
                ssize_t n;

                c->has_request = false;
                if (!c->online)
                        continue;
                cpufreq_path(d, i, "powerhint_request", path, sizeof(path));
                n = read_file(path, buf, sizeof(buf));
                if (n <= 0)
                        continue;
                if (buf[n - 1] == '\n')
                        n--;
                if (parse_u32_strict(buf, (size_t) n, LEVEL_MAX, &v) == 0) {
                        c->has_request = true;
                        c->request = v;
                }
        }
}

static uint32_t quantise(uint32_t want)
{
        uint32_t q = (want + LEVEL_STEP - 1) / LEVEL_STEP * LEVEL_STEP;

        if (q < LEVEL_STEP)
                q = LEVEL_STEP;
        return q > LEVEL_MAX ? LEVEL_MAX : q;
}

static void choose_levels(struct daemon *d)
{
        uint32_t host_max = d->welcomed ? d->welcome.max_level : LEVEL_MAX;

        for (unsigned i = 0; i < d->n_cpus; i++) {
                struct cpu_state *c = &d->cpus[i];
                uint32_t want, target;

                if (!c->online)
                        continue;
                want = c->has_request ? c->request : c->util * HEADROOM_PCT / 100;
                target = quantise(want);
                if (!c->has_request && d->psi_permille > PSI_STEP_PERMILLE)
                        target = quantise(target + LEVEL_STEP);
                if (target < c->lim_min)
                        target = c->lim_min;
                if (target > c->lim_max)
                        target = c->lim_max;
                if (target > host_max)
                        target = host_max;

                if (c->level == 0 || target >= c->level) {
                        c->level = target;
                        c->down_count = 0;
                } else if (++c->down_count >= DOWN_PERIODS) {
                        c->level = target;
                        c->down_count = 0;
                }
        }
}

/* ---- the port ---- */

static const char *find_port(struct daemon *d)
{
        char dir[512], path[1024], name[128];
        struct dirent *de;
        DIR *dp;

        if (d->port_path)
                return d->port_path;
        if (access(DEFAULT_PORT, F_OK) == 0)
                return DEFAULT_PORT;
        /* no udev rule for the symlink: look the name up in sysfs */
        snprintf(dir, sizeof(dir), "%s/class/virtio-ports", d->sys_root);
        dp = opendir(dir);
        if (!dp)
                return NULL;
        while ((de = readdir(dp))) {
                ssize_t n;

                if (de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "%s/%s/name", dir, de->d_name);
                n = read_file(path, name, sizeof(name));
                if (n > 0 && name[n - 1] == '\n')
                        name[--n] = 0;
                if (n > 0 && strcmp(name, PORT_NAME) == 0) {
                        snprintf(d->port_found, sizeof(d->port_found), "/dev/%s", de->d_name);
                        closedir(dp);
                        return d->port_found;
                }
        }
        closedir(dp);
        return NULL;
}

static void port_close(struct daemon *d)
{
        if (d->port_fd >= 0)
                close(d->port_fd);
        d->port_fd = -1;
        d->welcomed = false;
        hostmsg_framer_reset(&d->framer);
}

/*
 * The operator learns when the host end goes away and when it is back, at the
 * default log level, without a flapping host filling the log: the first loss
 * is logged, and its reconnect; a later loss only HOST_LOG_INTERVAL_MS after
 * the last logged one (if it still lasts by then, it is logged then), with
 * the number of losses not logged in between.  host_losses counts them all.
 */
static void host_log_down(struct daemon *d, int64_t now)
{
        char more[64] = "";

        if (d->host_up || d->down_logged ||
            (d->down_log_ever && now - d->last_down_log_ms < HOST_LOG_INTERVAL_MS))
                return;
        if (d->losses_unlogged)
                snprintf(more, sizeof(more), " (and %" PRIu64 " times before, not logged)", d->losses_unlogged);
        log_msg(d, 0, "host end of %s went away%s, re-sending the state every period until it is back",
                find_port(d) ?: "the port", more);
        d->down_logged = true;
        d->down_log_ever = true;
        d->last_down_log_ms = now;
        d->losses_unlogged = 0;
}

static void host_change(struct daemon *d, bool up)
{
        int64_t now = now_ms();

        if (up == d->host_up)
                return;
        d->host_up = up;
        if (!up) {
                d->host_losses++;
                d->down_logged = false;
                d->down_since_ms = now;
                host_log_down(d, now);
                return;
        }
        if (d->host_losses == 0)
                log_msg(d, 0, "host connected on %s", find_port(d) ?: "the port");
        else if (d->down_logged)
                log_msg(d, 0, "host connected again on %s after %.1f s", find_port(d) ?: "the port",
                        (double) (now - d->down_since_ms) / 1000.0);
        else
                d->losses_unlogged++;
}

/* EOF, POLLHUP or a write error on the port: the host end is gone. */
static void host_lost(struct daemon *d)
{
        hostmsg_framer_reset(&d->framer);
        d->welcomed = false;
        if (d->port_is_socket)
                port_close(d);
        else
                d->host_hup = true;
        host_change(d, false);
}

static int port_open(struct daemon *d)
{
        const char *path = find_port(d);
        struct stat st;
        int fd;

        if (!path)
                return -ENOENT;
        if (stat(path, &st) < 0)
                return -errno;
        if (S_ISSOCK(st.st_mode)) {
                struct sockaddr_un sa = { .sun_family = AF_UNIX };

                if (strlen(path) >= sizeof(sa.sun_path))
                        return -ENAMETOOLONG;
                strcpy(sa.sun_path, path);
                fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0)
                        return -errno;
                if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                        int r = -errno;
                        close(fd);
                        return r;
                }
                if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
                        int r = -errno;
                        close(fd);
                        return r;
                }
                d->port_is_socket = true;
        } else {
                fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return -errno;
                d->port_is_socket = false;
        }
        d->port_fd = fd;
        d->host_hup = false;
        d->port_opens++;
        hostmsg_framer_reset(&d->framer);
        log_msg(d, 1, "opened %s", path);
        if (!d->port_is_socket) {
                /* a virtio port opens without a host end: POLLHUP until it connects */
                struct pollfd p = { .fd = fd, .events = POLLIN };

                if (poll(&p, 1, 0) >= 0 && (p.revents & POLLHUP))
                        d->host_hup = true;
        }
        if (!d->host_hup)
                host_change(d, true);
        return 0;
}

/* One write; a short or failed write loses the rest (the next batch starts with "\n"). */
static void port_send(struct daemon *d, const char *buf, size_t len, unsigned lines)
{
        ssize_t n;

        if (d->port_fd < 0)
                return;
        n = write(d->port_fd, buf, len);
        if (n == (ssize_t) len) {
                d->lines_sent += lines;
                return;
        }
        d->writes_dropped++;
        if (n >= 0 || errno == EAGAIN || errno == EINTR)
                return;
        log_msg(d, 2, "write to port: %s", strerror(errno));
        host_lost(d);
}

static void send_state(struct daemon *d)
{
        static char buf[MAX_CPUS * 40 + 128]; /* "LEVEL n l\nUTIL n u\n" <= 40 bytes per CPU */
        size_t len = 0;
        unsigned lines = 1;

        len += (size_t) snprintf(buf + len, sizeof(buf) - len, "\nHELLO 1 vcpus=%u agent=" AGENT "\n", d->n_cpus);
        for (unsigned i = 0; i < d->n_cpus && len + 64 < sizeof(buf); i++) {
                const struct cpu_state *c = &d->cpus[i];
                if (!c->online)
                        continue;
                len += (size_t) snprintf(buf + len, sizeof(buf) - len, "LEVEL %u %u\nUTIL %u %u\n", i, c->level, i,
                                         c->util);
                lines += 2;
        }
        port_send(d, buf, len, lines);
}

static void apply_grant(struct daemon *d, unsigned cpu, uint32_t level)
{
        char path[512], val[32];
        int fd, n;

        d->cpus[cpu].has_grant = true;
        d->cpus[cpu].granted = level;
        cpufreq_path(d, cpu, "powerhint_grant", path, sizeof(path));
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return; /* no module: the grant is informational */
        n = snprintf(val, sizeof(val), "%u\n", level);
        if (write(fd, val, (size_t) n) != n)
                log_msg(d, 1, "write %s: %s, ignoring", path, strerror(errno));
        close(fd);
}

static void host_line(enum hostmsg_event ev, const char *line, size_t len, void *userdata)
{
        struct daemon *d = userdata;
        struct hostmsg m;
        char esc[HOSTMSG_LINE_MAX * 4 + 1];

        if (ev == HOSTMSG_EV_DISCARD) {
                d->host_bad++;
                return;
        }
        if (len == 0)
                return;
        d->host_lines++;
        if (hostmsg_parse(line, len, &m) < 0) {
                d->host_bad++;
                escape(line, len, esc, sizeof(esc));
                log_msg(d, 1, "bad line from host: \"%s\", ignoring", esc);
                return;
        }
        switch (m.type) {
        case HOSTMSG_WELCOME:
                if (m.version != 1) {
                        d->host_bad++;
                        return;
                }
                if (!d->welcomed)
                        log_msg(d, 1, "host: WELCOME vcpus=%u max_level=%u trust=%s", m.vcpus, m.max_level,
                                m.trust);
                d->welcome = m;
                d->welcomed = true;
                break;
        case HOSTMSG_GRANT:
                if (m.vcpu >= d->n_cpus || !d->cpus[m.vcpu].online) {
                        d->host_bad++;
                        return;
                }
                apply_grant(d, m.vcpu, m.level);
                break;
        case HOSTMSG_LIMIT:
                if (m.vcpu >= d->n_cpus) {
                        d->host_bad++;
                        return;
                }
                d->cpus[m.vcpu].lim_min = m.min_level;
                d->cpus[m.vcpu].lim_max = m.max_level;
                break;
        case HOSTMSG_ERR:
                d->host_errs++;
                escape(m.text, strlen(m.text), esc, sizeof(esc));
                log_msg(d, 1, "host: ERR %s %s", m.code, esc);
                break;
        }
}

static void port_read(struct daemon *d)
{
        char buf[4096];

        for (;;) {
                ssize_t n = read(d->port_fd, buf, sizeof(buf));
                if (n > 0) {
                        hostmsg_framer_push(&d->framer, buf, (size_t) n, host_line, d);
                        continue;
                }
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                /* EOF or error: the host end went away */
                host_lost(d);
                return;
        }
}

/* ---- local socket ---- */

/*
 * mkdir -p of the directory that will hold path (mode 0755): a busybox
 * initramfs, or a system without a /run tmpfs, has no /run.
 */
static int make_parent_dirs(const char *path)
{
        char dir[sizeof(((struct sockaddr_un *) 0)->sun_path)];
        char *slash;

        if (strlen(path) >= sizeof(dir))
                return -ENAMETOOLONG;
        strcpy(dir, path);
        slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return 0; /* relative name in the working directory, or directly under / */
        *slash = 0;
        for (char *p = dir + 1;; p++) {
                if (*p == '/' || *p == 0) {
                        char c = *p;

                        *p = 0;
                        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                                return -errno;
                        *p = c;
                        if (!c)
                                break;
                }
        }
        return 0;
}

static int listen_open(struct daemon *d)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd, r;

        if (!d->sock_path || !*d->sock_path)
                return 0;
        if (strlen(d->sock_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, d->sock_path);
        r = make_parent_dirs(d->sock_path);
        if (r < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) unlink(d->sock_path);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || chmod(d->sock_path, 0666) < 0 ||
            listen(fd, 16) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        d->listen_fd = fd;
        return 0;
}

static size_t status_text(struct daemon *d, char *buf, size_t size)
{
        size_t o = 0;

#define OUT(...) \
        do { \
                if (o < size) \
                        o += (size_t) snprintf(buf + o, size - o, __VA_ARGS__); \
        } while (0)
        OUT("port=%s open=%s host=%s welcome=%s\n", find_port(d) ?: "-", d->port_fd >= 0 ? "yes" : "no",
            d->port_fd >= 0 && !d->host_hup ? "connected" : "disconnected", d->welcomed ? "yes" : "no");
        if (d->welcomed)
                OUT("host max_level=%u boost_cap_ms=%u rate=%u burst=%u trust=%s\n", d->welcome.max_level,
                    d->welcome.boost_cap_ms, d->welcome.rate, d->welcome.burst, d->welcome.trust);
        OUT("periods=%" PRIu64 " lines_sent=%" PRIu64 " writes_dropped=%" PRIu64 " host_lines=%" PRIu64
            " host_bad=%" PRIu64 " host_errs=%" PRIu64 " host_losses=%" PRIu64 " boosts=%" PRIu64
            " psi_permille=%u clients_timed_out=%" PRIu64 "\n",
            d->periods, d->lines_sent, d->writes_dropped, d->host_lines, d->host_bad, d->host_errs, d->host_losses,
            d->boosts, d->psi_permille, d->clients_timed_out);
        for (unsigned i = 0; i < d->n_cpus; i++) {
                const struct cpu_state *c = &d->cpus[i];
                if (!c->online)
                        continue;
                OUT("cpu%u util=%u level=%u", i, c->util, c->level);
                if (c->has_request)
                        OUT(" request=%u", c->request);
                if (c->has_grant)
                        OUT(" granted=%u", c->granted);
                OUT(" limit=%u-%u\n", c->lim_min, c->lim_max);
        }
#undef OUT
        return o < size ? o : size - 1;
}

/* The answer to one request line (without its '\n'). */
static size_t handle_request(struct daemon *d, const char *req, char *reply, size_t size)
{
        char line[64];

        if (strcmp(req, "STATUS") == 0)
                return status_text(d, reply, size);
        if (strncmp(req, "BOOST ", 6) == 0) {
                const char *ms_s = req + 6, *sp = strchr(ms_s, ' ');
                uint32_t ms, cpu;

                if (!sp || parse_u32_strict(ms_s, (size_t) (sp - ms_s), BOOST_MS_MAX, &ms) < 0 || ms == 0 ||
                    parse_u32_strict(sp + 1, strlen(sp + 1), MAX_CPUS - 1, &cpu) < 0)
                        return (size_t) snprintf(reply, size, "ERR usage: BOOST <1..%u ms> <cpu>\n", BOOST_MS_MAX);
                if (cpu >= d->n_cpus || !d->cpus[cpu].online)
                        return (size_t) snprintf(reply, size, "ERR no such cpu\n");
                int n = snprintf(line, sizeof(line), "BOOST %u %u\n", cpu, ms);
                port_send(d, line, (size_t) n, 1);
                d->boosts++;
                return (size_t) snprintf(reply, size, "OK%s\n",
                                         d->port_fd >= 0 && !d->host_hup ? "" : " (host not connected)");
        }
        return (size_t) snprintf(reply, size, "ERR unknown request\n");
}

static void client_close(struct daemon *d, struct client *c)
{
        close(c->fd);
        free(c->reply);
        *c = (struct client) { .fd = -1 };
        d->n_clients--;
}

/* Write what the socket takes now; the client is closed once the answer is out, or on an error. */
static void client_write(struct daemon *d, struct client *c)
{
        while (c->reply_off < c->reply_len) {
                ssize_t n = write(c->fd, c->reply + c->reply_off, c->reply_len - c->reply_off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return; /* POLLOUT, until the deadline */
                if (n <= 0)
                        break;
                c->reply_off += (size_t) n;
        }
        client_close(d, c);
}

/* Answer the request line req, or with an error when the client sent no complete line (NULL). */
static void client_answer(struct daemon *d, struct client *c, const char *req)
{
        static char reply[CLIENT_REPLY_MAX];
        size_t rlen = req ? handle_request(d, req, reply, sizeof(reply))
                          : (size_t) snprintf(reply, sizeof(reply), "ERR request must be one line\n");

        c->reply = malloc(rlen ? rlen : 1);
        if (!c->reply) {
                client_close(d, c);
                return;
        }
        memcpy(c->reply, reply, rlen);
        c->reply_len = rlen;
        c->reply_off = 0;
        client_write(d, c);
}

/* Read what has arrived (never waits): a complete line is answered; EOF or a full buffer without one is an error. */
static void client_read(struct daemon *d, struct client *c)
{
        char *nl;

        for (;;) {
                ssize_t n = read(c->fd, c->req + c->len, sizeof(c->req) - 1 - c->len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return;
                if (n > 0) {
                        c->len += (size_t) n;
                        c->req[c->len] = 0;
                        nl = memchr(c->req, '\n', c->len);
                        if (nl) {
                                *nl = 0;
                                client_answer(d, c, c->req);
                                return;
                        }
                        if (c->len < sizeof(c->req) - 1)
                                continue;
                }
                /* EOF, an error, or 127 bytes without a newline */
                client_answer(d, c, NULL);
                return;
        }
}

/* Accept what is pending, up to ACCEPTS_PER_WAKEUP and while a slot is free. */
static void accept_clients(struct daemon *d, int64_t now)
{
        for (int k = 0; k < ACCEPTS_PER_WAKEUP && d->n_clients < CLIENTS_MAX; k++) {
                int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                struct client *c = NULL;

                if (fd < 0)
                        return;
                for (unsigned i = 0; i < CLIENTS_MAX && !c; i++)
                        if (d->clients[i].fd < 0)
                                c = &d->clients[i];
                *c = (struct client) { .fd = fd, .deadline_ms = now + CLIENT_DEADLINE_MS };
                d->n_clients++;
                client_read(d, c); /* the request is often there already */
        }
}

/* Clients past their deadline are closed (a line not complete by then is answered with an error first). */
static void expire_clients(struct daemon *d, int64_t now)
{
        static const char msg[] = "ERR request timed out\n";

        for (unsigned i = 0; i < CLIENTS_MAX; i++) {
                struct client *c = &d->clients[i];

                if (c->fd < 0 || now < c->deadline_ms)
                        continue;
                if (!c->reply)
                        (void) !write(c->fd, msg, sizeof(msg) - 1); /* non-blocking: best effort */
                d->clients_timed_out++;
                client_close(d, c);
        }
}

/* ---- main loop ---- */

static void period(struct daemon *d, unsigned elapsed_ms)
{
        int r;

        r = sample_stat(d);
        if (r < 0)
                log_msg(d, 1, "reading %s/stat: %s", d->proc_root, strerror(-r));
        sample_psi(d, elapsed_ms);
        sample_requests(d);
        choose_levels(d);
        d->periods++;

        if (d->port_fd < 0) {
                r = port_open(d);
                if (r < 0)
                        log_msg(d, 2, "port not available: %s", strerror(-r));
        } else if (d->host_hup) {
                struct pollfd p = { .fd = d->port_fd, .events = POLLIN };
                if (poll(&p, 1, 0) >= 0 && !(p.revents & POLLHUP)) {
                        d->host_hup = false;
                        host_change(d, true);
                }
        }
        host_log_down(d, now_ms()); /* a loss not logged yet because of the rate limit */
        if (d->port_fd >= 0)
                send_state(d);
}

static void on_signal(int sig)
{
        stop = 1;
}

static void help(void)
{
        printf("Usage: powerhintd [OPTIONS]\n"
               "  --port PATH        virtio port (default " DEFAULT_PORT " or by name in sysfs);\n"
               "                     a unix socket path is connected to instead (tests)\n"
               "  --proc-root DIR    procfs root (default /proc)\n"
               "  --sys-root DIR     sysfs root (default /sys)\n"
               "  --socket PATH      local request socket (default " DEFAULT_SOCKET ", \"\" = none)\n"
               "  --interval-ms N    sample and re-send period (default 1000)\n"
               "  --periods N        exit after N periods (tests; default: run until signalled)\n"
               "  -v                 more log output (repeat)\n");
}

int main(int argc, char **argv)
{
        static struct daemon d;
        static const struct option opts[] = {
                { "port", required_argument, NULL, 'p' },      { "proc-root", required_argument, NULL, 'P' },
                { "sys-root", required_argument, NULL, 'S' },  { "socket", required_argument, NULL, 's' },
                { "interval-ms", required_argument, NULL, 'i' }, { "periods", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' },            {},
        };
        struct sigaction sa = { .sa_handler = on_signal };
        int64_t next, last;
        uint32_t v;
        int c, r;

        d.proc_root = "/proc";
        d.sys_root = "/sys";
        d.sock_path = DEFAULT_SOCKET;
        d.interval_ms = 1000;
        d.port_fd = -1;
        d.listen_fd = -1;
        for (unsigned i = 0; i < CLIENTS_MAX; i++)
                d.clients[i].fd = -1;
        while ((c = getopt_long(argc, argv, "vh", opts, NULL)) >= 0) {
                switch (c) {
                case 'p':
                        d.port_path = optarg;
                        break;
                case 'P':
                        d.proc_root = optarg;
                        break;
                case 'S':
                        d.sys_root = optarg;
                        break;
                case 's':
                        d.sock_path = optarg;
                        break;
                case 'i':
                        if (parse_u32_strict(optarg, strlen(optarg), 3600000, &v) < 0 || v < 10) {
                                fprintf(stderr, "powerhintd: bad --interval-ms\n");
                                return 2;
                        }
                        d.interval_ms = v;
                        break;
                case 'n':
                        if (parse_u32_strict(optarg, strlen(optarg), UINT32_MAX, &v) < 0) {
                                fprintf(stderr, "powerhintd: bad --periods\n");
                                return 2;
                        }
                        d.max_periods = v;
                        break;
                case 'v':
                        d.verbose++;
                        break;
                case 'h':
                        help();
                        return 0;
                default:
                        return 2;
                }
        }
        for (unsigned i = 0; i < MAX_CPUS; i++)
                d.cpus[i].lim_max = LEVEL_MAX;
        hostmsg_framer_init(&d.framer);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);

        r = listen_open(&d);
        if (r < 0) {
                fprintf(stderr, "powerhintd: cannot listen on %s: %s (--socket PATH for another place, "
                        "--socket \"\" for none)\n", d.sock_path, strerror(-r));
                return 1;
        }
        r = sample_stat(&d);
        if (r < 0) {
                fprintf(stderr, "powerhintd: cannot read %s/stat: %s\n", d.proc_root, strerror(-r));
                return 1;
        }
        sample_psi(&d, 0);
        log_msg(&d, 1, "started, %u vCPUs", d.n_cpus);

        /* First period at once: the host hears HELLO as soon as the agent starts. */
        last = now_ms();
        next = last;
        while (!stop) {
                struct pollfd p[2 + CLIENTS_MAX];
                struct client *pc[2 + CLIENTS_MAX] = { NULL };
                int np = 0, timeout;
                int64_t now = now_ms();

                expire_clients(&d, now);
                if (now >= next) {
                        period(&d, (unsigned) (now - last));
                        last = now;
                        next += d.interval_ms;
                        if (next <= now)
                                next = now + d.interval_ms; /* suspended / stalled: don't catch up */
                        if (d.max_periods && d.periods >= d.max_periods)
                                break;
                        continue;
                }
                timeout = (int) (next - now);
                if (d.listen_fd >= 0 && d.n_clients < CLIENTS_MAX)
                        p[np++] = (struct pollfd) { .fd = d.listen_fd, .events = POLLIN };
                if (d.port_fd >= 0 && !d.host_hup)
                        p[np++] = (struct pollfd) { .fd = d.port_fd, .events = POLLIN };
                for (unsigned i = 0; i < CLIENTS_MAX; i++) {
                        struct client *cl = &d.clients[i];

                        if (cl->fd < 0)
                                continue;
                        if (cl->deadline_ms - now < timeout)
                                timeout = (int) (cl->deadline_ms > now ? cl->deadline_ms - now : 0);
                        pc[np] = cl;
                        p[np++] = (struct pollfd) { .fd = cl->fd, .events = cl->reply ? POLLOUT : POLLIN };
                }
                r = poll(p, (nfds_t) np, timeout);
                if (r < 0)
                        continue; /* EINTR */
                for (int i = 0; i < np; i++) {
                        if (!p[i].revents)
                                continue;
                        if (pc[i]) {
                                if (pc[i]->fd < 0)
                                        continue;
                                if (pc[i]->reply)
                                        client_write(&d, pc[i]);
                                else
                                        client_read(&d, pc[i]);
                        } else if (p[i].fd == d.listen_fd)
                                accept_clients(&d, now_ms());
                        else if (p[i].revents & POLLIN)
                                port_read(&d);
                        else if (p[i].revents & (POLLHUP | POLLERR))
                                host_lost(&d);
                }
        }
        for (unsigned i = 0; i < CLIENTS_MAX; i++)
                if (d.clients[i].fd >= 0)
                        client_close(&d, &d.clients[i]);
        if (d.listen_fd >= 0) {
                close(d.listen_fd);
                (void) unlink(d.sock_path);
        }
        port_close(&d);
        return 0;
}
