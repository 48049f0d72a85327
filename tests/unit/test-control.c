/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control.h"
#include "event.h"
#include "log.h"

static void test_parse_request(void **state)
{
        struct control_request req;
        char l1[] = "vms --json\n", l2[] = "notify started vmmpt-a\n", l3[] = "", l4[] = "vms  --json\n",
             l5[] = " vms\n", l6[] = "vms \n", l7[] = "a b c d e f g h i\n", l8[] = "vm\x01s\n", l9[] = "--json\n";

        assert_int_equal(control_parse_request(l1, &req), 0);
        assert_int_equal(req.argc, 1);
        assert_string_equal(req.argv[0], "vms");
        assert_true(req.json);
        assert_int_equal(control_parse_request(l2, &req), 0);
        assert_int_equal(req.argc, 3);
        assert_false(req.json);
        assert_string_equal(req.argv[2], "vmmpt-a");
        assert_int_equal(control_parse_request(l3, &req), -EINVAL);
        assert_int_equal(control_parse_request(l4, &req), -EINVAL);
        assert_int_equal(control_parse_request(l5, &req), -EINVAL);
        assert_int_equal(control_parse_request(l6, &req), -EINVAL);
        assert_int_equal(control_parse_request(l7, &req), -E2BIG);
        assert_int_equal(control_parse_request(l8, &req), -EINVAL);
        assert_int_equal(control_parse_request(l9, &req), -EINVAL);
}

static void test_readonly(void **state)
{
        assert_int_equal(control_command_readonly("status"), 1);
        assert_int_equal(control_command_readonly("metrics"), 1);
        assert_int_equal(control_command_readonly("reload"), 0);
        assert_int_equal(control_command_readonly("notify"), 0);
        assert_int_equal(control_command_readonly("shutdown"), -ENOENT);
        assert_int_equal(control_command_readonly("Status"), -ENOENT);
}

static void test_peer_allowed(void **state)
{
        gid_t groups[] = { 5, 7, 1001 };

        /* root: everything */
        assert_true(control_peer_allowed(0, 0, NULL, 0, 0, false, false));
        /* no group configured: only root */
        assert_false(control_peer_allowed(1000, 1000, groups, 3, 0, false, true));
        /* group member (primary or supplementary): read-only only */
        assert_true(control_peer_allowed(1000, 1001, NULL, 0, 1001, true, true));
        assert_true(control_peer_allowed(1000, 1000, groups, 3, 1001, true, true));
        assert_false(control_peer_allowed(1000, 1000, groups, 3, 1001, true, false));
        /* not a member */
        assert_false(control_peer_allowed(1000, 1000, groups, 2, 1001, true, true));
}

static void test_slot_available(void **state)
{
        /* root: every slot */
        assert_true(control_slot_available(0, CONTROL_MAX_CLIENTS - 1, CONTROL_MAX_CLIENTS - 1));
        assert_false(control_slot_available(0, CONTROL_MAX_CLIENTS, 0));
        /* others: not the reserved ones, and a limit per uid */
        assert_true(control_slot_available(1000, 0, 0));
        assert_true(control_slot_available(1000, CONTROL_MAX_CLIENTS - CONTROL_ROOT_CLIENTS - 1, 0));
        assert_false(control_slot_available(1000, CONTROL_MAX_CLIENTS - CONTROL_ROOT_CLIENTS, 0));
        assert_true(control_slot_available(1000, 10, CONTROL_MAX_CLIENTS_PER_UID - 1));
        assert_false(control_slot_available(1000, 10, CONTROL_MAX_CLIENTS_PER_UID));
}

static void test_ratelimit(void **state)
{
        struct control_ratelimit rl = { 0 };
        nsec_t t = 5 * NSEC_PER_SEC;
        unsigned logged = 0;
        uint64_t sup;

        for (unsigned i = 0; i < 1000; i++) {
                logged += control_ratelimit_test(&rl, t + i * NSEC_PER_MSEC, &sup);
                assert_int_equal(sup, 0);
        }
        assert_int_equal(logged, CONTROL_LOG_BURST);
        /* the next interval: allowed again, and told how many were left out */
        assert_true(control_ratelimit_test(&rl, t + CONTROL_LOG_INTERVAL_NS, &sup));
        assert_int_equal(sup, 1000 - CONTROL_LOG_BURST);
        assert_true(control_ratelimit_test(&rl, t + CONTROL_LOG_INTERVAL_NS + 1, &sup));
        assert_int_equal(sup, 0);
}

/*
 * A real control server on a temp socket (group "nogroup", so that uid
 * 60000+ with gid 65534 are ControlGroup members), driven by this test's
 * own epoll loop; non-root peers are forked children that setuid().
 */
#define PEER_GID 65534
#define PEER_UID 60000

/* The server's owner in these tests: no daemon, only what the ops record. */
struct owner {
        unsigned notifies, reloads;
        int reload_result;                /* what "reload" returns */
        struct control_counters counters;
};

static void owner_status(void *userdata, bool json, struct strbuf *out)
{
        strbuf_puts(out, json ? "{\"status\":1}\n" : "status\n");
}

static void owner_vms(void *userdata, bool json, struct strbuf *out)
{
        strbuf_puts(out, json ? "[]\n" : "vms\n");
}

static void owner_cpus(void *userdata, bool json, struct strbuf *out)
{
        strbuf_puts(out, "cpus\n");
}

static void owner_plan(void *userdata, bool json, struct strbuf *out)
{
        strbuf_puts(out, "plan\n");
}

static void owner_top(void *userdata, struct strbuf *out)
{
        strbuf_puts(out, "top\n");
}

static void owner_metrics(void *userdata, struct strbuf *out)
{
        strbuf_puts(out, "# metrics\n");
}

static void owner_notify(void *userdata)
{
        struct owner *o = userdata;

        o->notifies++;
}

static int owner_reload(void *userdata, char *msg, size_t size)
{
        struct owner *o = userdata;

        o->reloads++;
        if (o->reload_result < 0)
                snprintf(msg, size, "f.conf:3: bad value; running configuration kept");
        return o->reload_result;
}

static const struct control_ops owner_ops = {
        .status = owner_status,
        .vms = owner_vms,
        .cpus = owner_cpus,
        .plan = owner_plan,
        .top = owner_top,
        .metrics = owner_metrics,
        .notify = owner_notify,
        .reload = owner_reload,
};

/* control_execute() reaches the owner only through the ops, and only with valid arguments. */
static void test_execute_through_ops(void **state)
{
        struct owner o = { .reload_result = 0 };
        char line[64], msg[CONTROL_ERROR_MAX] = "";
        struct control_request req;
        struct strbuf body;

        strbuf_init(&body);
        strcpy(line, "status --json\n");
        assert_int_equal(control_parse_request(line, &req), 0);
        assert_int_equal(control_execute(&owner_ops, &o, &req, &body, msg, sizeof(msg)), 0);
        assert_string_equal(body.data, "{\"status\":1}\n");
        strbuf_reset(&body);
        strcpy(line, "top --json\n");
        assert_int_equal(control_parse_request(line, &req), 0);
        assert_int_equal(control_execute(&owner_ops, &o, &req, &body, msg, sizeof(msg)), -EOPNOTSUPP);
        strcpy(line, "notify started x y\n");
        assert_int_equal(control_parse_request(line, &req), 0);
        assert_int_equal(control_execute(&owner_ops, &o, &req, &body, msg, sizeof(msg)), -EINVAL);
        assert_int_equal(o.notifies, 0);
        strcpy(line, "notify started x\n");
        assert_int_equal(control_parse_request(line, &req), 0);
        assert_int_equal(control_execute(&owner_ops, &o, &req, &body, msg, sizeof(msg)), 0);
        assert_int_equal(o.notifies, 1);
        strcpy(line, "reload\n");
        assert_int_equal(control_parse_request(line, &req), 0);
        assert_int_equal(control_execute(&owner_ops, &o, &req, &body, msg, sizeof(msg)), 0);
        assert_string_equal(msg, "");
        o.reload_result = -EINVAL;
        assert_int_equal(control_execute(&owner_ops, &o, &req, &body, msg, sizeof(msg)), -EINVAL);
        assert_string_equal(msg, "f.conf:3: bad value; running configuration kept");
        assert_int_equal(o.reloads, 2);
        strcpy(line, "shutdown\n");
        assert_int_equal(control_parse_request(line, &req), 0);
        assert_int_equal(control_execute(&owner_ops, &o, &req, &body, msg, sizeof(msg)), -ENOENT);
        strbuf_free(&body);
}

struct server_fixture {
        char dir[64];
        char path[128];
        int epfd;
        struct owner o;
        struct control_server *cs;
};

static struct server_fixture *fixture_new(void)
{
        struct server_fixture *f = calloc(1, sizeof(*f));

        if (geteuid() != 0)
                fail_msg("these tests need root: they fork peers that setuid() to other users");
        assert_non_null(f);
        strcpy(f->dir, "/tmp/vmmpt-control-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        assert_int_equal(chmod(f->dir, 0755), 0);
        snprintf(f->path, sizeof(f->path), "%s/control.sock", f->dir);
        f->epfd = epoll_create1(EPOLL_CLOEXEC);
        assert_true(f->epfd >= 0);
        assert_non_null(getgrgid(PEER_GID));
        assert_int_equal(control_server_new(f->path, getgrgid(PEER_GID)->gr_name, f->epfd, &owner_ops, &f->o,
                                            &f->o.counters, &f->cs), 0);
        return f;
}

static void fixture_free(struct server_fixture *f)
{
        control_server_free(f->cs);
        close(f->epfd);
        rmdir(f->dir);
        free(f);
}

/* Dispatch the server's events for up to timeout_ms. */
static void pump(struct server_fixture *f, int timeout_ms)
{
        struct epoll_event ev[16];
        int n = epoll_wait(f->epfd, ev, 16, timeout_ms);

        for (int i = 0; i < n; i++) {
                struct io_watch *w = ev[i].data.ptr;
                w->fn(w, ev[i].events);
        }
}

static int connect_to(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        strcpy(sa.sun_path, path);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        return fd;
}

/* Fork a peer running as uid (gid PEER_GID); it runs fn, writes one byte to
 * the returned pipe when done, then waits to be killed (holding its fds). */
static pid_t peer_start(uid_t uid, void (*fn)(const char *path, int n), const char *path, int n, int *ret_done)
{
        int p[2];
        pid_t pid;

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char ok = 1;

                close(p[0]);
                if (setgroups(0, NULL) < 0 || setgid(PEER_GID) < 0 || setuid(uid) < 0)
                        _exit(2);
                /* after setuid(), which clears it: die with the test, also when it fails */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
                        _exit(2);
                fn(path, n);
                (void) write(p[1], &ok, 1);
                for (;;)
                        pause();
        }
        close(p[1]);
        *ret_done = p[0];
        return pid;
}

/* Pump the server until every pipe in done[] is readable (peers finished); deadline 30 s. */
static void pump_until_done(struct server_fixture *f, const int *done, unsigned n)
{
        nsec_t end = now_ns() + 30 * NSEC_PER_SEC;

        for (;;) {
                unsigned ready = 0;

                for (unsigned i = 0; i < n; i++) {
                        struct pollfd p = { .fd = done[i], .events = POLLIN };
                        ready += poll(&p, 1, 0) == 1;
                }
                if (ready == n)
                        return;
                assert_true(now_ns() < end);
                pump(f, 10);
        }
}

/* Peer: open n connections and keep them, saying nothing. */
static void hold_connections(const char *path, int n)
{
        for (int i = 0; i < n; i++)
                (void) connect_to(path);
}

/* Root's request on a fresh connection, the server pumped meanwhile: the reply, or "" */
static void root_request(struct server_fixture *f, const char *line, char *reply, size_t size)
{
        nsec_t end = now_ns() + 10 * NSEC_PER_SEC;
        size_t len = 0;
        int fd = connect_to(f->path);

        reply[0] = '\0';
        assert_true(fd >= 0);
        assert_int_equal(write(fd, line, strlen(line)), (ssize_t) strlen(line));
        assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
        while (now_ns() < end) {
                ssize_t n;

                pump(f, 10);
                n = read(fd, reply + len, size - 1 - len);
                if (n > 0)
                        len += (size_t) n;
                else if (n == 0 || errno != EAGAIN)
                        break;
        }
        reply[len] = '\0';
        close(fd);
}

static void peers_stop(pid_t *pids, int *done, unsigned n)
{
        for (unsigned i = 0; i < n; i++) {
                kill(pids[i], SIGKILL);
                waitpid(pids[i], NULL, 0);
                close(done[i]);
        }
}

/*
 * Read-only members holding every connection they can get (8 uids, 100
 * connections each, never a byte sent) do not keep root out: root's notify
 * (the libvirt hook) is answered.  Each uid holds its limit, the members
 * together no more than the slots not kept for root, the rest are refused and
 * counted.
 */
static void test_root_not_locked_out(void **state)
{
        enum { N_PEERS = 8, PER_PEER = 100 };
        struct server_fixture *f = fixture_new();
        pid_t pids[N_PEERS];
        int done[N_PEERS];
        unsigned held = MIN(N_PEERS * CONTROL_MAX_CLIENTS_PER_UID, CONTROL_MAX_CLIENTS - CONTROL_ROOT_CLIENTS);
        char reply[256];

        for (unsigned i = 0; i < N_PEERS; i++)
                pids[i] = peer_start(PEER_UID + i, hold_connections, f->path, PER_PEER, &done[i]);
        pump_until_done(f, done, N_PEERS);
        pump(f, 10);
        root_request(f, "notify started vmmpt-x\n", reply, sizeof(reply));
        assert_string_equal(reply, "OK\n");
        assert_int_equal(f->o.notifies, 1);
        assert_int_equal(f->o.counters.rejected, N_PEERS * PER_PEER - held);
        /* and again: root is not limited to one slot */
        root_request(f, "notify stopped vmmpt-x\n", reply, sizeof(reply));
        assert_string_equal(reply, "OK\n");
        assert_int_equal(f->o.notifies, 2);
        peers_stop(pids, done, N_PEERS);
        fixture_free(f);
}

/* Peer: n denied requests in a row, each waited for. */
static void flood_denied(const char *path, int n)
{
        for (int i = 0; i < n; i++) {
                char buf[128];
                int fd = connect_to(path);

                if (fd < 0)
                        continue;
                if (write(fd, "reload\n", 7) == 7)
                        while (read(fd, buf, sizeof(buf)) > 0)
                                ;
                close(fd);
        }
}

/*
 * A member's flood of denied requests is counted in full and logged at most
 * CONTROL_LOG_BURST times (stderr captured in a file).
 */
static void test_denials_rate_limited(void **state)
{
        enum { N = 300 };
        struct server_fixture *f = fixture_new();
        char logpath[160], line[512];
        int saved, logfd, done;
        unsigned lines = 0;
        pid_t pid;
        FILE *in;

        log_set_max_level(LOG_LEVEL_INFO);
        snprintf(logpath, sizeof(logpath), "%s/log", f->dir);
        logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(logfd >= 0);
        fflush(stderr);
        saved = dup(STDERR_FILENO);
        assert_int_equal(dup2(logfd, STDERR_FILENO), STDERR_FILENO);

        pid = peer_start(PEER_UID, flood_denied, f->path, N, &done);
        pump_until_done(f, &done, 1);

        fflush(stderr);
        assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
        close(saved);
        close(logfd);
        peers_stop(&pid, &done, 1);
        assert_int_equal(f->o.counters.denied, N);
        in = fopen(logpath, "r");
        assert_non_null(in);
        while (fgets(line, sizeof(line), in))
                if (strstr(line, "denied"))
                        lines++;
        fclose(in);
        unlink(logpath);
        printf("# %d denied requests, %u log lines\n", N, lines);
        assert_true(lines >= 1);
        assert_true(lines <= CONTROL_LOG_BURST);
        fixture_free(f);
}

/* Peer: a request line over the limit, the error reply read, then writing without end. */
static void flood_after_long_line(const char *path, int n)
{
        char buf[4096], reply[128];
        size_t len = 0;
        int fd = connect_to(path);

        signal(SIGPIPE, SIG_IGN);
        if (fd < 0)
                _exit(3);
        memset(buf, 'a', sizeof(buf));
        if (write(fd, buf, CONTROL_LINE_MAX + 100) != CONTROL_LINE_MAX + 100)
                _exit(3);
        while (len < sizeof(reply) - 1) {
                ssize_t r = read(fd, reply + len, sizeof(reply) - 1 - len);
                if (r <= 0)
                        break;
                len += (size_t) r;
        }
        reply[len] = '\0';
        if (strncmp(reply, "ERR E2BIG", 9) != 0)
                _exit(3);
        /* the server must close the connection: n MiB written without that is a failure */
        for (long i = 0; i < (long) n * 256; i++)
                if (write(fd, buf, sizeof(buf)) < 0)
                        return;
        _exit(4); /* never closed: no "done" byte */
}

/*
 * A member that keeps writing after its error reply does not hold the
 * server's loop: the input is discarded a read per event and the connection
 * closed after CONTROL_DRAIN_MAX bytes (before, the server read until the
 * peer stopped, inside one event).  The alarm ends a test that hangs.
 */
static void test_flood_after_error_closed(void **state)
{
        struct server_fixture *f = fixture_new();
        char reply[256], ok = 0;
        int done;
        pid_t pid;

        alarm(60);
        pid = peer_start(PEER_UID, flood_after_long_line, f->path, 64, &done);
        pump_until_done(f, &done, 1);
        assert_int_equal(read(done, &ok, 1), 1); /* the peer's write failed: closed by the server */
        assert_int_equal(ok, 1);
        assert_int_equal(f->o.counters.errors, 1);
        /* and the server still answers */
        root_request(f, "notify started vmmpt-x\n", reply, sizeof(reply));
        assert_string_equal(reply, "OK\n");
        alarm(0);
        peers_stop(&pid, &done, 1);
        fixture_free(f);
}

/*
 * The longest ControlSocket the configuration takes (103 bytes, config.c)
 * is one the server can listen on: it binds PATH.new first; 104 is not.
 */
static void test_longest_socket_path(void **state)
{
        struct server_fixture *f = fixture_new();
        struct control_server *cs = NULL;
        char path[128];
        size_t n;

        snprintf(path, sizeof(path), "%s/", f->dir);
        n = strlen(path);
        memset(path + n, 's', 103 - n);
        path[103] = '\0';
        assert_int_equal(control_server_new(path, NULL, f->epfd, &owner_ops, &f->o, &f->o.counters, &cs), 0);
        assert_int_equal(control_socket_live(path, NULL), 1);
        control_server_free(cs);
        cs = NULL;
        strcat(path, "s");
        assert_int_equal(control_server_new(path, NULL, f->epfd, &owner_ops, &f->o, &f->o.counters, &cs),
                         -ENAMETOOLONG);
        fixture_free(f);
}

/*
 * A second daemon must not take a live socket over: control_socket_live()
 * sees the server (and its pid); and a server leaves a path alone at exit
 * once another socket file was put there.
 */
static void test_socket_live_and_not_unlinked(void **state)
{
        struct server_fixture *f = fixture_new();
        char other[160];
        pid_t owner = -1;
        struct stat st;
        int fd;

        assert_int_equal(control_socket_live(f->path, &owner), 1);
        assert_int_equal(owner, getpid());
        /* someone else's file now at the path (another daemon's socket, say) */
        snprintf(other, sizeof(other), "%s/other", f->dir);
        fd = open(other, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(rename(other, f->path), 0);
        control_server_free(f->cs);
        f->cs = NULL;
        assert_int_equal(stat(f->path, &st), 0);
        assert_int_equal(control_socket_live(f->path, &owner), 0); /* a plain file: nobody serves it */
        unlink(f->path);
        assert_int_equal(control_socket_live(f->path, &owner), 0); /* nothing there */
        /* our own server's path is removed at exit */
        assert_int_equal(control_server_new(f->path, NULL, f->epfd, &owner_ops, &f->o, &f->o.counters, &f->cs), 0);
        control_server_free(f->cs);
        f->cs = NULL;
        assert_int_equal(stat(f->path, &st), -1);
        fixture_free(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_request),
                cmocka_unit_test(test_readonly),
                cmocka_unit_test(test_peer_allowed),
                cmocka_unit_test(test_slot_available),
                cmocka_unit_test(test_ratelimit),
                cmocka_unit_test(test_execute_through_ops),
                cmocka_unit_test(test_root_not_locked_out),
                cmocka_unit_test(test_denials_rate_limited),
                cmocka_unit_test(test_socket_live_and_not_unlinked),
                cmocka_unit_test(test_flood_after_error_closed),
                cmocka_unit_test(test_longest_socket_path),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
