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
 * Call add(ctx, path, plen, content, clen, is_file) for each valid record of
 * data, its content with 0x01 bytes turned into NULs (content is a scratch
 * buffer, valid during the call).
 */
typedef void (*fuzz_tree_add_fn)(void *ctx, const char *path, size_t plen, const char *content, size_t clen,
                                 int is_file);

static inline void fuzz_tree_records(const uint8_t *data, size_t size, fuzz_tree_add_fn add, void *ctx)
{
        size_t i = 0;
        unsigned records = 0;

        while (i < size && records < FUZZ_TREE_MAX_RECORDS) {
                const uint8_t *rec = data + i, *end = memchr(rec, 0, size - i), *nl;
                size_t rlen = end ? (size_t) (end - rec) : size - i, plen, clen;
                char *content;

                i += rlen + 1;
                records++;
                nl = memchr(rec, '\n', rlen);
                plen = nl ? (size_t) (nl - rec) : rlen;
                if (!fuzz_tree_valid_path((const char *) rec, plen) || memchr(rec, 0, plen))
                        continue;
                if (!nl) {
                        add(ctx, (const char *) rec, plen, NULL, 0, 0);
                        continue;
                }
                clen = rlen - plen - 1;
                content = malloc(clen + 1);
                if (!content)
                        abort();
                for (size_t k = 0; k < clen; k++)
                        content[k] = nl[1 + k] == 1 ? 0 : (char) nl[1 + k];
                add(ctx, (const char *) rec, plen, content, clen, 1);
                free(content);
        }
}

static inline void fuzz_tree_add_disk(void *ctx, const char *rel, size_t plen, const char *content, size_t clen,
                                      int is_file)
{
        char path[1024];
        int fd;

        snprintf(path, sizeof(path), "%s/%.*s", (const char *) ctx, (int) plen, rel);
        fuzz_tree_mkdirs(path);
        if (!is_file) {
                (void) mkdir(path, 0755);
                return;
        }
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return;
        if (clen > 0 && write(fd, content, clen) != (ssize_t) clen)
                abort();
        close(fd);
}

/*
 * Build the tree of data into <base>/<sub> (emptied first) on disk and return
 * that path (static storage).
 */
static inline const char *fuzz_tree_build(const char *sub, const uint8_t *data, size_t size)
{
        static char root[512];

        snprintf(root, sizeof(root), "%s/%s", fuzz_tree_base_dir(), sub);
        fuzz_tree_rm(root);
        if (mkdir(root, 0755) < 0)
                abort();
        fuzz_tree_records(data, size, fuzz_tree_add_disk, root);
        return root;
}

#ifdef FUZZ_TREE_MEMFS
#include "fuzz-memfs.h"

static inline void fuzz_tree_add_mem(void *ctx, const char *rel, size_t plen, const char *content, size_t clen,
                                     int is_file)
{
        char path[512];

        snprintf(path, sizeof(path), "%s/%.*s", (const char *) ctx, (int) plen, rel);
        memfs_add(path, strlen(path), content, clen, is_file);
}

/*
 * The same tree in memory (fuzz-memfs.c), below MEMFS_ROOT/<sub>: returns
 * that path.  The target must be linked with fuzz-memfs.c and its --wrap
 * options (fuzz/meson.build).
 */
static inline const char *fuzz_tree_build_mem(const char *sub, const uint8_t *data, size_t size)
{
        static char root[512];

        memfs_reset();
        memfs_add(sub, strlen(sub), NULL, 0, 0);
        snprintf(root, sizeof(root), "%s/%s", MEMFS_ROOT, sub);
        fuzz_tree_records(data, size, fuzz_tree_add_mem, (void *) sub);
        return root;
}

/*
 * Run a target's loader (returning its result as malloc'ed text) on the
 * input's tree in memory; with VMMPOWER_FUZZ_TREE_CHECK=1 also on the same
 * tree on disk, and abort if the two texts differ.  VMMPOWER_FUZZ_TREE_PRINT=1
 * prints the in-memory result to stderr.
 */
static inline void fuzz_tree_run(const char *sub, const uint8_t *data, size_t size, char *(*load)(const char *root))
{
        static int check = -1, print;
        char *mem, *disk;

        if (check < 0) {
                check = getenv("VMMPOWER_FUZZ_TREE_CHECK") && strcmp(getenv("VMMPOWER_FUZZ_TREE_CHECK"), "1") == 0;
                print = getenv("VMMPOWER_FUZZ_TREE_PRINT") && strcmp(getenv("VMMPOWER_FUZZ_TREE_PRINT"), "1") == 0;
        }
        mem = load(fuzz_tree_build_mem(sub, data, size));
        if (print)
                fprintf(stderr, "%s", mem);
        if (check) {
                disk = load(fuzz_tree_build(sub, data, size));
                if (strcmp(mem, disk) != 0) {
                        fprintf(stderr, "in-memory tree:\n%s\non disk:\n%s\n", mem, disk);
                        abort();
                }
                free(disk);
        }
        free(mem);
}
#endif
