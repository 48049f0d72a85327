/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * For targets whose parser reads a directory tree (sysfs, procfs, debugfs):
 * the input is turned into a fresh tree of small files below a private
 * temporary directory, then the loader under test runs on it.
 *
 * Input format: records separated by a NUL byte; a record is
 * "relative/path\ncontent" (content may be empty; a record without '\n' is a
 * directory; a byte 0x01 in content is written as a NUL, for /proc cmdline).
 * Paths are relative, at most 8 components, none empty, "." or "..": other
 * records are ignored.  At most 256 records.  The seeds are made
 * from the fixture trees by fuzz/mkseed-tree.py.
 */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FUZZ_TREE_MAX_RECORDS 256
#define FUZZ_TREE_MAX_DEPTH 8

static char fuzz_tree_base[256];

static inline int fuzz_tree_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void) st;
        (void) ftw;
        if (flag == FTW_DP || flag == FTW_D)
                (void) rmdir(path);
        else
                (void) unlink(path);
        return 0;
}

static inline void fuzz_tree_rm(const char *path)
{
        (void) nftw(path, fuzz_tree_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void fuzz_tree_cleanup(void)
{
        if (fuzz_tree_base[0])
                fuzz_tree_rm(fuzz_tree_base);
}

/* The private base directory, made once per process (tmpfs /dev/shm if there is one). */
static inline const char *fuzz_tree_base_dir(void)
{
        const char *tmp;

        if (fuzz_tree_base[0])
                return fuzz_tree_base;
        tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        snprintf(fuzz_tree_base, sizeof(fuzz_tree_base), "%s/vmmpower-fuzz-XXXXXX", tmp);
        if (!mkdtemp(fuzz_tree_base))
                abort();
        atexit(fuzz_tree_cleanup);
        return fuzz_tree_base;
}

static inline int fuzz_tree_valid_path(const char *p, size_t len)
{
        unsigned depth = 0;
        size_t i = 0;

        if (len == 0 || len > 200 || p[0] == '/')
                return 0;
        while (i < len) {
                size_t j = i;

                while (j < len && p[j] != '/')
                        j++;
                if (j == i || (j - i == 1 && p[i] == '.') || (j - i == 2 && p[i] == '.' && p[i + 1] == '.'))
                        return 0;
                if (++depth > FUZZ_TREE_MAX_DEPTH)
                        return 0;
                i = j + 1;
        }
        return p[len - 1] != '/';
}

static inline void fuzz_tree_mkdirs(char *path)
{
        for (char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
                *s = 0;
                (void) mkdir(path, 0755);
                *s = '/';
        }
}

/*
 * Build the tree of data into <base>/<sub> (emptied first) and return that
 * path (static storage).
 */
static inline const char *fuzz_tree_build(const char *sub, const uint8_t *data, size_t size)
{
        static char root[512];
        char path[1024];
        size_t i = 0;
        unsigned records = 0;

        snprintf(root, sizeof(root), "%s/%s", fuzz_tree_base_dir(), sub);
        fuzz_tree_rm(root);
        if (mkdir(root, 0755) < 0)
                abort();
        while (i < size && records < FUZZ_TREE_MAX_RECORDS) {
                const uint8_t *rec = data + i, *end = memchr(rec, 0, size - i), *nl;
                size_t rlen = end ? (size_t) (end - rec) : size - i, plen;

                i += rlen + 1;
                records++;
                nl = memchr(rec, '\n', rlen);
                plen = nl ? (size_t) (nl - rec) : rlen;
                if (!fuzz_tree_valid_path((const char *) rec, plen) || memchr(rec, 0, plen))
                        continue;
                snprintf(path, sizeof(path), "%s/%.*s", root, (int) plen, (const char *) rec);
                fuzz_tree_mkdirs(path);
                if (!nl) {
                        (void) mkdir(path, 0755);
                        continue;
                }
                int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
                if (fd < 0)
                        continue;
                size_t clen = rlen - plen - 1;
                char *content = malloc(clen + 1);
                if (!content)
                        abort();
                for (size_t k = 0; k < clen; k++)
                        content[k] = nl[1 + k] == 1 ? 0 : (char) nl[1 + k];
                if (clen > 0 && write(fd, content, clen) != (ssize_t) clen)
                        abort();
                free(content);
                close(fd);
        }
        return root;
}
