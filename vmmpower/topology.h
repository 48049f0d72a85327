/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cpuset.h"

/*
 * Host topology read from sysfs (every path below a configurable root, so
 * tests run on recorded trees under tests/data/topology/).
 *
 * A missing file is data, not an error: each field documents the default used
 * when the kernel does not publish it.  A file that exists but cannot be read
 * or parsed is an error (-errno / -EINVAL) naming the path.
 */

#define TOPO_NAME_MAX 32
#define TOPO_MAX_IDLE_STATES 16
#define TOPO_MAX_FREQS 64

struct topo_idle_state {
        char name[TOPO_NAME_MAX];     /* cpuidle stateN/name */
        char desc[64];                /* stateN/desc, "" if absent */
        uint32_t exit_latency_us;     /* stateN/latency */
        uint32_t target_residency_us; /* stateN/residency */
        bool disabled;                /* stateN/disable (per CPU; copy of cpu's) */
        bool has_power;               /* stateN/power present and != 0 */
        uint32_t power_mw;            /* stateN/power; kernel usually publishes 0 */
};

struct topo_cpufreq_policy {
        unsigned id;                     /* policyN */
        cpuset_t related_cpus;           /* related_cpus (frequency domain) */
        cpuset_t affected_cpus;          /* affected_cpus; default related_cpus */
        char driver[TOPO_NAME_MAX];      /* scaling_driver */
        char governor[TOPO_NAME_MAX];    /* scaling_governor */
        uint32_t cpuinfo_min_khz, cpuinfo_max_khz; /* hardware limits */
        uint32_t scaling_min_khz, scaling_max_khz; /* current limits */
        uint32_t base_khz;               /* base_frequency; 0 if absent */
        unsigned n_freqs;                /* scaling_available_frequencies, ascending; 0 if absent */
        uint32_t freqs_khz[TOPO_MAX_FREQS];
        bool has_epp;                    /* energy_performance_preference present */
        char epp[TOPO_NAME_MAX];
        char available_epp[256];         /* energy_performance_available_preferences */
        char available_governors[256];
};

struct topo_cpu {
        unsigned id;
        bool present, online;  /* cpu0 has no "online" file: online by definition */
        int package_id;        /* topology/physical_package_id; -1 if absent */
        int die_id;            /* topology/die_id; default 0 */
        int cluster_id;        /* topology/cluster_id; default -1 */
        int core_id;           /* topology/core_id; default = cpu id */
        int llc_id;            /* index of the LLC group (first CPU of cache index3 shared_cpu_list,
                                  or of the highest-level cache present); -1 if no cache info */
        int node;              /* NUMA node (nodeN link in cpuN/ or node/nodeN/cpulist); default 0 */
        int policy;            /* index into topology.policies, -1 if no cpufreq */
        cpuset_t smt_siblings; /* topology/thread_siblings_list (core_cpus_list); default {id} */
        cpuset_t core_siblings;/* topology/package_cpus_list (core_siblings_list) */
        cpuset_t die_cpus;     /* topology/die_cpus_list; default = package */
        cpuset_t llc_cpus;     /* cache/index3/shared_cpu_list (or highest level); default {id} */
        unsigned n_idle_states;
        struct topo_idle_state idle[TOPO_MAX_IDLE_STATES];
};

struct topology {
        char root[256];             /* sysfs root it was read from ("" = "/") */
        unsigned n_cpus;            /* entries in cpus[] = highest possible CPU + 1 */
        struct topo_cpu *cpus;      /* indexed by CPU id */
        cpuset_t online, present, possible;
        unsigned n_packages, n_dies, n_llcs, n_cores, n_nodes;
        bool smt_active;            /* devices/system/cpu/smt/active; default: any core has >1 thread */
        char cpuidle_driver[TOPO_NAME_MAX];   /* cpuidle/current_driver; "" if absent */
        char cpuidle_governor[TOPO_NAME_MAX]; /* cpuidle/current_governor(_ro); "" if absent */
        unsigned n_policies;
        struct topo_cpufreq_policy *policies;
};

/*
 * Read the topology below sysfs_root (NULL or "" = real /sys; otherwise the
 * directory that stands for /sys, e.g. tests/data/topology/xeon-spr-2s/sys).
 */
int topology_load(const char *sysfs_root, struct topology **ret);
void topology_free(struct topology *t);
/* Stable text dump used by golden tests and `vmmpowerctl cpus --topology`. */
void topology_dump(const struct topology *t, FILE *f);
