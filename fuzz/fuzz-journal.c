/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for the journal loader (journal.h): the input is the
 * journal file <state_dir>/journal as a crash, a torn write or a damaged disk
 * could leave it.  It is opened with journal_open(), restored with
 * journal_restore() through an in-memory knob store (per key, by a hash of the
 * key: the knob is gone, fails to read, holds the journal's original, or holds
 * some other value; writes are remembered and read back), and the journal
 * left behind is opened again.  Checks: an error is a negative errno and
 * leaves nothing open; the journal the restore leaves has no torn or corrupt
 * record and exactly as many entries as journal_restore() said it kept.
 * Seeds: fuzz/corpus/journal/ (files written by journal_before_write()).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz-tree.h"
#include "journal.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define STORE_MAX 64

static struct {
        char key[JOURNAL_KEY_MAX + 1];
        char value[256];
} store[STORE_MAX];
static unsigned n_store;
static struct journal *cur;
static enum journal_kind cur_kind[_JOURNAL_KIND_MAX] = { JOURNAL_KIND_SYSFS, JOURNAL_KIND_AFFINITY,
                                                         JOURNAL_KIND_VCPUPIN };

static int io_read(void *userdata, const char *key, char *buf, size_t size)
{
        enum journal_kind kind = *(const enum journal_kind *) userdata;
        const char *v;
        unsigned h = journal_crc32(key, strlen(key));

        for (unsigned i = 0; i < n_store; i++)
                if (strcmp(store[i].key, key) == 0) {
                        v = store[i].value;
                        goto out;
                }
        switch (h % 5) {
        case 0:
                return -ENOENT;
        case 1:
                return -EIO;
        case 2:
                v = journal_original(cur, kind, key);
                if (!v)
                        v = "";
                break;
        default:
                v = h & 8 ? "someone-else\n" : "1000000\n";
        }
out:
        if (strlen(v) + 1 > size)
                return -EFBIG;
        strcpy(buf, v);
        return (int) strlen(v);
}

static int io_write(void *userdata, const char *key, const char *value)
{
        unsigned h = journal_crc32(key, strlen(key));
        unsigned i;

        (void) userdata;
        if (h % 7 == 6)
                return -EBUSY;
        for (i = 0; i < n_store; i++)
                if (strcmp(store[i].key, key) == 0)
                        break;
        if (i == n_store) {
                if (n_store == STORE_MAX || strlen(key) > JOURNAL_KEY_MAX)
                        return -ENOSPC;
                n_store++;
        }
        snprintf(store[i].key, sizeof(store[i].key), "%s", key);
        snprintf(store[i].value, sizeof(store[i].value), "%s", value);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct journal_knob_io io[_JOURNAL_KIND_MAX];
        struct journal_load_stats ls;
        struct restore_stats st;
        struct journal *j = NULL;
        char dir[512], path[600];
        int fd, r, kept;

        if (size > 256 * 1024)
                return 0;
        log_set_max_level((enum log_level) 0);
        snprintf(dir, sizeof(dir), "%s/state", fuzz_tree_base_dir());
        fuzz_tree_rm(dir);
        if (mkdir(dir, 0700) < 0)
                abort();
        snprintf(path, sizeof(path), "%s/journal", dir);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || (size > 0 && write(fd, data, size) != (ssize_t) size))
                abort();
        close(fd);

        r = journal_open(dir, &j);
        if (r < 0) {
                if (j || r < -4095)
                        abort();
                return 0;
        }
        journal_set_sync(j, false);
        n_store = 0;
        cur = j;
        for (int k = 0; k < _JOURNAL_KIND_MAX; k++)
                io[k] = (struct journal_knob_io) { .read = io_read, .write = io_write, .userdata = &cur_kind[k] };
        kept = journal_restore(j, io, &st);
        journal_free(j);
        cur = NULL;
        if (kept < 0)
                return 0;

        j = NULL;
        if (journal_open(dir, &j) < 0)
                abort(); /* what restore left must load */
        journal_get_load_stats(j, &ls);
        if (ls.torn || ls.corrupt || journal_n_entries(j) != (size_t) kept)
                abort();
        journal_free(j);
        return 0;
}
