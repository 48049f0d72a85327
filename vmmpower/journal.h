/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * The journal: every host knob vmmpowerd changes is recorded here BEFORE
 * it is written, so that the host can be put back exactly as it was on
 * exit, on `vmmpowerd --restore`, and at start after a crash.
 *
 * One append-only file <state_dir>/journal (default /run/vmmpower/journal).
 * Each record is one line "<len> <crc32> <payload>\n" and carries the full
 * state of one knob: kind, key, original value, the value the knob held
 * just before our write ("before") and the value we are writing ("after").
 * The record is fdatasync()ed before journal_before_write() returns, so when
 * the caller then writes the knob, the journal already knows the knob may
 * hold "before" (write not done), "after", or whatever the kernel made of
 * "after" (cpufreq clamps a limit, a cpuset narrows a mask): the record is
 * "unverified" until the caller reads the knob back and journal_note_actual()
 * records what it holds.  The last record for a key wins.  A torn last record
 * (kill -9 / power loss mid-append) fails its length or CRC check and is
 * ignored and cut off.  Format and rationale: docs/power-driver.md.
 *
 * Restore, per knob: current value == after or before -> write back the
 * original (read back to verify); == original -> nothing to do; anything else
 * -> someone else changed it: left alone, counted, unless the last record is
 * unverified (killed between the write and its read-back): then it is taken
 * as ours and the original written back; gone (-ENOENT, -ESRCH: CPU offline,
 * thread exited, tid reused, domain stopped) -> counted and dropped.
 * When every knob is handled the journal file is removed; otherwise it is
 * rewritten atomically with just the knobs that still need restoring.
 */

enum journal_kind {
        JOURNAL_KIND_SYSFS,    /* key: path relative to the sysfs root */
        JOURNAL_KIND_AFFINITY, /* key: "pid:tid:starttime"; value: cpulist */
        JOURNAL_KIND_VCPUPIN,  /* key: "uuid:domid:vcpu" (vcpu "emulator": the emulator pin); value: cpulist */
        _JOURNAL_KIND_MAX,
};

const char *journal_kind_to_string(enum journal_kind k);

#define JOURNAL_VALUE_MAX 16384 /* longest value: a worst-case cpulist of 4096 CPUs is ~10 KB */
#define JOURNAL_KEY_MAX 1024
#define JOURNAL_FILE "journal" /* in the state directory */

struct journal;

/*
 * Open the journal under state_dir (created 0700 if missing).  An existing
 * journal is loaded (a previous run's originals are kept: they are the
 * values to restore, not what the knobs hold now); a torn tail is cut off.
 * The file itself is only created by the first record, so "a journal file
 * exists" means "some knob may need restoring".  The state directory is
 * flock()ed while the journal is open: -EBUSY if another process (a running
 * daemon) holds it.
 */
int journal_open(const char *state_dir, struct journal **ret);
struct journal *journal_free(struct journal *j); /* closes; never restores */

/* true (default): fdatasync each record; false: no sync (benchmarks, sim). */
void journal_set_sync(struct journal *j, bool sync);

/*
 * Record that we are about to write `after` to knob (kind, key) which holds
 * `current` now (raw bytes as read, trailing newline included).  The first
 * time a key is seen, `current` becomes its original.  Returns 0 once the
 * record is durable; -errno otherwise, and then the caller must NOT write.
 * The record is unverified until journal_note_actual().
 */
int journal_before_write(struct journal *j, enum journal_kind kind, const char *key,
                         const char *current, const char *after);

/*
 * The write was made and the knob reads back `actual`: the record becomes
 * verified; a value other than `after` (cpufreq clamped it) is recorded as a
 * value we produced, so restore still recognises the knob as ours.  Written
 * (not fdatasync()ed: see journal.c).  -errno if it cannot be written: the
 * knob then holds a value the journal may not know, and the caller must put
 * back the `current` it journaled (the record stays unverified, so restore
 * takes whatever the knob holds as ours).
 */
int journal_note_actual(struct journal *j, enum journal_kind kind, const char *key,
                        const char *actual);

/* The knob is gone for good (thread exited, domain stopped, pin put back): forget it (appends a drop record). */
int journal_forget(struct journal *j, enum journal_kind kind, const char *key);

/* true if the key has a live record whose write was never read back (journal_note_actual()). */
bool journal_unverified(const struct journal *j, enum journal_kind kind, const char *key);

/* Records that could not be written (journal_before_write(), journal_note_actual(), journal_forget()). */
unsigned journal_error_count(const struct journal *j);

/* The original recorded for a key, or NULL. */
const char *journal_original(const struct journal *j, enum journal_kind kind, const char *key);
/*
 * The two values the last record for a key says the knob may hold: "before"
 * (our write was not made or failed) and "after" (what we wrote, or what the
 * kernel made of it; until the read-back is recorded, journal_unverified(),
 * possibly something else).  1 and both set if the key has a live record, 0 if not.
 */
int journal_last_values(const struct journal *j, enum journal_kind kind, const char *key,
                        const char **ret_before, const char **ret_after);
size_t journal_n_entries(const struct journal *j);

struct journal_load_stats {
        unsigned records;
        unsigned torn;    /* incomplete last record (cut off) */
        unsigned corrupt; /* complete line with bad length/CRC/syntax (skipped) */
        unsigned corrupt_keys; /* corrupt records whose kind and key still read (logged) */
};
void journal_get_load_stats(const struct journal *j, struct journal_load_stats *ret);

/*
 * Corrupt records in the middle of the journal (not a torn tail): the file as
 * it was is copied to <state_dir>/journal.corrupt-<UTC time> (never removed
 * by vmmpower: evidence for the operator), a warning names it and every knob
 * a corrupt record still names, and the journal is rewritten with the good
 * records, each keeping its original.  The name of that copy made by this
 * open, or NULL.
 */
#define JOURNAL_CORRUPT_PREFIX "journal.corrupt-"
const char *journal_corrupt_file(const struct journal *j);

/*
 * The corrupt records of this open that still name a knob, for the caller to
 * report (the journal logs them at debug level only); the first
 * JOURNAL_CORRUPT_NOTES_MAX (load stats count all).  Valid until journal_free().
 */
#define JOURNAL_CORRUPT_NOTES_MAX 64
struct journal_corrupt_note {
        enum journal_kind kind;
        char key[256];      /* escaped */
        char original[256]; /* escaped, as far as it reads, or "(unreadable)"; "" when salvaged */
        bool salvaged;      /* the knob has good records: their original is kept, and the value
                             * the corrupt record wrote counts as ours */
};
size_t journal_corrupt_notes(const struct journal *j, const struct journal_corrupt_note **ret);
/*
 * Copies of corrupt journals in state_dir (made by any run): their number
 * (0 when the directory does not exist) or -errno; the newest name in
 * ret_newest (may be NULL).
 */
int journal_count_corrupt_files(const char *state_dir, char *ret_newest, size_t size);

/*
 * How restore reads and writes a kind of knob.  read() returns the length
 * (value NUL-terminated in buf, raw) or -errno, -ENOENT/-ESRCH meaning the
 * knob is gone.  write() returns 0 or -errno.  A NULL read means "cannot
 * restore this kind now" (e.g. no libvirt connection): entries are kept.
 */
struct journal_knob_io {
        int (*read)(void *userdata, const char *key, char *buf, size_t size);
        int (*write)(void *userdata, const char *key, const char *value);
        void *userdata;
};

struct restore_stats {
        unsigned restored;  /* written back to the original, read back equal */
        unsigned unchanged; /* already held the original */
        unsigned foreign;   /* changed by someone else since: left alone */
        unsigned gone;      /* knob no longer exists: dropped */
        unsigned failed;    /* write/read-back failed: kept in the journal */
        unsigned skipped;   /* no way to restore this kind now: kept */
        unsigned torn;      /* torn/corrupt records ignored when loading */
        unsigned corrupt;   /* of which corrupt in the middle (the file was kept aside) */
        char corrupt_file[64]; /* that copy's name in the state directory, "" = none */
};

/*
 * Restore every knob; see the comment at the top.  Entries that were
 * handled are removed; the file is removed when none remain, else rewritten
 * atomically.  Returns the number of entries kept (0 = complete) or -errno.
 */
int journal_restore(struct journal *j, const struct journal_knob_io io[_JOURNAL_KIND_MAX],
                    struct restore_stats *ret);

/* Exposed for tests. */
unsigned journal_crc32(const void *data, size_t len);
/* Entries held in memory, live or not (those no longer live are freed when the file is compacted). */
size_t journal_table_entries(const struct journal *j);
