/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>

#include "power_driver.h"

/*
 * Coexistence with the host's other tuners (docs/coexistence.md).
 *
 * Terms.  A *tuner* is another program that writes the knobs vmmpower
 * writes: tuned, power-profiles-daemon, intel_lpmd, auto-cpufreq, a running
 * cpupower, and thermald (which caps scaling_max_freq when the host runs
 * hot).  A knob is *away from its default* when it holds something the
 * kernel does not put there by itself, i.e. someone set it:
 *
 *   cpufreq  scaling_governor  not the kernel's default: "powersave" under a
 *                              setpolicy driver (intel_pstate, amd-pstate-epp,
 *                              which start in powersave), else "schedutil"
 *                              (Debian's CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL=y)
 *            scaling_max_freq  below cpuinfo_max_freq
 *            scaling_min_freq  above cpuinfo_min_freq
 *   cpuidle  stateN/disable    1 (the default is 0; some drivers disable a
 *                              state at boot themselves, e.g. intel_idle's C1E)
 *   PM QoS   power/pm_qos_resume_latency_us  not "0" (the kernel's "no
 *                              constraint"; "n/a" = no latency tolerated)
 *
 * energy_performance_preference has no kernel default (firmware sets it at
 * boot) and is not judged; halt_poll_ns is not judged either (vmmpowerd
 * does not write it).
 *
 * The check runs at start and at reload, after the journal of a previous run
 * was restored (so the knobs hold the host's own values, not ours), and
 * decides per finding (enum coexist_mode, [Host] OtherTuners):
 *
 *   coexist (default)  every knob away from its default is *foreign from the
 *                      start*: the sysfs backend never writes it (a
 *                      non-default governor makes the policy's
 *                      scaling_min/max_freq and EPP foreign); a running tuner
 *                      makes every knob of the classes it writes foreign
 *                      (tuned: cpufreq, cpuidle, PM QoS; power-profiles-daemon,
 *                      intel_lpmd, auto-cpufreq: cpufreq; cpupower: cpufreq,
 *                      cpuidle; thermald: none up front, a cap it lowers is
 *                      found foreign at our next write).  vCPU placement goes on.
 *   refuse             a running tuner (thermald excepted) or a cpufreq or PM
 *                      QoS knob away from its default is an error: the daemon
 *                      does not start, a reload fails and keeps the running
 *                      configuration.  A disabled cpuidle state never refuses
 *                      (drivers disable states by default); it is foreign.
 *
 * Library code: scans and returns, never logs above debug; the daemon says it
 * once (coexist_log()).
 */

enum coexist_mode {
        COEXIST_COEXIST = 0,
        COEXIST_REFUSE,
        _COEXIST_MODE_MAX,
};

/* Inline: the configuration parser (in vmmpowerctl's objects too) needs only these. */
static inline const char *coexist_mode_to_string(enum coexist_mode m)
{
        return m == COEXIST_REFUSE ? "refuse" : m == COEXIST_COEXIST ? "coexist" : "?";
}

static inline int coexist_mode_from_string(const char *s, enum coexist_mode *ret)
{
        if (strcmp(s, "coexist") == 0)
                *ret = COEXIST_COEXIST;
        else if (strcmp(s, "refuse") == 0)
                *ret = COEXIST_REFUSE;
        else
                return -EINVAL;
        return 0;
}

#define COEXIST_MAX_TUNERS 16
#define COEXIST_NAME_MAX 32
#define COEXIST_VALUE_MAX 32

struct coexist_tuner {
        char name[COEXIST_NAME_MAX]; /* "tuned" */
        pid_t pid;
        unsigned classes;            /* bit per enum power_knob_class it writes (left to it) */
        bool refuses;                /* counts against OtherTuners=refuse (all but thermald) */
};

struct coexist_knob {
        char *path;                      /* relative to the sysfs root */
        enum power_knob_class cls;
        char found[COEXIST_VALUE_MAX];   /* what it holds (printable) */
        char expected[COEXIST_VALUE_MAX];/* its default, as the kernel sets it */
        bool refuses;                    /* counts against OtherTuners=refuse */
        bool implied;                    /* foreign because of another finding (a policy's governor) */
};

struct coexist_report {
        struct coexist_tuner tuners[COEXIST_MAX_TUNERS];
        size_t n_tuners;
        struct coexist_knob *knobs;
        size_t n_knobs, alloc_knobs;
        bool knobs_scanned;              /* coexist_scan_knobs() ran (else only tuners) */
        unsigned proc_errors;            /* /proc entries that could not be read (vanished ones are not errors) */
        unsigned sysfs_errors;           /* knob files that could not be read or parsed */
};

void coexist_report_init(struct coexist_report *r);
void coexist_report_clear(struct coexist_report *r);

/* Walk procfs_root (NULL: /proc) for the tuners above.  0 or -errno (procfs unreadable). */
int coexist_scan_tuners(const char *procfs_root, struct coexist_report *r);
/* Read every knob under sysfs_root (NULL: /sys) and note those away from their default.  0 or -errno. */
int coexist_scan_knobs(const char *sysfs_root, struct coexist_report *r);

/* Bit per enum power_knob_class that running tuners write. */
unsigned coexist_foreign_classes(const struct coexist_report *r);
/* Number of findings that count against OtherTuners=refuse. */
size_t coexist_refusals(const struct coexist_report *r);
/* Knob paths to hand to the power driver as foreign (power_driver_config.foreign_paths):
 * a NULL-terminated array of pointers into r (valid while r is), or NULL on ENOMEM. */
const char **coexist_foreign_paths(const struct coexist_report *r);

/*
 * Log the findings once (warning for tuners and refusing knobs, info for the
 * rest) and decide: 0 to go on, -EBUSY when mode is refuse and a finding
 * refuses (logged as an error naming it).
 */
int coexist_log(const struct coexist_report *r, enum coexist_mode mode, const char *sysfs_root);

/*
 * The daemon's check at start and reload: tuners always, knobs when
 * scan_knobs (no applier of ours holds knobs now).  Logged; 0 with *ret
 * filled, or -EBUSY (refused) / -ENOMEM with *ret empty.
 */
int coexist_check(const char *procfs_root, const char *sysfs_root, enum coexist_mode mode, bool scan_knobs,
                  struct coexist_report *ret);
/* Hand from's knob findings to `to` (a reload that did not rescan keeps the start's). */
void coexist_report_move_knobs(struct coexist_report *to, struct coexist_report *from);

struct strbuf;
/* `vmmpowerctl status`: a line of text, or ",\"coexist\":{...}" for JSON. */
void coexist_render(const struct coexist_report *r, enum coexist_mode mode, bool json, struct strbuf *out);

struct topology;
/*
 * The CPUs of the NUMA nodes in nodeset (a domain's <numatune><memory
 * nodeset>, vm_policy.mem_nodeset): where a VM with that memory binding may be
 * packed (the planner takes the same binding as a node mask, plan_input_numa_nodes()).  0 with
 * *ret filled (empty for an empty nodeset: no binding), -EINVAL for a bad list,
 * -ENOENT when no CPU of this host is in those nodes.
 */
int coexist_numa_cpus(const struct topology *topo, const char *nodeset, cpuset_t *ret);
