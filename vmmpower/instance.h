/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <sys/types.h>

/*
 * One daemon per state directory.  <state_dir>/vmmpowerd.pid is flock()ed
 * by the daemon for its whole life (every mode: applying, Apply = no,
 * --dry-run, --once) and holds its pid.  Taken before the journal is
 * restored and before the control socket is bound, so that a second daemon
 * on the same configuration exits before it can touch a knob, the control
 * socket or a guest's hint channel.  Daemons with different state
 * directories (tests run several) do not see each other's lock.
 *
 * This is not the journal's lock (journal.h: the state directory itself is
 * flock()ed while the journal is open); the two do not conflict.
 */

#define INSTANCE_LOCK_FILE "vmmpowerd.pid"

/*
 * Take the lock: creates state_dir (0755) if missing.  Returns the locked fd
 * (>= 0), or -EBUSY when another process holds it (*ret_owner = its pid as
 * written in the file, 0 if not known yet), or another -errno.
 */
int instance_lock(const char *state_dir, pid_t *ret_owner);
/* Write this process's pid into the lock file (again, after daemonizing). */
int instance_lock_write_pid(int fd);
/* Remove the lock file and close fd (fd < 0: nothing).  The lock ends with the close. */
void instance_unlock(int fd, const char *state_dir);
