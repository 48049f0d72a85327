/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Plain-QEMU hint channel sockets from a configured pattern (qemu_hint.h). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "qemu_hint.h"
#include "util.h"

#define SUN_PATH_MAX sizeof(((struct sockaddr_un *) 0)->sun_path)

static bool name_char_ok(char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
               ch == '_' || ch == '+' || ch == '-';
}

static bool name_ok(const char *name)
{
        if (name[0] == '\0' || name[0] == '.' || name[0] == '-')
                return false;
        for (const char *p = name; *p; p++)
                if (!name_char_ok(*p))
                        return false;
        return true;
}

int qemu_hint_pattern_check(const char *pattern)
{
        bool has_name = false;

        if (pattern[0] != '/')
                return -EINVAL;
        for (const char *p = pattern; *p; p++) {
                unsigned char ch = (unsigned char) *p;

                if (ch < 0x20 || ch == 0x7f)
                        return -EINVAL;
                if (ch != '%')
                        continue;
                if (p[1] == 'n')
                        has_name = true;
                else if (p[1] != '%')
                        return -EINVAL;
                p++;
        }
        return has_name ? 0 : -EINVAL;
}

int qemu_hint_path(const char *pattern, const char *name, char *buf, size_t size)
{
        size_t o = 0, limit = MIN(size, SUN_PATH_MAX);

        if (qemu_hint_pattern_check(pattern) < 0 || !name_ok(name))
                return -EINVAL;
        for (const char *p = pattern; *p; p++) {
                const char *piece = p;
                size_t len = 1;

                if (*p == '%') {
                        p++;
                        if (*p == 'n') {
                                piece = name;
                                len = strlen(name);
                        }
                }
                if (o + len >= limit)
                        return -ENAMETOOLONG;
                memcpy(buf + o, piece, len);
                o += len;
        }
        buf[o] = '\0';
        return 0;
}

/*
 * The effective uid of pid, from the "Uid:" line of its status file (real,
 * effective, saved, fs).  Not the owner of /proc/<pid>: that reads root for
 * any process that made itself non-dumpable.
 */
static int process_euid(const char *procfs_root, pid_t pid, uid_t *ret)
{
        char path[PATH_MAX], buf[8192];
        const char *line;
        unsigned long real, eff;
        ssize_t n;
        int r;

        r = path_printf(path, sizeof(path), "%s/%d/status", procfs_root, (int) pid);
        if (r < 0)
                return r;
        n = read_small_file(path, buf, sizeof(buf));
        if (n < 0)
                return n == -ENOENT ? -ESRCH : (int) n;
        for (line = buf; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, "Uid:\t", 5) == 0)
                        break;
        if (!line || sscanf(line + 5, "%lu\t%lu", &real, &eff) != 2 || eff > UINT32_MAX - 1)
                return -EBADMSG;
        *ret = (uid_t) eff;
        return 0;
}

int qemu_hint_socket(const char *pattern, const char *procfs_root, const struct vm_info *vm, char *buf,
                     size_t size)
{
        char path[SUN_PATH_MAX];
        struct stat st;
        uid_t euid;
        int r;

        r = qemu_hint_path(pattern, vm->name, path, sizeof(path));
        if (r < 0)
                return r;
        r = process_euid(procfs_root, vm->pid, &euid);
        if (r < 0)
                return r;
        if (lstat(path, &st) < 0)
                return -errno;
        if (!S_ISSOCK(st.st_mode))
                return -ENOTSOCK;
        if (st.st_uid != euid)
                return -EPERM;
        if (strlen(path) >= size)
                return -ENAMETOOLONG;
        strcpy(buf, path);
        return 0;
}
