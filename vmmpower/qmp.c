/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Minimal QMP client (see qmp.h).
 *
 * Framing: QEMU writes every message (greeting, reply, event) as one JSON
 * object followed by '\n', so the client reads lines.  A line longer than
 * QMP_REPLY_MAX ends the session with -EMSGSIZE.  Every step (connect,
 * write, each read) polls against one deadline computed at the start of the
 * call, so a QEMU that accepts and never answers costs at most the timeout.
 *
 * While waiting for the reply to a command, asynchronous {"event": ...}
 * messages are skipped (at most QMP_MAX_SKIPPED_EVENTS of them).  Replies
 * are parsed with json-c with a bounded nesting depth, and validated as a
 * whole: a reply with one bad element is rejected, never half used.
 *
 * Nothing in a reply decides identity: the QEMU pid is the socket peer's
 * pid (SO_PEERCRED).  Strings from QEMU are escaped before being logged.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "log.h"
#include "qmp.h"

#define QMP_JSON_DEPTH 16
#define QMP_MAX_SKIPPED_EVENTS 1000
/* PID_MAX_LIMIT on 64-bit Linux (include/linux/threads.h): 4 * 1024 * 1024. */
#define QMP_PID_MAX 4194304

struct qmp_conn {
        int fd;
        nsec_t deadline;
        char *buf;      /* received, not yet consumed bytes */
        size_t len;
        size_t alloc;
};

/* ---- parsing helpers ---------------------------------------------------- */

static int parse_object(const char *json, size_t len, json_object **ret)
{
        json_tokener *tok;
        json_object *o;
        size_t end;

        if (len > QMP_REPLY_MAX)
                return -EMSGSIZE;
        tok = json_tokener_new_ex(QMP_JSON_DEPTH);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        o = json_tokener_parse_ex(tok, json, (int) len);
        if (!o || json_tokener_get_error(tok) != json_tokener_success) {
                json_object_put(o);
                json_tokener_free(tok);
                return -EBADMSG;
        }
        end = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        /* Only whitespace may follow the object. */
        for (size_t i = end; i < len; i++)
                if (!strchr(" \t\r\n", json[i])) {
                        json_object_put(o);
                        return -EBADMSG;
                }
        if (!json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return -EBADMSG;
        }
        *ret = o;
        return 0;
}

static void log_qmp_error(json_object *err)
{
        json_object *cls = NULL, *desc = NULL;
        char c[64] = "", d[256] = "";

        if (json_object_object_get_ex(err, "class", &cls) && json_object_is_type(cls, json_type_string))
                escape_bytes(json_object_get_string(cls), (size_t) json_object_get_string_len(cls), c, sizeof(c));
        if (json_object_object_get_ex(err, "desc", &desc) && json_object_is_type(desc, json_type_string))
                escape_bytes(json_object_get_string(desc), (size_t) json_object_get_string_len(desc), d, sizeof(d));
        log_debug("QMP error reply: class=\"%s\" desc=\"%s\"", c, d);
}

/* Parse a reply object and hand out its "return" member (a new reference on *ret_root). */
static int reply_return(const char *json, json_object **ret_root, json_object **ret_value)
{
        json_object *root, *v;
        int r;

        if (!json)
                return -EINVAL;
        r = parse_object(json, strlen(json), &root);
        if (r < 0)
                return r;
        if (json_object_object_get_ex(root, "error", &v)) {
                if (json_object_is_type(v, json_type_object))
                        log_qmp_error(v);
                json_object_put(root);
                return -EREMOTEIO;
        }
        if (!json_object_object_get_ex(root, "return", &v)) {
                json_object_put(root);
                return -EBADMSG;
        }
        *ret_root = root;
        *ret_value = v;
        return 0;
}

/* A JSON integer in [min, max]; json-c keeps integers above INT64_MAX as uint64. */
static int get_u64(json_object *o, uint64_t max, uint64_t *ret)
{
        uint64_t v;

        if (!o || !json_object_is_type(o, json_type_int))
                return -EBADMSG;
        errno = 0;
        if (json_object_get_int64(o) < 0)
                return -EBADMSG;
        v = json_object_get_uint64(o);
        if (v > max)
                return -EBADMSG;
        *ret = v;
        return 0;
}

static int member_u64(json_object *obj, const char *key, uint64_t max, uint64_t *ret)
{
        json_object *v;

        if (!json_object_object_get_ex(obj, key, &v))
                return -EBADMSG;
        return get_u64(v, max, ret);
}

struct qmp_cpu {
        int index;
        pid_t tid;
        const char *qom_path; /* points into the parsed tree */
};

static int cmp_cpu(const void *a, const void *b)
{
        const struct qmp_cpu *x = a, *y = b;

        return (x->index > y->index) - (x->index < y->index);
}

/* Validate a query-cpus-fast "return" array into cpus[] (sorted by index). */
static int cpus_from_array(json_object *arr, struct qmp_cpu **ret, size_t *ret_n)
{
        struct qmp_cpu *cpus;
        size_t n;

        if (!json_object_is_type(arr, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(arr);
        if (n > VM_MAX_VCPUS)
                return -EBADMSG;
        cpus = calloc(n ? n : 1, sizeof(*cpus));
        if (!cpus)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(arr, i), *qp;
                uint64_t idx, tid;

                if (!json_object_is_type(e, json_type_object) ||
                    member_u64(e, "cpu-index", VM_MAX_VCPUS - 1, &idx) < 0 ||
                    member_u64(e, "thread-id", QMP_PID_MAX, &tid) < 0 || tid == 0)
                        goto bad;
                cpus[i].index = (int) idx;
                cpus[i].tid = (pid_t) tid;
                if (json_object_object_get_ex(e, "qom-path", &qp)) {
                        if (!json_object_is_type(qp, json_type_string) ||
                            strlen(json_object_get_string(qp)) != (size_t) json_object_get_string_len(qp))
                                goto bad;
                        cpus[i].qom_path = json_object_get_string(qp);
                }
        }
        qsort(cpus, n, sizeof(*cpus), cmp_cpu);
        for (size_t i = 0; i < n; i++) {
                if (i > 0 && cpus[i].index == cpus[i - 1].index)
                        goto bad;
                for (size_t j = 0; j < i; j++)
                        if (cpus[j].tid == cpus[i].tid ||
                            (cpus[i].qom_path && cpus[j].qom_path &&
                             strcmp(cpus[i].qom_path, cpus[j].qom_path) == 0))
                                goto bad;
        }
        *ret = cpus;
        *ret_n = n;
        return 0;
bad:
        free(cpus);
        return -EBADMSG;
}

int qmp_parse_cpus_fast(const char *json, struct vm_info *vm)
{
        json_object *root, *arr;
        struct qmp_cpu *cpus;
        struct vcpu_info *v = NULL;
        size_t n;
        int r;

        r = reply_return(json, &root, &arr);
        if (r < 0)
                return r;
        r = cpus_from_array(arr, &cpus, &n);
        if (r < 0)
                goto out;
        if (n > 0) {
                v = calloc(n, sizeof(*v));
                if (!v) {
                        free(cpus);
                        r = -ENOMEM;
                        goto out;
                }
                for (size_t i = 0; i < n; i++)
                        v[i] = (struct vcpu_info) { .index = cpus[i].index, .tid = cpus[i].tid };
        }
        free(cpus);
        free(vm->vcpus);
        vm->vcpus = v;
        vm->n_vcpus = (unsigned) n;
        r = 0;
out:
        json_object_put(root);
        return r;
}

int qmp_parse_query_name(const char *json, char *name, size_t size)
{
        json_object *root, *ret, *v;
        const char *s = "";
        size_t len = 0;
        int r;

        r = reply_return(json, &root, &ret);
        if (r < 0)
                return r;
        r = -EBADMSG;
        if (!json_object_is_type(ret, json_type_object))
                goto out;
        if (json_object_object_get_ex(ret, "name", &v)) {
                if (!json_object_is_type(v, json_type_string))
                        goto out;
                s = json_object_get_string(v);
                len = (size_t) json_object_get_string_len(v);
                if (strlen(s) != len) /* embedded NUL */
                        goto out;
        }
        r = -ENOBUFS;
        if (len >= size)
                goto out;
        memcpy(name, s, len + 1);
        r = 0;
out:
        json_object_put(root);
        return r;
}

int qmp_parse_query_kvm(const char *json, enum vm_accel *ret_accel)
{
        json_object *root, *ret, *v;
        int r;

        r = reply_return(json, &root, &ret);
        if (r < 0)
                return r;
        r = -EBADMSG;
        if (json_object_is_type(ret, json_type_object) &&
            json_object_object_get_ex(ret, "enabled", &v) &&
            json_object_is_type(v, json_type_boolean)) {
                *ret_accel = json_object_get_boolean(v) ? VM_ACCEL_KVM : VM_ACCEL_TCG;
                r = 0;
        }
        json_object_put(root);
        return r;
}

static int stats_sum(json_object *stats, bool *found, uint64_t *ret)
{
        uint64_t sum = 0;
        bool any = false;
        size_t n;

        if (!json_object_is_type(stats, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(stats);
        for (size_t i = 0; i < n; i++) {
                json_object *s = json_object_array_get_idx(stats, i), *name, *value;
                const char *nm;
                uint64_t v;

                if (!json_object_is_type(s, json_type_object) ||
                    !json_object_object_get_ex(s, "name", &name) ||
                    !json_object_is_type(name, json_type_string) ||
                    !json_object_object_get_ex(s, "value", &value))
                        return -EBADMSG;
                nm = json_object_get_string(name);
                if (strcmp(nm, "halt_poll_success_ns") != 0 && strcmp(nm, "halt_poll_fail_ns") != 0)
                        continue; /* other stats may be scalars, booleans or lists */
                if (get_u64(value, UINT64_MAX, &v) < 0)
                        return -EBADMSG;
                if (sum + v < sum)
                        return -EBADMSG;
                sum += v;
                any = true;
        }
        *found = any;
        *ret = sum;
        return 0;
}

int qmp_parse_halt_poll(const char *stats_json, const char *cpus_fast_json,
                        uint64_t *halt_poll_ns, unsigned n_max)
{
        json_object *sroot = NULL, *croot = NULL, *sarr, *carr;
        struct qmp_cpu *cpus = NULL;
        uint64_t *sums = NULL;
        bool *seen = NULL, *has = NULL;
        size_t n_cpus, n;
        int r, count = 0;

        r = reply_return(cpus_fast_json, &croot, &carr);
        if (r < 0)
                return r;
        r = reply_return(stats_json, &sroot, &sarr);
        if (r < 0)
                goto out;
        r = cpus_from_array(carr, &cpus, &n_cpus);
        if (r < 0)
                goto out;
        r = -EBADMSG;
        if (!json_object_is_type(sarr, json_type_array))
                goto out;
        n = json_object_array_length(sarr);
        if (n > VM_MAX_VCPUS * 4) /* a few providers per vCPU at most */
                goto out;
        r = -ENOMEM;
        sums = calloc(n_cpus ? n_cpus : 1, sizeof(*sums));
        seen = calloc(n_cpus ? n_cpus : 1, sizeof(*seen));
        has = calloc(n_cpus ? n_cpus : 1, sizeof(*has));
        if (!sums || !seen || !has)
                goto out;

        r = -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(sarr, i), *prov, *qp, *stats;
                const char *path;
                bool found;
                uint64_t sum;
                size_t k;

                if (!json_object_is_type(e, json_type_object) ||
                    !json_object_object_get_ex(e, "provider", &prov) ||
                    !json_object_is_type(prov, json_type_string) ||
                    !json_object_object_get_ex(e, "stats", &stats))
                        goto out;
                if (strcmp(json_object_get_string(prov), "kvm") != 0)
                        continue;
                if (!json_object_object_get_ex(e, "qom-path", &qp) ||
                    !json_object_is_type(qp, json_type_string))
                        goto out;
                if (stats_sum(stats, &found, &sum) < 0)
                        goto out;
                path = json_object_get_string(qp);
                for (k = 0; k < n_cpus; k++)
                        if (cpus[k].qom_path && strcmp(cpus[k].qom_path, path) == 0)
                                break;
                if (k == n_cpus)
                        continue; /* vCPU unplugged between the two commands */
                if (seen[k])
                        goto out;
                seen[k] = true;
                if (!found)
                        continue; /* no halt_poll_* values: the vCPU's entry is left untouched */
                sums[k] = sum;
                has[k] = true;
                count++;
        }

        for (size_t k = 0; k < n_cpus; k++)
                if (has[k] && (unsigned) cpus[k].index < n_max)
                        halt_poll_ns[cpus[k].index] = sums[k];
        r = count;
out:
        free(cpus);
        free(sums);
        free(seen);
        free(has);
        json_object_put(sroot);
        json_object_put(croot);
        return r;
}

/* ---- connection --------------------------------------------------------- */

static int wait_fd(struct qmp_conn *c, short events)
{
        for (;;) {
                struct pollfd p = { .fd = c->fd, .events = events };
                nsec_t left = c->deadline - now_ns();
                int r, ms;

                if (left <= 0)
                        return -ETIMEDOUT;
                ms = (int) MIN((left + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC, (nsec_t) 3600 * 1000);
                r = poll(&p, 1, ms);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (r > 0)
                        return 0;
        }
}

static void conn_close(struct qmp_conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        free(c->buf);
        c->buf = NULL;
        c->len = c->alloc = 0;
}

static int conn_open(struct qmp_conn *c, const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        socklen_t sl;
        int r, err = 0;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0)
                return -errno;
        for (;;) {
                if (connect(c->fd, (struct sockaddr *) &sa, sizeof(sa)) >= 0)
                        return 0;
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN) {
                        /* Backlog full: QEMU is busy with another client.  Retry until the deadline. */
                        struct timespec ts = { 0, 10 * 1000 * 1000 };

                        if (now_ns() >= c->deadline)
                                return -ETIMEDOUT;
                        nanosleep(&ts, NULL);
                        continue;
                }
                if (errno != EINPROGRESS)
                        return -errno;
                break;
        }
        r = wait_fd(c, POLLOUT);
        if (r < 0)
                return r;
        sl = sizeof(err);
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
                return -errno;
        return err ? -err : 0;
}

static int conn_send(struct qmp_conn *c, const char *s)
{
        size_t len = strlen(s), off = 0;

        while (off < len) {
                ssize_t k = send(c->fd, s + off, len - off, MSG_NOSIGNAL);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                int r = wait_fd(c, POLLOUT);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        return -errno;
                }
                off += (size_t) k;
        }
        return 0;
}

/* Read one '\n'-terminated line into a new NUL-terminated string. */
static int conn_read_line(struct qmp_conn *c, char **ret)
{
        for (;;) {
                char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
                ssize_t k;
                int r;

                if (nl) {
                        size_t l = (size_t) (nl - c->buf);
                        char *line = malloc(l + 1);

                        if (!line)
                                return -ENOMEM;
                        memcpy(line, c->buf, l);
                        line[l] = 0;
                        memmove(c->buf, nl + 1, c->len - l - 1);
                        c->len -= l + 1;
                        if (strlen(line) != l) { /* NUL inside a message */
                                free(line);
                                return -EBADMSG;
                        }
                        *ret = line;
                        return 0;
                }
                if (c->len >= QMP_REPLY_MAX)
                        return -EMSGSIZE;
                if (c->alloc - c->len < 4096) {
                        size_t na = MIN(MAX(c->alloc * 2, (size_t) 16384), (size_t) QMP_REPLY_MAX + 4096);
                        char *nb = realloc(c->buf, na);

                        if (!nb)
                                return -ENOMEM;
                        c->buf = nb;
                        c->alloc = na;
                }
                r = wait_fd(c, POLLIN);
                if (r < 0)
                        return r;
                k = recv(c->fd, c->buf + c->len, c->alloc - c->len, 0);
                if (k < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -ECONNRESET;
                c->len += (size_t) k;
        }
}

/* Read messages until one that is not an event; returns it as text. */
static int conn_read_reply(struct qmp_conn *c, char **ret)
{
        for (unsigned skipped = 0; skipped <= QMP_MAX_SKIPPED_EVENTS; skipped++) {
                json_object *o, *ev;
                char *line;
                bool is_event;
                int r;

                r = conn_read_line(c, &line);
                if (r < 0)
                        return r;
                r = parse_object(line, strlen(line), &o);
                if (r < 0) {
                        free(line);
                        return r;
                }
                is_event = json_object_object_get_ex(o, "event", &ev);
                json_object_put(o);
                if (!is_event) {
                        *ret = line;
                        return 0;
                }
                free(line);
        }
        return -EBADMSG;
}

static int conn_execute(struct qmp_conn *c, const char *cmd, char **ret)
{
        int r;

        r = conn_send(c, cmd);
        if (r < 0)
                return r;
        return conn_read_reply(c, ret);
}

/* Connect, read the greeting, negotiate capabilities. */
static int conn_start(struct qmp_conn *c, const char *path, nsec_t timeout_ns)
{
        _cleanup_free_ char *greeting = NULL, *caps = NULL;
        json_object *o, *q, *root, *v;
        bool ok;
        int r;

        c->fd = -1;
        c->deadline = now_ns() + timeout_ns;
        r = conn_open(c, path);
        if (r < 0)
                return r;
        r = conn_read_line(c, &greeting);
        if (r < 0)
                return r;
        r = parse_object(greeting, strlen(greeting), &o);
        if (r < 0)
                return r;
        ok = json_object_object_get_ex(o, "QMP", &q) && json_object_is_type(q, json_type_object);
        json_object_put(o);
        if (!ok)
                return -EPROTO;
        r = conn_execute(c, "{\"execute\":\"qmp_capabilities\"}\n", &caps);
        if (r < 0)
                return r;
        r = reply_return(caps, &root, &v);
        if (r < 0)
                return r;
        json_object_put(root);
        return 0;
}

static int peer_pid(int fd, pid_t *ret)
{
        struct ucred uc;
        socklen_t l = sizeof(uc);

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0)
                return -errno;
        if (uc.pid <= 0)
                return -ENODATA;
        *ret = uc.pid;
        return 0;
}

int qmp_query_vm(const char *socket_path, nsec_t timeout_ns, struct vm_info *ret)
{
        _cleanup_free_ char *name_reply = NULL, *cpus_reply = NULL, *kvm_reply = NULL;
        struct qmp_conn c = { .fd = -1 };
        struct vm_info vm = { .libvirt_id = -1, .sources = VM_SOURCE_QMP };
        char name[VM_NAME_MAX];
        int r;

        if (!socket_path || !ret || timeout_ns <= 0)
                return -EINVAL;
        r = conn_start(&c, socket_path, timeout_ns);
        if (r < 0)
                goto out;
        r = peer_pid(c.fd, &vm.pid);
        if (r < 0)
                goto out;
        r = conn_execute(&c, "{\"execute\":\"query-name\"}\n", &name_reply);
        if (r < 0)
                goto out;
        r = conn_execute(&c, "{\"execute\":\"query-cpus-fast\"}\n", &cpus_reply);
        if (r < 0)
                goto out;
        r = conn_execute(&c, "{\"execute\":\"query-kvm\"}\n", &kvm_reply);
        if (r < 0)
                goto out;

        r = qmp_parse_query_name(name_reply, name, sizeof(name));
        if (r == -ENOBUFS) {
                /* Longer than we keep: use the pid-based name instead of a truncated one. */
                name[0] = 0;
                r = 0;
        }
        if (r < 0)
                goto out;
        if (name[0])
                memcpy(vm.name, name, sizeof(vm.name));
        else
                snprintf(vm.name, sizeof(vm.name), "qemu-%d", (int) vm.pid);
        if (strlen(socket_path) < sizeof(vm.qmp_socket))
                strcpy(vm.qmp_socket, socket_path);
        r = qmp_parse_query_kvm(kvm_reply, &vm.accel);
        if (r < 0)
                goto out;
        r = qmp_parse_cpus_fast(cpus_reply, &vm);
        if (r < 0)
                goto out;
        *ret = vm;
        r = 0;
out:
        conn_close(&c);
        if (r < 0)
                log_debug_errno(r, "QMP query of %s failed: %m", socket_path);
        return r;
}

int qmp_query_halt_poll(const char *socket_path, nsec_t timeout_ns, uint64_t *halt_poll_ns, unsigned n_max)
{
        _cleanup_free_ char *cpus_reply = NULL, *stats_reply = NULL;
        struct qmp_conn c = { .fd = -1 };
        int r;

        if (!socket_path || timeout_ns <= 0 || (n_max > 0 && !halt_poll_ns))
                return -EINVAL;
        r = conn_start(&c, socket_path, timeout_ns);
        if (r < 0)
                goto out;
        r = conn_execute(&c, "{\"execute\":\"query-cpus-fast\"}\n", &cpus_reply);
        if (r < 0)
                goto out;
        r = conn_execute(&c,
                         "{\"execute\":\"query-stats\",\"arguments\":{\"target\":\"vcpu\","
                         "\"providers\":[{\"provider\":\"kvm\","
                         "\"names\":[\"halt_poll_success_ns\",\"halt_poll_fail_ns\"]}]}}\n",
                         &stats_reply);
        if (r < 0)
                goto out;
        r = qmp_parse_halt_poll(stats_reply, cpus_reply, halt_poll_ns, n_max);
out:
        conn_close(&c);
        if (r < 0)
                log_debug_errno(r, "QMP query-stats of %s failed: %m", socket_path);
        return r;
}
