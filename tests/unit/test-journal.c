/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Journal: record/restore round trip (byte-identical), knobs changed by
 * someone else are left alone, vanished knobs are dropped, partial restore
 * keeps exactly the unrestored entries, a write never read back (unverified)
 * is restored whatever the knob holds, torn and corrupt records, field
 * escaping, compaction (entries no longer live freed; a failed open of the
 * compacted file), and the kill -9 test: a child journals and writes
 * many knobs through the sysfs power driver and is SIGKILLed at random
 * points (fixed seed); the parent restores and compares every file byte for
 * byte with the pristine copy.  Also prints the cost of a durable record
 * and of restoring N knobs on this disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "journal.h"
#include "journal_builtin.h"
#include "power_driver.h"
#include "util.h"

static char tmpdir[256];

/*
 * open() of one path failing on demand (EMFILE), to make a compaction's open
 * of the file it has just renamed into place fail.  The library is linked
 * statically into this test, so its calls come here (open64: the name open
 * has with 64-bit offsets); everything else goes to the system call.  Only
 * opens without O_CREAT count: after fail_open_skip of them, the next
 * fail_open_count fail.
 */
static char fail_open_path[512];
static int fail_open_skip, fail_open_count;

static int fault_open(const char *path, int flags, mode_t mode)
{
        if (fail_open_count > 0 && !(flags & O_CREAT) && strcmp(path, fail_open_path) == 0) {
                if (fail_open_skip > 0)
                        fail_open_skip--;
                else {
                        fail_open_count--;
                        errno = EMFILE;
                        return -1;
                }
        }
#ifdef O_LARGEFILE
        flags |= O_LARGEFILE;
#endif
        return (int) syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

#define FAULT_OPEN_ENTRY(fn, sym)                                               \
        int fn(const char *path, int flags, ...) __asm__(sym);                  \
        int fn(const char *path, int flags, ...)                                \
        {                                                                       \
                mode_t mode = 0;                                                \
                                                                                \
                if (flags & (O_CREAT | O_TMPFILE)) {                            \
                        va_list ap;                                             \
                                                                                \
                        va_start(ap, flags);                                    \
                        mode = (mode_t) va_arg(ap, int);                        \
                        va_end(ap);                                             \
                }                                                               \
                return fault_open(path, flags, mode);                           \
        }
/* both names: which one the library calls depends on the C library's large-file headers */
FAULT_OPEN_ENTRY(fault_open64_entry, "open64")
FAULT_OPEN_ENTRY(fault_open_entry, "open")

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
        char cmd[2048];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof(cmd), fmt, ap);
        va_end(ap);
        assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
        strcpy(tmpdir, "/tmp/test-journal.XXXXXX");
        if (!mkdtemp(tmpdir))
                return -1;
        return 0;
}

static int teardown(void **state)
{
        char cmd[300];

        power_driver_sysfs_set_io(NULL);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        return system(cmd) == 0 ? 0 : -1;
}

static void path_of(char *buf, size_t size, const char *name)
{
        snprintf(buf, size, "%s/%s", tmpdir, name);
}

static void put(const char *dir, const char *rel, const char *content)
{
        char p[512];
        int fd;

        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, strlen(content)), (ssize_t) strlen(content));
        close(fd);
}

static void get(const char *dir, const char *rel, char *buf, size_t size)
{
        char p[512];
        ssize_t n;
        int fd;

        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        fd = open(p, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        n = read(fd, buf, size - 1);
        assert_true(n >= 0);
        buf[n] = '\0';
        close(fd);
}

/* Journal + write one plain-file knob, as a process killed before its read-back leaves it: one U record. */
static void jwrite_unread(struct journal *j, const char *root, const char *rel, const char *value)
{
        char cur[256], data[256];

        assert_true(power_driver_sysfs_knob_read(root, rel, cur, sizeof(cur)) >= 0);
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_SYSFS, rel, cur, value), 0);
        snprintf(data, sizeof(data), "%s\n", value);
        assert_int_equal(power_driver_sysfs_knob_write(root, rel, data), 0);
}

/* Journal + write + read back one plain-file knob, the way the driver does it: U, then K. */
static void jwrite(struct journal *j, const char *root, const char *rel, const char *value)
{
        char cur[256];

        jwrite_unread(j, root, rel, value);
        assert_true(power_driver_sysfs_knob_read(root, rel, cur, sizeof(cur)) >= 0);
        assert_int_equal(journal_note_actual(j, JOURNAL_KIND_SYSFS, rel, cur), 0);
}

static bool exists(const char *p)
{
        return access(p, F_OK) == 0;
}

static int io_read(void *ud, const char *key, char *buf, size_t size)
{
        return power_driver_sysfs_knob_read(ud, key, buf, size);
}

static int io_write(void *ud, const char *key, const char *value)
{
        return power_driver_sysfs_knob_write(ud, key, value);
}

static const struct journal_knob_io *sysfs_io(const char *root)
{
        static struct journal_knob_io io[_JOURNAL_KIND_MAX];
        static char r[512];

        snprintf(r, sizeof(r), "%s", root);
        memset(io, 0, sizeof(io));
        /* what journal_restore_all() uses for sysfs */
        io[JOURNAL_KIND_SYSFS].read = io_read;
        io[JOURNAL_KIND_SYSFS].write = io_write;
        io[JOURNAL_KIND_SYSFS].userdata = r;
        return io;
}

static void test_roundtrip(void **state)
{
        char root[300], sd[300], jp[400], buf[256];
        struct journal *j;
        struct restore_stats st;

        path_of(root, sizeof(root), "rt-root");
        path_of(sd, sizeof(sd), "rt-state");
        snprintf(jp, sizeof(jp), "%s/journal", sd);
        mkdir(root, 0755);
        put(root, "a", "3800000\n");
        put(root, "b", "balance_performance\n");
        put(root, "c", "0\n");
        put(root, "d", "no newline");

        assert_int_equal(journal_open(sd, &j), 0);
        assert_false(exists(jp)); /* nothing recorded: no file */
        jwrite(j, root, "a", "2000000");
        assert_true(exists(jp));
        jwrite(j, root, "a", "1000000");
        jwrite(j, root, "b", "power");
        jwrite(j, root, "c", "1");
        jwrite(j, root, "d", "x y");
        assert_int_equal(journal_n_entries(j), 4);
        assert_string_equal(journal_original(j, JOURNAL_KIND_SYSFS, "a"), "3800000\n");
        assert_string_equal(journal_original(j, JOURNAL_KIND_SYSFS, "d"), "no newline");
        journal_free(j);

        /* Reopen (a restarted daemon): the originals survive, not the current values. */
        assert_int_equal(journal_open(sd, &j), 0);
        assert_int_equal(journal_n_entries(j), 4);
        assert_string_equal(journal_original(j, JOURNAL_KIND_SYSFS, "a"), "3800000\n");
        jwrite(j, root, "a", "900000");
        assert_string_equal(journal_original(j, JOURNAL_KIND_SYSFS, "a"), "3800000\n");
        assert_int_equal(journal_restore(j, sysfs_io(root), &st), 0);
        assert_int_equal(st.restored, 4);
        assert_int_equal(st.foreign + st.gone + st.failed + st.skipped, 0);
        assert_int_equal(journal_n_entries(j), 0);
        assert_false(exists(jp));
        journal_free(j);
        get(root, "a", buf, sizeof(buf));
        assert_string_equal(buf, "3800000\n");
        get(root, "b", buf, sizeof(buf));
        assert_string_equal(buf, "balance_performance\n");
        get(root, "c", buf, sizeof(buf));
        assert_string_equal(buf, "0\n");
        get(root, "d", buf, sizeof(buf));
        assert_string_equal(buf, "no newline");

        /* The daemon on TERM: restore through its own open journal, which stays usable. */
        assert_int_equal(journal_open(sd, &j), 0);
        jwrite(j, root, "b", "performance");
        assert_int_equal(journal_restore_all(sd, root, NULL, &st), -EBUSY);
        assert_int_equal(journal_restore_builtin(j, root, NULL, &st), 0);
        assert_int_equal(st.restored, 1);
        assert_false(exists(jp));
        jwrite(j, root, "c", "1");
        assert_true(exists(jp));
        assert_int_equal(journal_restore_builtin(j, root, NULL, &st), 0);
        assert_int_equal(st.restored, 1);
        journal_free(j);
        get(root, "b", buf, sizeof(buf));
        assert_string_equal(buf, "balance_performance\n");
        get(root, "c", buf, sizeof(buf));
        assert_string_equal(buf, "0\n");

        /* No journal: restore_all is a no-op. */
        assert_int_equal(journal_restore_all(sd, root, NULL, &st), 0);
        assert_int_equal(st.restored, 0);
}

static int busy_write(void *ud, const char *key, const char *value)
{
        if (strcmp(key, "stuck") == 0)
                return -EBUSY;
        return power_driver_sysfs_knob_write(ud, key, value);
}

static void test_foreign_gone_partial(void **state)
{
        char root[300], sd[300], jp[400], buf[256];
        struct journal *j;
        struct restore_stats st;

        path_of(root, sizeof(root), "fg-root");
        path_of(sd, sizeof(sd), "fg-state");
        snprintf(jp, sizeof(jp), "%s/journal", sd);
        mkdir(root, 0755);
        put(root, "ours", "1\n");
        put(root, "theirs", "1\n");
        put(root, "gone", "1\n");
        put(root, "stuck", "1\n");
        put(root, "untouched", "1\n");

        assert_int_equal(journal_open(sd, &j), 0);
        jwrite(j, root, "ours", "2");
        jwrite(j, root, "theirs", "2");
        jwrite(j, root, "gone", "2");
        jwrite(j, root, "stuck", "2");
        /* journalled, but the write never happened (killed in between) */
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_SYSFS, "untouched", "1\n", "2"), 0);
        journal_free(j);

        put(root, "theirs", "7\n"); /* an administrator changed it */
        sh("rm '%s/gone'", root);   /* CPU went offline */

        /* "stuck" fails to write (EBUSY through a wrapped writer): it must be kept. */
        assert_int_equal(journal_open(sd, &j), 0);
        struct journal_knob_io io[_JOURNAL_KIND_MAX];
        memcpy(io, sysfs_io(root), sizeof(io));
        io[JOURNAL_KIND_SYSFS].write = busy_write;
        assert_int_equal(journal_restore(j, io, &st), 1);
        assert_int_equal(st.restored, 1);
        assert_int_equal(st.foreign, 1);
        assert_int_equal(st.gone, 1);
        assert_int_equal(st.failed, 1);
        assert_int_equal(st.unchanged, 1);
        assert_int_equal(journal_n_entries(j), 1);
        assert_non_null(journal_original(j, JOURNAL_KIND_SYSFS, "stuck"));
        journal_free(j);
        assert_true(exists(jp));
        get(root, "theirs", buf, sizeof(buf));
        assert_string_equal(buf, "7\n");
        get(root, "ours", buf, sizeof(buf));
        assert_string_equal(buf, "1\n");
        get(root, "stuck", buf, sizeof(buf));
        assert_string_equal(buf, "2\n");

        /* The kept journal holds exactly "stuck"; a later restore completes it. */
        assert_int_equal(journal_restore_all(sd, root, NULL, &st), 0);
        assert_int_equal(st.restored, 1);
        assert_int_equal(st.foreign + st.gone + st.failed, 0);
        assert_false(exists(jp));
        get(root, "stuck", buf, sizeof(buf));
        assert_string_equal(buf, "1\n");
}

/*
 * Killed between a write and the record of its read-back: the knob may hold
 * what the kernel made of the write (a clamped cpufreq limit, a narrowed
 * mask), a value neither before nor after.  Its last record is unverified (U),
 * so restore takes the value as ours and writes the original back; a knob
 * whose read-back was recorded (K) and that holds another value was changed
 * by someone else and is left.  The same for a thread's affinity.
 */
static void test_unverified_taken_as_ours(void **state)
{
        struct journal_knob_io io[_JOURNAL_KIND_MAX];
        char root[300], sd[300], jp[400], buf[64];
        struct restore_stats st;
        struct journal *j;

        path_of(root, sizeof(root), "uv-root");
        path_of(sd, sizeof(sd), "uv-state");
        snprintf(jp, sizeof(jp), "%s/journal", sd);
        mkdir(root, 0755);
        put(root, "clamped", "3800000\n");
        put(root, "theirs", "3800000\n");
        put(root, "narrowed", "0-3\n");
        assert_int_equal(journal_open(sd, &j), 0);
        jwrite_unread(j, root, "clamped", "3000000");
        put(root, "clamped", "2400000\n"); /* what the kernel made of it; then kill -9 */
        jwrite(j, root, "theirs", "3000000");
        jwrite_unread(j, root, "narrowed", "1,64");
        put(root, "narrowed", "1\n");
        assert_true(journal_unverified(j, JOURNAL_KIND_SYSFS, "clamped"));
        assert_false(journal_unverified(j, JOURNAL_KIND_SYSFS, "theirs"));
        journal_free(j);
        sh("grep -q ' U sysfs clamped ' '%s' && grep -q ' K sysfs theirs ' '%s'", jp, jp);
        put(root, "theirs", "2400000\n"); /* someone else, after our verified write */

        memcpy(io, sysfs_io(root), sizeof(io));
        assert_int_equal(journal_open(sd, &j), 0);
        assert_true(journal_unverified(j, JOURNAL_KIND_SYSFS, "narrowed"));
        assert_int_equal(journal_restore(j, io, &st), 0);
        assert_int_equal(st.restored, 2);
        assert_int_equal(st.foreign, 1);
        assert_int_equal(st.failed, 0);
        journal_free(j);
        get(root, "clamped", buf, sizeof(buf));
        assert_string_equal(buf, "3800000\n");
        get(root, "narrowed", buf, sizeof(buf));
        assert_string_equal(buf, "0-3\n");
        get(root, "theirs", buf, sizeof(buf));
        assert_string_equal(buf, "2400000\n");
        assert_false(exists(jp));
}

static void test_torn_and_corrupt(void **state)
{
        char root[300], sd[300], jp[400];
        struct journal *j;
        struct journal_load_stats ls;
        struct restore_stats st;
        struct stat s1, s2;
        int fd;

        path_of(root, sizeof(root), "tc-root");
        path_of(sd, sizeof(sd), "tc-state");
        snprintf(jp, sizeof(jp), "%s/journal", sd);
        mkdir(root, 0755);
        put(root, "k1", "a\n");
        put(root, "k2", "b\n");
        put(root, "k3", "c\n");

        assert_int_equal(journal_open(sd, &j), 0);
        jwrite_unread(j, root, "k1", "A");
        jwrite_unread(j, root, "k2", "B");
        journal_free(j);
        assert_int_equal(stat(jp, &s1), 0);

        /* A torn append: part of a record, no newline. */
        fd = open(jp, O_WRONLY | O_APPEND);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "41 1234abcd K sysfs k3 c%0A c%0A", 32), 32);
        close(fd);
        assert_int_equal(journal_open(sd, &j), 0);
        journal_get_load_stats(j, &ls);
        assert_int_equal(ls.torn, 1);
        assert_int_equal(ls.corrupt, 0);
        assert_int_equal(ls.records, 2);
        assert_int_equal(journal_n_entries(j), 2);
        /* cut off on open, so the next append is clean */
        assert_int_equal(stat(jp, &s2), 0);
        assert_int_equal(s2.st_size, s1.st_size);
        jwrite_unread(j, root, "k3", "C");
        journal_free(j);
        assert_int_equal(journal_open(sd, &j), 0);
        journal_get_load_stats(j, &ls);
        assert_int_equal(ls.torn + ls.corrupt, 0);
        assert_int_equal(journal_n_entries(j), 3);
        journal_free(j);

        /* A complete line whose CRC does not match (bit flip in k2's record): skipped, others kept. */
        char data[4096];
        fd = open(jp, O_RDWR);
        ssize_t n = read(fd, data, sizeof(data) - 1);
        assert_true(n > 0);
        data[n] = '\0';
        char *k2 = strstr(data, " k2 ");
        assert_non_null(k2);
        k2[2] = '9'; /* "k9": length unchanged, CRC wrong */
        assert_int_equal(pwrite(fd, data, (size_t) n, 0), n);
        close(fd);
        assert_int_equal(journal_open(sd, &j), 0);
        journal_get_load_stats(j, &ls);
        assert_int_equal(ls.corrupt, 1);
        assert_int_equal(journal_n_entries(j), 2);
        assert_null(journal_original(j, JOURNAL_KIND_SYSFS, "k2"));
        assert_null(journal_original(j, JOURNAL_KIND_SYSFS, "k9"));
        assert_int_equal(journal_restore(j, sysfs_io(root), &st), 0);
        assert_int_equal(st.restored, 2);
        assert_int_equal(st.torn, 1);
        journal_free(j);

        /* A torn header (crash while creating the file) is an empty journal. */
        sh("printf 'vmmpower-jour' > '%s'", jp);
        assert_int_equal(journal_open(sd, &j), 0);
        assert_int_equal(journal_n_entries(j), 0);
        journal_free(j);
        /* Somebody else's file is refused, not overwritten. */
        sh("printf 'hello world\\n' > '%s'", jp);
        assert_int_equal(journal_open(sd, &j), -EBADMSG);
        sh("rm '%s'", jp);
}

/*
 * A corrupt record in the middle (issue 16, item 8): the file as it was is
 * kept aside byte for byte, every good record keeps its original (and is
 * restored), the knob the corrupt record names is reported, and restore does
 * not delete the evidence.  The rewritten journal is clean: opening it again
 * makes no second copy.
 */
static void test_corrupt_kept_aside(void **state)
{
        char root[300], sd[300], jp[400], saved[400], name[256], copy[700], buf[64];
        struct journal_load_stats ls;
        struct restore_stats st;
        struct journal *j;
        char data[4096];
        ssize_t n;
        int fd;

        path_of(root, sizeof(root), "ca-root");
        path_of(sd, sizeof(sd), "ca-state");
        path_of(saved, sizeof(saved), "ca-saved");
        snprintf(jp, sizeof(jp), "%s/journal", sd);
        mkdir(root, 0755);
        put(root, "k1", "a\n");
        put(root, "k2", "b\n");
        put(root, "k3", "c\n");
        put(root, "k4", "d\n");
        assert_int_equal(journal_open(sd, &j), 0);
        jwrite_unread(j, root, "k1", "A");
        jwrite_unread(j, root, "k2", "B");
        jwrite_unread(j, root, "k4", "D");
        jwrite_unread(j, root, "k4", "E"); /* k4's last write: its record gets a bad CRC below */
        jwrite_unread(j, root, "k3", "C");
        jwrite_unread(j, root, "k1", "AA");
        journal_free(j);

        /* Bit flip in the value of k2's record: CRC wrong, line complete, good records after it. */
        fd = open(jp, O_RDWR);
        n = read(fd, data, sizeof(data) - 1);
        assert_true(n > 0);
        data[n] = '\0';
        char *k2 = strstr(data, " k2 b%0A b%0A B");
        assert_non_null(k2);
        k2[strlen(" k2 b%0A b%0A ")] = 'X';
        /* k4's second record: payload intact, CRC digit changed */
        char *k4 = strstr(data, " U sysfs k4 d%0A D%0A E");
        assert_non_null(k4);
        k4[-1] = k4[-1] == '0' ? '1' : '0';
        assert_int_equal(pwrite(fd, data, (size_t) n, 0), n);
        close(fd);
        sh("cp '%s' '%s'", jp, saved);
        assert_int_equal(journal_count_corrupt_files(sd, NULL, 0), 0);

        assert_int_equal(journal_open(sd, &j), 0);
        journal_get_load_stats(j, &ls);
        assert_int_equal(ls.corrupt, 2);
        assert_int_equal(ls.corrupt_keys, 2);
        assert_int_equal(ls.records, 4);
        assert_non_null(journal_corrupt_file(j));
        snprintf(name, sizeof(name), "%s", journal_corrupt_file(j));
        assert_int_equal(strncmp(name, JOURNAL_CORRUPT_PREFIX, strlen(JOURNAL_CORRUPT_PREFIX)), 0);
        snprintf(copy, sizeof(copy), "%s/%s", sd, name);
        sh("cmp '%s' '%s'", saved, copy); /* the evidence, byte for byte */
        /* every good record's original */
        assert_string_equal(journal_original(j, JOURNAL_KIND_SYSFS, "k1"), "a\n");
        assert_string_equal(journal_original(j, JOURNAL_KIND_SYSFS, "k3"), "c\n");
        assert_string_equal(journal_original(j, JOURNAL_KIND_SYSFS, "k4"), "d\n");
        /* k4 holds what its corrupt last record wrote: still recognised as ours and restored */
        assert_int_equal(journal_restore(j, sysfs_io(root), &st), 0);
        assert_int_equal(st.restored, 3);
        assert_int_equal(st.foreign, 0);
        assert_int_equal(st.corrupt, 2);
        assert_string_equal(st.corrupt_file, name);
        journal_free(j);
        get(root, "k1", buf, sizeof(buf));
        assert_string_equal(buf, "a\n");
        get(root, "k3", buf, sizeof(buf));
        assert_string_equal(buf, "c\n");
        get(root, "k4", buf, sizeof(buf));
        assert_string_equal(buf, "d\n");
        /* The journal is done with, the evidence stays. */
        assert_false(exists(jp));
        assert_true(exists(copy));
        assert_int_equal(journal_count_corrupt_files(sd, buf, sizeof(buf)), 1);
        assert_string_equal(buf, name);

        /* A journal with a corrupt record that is rewritten (not restored): clean on the next open. */
        assert_int_equal(journal_open(sd, &j), 0);
        jwrite_unread(j, root, "k1", "A");
        jwrite_unread(j, root, "k3", "C");
        journal_free(j);
        fd = open(jp, O_RDWR);
        n = read(fd, data, sizeof(data) - 1);
        assert_true(n > 0);
        data[n] = '\0';
        char *k1 = strstr(data, " k1 a%0A a%0A A");
        assert_non_null(k1);
        k1[strlen(" k1 a%0A a%0A ")] = 'Z';
        assert_int_equal(pwrite(fd, data, (size_t) n, 0), n);
        close(fd);
        assert_int_equal(journal_open(sd, &j), 0);
        assert_non_null(journal_corrupt_file(j));
        assert_int_equal(journal_n_entries(j), 1);
        journal_free(j);
        assert_int_equal(journal_open(sd, &j), 0);
        journal_get_load_stats(j, &ls);
        assert_int_equal(ls.corrupt, 0);
        assert_null(journal_corrupt_file(j));
        assert_int_equal(journal_n_entries(j), 1);
        journal_free(j);
        assert_int_equal(journal_count_corrupt_files(sd, NULL, 0), 2);
        put(root, "k1", "a\n"); /* its record was lost: put back by hand */
        assert_int_equal(journal_restore_all(sd, root, NULL, &st), 0);
        get(root, "k3", buf, sizeof(buf));
        assert_string_equal(buf, "c\n");
}

/*
 * The journal logs corrupt records at debug level only; the knobs they name reach the
 * caller (journal_report_load() in the daemon) as notes: a knob known only from its
 * corrupt record with its original as far as it reads, a knob with good records as
 * salvaged.
 */
static void test_corrupt_notes(void **state)
{
        char root[300], sd[300], jp[400], data[4096];
        const struct journal_corrupt_note *notes;
        struct journal *j;
        ssize_t n;
        int fd;

        path_of(root, sizeof(root), "cn-root");
        path_of(sd, sizeof(sd), "cn-state");
        snprintf(jp, sizeof(jp), "%s/journal", sd);
        mkdir(root, 0755);
        put(root, "k1", "a\n");
        put(root, "k2", "b\n");
        assert_int_equal(journal_open(sd, &j), 0);
        jwrite_unread(j, root, "k1", "A");
        jwrite_unread(j, root, "k2", "B");
        jwrite_unread(j, root, "k1", "AA");
        jwrite_unread(j, root, "k2", "BB");
        assert_int_equal(journal_corrupt_notes(j, &notes), 0);
        journal_free(j);

        fd = open(jp, O_RDWR);
        n = read(fd, data, sizeof(data) - 1);
        assert_true(n > 0);
        data[n] = '\0';
        char *k2 = strstr(data, " k2 b%0A b%0A B"); /* k2's only original: a bit flip in its first record */
        assert_non_null(k2);
        k2[strlen(" k2 b%0A b%0A ")] = 'X';
        char *k1 = strstr(data, " U sysfs k1 a%0A A%0A AA"); /* k1's last record: CRC digit changed */
        assert_non_null(k1);
        k1[-1] = k1[-1] == '0' ? '1' : '0';
        assert_int_equal(pwrite(fd, data, (size_t) n, 0), n);
        close(fd);

        assert_int_equal(journal_open(sd, &j), 0);
        assert_int_equal(journal_corrupt_notes(j, &notes), 2);
        for (unsigned i = 0; i < 2; i++) {
                const struct journal_corrupt_note *k = &notes[i];

                assert_int_equal(k->kind, JOURNAL_KIND_SYSFS);
                if (strcmp(k->key, "k2") == 0) {
                        assert_string_equal(k->original, "b\\x0a");
                        assert_false(k->salvaged);
                } else {
                        assert_string_equal(k->key, "k1");
                        assert_true(k->salvaged);
                }
        }
        assert_string_not_equal(notes[0].key, notes[1].key);
        journal_free(j);
}

/* cpufreq-like pair: scaling_min_freq reads back clamped to scaling_max_freq. */
struct fake_policy {
        unsigned min_req, max_req;
};

static int fp_read(void *ud, const char *key, char *buf, size_t size)
{
        struct fake_policy *p = ud;
        unsigned v = strcmp(key, "min") == 0 ? MIN(p->min_req, p->max_req) : p->max_req;
        return snprintf(buf, size, "%u\n", v);
}

static int fp_write(void *ud, const char *key, const char *value)
{
        struct fake_policy *p = ud;
        uint32_t v;

        if (parse_u32(value, &v) < 0) /* accepts one trailing newline */
                return -EINVAL;
        if (strcmp(key, "min") == 0)
                p->min_req = v;
        else
                p->max_req = v;
        return 0;
}

static void test_restore_order_clamp(void **state)
{
        struct fake_policy p = { 3000000, 3800000 }; /* an administrator's floor */
        struct journal_knob_io io[_JOURNAL_KIND_MAX] = { [JOURNAL_KIND_SYSFS] = { fp_read, fp_write, &p } };
        char sd[300], cur[32];
        struct journal *j, *j2;
        struct restore_stats st;

        path_of(sd, sizeof(sd), "ro-state");
        assert_int_equal(journal_open(sd, &j), 0);
        /* The journal is exclusive: a second user (vmmpowerd --restore while the daemon runs) is refused. */
        assert_int_equal(journal_open(sd, &j2), -EBUSY);
        /* we lower the floor first, then the cap */
        fp_read(&p, "min", cur, sizeof(cur));
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_SYSFS, "min", cur, "800000"), 0);
        fp_write(&p, "min", "800000\n");
        fp_read(&p, "max", cur, sizeof(cur));
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_SYSFS, "max", cur, "1000000"), 0);
        fp_write(&p, "max", "1000000\n");
        /*
         * Restoring min first reads back 1000000 (clamped by max); once max
         * is back the second pass finds min at its original.
         */
        assert_int_equal(journal_restore(j, io, &st), 0);
        assert_int_equal(st.restored, 1);
        assert_int_equal(st.unchanged, 1);
        assert_int_equal(st.foreign + st.failed, 0);
        assert_int_equal(p.min_req, 3000000);
        assert_int_equal(p.max_req, 3800000);
        journal_free(j);
        assert_int_equal(journal_open(sd, &j2), 0);
        journal_free(j2);
}

static void test_escaping_and_kinds(void **state)
{
        char sd[300];
        struct journal *j;
        static const char *const weird[] = { "", "a b", "100%", "x=y", "=", "line\nbreak", "tab\there", "\x7f\x01" };

        path_of(sd, sizeof(sd), "esc-state");
        assert_int_equal(journal_open(sd, &j), 0);
        for (size_t i = 0; i < ELEMENTSOF(weird); i++) {
                char key[64];
                snprintf(key, sizeof(key), "key %zu %%=", i);
                assert_int_equal(journal_before_write(j, JOURNAL_KIND_SYSFS, key, weird[i], "v"), 0);
        }
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_AFFINITY, "1:2:3", "0-1", "1"), 0);
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_VCPUPIN, "6695eb01-f6a4-8304-79aa-97f2502e193f:0", "0-7", "2"), 0);
        /* same key, different kinds: distinct knobs */
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_SYSFS, "1:2:3", "s", "t"), 0);
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_SYSFS, "", "a", "b"), -EINVAL);
        journal_free(j);

        assert_int_equal(journal_open(sd, &j), 0);
        struct journal_load_stats ls;
        journal_get_load_stats(j, &ls);
        assert_int_equal(ls.torn + ls.corrupt, 0);
        assert_int_equal(journal_n_entries(j), ELEMENTSOF(weird) + 3);
        for (size_t i = 0; i < ELEMENTSOF(weird); i++) {
                char key[64];
                snprintf(key, sizeof(key), "key %zu %%=", i);
                assert_string_equal(journal_original(j, JOURNAL_KIND_SYSFS, key), weird[i]);
        }
        assert_string_equal(journal_original(j, JOURNAL_KIND_AFFINITY, "1:2:3"), "0-1");
        assert_string_equal(journal_original(j, JOURNAL_KIND_SYSFS, "1:2:3"), "s");
        assert_string_equal(journal_original(j, JOURNAL_KIND_VCPUPIN, "6695eb01-f6a4-8304-79aa-97f2502e193f:0"), "0-7");
        /* worst-case cpulist of a 4096-CPU host (every other CPU) fits */
        {
                static char big[16384];
                cpuset_t every_other;
                cpuset_zero(&every_other);
                for (unsigned c = 0; c < VP_MAX_CPUS; c += 2)
                        cpuset_set(&every_other, c);
                assert_true(cpuset_format_list(&every_other, big, sizeof(big)) > 9000);
                assert_int_equal(journal_before_write(j, JOURNAL_KIND_AFFINITY, "9:9:9", big, "1"), 0);
                journal_free(j);
                assert_int_equal(journal_open(sd, &j), 0);
                assert_string_equal(journal_original(j, JOURNAL_KIND_AFFINITY, "9:9:9"), big);
                assert_int_equal(journal_forget(j, JOURNAL_KIND_AFFINITY, "9:9:9"), 0);
        }
        /* forget */
        assert_int_equal(journal_forget(j, JOURNAL_KIND_AFFINITY, "1:2:3"), 0);
        journal_free(j);
        assert_int_equal(journal_open(sd, &j), 0);
        assert_null(journal_original(j, JOURNAL_KIND_AFFINITY, "1:2:3"));
        assert_int_equal(journal_n_entries(j), ELEMENTSOF(weird) + 2);
        /* vcpupin entries with no libvirt connection are kept (skipped) */
        struct journal_knob_io io[_JOURNAL_KIND_MAX] = { 0 };
        struct restore_stats st;
        assert_int_equal(journal_restore(j, io, &st), (int) ELEMENTSOF(weird) + 2);
        assert_int_equal(st.skipped, ELEMENTSOF(weird) + 2);
        journal_free(j);
        sh("rm -rf '%s'", sd);
}

static void test_compaction(void **state)
{
        char root[300], sd[300], jp[400], v[32], v2[400];
        struct journal *j;
        struct stat s;

        path_of(root, sizeof(root), "cp-root");
        path_of(sd, sizeof(sd), "cp-state");
        snprintf(jp, sizeof(jp), "%s/journal", sd);
        mkdir(root, 0755);
        put(root, "k", "orig\n");
        put(root, "l", "orig-l\n");
        assert_int_equal(journal_open(sd, &j), 0);
        journal_set_sync(j, false);
        jwrite(j, root, "l", "L");
        for (int i = 0; i < 5000; i++) {
                snprintf(v, sizeof(v), "%d", i);
                jwrite(j, root, "k", v);
        }
        journal_free(j);
        assert_int_equal(stat(jp, &s), 0);
        /* 5001 records of ~40 bytes would be ~200 KB; compaction keeps it near 258 records */
        assert_true(s.st_size < 260 * 64);
        /* a compaction killed before its rename leaves a temp file: removed on open */
        sh("echo junk > '%s/journal.tmp.999'", sd);
        assert_int_equal(journal_open(sd, &j), 0);
        assert_false(exists(strcat(strcpy(v2, sd), "/journal.tmp.999")));
        assert_int_equal(journal_n_entries(j), 2);
        assert_string_equal(journal_original(j, JOURNAL_KIND_SYSFS, "k"), "orig\n");
        struct restore_stats st;
        assert_int_equal(journal_restore(j, sysfs_io(root), &st), 0);
        assert_int_equal(st.restored, 2);
        journal_free(j);
        get(root, "k", v, sizeof(v));
        assert_string_equal(v, "orig\n");
}

/*
 * A compaction renames its new file into place and then cannot open it
 * (EMFILE): the descriptor it had points at the old file, unlinked, and a
 * record appended there would be reported durable and never read again.  The
 * next record must reach the file in place instead (it opens it again).  The
 * same for the rewrite journal_open() makes of a journal with a corrupt record.
 */
static void test_rewrite_reopen_fails(void **state)
{
        char root[300], sd[300], v[32], data[4096];
        const char *before, *after;
        struct journal *j;
        ssize_t n;
        int fd, i;

        path_of(root, sizeof(root), "rf-root");
        path_of(sd, sizeof(sd), "rf-state");
        mkdir(root, 0755);
        put(root, "k", "orig\n");
        put(root, "l", "orig-l\n");
        snprintf(fail_open_path, sizeof(fail_open_path), "%s/journal", sd);

        assert_int_equal(journal_open(sd, &j), 0);
        journal_set_sync(j, false);
        jwrite(j, root, "l", "L");
        fail_open_skip = 0;
        fail_open_count = 1;
        for (i = 0; i < 1000 && fail_open_count > 0; i++) {
                snprintf(v, sizeof(v), "%d", i);
                jwrite(j, root, "k", v);
        }
        assert_int_equal(fail_open_count, 0); /* a compaction ran, and its open failed */
        jwrite(j, root, "k", "last");
        jwrite(j, root, "l", "LL");
        journal_free(j);
        assert_int_equal(journal_open(sd, &j), 0);
        assert_int_equal(journal_last_values(j, JOURNAL_KIND_SYSFS, "k", &before, &after), 1);
        assert_string_equal(after, "last");
        assert_int_equal(journal_last_values(j, JOURNAL_KIND_SYSFS, "l", &before, &after), 1);
        assert_string_equal(after, "LL");
        assert_string_equal(journal_original(j, JOURNAL_KIND_SYSFS, "k"), "orig\n");
        journal_free(j);

        /* A corrupt record in the middle: journal_open() rewrites the file; its open of the new one fails. */
        fd = open(fail_open_path, O_RDWR | O_CLOEXEC);
        assert_true(fd >= 0);
        n = read(fd, data, sizeof(data) - 1);
        assert_true(n > 0);
        data[n] = '\0';
        char *l = strstr(data, " l orig-l%0A ");
        assert_non_null(l);
        l[1] = 'm'; /* "m": length unchanged, CRC wrong */
        assert_int_equal(pwrite(fd, data, (size_t) n, 0), n);
        close(fd);
        fail_open_skip = 1; /* journal_open()'s own open of the file */
        fail_open_count = 1;
        assert_int_equal(journal_open(sd, &j), 0);
        assert_int_equal(fail_open_count, 0);
        assert_non_null(journal_corrupt_file(j));
        jwrite(j, root, "k", "after-open");
        journal_free(j);
        assert_int_equal(journal_open(sd, &j), 0);
        assert_null(journal_corrupt_file(j)); /* the rewritten file is the journal */
        assert_int_equal(journal_last_values(j, JOURNAL_KIND_SYSFS, "k", &before, &after), 1);
        assert_string_equal(after, "after-open");
        journal_free(j);
        fail_open_count = 0;
        fail_open_path[0] = '\0';
        sh("rm -rf '%s'", sd);
}

/*
 * Entries that are no longer live (a thread pinned and gone, forgotten) are
 * freed when the file is compacted, not kept for the life of the daemon; a
 * live one keeps its original across it.
 */
static void test_compaction_frees_entries(void **state)
{
        char sd[300], key[64];
        const char *before, *after;
        struct journal *j;

        path_of(sd, sizeof(sd), "cf-state");
        assert_int_equal(journal_open(sd, &j), 0);
        journal_set_sync(j, false);
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_AFFINITY, "1:1:1", "0-3", "0"), 0);
        assert_int_equal(journal_note_actual(j, JOURNAL_KIND_AFFINITY, "1:1:1", "0"), 0);
        for (unsigned i = 0; i < 3000; i++) {
                snprintf(key, sizeof(key), "100:%u:%u", 1000 + i, 5000 + i);
                assert_int_equal(journal_before_write(j, JOURNAL_KIND_AFFINITY, key, "0-3", "2"), 0);
                assert_int_equal(journal_note_actual(j, JOURNAL_KIND_AFFINITY, key, "2"), 0);
                assert_int_equal(journal_forget(j, JOURNAL_KIND_AFFINITY, key), 0);
        }
        assert_int_equal(journal_n_entries(j), 1);
        print_message("3001 keys seen, 1 live: %zu entries in memory\n", journal_table_entries(j));
        assert_true(journal_table_entries(j) < 200); /* one compaction every ~85 keys */
        assert_string_equal(journal_original(j, JOURNAL_KIND_AFFINITY, "1:1:1"), "0-3");
        /* a key seen again after being freed starts anew */
        assert_int_equal(journal_before_write(j, JOURNAL_KIND_AFFINITY, "100:1000:5000", "1", "2"), 0);
        assert_string_equal(journal_original(j, JOURNAL_KIND_AFFINITY, "100:1000:5000"), "1");
        journal_free(j);
        assert_int_equal(journal_open(sd, &j), 0);
        assert_int_equal(journal_n_entries(j), 2);
        assert_int_equal(journal_last_values(j, JOURNAL_KIND_AFFINITY, "1:1:1", &before, &after), 1);
        assert_string_equal(after, "0");
        journal_free(j);
        sh("rm -rf '%s'", sd);
}

/* ---- kill -9 ---- */

static uint64_t rng_state;
static uint32_t rnd(void)
{
        rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
        return (uint32_t) (rng_state >> 33);
}

/* ready_fd gets one byte once the journal and the driver are set up, before the first write. */
static _Noreturn void child_loop(const char *root, const char *sd, uint64_t seed, int ready_fd)
{
        struct power_driver_config cfg = { .sysfs_root = root };
        struct power_driver *drv;
        struct journal *j;

        rng_state = seed;
        if (journal_open(sd, &j) < 0)
                _exit(2);
        cfg.journal = j;
        if (power_driver_new("sysfs", &cfg, &drv) < 0)
                _exit(3);
        if (write(ready_fd, "r", 1) != 1)
                _exit(4);
        static const char *const epp[] = { "performance", "balance_performance", "balance_power", "power" };
        for (;;) {
                unsigned cpu = rnd() % 2;
                switch (rnd() % 5) {
                case 0: {
                        struct power_perf_request req = { .flags = POWER_PERF_LEVEL, .level_permille = rnd() % 1001 };
                        (void) power_driver_set_perf(drv, cpu, &req);
                        break;
                }
                case 1: {
                        struct power_perf_request req = { .flags = POWER_PERF_EPP };
                        strcpy(req.epp, epp[rnd() % 4]);
                        (void) power_driver_set_perf(drv, cpu, &req);
                        break;
                }
                case 2: {
                        struct power_idle_constraint ic = { .deepest_state = (int) (rnd() % 4) - 1,
                                                            .latency_us = (int32_t) (rnd() % 300) - 1 };
                        (void) power_driver_enter_idle(drv, cpu, &ic);
                        break;
                }
                case 3: {
                        struct power_perf_request req = { .flags = POWER_PERF_MAX_KHZ,
                                                          .max_khz = 800000 + rnd() % 3000001 };
                        (void) power_driver_set_perf(drv, cpu, &req);
                        break;
                }
                case 4: {
                        struct power_perf_request req = { .flags = POWER_PERF_MIN_KHZ,
                                                          .min_khz = 800000 + rnd() % 1000000 };
                        (void) power_driver_set_perf(drv, cpu, &req);
                        break;
                }
                }
        }
}

static unsigned count_diffs(const char *a, const char *b)
{
        char cmd[1024];
        snprintf(cmd, sizeof(cmd), "diff -r -x '*.vp-tmp.*' '%s' '%s' >/dev/null", a, b);
        return system(cmd) == 0 ? 0 : 1;
}

/*
 * Children killed at random points, each followed by a restore.  The kill delay
 * counts from the moment the child has its journal and driver and is about to
 * write (it says so through a pipe), not from fork(), so a busy machine (or a
 * sanitizer build) does not turn every kill into one before the first record;
 * and if fewer than half of the first `iterations` kills still landed
 * after a journal record, or their restores put back no more than `iterations`
 * knobs, more are done (up to 4x, within 45 s) before that is judged, so the
 * checks measure what the runs exercised, not the machine's load.
 */
static void test_kill9(void **state)
{
        char root[300], pristine[300], sd[300], jp[400];
        unsigned iterations = 120, with_journal = 0, diffs = 0, total_restored = 0, total_torn = 0;
        unsigned total_unchanged = 0, restores_killed = 0, it;
        uint64_t seed = 0x5eed1234;
        nsec_t extra_deadline = now_ns() + 45 * NSEC_PER_SEC;

        path_of(root, sizeof(root), "k9-root");
        path_of(pristine, sizeof(pristine), "k9-pristine");
        path_of(sd, sizeof(sd), "k9-state");
        snprintf(jp, sizeof(jp), "%s/journal", sd);
        sh("cp -a '%s/sysfs-cpufreq/small-2cpu/sys' '%s' && cp -a '%s/sysfs-cpufreq/small-2cpu/sys' '%s'",
           TEST_DATA_DIR, root, TEST_DATA_DIR, pristine);

        rng_state = seed;
        for (it = 0; it < iterations ||
                     ((with_journal <= iterations / 2 || total_restored <= iterations) && it < 4 * iterations &&
                      now_ns() < extra_deadline);
             it++) {
                uint64_t child_seed = ((uint64_t) rnd() << 32) | rnd();
                /* 0..40 ms: from "killed before the first record" to many durable writes */
                long delay_us = (long) (rnd() % 40000);
                int ready[2];
                char c;
                assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
                pid_t pid = fork();
                assert_true(pid >= 0);
                if (pid == 0)
                        child_loop(root, sd, child_seed, ready[1]);
                close(ready[1]);
                struct pollfd pfd = { .fd = ready[0], .events = POLLIN };
                assert_int_equal(poll(&pfd, 1, 30000), 1); /* the child is set up (deadline 30 s) */
                assert_int_equal(read(ready[0], &c, 1), 1);
                close(ready[0]);
                struct timespec ts = { 0, delay_us * 1000 };
                nanosleep(&ts, NULL);
                kill(pid, SIGKILL);
                int status;
                assert_int_equal(waitpid(pid, &status, 0), pid);
                assert_true(WIFSIGNALED(status));

                struct restore_stats st;
                with_journal += exists(jp);
                if (it % 2 == 1 && exists(jp)) {
                        /* A restore killed midway (every other iteration): the next one must finish the job. */
                        long restore_delay_us = (long) (rnd() % 3000);
                        pid = fork();
                        assert_true(pid >= 0);
                        if (pid == 0)
                                _exit(journal_restore_all(sd, root, NULL, NULL) < 0 ? 1 : 0);
                        ts = (struct timespec) { 0, restore_delay_us * 1000 };
                        nanosleep(&ts, NULL);
                        kill(pid, SIGKILL);
                        assert_int_equal(waitpid(pid, &status, 0), pid);
                        restores_killed += WIFSIGNALED(status);
                }
                int r = journal_restore_all(sd, root, NULL, &st);
                assert_int_equal(r, 0);
                assert_int_equal(st.foreign, 0);
                assert_int_equal(st.failed, 0);
                total_restored += st.restored;
                total_torn += st.torn;
                total_unchanged += st.unchanged;
                assert_false(exists(jp));
                unsigned d = count_diffs(pristine, root);
                if (d)
                        sh("diff -r -x '*.vp-tmp.*' '%s' '%s' || true", pristine, root);
                diffs += d;
                assert_int_equal(d, 0);
                sh("find '%s' -name '*.vp-tmp.*' -delete", root);
        }
        printf("kill -9: %u iterations, %u left a journal, %u restores killed midway, %u knobs restored, "
               "%u already original, %u torn records, %u trees differing\n",
               it, with_journal, restores_killed, total_restored, total_unchanged, total_torn, diffs);
        assert_int_equal(diffs, 0);
        /* the test must have exercised something */
        assert_true(with_journal > iterations / 2);
        assert_true(total_restored > iterations);
}

static void bench_in(const char *base)
{
        char root[300], sd[300], rel[64], v[32];
        struct journal *j;
        struct restore_stats st;
        const unsigned n = 1000;
        nsec_t t0, t1, t2;

        snprintf(root, sizeof(root), "%s/bench-root", base);
        snprintf(sd, sizeof(sd), "%s/bench-state", base);
        mkdir(root, 0755);
        for (unsigned i = 0; i < n; i++) {
                snprintf(rel, sizeof(rel), "k%u", i);
                put(root, rel, "1000\n");
        }
        assert_int_equal(journal_open(sd, &j), 0);
        t0 = now_ns();
        for (unsigned i = 0; i < n; i++) {
                snprintf(rel, sizeof(rel), "k%u", i);
                snprintf(v, sizeof(v), "%u", i);
                assert_int_equal(journal_before_write(j, JOURNAL_KIND_SYSFS, rel, "1000\n", v), 0);
        }
        t1 = now_ns();
        journal_set_sync(j, false);
        for (unsigned i = 0; i < n; i++) {
                snprintf(rel, sizeof(rel), "k%u", i);
                snprintf(v, sizeof(v), "v%u", i);
                assert_int_equal(journal_before_write(j, JOURNAL_KIND_SYSFS, rel, "x", v), 0);
        }
        t2 = now_ns();
        journal_free(j);
        for (unsigned i = 0; i < n; i++) {
                snprintf(rel, sizeof(rel), "k%u", i);
                snprintf(v, sizeof(v), "v%u\n", i);
                put(root, rel, v);
        }
        nsec_t t3 = now_ns();
        assert_int_equal(journal_restore_all(sd, root, NULL, &st), 0);
        nsec_t t4 = now_ns();
        assert_int_equal(st.restored, n);
        printf("%s: journal record with fdatasync %.1f us, without sync %.2f us; "
               "restore of %u knobs (plain files, tmp+rename) %.1f ms\n",
               base, (double) (t1 - t0) / n / 1000.0, (double) (t2 - t1) / n / 1000.0, n,
               (double) (t4 - t3) / 1e6);
}

/* ---- numbers (printed, never asserted on timing) ---- */

static void test_bench(void **state)
{
        char shm[] = "/dev/shm/test-journal.XXXXXX";

        bench_in(tmpdir); /* ext4 here */
        /* tmpfs, like /run on a real host */
        if (mkdtemp(shm)) {
                bench_in(shm);
                sh("rm -rf '%s'", shm);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_roundtrip),
                cmocka_unit_test(test_foreign_gone_partial),
                cmocka_unit_test(test_unverified_taken_as_ours),
                cmocka_unit_test(test_torn_and_corrupt),
                cmocka_unit_test(test_corrupt_kept_aside),
                cmocka_unit_test(test_corrupt_notes),
                cmocka_unit_test(test_restore_order_clamp),
                cmocka_unit_test(test_escaping_and_kinds),
                cmocka_unit_test(test_compaction),
                cmocka_unit_test(test_rewrite_reopen_fails),
                cmocka_unit_test(test_compaction_frees_entries),
                cmocka_unit_test(test_kill9),
                cmocka_unit_test(test_bench),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
