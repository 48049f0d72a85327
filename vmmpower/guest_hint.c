/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest hint channel: the host's client connections to every VM's
 * virtio-serial hint port (see guest_hint.h for the rules, docs/protocol.md
 * for the protocol).
 *
 * Why a client: libvirt (<channel type='unix'>, mode='bind') and QEMU
 * (-chardev socket,server=on) listen; the host agent connects.  QEMU serves one
 * client at a time and virtio-serial drops guest writes while nobody is
 * connected, so the protocol is made of levels the guest re-sends every second:
 * a reconnect loses nothing but the line in flight (dropped, counted).
 *
 * Why bounded reads and a fixed output buffer: a guest controls how fast bytes
 * arrive and whether it reads ours.  Reading at most HINT_READ_CHUNK bytes per
 * epoll event keeps the daemon's loop fair between VMs and its control period;
 * the token bucket in hint_proto.c bounds what the hints can make the daemon
 * do; and replies that do not fit HINT_OUT_BYTES(n_vcpus) bytes are dropped
 * (counted) instead of queued.  Per VM the memory is this struct, its output
 * buffer and the per-vCPU arrays, sized by the host's vCPU count, independent
 * of the guest's behaviour.
 *
 * Why the peer check: two VMs can name the same socket (two QEMUs started
 * with the same -name and a [QEMU] HintSocket pattern; the second unlinks the
 * first's socket and binds its own), and the inventory's pid is the only VM
 * identity.  So a pattern channel is only used when the listening end is the
 * VM's own QEMU (SO_PEERCRED: the pid that called listen(2)), and no two VMs'
 * channels are connected to one path at a time.  libvirt's channel sockets are
 * created and listened on by libvirt (virtqemud/libvirtd) and handed to QEMU
 * as a file descriptor, so their SO_PEERCRED pid is libvirt's, never QEMU's:
 * for them the path from the domain's live XML is the identity, as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "event.h"
#include "guest_hint.h"
#include "log.h"

enum conn_state {
        CONN_IDLE,       /* no socket; connect when next_connect_ns is due */
        CONN_CONNECTING, /* EINPROGRESS, waiting for EPOLLOUT */
        CONN_UP,
};

struct hint_conn {
        struct io_watch watch;  /* watch.fd: the socket or -1 */
        struct hint_server *hs;
        pid_t pid;
        char path[108];
        char name[VM_NAME_MAX];
        uint32_t n_vcpus;
        struct hint_vm *vm;
        bool has_override;
        enum conn_state state;
        bool seen;              /* reported in the current update */
        uint32_t events;        /* registered epoll events */
        nsec_t next_connect_ns;
        nsec_t backoff_ns;
        nsec_t last_log_ns;
        bool logged;
        uint64_t rejected_logged; /* rejected lines at the last log */
        struct hint_io_stats io;
        bool peer_check;         /* SO_PEERCRED pid must be c->pid: not for libvirt's sockets */
        nsec_t peer_log_ns;      /* last warning about a wrong peer or a shared path */
        bool peer_logged;
        bool throttled;          /* read budget used up: EPOLLIN off until refilled */
        uint64_t read_tokens;    /* bytes that may still be read */
        uint64_t free_tokens;    /* of those, bytes outside the host-wide budget */
        nsec_t read_tokens_ns;   /* when read_tokens was last refilled */
        uint16_t *grant;         /* [n_vcpus] what the plan gives, HINT_GRANT_NONE = unknown */
        uint16_t *grant_sent;    /* [n_vcpus] what the guest was told on this handshake */
        nsec_t last_grant_ns;
        bool grants_sent_once;
        uint32_t alloc_vcpus;    /* entries of grant/grant_sent (>= n_vcpus) */
        size_t out_len, out_max;
        char *out;               /* [out_max]: HINT_OUT_BYTES(n_vcpus), grown on vCPU hotplug */
};

struct hint_server {
        int epoll_fd;
        struct hint_policy defaults;
        hint_actuate_cb cb;
        void *userdata;
        nsec_t (*clock)(void *userdata);
        void *clock_userdata;
        struct hint_conn **conns; /* sorted by pid */
        size_t n_conns, alloc_conns;
        struct strbuf scratch;    /* replies of one read, before they go to a bounded buffer */
        struct hint_counters retired;   /* counters of forgotten VMs */
        struct hint_io_stats retired_io;
        uint32_t host_bytes_per_sec;    /* host-wide read budget, 0 = none */
        uint64_t host_tokens;
        nsec_t host_tokens_ns;
};

static nsec_t server_now(struct hint_server *hs)
{
        return hs->clock ? hs->clock(hs->clock_userdata) : now_ns();
}

static void io_add(struct hint_io_stats *a, const struct hint_io_stats *b)
{
        a->connects += b->connects;
        a->connect_failures += b->connect_failures;
        a->disconnects += b->disconnects;
        a->read_events += b->read_events;
        a->read_chunk_max = MAX(a->read_chunk_max, b->read_chunk_max);
        a->reply_bytes += b->reply_bytes;
        a->replies_dropped += b->replies_dropped;
        a->write_errors += b->write_errors;
        a->read_throttles += b->read_throttles;
        a->host_throttles += b->host_throttles;
        a->grants_sent += b->grants_sent;
        a->limits_sent += b->limits_sent;
        a->peer_mismatches += b->peer_mismatches;
        a->path_conflicts += b->path_conflicts;
}

static void counters_add(struct hint_counters *a, const struct hint_counters *b)
{
        a->bytes += b->bytes;
        a->lines += b->lines;
        a->accepted += b->accepted;
        a->clamped += b->clamped;
        for (int i = 0; i < _HINT_REJECT_MAX; i++)
                a->rejected[i] += b->rejected[i];
        a->resyncs += b->resyncs;
        a->oversized += b->oversized;
        a->partial_dropped += b->partial_dropped;
        a->actuations += b->actuations;
        a->rate_limited += b->rate_limited;
        a->handshakes += b->handshakes;
        a->errors_suppressed += b->errors_suppressed;
        a->boost_denied += b->boost_denied;
        a->boost_granted_ns += b->boost_granted_ns;
        a->welcomes_suppressed += b->welcomes_suppressed;
        a->stale += b->stale;
}

static uint64_t rejected_total(const struct hint_counters *c)
{
        uint64_t s = 0;

        for (int i = 0; i < _HINT_REJECT_MAX; i++)
                s += c->rejected[i];
        return s;
}

static const char *conn_name(const struct hint_conn *c, char *buf, size_t size)
{
        escape_bytes(c->name, strnlen(c->name, sizeof(c->name)), buf, size);
        return buf;
}

/* ---- socket plumbing ---- */

/* What the connection wants from epoll: input unless throttled, output while replies wait. */
static uint32_t conn_wanted_events(const struct hint_conn *c)
{
        return (c->throttled ? 0 : EPOLLIN) | (c->out_len > 0 ? EPOLLOUT : 0);
}

static void conn_refill(struct hint_conn *c, nsec_t now)
{
        nsec_t dt = now - c->read_tokens_ns;

        if (dt <= 0)
                return;
        if (dt > NSEC_PER_SEC)
                dt = NSEC_PER_SEC;
        c->read_tokens += (uint64_t) dt * HINT_READ_BYTES_PER_SEC / NSEC_PER_SEC;
        if (c->read_tokens > HINT_READ_BYTES_PER_SEC)
                c->read_tokens = HINT_READ_BYTES_PER_SEC;
        c->free_tokens += (uint64_t) dt * HINT_READ_FREE_BYTES / NSEC_PER_SEC;
        if (c->free_tokens > HINT_READ_FREE_BYTES)
                c->free_tokens = HINT_READ_FREE_BYTES;
        c->read_tokens_ns = now;
}

static void host_refill(struct hint_server *hs, nsec_t now)
{
        nsec_t dt = now - hs->host_tokens_ns;

        if (dt <= 0)
                return;
        if (dt > NSEC_PER_SEC)
                dt = NSEC_PER_SEC;
        hs->host_tokens += (uint64_t) dt * hs->host_bytes_per_sec / NSEC_PER_SEC;
        if (hs->host_tokens > hs->host_bytes_per_sec)
                hs->host_tokens = hs->host_bytes_per_sec;
        hs->host_tokens_ns = now;
}

static void conn_set_events(struct hint_conn *c, uint32_t events)
{
        if (c->watch.fd < 0 || c->events == events)
                return;
        if (io_watch_mod(c->hs->epoll_fd, &c->watch, events) == 0)
                c->events = events;
}

static void conn_close(struct hint_conn *c, nsec_t now, bool failed_connect)
{
        if (c->watch.fd >= 0) {
                io_watch_del(c->hs->epoll_fd, &c->watch);
                close(c->watch.fd);
                c->watch.fd = -1;
        }
        if (c->state == CONN_UP)
                c->io.disconnects++;
        else if (failed_connect)
                c->io.connect_failures++;
        c->state = CONN_IDLE;
        c->events = 0;
        c->out_len = 0; /* replies to the old connection are meaningless to the next one */
        hint_vm_disconnect(c->vm);
        c->next_connect_ns = now + c->backoff_ns;
        c->backoff_ns = MIN(c->backoff_ns * 2, HINT_RECONNECT_MAX_NS);
}

static void conn_flush(struct hint_conn *c, nsec_t now)
{
        while (c->out_len > 0) {
                ssize_t k = send(c->watch.fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK)
                                break;
                        c->io.write_errors++;
                        conn_close(c, now, false);
                        return;
                }
                c->io.reply_bytes += (uint64_t) k;
                memmove(c->out, c->out + k, c->out_len - (size_t) k);
                c->out_len -= (size_t) k;
        }
        conn_set_events(c, conn_wanted_events(c));
}

/* One whole line to the bounded output buffer: true if queued, else dropped and counted. */
static bool conn_queue_line(struct hint_conn *c, const char *p, size_t len)
{
        if (c->state != CONN_UP || len > c->out_max - c->out_len) {
                c->io.replies_dropped++;
                return false;
        }
        memcpy(c->out + c->out_len, p, len);
        c->out_len += len;
        return true;
}

/* Move whole lines from sb to the bounded output buffer; what does not fit is dropped. */
static void conn_queue(struct hint_conn *c, const struct strbuf *sb)
{
        const char *p = sb->data, *end = sb->data + sb->len;

        while (p && p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t len = nl ? (size_t) (nl - p) + 1 : (size_t) (end - p);

                (void) conn_queue_line(c, p, len);
                p += len;
        }
}

static void conn_log(struct hint_conn *c, nsec_t now)
{
        const struct hint_counters *k = &c->vm->counters;
        uint64_t rej = rejected_total(k);
        char name[VM_NAME_MAX * 4], why[256];
        size_t w = 0;

        if (rej == c->rejected_logged)
                return;
        if (c->logged && now - c->last_log_ns < HINT_LOG_INTERVAL_NS && now >= c->last_log_ns)
                return;
        why[0] = '\0';
        for (int i = 0; i < _HINT_REJECT_MAX && w < sizeof(why); i++)
                if (k->rejected[i] > 0) {
                        int m = snprintf(why + w, sizeof(why) - w, "%s%s=%" PRIu64, w ? " " : "",
                                         hint_reject_to_string(i), k->rejected[i]);
                        if (m < 0)
                                break;
                        w += (size_t) m;
                }
        /* Counters only: the guest's bytes themselves are never logged. */
        log_notice("Guest hints of VM \"%s\" (pid %d): %" PRIu64 " more lines rejected (total: %s)",
                   conn_name(c, name, sizeof(name)), (int) c->pid, rej - c->rejected_logged, why);
        c->rejected_logged = rej;
        c->logged = true;
        c->last_log_ns = now;
}

static void grants_forget(struct hint_conn *c)
{
        for (uint32_t i = 0; i < c->n_vcpus; i++)
                c->grant_sent[i] = HINT_GRANT_NONE;
        c->grants_sent_once = false;
}

static void conn_read(struct hint_conn *c, nsec_t now)
{
        struct hint_server *hs = c->hs;
        char buf[HINT_READ_CHUNK];
        uint64_t handshakes = c->vm->counters.handshakes;
        uint64_t welcomes = handshakes - c->vm->counters.welcomes_suppressed;
        size_t want = sizeof(buf);
        ssize_t k;
        int n;

        /* The bucket is refilled at the daemon's period (hint_server_update_end), not
         * here: refilling on every event would hand a flooding guest a few bytes per
         * wake-up and make the daemon read its flood in tiny pieces (measured: 5.9 us
         * of CPU per line instead of ~70 ns). */
        if (c->read_tokens == 0) {
                c->throttled = true;
                c->io.read_throttles++;
                conn_set_events(c, conn_wanted_events(c));
                return;
        }
        if (want > c->read_tokens)
                want = (size_t) c->read_tokens;
        /* The host-wide budget, same refill rule; a channel's free allowance first. */
        if (hs->host_bytes_per_sec > 0) {
                uint64_t avail = MIN(c->free_tokens, c->read_tokens) + hs->host_tokens;

                if (avail == 0) {
                        c->throttled = true;
                        c->io.host_throttles++;
                        conn_set_events(c, conn_wanted_events(c));
                        return;
                }
                if (want > avail)
                        want = (size_t) avail;
        }
        do
                k = recv(c->watch.fd, buf, want, MSG_DONTWAIT);
        while (k < 0 && errno == EINTR);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return;
        if (k <= 0) {
                char name[VM_NAME_MAX * 4];

                log_debug("Hint channel of VM \"%s\" (pid %d) closed: %s", conn_name(c, name, sizeof(name)),
                          (int) c->pid, k == 0 ? "EOF" : strerror(errno));
                conn_close(c, now, false);
                return;
        }
        c->io.read_events++;
        c->io.read_chunk_max = MAX(c->io.read_chunk_max, (uint64_t) k);
        c->read_tokens -= (uint64_t) k;
        if (hs->host_bytes_per_sec > 0) {
                uint64_t f = MIN(c->free_tokens, (uint64_t) k);

                c->free_tokens -= f;
                hs->host_tokens -= MIN(hs->host_tokens, (uint64_t) k - f);
        }

        strbuf_reset(&hs->scratch);
        n = hint_vm_feed(c->vm, buf, (size_t) k, now, &hs->scratch);
        if (c->vm->counters.handshakes != handshakes)
                c->backoff_ns = HINT_RECONNECT_MIN_NS; /* a live guest: reconnect fast next time */
        if (c->vm->counters.handshakes - c->vm->counters.welcomes_suppressed != welcomes)
                grants_forget(c); /* a WELCOME went out (new connection, restarted agent): all GRANTs again */
        conn_queue(c, &hs->scratch);
        if (hs->scratch.alloc > 4 * HINT_READ_CHUNK * 8) {
                strbuf_free(&hs->scratch); /* a pathological batch: do not keep the memory */
                strbuf_init(&hs->scratch);
        }
        conn_log(c, now);
        if (c->out_len > 0)
                conn_flush(c, now);
        if (n > 0 && hs->cb)
                hs->cb(c->pid, n, hs->userdata);
}

/* At most one warning per HINT_LOG_INTERVAL_NS per VM about its peer or its path. */
static bool conn_warn_due(struct hint_conn *c, nsec_t now)
{
        if (c->peer_logged && now >= c->peer_log_ns && now - c->peer_log_ns < HINT_LOG_INTERVAL_NS)
                return false;
        c->peer_logged = true;
        c->peer_log_ns = now;
        return true;
}

/*
 * A [QEMU] HintSocket channel must be served by the VM's own QEMU: the pid
 * that listens on the socket (SO_PEERCRED of the connected client socket) is
 * the VM's pid.  Otherwise (another QEMU took the path, or the socket was
 * replaced after qemu_hint_socket() looked at it) the connection is not used:
 * counted, warned about, closed and retried later like a failed connect.
 * libvirt's sockets are not checked: libvirt listens on them, not QEMU.
 */
static bool conn_peer_ok(struct hint_conn *c, int fd, nsec_t now)
{
        struct ucred cred = { .pid = 0 };
        socklen_t len = sizeof(cred);
        char name[VM_NAME_MAX * 4];

        if (!c->peer_check)
                return true;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred) && cred.pid == c->pid)
                return true;
        c->io.peer_mismatches++;
        if (conn_warn_due(c, now))
                log_warning("Hint socket %s of VM \"%s\" (pid %d) is served by pid %d, not by the VM's QEMU: "
                            "not used (%" PRIu64 " times so far; retried later)", c->path,
                            conn_name(c, name, sizeof(name)), (int) c->pid, (int) cred.pid, c->io.peer_mismatches);
        return false;
}

static void conn_event(struct io_watch *w, uint32_t events)
{
        struct hint_conn *c = container_of(w, struct hint_conn, watch);
        nsec_t now = server_now(c->hs);

        if (c->state == CONN_CONNECTING) {
                int err = 0;
                socklen_t len = sizeof(err);

                if (getsockopt(c->watch.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0 ||
                    !conn_peer_ok(c, c->watch.fd, now)) {
                        conn_close(c, now, true);
                        return;
                }
                c->state = CONN_UP;
                c->io.connects++;
                c->throttled = false;
                c->read_tokens = HINT_READ_BYTES_PER_SEC;
                c->free_tokens = HINT_READ_FREE_BYTES;
                c->read_tokens_ns = now;
                conn_flush(c, now);
                return;
        }
        if (c->state != CONN_UP)
                return;
        if (c->throttled && (events & (EPOLLHUP | EPOLLERR))) {
                /*
                 * The peer hung up (or the socket failed) while the read budget is
                 * used up.  EPOLLIN is off, but epoll reports EPOLLHUP/EPOLLERR
                 * whatever was asked, level-triggered, and only a read would see the
                 * EOF, which the budget forbids: waiting for the refill would wake
                 * the loop for nothing until then (up to a control period).  A peer
                 * that hung up sends nothing more, so there is nothing to throttle:
                 * close now, as at EOF; the bytes past the budget are dropped.
                 */
                char name[VM_NAME_MAX * 4];

                log_debug("Hint channel of VM \"%s\" (pid %d) closed: %s while throttled",
                          conn_name(c, name, sizeof(name)), (int) c->pid, events & EPOLLERR ? "error" : "hang-up");
                conn_close(c, now, false);
                return;
        }
        if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                conn_read(c, now); /* EOF and errors show up as the read's result */
                if (c->state != CONN_UP)
                        return;
        }
        if ((events & EPOLLOUT) && c->out_len > 0)
                conn_flush(c, now);
}

/* The channel of another VM connected (or connecting) to c's path, or NULL. */
static struct hint_conn *path_holder(const struct hint_conn *c)
{
        for (size_t i = 0; i < c->hs->n_conns; i++) {
                struct hint_conn *o = c->hs->conns[i];

                if (o != c && o->pid != c->pid && o->state != CONN_IDLE &&
                    strncmp(o->path, c->path, sizeof(o->path)) == 0)
                        return o;
        }
        return NULL;
}

static void conn_try_connect(struct hint_conn *c, nsec_t now)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t len = strnlen(c->path, sizeof(c->path));
        const struct hint_conn *holder;
        int fd, r;

        if (c->state != CONN_IDLE || now < c->next_connect_ns)
                return;
        if (len == 0 || len >= sizeof(sa.sun_path)) {
                c->io.connect_failures++;
                c->next_connect_ns = now + HINT_RECONNECT_MAX_NS;
                return;
        }
        holder = path_holder(c);
        if (holder) {
                /* Another VM's channel is connected to this path: not a second one. */
                char name[VM_NAME_MAX * 4];

                c->io.path_conflicts++;
                if (conn_warn_due(c, now))
                        log_warning("Hint socket %s of VM \"%s\" (pid %d) is in use by the channel of pid %d: "
                                    "not connecting (%" PRIu64 " times so far; retried later)",
                                    c->path, conn_name(c, name, sizeof(name)), (int) c->pid, (int) holder->pid,
                                    c->io.path_conflicts);
                conn_close(c, now, true);
                return;
        }
        memcpy(sa.sun_path, c->path, len);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                c->io.connect_failures++;
                c->next_connect_ns = now + c->backoff_ns;
                return;
        }
        r = connect(fd, (struct sockaddr *) &sa, (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len));
        if ((r < 0 && errno != EINPROGRESS) || (r == 0 && !conn_peer_ok(c, fd, now))) {
                /* ENOENT (not started), ECONNREFUSED (QEMU gone), EAGAIN (backlog full), another listener */
                close(fd);
                conn_close(c, now, true);
                return;
        }
        if (io_watch_add(c->hs->epoll_fd, &c->watch, fd, r == 0 ? EPOLLIN : EPOLLOUT, conn_event) < 0) {
                close(fd);
                c->watch.fd = -1;
                conn_close(c, now, true);
                return;
        }
        c->events = r == 0 ? EPOLLIN : EPOLLOUT;
        c->throttled = false;
        c->read_tokens = HINT_READ_BYTES_PER_SEC; /* a fresh connection starts with a full budget */
        c->free_tokens = HINT_READ_FREE_BYTES;
        c->read_tokens_ns = now;
        if (r == 0) {
                c->state = CONN_UP;
                c->io.connects++;
        } else
                c->state = CONN_CONNECTING;
}

/* ---- VM table ---- */

static struct hint_conn *find_conn(const struct hint_server *hs, pid_t pid, size_t *pos)
{
        size_t lo = 0, hi = hs->n_conns;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (hs->conns[mid]->pid == pid) {
                        if (pos)
                                *pos = mid;
                        return hs->conns[mid];
                }
                if (hs->conns[mid]->pid < pid)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (pos)
                *pos = lo;
        return NULL;
}

static void conn_free(struct hint_server *hs, struct hint_conn *c)
{
        if (!c)
                return;
        if (c->watch.fd >= 0) {
                io_watch_del(hs->epoll_fd, &c->watch);
                close(c->watch.fd);
                if (c->state == CONN_UP)
                        c->io.disconnects++;
        }
        counters_add(&hs->retired, &c->vm->counters);
        io_add(&hs->retired_io, &c->io);
        hint_vm_free(c->vm);
        free(c->grant);
        free(c->grant_sent);
        free(c->out);
        free(c);
}

static void remove_at(struct hint_server *hs, size_t i)
{
        conn_free(hs, hs->conns[i]);
        memmove(hs->conns + i, hs->conns + i + 1, (hs->n_conns - i - 1) * sizeof(*hs->conns));
        hs->n_conns--;
}

int hint_server_new(int epoll_fd, const struct hint_policy *defaults, hint_actuate_cb cb, void *userdata,
                    struct hint_server **ret)
{
        struct hint_server *hs;

        if (epoll_fd < 0 || !ret)
                return -EINVAL;
        if (defaults && hint_policy_validate(defaults) < 0)
                return -EINVAL;
        hs = calloc(1, sizeof(*hs));
        if (!hs)
                return -ENOMEM;
        hs->epoll_fd = epoll_fd;
        if (defaults)
                hs->defaults = *defaults;
        else
                hint_policy_init(&hs->defaults);
        hs->cb = cb;
        hs->userdata = userdata;
        hs->host_bytes_per_sec = HINT_HOST_READ_BYTES_PER_SEC_DEFAULT;
        hs->host_tokens = hs->host_bytes_per_sec;
        strbuf_init(&hs->scratch);
        *ret = hs;
        return 0;
}

void hint_server_free(struct hint_server *hs)
{
        if (!hs)
                return;
        for (size_t i = 0; i < hs->n_conns; i++)
                conn_free(hs, hs->conns[i]);
        free(hs->conns);
        strbuf_free(&hs->scratch);
        free(hs);
}

void hint_server_set_host_read_budget(struct hint_server *hs, uint32_t bytes_per_sec)
{
        hs->host_bytes_per_sec = bytes_per_sec;
        hs->host_tokens = MIN(hs->host_tokens, (uint64_t) bytes_per_sec);
}

/*
 * Make room for n_vcpus: the per-vCPU grant arrays (new entries: none) and the
 * output buffer (HINT_OUT_BYTES(n_vcpus)).  Neither shrinks, so they still fit
 * c->n_vcpus if the caller cannot apply the new count.  Returns 0 or -ENOMEM.
 */
static int grants_resize(struct hint_conn *c, uint32_t n_vcpus)
{
        size_t out_max = HINT_OUT_BYTES(n_vcpus);
        uint16_t *g, *s;

        if (n_vcpus > c->alloc_vcpus) {
                g = realloc(c->grant, n_vcpus * sizeof(*g));
                if (!g)
                        return -ENOMEM;
                c->grant = g;
                s = realloc(c->grant_sent, n_vcpus * sizeof(*s));
                if (!s)
                        return -ENOMEM;
                c->grant_sent = s;
                c->alloc_vcpus = n_vcpus;
        }
        if (out_max > c->out_max) {
                char *o = realloc(c->out, out_max);

                if (!o)
                        return -ENOMEM;
                c->out = o;
                c->out_max = out_max;
        }
        for (uint32_t i = c->n_vcpus; i < n_vcpus; i++)
                c->grant[i] = c->grant_sent[i] = HINT_GRANT_NONE;
        return 0;
}

void hint_server_set_clock(struct hint_server *hs, nsec_t (*clock)(void *userdata), void *userdata)
{
        hs->clock = clock;
        hs->clock_userdata = userdata;
}

void hint_server_update_begin(struct hint_server *hs)
{
        for (size_t i = 0; i < hs->n_conns; i++)
                hs->conns[i]->seen = false;
}

int hint_server_update_vm(struct hint_server *hs, const struct vm_info *vm, nsec_t now)
{
        size_t pos, plen = strnlen(vm->hint_socket, sizeof(vm->hint_socket));
        uint32_t n_vcpus = MIN(vm->n_vcpus, (unsigned) HINT_VCPUS_MAX);
        struct hint_conn *c;

        if (vm->pid <= 0 || plen == 0 || plen >= sizeof(vm->hint_socket) || n_vcpus == 0)
                return 0; /* not seen: closed at update_end if it was known */
        c = find_conn(hs, vm->pid, &pos);
        if (c && (strncmp(c->path, vm->hint_socket, sizeof(c->path)) != 0)) {
                remove_at(hs, pos); /* another channel: another VM as far as hints go */
                c = NULL;
        }
        if (!c) {
                struct hint_conn **a = hs->conns;

                if (hs->n_conns == hs->alloc_conns) {
                        size_t na = MAX((size_t) 8, hs->alloc_conns * 2);

                        a = realloc(hs->conns, na * sizeof(*a));
                        if (!a)
                                return -ENOMEM;
                        hs->conns = a;
                        hs->alloc_conns = na;
                }
                c = calloc(1, sizeof(*c));
                if (!c)
                        return -ENOMEM;
                c->vm = hint_vm_new(n_vcpus, &hs->defaults, now);
                if (!c->vm || grants_resize(c, n_vcpus) < 0) {
                        hint_vm_free(c->vm);
                        free(c->grant);
                        free(c->grant_sent);
                        free(c->out);
                        free(c);
                        return -ENOMEM;
                }
                c->hs = hs;
                c->pid = vm->pid;
                c->watch.fd = -1;
                memcpy(c->path, vm->hint_socket, plen);
                c->n_vcpus = n_vcpus;
                c->backoff_ns = HINT_RECONNECT_MIN_NS;
                c->next_connect_ns = now;
                memmove(a + pos + 1, a + pos, (hs->n_conns - pos) * sizeof(*a));
                a[pos] = c;
                hs->n_conns++;
        }
        c->seen = true;
        c->peer_check = !(vm->sources & VM_SOURCE_LIBVIRT); /* libvirt listens on its own sockets */
        memcpy(c->name, vm->name, sizeof(c->name));
        c->name[sizeof(c->name) - 1] = '\0';
        if (c->n_vcpus != n_vcpus && grants_resize(c, n_vcpus) == 0 && hint_vm_set_vcpus(c->vm, n_vcpus) == 0)
                c->n_vcpus = n_vcpus; /* vCPU hotplug */
        return 0; /* connected at update_end, when the VMs gone have let go of their paths */
}

void hint_server_update_end(struct hint_server *hs, nsec_t now)
{
        size_t w = 0;

        for (size_t i = 0; i < hs->n_conns; i++) {
                if (!hs->conns[i]->seen)
                        conn_free(hs, hs->conns[i]);
                else
                        hs->conns[w++] = hs->conns[i];
        }
        hs->n_conns = w;
        for (size_t i = 0; i < hs->n_conns; i++) {
                struct hint_conn *c = hs->conns[i];

                conn_try_connect(c, now); /* if due */
                if (hint_vm_tick(c->vm, now)) {
                        char name[VM_NAME_MAX * 4];

                        log_debug("Hint channel of VM \"%s\" (pid %d): no line for %lld s, handshake stale.",
                                  conn_name(c, name, sizeof(name)), (int) c->pid,
                                  (long long) (HINT_STALE_NS / NSEC_PER_SEC));
                }
                /* Refill every channel's budget; a throttled one is read again. */
                if (c->state == CONN_UP) {
                        conn_refill(c, now);
                        if (c->throttled && c->read_tokens > 0) {
                                c->throttled = false;
                                conn_set_events(c, conn_wanted_events(c));
                        }
                }
        }
        if (hs->host_bytes_per_sec > 0)
                host_refill(hs, now);
}

int hint_server_update_vms(struct hint_server *hs, const struct vm_info *vms, size_t n, nsec_t now)
{
        int r = 0;

        hint_server_update_begin(hs);
        for (size_t i = 0; i < n; i++) {
                int k = hint_server_update_vm(hs, &vms[i], now);

                if (k < 0 && r == 0)
                        r = k;
        }
        if (r < 0) /* keep VMs we could not process rather than forgetting them */
                for (size_t i = 0; i < hs->n_conns; i++)
                        hs->conns[i]->seen = true;
        hint_server_update_end(hs, now);
        return r;
}

/* The policy changed a VM's LIMITs: a handshaked guest is told at once, others at their WELCOME. */
static void conn_send_limits(struct hint_server *hs, struct hint_conn *c, nsec_t now)
{
        if (!hint_vm_take_limits_changed(c->vm) || c->state != CONN_UP || !c->vm->handshaked)
                return;
        strbuf_reset(&hs->scratch);
        if (hint_format_limits(&hs->scratch, c->vm) < 0)
                return;
        c->io.limits_sent += c->n_vcpus;
        conn_queue(c, &hs->scratch);
        conn_flush(c, now);
}

int hint_server_set_defaults(struct hint_server *hs, const struct hint_policy *p, nsec_t now)
{
        if (hint_policy_validate(p) < 0)
                return -EINVAL;
        hs->defaults = *p;
        for (size_t i = 0; i < hs->n_conns; i++)
                if (!hs->conns[i]->has_override) {
                        (void) hint_vm_set_policy(hs->conns[i]->vm, p, now);
                        conn_send_limits(hs, hs->conns[i], now);
                }
        return 0;
}

int hint_server_set_vm_policy(struct hint_server *hs, pid_t pid, const struct hint_policy *p, nsec_t now)
{
        struct hint_conn *c = find_conn(hs, pid, NULL);
        int r;

        if (!c)
                return -ENOENT;
        r = hint_vm_set_policy(c->vm, p ? p : &hs->defaults, now);
        if (r < 0)
                return r;
        c->has_override = p != NULL;
        conn_send_limits(hs, c, now);
        return 0;
}

int hint_server_vm_state(const struct hint_server *hs, pid_t pid, nsec_t now, struct hint_effective *ret,
                         size_t n)
{
        const struct hint_conn *c = find_conn(hs, pid, NULL);
        size_t m;

        if (!c)
                return -ENOENT;
        m = MIN(n, (size_t) c->vm->n_vcpus);
        for (size_t i = 0; i < m; i++)
                (void) hint_vm_effective(c->vm, (uint32_t) i, now, &ret[i]);
        return (int) m;
}

const struct hint_vm *hint_server_hint_vm(const struct hint_server *hs, pid_t pid)
{
        const struct hint_conn *c = find_conn(hs, pid, NULL);

        return c ? c->vm : NULL;
}

static int send_line(struct hint_server *hs, pid_t pid, int (*fmt)(struct strbuf *, uint32_t, uint32_t, uint32_t),
                     uint32_t a, uint32_t b, uint32_t d)
{
        struct hint_conn *c = find_conn(hs, pid, NULL);
        uint64_t dropped;
        int r;

        if (!c)
                return -ENOENT;
        if (a >= c->vm->n_vcpus)
                return -ERANGE;
        if (c->state != CONN_UP)
                return -ENOTCONN;
        strbuf_reset(&hs->scratch);
        r = fmt(&hs->scratch, a, b, d);
        if (r < 0)
                return r;
        dropped = c->io.replies_dropped;
        conn_queue(c, &hs->scratch);
        conn_flush(c, server_now(hs));
        return c->io.replies_dropped != dropped ? -ENOBUFS : 0;
}

static int fmt_limit(struct strbuf *sb, uint32_t vcpu, uint32_t lo, uint32_t hi)
{
        return hint_format_limit(sb, vcpu, lo, hi);
}

static int fmt_grant(struct strbuf *sb, uint32_t vcpu, uint32_t level, uint32_t unused)
{
        return hint_format_grant(sb, vcpu, level);
}

int hint_server_send_limit(struct hint_server *hs, pid_t pid, uint32_t vcpu, uint32_t min_level,
                           uint32_t max_level)
{
        return send_line(hs, pid, fmt_limit, vcpu, min_level, max_level);
}

int hint_server_send_grant(struct hint_server *hs, pid_t pid, uint32_t vcpu, uint32_t level)
{
        return send_line(hs, pid, fmt_grant, vcpu, level, 0);
}

int hint_server_set_grant(struct hint_server *hs, pid_t pid, uint32_t vcpu, uint32_t level)
{
        struct hint_conn *c = find_conn(hs, pid, NULL);

        if (!c)
                return -ENOENT;
        if (vcpu >= c->n_vcpus || (level > HINT_LEVEL_MAX && level != HINT_GRANT_NONE))
                return -ERANGE;
        c->grant[vcpu] = (uint16_t) level;
        return 0;
}

void hint_server_send_grants(struct hint_server *hs, nsec_t now)
{
        for (size_t i = 0; i < hs->n_conns; i++) {
                struct hint_conn *c = hs->conns[i];
                bool any = false;

                if (c->state != CONN_UP || !c->vm->handshaked)
                        continue;
                if (c->grants_sent_once && now >= c->last_grant_ns && now - c->last_grant_ns < HINT_GRANT_INTERVAL_NS)
                        continue;
                for (uint32_t v = 0; v < c->n_vcpus; v++) {
                        if (c->grant[v] == HINT_GRANT_NONE || c->grant[v] == c->grant_sent[v])
                                continue;
                        strbuf_reset(&hs->scratch);
                        if (hint_format_grant(&hs->scratch, v, c->grant[v]) < 0)
                                continue;
                        any = true;
                        /* a line that does not fit is sent again next time: mark each line queued */
                        if (conn_queue_line(c, hs->scratch.data, hs->scratch.len)) {
                                c->grant_sent[v] = c->grant[v];
                                c->io.grants_sent++;
                        }
                }
                if (!any)
                        continue;
                c->grants_sent_once = true;
                c->last_grant_ns = now;
                conn_flush(c, now);
        }
}

size_t hint_server_n_vms(const struct hint_server *hs)
{
        return hs->n_conns;
}

static void fill_status(const struct hint_conn *c, struct hint_vm_status *s)
{
        *s = (struct hint_vm_status) {
                .pid = c->pid,
                .n_vcpus = c->vm->n_vcpus,
                .connected = c->state == CONN_UP,
                .handshaked = c->vm->handshaked,
                .stale = c->vm->stale,
                .guest_vcpus = c->vm->guest_vcpus,
                .policy = c->vm->policy,
                .out_len = c->out_len,
                .out_max = c->out_max,
                .next_connect_ns = c->next_connect_ns,
                .counters = c->vm->counters,
                .io = c->io,
        };
        memcpy(s->socket, c->path, sizeof(s->socket));
        memcpy(s->agent, c->vm->agent, sizeof(s->agent));
}

int hint_server_vm_status_at(const struct hint_server *hs, size_t i, struct hint_vm_status *ret)
{
        if (i >= hs->n_conns)
                return -ENOENT;
        fill_status(hs->conns[i], ret);
        return 0;
}

int hint_server_vm_status(const struct hint_server *hs, pid_t pid, struct hint_vm_status *ret)
{
        const struct hint_conn *c = find_conn(hs, pid, NULL);

        if (!c)
                return -ENOENT;
        fill_status(c, ret);
        return 0;
}

void hint_server_totals(const struct hint_server *hs, struct hint_counters *counters, struct hint_io_stats *io)
{
        struct hint_counters sc = hs->retired;
        struct hint_io_stats si = hs->retired_io;

        for (size_t i = 0; i < hs->n_conns; i++) {
                counters_add(&sc, &hs->conns[i]->vm->counters);
                io_add(&si, &hs->conns[i]->io);
        }
        if (counters)
                *counters = sc;
        if (io)
                *io = si;
}
