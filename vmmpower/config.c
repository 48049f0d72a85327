/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Configuration file parser (format: vmmpower.conf(5)).
 *
 * A strict, streaming line parser in the manner of wireguard-tools'
 * config.c: every line is one of
 *
 *         (blank) | # comment | [Section] | Key = Value
 *
 * Keys and section names match exactly (case-sensitive), character classes
 * are tested by hand so the parser does not depend on the locale, and every
 * value is checked by the parser of its type (duration, boolean, absolute
 * path, ...) plus its range.  Anything that is not understood is an error
 * that names the file and the line: a typo in a power-management daemon's
 * configuration must not silently fall back to a default.
 *
 * Rules beyond the grammar:
 *  - a line is at most CONFIG_LINE_MAX bytes (without its newline); NUL and
 *    other control bytes (except TAB, and CR right before the newline) are
 *    errors, so a binary file is rejected at its first such byte;
 *  - '#' starts a comment at the beginning of a line (after optional
 *    whitespace) or after whitespace; a '#' inside a value is kept;
 *  - setting the same key twice in one file is an error, except QMPSocket,
 *    which appends (and an empty QMPSocket clears the list built so far);
 *  - only ControlGroup, TextfilePath, ModelFile and HintSocket may be empty
 *    (= feature off).
 *
 * Files are parsed into a copy of the configuration, and cross-key rules
 * (ProcScanInterval >= ControlPeriod) are checked once every file has been
 * read, so conf.d drop-ins may change both sides of such a rule.  The caller's
 * configuration is replaced only when all of it is valid.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coexist.h"
#include "config.h"
#include "qemu_hint.h"

#define CONFIG_LINE_MAX 4096
#define CONFIG_FILE_MAX (1024 * 1024)   /* bytes; a config file is a few KiB */
#define CONFIG_CONFD_MAX 256            /* drop-in files */
#define SUN_PATH_MAX 108                /* sizeof(((struct sockaddr_un *) 0)->sun_path) */

/* Ranges, documented in vmmpower.conf(5). */
#define PERIOD_MIN_NS (50 * NSEC_PER_MSEC)
#define PERIOD_MAX_NS (60 * NSEC_PER_SEC)
#define SCAN_MIN_NS (100 * NSEC_PER_MSEC)
#define SCAN_MAX_NS (3600 * NSEC_PER_SEC)
#define QMP_TIMEOUT_MIN_NS (10 * NSEC_PER_MSEC)
#define QMP_TIMEOUT_MAX_NS (10 * NSEC_PER_SEC)
#define HALF_LIFE_MIN_NS (100 * NSEC_PER_MSEC)
#define HALF_LIFE_MAX_NS (600 * NSEC_PER_SEC)

void config_defaults(struct vp_config *c)
{
        memset(c, 0, sizeof(*c));
        c->period_ns = 1 * NSEC_PER_SEC;
        c->log_level = LOG_LEVEL_INFO;
        strcpy(c->state_dir, "/run/vmmpower");
        strcpy(c->control_socket, "/run/vmmpower/control.sock");
        strcpy(c->sysfs_root, "/sys");
        strcpy(c->procfs_root, "/proc");
        c->libvirt_enabled = true;
        strcpy(c->libvirt_uri, "qemu:///system");
        strcpy(c->libvirt_run_dir, "/run/libvirt/qemu");
        c->proc_scan = true;
        c->proc_scan_interval_ns = 10 * NSEC_PER_SEC;
        snprintf(c->proc_scan_users, sizeof(c->proc_scan_users), "%s", "root libvirt-qemu");
        c->qmp_timeout_ns = 500 * NSEC_PER_MSEC;
        c->load_half_life_ns = 4 * NSEC_PER_SEC;
        c->planner_enabled = true;
        c->planner_apply = true;
        c->headroom_pct = 80;
        c->level_headroom_pct = 97;
        c->wait_budget_pct = 5;
        c->profile = 0;               /* latency */
        c->queue_budget_bp = 100;     /* 1% of wake-ups may queue: the reasoning in vmmpower.conf(5) */
        c->shrink_dwell_ns = 10 * NSEC_PER_SEC;
        c->move_cooldown_ns = -1;
        c->max_moves = 16;
        c->hints_enabled = true;
        hint_policy_init(&c->hint_defaults);
        c->hint_host_read_bytes_per_sec = HINT_HOST_READ_BYTES_PER_SEC_DEFAULT;
}

/* ---- value types ------------------------------------------------------- */

enum value_type {
        VT_DURATION,
        VT_DURATION_AUTO, /* a duration, or empty: -1 (the default the code derives) */
        VT_LOG_LEVEL,
        VT_PATH,        /* absolute path, non-empty */
        VT_PATH_EMPTY,  /* absolute path or "" (off) */
        VT_SOCKET,      /* absolute path to listen on: PATH.new (bound first, control.c) fits in sun_path */
        VT_SOCKET_LIST, /* VT_SOCKET, appends; "" clears */
        VT_GROUP,       /* group name or "" */
        VT_USER_LIST,   /* user names or decimal uids separated by spaces, or "" */
        VT_BOOL,
        VT_URI,
        VT_UINT,        /* decimal unsigned, min_ns..max_ns used as its bounds */
        VT_DURATION_MS, /* duration in whole milliseconds, stored as uint32_t ms */
        VT_TRUST,       /* none, advisory or full (enum hint_trust) */
        VT_HINT_PATTERN, /* "" (off) or a plain-QEMU hint socket pattern (qemu_hint_pattern_check) */
        VT_OTHER_TUNERS, /* coexist or refuse (enum coexist_mode) */
        VT_PROFILE,     /* latency or batch (enum plan_profile), stored as uint32_t */
        VT_BASIS_POINTS, /* a percentage with up to two decimals ("1", "0.5"), stored as uint32_t
                          * hundredths of a percent, min_ns..max_ns its bounds in those */
};

struct key_def {
        const char *section;
        const char *key;
        enum value_type type;
        size_t offset;
        size_t size;     /* for strings: buffer size */
        nsec_t min_ns, max_ns;
        const char *expect; /* shown in "invalid value" messages */
};

#define STR(field) offsetof(struct vp_config, field), sizeof(((struct vp_config *) 0)->field)
#define NUM(field) offsetof(struct vp_config, field), 0

static const struct key_def keys[] = {
        { "Daemon", "ControlPeriod", VT_DURATION, NUM(period_ns), PERIOD_MIN_NS, PERIOD_MAX_NS,
          "a duration like 1s, 50ms..60s" },
        { "Daemon", "LogLevel", VT_LOG_LEVEL, NUM(log_level), 0, 0,
          "err, warning, notice, info or debug" },
        { "Daemon", "StateDirectory", VT_PATH, STR(state_dir), 0, 0, "an absolute path" },
        { "Daemon", "ControlSocket", VT_SOCKET, STR(control_socket), 0, 0,
          "an absolute path of at most 103 bytes" },
        { "Daemon", "ControlGroup", VT_GROUP, STR(control_group), 0, 0,
          "a group name, or empty for root only" },
        { "Daemon", "SysfsRoot", VT_PATH, STR(sysfs_root), 0, 0, "an absolute path" },
        { "Daemon", "ProcfsRoot", VT_PATH, STR(procfs_root), 0, 0, "an absolute path" },
        { "Libvirt", "Enabled", VT_BOOL, NUM(libvirt_enabled), 0, 0, "yes or no" },
        { "Libvirt", "URI", VT_URI, STR(libvirt_uri), 0, 0, "a libvirt URI like qemu:///system" },
        { "Libvirt", "RunDirectory", VT_PATH, STR(libvirt_run_dir), 0, 0, "an absolute path" },
        { "QEMU", "ProcScan", VT_BOOL, NUM(proc_scan), 0, 0, "yes or no" },
        { "QEMU", "ProcScanInterval", VT_DURATION, NUM(proc_scan_interval_ns), SCAN_MIN_NS,
          SCAN_MAX_NS, "a duration like 10s, 100ms..1h" },
        { "QEMU", "ProcScanUsers", VT_USER_LIST, STR(proc_scan_users), 0, 0,
          "user names or uids separated by spaces, or empty for any user" },
        { "QEMU", "QMPSocket", VT_SOCKET_LIST, 0, 0, 0, 0,
          "an absolute path of at most 107 bytes" },
        { "QEMU", "QMPTimeout", VT_DURATION, NUM(qmp_timeout_ns), QMP_TIMEOUT_MIN_NS,
          QMP_TIMEOUT_MAX_NS, "a duration like 500ms, 10ms..10s" },
        { "QEMU", "HintSocket", VT_HINT_PATTERN, STR(qemu_hint_socket), 0, 0,
          "an absolute path with %n for the VM name (%% for '%'), of at most 107 bytes, or empty for off" },
        { "Tracking", "LoadHalfLife", VT_DURATION, NUM(load_half_life_ns), HALF_LIFE_MIN_NS,
          HALF_LIFE_MAX_NS, "a duration like 4s, 100ms..10min" },
        { "Metrics", "TextfilePath", VT_PATH_EMPTY, STR(metrics_textfile), 0, 0,
          "an absolute path, or empty for off" },
        { "Planner", "Enabled", VT_BOOL, NUM(planner_enabled), 0, 0, "yes or no" },
        { "Planner", "ModelFile", VT_PATH_EMPTY, STR(model_file), 0, 0,
          "an absolute path, or empty to derive the model from sysfs" },
        { "Planner", "Profile", VT_PROFILE, NUM(profile), 0, 0, "latency or batch" },
        { "Planner", "QueueBudgetPercent", VT_BASIS_POINTS, NUM(queue_budget_bp), 1, 10000,
          "a percentage 0.01..100 with at most two decimals" },
        { "Planner", "HeadroomPercent", VT_UINT, NUM(headroom_pct), 10, 100, "a number 10..100" },
        { "Planner", "LevelHeadroomPercent", VT_UINT, NUM(level_headroom_pct), 10, 100, "a number 10..100" },
        { "Planner", "WaitBudgetPercent", VT_UINT, NUM(wait_budget_pct), 1, 100, "a number 1..100" },
        { "Planner", "ShrinkDwell", VT_DURATION, NUM(shrink_dwell_ns), 0, 3600 * NSEC_PER_SEC,
          "a duration like 10s, 0s..1h" },
        { "Planner", "MoveCooldown", VT_DURATION_AUTO, NUM(move_cooldown_ns), 0, 3600 * NSEC_PER_SEC,
          "a duration like 60s, 0s..1h, or empty for the profile's" },
        { "Planner", "MaxMovesPerPeriod", VT_UINT, NUM(max_moves), 0, 100000,
          "a number 0..100000 (0: no cap)" },
        { "Planner", "Apply", VT_BOOL, NUM(planner_apply), 0, 0, "yes or no" },
        { "Planner", "PinSingleCPU", VT_BOOL, NUM(pin_single_cpu), 0, 0, "yes or no" },
        { "Planner", "ActiveMaxLatencyUs", VT_UINT, NUM(active_max_latency_us), 0, 10000000,
          "a number of microseconds 0..10000000 (0: no limit)" },
        { "Hints", "Enabled", VT_BOOL, NUM(hints_enabled), 0, 0, "yes or no" },
        { "Hints", "Trust", VT_TRUST, NUM(hint_defaults.trust), 0, 0, "none, advisory or full" },
        { "Hints", "MaxLevel", VT_UINT, NUM(hint_defaults.max_level), 0, HINT_LEVEL_MAX, "a number 0..1024" },
        { "Hints", "BoostCap", VT_DURATION_MS, NUM(hint_defaults.boost_cap_ms), 0,
          HINT_BOOST_MS_MAX * NSEC_PER_MSEC, "a duration in whole ms like 500ms, 0..10s (0: no boosts)" },
        { "Hints", "RatePerSecond", VT_UINT, NUM(hint_defaults.rate_per_sec), 1, 100000, "a number 1..100000" },
        { "Hints", "Burst", VT_UINT, NUM(hint_defaults.burst), 1, 100000, "a number 1..100000" },
        { "Hints", "HalfLife", VT_DURATION, NUM(hint_defaults.half_life_ns), NSEC_PER_MSEC, 3600 * NSEC_PER_SEC,
          "a duration like 2s, 1ms..1h" },
        { "Hints", "BoostWindow", VT_DURATION, NUM(hint_defaults.boost_window_ns), NSEC_PER_SEC, 3600 * NSEC_PER_SEC,
          "a duration like 10s, 1s..1h" },
        { "Hints", "HostReadBytesPerSecond", VT_UINT, NUM(hint_host_read_bytes_per_sec), 0, 1 << 30,
          "a number of bytes 0..1073741824 (0: no host-wide budget)" },
        { "Host", "OtherTuners", VT_OTHER_TUNERS, NUM(other_tuners), 0, 0, "coexist or refuse" },
};

static const char *const sections[] = { "Daemon", "Libvirt", "QEMU", "Tracking", "Metrics", "Planner", "Hints", "Host" };

/* A key's index in keys[] (it exists: the callers name keys of the table). */
static size_t key_index(const char *section, const char *key)
{
        for (size_t k = 0; k < ELEMENTSOF(keys); k++)
                if (strcmp(keys[k].section, section) == 0 && strcmp(keys[k].key, key) == 0)
                        return k;
        abort();
}

static bool is_blank(char ch)
{
        return ch == ' ' || ch == '\t';
}

static bool is_alpha(char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static bool is_alnum(char ch)
{
        return is_alpha(ch) || (ch >= '0' && ch <= '9');
}

/* Bytes allowed in a value: printable ASCII and any byte >= 0x80 (UTF-8). */
static bool value_chars_ok(const char *s)
{
        for (; *s; s++) {
                unsigned char ch = (unsigned char) *s;
                if (ch < 0x20 || ch == 0x7f)
                        return false;
        }
        return true;
}

static bool path_ok(const char *s, size_t size)
{
        return s[0] == '/' && strlen(s) < size && value_chars_ok(s);
}

/* POSIX portable user/group name: [A-Za-z0-9._-], not starting with '-'. */
static bool group_ok(const char *s, size_t size)
{
        size_t n = strlen(s);

        if (n >= size || n > 32 || s[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
                        return false;
        return true;
}

/* Words separated by single spaces, each a portable user name (or a decimal uid), at most 32 of them. */
static bool user_list_ok(const char *s, size_t size)
{
        unsigned n = 0;

        if (strlen(s) >= size)
                return false;
        while (*s) {
                char word[64];
                size_t len = strcspn(s, " ");

                if (len == 0 || len >= sizeof(word) || ++n > CONFIG_MAX_SCAN_USERS)
                        return false;
                memcpy(word, s, len);
                word[len] = '\0';
                if (!group_ok(word, sizeof(word)))
                        return false;
                s += len;
                if (*s == ' ' && *++s == '\0')
                        return false; /* a trailing space */
        }
        return true;
}

/* scheme:rest with a letter-led scheme and printable ASCII without spaces. */
static bool uri_ok(const char *s, size_t size)
{
        const char *colon = strchr(s, ':');

        if (strlen(s) >= size || !colon || colon == s || !is_alpha(s[0]))
                return false;
        for (const char *p = s; p < colon; p++)
                if (!is_alnum(*p) && *p != '+' && *p != '-' && *p != '.')
                        return false;
        for (const char *p = s; *p; p++)
                if (*p <= 0x20 || *p >= 0x7f)
                        return false;
        return true;
}

/* ---- parser state ------------------------------------------------------ */

struct origin {
        char file[CONFIG_PATH_MAX];
        unsigned line; /* 0: default */
};

struct parser {
        struct vp_config cfg;            /* the copy being built */
        struct origin origin[ELEMENTSOF(keys)];
        /* per file: */
        const char *name;
        unsigned line;
        const char *section;             /* NULL before the first header */
        bool seen[ELEMENTSOF(keys)];
        struct config_error *err;
};

static int fail(struct parser *p, unsigned line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct parser *p, unsigned line, const char *fmt, ...)
{
        va_list ap;

        if (p->err) {
                memset(p->err, 0, sizeof(*p->err));
                snprintf(p->err->file, sizeof(p->err->file), "%s", p->name ? p->name : "");
                p->err->line = line;
                va_start(ap, fmt);
                vsnprintf(p->err->message, sizeof(p->err->message), fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

static void parser_init(struct parser *p, const struct vp_config *base, struct config_error *err)
{
        memset(p, 0, sizeof(*p));
        memcpy(&p->cfg, base, sizeof(p->cfg));
        p->err = err;
}

static void parser_begin_file(struct parser *p, const char *name)
{
        p->name = name;
        p->line = 0;
        p->section = NULL;
        memset(p->seen, 0, sizeof(p->seen));
}

static int set_value(struct parser *p, size_t k, const char *value)
{
        const struct key_def *d = &keys[k];
        char *field = (char *) &p->cfg + d->offset;
        char shown[96];
        nsec_t ns;
        bool b;
        enum log_level lvl;
        bool ok;

        escape_bytes(value, strlen(value), shown, sizeof(shown));

        if (value[0] == '\0' && d->type != VT_PATH_EMPTY && d->type != VT_GROUP && d->type != VT_USER_LIST &&
            d->type != VT_SOCKET_LIST && d->type != VT_HINT_PATTERN && d->type != VT_DURATION_AUTO)
                return fail(p, p->line, "empty value for %s (expected %s)", d->key, d->expect);

        switch (d->type) {
        case VT_DURATION_AUTO:
                if (value[0] == '\0') {
                        ns = -1;
                        memcpy(field, &ns, sizeof(ns));
                        return 0;
                }
                /* fall through */
        case VT_DURATION:
                if (parse_duration_ns(value, &ns) < 0 || ns < d->min_ns || ns > d->max_ns)
                        break;
                memcpy(field, &ns, sizeof(ns));
                return 0;
        case VT_LOG_LEVEL:
                if (log_parse_level(value, &lvl) < 0)
                        break;
                memcpy(field, &lvl, sizeof(lvl));
                return 0;
        case VT_BOOL:
                if (parse_bool(value, &b) < 0)
                        break;
                memcpy(field, &b, sizeof(b));
                return 0;
        case VT_PATH:
        case VT_PATH_EMPTY:
        case VT_SOCKET:
        case VT_GROUP:
        case VT_USER_LIST:
        case VT_URI:
        case VT_HINT_PATTERN:
                if (d->type == VT_HINT_PATTERN)
                        /* the pattern itself (with a one-byte name) must fit in sun_path */
                        ok = value[0] == '\0' ||
                             (qemu_hint_pattern_check(value) == 0 && strlen(value) < MIN(d->size, SUN_PATH_MAX));
                else if (d->type == VT_PATH || (d->type == VT_PATH_EMPTY && value[0]))
                        ok = path_ok(value, d->size);
                else if (d->type == VT_SOCKET)
                        ok = path_ok(value, MIN(d->size, SUN_PATH_MAX - strlen(".new")));
                else if (d->type == VT_GROUP)
                        ok = value[0] == '\0' || group_ok(value, d->size);
                else if (d->type == VT_USER_LIST)
                        ok = user_list_ok(value, d->size);
                else if (d->type == VT_URI)
                        ok = uri_ok(value, d->size);
                else
                        ok = true; /* empty path: off */
                if (!ok)
                        break;
                memset(field, 0, d->size);
                memcpy(field, value, strlen(value));
                return 0;
        case VT_UINT: {
                uint32_t u;
                if (parse_u32(value, &u) < 0 || (nsec_t) u < d->min_ns || (nsec_t) u > d->max_ns)
                        break;
                memcpy(field, &u, sizeof(u));
                return 0;
        }
        case VT_DURATION_MS: {
                uint32_t ms;
                if (parse_duration_ns(value, &ns) < 0 || ns < d->min_ns || ns > d->max_ns ||
                    ns % NSEC_PER_MSEC != 0)
                        break;
                ms = (uint32_t) (ns / NSEC_PER_MSEC);
                memcpy(field, &ms, sizeof(ms));
                return 0;
        }
        case VT_TRUST: {
                enum hint_trust t;
                if (hint_trust_from_string(value, &t) < 0)
                        break;
                memcpy(field, &t, sizeof(t));
                return 0;
        }
        case VT_OTHER_TUNERS: {
                enum coexist_mode m;
                if (coexist_mode_from_string(value, &m) < 0)
                        break;
                memcpy(field, &m, sizeof(m));
                return 0;
        }
        case VT_PROFILE: {
                uint32_t u = strcmp(value, "latency") == 0 ? 0 : strcmp(value, "batch") == 0 ? 1 : 2;
                if (u > 1)
                        break;
                memcpy(field, &u, sizeof(u));
                return 0;
        }
        case VT_BASIS_POINTS: {
                uint32_t u;
                if (parse_basis_points(value, &u) < 0 || (nsec_t) u < d->min_ns || (nsec_t) u > d->max_ns)
                        break;
                memcpy(field, &u, sizeof(u));
                return 0;
        }
        case VT_SOCKET_LIST:
                if (value[0] == '\0') {
                        p->cfg.n_qmp_sockets = 0;
                        memset(p->cfg.qmp_sockets, 0, sizeof(p->cfg.qmp_sockets));
                        return 0;
                }
                if (!path_ok(value, sizeof(p->cfg.qmp_sockets[0])))
                        break;
                for (unsigned i = 0; i < p->cfg.n_qmp_sockets; i++)
                        if (strcmp(p->cfg.qmp_sockets[i], value) == 0)
                                return fail(p, p->line, "duplicate QMPSocket '%s'", shown);
                if (p->cfg.n_qmp_sockets >= CONFIG_MAX_QMP)
                        return fail(p, p->line, "too many QMPSocket entries (at most %d)",
                                    CONFIG_MAX_QMP);
                strcpy(p->cfg.qmp_sockets[p->cfg.n_qmp_sockets++], value);
                return 0;
        }
        return fail(p, p->line, "invalid value for %s: '%s' (expected %s)", d->key, shown,
                    d->expect);
}

/* Strip trailing blanks in place; returns the new end. */
static char *rstrip(char *s, char *end)
{
        while (end > s && is_blank(end[-1]))
                end--;
        *end = '\0';
        return end;
}

/* One line, NUL-terminated, without its newline, already checked for control bytes. */
static int parse_line(struct parser *p, char *s)
{
        char shown[96];
        char *end, *eq, *key_end, *value;

        while (is_blank(*s))
                s++;
        /* A '#' after whitespace (or at the start) starts a comment. */
        for (char *q = s; *q; q++)
                if (*q == '#' && (q == s || is_blank(q[-1]))) {
                        *q = '\0';
                        break;
                }
        end = rstrip(s, s + strlen(s));
        if (s == end)
                return 0;

        if (*s == '[') {
                char *close = strchr(s, ']');
                if (!close || close + 1 != end)
                        return fail(p, p->line, "malformed section header (expected [Name])");
                *close = '\0';
                for (size_t i = 0; i < ELEMENTSOF(sections); i++)
                        if (strcmp(s + 1, sections[i]) == 0) {
                                p->section = sections[i];
                                return 0;
                        }
                escape_bytes(s + 1, strlen(s + 1), shown, sizeof(shown));
                return fail(p, p->line, "unknown section [%s]", shown);
        }

        key_end = s;
        while (is_alnum(*key_end))
                key_end++;
        eq = key_end;
        while (is_blank(*eq))
                eq++;
        if (key_end == s || (*key_end && *key_end != '=' && !is_blank(*key_end))) {
                escape_bytes(s, strlen(s), shown, sizeof(shown));
                return fail(p, p->line, "expected 'Key = Value' with a key of letters and digits, got '%s'",
                            shown);
        }
        if (*eq != '=')
                return fail(p, p->line, "missing '=' after key '%.*s'", (int) (key_end - s), s);
        *key_end = '\0';
        value = eq + 1;
        while (is_blank(*value))
                value++;

        if (!p->section)
                return fail(p, p->line, "key '%s' outside of any section (add a [Section] header)",
                            s);
        for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
                if (keys[k].section != p->section || strcmp(keys[k].key, s) != 0)
                        continue;
                if (p->seen[k] && keys[k].type != VT_SOCKET_LIST)
                        return fail(p, p->line, "duplicate key '%s' in section [%s] (first set on line %u)",
                                    s, p->section, p->origin[k].line);
                int r = set_value(p, k, value);
                if (r < 0)
                        return r;
                p->seen[k] = true;
                snprintf(p->origin[k].file, sizeof(p->origin[k].file), "%s", p->name);
                p->origin[k].line = p->line;
                return 0;
        }
        return fail(p, p->line, "unknown key '%s' in section [%s]", s, p->section);
}

static int parse_data(struct parser *p, const char *name, const char *data, size_t len)
{
        char line[CONFIG_LINE_MAX + 2];
        size_t i = 0;

        parser_begin_file(p, name);
        while (i < len) {
                size_t n = 0;
                int r;

                p->line++;
                for (; i < len && data[i] != '\n'; i++) {
                        unsigned char ch = (unsigned char) data[i];
                        bool cr_at_eol = ch == '\r' && (i + 1 == len || data[i + 1] == '\n');

                        if (ch == '\0')
                                return fail(p, p->line, "NUL byte in line (not a text file?)");
                        if ((ch < 0x20 && ch != '\t' && !cr_at_eol) || ch == 0x7f)
                                return fail(p, p->line, "invalid control character 0x%02x", ch);
                        if (cr_at_eol)
                                continue;
                        if (n >= CONFIG_LINE_MAX)
                                return fail(p, p->line, "line too long (more than %d bytes)",
                                            CONFIG_LINE_MAX);
                        line[n++] = (char) ch;
                }
                if (i < len)
                        i++; /* the newline */
                line[n] = '\0';
                r = parse_line(p, line);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Cross-key rules, once everything has been read. */
static int validate(struct parser *p)
{
        const struct vp_config *c = &p->cfg;

        if (c->proc_scan_interval_ns < c->period_ns) {
                /* Point at whichever of the two keys was set last, if any. */
                const struct origin *o = &p->origin[key_index("QEMU", "ProcScanInterval")];
                if (o->line == 0)
                        o = &p->origin[key_index("Daemon", "ControlPeriod")];
                p->name = o->file;
                return fail(p, o->line,
                            "ProcScanInterval (%lld ms) must not be shorter than ControlPeriod (%lld ms)",
                            (long long) (c->proc_scan_interval_ns / NSEC_PER_MSEC),
                            (long long) (c->period_ns / NSEC_PER_MSEC));
        }
        /* Each [Hints] key has the range hint_policy_validate() checks: this only guards the two in step. */
        if (hint_policy_validate(&c->hint_defaults) < 0) {
                p->name = "[Hints]";
                return fail(p, 0, "invalid hint policy defaults");
        }
        return 0;
}

int config_parse_buffer(const char *name, const char *data, size_t len, struct vp_config *c,
                        struct config_error *err)
{
        struct parser *p;
        int r;

        p = malloc(sizeof(*p));
        if (!p)
                return -ENOMEM;
        parser_init(p, c, err);
        r = parse_data(p, name, data, len);
        if (r >= 0)
                r = validate(p);
        if (r >= 0)
                memcpy(c, &p->cfg, sizeof(*c));
        free(p);
        return r;
}

/* ---- files ------------------------------------------------------------- */

static int io_error(struct config_error *err, const char *path, int r, const char *what)
{
        if (err) {
                memset(err, 0, sizeof(*err));
                snprintf(err->file, sizeof(err->file), "%s", path);
                snprintf(err->message, sizeof(err->message), "%s: %s", what, strerror(-r));
        }
        return r;
}

static bool is_dangling_symlink(const char *path)
{
        struct stat st;

        return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

/*
 * Read a whole regular file.  -ENOENT (nothing at path) is returned without
 * touching err; a symlink to nothing is an error, not a missing file.  Opened
 * O_NONBLOCK: a FIFO put there is refused, not waited on.  Refused unless
 * writable only by root or our own user: not world-writable, not writable by
 * a group other than root's, owned by root or us (it tells a root daemon
 * where to write).
 */
static int read_config_file(const char *path, char **ret, size_t *ret_len, struct config_error *err)
{
        _cleanup_close_ int fd = -1;
        struct stat st;
        char *buf;
        size_t n = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                if (errno == ENOENT && is_dangling_symlink(path))
                        return io_error(err, path, -ENOENT, "symlink to a missing file");
                if (errno == ENOENT)
                        return -ENOENT;
                return io_error(err, path, -errno, "cannot open");
        }
        if (fstat(fd, &st) < 0)
                return io_error(err, path, -errno, "cannot stat");
        if (!S_ISREG(st.st_mode))
                return io_error(err, path, -EINVAL, "not a regular file");
        if (st.st_mode & S_IWOTH)
                return io_error(err, path, -EPERM, "refusing world-writable file");
        if ((st.st_mode & S_IWGRP) && st.st_gid != 0)
                return io_error(err, path, -EPERM, "refusing file writable by a group other than root's");
        if (st.st_uid != 0 && st.st_uid != geteuid())
                return io_error(err, path, -EPERM, "refusing file owned by another user");
        if (st.st_size > CONFIG_FILE_MAX)
                return io_error(err, path, -EFBIG, "file too large");
        buf = malloc((size_t) st.st_size + 1);
        if (!buf)
                return io_error(err, path, -ENOMEM, "cannot read");
        for (;;) {
                ssize_t k = read(fd, buf + n, (size_t) st.st_size + 1 - n);
                if (k < 0) {
                        int r = -errno;
                        free(buf);
                        return io_error(err, path, r, "cannot read");
                }
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n > (size_t) st.st_size) { /* grew while reading */
                        free(buf);
                        return io_error(err, path, -EFBIG, "file changed while reading");
                }
        }
        *ret = buf;
        *ret_len = n;
        return 0;
}

static int confd_filter(const struct dirent *de)
{
        size_t n = strlen(de->d_name);

        return de->d_name[0] != '.' && n > 5 && strcmp(de->d_name + n - 5, ".conf") == 0;
}

/* Plain byte order: "10-x.conf" sorts before "9-x.conf"; use two-digit prefixes. */
static int confd_compare(const struct dirent **a, const struct dirent **b)
{
        return strcmp((*a)->d_name, (*b)->d_name);
}

static int parse_file(struct parser *p, const char *path, bool allow_missing)
{
        char *data = NULL;
        size_t len = 0;
        int r;

        r = read_config_file(path, &data, &len, p->err);
        if (r == -ENOENT && !is_dangling_symlink(path)) {
                if (allow_missing)
                        return 0;
                return io_error(p->err, path, r, "cannot open");
        }
        if (r < 0)
                return r;
        r = parse_data(p, path, data, len);
        free(data);
        return r;
}

int config_load(const char *path, const char *confd_dir, bool allow_missing, struct vp_config *c,
                struct config_error *err)
{
        char dir[CONFIG_PATH_MAX], file[CONFIG_PATH_MAX];
        struct dirent **list = NULL;
        struct vp_config base;
        struct parser *p;
        int n = 0, r;

        if (!confd_dir) {
                const char *slash = strrchr(path, '/');
                if (!slash)
                        r = path_printf(dir, sizeof(dir), "conf.d");
                else
                        r = path_printf(dir, sizeof(dir), "%.*s/conf.d", (int) (slash - path), path);
        } else
                r = path_printf(dir, sizeof(dir), "%s", confd_dir);
        if (r < 0)
                return io_error(err, path, r, "conf.d path too long");

        p = malloc(sizeof(*p));
        if (!p)
                return io_error(err, path, -ENOMEM, "cannot load");
        config_defaults(&base);
        parser_init(p, &base, err);

        r = parse_file(p, path, allow_missing);
        if (r < 0)
                goto out;

        n = scandir(dir, &list, confd_filter, confd_compare);
        if (n < 0) {
                n = 0;
                if (errno != ENOENT && errno != ENOTDIR) {
                        r = io_error(err, dir, -errno, "cannot read directory");
                        goto out;
                }
        }
        if (n > CONFIG_CONFD_MAX) {
                r = io_error(err, dir, -E2BIG, "too many drop-in files");
                goto out;
        }
        for (int i = 0; i < n; i++) {
                r = path_printf(file, sizeof(file), "%s/%s", dir, list[i]->d_name);
                if (r < 0) {
                        r = io_error(err, dir, r, "drop-in path too long");
                        goto out;
                }
                /* Vanished since the listing: nothing to apply. */
                r = parse_file(p, file, true);
                if (r < 0)
                        goto out;
        }
        r = validate(p);
        if (r >= 0) {
                memcpy(c, &p->cfg, sizeof(*c));
                r = 0;
        }
out:
        for (int i = 0; i < n; i++)
                free(list[i]);
        free(list);
        free(p);
        return r;
}

void config_error_print(const struct config_error *err, FILE *f)
{
        if (err->line > 0)
                fprintf(f, "%s:%u: %s\n", err->file, err->line, err->message);
        else if (err->file[0])
                fprintf(f, "%s: %s\n", err->file, err->message);
        else
                fprintf(f, "%s\n", err->message);
}

/* ---- dump -------------------------------------------------------------- */

static void format_duration(nsec_t ns, char *buf, size_t size)
{
        static const struct {
                const char *suffix;
                nsec_t mult;
        } units[] = {
                { "min", 60 * NSEC_PER_SEC }, { "s", NSEC_PER_SEC }, { "ms", NSEC_PER_MSEC },
                { "us", NSEC_PER_USEC },
        };

        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (ns != 0 && ns % units[i].mult == 0) {
                        snprintf(buf, size, "%lld%s", (long long) (ns / units[i].mult),
                                 units[i].suffix);
                        return;
                }
        snprintf(buf, size, "%lldns", (long long) ns);
}

static const char *log_level_name(enum log_level l)
{
        switch (l) {
        case LOG_LEVEL_ERR:
                return "err";
        case LOG_LEVEL_WARNING:
                return "warning";
        case LOG_LEVEL_NOTICE:
                return "notice";
        case LOG_LEVEL_INFO:
                return "info";
        case LOG_LEVEL_DEBUG:
                return "debug";
        }
        return "info";
}

void config_dump(const struct vp_config *c, FILE *f)
{
        const char *section = NULL;
        char buf[64];

        for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
                const struct key_def *d = &keys[k];
                const char *field = (const char *) c + d->offset;
                nsec_t ns;
                bool b;

                if (d->section != section) {
                        fprintf(f, "%s[%s]\n", section ? "\n" : "", d->section);
                        section = d->section;
                }
                switch (d->type) {
                case VT_DURATION:
                case VT_DURATION_AUTO:
                        memcpy(&ns, field, sizeof(ns));
                        if (d->type == VT_DURATION_AUTO && ns < 0) {
                                fprintf(f, "%s =\n", d->key);
                                break;
                        }
                        format_duration(ns, buf, sizeof(buf));
                        fprintf(f, "%s = %s\n", d->key, buf);
                        break;
                case VT_LOG_LEVEL:
                        fprintf(f, "%s = %s\n", d->key, log_level_name(c->log_level));
                        break;
                case VT_BOOL:
                        memcpy(&b, field, sizeof(b));
                        fprintf(f, "%s = %s\n", d->key, b ? "yes" : "no");
                        break;
                case VT_PATH:
                case VT_PATH_EMPTY:
                case VT_SOCKET:
                case VT_GROUP:
                case VT_USER_LIST:
                case VT_URI:
                case VT_HINT_PATTERN:
                        if (field[0] == '\0')
                                fprintf(f, "%s =\n", d->key);
                        else
                                fprintf(f, "%s = %.*s\n", d->key, (int) strnlen(field, d->size),
                                        field);
                        break;
                case VT_UINT: {
                        uint32_t u;
                        memcpy(&u, field, sizeof(u));
                        fprintf(f, "%s = %u\n", d->key, u);
                        break;
                }
                case VT_DURATION_MS: {
                        uint32_t ms;
                        memcpy(&ms, field, sizeof(ms));
                        if (ms == 0)
                                snprintf(buf, sizeof(buf), "0ms");
                        else
                                format_duration((nsec_t) ms * NSEC_PER_MSEC, buf, sizeof(buf));
                        fprintf(f, "%s = %s\n", d->key, buf);
                        break;
                }
                case VT_PROFILE: {
                        uint32_t u;
                        memcpy(&u, field, sizeof(u));
                        fprintf(f, "%s = %s\n", d->key, u ? "batch" : "latency");
                        break;
                }
                case VT_BASIS_POINTS: {
                        uint32_t u;
                        memcpy(&u, field, sizeof(u));
                        if (u % 100 == 0)
                                fprintf(f, "%s = %u\n", d->key, u / 100);
                        else
                                fprintf(f, "%s = %u.%02u\n", d->key, u / 100, u % 100);
                        break;
                }
                case VT_TRUST: {
                        enum hint_trust t;
                        memcpy(&t, field, sizeof(t));
                        fprintf(f, "%s = %s\n", d->key, hint_trust_to_string(t) ? hint_trust_to_string(t) : "?");
                        break;
                }
                case VT_OTHER_TUNERS: {
                        enum coexist_mode m;
                        memcpy(&m, field, sizeof(m));
                        fprintf(f, "%s = %s\n", d->key, coexist_mode_to_string(m));
                        break;
                }
                case VT_SOCKET_LIST:
                        if (c->n_qmp_sockets == 0)
                                fprintf(f, "%s =\n", d->key);
                        for (unsigned i = 0; i < c->n_qmp_sockets && i < CONFIG_MAX_QMP; i++)
                                fprintf(f, "%s = %.*s\n", d->key,
                                        (int) strnlen(c->qmp_sockets[i], sizeof(c->qmp_sockets[i])),
                                        c->qmp_sockets[i]);
                        break;
                }
        }
}
