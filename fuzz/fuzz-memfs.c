/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * An in-memory, read-only file tree below the path MEMFS_ROOT ("/memfs"),
 * for the fuzz targets whose parsers read a directory tree (procscan,
 * kvmstat, topology).  Writing thousands of small files to a tmpfs per input
 * and removing them again cost more than the parse: 700-2,700 executions a
 * second, so 10 million took a day.  Served from memory, the same inputs run
 * an order of magnitude faster (fuzz/README.md has the figures).
 *
 * How: the targets are linked with -Wl,--wrap=SYMBOL for the libc calls the
 * tree readers make (nm -u of procscan.o, kvmstat.o, topology.o and util.o):
 * open64, openat64, read, pread64, close, dup, opendir, fdopendir,
 * readdir64, closedir, dirfd and fstatat64.  Each wrapper serves a path below
 * MEMFS_ROOT, a descriptor it handed out (numbers from MEMFS_FD_BASE up,
 * which the kernel never gives) or a DIR of its own pool, and passes
 * everything else to the real function, so libFuzzer's own file I/O is
 * untouched.
 *
 * What it emulates, as a tmpfs would answer: ENOENT for a missing name,
 * ENOTDIR for a file used as a directory (and for O_DIRECTORY on a file),
 * EISDIR for read() of a directory, "." and ".." in readdir() with d_type,
 * st_nlink of a directory = 2 + its subdirectories (procscan counts threads
 * by it), EROFS for any open for writing.  Not emulated: symlinks,
 * permissions, sysfs's own errors (EIO, short reads of attributes); the
 * on-disk tree built by fuzz-tree.h had none of these either.
 * VMMPOWER_FUZZ_TREE_CHECK=1 makes each target run its loader on both the
 * in-memory tree and the same tree written to disk and abort if the results
 * differ (meson test fuzz-NAME-memfs-check, on the seeds).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "fuzz-memfs.h"

#define MEMFS_MAX_NODES 2048
#define MEMFS_MAX_FDS 64
#define MEMFS_MAX_DIRS 16
#define MEMFS_FD_BASE 0x40000000

struct memfs_node {
        int parent;             /* index, -1 for the root */
        int first_child, last_child, next_sibling; /* indexes, -1 for none: creation order */
        bool dir;
        char name[NAME_MAX + 1];
        char *data;             /* file content (malloc'ed), NULL for a directory */
        size_t len;
};

struct memfs_fd {
        bool used;
        int node;
        off_t off;
};

struct memfs_dir {
        bool used;
        int fd;                 /* memfs descriptor it owns */
        int next;               /* 0 ".", 1 "..", 2 the first child, 3 the sibling after cur */
        int cur;                /* the child returned last */
        struct dirent64 ent;
};

static struct memfs_node nodes[MEMFS_MAX_NODES];
static unsigned n_nodes;
static struct memfs_fd fds[MEMFS_MAX_FDS];
static struct memfs_dir dirs[MEMFS_MAX_DIRS];

int __real_open64(const char *path, int flags, ...);
int __real_openat64(int dfd, const char *path, int flags, ...);
ssize_t __real_read(int fd, void *buf, size_t n);
ssize_t __real_pread64(int fd, void *buf, size_t n, off64_t off);
int __real_close(int fd);
int __real_dup(int fd);
DIR *__real_opendir(const char *path);
DIR *__real_fdopendir(int fd);
struct dirent64 *__real_readdir64(DIR *d);
int __real_closedir(DIR *d);
int __real_dirfd(DIR *d);
int __real_fstatat64(int dfd, const char *path, struct stat64 *st, int flags);

int __wrap_open64(const char *path, int flags, ...);
int __wrap_openat64(int dfd, const char *path, int flags, ...);
ssize_t __wrap_read(int fd, void *buf, size_t n);
ssize_t __wrap_pread64(int fd, void *buf, size_t n, off64_t off);
int __wrap_close(int fd);
int __wrap_dup(int fd);
DIR *__wrap_opendir(const char *path);
DIR *__wrap_fdopendir(int fd);
struct dirent64 *__wrap_readdir64(DIR *d);
int __wrap_closedir(DIR *d);
int __wrap_dirfd(DIR *d);
int __wrap_fstatat64(int dfd, const char *path, struct stat64 *st, int flags);

void memfs_reset(void)
{
        for (unsigned i = 0; i < n_nodes; i++)
                free(nodes[i].data);
        memset(fds, 0, sizeof(fds));
        memset(dirs, 0, sizeof(dirs));
        n_nodes = 1;
        nodes[0] = (struct memfs_node) { .parent = -1, .first_child = -1, .last_child = -1, .next_sibling = -1,
                                         .dir = true };
}

static int child(int parent, const char *name, size_t len)
{
        if (len > NAME_MAX)
                return -1;
        for (int i = nodes[parent].first_child; i >= 0; i = nodes[i].next_sibling)
                if (memcmp(nodes[i].name, name, len) == 0 && nodes[i].name[len] == 0)
                        return i;
        return -1;
}

/*
 * Walk path (relative to node at) component by component: "" and "." stay,
 * ".." goes up (not above the root: ENOENT).  Returns the node index or a
 * negative errno.
 */
static int walk(int at, const char *path)
{
        int cur = at;

        while (*path) {
                const char *end = strchrnul(path, '/');
                size_t len = (size_t) (end - path);

                if (!nodes[cur].dir)
                        return -ENOTDIR;
                if (len == 2 && path[0] == '.' && path[1] == '.') {
                        if (nodes[cur].parent < 0)
                                return -ENOENT;
                        cur = nodes[cur].parent;
                } else if (len > 0 && !(len == 1 && path[0] == '.')) {
                        if (len > NAME_MAX)
                                return -ENAMETOOLONG;
                        cur = child(cur, path, len);
                        if (cur < 0)
                                return -ENOENT;
                }
                path = *end ? end + 1 : end;
        }
        return cur;
}

/* The path below MEMFS_ROOT, or NULL for a path outside it. */
static const char *inside(const char *path)
{
        size_t l = strlen(MEMFS_ROOT);

        if (!path || strncmp(path, MEMFS_ROOT, l) != 0 || (path[l] != 0 && path[l] != '/'))
                return NULL;
        return path + l;
}

static bool is_fd(int fd)
{
        return fd >= MEMFS_FD_BASE && fd < MEMFS_FD_BASE + MEMFS_MAX_FDS && fds[fd - MEMFS_FD_BASE].used;
}

static struct memfs_dir *is_dir(DIR *d)
{
        struct memfs_dir *m = (struct memfs_dir *) (void *) d;

        return m >= dirs && m < dirs + MEMFS_MAX_DIRS && m->used ? m : NULL;
}

/* The node of a path relative to dfd (a memfs descriptor, or AT_FDCWD/any with an absolute memfs path). */
static int resolve(int dfd, const char *path)
{
        const char *rel = inside(path);

        if (rel)
                return walk(0, rel);
        if (path[0] == '/' || !is_fd(dfd))
                return -EXDEV; /* not ours */
        return walk(fds[dfd - MEMFS_FD_BASE].node, path);
}

static int new_fd(int node)
{
        for (int i = 0; i < MEMFS_MAX_FDS; i++)
                if (!fds[i].used) {
                        fds[i] = (struct memfs_fd) { .used = true, .node = node };
                        return MEMFS_FD_BASE + i;
                }
        errno = EMFILE;
        return -1;
}

static int do_open(int node, int flags)
{
        if (node < 0) {
                errno = -node;
                return -1;
        }
        if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC))) {
                errno = EROFS;
                return -1;
        }
        if ((flags & O_DIRECTORY) && !nodes[node].dir) {
                errno = ENOTDIR;
                return -1;
        }
        return new_fd(node);
}

static bool ours(int dfd, const char *path)
{
        return inside(path) || (path[0] != '/' && is_fd(dfd));
}

int __wrap_open64(const char *path, int flags, ...)
{
        mode_t mode = 0;

        if (flags & (O_CREAT | O_TMPFILE)) {
                va_list ap;

                va_start(ap, flags);
                mode = va_arg(ap, mode_t);
                va_end(ap);
        }
        if (!inside(path))
                return __real_open64(path, flags, mode);
        return do_open(resolve(AT_FDCWD, path), flags);
}

int __wrap_openat64(int dfd, const char *path, int flags, ...)
{
        mode_t mode = 0;

        if (flags & (O_CREAT | O_TMPFILE)) {
                va_list ap;

                va_start(ap, flags);
                mode = va_arg(ap, mode_t);
                va_end(ap);
        }
        if (!ours(dfd, path))
                return __real_openat64(dfd, path, flags, mode);
        return do_open(resolve(dfd, path), flags);
}

static ssize_t do_read(int fd, void *buf, size_t n, off_t off, bool advance)
{
        struct memfs_fd *f = &fds[fd - MEMFS_FD_BASE];
        const struct memfs_node *nd = &nodes[f->node];
        off_t pos = advance ? f->off : off;
        size_t k;

        if (nd->dir) {
                errno = EISDIR;
                return -1;
        }
        if (pos < 0) {
                errno = EINVAL;
                return -1;
        }
        if ((size_t) pos >= nd->len)
                return 0;
        k = nd->len - (size_t) pos;
        if (k > n)
                k = n;
        memcpy(buf, nd->data + pos, k);
        if (advance)
                f->off += (off_t) k;
        return (ssize_t) k;
}

ssize_t __wrap_read(int fd, void *buf, size_t n)
{
        if (!is_fd(fd))
                return __real_read(fd, buf, n);
        return do_read(fd, buf, n, 0, true);
}

ssize_t __wrap_pread64(int fd, void *buf, size_t n, off64_t off)
{
        if (!is_fd(fd))
                return __real_pread64(fd, buf, n, off);
        return do_read(fd, buf, n, off, false);
}

int __wrap_close(int fd)
{
        if (!is_fd(fd))
                return __real_close(fd);
        fds[fd - MEMFS_FD_BASE].used = false;
        return 0;
}

int __wrap_dup(int fd)
{
        int r;

        if (!is_fd(fd))
                return __real_dup(fd);
        r = new_fd(fds[fd - MEMFS_FD_BASE].node);
        if (r >= 0)
                fds[r - MEMFS_FD_BASE].off = fds[fd - MEMFS_FD_BASE].off;
        return r;
}

DIR *__wrap_fdopendir(int fd)
{
        if (!is_fd(fd))
                return __real_fdopendir(fd);
        if (!nodes[fds[fd - MEMFS_FD_BASE].node].dir) {
                errno = ENOTDIR;
                return NULL;
        }
        for (int i = 0; i < MEMFS_MAX_DIRS; i++)
                if (!dirs[i].used) {
                        dirs[i] = (struct memfs_dir) { .used = true, .fd = fd };
                        return (DIR *) (void *) &dirs[i];
                }
        errno = EMFILE;
        return NULL;
}

DIR *__wrap_opendir(const char *path)
{
        int fd;
        DIR *d;

        if (!inside(path))
                return __real_opendir(path);
        fd = do_open(resolve(AT_FDCWD, path), O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return NULL;
        d = __wrap_fdopendir(fd);
        if (!d)
                __wrap_close(fd);
        return d;
}

static struct dirent64 *entry(struct memfs_dir *m, const char *name, int node, unsigned char type)
{
        memset(&m->ent, 0, sizeof(m->ent));
        m->ent.d_ino = (ino64_t) node + 1;
        m->ent.d_off = m->next;
        m->ent.d_reclen = sizeof(m->ent);
        m->ent.d_type = type;
        strcpy(m->ent.d_name, name);
        return &m->ent;
}

struct dirent64 *__wrap_readdir64(DIR *d)
{
        struct memfs_dir *m = is_dir(d);
        int self;

        if (!m)
                return __real_readdir64(d);
        self = fds[m->fd - MEMFS_FD_BASE].node;
        if (m->next == 0) {
                m->next = 1;
                return entry(m, ".", self, DT_DIR);
        }
        if (m->next == 1) {
                m->next = 2;
                return entry(m, "..", nodes[self].parent < 0 ? self : nodes[self].parent, DT_DIR);
        }
        m->cur = m->next == 2 ? nodes[self].first_child : m->cur >= 0 ? nodes[m->cur].next_sibling : -1;
        m->next = 3;
        if (m->cur >= 0)
                return entry(m, nodes[m->cur].name, m->cur, nodes[m->cur].dir ? DT_DIR : DT_REG);
        return NULL; /* errno untouched: end of directory */
}

int __wrap_closedir(DIR *d)
{
        struct memfs_dir *m = is_dir(d);

        if (!m)
                return __real_closedir(d);
        __wrap_close(m->fd);
        m->used = false;
        return 0;
}

int __wrap_dirfd(DIR *d)
{
        struct memfs_dir *m = is_dir(d);

        return m ? m->fd : __real_dirfd(d);
}

int __wrap_fstatat64(int dfd, const char *path, struct stat64 *st, int flags)
{
        int node;

        if (!ours(dfd, path) && !(path[0] == 0 && (flags & AT_EMPTY_PATH) && is_fd(dfd)))
                return __real_fstatat64(dfd, path, st, flags);
        node = path[0] == 0 ? fds[dfd - MEMFS_FD_BASE].node : resolve(dfd, path);
        if (node < 0) {
                errno = -node;
                return -1;
        }
        memset(st, 0, sizeof(*st));
        st->st_ino = (ino64_t) node + 1;
        st->st_mode = nodes[node].dir ? S_IFDIR | 0755 : S_IFREG | 0644;
        st->st_size = (off64_t) nodes[node].len;
        st->st_nlink = 1;
        if (nodes[node].dir) {
                st->st_nlink = 2;
                for (int i = nodes[node].first_child; i >= 0; i = nodes[i].next_sibling)
                        st->st_nlink += nodes[i].dir;
        }
        return 0;
}

/*
 * Add a directory (data == NULL) or a file at rel (components separated by
 * '/', already checked by the caller), creating the directories above it, as
 * mkdir -p and open(O_CREAT|O_TRUNC) would: a name that exists as the other
 * kind, or a file on the way, leaves the tree unchanged.
 */
void memfs_add(const char *rel, size_t rlen, const char *data, size_t len, bool is_file)
{
        int cur = 0;
        size_t i = 0;

        while (i < rlen) {
                size_t j = i;
                bool last;
                int c;

                while (j < rlen && rel[j] != '/')
                        j++;
                last = j >= rlen;
                if (!nodes[cur].dir || j - i > NAME_MAX)
                        return;
                c = child(cur, rel + i, j - i);
                if (c < 0) {
                        if (n_nodes >= MEMFS_MAX_NODES)
                                return;
                        c = (int) n_nodes++;
                        nodes[c] = (struct memfs_node) { .parent = cur, .first_child = -1, .last_child = -1,
                                                         .next_sibling = -1, .dir = !(last && is_file) };
                        if (nodes[cur].last_child >= 0)
                                nodes[nodes[cur].last_child].next_sibling = c;
                        else
                                nodes[cur].first_child = c;
                        nodes[cur].last_child = c;
                        memcpy(nodes[c].name, rel + i, j - i);
                        nodes[c].name[j - i] = 0;
                } else if (last && nodes[c].dir == is_file) {
                        return; /* EISDIR / EEXIST */
                }
                cur = c;
                i = j + 1;
        }
        if (is_file && cur > 0) {
                char *copy = malloc(len + 1);

                if (!copy)
                        abort();
                memcpy(copy, data, len);
                free(nodes[cur].data);
                nodes[cur].data = copy;
                nodes[cur].len = len;
        }
}
