/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <errno.h>

/*
 * The daemon's event loop is a plain epoll set; each registered fd carries
 * a struct io_watch as its epoll data pointer, and the loop calls w->fn.
 * (Redis' ae in one struct: callback plus context via container_of.)
 */

#define container_of(ptr, type, member) ((type *) ((char *) (ptr) - offsetof(type, member)))

struct io_watch {
        void (*fn)(struct io_watch *w, uint32_t events);
        int fd;
};

static inline int io_watch_add(int epfd, struct io_watch *w, int fd, uint32_t events,
                               void (*fn)(struct io_watch *, uint32_t))
{
        struct epoll_event ev = { .events = events, .data.ptr = w };

        w->fn = fn;
        w->fd = fd;
        return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static inline int io_watch_mod(int epfd, struct io_watch *w, uint32_t events)
{
        struct epoll_event ev = { .events = events, .data.ptr = w };

        return epoll_ctl(epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0 ? -errno : 0;
}

static inline void io_watch_del(int epfd, struct io_watch *w)
{
        if (w->fd >= 0)
                (void) epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
}
