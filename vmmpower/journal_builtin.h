/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "journal.h"

/*
 * Restore through the built-in knob I/O: sysfs knobs through the sysfs power
 * driver, thread affinity and libvirt vCPU pins through the actuator.  Apart
 * from journal.h so that the journal itself depends on neither: it is handed
 * the knob I/O (struct journal_knob_io) by whoever restores.
 */

/*
 * CLI entry point for `vmmpowerd --restore` and start-after-crash: restore
 * the journal under state_dir (no journal: 0, stats zeroed), sysfs knobs
 * under sysfs_root, affinity through sched_setaffinity, vCPU pins through
 * libvirt_conn (a virConnectPtr; NULL: vCPU pin entries are kept).
 * What the load found is said first (journal_report_load).  Returns the
 * number of entries kept or -errno (-EBUSY: a running daemon holds the
 * journal).
 */
int journal_restore_all(const char *state_dir, const char *sysfs_root, void *libvirt_conn,
                        struct restore_stats *ret);

/*
 * The same on a journal this process has open (the daemon on TERM: its
 * journal holds the state-dir lock, so journal_restore_all() would get
 * -EBUSY).  The journal stays usable afterwards.
 */
int journal_restore_builtin(struct journal *j, const char *sysfs_root, void *libvirt_conn,
                            struct restore_stats *ret);

/*
 * journal_open() of the journal under state_dir if its file exists; 0 with *ret = NULL if
 * not (nothing to restore).
 */
int journal_open_existing(const char *state_dir, struct journal **ret);

/*
 * For the programs that open a journal (vmmpowerd's restore, the applier,
 * vmmpower-calibrate): say at warning level what journal_open() found (corrupt records,
 * the copy kept aside, every knob a corrupt record names, with its original as far as it
 * reads); the journal itself logs only at debug level.  (A torn last record, the trace of
 * a crash, is only counted: struct journal_load_stats, struct restore_stats.)
 */
void journal_report_load(const struct journal *j, const char *state_dir);
