/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * powerhintd end to end, on the host: the test plays the host end of the
 * virtio port (a unix socket given as --port), writes fake /proc and /sys
 * trees, runs the real powerhintd and powerhint binaries (argv[1], argv[2])
 * and checks what the agent sends and what it writes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hint_proto.h" /* the host's parser: every byte the agent sends must pass it */

static const char *powerhintd_bin, *powerhint_bin;

struct env {
        char dir[256];
        char port[300], sock[300], proc[300], sys[300];
        int listen_fd, conn_fd;
        pid_t pid;
        char buf[1 << 16];
        size_t len;
        struct hint_vm *host; /* host-side protocol state for this agent, 3 vCPUs */
};

#define MAXCPU 8
struct state {
        int n_hellos;
        int level[MAXCPU], util[MAXCPU];
        int boost_cpu, boost_ms;
        char hello[128];
};

static void write_file(const char *dir, const char *rel, const char *content)
{
        char path[600];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        f = fopen(path, "we");
        assert_non_null(f);
        fputs(content, f);
        assert_int_equal(fclose(f), 0);
}

static void read_file(const char *dir, const char *rel, char *buf, size_t size)
{
        char path[600];
        FILE *f;
        size_t n;

        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        f = fopen(path, "re");
        assert_non_null(f);
        n = fread(buf, 1, size - 1, f);
        buf[n] = 0;
        fclose(f);
}

static void mkdirs(const char *path)
{
        char tmp[600];

        snprintf(tmp, sizeof(tmp), "%s", path);
        for (char *p = tmp + 1; *p; p++)
                if (*p == '/') {
                        *p = 0;
                        (void) mkdir(tmp, 0755);
                        *p = '/';
                }
        (void) mkdir(tmp, 0755);
}

static void set_stat(struct env *e, const char *s)
{
        write_file(e->proc, "stat.tmp", s);
        char a[600], b[600];
        snprintf(a, sizeof(a), "%s/stat.tmp", e->proc);
        snprintf(b, sizeof(b), "%s/stat", e->proc);
        assert_int_equal(rename(a, b), 0);
}

static void env_listen(struct env *e)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        strcpy(sa.sun_path, e->port);
        e->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(e->listen_fd >= 0);
        assert_int_equal(bind(e->listen_fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(e->listen_fd, 4), 0);
}

static int setup(void **state)
{
        struct env *e = calloc(1, sizeof(*e));
        char p[600];

        assert_non_null(e);
        strcpy(e->dir, "/tmp/test-powerhintd.XXXXXX");
        assert_non_null(mkdtemp(e->dir));
        snprintf(e->port, sizeof(e->port), "%s/port", e->dir);
        snprintf(e->sock, sizeof(e->sock), "%s/powerhintd.sock", e->dir);
        snprintf(e->proc, sizeof(e->proc), "%s/proc", e->dir);
        snprintf(e->sys, sizeof(e->sys), "%s/sys", e->dir);
        snprintf(p, sizeof(p), "%s/pressure", e->proc);
        mkdirs(p);
        /* cpu0 and cpu2 have the module's attributes; cpu1 is offline (absent from stat) */
        for (int c = 0; c < 3; c += 2) {
                snprintf(p, sizeof(p), "%s/devices/system/cpu/cpu%d/cpufreq", e->sys, c);
                mkdirs(p);
        }
        write_file(e->sys, "devices/system/cpu/cpu0/cpufreq/powerhint_grant", "0\n");
        write_file(e->sys, "devices/system/cpu/cpu2/cpufreq/powerhint_grant", "0\n");
        write_file(e->proc, "pressure/cpu", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
                                            "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
        set_stat(e, "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 0 0 0 1000 0 0 0 0 0 0\ncpu2 0 0 0 1000 0 0 0 0 0 0\n");
        env_listen(e);
        e->conn_fd = -1;
        struct hint_policy pol;
        hint_policy_init(&pol);
        pol.trust = HINT_TRUST_FULL;
        e->host = hint_vm_new(3, &pol, 0);
        assert_non_null(e->host);
        *state = e;
        return 0;
}

static int teardown(void **state)
{
        struct env *e = *state;
        char cmd[400];

        if (e->pid > 0) {
                kill(e->pid, SIGTERM);
                waitpid(e->pid, NULL, 0);
        }
        if (e->conn_fd >= 0)
                close(e->conn_fd);
        close(e->listen_fd);
        hint_vm_free(e->host);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
        (void) !system(cmd);
        free(e);
        return 0;
}

/* The agent with its local socket at sock, its stderr to log_path (NULL: inherited). */
static void start_agent_at(struct env *e, const char *sock, const char *log_path)
{
        e->pid = fork();
        assert_true(e->pid >= 0);
        if (e->pid == 0) {
                if (log_path) {
                        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                        if (fd < 0 || dup2(fd, 2) < 0)
                                _exit(126);
                }
                execl(powerhintd_bin, powerhintd_bin, "--port", e->port, "--proc-root", e->proc, "--sys-root", e->sys,
                      "--socket", sock, "--interval-ms", "100", (char *) NULL);
                _exit(127);
        }
}

static void start_agent(struct env *e)
{
        start_agent_at(e, e->sock, NULL);
}

static void accept_host(struct env *e)
{
        struct pollfd p = { .fd = e->listen_fd, .events = POLLIN };

        assert_int_equal(poll(&p, 1, 5000), 1);
        e->conn_fd = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        assert_true(e->conn_fd >= 0);
        e->len = 0;
}

/* Read until one complete state batch (HELLO ... up to the next batch's empty line). */
static void next_state(struct env *e, struct state *st)
{
        for (int tries = 0; tries < 100; tries++) {
                char *start, *end;

                /* a complete batch: "\nHELLO...\n" followed by "\n" (the next batch) */
                start = memmem(e->buf, e->len, "\nHELLO ", 7);
                if (start) {
                        end = memmem(start + 1, e->len - (size_t) (start + 1 - e->buf), "\n\n", 2);
                        if (end) {
                                memset(st, 0, sizeof(*st));
                                for (int i = 0; i < MAXCPU; i++)
                                        st->level[i] = st->util[i] = -1;
                                st->boost_cpu = st->boost_ms = -1;
                                /* the host's parser accepts every line of the batch */
                                uint64_t acc = e->host->counters.accepted;
                                hint_vm_feed(e->host, start, (size_t) (end + 1 - start), 0, NULL);
                                for (int i = 0; i < _HINT_REJECT_MAX; i++)
                                        assert_true(e->host->counters.rejected[i] == 0);
                                assert_true(e->host->counters.clamped == 0);
                                assert_true(e->host->counters.accepted > acc);
                                *end = 0;
                                for (char *save = NULL, *l = strtok_r(start + 1, "\n", &save); l;
                                     l = strtok_r(NULL, "\n", &save)) {
                                        int c, v;
                                        if (strncmp(l, "HELLO ", 6) == 0) {
                                                st->n_hellos++;
                                                snprintf(st->hello, sizeof(st->hello), "%s", l);
                                        } else if (sscanf(l, "LEVEL %d %d", &c, &v) == 2 && c < MAXCPU)
                                                st->level[c] = v;
                                        else if (sscanf(l, "UTIL %d %d", &c, &v) == 2 && c < MAXCPU)
                                                st->util[c] = v;
                                        else if (sscanf(l, "BOOST %d %d", &c, &v) == 2)
                                                st->boost_cpu = c, st->boost_ms = v;
                                        else
                                                fail_msg("unexpected line \"%s\"", l);
                                }
                                size_t used = (size_t) (end + 1 - e->buf);
                                memmove(e->buf, e->buf + used, e->len - used);
                                e->len -= used;
                                return;
                        }
                }
                struct pollfd p = { .fd = e->conn_fd, .events = POLLIN };
                assert_int_equal(poll(&p, 1, 3000), 1);
                ssize_t n = read(e->conn_fd, e->buf + e->len, sizeof(e->buf) - 1 - e->len);
                assert_true(n > 0);
                e->len += (size_t) n;
        }
        fail_msg("no complete state batch");
}

/* Read states until cond holds (at most 30 periods). */
#define WAIT_STATE(e, st, cond)                                         \
        do {                                                            \
                int _n = 0;                                             \
                do {                                                    \
                        next_state((e), (st));                          \
                        if (++_n > 30)                                  \
                                fail_msg("timed out waiting for " #cond); \
                } while (!(cond));                                      \
        } while (0)

static void host_send(struct env *e, const char *s)
{
        assert_int_equal(write(e->conn_fd, s, strlen(s)), (ssize_t) strlen(s));
}

static int run_cli(const char *sock, const char *a1, const char *a2, const char *a3, const char *a4, char *out,
                   size_t size)
{
        int pfd[2], status;
        pid_t pid;
        size_t len = 0;
        ssize_t n;

        assert_int_equal(pipe(pfd), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(pfd[1], 1);
                execl(powerhint_bin, powerhint_bin, "--socket", sock, a1, a2, a3, a4, (char *) NULL);
                _exit(127);
        }
        close(pfd[1]);
        while (len < size - 1 && (n = read(pfd[0], out + len, size - 1 - len)) > 0)
                len += (size_t) n;
        out[len] = 0;
        close(pfd[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        return WEXITSTATUS(status);
}

static void test_state_levels_hysteresis(void **state)
{
        struct env *e = *state;
        struct state st;

        start_agent(e);
        accept_host(e);
        next_state(e, &st);
        assert_string_equal(st.hello, "HELLO 1 vcpus=3 agent=powerhintd/0.1");
        assert_int_equal(st.level[0], 128); /* idle: lowest step */
        assert_int_equal(st.level[1], -1);  /* offline: not sent */
        assert_int_equal(st.level[2], 128);

        /* cpu0 40% busy -> 40% * 1.25 = 50% = 512; cpu2 100% busy -> 1024 */
        set_stat(e, "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 40 0 0 1060 0 0 0 0 0 0\ncpu2 100 0 0 1000 0 0 0 0 0 0\n");
        do
                next_state(e, &st);
        while (st.level[2] != 1024);
        assert_int_equal(st.util[0], 409); /* 40 * 1024 / 100 */
        assert_int_equal(st.level[0], 512);
        assert_int_equal(st.util[2], 1024);

        /* cpu2 goes idle: the level stays up for 2 more periods, drops on the 3rd.  Batches
         * sampled before the change (still util=1024) may be queued: they don't count. */
        set_stat(e, "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 40 0 0 1160 0 0 0 0 0 0\ncpu2 100 0 0 1100 0 0 0 0 0 0\n");
        int held = 0, n = 0;
        for (;;) {
                next_state(e, &st);
                assert_true(++n < 30);
                if (st.util[2] != 0) {
                        assert_int_equal(st.util[2], 1024);
                        assert_int_equal(st.level[2], 1024);
                        continue;
                }
                if (st.level[2] != 1024)
                        break;
                held++;
        }
        assert_int_equal(held, 2);
        assert_int_equal(st.level[2], 128);
        /* and it stays down */
        next_state(e, &st);
        assert_int_equal(st.level[2], 128);
}

static void test_grant_limit_request_psi(void **state)
{
        struct env *e = *state;
        struct state st;
        char buf[4096];

        start_agent(e);
        accept_host(e);
        next_state(e, &st);
        host_send(e, "WELCOME 1 vcpus=3 max_level=900 boost_cap_ms=500 rate=10 burst=20 trust=full\n"
                     "GRANT 0 640\nGRANT 1 100\nGRANT 7 100\nLIMIT 2 256 512\nGARBAGE\n");
        /* schedutil (through the module) asks 700 on cpu0: sent as 768 */
        write_file(e->sys, "devices/system/cpu/cpu0/cpufreq/powerhint_request", "700\n");
        WAIT_STATE(e, &st, st.level[0] == 768);
        WAIT_STATE(e, &st, st.level[2] == 256); /* idle, raised to LIMIT min */
        read_file(e->sys, "devices/system/cpu/cpu0/cpufreq/powerhint_grant", buf, sizeof(buf));
        assert_string_equal(buf, "640\n");
        read_file(e->sys, "devices/system/cpu/cpu2/cpufreq/powerhint_grant", buf, sizeof(buf));
        assert_string_equal(buf, "0\n");

        /* WELCOME max_level caps; LIMIT max caps */
        write_file(e->sys, "devices/system/cpu/cpu0/cpufreq/powerhint_request", "1024\n");
        set_stat(e, "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 0 0 0 2000 0 0 0 0 0 0\ncpu2 1000 0 0 1000 0 0 0 0 0 0\n");
        WAIT_STATE(e, &st, st.level[0] == 900 && st.level[2] == 512);
        for (int i = 0; i < 3; i++) {
                next_state(e, &st);
                assert_int_equal(st.level[0], 900);
                assert_int_equal(st.level[2], 512);
        }

        assert_int_equal(run_cli(e->sock, "status", NULL, NULL, NULL, buf, sizeof(buf)), 0);
        assert_non_null(strstr(buf, "welcome=yes"));
        assert_non_null(strstr(buf, "trust=full"));
        assert_non_null(strstr(buf, "cpu0 util=0 level=900 request=1024 granted=640 limit=0-1024\n"));
        assert_non_null(strstr(buf, "limit=256-512\n"));
        /* GRANT 1 (offline), GRANT 7 (no such cpu), GARBAGE */
        assert_non_null(strstr(buf, " host_bad=3 "));

        /* PSI: 20% of the period stalled adds one step without the module */
        char p[600];
        snprintf(p, sizeof(p), "%s/devices/system/cpu/cpu0/cpufreq/powerhint_request", e->sys);
        assert_int_equal(unlink(p), 0);
        set_stat(e, "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 0 0 0 2100 0 0 0 0 0 0\ncpu2 1000 0 0 1100 0 0 0 0 0 0\n");
        WAIT_STATE(e, &st, st.level[0] == 128);
        for (int i = 0; i < 3; i++) {
                next_state(e, &st);
                assert_int_equal(st.level[0], 128); /* no pressure: stays */
        }
        uint64_t total = 0;
        int n = 0;
        do {
                /* 200 ms of stall per ~100 ms period: far above the 10% threshold */
                total += 200000;
                snprintf(buf, sizeof(buf), "some avg10=0.00 avg60=0.00 avg300=0.00 total=%llu\n",
                         (unsigned long long) total);
                write_file(e->proc, "pressure/cpu", buf);
                next_state(e, &st);
                assert_true(++n < 20);
        } while (st.level[0] != 256);
}

static void test_reconnect_and_boost(void **state)
{
        struct env *e = *state;
        struct state st;
        char buf[4096];

        start_agent(e);
        accept_host(e);
        next_state(e, &st);

        /* the host end goes away and comes back: full state again */
        close(e->conn_fd);
        accept_host(e);
        next_state(e, &st);
        assert_int_equal(st.n_hellos, 1);
        assert_int_equal(st.level[0], 128);
        assert_int_equal(st.level[2], 128);

        assert_int_equal(run_cli(e->sock, "boost", "200ms", "--cpu", "2", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "OK\n");
        do
                next_state(e, &st);
        while (st.boost_cpu < 0);
        assert_int_equal(st.boost_cpu, 2);
        assert_int_equal(st.boost_ms, 200);

        assert_int_equal(run_cli(e->sock, "boost", "2s", "--cpu", "1", buf, sizeof(buf)), 1);
        assert_string_equal(buf, "ERR no such cpu\n");
        assert_int_equal(run_cli(e->sock, "boost", "20s", "--cpu", "0", buf, sizeof(buf)), 2);
        assert_int_equal(run_cli(e->sock, "boost", "-5ms", "--cpu", "0", buf, sizeof(buf)), 2);
        assert_int_equal(run_cli(e->sock, "frobnicate", NULL, NULL, NULL, buf, sizeof(buf)), 2);
        assert_int_equal(run_cli(e->sock, "status", NULL, NULL, NULL, buf, sizeof(buf)), 0);
        assert_non_null(strstr(buf, " boosts=1 "));
        assert_int_equal(run_cli("/nonexistent/sock", "status", NULL, NULL, NULL, buf, sizeof(buf)), 3);
}

static int count_lines_with(const char *text, const char *needle)
{
        int n = 0;

        for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

/*
 * A busybox initramfs has no /run: the agent creates its socket's directory
 * instead of exiting with "cannot listen".
 */
static void test_socket_directory_created(void **state)
{
        struct env *e = *state;
        char sock[400], buf[4096];
        int rc = 3;

        snprintf(sock, sizeof(sock), "%s/run/sub/powerhintd.sock", e->dir);
        start_agent_at(e, sock, NULL);
        accept_host(e);
        /* the agent is up once the host end got its connection: poll the CLI with a deadline */
        for (int i = 0; i < 50 && rc == 3; i++) {
                rc = run_cli(sock, "status", NULL, NULL, NULL, buf, sizeof(buf));
                if (rc == 3)
                        usleep(100 * 1000);
        }
        assert_int_equal(rc, 0);
        assert_non_null(strstr(buf, "host=connected"));
        assert_int_equal(waitpid(e->pid, NULL, WNOHANG), 0); /* still running */
}

/*
 * The host end going away is logged at the default level, once, with its
 * reconnect; a host flapping five times in a few seconds gives one such pair
 * (rate limit), and the status counts every loss.
 */
static void test_host_loss_logged_rate_limited(void **state)
{
        struct env *e = *state;
        char log_path[400], log[8192], buf[4096];
        struct state st;

        snprintf(log_path, sizeof(log_path), "%s/agent.log", e->dir);
        start_agent_at(e, e->sock, log_path);
        accept_host(e);
        next_state(e, &st);
        for (int i = 0; i < 5; i++) {
                close(e->conn_fd);
                accept_host(e);
                next_state(e, &st); /* reconnected and re-sent */
        }
        read_file(e->dir, "agent.log", log, sizeof(log));
        assert_int_equal(count_lines_with(log, "powerhintd: host connected on "), 1);
        assert_int_equal(count_lines_with(log, " went away, re-sending the state every period"), 1);
        assert_int_equal(count_lines_with(log, "powerhintd: host connected again on "), 1);
        assert_int_equal(count_lines_with(log, "\n"), 3);
        assert_int_equal(run_cli(e->sock, "status", NULL, NULL, NULL, buf, sizeof(buf)), 0);
        assert_non_null(strstr(buf, " host_losses=5 "));
}

static int64_t mono_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int connect_local(const char *sock)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        assert_true(fd >= 0);
        strcpy(sa.sun_path, sock);
        assert_int_equal(connect(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
        return fd;
}

/*
 * The local socket is open to every guest user (0666).  Clients that send a
 * byte every 150 ms and never finish their line (more of them than the agent
 * serves at once) must not stop the agent's periods: the host keeps getting
 * a HELLO every period, each such client is answered "ERR" and closed at its
 * deadline, and a well-behaved client is still served.
 */
static void test_local_clients_cannot_stall(void **state)
{
        struct env *e = *state;
        enum { N = 12 };
        int cl[N], hellos = 0, answered = 0;
        char buf[4096], prev = 0;
        struct state st;
        int64_t t0, next_drib;

        start_agent(e);
        accept_host(e);
        next_state(e, &st);
        for (int i = 0; i < N; i++)
                cl[i] = connect_local(e->sock);
        t0 = mono_ms();
        next_drib = t0;
        /* two seconds of dribbling: 20 periods of 100 ms */
        for (int64_t now = t0; now - t0 < 2000; now = mono_ms()) {
                struct pollfd p = { .fd = e->conn_fd, .events = POLLIN };
                int64_t wait;

                if (now >= next_drib) {
                        for (int i = 0; i < N; i++)
                                (void) !write(cl[i], "S", 1); /* EPIPE once the agent closed it */
                        next_drib += 150;
                }
                wait = next_drib - now < 2000 - (now - t0) ? next_drib - now : 2000 - (now - t0);
                if (poll(&p, 1, (int) (wait > 0 ? wait : 0)) == 1) {
                        ssize_t n = read(e->conn_fd, buf, sizeof(buf));

                        assert_true(n > 0);
                        for (ssize_t i = 0; i < n; i++) {
                                if (prev == '\n' && buf[i] == 'H')
                                        hellos++;
                                prev = buf[i];
                        }
                }
        }
        /* every dribbler got its answer and was closed: the agent's deadline, not the client's pace */
        for (int i = 0; i < N; i++) {
                struct pollfd p = { .fd = cl[i], .events = POLLIN };
                size_t len = 0;
                ssize_t n = 1;

                while (n > 0 && len < sizeof(buf) - 1 && poll(&p, 1, 0) == 1) {
                        n = read(cl[i], buf + len, sizeof(buf) - 1 - len);
                        if (n > 0)
                                len += (size_t) n;
                }
                buf[len] = 0;
                if (n == 0 && strncmp(buf, "ERR ", 4) == 0)
                        answered++;
                close(cl[i]);
        }
        print_message("%d dribbling local clients: %d HELLOs in 2 s (100 ms period), %d answered and closed\n", N,
                      hellos, answered);
        assert_true(hellos >= 10);
        assert_int_equal(answered, N);
        assert_int_equal(run_cli(e->sock, "status", NULL, NULL, NULL, buf, sizeof(buf)), 0);
        assert_non_null(strstr(buf, "host=connected"));
        assert_non_null(strstr(buf, " clients_timed_out=12"));
}

int main(int argc, char **argv)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_state_levels_hysteresis, setup, teardown),
                cmocka_unit_test_setup_teardown(test_grant_limit_request_psi, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reconnect_and_boost, setup, teardown),
                cmocka_unit_test_setup_teardown(test_socket_directory_created, setup, teardown),
                cmocka_unit_test_setup_teardown(test_host_loss_logged_rate_limited, setup, teardown),
                cmocka_unit_test_setup_teardown(test_local_clients_cannot_stall, setup, teardown),
        };

        if (argc != 3) {
                fprintf(stderr, "usage: %s POWERHINTD POWERHINT\n", argv[0]);
                return 2;
        }
        powerhintd_bin = argv[1];
        powerhint_bin = argv[2];
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
