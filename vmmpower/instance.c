/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The daemon's instance lock (instance.h).
 *
 * The file is removed at exit, so a process may lock a file that has just
 * been unlinked by the previous owner while a third one creates and locks a
 * new one: after flock() succeeds, the path must still name the file we
 * locked (same device and inode), else we retry.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "instance.h"
#include "log.h"
#include "util.h"

#define INSTANCE_LOCK_TRIES 16

static int lock_path(const char *state_dir, char *buf, size_t size)
{
        return path_printf(buf, size, "%s/%s", state_dir, INSTANCE_LOCK_FILE) < 0 ? -ENAMETOOLONG : 0;
}

static pid_t read_owner(int fd)
{
        char buf[32];
        int64_t pid;

        if (pread_all0(fd, buf, sizeof(buf)) <= 0)
                return 0;
        buf[strcspn(buf, "\n")] = '\0';
        if (parse_i64(buf, &pid) < 0 || pid <= 0 || pid > INT32_MAX)
                return 0;
        return (pid_t) pid;
}

int instance_lock(const char *state_dir, pid_t *ret_owner)
{
        char path[4096];
        int r;

        r = lock_path(state_dir, path, sizeof(path));
        if (r < 0)
                return r;
        if (mkdir(state_dir, 0755) < 0 && errno != EEXIST)
                return -errno;
        for (unsigned i = 0; i < INSTANCE_LOCK_TRIES; i++) {
                struct stat fst, pst;
                int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);

                if (fd < 0)
                        return -errno;
                if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                        r = errno == EWOULDBLOCK ? -EBUSY : -errno;
                        if (r == -EBUSY && ret_owner)
                                *ret_owner = read_owner(fd);
                        close(fd);
                        return r;
                }
                if (fstat(fd, &fst) < 0) {
                        r = -errno;
                        close(fd);
                        return r;
                }
                if (stat(path, &pst) == 0 && pst.st_dev == fst.st_dev && pst.st_ino == fst.st_ino) {
                        r = instance_lock_write_pid(fd);
                        if (r < 0) {
                                close(fd);
                                return r;
                        }
                        return fd;
                }
                close(fd); /* the previous owner removed it meanwhile: lock the new file */
        }
        return -EBUSY;
}

int instance_lock_write_pid(int fd)
{
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "%d\n", (int) getpid());

        if (ftruncate(fd, 0) < 0)
                return -errno;
        if (pwrite(fd, buf, (size_t) n, 0) != n)
                return errno ? -errno : -EIO;
        return 0;
}

void instance_unlock(int fd, const char *state_dir)
{
        char path[4096];

        if (fd < 0)
                return;
        /* Unlink while still holding the lock: a waiter that locks the old
         * inode afterwards sees the path gone and retries (instance_lock()). */
        if (lock_path(state_dir, path, sizeof(path)) == 0)
                (void) unlink(path);
        close(fd);
}
