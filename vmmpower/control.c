/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Control socket server.
 *
 * Non-blocking throughout: the listening socket and every client live in
 * the daemon's epoll set.  A client sends one line; we answer and close.  A
 * client that sends more than CONTROL_LINE_MAX bytes without a newline gets
 * "ERR E2BIG" and is closed; one that sends nothing for
 * CONTROL_CLIENT_TIMEOUT_NS is dropped at the next period.  Input after a
 * reply is discarded one read per event, at most CONTROL_DRAIN_MAX bytes
 * (then the connection is closed): a peer that keeps writing cannot hold
 * the daemon's loop.
 *
 * Slots are given at accept(), by peer credentials, before anything is
 * read: a peer that may run no command at all gets "ERR EPERM" at once; at
 * most CONTROL_MAX_CLIENTS clients, of which CONTROL_ROOT_CLIENTS are kept
 * for root and each other uid holds at most CONTROL_MAX_CLIENTS_PER_UID
 * (control_slot_available()); a connection without a slot gets "ERR EBUSY"
 * and is closed, counted in counters->rejected.  Refusals are logged at most
 * CONTROL_LOG_BURST times per CONTROL_LOG_INTERVAL_NS, with a count of the
 * lines left out: a peer that floods the socket costs no log volume.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "control.h"
#include "event.h"
#include "log.h"
#include "version.h"

#define CONTROL_MAX_GROUPS 256
/* Input discarded after an error reply before the connection is closed anyway. */
#define CONTROL_DRAIN_MAX (64 * 1024)

struct control_client {
        struct io_watch watch;
        struct control_server *server;
        struct control_client *next;
        uid_t uid;
        gid_t gid;
        size_t n_groups;
        gid_t groups[CONTROL_MAX_GROUPS];
        char in[CONTROL_LINE_MAX + 1];
        size_t in_len;
        struct strbuf out;
        size_t out_pos;
        bool replying;
        bool draining; /* reply sent after an oversized request: discard input until EOF */
        size_t drained; /* bytes discarded so far */
        nsec_t since_ns;
};

struct control_server {
        struct io_watch watch;
        const struct control_ops *ops;
        void *userdata;
        struct control_counters *counters;
        int epoll_fd;
        char path[108];
        dev_t path_dev;           /* the socket file we renamed to path: only that one is unlinked */
        ino_t path_ino;
        bool have_group;
        gid_t group_gid;
        unsigned n_clients;
        struct control_client *clients;
        struct control_ratelimit log_limit;
};

bool control_peer_allowed(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups, gid_t group_gid,
                          bool have_group, bool readonly)
{
        if (uid == 0)
                return true;
        if (!readonly || !have_group)
                return false;
        if (gid == group_gid)
                return true;
        for (size_t i = 0; i < n_groups; i++)
                if (groups[i] == group_gid)
                        return true;
        return false;
}

bool control_slot_available(uid_t uid, unsigned n_clients, unsigned n_same_uid)
{
        if (n_clients >= CONTROL_MAX_CLIENTS)
                return false;
        if (uid == 0)
                return true;
        return n_clients < CONTROL_MAX_CLIENTS - CONTROL_ROOT_CLIENTS && n_same_uid < CONTROL_MAX_CLIENTS_PER_UID;
}

bool control_ratelimit_test(struct control_ratelimit *rl, nsec_t now, uint64_t *ret_suppressed)
{
        *ret_suppressed = 0;
        if (rl->n == 0 && rl->suppressed == 0)
                rl->begin_ns = now;
        else if (now - rl->begin_ns >= CONTROL_LOG_INTERVAL_NS) {
                *ret_suppressed = rl->suppressed;
                rl->begin_ns = now;
                rl->n = 0;
                rl->suppressed = 0;
        }
        if (rl->n >= CONTROL_LOG_BURST) {
                rl->suppressed++;
                return false;
        }
        rl->n++;
        return true;
}

/* A refusal, logged at notice within the rate limit (the counters count them all). */
static void log_refusal(struct control_server *cs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_refusal(struct control_server *cs, const char *fmt, ...)
{
        uint64_t suppressed;
        char buf[256];
        va_list ap;

        if (!control_ratelimit_test(&cs->log_limit, now_ns(), &suppressed))
                return;
        if (suppressed > 0)
                log_notice("Control: %" PRIu64 " more refusals were not logged in the last %lld s.", suppressed,
                           (long long) (CONTROL_LOG_INTERVAL_NS / NSEC_PER_SEC));
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        log_notice("%s", buf);
}

int control_parse_request(char *line, struct control_request *req)
{
        struct control_request r = { 0 };
        char *p = line;
        size_t len = strlen(line);

        if (len > 0 && line[len - 1] == '\n')
                line[--len] = '\0';
        if (len == 0)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) line[i];
                if (c < 0x20 || c >= 0x7f)
                        return -EINVAL;
        }
        while (*p) {
                char *word = p;

                if (*p == ' ')
                        return -EINVAL; /* leading or double space */
                while (*p && *p != ' ')
                        p++;
                if (*p == ' ') {
                        *p++ = '\0';
                        if (*p == '\0')
                                return -EINVAL; /* trailing space */
                }
                if (strcmp(word, "--json") == 0) {
                        r.json = true;
                        continue;
                }
                if (r.argc >= CONTROL_MAX_ARGS)
                        return -E2BIG;
                r.argv[r.argc++] = word;
        }
        if (r.argc == 0)
                return -EINVAL;
        *req = r;
        return 0;
}

int control_execute(const struct control_ops *ops, void *userdata, const struct control_request *req,
                    struct strbuf *body, char *msg, size_t msg_size)
{
        const char *cmd = req->argv[0];

        /* Text only (or no body): --json is refused rather than ignored. */
        if (req->json && (strcmp(cmd, "top") == 0 || strcmp(cmd, "metrics") == 0 || strcmp(cmd, "notify") == 0 ||
                          strcmp(cmd, "reload") == 0))
                return -EOPNOTSUPP;
        if (strcmp(cmd, "status") == 0 && req->argc == 1)
                ops->status(userdata, req->json, body);
        else if (strcmp(cmd, "vms") == 0 && req->argc == 1)
                ops->vms(userdata, req->json, body);
        else if (strcmp(cmd, "cpus") == 0 && req->argc == 1)
                ops->cpus(userdata, req->json, body);
        else if (strcmp(cmd, "plan") == 0 && req->argc == 1)
                ops->plan(userdata, req->json, body);
        else if (strcmp(cmd, "top") == 0 && req->argc == 1)
                ops->top(userdata, body);
        else if (strcmp(cmd, "metrics") == 0 && req->argc == 1)
                ops->metrics(userdata, body);
        else if (strcmp(cmd, "version") == 0 && req->argc == 1)
                strbuf_printf(body, req->json ? "{\"version\":\"%s\"}\n" : "%s\n", VMMPOWER_VERSION);
        else if (strcmp(cmd, "notify") == 0 && req->argc == 3) {
                /* From the libvirt hook: "notify OPERATION DOMAIN".  The names
                 * are only logged (escaped); discovery asks libvirt and procfs. */
                char op[64], dom[160];

                escape_bytes(req->argv[1], strlen(req->argv[1]), op, sizeof(op));
                escape_bytes(req->argv[2], strlen(req->argv[2]), dom, sizeof(dom));
                log_debug("Hook notification: %s %s, rescanning.", op, dom);
                ops->notify(userdata);
        } else if (strcmp(cmd, "reload") == 0 && req->argc == 1) {
                int r = ops->reload(userdata, msg, msg_size);
                if (r < 0)
                        return r;
        } else if (control_command_readonly(cmd) == -ENOENT)
                return -ENOENT;
        else
                return -EINVAL; /* known command, wrong arguments */
        return 0;
}

static void client_free(struct control_client *c)
{
        struct control_server *cs = c->server;

        for (struct control_client **p = &cs->clients; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        cs->n_clients--;
        io_watch_del(cs->epoll_fd, &c->watch);
        close(c->watch.fd);
        strbuf_free(&c->out);
        free(c);
}

static void client_flush(struct control_client *c)
{
        while (c->out_pos < c->out.len) {
                ssize_t n = write(c->watch.fd, c->out.data + c->out_pos, c->out.len - c->out_pos);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                (void) io_watch_mod(c->server->epoll_fd, &c->watch, EPOLLOUT);
                                return;
                        }
                        break; /* peer went away: nothing to tell */
                }
                c->out_pos += (size_t) n;
        }
        if (c->draining && c->out_pos == c->out.len) {
                /* Closing with unread input would reset the connection and the
                 * peer might never see the error: half-close, then discard what
                 * it still sends until it closes (or the client timeout). */
                (void) shutdown(c->watch.fd, SHUT_WR);
                (void) io_watch_mod(c->server->epoll_fd, &c->watch, EPOLLIN);
                return;
        }
        client_free(c);
}

static void client_reply_error(struct control_client *c, int err, const char *msg)
{
        const char *name = strerrorname_np(err < 0 ? -err : err);

        strbuf_printf(&c->out, "ERR %s %s\n", name ? name : "EIO", msg);
        c->replying = true;
        client_flush(c);
}

static void client_handle_line(struct control_client *c)
{
        struct control_server *cs = c->server;
        struct control_request req;
        char msg[CONTROL_ERROR_MAX] = "";
        struct strbuf body;
        int r, ro;

        cs->counters->requests++;
        r = control_parse_request(c->in, &req);
        if (r < 0) {
                cs->counters->errors++;
                { client_reply_error(c, r, "malformed request"); return; }
        }
        ro = control_command_readonly(req.argv[0]);
        if (ro < 0) {
                cs->counters->errors++;
                { client_reply_error(c, -ENOENT, "unknown command"); return; }
        }
        if (!control_peer_allowed(c->uid, c->gid, c->groups, c->n_groups, cs->group_gid, cs->have_group, ro)) {
                cs->counters->denied++;
                log_refusal(cs, "Control: denied '%s' to uid %u.", req.argv[0], (unsigned) c->uid);
                { client_reply_error(c, -EPERM, "permission denied"); return; }
        }
        strbuf_init(&body);
        r = control_execute(cs->ops, cs->userdata, &req, &body, msg, sizeof(msg));
        if (r < 0 || body.oom) {
                cs->counters->errors++;
                strbuf_free(&body);
                if (!msg[0]) /* reload gave its reason */
                        snprintf(msg, sizeof(msg), "%s", r == -EINVAL        ? "wrong arguments"
                                 : r == -EOPNOTSUPP ? "--json is not supported by this command"
                                                    : "command failed");
                { client_reply_error(c, r < 0 ? r : -ENOMEM, msg); return; }
        }
        strbuf_puts(&c->out, "OK\n");
        strbuf_append(&c->out, body.data ? body.data : "", body.len);
        strbuf_free(&body);
        c->replying = true;
        client_flush(c);
}

static void client_event(struct io_watch *w, uint32_t events)
{
        struct control_client *c = container_of(w, struct control_client, watch);

        if (c->draining && c->out_pos == c->out.len) {
                /* One read per event (epoll calls again while there is more):
                 * a peer that keeps writing must not keep this loop reading. */
                char sink[4096];
                ssize_t n = read(w->fd, sink, sizeof(sink));

                if (n > 0)
                        c->drained += (size_t) n;
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || c->drained > CONTROL_DRAIN_MAX)
                        client_free(c);
                return;
        }
        if (c->replying) {
                if (events & (EPOLLERR | EPOLLHUP))
                        { client_free(c); return; }
                { client_flush(c); return; }
        }
        for (;;) {
                ssize_t n = read(w->fd, c->in + c->in_len, CONTROL_LINE_MAX - c->in_len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return;
                        { client_free(c); return; }
                }
                if (n == 0) /* EOF before a full line */
                        { client_free(c); return; }
                char *nl = memchr(c->in + c->in_len, '\n', (size_t) n);
                c->in_len += (size_t) n;
                c->in[c->in_len] = '\0';
                if (nl) {
                        nl[1] = '\0';
                        if (strlen(c->in) != (size_t) (nl + 1 - c->in)) { /* embedded NUL */
                                c->server->counters->errors++;
                                { client_reply_error(c, -EINVAL, "malformed request"); return; }
                        }
                        { client_handle_line(c); return; }
                }
                if (c->in_len >= CONTROL_LINE_MAX) {
                        c->server->counters->errors++;
                        c->draining = true;
                        { client_reply_error(c, -E2BIG, "request line too long"); return; }
                }
        }
}

/* Answer a connection that gets no client: one error line, then close.  Input
 * it already sent (one request line's worth) is read first, so that closing
 * does not reset the connection before the peer has read the error; one
 * read, not a loop: a peer that keeps writing must not hold the accept loop. */
static void refuse(int fd, const char *reply)
{
        char sink[CONTROL_LINE_MAX + 1];

        (void) send(fd, reply, strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
        (void) shutdown(fd, SHUT_WR);
        (void) read(fd, sink, sizeof(sink));
        close(fd);
}

static unsigned clients_of_uid(const struct control_server *cs, uid_t uid)
{
        unsigned n = 0;

        for (const struct control_client *c = cs->clients; c; c = c->next)
                n += c->uid == uid;
        return n;
}

static void server_accept(struct io_watch *w, uint32_t events)
{
        struct control_server *cs = container_of(w, struct control_server, watch);

        for (;;) {
                struct control_client *c;
                struct ucred cred;
                socklen_t len = sizeof(cred);
                gid_t groups[CONTROL_MAX_GROUPS];
                size_t n_groups = 0;
                int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno != EAGAIN)
                                log_warning_errno(errno, "Control: accept failed: %m, ignoring.");
                        return;
                }
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                        cs->counters->errors++;
                        close(fd);
                        continue;
                }
                len = sizeof(groups);
                if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0)
                        n_groups = len / sizeof(gid_t);
                /* A peer that may run nothing (not even the read-only commands) holds no slot. */
                if (!control_peer_allowed(cred.uid, cred.gid, groups, n_groups, cs->group_gid, cs->have_group,
                                          true)) {
                        cs->counters->denied++;
                        log_refusal(cs, "Control: denied a connection of uid %u (not root, not in ControlGroup).",
                                    (unsigned) cred.uid);
                        refuse(fd, "ERR EPERM permission denied\n");
                        continue;
                }
                if (!control_slot_available(cred.uid, cs->n_clients, clients_of_uid(cs, cred.uid))) {
                        cs->counters->rejected++;
                        log_refusal(cs, "Control: no client slot for uid %u (%u clients connected), connection closed.",
                                    (unsigned) cred.uid, cs->n_clients);
                        refuse(fd, "ERR EBUSY too many connections\n");
                        continue;
                }
                c = calloc(1, sizeof(*c));
                if (!c) {
                        close(fd);
                        continue;
                }
                c->server = cs;
                c->uid = cred.uid;
                c->gid = cred.gid;
                c->n_groups = n_groups;
                memcpy(c->groups, groups, n_groups * sizeof(gid_t));
                c->since_ns = now_ns();
                strbuf_init(&c->out);
                if (io_watch_add(cs->epoll_fd, &c->watch, fd, EPOLLIN, client_event) < 0) {
                        close(fd);
                        free(c);
                        continue;
                }
                c->next = cs->clients;
                cs->clients = c;
                cs->n_clients++;
        }
}

unsigned control_server_expire(struct control_server *cs, nsec_t now)
{
        struct control_client *c, *next;
        unsigned n = 0;

        if (!cs)
                return 0;
        for (c = cs->clients; c; c = next) {
                next = c->next;
                if (now - c->since_ns > CONTROL_CLIENT_TIMEOUT_NS) {
                        client_free(c);
                        n++;
                }
        }
        return n;
}

int control_server_new(const char *path, const char *group, int epoll_fd, const struct control_ops *ops,
                       void *userdata, struct control_counters *counters, struct control_server **ret)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct control_server *cs;
        char tmp[sizeof(sa.sun_path)];
        struct stat st;
        int fd, r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return log_error_errno(ENAMETOOLONG, "Control socket path too long: %s", path);
        cs = calloc(1, sizeof(*cs));
        if (!cs)
                return -ENOMEM;
        cs->ops = ops;
        cs->userdata = userdata;
        cs->counters = counters;
        cs->epoll_fd = epoll_fd;
        strcpy(cs->path, path);
        if (group && *group) {
                struct group *gr = getgrnam(group);
                if (!gr) {
                        free(cs);
                        return log_error_errno(ENOENT, "ControlGroup '%s' does not exist.", group);
                }
                cs->have_group = true;
                cs->group_gid = gr->gr_gid;
        }
        /* Bind at PATH.new, set its mode and owner, and only then rename it over
         * PATH: a reload that fails half-way leaves the running socket alone. */
        if (path_printf(tmp, sizeof(sa.sun_path), "%s.new", path) < 0) {
                free(cs);
                return log_error_errno(ENAMETOOLONG, "Control socket path too long: %s", path);
        }
        strcpy(sa.sun_path, tmp);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                r = -errno;
                free(cs);
                return r;
        }
        (void) unlink(tmp);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 16) < 0) {
                r = log_error_errno(errno, "Failed to listen on %s: %m", tmp);
                goto fail;
        }
        /* Access is decided by peer credentials; the mode only keeps strangers
         * from connecting at all when no group is configured. */
        if (chmod(tmp, cs->have_group ? 0660 : 0600) < 0 ||
            (cs->have_group && chown(tmp, 0, cs->group_gid) < 0)) {
                r = log_error_errno(errno, "Failed to set permissions of %s: %m", tmp);
                goto fail;
        }
        r = io_watch_add(epoll_fd, &cs->watch, fd, EPOLLIN, server_accept);
        if (r < 0)
                goto fail;
        if (lstat(tmp, &st) < 0 || rename(tmp, path) < 0) {
                r = log_error_errno(errno, "Failed to move %s to %s: %m", tmp, path);
                io_watch_del(epoll_fd, &cs->watch);
                goto fail;
        }
        cs->path_dev = st.st_dev;
        cs->path_ino = st.st_ino;
        *ret = cs;
        return 0;
fail:
        close(fd);
        (void) unlink(tmp);
        free(cs);
        return r;
}

void control_server_free(struct control_server *cs)
{
        struct stat st;

        if (!cs)
                return;
        while (cs->clients)
                client_free(cs->clients);
        io_watch_del(cs->epoll_fd, &cs->watch);
        close(cs->watch.fd);
        /* Only our own socket file: never one another process put there since. */
        if (cs->path[0] && lstat(cs->path, &st) == 0 && st.st_dev == cs->path_dev && st.st_ino == cs->path_ino)
                (void) unlink(cs->path);
        free(cs);
}

void control_server_forget_path(struct control_server *cs)
{
        cs->path[0] = '\0';
}

int control_socket_live(const char *path, pid_t *ret_pid)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct ucred cred;
        socklen_t len = sizeof(cred);
        int fd, r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* Non-blocking: a listener with a full backlog answers EAGAIN, which is
         * as live as an accepted connect (its pid is then not known). */
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0) {
                if (ret_pid)
                        *ret_pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : 0;
                r = 1;
        } else if (errno == EAGAIN) {
                if (ret_pid)
                        *ret_pid = 0;
                r = 1;
        } else
                r = errno == ECONNREFUSED || errno == ENOENT || errno == ENOTSOCK ? 0 : -errno;
        close(fd);
        return r;
}
