/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Userspace side of the BPF schedstat sampler (program: schedstat.bpf.c).
 *
 * Loaded and attached once; the tracked tgids live in a BPF hash map updated
 * only when the inventory changes.  Each sample creates an iterator fd from
 * the link (bpf_iter_create), read()s it in 64 KiB chunks into a buffer
 * allocated at load time (the kernel hands out at most its seq buffer, 8
 * pages, per read()) and passes each 40-byte record to a callback.  A record
 * split across two reads is carried over, though the kernel only emits whole
 * records per read.  The walk visits every task of the host, tracked or not:
 * the per-sample cost is one syscall per 1,000 records plus a few tens of ns
 * per host task, instead of one pread() syscall per vCPU thread.
 *
 * At load a self-test tracks our own pid and expects a record for our own
 * thread (tgid == getpid(), tid == gettid()): the iterator reports ids of the
 * initial pid namespace, which are what /proc shows only when we run in it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "schedstat_bpf.h"
#include "util.h"

#define READ_BUF_SIZE (64 * 1024)

#if HAVE_BPF

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "schedstat.skel.h"

_Static_assert(sizeof(struct schedstat_bpf_rec) == 40, "record layout shared with schedstat.bpf.c");

struct schedstat_bpf {
        struct schedstat_iter *skel;
        int map_fd;
        int link_fd;
        char *buf;
};

bool schedstat_bpf_built(void)
{
        return true;
}

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
        char line[512];
        size_t n;

        if (level == LIBBPF_DEBUG)
                return 0;
        vsnprintf(line, sizeof(line), fmt, ap);
        n = strlen(line);
        if (n > 0 && line[n - 1] == '\n')
                line[n - 1] = '\0';
        log_debug("libbpf: %s", line);
        return 0;
}

void schedstat_bpf_free(struct schedstat_bpf *s)
{
        if (!s)
                return;
        schedstat_iter__destroy(s->skel);
        free(s->buf);
        free(s);
}

struct self_check {
        uint32_t tgid, tid;
        bool found;
};

static void self_check_cb(const struct schedstat_bpf_rec *rec, void *userdata)
{
        struct self_check *c = userdata;

        if (rec->tgid == c->tgid && rec->tid == c->tid)
                c->found = true;
}

int schedstat_bpf_new(struct schedstat_bpf **ret)
{
        struct schedstat_bpf *s;
        struct self_check c = { .tgid = (uint32_t) getpid(), .tid = (uint32_t) gettid() };
        int r;

        libbpf_set_print(libbpf_log);
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->buf = malloc(READ_BUF_SIZE);
        if (!s->buf) {
                free(s);
                return -ENOMEM;
        }
        s->skel = schedstat_iter__open_and_load();
        if (!s->skel) {
                r = errno > 0 ? -errno : -EINVAL;
                goto fail;
        }
        r = schedstat_iter__attach(s->skel);
        if (r < 0)
                goto fail;
        s->map_fd = bpf_map__fd(s->skel->maps.tracked_pids);
        s->link_fd = bpf_link__fd(s->skel->links.dump_schedstat);
        if (s->map_fd < 0 || s->link_fd < 0) {
                r = -EBADF;
                goto fail;
        }

        r = schedstat_bpf_track(s, getpid());
        if (r < 0)
                goto fail;
        r = schedstat_bpf_read(s, self_check_cb, &c);
        (void) schedstat_bpf_untrack(s, getpid());
        if (r < 0)
                goto fail;
        if (!c.found) {
                r = -EOPNOTSUPP; /* not the initial pid namespace */
                goto fail;
        }
        *ret = s;
        return 0;
fail:
        schedstat_bpf_free(s);
        return r;
}

int schedstat_bpf_track(struct schedstat_bpf *s, pid_t pid)
{
        uint32_t key = (uint32_t) pid;
        uint8_t one = 1;

        if (pid <= 0)
                return -EINVAL;
        if (bpf_map_update_elem(s->map_fd, &key, &one, BPF_ANY) < 0)
                return -errno;
        return 0;
}

int schedstat_bpf_untrack(struct schedstat_bpf *s, pid_t pid)
{
        uint32_t key = (uint32_t) pid;

        if (bpf_map_delete_elem(s->map_fd, &key) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

int schedstat_bpf_read(struct schedstat_bpf *s, schedstat_bpf_cb cb, void *userdata)
{
        const size_t rs = sizeof(struct schedstat_bpf_rec);
        size_t have = 0;
        int fd, n_recs = 0, r = 0;

        fd = bpf_iter_create(s->link_fd);
        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t n = read(fd, s->buf + have, READ_BUF_SIZE - have);
                size_t off = 0;

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                if (n == 0) {
                        if (have != 0)
                                r = -EBADMSG; /* truncated record */
                        break;
                }
                have += (size_t) n;
                for (; off + rs <= have; off += rs) {
                        struct schedstat_bpf_rec rec;

                        memcpy(&rec, s->buf + off, rs);
                        cb(&rec, userdata);
                        n_recs++;
                }
                have -= off;
                if (have > 0)
                        memmove(s->buf, s->buf + off, have);
        }
        close(fd);
        return r < 0 ? r : n_recs;
}

#else /* !HAVE_BPF */

bool schedstat_bpf_built(void)
{
        return false;
}

int schedstat_bpf_new(struct schedstat_bpf **ret)
{
        return -EOPNOTSUPP;
}

void schedstat_bpf_free(struct schedstat_bpf *s)
{
}

int schedstat_bpf_track(struct schedstat_bpf *s, pid_t pid)
{
        return -EOPNOTSUPP;
}

int schedstat_bpf_untrack(struct schedstat_bpf *s, pid_t pid)
{
        return -EOPNOTSUPP;
}

int schedstat_bpf_read(struct schedstat_bpf *s, schedstat_bpf_cb cb, void *userdata)
{
        return -EOPNOTSUPP;
}

#endif
