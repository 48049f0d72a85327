/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sd_notify.h"
#include "util.h"

int notify_send(const char *state)
{
        const char *path = getenv("NOTIFY_SOCKET");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t plen;
        socklen_t salen;
        int fd, r = 1;

        if (!path || !*path)
                return 0;
        plen = strlen(path);
        if (plen >= sizeof(sa.sun_path) || (path[0] != '/' && path[0] != '@'))
                return -EINVAL;
        memcpy(sa.sun_path, path, plen);
        if (path[0] == '@')
                sa.sun_path[0] = '\0';
        salen = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + plen + (path[0] == '/'));

        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *) &sa, salen) < 0)
                r = -errno;
        close(fd);
        return r;
}

uint64_t notify_watchdog_usec(void)
{
        const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
        uint64_t v, p;

        if (!usec || parse_u64(usec, &v) < 0 || v == 0)
                return 0;
        if (pid && (parse_u64(pid, &p) < 0 || p != (uint64_t) getpid()))
                return 0;
        return v;
}
