/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "hint_proto.h"
#include "log.h"
#include "util.h"

/*
 * Daemon configuration: /etc/vmmpower/vmmpower.conf, then every
 * /etc/vmmpower/conf.d/NAME.conf in lexical order (later files override single
 * keys; list keys append).  Format (vmmpower.conf(5)): "[Section]" headers
 * and "Key = Value" lines, '#' comments, exact key match, values without
 * quotes.  Any unknown section or key, bad value, or duplicate key within one
 * file is an error with file and line; nothing is applied unless the whole
 * set of files is valid.
 */

#define CONFIG_PATH_MAX 256
#define CONFIG_MAX_QMP 64
#define CONFIG_MAX_SCAN_USERS 32

struct vp_config {
        /* [Daemon] */
        nsec_t period_ns;               /* ControlPeriod, default 1s, 50ms..60s */
        enum log_level log_level;       /* LogLevel, default info */
        char state_dir[CONFIG_PATH_MAX];       /* StateDirectory, default /run/vmmpower */
        char control_socket[CONFIG_PATH_MAX];  /* ControlSocket, default /run/vmmpower/control.sock */
        char control_group[64];         /* ControlGroup: group allowed read-only commands; "" = root only */
        char sysfs_root[CONFIG_PATH_MAX];   /* SysfsRoot, default /sys */
        char procfs_root[CONFIG_PATH_MAX];  /* ProcfsRoot, default /proc */
        /* [Libvirt] */
        bool libvirt_enabled;           /* Enabled, default yes */
        char libvirt_uri[CONFIG_PATH_MAX];     /* URI, default qemu:///system */
        char libvirt_run_dir[CONFIG_PATH_MAX]; /* RunDirectory, default /run/libvirt/qemu */
        /* [QEMU] */
        bool proc_scan;                 /* ProcScan, default yes */
        nsec_t proc_scan_interval_ns;   /* ProcScanInterval, default 10s, >= ControlPeriod */
        char proc_scan_users[256];      /* ProcScanUsers: users (names or uids, space-separated) whose
                                         * processes the scan takes for VMs; "" = any user.
                                         * Default "root libvirt-qemu" */
        unsigned n_qmp_sockets;         /* QMPSocket (repeatable) */
        char qmp_sockets[CONFIG_MAX_QMP][108];
        nsec_t qmp_timeout_ns;          /* QMPTimeout, default 500ms */
        char qemu_hint_socket[CONFIG_PATH_MAX]; /* HintSocket: plain-QEMU hint channel pattern with %n
                                                 * (qemu_hint.h); default "" (off) */
        /* [Tracking] */
        nsec_t load_half_life_ns;       /* LoadHalfLife, default 4s */
        /* [Metrics] */
        char metrics_textfile[CONFIG_PATH_MAX]; /* TextfilePath, default "" (off) */
        /* [Planner] */
        bool planner_enabled;           /* Enabled, default yes */
        bool planner_apply;             /* Apply, default yes (no: plans are shown, not acted on) */
        bool pin_single_cpu;            /* PinSingleCPU, default no: packed vCPUs may use the active CPUs of their LLC */
        uint32_t active_max_latency_us; /* ActiveMaxLatencyUs, default 0 = no limit */
        char model_file[CONFIG_PATH_MAX];      /* ModelFile, default "" (derived from sysfs) */
        uint32_t profile;               /* Profile: 0 latency (default), 1 batch (enum plan_profile) */
        uint32_t queue_budget_bp;       /* QueueBudgetPercent in hundredths of a percent, default 100 (1%),
                                         * 1..10000 */
        uint32_t headroom_pct;          /* HeadroomPercent, default 80, 10..100 */
        uint32_t level_headroom_pct;    /* LevelHeadroomPercent, default 97, 10..100 */
        uint32_t wait_budget_pct;       /* WaitBudgetPercent, default 5, 1..100 */
        nsec_t shrink_dwell_ns;         /* ShrinkDwell, default 10s, 0..1h */
        nsec_t move_cooldown_ns;        /* MoveCooldown, 0..1h; default -1: the profile's (batch 60s, latency 0) */
        uint32_t max_moves;             /* MaxMovesPerPeriod, default 16, 0 = no cap */
        /* [Hints] guest hints: host defaults of the per-VM hint policy (domain metadata overrides) */
        bool hints_enabled;             /* Enabled, default yes: connect to the VMs' hint channels */
        struct hint_policy hint_defaults; /* Trust, MaxLevel, BoostCap, RatePerSecond, Burst, HalfLife,
                                           * BoostWindow; defaults and ranges as hint_policy_init()/_validate() */
        uint32_t hint_host_read_bytes_per_sec; /* HostReadBytesPerSecond, default 4 MiB, 0 = no host-wide budget */
        /* [Host] */
        int other_tuners;               /* OtherTuners: enum coexist_mode, default coexist (coexist.h) */
};

struct config_error {
        char file[CONFIG_PATH_MAX];
        unsigned line;     /* 0 when not about one line */
        char message[256]; /* without "FILE:LINE: "; see config_error_print() */
};

void config_defaults(struct vp_config *c);
/*
 * Load path, then <dir of path>/conf.d/ (or confd_dir when not NULL).  A
 * missing main file is not an error when allow_missing is true (defaults).
 * On error returns -EINVAL (or -errno for I/O), fills *err, leaves *c as is.
 */
int config_load(const char *path, const char *confd_dir, bool allow_missing, struct vp_config *c,
                struct config_error *err);
/* Parse one buffer as if it were file `name` (for tests and fuzzing). */
int config_parse_buffer(const char *name, const char *data, size_t len, struct vp_config *c,
                        struct config_error *err);
/* Write the effective configuration in config-file syntax. */
void config_dump(const struct vp_config *c, FILE *f);
/* Print "FILE:LINE: message\n" (or "FILE: message\n" when line is 0). */
void config_error_print(const struct config_error *err, FILE *f);
