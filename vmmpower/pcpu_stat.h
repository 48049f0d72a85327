/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>

#include "topology.h"
#include "util.h"

/*
 * Per-pCPU busy time (from <procfs>/stat, "cpuN" lines, USER_HZ ticks
 * converted to ns) and idle residency per cpuidle state (from
 * <sysfs>/devices/system/cpu/cpuN/cpuidle/stateK/time, us), sampled once per
 * control period with kept-open fds.
 */

struct pcpu_sample {
        uint64_t busy_ns;   /* user+nice+system+irq+softirq+steal */
        uint64_t idle_ns;   /* idle+iowait */
        uint64_t steal_ns;
        unsigned n_states;
        uint64_t state_time_us[TOPO_MAX_IDLE_STATES];
        uint64_t state_usage[TOPO_MAX_IDLE_STATES];
};

struct pcpu_load {          /* derived over the last period */
        double busy_ratio;  /* 0..1 */
        double steal_ratio;
        double state_residency[TOPO_MAX_IDLE_STATES]; /* share of wall time in each state, 0..1 */
        uint64_t state_wakeups[TOPO_MAX_IDLE_STATES]; /* usage delta */
};

struct pcpu_stat;

int pcpu_stat_new(const struct topology *t, const char *procfs_root, const char *sysfs_root,
                  struct pcpu_stat **ret);
void pcpu_stat_free(struct pcpu_stat *ps);
/* Read all counters now; computes loads against the previous sample. */
int pcpu_stat_sample(struct pcpu_stat *ps, nsec_t now);
/* Last derived load of cpu (NULL before two samples or for an offline CPU). */
const struct pcpu_load *pcpu_stat_load(const struct pcpu_stat *ps, unsigned cpu);
const struct pcpu_sample *pcpu_stat_raw(const struct pcpu_stat *ps, unsigned cpu);

/* Parse one "cpuN ..." line of /proc/stat.  Returns cpu number, -1 for the
 * aggregate "cpu" line, or -EINVAL. */
int pcpu_parse_stat_line(const char *line, uint64_t ticks[10]);
