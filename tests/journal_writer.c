/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * journal-writer: changes a host knob through the journal and exits WITHOUT
 * restoring, as a daemon killed with -9 would.  For the integration tests of
 * `vmmpowerd --restore` and of the restore at start-up after a crash.
 *
 *   journal-writer STATE_DIR pin PID TID CPULIST
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "actuator.h"
#include "cpuset.h"
#include "journal.h"
#include "util.h"

int main(int argc, char *argv[])
{
        struct journal *j = NULL;
        uint64_t starttime;
        cpuset_t cpus;
        int pid, tid, r;

        if (argc != 6 || strcmp(argv[2], "pin") != 0 || parse_int(argv[3], &pid) < 0 ||
            parse_int(argv[4], &tid) < 0 || cpuset_parse_list(argv[5], &cpus) < 0) {
                fprintf(stderr, "usage: journal-writer STATE_DIR pin PID TID CPULIST\n");
                return 2;
        }
        r = journal_open(argv[1], &j);
        if (r < 0) {
                fprintf(stderr, "journal_open: %s\n", strerror(-r));
                return 1;
        }
        r = actuator_thread_starttime(pid, tid, &starttime);
        if (r >= 0)
                r = actuator_pin_thread(j, pid, tid, starttime, &cpus);
        if (r < 0) {
                fprintf(stderr, "pin: %s\n", strerror(-r));
                return 1;
        }
        _exit(0); /* no journal_free, no restore: a crash */
}
