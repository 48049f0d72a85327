/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Restore through the built-in knob backends (sysfs, thread affinity, libvirt
 * vcpupin; see journal_builtin.h).  Apart from journal.c because the vcpupin backend
 * needs libvirt, which the simulator (it links journal.c through
 * power_driver_sysfs.c) does not link.
 */
#include <errno.h>
#include <limits.h>
#include <unistd.h>

#include "actuator.h"
#include "journal.h"
#include "journal_builtin.h"
#include "log.h"
#include "power_driver.h"
#include "util.h"

static int sysfs_io_read(void *userdata, const char *key, char *buf, size_t size)
{
        return power_driver_sysfs_knob_read(userdata, key, buf, size);
}

static int sysfs_io_write(void *userdata, const char *key, const char *value)
{
        return power_driver_sysfs_knob_write(userdata, key, value);
}

void journal_report_load(const struct journal *j, const char *state_dir)
{
        struct journal_load_stats ls;
        const char *copy = journal_corrupt_file(j);
        const struct journal_corrupt_note *notes;
        size_t n_notes = journal_corrupt_notes(j, &notes);

        journal_get_load_stats(j, &ls);
        if (ls.corrupt && copy)
                log_warning("Journal %s: %u corrupt record(s) skipped, %u good record(s) kept; the journal as it was "
                            "is kept as %s/%s for inspection.", state_dir, ls.corrupt, ls.records, state_dir, copy);
        else if (ls.corrupt)
                log_warning("Journal %s: %u corrupt record(s) skipped, %u good record(s) kept; no copy of the journal "
                            "could be kept.", state_dir, ls.corrupt, ls.records);
        for (size_t i = 0; i < n_notes; i++)
                if (notes[i].salvaged)
                        log_warning("Journal %s: a corrupt record for %s %s, which has good records: its original is "
                                    "kept, the value the corrupt record wrote is taken as ours", state_dir,
                                    journal_kind_to_string(notes[i].kind), notes[i].key);
                else
                        log_warning("Journal %s: a corrupt record names %s %s, original \"%s\" as far as it reads "
                                    "(unverified, not restored from it)", state_dir,
                                    journal_kind_to_string(notes[i].kind), notes[i].key, notes[i].original);
        if (ls.corrupt_keys > n_notes)
                log_warning("Journal %s: %u more knob(s) named by corrupt records (see the copy).", state_dir,
                            ls.corrupt_keys - (unsigned) n_notes);
}

int journal_restore_builtin(struct journal *j, const char *sysfs_root, void *libvirt_conn,
                            struct restore_stats *ret)
{
        struct journal_knob_io io[_JOURNAL_KIND_MAX] = {
                [JOURNAL_KIND_SYSFS] = { sysfs_io_read, sysfs_io_write, (void *) sysfs_root },
        };

        actuator_affinity_knob_io(&io[JOURNAL_KIND_AFFINITY]);
        actuator_vcpupin_knob_io(libvirt_conn, &io[JOURNAL_KIND_VCPUPIN]);
        return journal_restore(j, io, ret);
}

int journal_open_existing(const char *state_dir, struct journal **ret)
{
        char path[PATH_MAX];
        int r;

        r = path_printf(path, sizeof(path), "%s/%s", state_dir, JOURNAL_FILE);
        if (r < 0)
                return r;
        if (access(path, F_OK) < 0) {
                if (errno != ENOENT)
                        return -errno;
                *ret = NULL;
                return 0;
        }
        return journal_open(state_dir, ret);
}

int journal_restore_all(const char *state_dir, const char *sysfs_root, void *libvirt_conn,
                        struct restore_stats *ret)
{
        struct journal *j = NULL;
        int r;

        r = journal_open_existing(state_dir, &j);
        if (r < 0)
                return r;
        if (!j) {
                if (ret)
                        *ret = (struct restore_stats) { 0 };
                return 0;
        }
        journal_report_load(j, state_dir);
        r = journal_restore_builtin(j, sysfs_root, libvirt_conn, ret);
        journal_free(j);
        return r;
}
