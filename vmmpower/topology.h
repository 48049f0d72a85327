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
 * when the kernel does not publish it (also listed in docs/topology.md).  A
 * file that exists but cannot be read or parsed is an error (-errno /
 * -EINVAL) logged with its path; a CPU number >= VP_MAX_CPUS is -E2BIG.
 * All paths below are relative to the sysfs root; "cpu/" means
 * devices/system/cpu/, "cpuN/" devices/system/cpu/cpuN/.
 */

#define TOPO_NAME_MAX 32
#define TOPO_MAX_IDLE_STATES 16
#define TOPO_MAX_FREQS 64

struct topo_idle_state {
        char name[TOPO_NAME_MAX];     /* cpuN/cpuidle/stateK/name; default "stateK" */
        char desc[64];                /* stateK/desc, "" if absent */
        uint32_t exit_latency_us;     /* stateK/latency; the state exists iff this file does
                                         (states are read from state0 up to the first gap) */
        uint32_t target_residency_us; /* stateK/residency; default 0 */
        bool disabled;                /* stateK/disable (per CPU); default false */
        bool has_power;               /* stateK/power present and neither 0 nor 4294967295
                                         (the kernel's -1 = unknown, used by POLL) */
        uint32_t power_mw;            /* stateK/power when has_power, else 0; kernel usually publishes 0 */
};

struct topo_cpufreq_policy {
        /* cpu/cpufreq/policyN/...; policies[] sorted by N.  Strings default to "",
         * numbers to 0 when the file is absent. */
        unsigned id;                     /* policyN */
        cpuset_t related_cpus;           /* related_cpus (frequency domain); default {N} */
        cpuset_t affected_cpus;          /* affected_cpus; default related_cpus */
        char driver[TOPO_NAME_MAX];      /* scaling_driver */
        char governor[TOPO_NAME_MAX];    /* scaling_governor */
        uint32_t cpuinfo_min_khz, cpuinfo_max_khz; /* cpuinfo_{min,max}_freq: hardware limits */
        uint32_t scaling_min_khz, scaling_max_khz; /* scaling_{min,max}_freq: current limits */
        uint32_t base_khz;               /* base_frequency; 0 if absent */
        unsigned n_freqs;                /* scaling_available_frequencies, sorted ascending; 0 if absent
                                            (intel_pstate, amd-pstate publish none); > TOPO_MAX_FREQS: -EINVAL */
        uint32_t freqs_khz[TOPO_MAX_FREQS];
        bool has_epp;                    /* energy_performance_preference present */
        char epp[TOPO_NAME_MAX];         /* its value, "" if absent */
        char available_epp[256];         /* energy_performance_available_preferences */
        char available_governors[256];   /* scaling_available_governors */
};

struct topo_cpu {
        unsigned id;
        bool present;          /* id in cpu/present */
        bool online;           /* cpuN/online if present (cpu0 usually has none), else id in
                                  cpu/online */
        /* Offline CPUs publish no topology/ or cache/ on current kernels: they get
         * the defaults below. */
        int package_id;        /* topology/physical_package_id; -1 if absent */
        int die_id;            /* topology/die_id; default 0 */
        int cluster_id;        /* topology/cluster_id as published (x86 without cluster info:
                                  65535); default -1 */
        int core_id;           /* topology/core_id; default = cpu id */
        int llc_id;            /* first CPU of llc_cpus when any cache info exists, else -1 */
        int node;              /* NUMA node: N of the devices/system/node/nodeN/cpulist that
                                  contains the CPU; default 0 */
        int policy;            /* index into topology.policies of the policy whose related_cpus
                                  contain the CPU, -1 if none (no cpufreq) */
        cpuset_t smt_siblings; /* topology/thread_siblings_list, else core_cpus_list; default {id} */
        cpuset_t core_siblings;/* topology/core_siblings_list, else package_cpus_list; default the
                                  CPUs with the same package_id ({id} if that is -1) */
        cpuset_t die_cpus;     /* topology/die_cpus_list; default = core_siblings */
        cpuset_t llc_cpus;     /* cache/indexK/shared_cpu_list of the highest-level cache whose type
                                  is not Instruction (normally index3 = L3); default {id} */
        unsigned n_idle_states;
        struct topo_idle_state idle[TOPO_MAX_IDLE_STATES];
};

struct topology {
        char root[256];             /* sysfs root it was read from ("/sys" for the real one) */
        unsigned n_cpus;            /* entries in cpus[] = highest possible/present/online CPU + 1 */
        struct topo_cpu *cpus;      /* indexed by CPU id */
        /* cpu/possible, cpu/present: default the cpuN directories that exist.
         * online: cpu/online (default: present minus CPUs whose cpuN/online is 0),
         * then corrected by each cpuN/online. */
        cpuset_t online, present, possible;
        /* Distinct values over ONLINE CPUs: packages = package_id, dies = (package, die),
         * llcs = llc_id (CPUs without cache info not counted: 0 if none publish it),
         * cores = (package, die, core_id), nodes = node. */
        unsigned n_packages, n_dies, n_llcs, n_cores, n_nodes;
        bool smt_active;            /* cpu/smt/active; default: an online CPU has >1 SMT sibling */
        char cpuidle_driver[TOPO_NAME_MAX];   /* cpu/cpuidle/current_driver; "" if absent */
        char cpuidle_governor[TOPO_NAME_MAX]; /* cpu/cpuidle/current_governor, else current_governor_ro;
                                                 "" if absent */
        unsigned n_policies;
        struct topo_cpufreq_policy *policies;
        /* Online CPUs whose SMT sibling list disagreed with a sibling's (cpu1 "1,3" but cpu3 "3": a
         * CPU went on- or offline while the lists were read, or a broken tree): each one's
         * smt_siblings is reduced to itself, and the load logs a warning naming them.  Empty normally. */
        cpuset_t smt_inconsistent;
        bool synthetic;             /* made by topology_synthetic(): its cpufreq and cpuidle figures stand
                                       for no real host (em_host_new() does not hold a model to them) */
};

/*
 * Read the topology below sysfs_root (NULL or "" = real /sys; otherwise the
 * directory that stands for /sys, e.g. tests/data/topology/xeon-spr-2s/sys).
 */
int topology_load(const char *sysfs_root, struct topology **ret);
void topology_free(struct topology *t);
/*
 * The online CPUs below sysfs_root as topology_load() starts from them:
 * cpu/online, or when that is absent the present CPUs whose cpuN/online is
 * not "0".  One small file on a real host: cheap enough to ask every control
 * period whether the topology read earlier still holds (CPU hotplug).  Not
 * corrected by each cpuN/online as topology_load() does: compare its result
 * with an earlier result of its own, not with topology.online.  0 or -errno
 * (logged at debug).
 */
int topology_read_online(const char *sysfs_root, cpuset_t *ret);
/*
 * Stable text dump used by golden tests and `vmmpowerctl cpus --topology`:
 * header lines, one "cpu" line per CPU, one "idle" line per CPU and idle
 * state, one "policy" line per cpufreq policy (format in docs/topology.md).
 * Does not print the root, so recorded trees dump identically anywhere.
 */
void topology_dump(const struct topology *t, FILE *f);

/*
 * A synthetic Xeon-like host without sysfs: n_pkgs packages of per_pkg cores
 * with 2 SMT threads (CPU i and i + cores are siblings), LLCs of 8 cores,
 * one intel_pstate policy per CPU (800..3800 MHz, base 2000), intel_idle
 * POLL/C1/C1E/C6 (spr_cstates).  root is "synth:PxC".  -EINVAL, -ENOMEM.
 */
int topology_synthetic(unsigned n_pkgs, unsigned per_pkg, struct topology **ret);
