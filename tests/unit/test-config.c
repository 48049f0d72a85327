/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Configuration parser: good files give exactly the values written in them,
 * conf.d drop-ins override in order, and every class of bad input is
 * rejected with the right line and a message that names the culprit, while
 * the caller's configuration stays as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "plan_input.h"

#define DATA TEST_DATA_DIR "/config"
#define NO_CONFD DATA "/does-not-exist"

/* The source tree: from meson's environment, else relative to the test data. */
static const char *source_dir(void)
{
        const char *s = getenv("VMMPOWER_SOURCE_DIR");

        return s && *s ? s : TEST_DATA_DIR "/../..";
}

static void assert_defaults(const struct vp_config *c)
{
        assert_int_equal(c->period_ns, NSEC_PER_SEC);
        assert_int_equal(c->log_level, LOG_LEVEL_INFO);
        assert_string_equal(c->state_dir, "/run/vmmpower");
        assert_string_equal(c->control_socket, "/run/vmmpower/control.sock");
        assert_string_equal(c->control_group, "");
        assert_string_equal(c->sysfs_root, "/sys");
        assert_string_equal(c->procfs_root, "/proc");
        assert_true(c->libvirt_enabled);
        assert_string_equal(c->libvirt_uri, "qemu:///system");
        assert_string_equal(c->libvirt_run_dir, "/run/libvirt/qemu");
        assert_true(c->proc_scan);
        assert_int_equal(c->proc_scan_interval_ns, 10 * NSEC_PER_SEC);
        assert_int_equal(c->n_qmp_sockets, 0);
        assert_int_equal(c->qmp_timeout_ns, 500 * NSEC_PER_MSEC);
        assert_int_equal(c->load_half_life_ns, 4 * NSEC_PER_SEC);
        assert_string_equal(c->metrics_textfile, "");
        assert_true(c->hints_enabled);
        assert_int_equal(c->hint_defaults.trust, HINT_TRUST_ADVISORY);
        assert_int_equal(c->hint_defaults.max_level, 1024);
        assert_int_equal(c->hint_defaults.boost_cap_ms, 500);
        assert_int_equal(c->hint_defaults.rate_per_sec, 10);
        assert_int_equal(c->hint_defaults.burst, 20);
        assert_int_equal(c->hint_defaults.half_life_ns, 2 * NSEC_PER_SEC);
}

static void assert_full(const struct vp_config *c)
{
        assert_int_equal(c->period_ns, 250 * NSEC_PER_MSEC);
        assert_int_equal(c->log_level, LOG_LEVEL_DEBUG);
        assert_string_equal(c->state_dir, "/var/lib/vmmpower-test");
        assert_string_equal(c->control_socket, "/run/vmmpower-test/control.sock");
        assert_string_equal(c->control_group, "vmmpower");
        assert_string_equal(c->sysfs_root, "/tmp/fake-sys");
        assert_string_equal(c->procfs_root, "/tmp/fake-proc");
        assert_false(c->libvirt_enabled);
        assert_string_equal(c->libvirt_uri, "qemu+unix:///system?socket=/run/libvirt/libvirt-sock");
        assert_string_equal(c->libvirt_run_dir, "/var/run/libvirt/qemu");
        assert_false(c->proc_scan);
        assert_int_equal(c->proc_scan_interval_ns, 2500 * NSEC_PER_MSEC);
        assert_int_equal(c->n_qmp_sockets, 2);
        assert_string_equal(c->qmp_sockets[0], "/run/qemu/vm1.qmp");
        assert_string_equal(c->qmp_sockets[1], "/run/qemu/vm2.qmp");
        assert_int_equal(c->qmp_timeout_ns, 200 * NSEC_PER_MSEC);
        assert_string_equal(c->qemu_hint_socket, "/run/qemu/%n/hint.%%sock");
        assert_int_equal(c->load_half_life_ns, 8 * NSEC_PER_SEC);
        assert_string_equal(c->metrics_textfile, "/var/lib/prometheus/node-exporter/vmmpower.prom");
        assert_false(c->hints_enabled);
        assert_int_equal(c->hint_defaults.trust, HINT_TRUST_FULL);
        assert_int_equal(c->hint_defaults.max_level, 800);
        assert_int_equal(c->hint_defaults.boost_cap_ms, 1500);
        assert_int_equal(c->hint_defaults.rate_per_sec, 50);
        assert_int_equal(c->hint_defaults.burst, 100);
        assert_int_equal(c->hint_defaults.half_life_ns, 750 * NSEC_PER_MSEC);
}

/* A config with every field away from its default, to detect any write. */
static void sentinel_config(struct vp_config *c)
{
        struct config_error err;

        config_defaults(c);
        assert_int_equal(config_load(DATA "/good/full.conf", NO_CONFD, false, c, &err), 0);
}

static void test_defaults(void **state)
{
        struct vp_config c;

        memset(&c, 0xa5, sizeof(c));
        config_defaults(&c);
        assert_defaults(&c);
}

static void test_full(void **state)
{
        struct vp_config c;
        struct config_error err;

        config_defaults(&c);
        assert_int_equal(config_load(DATA "/good/full.conf", NO_CONFD, false, &c, &err), 0);
        assert_full(&c);
}

static void test_minimal_and_empty(void **state)
{
        struct vp_config c, expected;
        struct config_error err;

        sentinel_config(&c);
        /* config_load starts from the defaults, not from what was loaded before. */
        assert_int_equal(config_load(DATA "/good/minimal.conf", NO_CONFD, false, &c, &err), 0);
        config_defaults(&expected);
        expected.period_ns = 2 * NSEC_PER_SEC;
        assert_memory_equal(&c, &expected, sizeof(c));

        sentinel_config(&c);
        assert_int_equal(config_load(DATA "/good/empty.conf", NO_CONFD, false, &c, &err), 0);
        assert_defaults(&c);
}

static void test_comments_whitespace(void **state)
{
        struct vp_config c;
        struct config_error err;

        sentinel_config(&c);
        assert_int_equal(config_load(DATA "/good/comments.conf", NO_CONFD, false, &c, &err), 0);
        assert_int_equal(c.period_ns, 500 * NSEC_PER_MSEC);
        assert_int_equal(c.log_level, LOG_LEVEL_WARNING);
        /* '#' without whitespace before it belongs to the value */
        assert_string_equal(c.libvirt_uri, "test:///default#fragment-kept");
        assert_string_equal(c.control_group, "");
        assert_string_equal(c.metrics_textfile, "");
        /* last line has no newline */
        assert_int_equal(c.n_qmp_sockets, 1);
        assert_string_equal(c.qmp_sockets[0], "/run/a.qmp");
}

static void test_dropins(void **state)
{
        struct vp_config c;
        struct config_error err;

        config_defaults(&c);
        /* confd_dir NULL: <dir of path>/conf.d */
        assert_int_equal(config_load(DATA "/good/dropins/vmmpower.conf", NULL, false, &c, &err), 0);
        assert_int_equal(c.period_ns, 20 * NSEC_PER_SEC);
        assert_int_equal(c.proc_scan_interval_ns, 30 * NSEC_PER_SEC);
        assert_int_equal(c.log_level, LOG_LEVEL_ERR);
        assert_int_equal(c.n_qmp_sockets, 2);
        assert_string_equal(c.qmp_sockets[0], "/run/qemu/main.qmp");
        assert_string_equal(c.qmp_sockets[1], "/run/qemu/extra.qmp");
        /* untouched keys keep their defaults; ignored files applied nothing */
        assert_string_equal(c.sysfs_root, "/sys");
        assert_int_equal(c.load_half_life_ns, 4 * NSEC_PER_SEC);

        /* Without the drop-ins the main file alone applies. */
        config_defaults(&c);
        assert_int_equal(config_load(DATA "/good/dropins/vmmpower.conf", NO_CONFD, false, &c, &err), 0);
        assert_int_equal(c.period_ns, 2 * NSEC_PER_SEC);
        assert_int_equal(c.log_level, LOG_LEVEL_NOTICE);
        assert_int_equal(c.n_qmp_sockets, 1);
}

static void test_missing_main_file(void **state)
{
        struct vp_config c;
        struct config_error err;

        sentinel_config(&c);
        assert_int_equal(config_load(DATA "/nope/vmmpower.conf", NULL, true, &c, &err), 0);
        assert_defaults(&c);

        sentinel_config(&c);
        memset(&err, 0, sizeof(err));
        assert_int_equal(config_load(DATA "/nope/vmmpower.conf", NULL, false, &c, &err), -ENOENT);
        assert_string_equal(err.file, DATA "/nope/vmmpower.conf");
        assert_int_equal(err.line, 0);
        assert_full(&c);

        /* Missing main file but drop-ins present: drop-ins still apply. */
        config_defaults(&c);
        assert_int_equal(config_load(DATA "/good/dropins/missing.conf", NULL, true, &c, &err), 0);
        assert_int_equal(c.period_ns, 20 * NSEC_PER_SEC);
        assert_int_equal(c.log_level, LOG_LEVEL_ERR);
}

static const struct bad_case {
        const char *file;
        unsigned line;
        const char *needle;  /* must appear in the message */
        const char *needle2; /* and this too, if set */
} bad_cases[] = {
        { "unknown-key.conf", 4, "unknown key 'ControlPeriode' in section [Daemon]", NULL },
        { "unknown-section.conf", 4, "unknown section [Deamon]", NULL },
        { "bad-duration.conf", 2, "invalid value for ControlPeriod: '1000'", "50ms..60s" },
        { "out-of-range.conf", 3, "invalid value for ControlPeriod: '10ms'", "50ms..60s" },
        { "relative-path.conf", 3, "invalid value for ProcfsRoot: 'proc'", "absolute" },
        { "duplicate-key.conf", 6, "duplicate key 'QMPTimeout'", "line 2" },
        { "key-outside-section.conf", 3, "LogLevel", "outside" },
        { "missing-equals.conf", 2, "missing '='", "Enabled" },
        { "bad-bool.conf", 2, "invalid value for Enabled: 'maybe'", "yes or no" },
        { "empty-value.conf", 2, "empty value for StateDirectory", NULL },
        { "cross-key.conf", 5, "ProcScanInterval", "ControlPeriod" },
        { "section-wrong-case.conf", 1, "unknown section [daemon]", NULL },
        { "key-wrong-case.conf", 2, "unknown key 'controlperiod'", NULL },
        { "nul-bytes.conf", 3, "NUL", NULL },
        { "binary.conf", 2, "0x7f", NULL },
        { "hints-trust.conf", 3, "invalid value for Trust: 'trusted'", "none, advisory or full" },
        { "hints-max-level.conf", 4, "invalid value for MaxLevel: '1025'", "0..1024" },
        { "hints-boost-cap.conf", 3, "invalid value for BoostCap: '1500us'", "whole ms" },
        { "hints-rate.conf", 2, "invalid value for RatePerSecond: '0'", "1..100000" },
        { "hints-half-life.conf", 3, "invalid value for HalfLife: '2h'", "1ms..1h" },
        { "hints-unknown-key.conf", 3, "unknown key 'BoostCapMs' in section [Hints]", NULL },
        { "hints-duplicate.conf", 3, "duplicate key 'Trust' in section [Hints]", "line 2" },
};

static void test_bad_files(void **state)
{
        for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
                const struct bad_case *b = &bad_cases[i];
                struct vp_config c, before;
                struct config_error err;
                char path[512];

                snprintf(path, sizeof(path), DATA "/bad/%s", b->file);
                sentinel_config(&c);
                memcpy(&before, &c, sizeof(c));
                memset(&err, 0, sizeof(err));
                int r = config_load(path, NO_CONFD, false, &c, &err);
                print_message("%s -> %d: %s:%u: %s\n", b->file, r, err.file, err.line, err.message);
                assert_int_equal(r, -EINVAL);
                assert_string_equal(err.file, path);
                assert_int_equal(err.line, b->line);
                assert_non_null(strstr(err.message, b->needle));
                if (b->needle2)
                        assert_non_null(strstr(err.message, b->needle2));
                assert_memory_equal(&c, &before, sizeof(c));
        }
}

static void test_bad_dropin(void **state)
{
        struct vp_config c, before;
        struct config_error err;

        sentinel_config(&c);
        memcpy(&before, &c, sizeof(c));
        assert_int_equal(config_load(DATA "/bad/dropin-bad/vmmpower.conf", NULL, false, &c, &err),
                         -EINVAL);
        assert_string_equal(err.file, DATA "/bad/dropin-bad/conf.d/20-bad.conf");
        assert_int_equal(err.line, 3);
        assert_non_null(strstr(err.message, "TextfilePath"));
        /* 10-ok.conf and the main file were valid, yet nothing was applied. */
        assert_memory_equal(&c, &before, sizeof(c));
}

static int parse_str(const char *s, struct vp_config *c, struct config_error *err)
{
        return config_parse_buffer("buf", s, strlen(s), c, err);
}

/* [Planner] Profile and QueueBudgetPercent: values, bounds, the dump round trip. */
static void test_planner_profile_budget(void **state)
{
        struct vp_config c;
        struct config_error err;
        static const char *const bad[] = { "[Planner]\nProfile = fast\n", "[Planner]\nQueueBudgetPercent = 0\n",
                                           "[Planner]\nQueueBudgetPercent = 1.234\n",
                                           "[Planner]\nQueueBudgetPercent = 100.01\n",
                                           "[Planner]\nQueueBudgetPercent = .\n",
                                           "[Planner]\nQueueBudgetPercent = 1.2.3\n",
                                           "[Planner]\nQueueBudgetPercent = -1\n" };
        (void) state;
        config_defaults(&c);
        assert_int_equal(c.profile, 0);
        assert_int_equal(c.queue_budget_bp, 100);
        assert_int_equal(parse_str("[Planner]\nProfile = batch\nQueueBudgetPercent = 0.5\n", &c, &err), 0);
        assert_int_equal(c.profile, 1);
        assert_int_equal(c.queue_budget_bp, 50);
        assert_int_equal(parse_str("[Planner]\nProfile = latency\nQueueBudgetPercent = 12.25\n", &c, &err), 0);
        assert_int_equal(c.profile, 0);
        assert_int_equal(c.queue_budget_bp, 1225);
        assert_int_equal(parse_str("[Planner]\nQueueBudgetPercent = 100\n", &c, &err), 0);
        assert_int_equal(c.queue_budget_bp, 10000);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                config_defaults(&c);
                assert_int_equal(parse_str(bad[i], &c, &err), -EINVAL);
                assert_non_null(strstr(err.message, "Planner") || strstr(err.message, "Profile") ||
                                        strstr(err.message, "QueueBudgetPercent")
                                ? err.message
                                : NULL);
        }
}

static char *dump_to_string(const struct vp_config *c);

/* [Planner] MoveCooldown: empty is the profile's default (-1), a duration within 0..1h, the dump round trip. */
static void test_move_cooldown(void **state)
{
        struct vp_config c, again;
        struct config_error err;
        struct plan_policy pol;
        char *text;

        (void) state;
        config_defaults(&c);
        assert_true(c.move_cooldown_ns == -1);
        plan_policy_from_config(&c, &pol);
        assert_true(pol.move_cooldown_ns == -1);
        assert_int_equal(parse_str("[Planner]\nMoveCooldown = 2min\n", &c, &err), 0);
        assert_true(c.move_cooldown_ns == 120 * NSEC_PER_SEC);
        plan_policy_from_config(&c, &pol);
        assert_true(pol.move_cooldown_ns == 120 * NSEC_PER_SEC);
        text = dump_to_string(&c);
        assert_non_null(strstr(text, "\nMoveCooldown = 2min\n"));
        free(text);
        assert_int_equal(parse_str("[Planner]\nMoveCooldown = 0s\n", &c, &err), 0);
        assert_true(c.move_cooldown_ns == 0);
        assert_int_equal(parse_str("[Planner]\nMoveCooldown =\n", &c, &err), 0);
        assert_true(c.move_cooldown_ns == -1);
        text = dump_to_string(&c);
        assert_non_null(strstr(text, "\nMoveCooldown =\n"));
        config_defaults(&again);
        again.move_cooldown_ns = 5;
        assert_int_equal(config_parse_buffer("dump", text, strlen(text), &again, &err), 0);
        assert_true(again.move_cooldown_ns == -1);
        free(text);
        config_defaults(&c);
        assert_int_equal(parse_str("[Planner]\nMoveCooldown = 61min\n", &c, &err), -EINVAL);
        assert_non_null(strstr(err.message, "MoveCooldown"));
        assert_int_equal(parse_str("[Planner]\nMoveCooldown = -1s\n", &c, &err), -EINVAL);
        assert_int_equal(parse_str("[Planner]\nMoveCooldown = soon\n", &c, &err), -EINVAL);
}

static void test_line_length(void **state)
{
        struct vp_config c;
        struct config_error err;
        size_t n = 9 + 4096 + 1;
        char *buf = malloc(n + 2);

        assert_non_null(buf);
        /* "[Daemon]\n" then a comment line of exactly 4096 bytes: fine. */
        memcpy(buf, "[Daemon]\n#", 10);
        memset(buf + 10, 'x', 4095);
        buf[9 + 4096] = '\n';
        config_defaults(&c);
        assert_int_equal(config_parse_buffer("long", buf, n, &c, &err), 0);

        /* One more byte: line 2 is too long. */
        buf[9 + 4096] = 'x';
        buf[9 + 4097] = '\n';
        memset(&err, 0, sizeof(err));
        assert_int_equal(config_parse_buffer("long", buf, n + 1, &c, &err), -EINVAL);
        assert_int_equal(err.line, 2);
        assert_non_null(strstr(err.message, "too long"));
        free(buf);
}

static void test_qmp_list(void **state)
{
        struct vp_config c;
        struct config_error err;
        char *buf = malloc(70 * 32);
        size_t o = 0;

        config_defaults(&c);
        assert_int_equal(parse_str("[QEMU]\nQMPSocket = /a\nQMPSocket = /b\n", &c, &err), 0);
        assert_int_equal(c.n_qmp_sockets, 2);
        /* A second buffer appends; an empty value clears the list. */
        assert_int_equal(parse_str("[QEMU]\nQMPSocket = /c\n", &c, &err), 0);
        assert_int_equal(c.n_qmp_sockets, 3);
        assert_string_equal(c.qmp_sockets[2], "/c");
        assert_int_equal(parse_str("[QEMU]\nQMPSocket =\nQMPSocket = /d\n", &c, &err), 0);
        assert_int_equal(c.n_qmp_sockets, 1);
        assert_string_equal(c.qmp_sockets[0], "/d");
        assert_string_equal(c.qmp_sockets[1], "");

        /* The same socket twice is a mistake. */
        assert_int_equal(parse_str("[QEMU]\nQMPSocket = /e\nQMPSocket = /e\n", &c, &err), -EINVAL);
        assert_int_equal(err.line, 3);
        assert_int_equal(c.n_qmp_sockets, 1);

        /* 64 fit, the 65th does not (line 1 is the header). */
        assert_non_null(buf);
        o += (size_t) sprintf(buf + o, "[QEMU]\nQMPSocket =\n");
        for (int i = 0; i < CONFIG_MAX_QMP + 1; i++)
                o += (size_t) sprintf(buf + o, "QMPSocket = /run/q%d\n", i);
        assert_int_equal(config_parse_buffer("many", buf, o, &c, &err), -EINVAL);
        assert_int_equal(err.line, 2 + CONFIG_MAX_QMP + 1);
        assert_non_null(strstr(err.message, "QMPSocket"));
        free(buf);

        /* Socket paths must fit in sun_path (107 bytes + NUL). */
        char line[256] = "[QEMU]\nQMPSocket = /";
        memset(line + strlen(line), 's', 107);
        assert_int_equal(parse_str(line, &c, &err), -EINVAL);
        assert_int_equal(err.line, 2);
        line[strlen(line) - 1] = '\0';
        assert_int_equal(parse_str(line, &c, &err), 0);
        assert_int_equal(strlen(c.qmp_sockets[c.n_qmp_sockets - 1]), 107);

        /* The control socket is bound at PATH.new first: PATH at most 103 bytes. */
        char cline[256] = "[Daemon]\nControlSocket = /";
        memset(cline + strlen(cline), 's', 103);
        assert_int_equal(parse_str(cline, &c, &err), -EINVAL);
        assert_int_equal(err.line, 2);
        assert_non_null(strstr(err.message, "103"));
        cline[strlen(cline) - 1] = '\0';
        assert_int_equal(parse_str(cline, &c, &err), 0);
        assert_int_equal(strlen(c.control_socket), 103);
}

/* [QEMU] HintSocket: a pattern with %n, "" for off; anything else names the line. */
static void test_hint_socket(void **state)
{
        static const char *const bad[] = {
                "run/%n.hint",           /* relative */
                "/run/qemu/web1.hint",   /* no %n: every VM on one socket */
                "/run/%s.hint",          /* unknown escape */
                "/run/%n.hint%",         /* trailing '%' */
                "/run/%N.hint",
        };
        struct vp_config c;
        struct config_error err;
        char line[300];

        config_defaults(&c);
        assert_string_equal(c.qemu_hint_socket, "");
        assert_int_equal(parse_str("[QEMU]\nHintSocket = /run/qemu/%n.hint\n", &c, &err), 0);
        assert_string_equal(c.qemu_hint_socket, "/run/qemu/%n.hint");
        assert_int_equal(parse_str("[QEMU]\nHintSocket =\n", &c, &err), 0);
        assert_string_equal(c.qemu_hint_socket, "");
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                snprintf(line, sizeof(line), "[QEMU]\n\nHintSocket = %s\n", bad[i]);
                memset(&err, 0, sizeof(err));
                assert_int_equal(parse_str(line, &c, &err), -EINVAL);
                assert_int_equal(err.line, 3);
                assert_non_null(strstr(err.message, "invalid value for HintSocket"));
                assert_non_null(strstr(err.message, "%n for the VM name"));
                assert_string_equal(c.qemu_hint_socket, "");
        }
        /* the pattern must fit in a unix socket address (107 bytes) */
        strcpy(line, "[QEMU]\nHintSocket = /%n");
        memset(line + strlen(line), 's', 105); /* 108 bytes */
        line[strlen("[QEMU]\nHintSocket = ") + 108] = '\0';
        assert_int_equal(parse_str(line, &c, &err), -EINVAL);
        line[strlen(line) - 1] = '\0';
        assert_int_equal(parse_str(line, &c, &err), 0);
        assert_int_equal(strlen(c.qemu_hint_socket), 107);
}

static void test_values(void **state)
{
        static const struct {
                const char *text;
                int ok;
        } cases[] = {
                { "[Daemon]\nControlPeriod = 50ms\n", 1 },
                { "[Daemon]\nControlPeriod = 49ms\n", 0 },
                { "[Daemon]\nControlPeriod = 60s\n", 0 }, /* > default ProcScanInterval */
                { "[Daemon]\nControlPeriod = 60s\n[QEMU]\nProcScanInterval = 60s\n", 1 },
                { "[Daemon]\nControlPeriod = 1min\n[QEMU]\nProcScanInterval = 1min\n", 1 },
                { "[Daemon]\nControlPeriod = 61s\n[QEMU]\nProcScanInterval = 2min\n", 0 },
                { "[Daemon]\nControlPeriod = -1s\n", 0 },
                { "[Daemon]\nControlPeriod = 1 s\n", 0 },
                { "[Daemon]\nControlPeriod = \"1s\"\n", 0 },
                { "[Daemon]\nLogLevel = INFO\n", 0 },
                { "[Daemon]\nLogLevel = notice\n", 1 },
                { "[Daemon]\nControlGroup = kvm\n", 1 },
                { "[Daemon]\nControlGroup = -x\n", 0 },
                { "[Daemon]\nControlGroup = a b\n", 0 },
                { "[Daemon]\nControlSocket = relative.sock\n", 0 },
                { "[Libvirt]\nURI = \n", 0 },
                { "[Libvirt]\nURI = qemu:///session\n", 1 },
                { "[Libvirt]\nURI = /no/scheme\n", 0 },
                { "[Libvirt]\nEnabled = true\n", 1 },
                { "[Libvirt]\nEnabled = Yes\n", 0 },
                { "[QEMU]\nQMPTimeout = 5ms\n", 0 },
                { "[QEMU]\nQMPTimeout = 10s\n", 1 },
                { "[QEMU]\nProcScanInterval = 1h\n", 1 }, /* the range's own bound, as the error message gives it */
                { "[QEMU]\nProcScanInterval = 1.01h\n", 0 },
                { "[QEMU]\nProcScanUsers = root libvirt-qemu 1000\n", 1 },
                { "[QEMU]\nProcScanUsers =\n", 1 }, /* any user */
                { "[QEMU]\nProcScanUsers = root  qemu\n", 0 },  /* two spaces */
                { "[QEMU]\nProcScanUsers = root,qemu\n", 0 },
                { "[QEMU]\nProcScanUsers = -root\n", 0 },
                { "[QEMU]\nProcScanUsers = 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 "
                  "29 30 31\n", 1 },
                { "[QEMU]\nProcScanUsers = 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 "
                  "29 30 31 32\n", 0 }, /* 33: more than CONFIG_MAX_SCAN_USERS */
                { "[QEMU]\nProcScanInterval = 60min\n", 1 },
                { "[QEMU]\nProcScanInterval = 61min\n", 0 },
                { "[Tracking]\nLoadHalfLife = 10min\n", 1 },
                { "[Tracking]\nLoadHalfLife = 99ms\n", 0 },
                { "[Metrics]\nTextfilePath = /x.prom\n", 1 },
                { "[Metrics]\nTextfilePath = x.prom\n", 0 },
                { "[Daemon]\n= 1s\n", 0 },
                { "[Daemon]\nControl-Period = 1s\n", 0 },
                { "[Daemon] x\n", 0 },
                { "[Daemon\n", 0 },
                { "[ Daemon ]\n", 0 },
                { "[Daemon]\nLogLevel = info # comment\n", 1 },
                { "[Daemon]\nStateDirectory = /run/with#hash\n", 1 },
                { "[Hints]\nEnabled = no\n", 1 },
                { "[Hints]\nTrust = none\n", 1 },
                { "[Hints]\nTrust = Full\n", 0 },
                { "[Hints]\nTrust =\n", 0 },
                { "[Hints]\nMaxLevel = 0\n", 1 },
                { "[Hints]\nMaxLevel = 1024\n", 1 },
                { "[Hints]\nMaxLevel = -1\n", 0 },
                { "[Hints]\nMaxLevel = 0x10\n", 0 },
                { "[Hints]\nBoostCap = 0ms\n", 1 },
                { "[Hints]\nBoostCap = 0\n", 0 }, /* a duration needs its unit */
                { "[Hints]\nBoostCap = 10s\n", 1 },
                { "[Hints]\nBoostCap = 10001ms\n", 0 },
                { "[Hints]\nBoostCap = 2.5ms\n", 0 },
                { "[Hints]\nRatePerSecond = 100000\n", 1 },
                { "[Hints]\nRatePerSecond = 100001\n", 0 },
                { "[Hints]\nBurst = 1\n", 1 },
                { "[Hints]\nBurst = 0\n", 0 },
                { "[Hints]\nBurst = 4294967296\n", 0 },
                { "[Hints]\nHalfLife = 1ms\n", 1 },
                { "[Hints]\nHalfLife = 999us\n", 0 },
                { "[Hints]\nHalfLife = 60min\n", 1 },
                { "[Hints]\nBoostWindow = 1s\n", 1 },
                { "[Hints]\nBoostWindow = 999ms\n", 0 },
                { "[Hints]\nBoostWindow = 60min\n", 1 },
                { "[Hints]\nBoostWindow = 61min\n", 0 },
                { "[Hints]\nHostReadBytesPerSecond = 0\n", 1 },
                { "[Hints]\nHostReadBytesPerSecond = 1073741824\n", 1 },
                { "[Hints]\nHostReadBytesPerSecond = 1073741825\n", 0 },
                { "[hints]\nTrust = full\n", 0 },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct vp_config c, before;
                struct config_error err = { .line = 999 };
                int r;

                config_defaults(&c);
                memcpy(&before, &c, sizeof(c));
                r = parse_str(cases[i].text, &c, &err);
                print_message("case %zu: r=%d %u %s\n", i, r, err.line, err.message);
                if (cases[i].ok)
                        assert_int_equal(r, 0);
                else {
                        assert_int_equal(r, -EINVAL);
                        assert_true(err.line >= 1 && err.line <= 3);
                        assert_string_equal(err.file, "buf");
                        assert_memory_equal(&c, &before, sizeof(c));
                }
        }
}

static char *dump_to_string(const struct vp_config *c)
{
        char *s = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&s, &n);

        assert_non_null(f);
        config_dump(c, f);
        assert_int_equal(fclose(f), 0);
        return s;
}

static void test_dump_round_trip(void **state)
{
        struct vp_config c, again;
        struct config_error err;
        char *text, *text2;

        sentinel_config(&c);
        text = dump_to_string(&c);
        assert_non_null(strstr(text, "ControlPeriod = 250ms\n"));
        assert_non_null(strstr(text, "ProcScanInterval = 2500ms\n"));
        assert_non_null(strstr(text, "QMPSocket = /run/qemu/vm2.qmp\n"));
        assert_non_null(strstr(text, "Enabled = no\n"));
        assert_non_null(strstr(text, "[Hints]\nEnabled = no\nTrust = full\nMaxLevel = 800\nBoostCap = 1500ms\n"
                                     "RatePerSecond = 50\nBurst = 100\nHalfLife = 750ms\n"));

        config_defaults(&again);
        assert_int_equal(config_parse_buffer("dump", text, strlen(text), &again, &err), 0);
        assert_full(&again);
        text2 = dump_to_string(&again);
        assert_string_equal(text, text2);
        free(text);
        free(text2);

        /* Defaults dump and parse back to the defaults (empty values included). */
        config_defaults(&c);
        text = dump_to_string(&c);
        assert_non_null(strstr(text, "ControlGroup =\n"));
        assert_non_null(strstr(text, "QMPSocket =\n"));
        sentinel_config(&again);
        again.n_qmp_sockets = 0;
        memset(again.qmp_sockets, 0, sizeof(again.qmp_sockets));
        assert_int_equal(config_parse_buffer("dump", text, strlen(text), &again, &err), 0);
        assert_defaults(&again);
        free(text);
}

static void test_world_writable(void **state)
{
        char dir[] = "/tmp/vmmpower-config-XXXXXX";
        char path[128];
        struct vp_config c;
        struct config_error err;
        FILE *f;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/vmmpower.conf", dir);
        f = fopen(path, "w");
        assert_non_null(f);
        fputs("[Daemon]\nControlPeriod = 3s\n", f);
        fclose(f);
        assert_int_equal(chmod(path, 0644), 0);
        config_defaults(&c);
        assert_int_equal(config_load(path, NULL, false, &c, &err), 0);
        assert_int_equal(c.period_ns, 3 * NSEC_PER_SEC);

        assert_int_equal(chmod(path, 0666), 0);
        config_defaults(&c);
        assert_int_equal(config_load(path, NULL, false, &c, &err), -EPERM);
        assert_non_null(strstr(err.message, "world-writable"));
        assert_int_equal(c.period_ns, NSEC_PER_SEC);

        unlink(path);
        rmdir(dir);
}

/*
 * What else a configuration file must not be: writable by a group other
 * than root's, owned by another user, a symlink to nothing (an error, not a
 * missing drop-in), or a FIFO (refused at once, not waited on: the alarm
 * ends a test that hangs in open()).
 */
static void test_file_refusals(void **state)
{
        char dir[] = "/tmp/vmmpower-config-XXXXXX";
        char path[128], confd[128], drop[160];
        struct vp_config c;
        struct config_error err;
        FILE *f;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/vmmpower.conf", dir);
        snprintf(confd, sizeof(confd), "%s/conf.d", dir);
        assert_int_equal(mkdir(confd, 0755), 0);
        f = fopen(path, "w");
        assert_non_null(f);
        fputs("[Daemon]\nControlPeriod = 3s\n", f);
        fclose(f);

        /* group-writable: refused for another group, allowed for root's */
        assert_int_equal(chmod(path, 0664), 0);
        assert_int_equal(chown(path, geteuid(), 65534), 0);
        config_defaults(&c);
        assert_int_equal(config_load(path, NULL, false, &c, &err), -EPERM);
        assert_non_null(strstr(err.message, "group"));
        assert_int_equal(c.period_ns, NSEC_PER_SEC);
        if (geteuid() == 0) {
                assert_int_equal(chown(path, 0, 0), 0);
                config_defaults(&c);
                assert_int_equal(config_load(path, NULL, false, &c, &err), 0);
                assert_int_equal(c.period_ns, 3 * NSEC_PER_SEC);
                /* owned by another user */
                assert_int_equal(chmod(path, 0644), 0);
                assert_int_equal(chown(path, 60000, 0), 0);
                config_defaults(&c);
                assert_int_equal(config_load(path, NULL, false, &c, &err), -EPERM);
                assert_non_null(strstr(err.message, "another user"));
                assert_int_equal(chown(path, 0, 0), 0);
        }
        assert_int_equal(chmod(path, 0644), 0);

        /* a drop-in symlinked to nothing */
        snprintf(drop, sizeof(drop), "%s/50-gone.conf", confd);
        assert_int_equal(symlink("/nonexistent/vmmpower-drop-in.conf", drop), 0);
        config_defaults(&c);
        assert_int_equal(config_load(path, NULL, false, &c, &err), -ENOENT);
        assert_non_null(strstr(err.message, "symlink to a missing file"));
        assert_string_equal(err.file, drop);
        unlink(drop);

        /* a FIFO named like a drop-in */
        snprintf(drop, sizeof(drop), "%s/50-fifo.conf", confd);
        assert_int_equal(mkfifo(drop, 0644), 0);
        alarm(20);
        config_defaults(&c);
        assert_int_equal(config_load(path, NULL, false, &c, &err), -EINVAL);
        alarm(0);
        assert_non_null(strstr(err.message, "not a regular file"));
        unlink(drop);

        config_defaults(&c);
        assert_int_equal(config_load(path, NULL, false, &c, &err), 0);
        assert_int_equal(c.period_ns, 3 * NSEC_PER_SEC);
        unlink(path);
        rmdir(confd);
        rmdir(dir);
}

static void test_error_print(void **state)
{
        struct config_error err = { .file = "/etc/x.conf", .line = 7, .message = "boom" };
        char *s = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&s, &n);

        config_error_print(&err, f);
        err.line = 0;
        config_error_print(&err, f);
        fclose(f);
        assert_string_equal(s, "/etc/x.conf:7: boom\n/etc/x.conf: boom\n");
        free(s);
}

static char *slurp(const char *path)
{
        FILE *f = fopen(path, "re");
        char *s = NULL;
        size_t n = 0;

        assert_non_null(f);
        assert_true(getdelim(&s, &n, '\0', f) > 0);
        fclose(f);
        return s;
}

/* Every key that config_dump() prints is documented in vmmpower.conf(5) and
 * appears, commented out with its default value, in the shipped file. */
static void test_docs_cover_keys(void **state)
{
        const char *src = source_dir();
        char path[512], *man, *shipped, *dump, *save = NULL;
        struct vp_config c;
        unsigned n_keys = 0;

        assert_non_null(src);
        snprintf(path, sizeof(path), "%s/man/vmmpower.conf.5", src);
        man = slurp(path);
        snprintf(path, sizeof(path), "%s/config/vmmpower.conf", src);
        shipped = slurp(path);
        config_defaults(&c);
        dump = dump_to_string(&c);

        for (char *line = strtok_r(dump, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char want[300], key[64];
                const char *eq = strstr(line, " =");

                if (line[0] == '[') {
                        snprintf(want, sizeof(want), ".SH \"%s SECTION\"", line);
                        if (!strstr(man, want))
                                fail_msg("section %s not documented in vmmpower.conf.5", line);
                        continue;
                }
                if (!eq)
                        continue;
                snprintf(key, sizeof(key), "%.*s", (int) (eq - line), line);
                snprintf(want, sizeof(want), ".BI %s=", key);
                if (!strstr(man, want))
                        fail_msg("key %s not documented in vmmpower.conf.5", key);
                if (strcmp(key, "QMPSocket") == 0)
                        continue; /* no default value: shipped file shows an example */
                /* "#ControlGroup =" for empty defaults, "#LogLevel = info" otherwise */
                snprintf(want, sizeof(want), "\n#%s\n", line);
                if (!strstr(shipped, want))
                        fail_msg("shipped vmmpower.conf lacks '#%s'", line);
                n_keys++;
        }
        assert_int_equal(n_keys, 40); /* 41 keys, QMPSocket skipped */
        free(man);
        free(shipped);
        free(dump);
}

/* The shipped default config must parse and equal the built-in defaults. */
static void test_shipped_config(void **state)
{
        const char *src = source_dir();
        char path[512];
        struct vp_config c;
        struct config_error err;

        assert_non_null(src);
        snprintf(path, sizeof(path), "%s/config/vmmpower.conf", src);
        sentinel_config(&c);
        int r = config_load(path, NO_CONFD, false, &c, &err);
        if (r < 0)
                config_error_print(&err, stderr);
        assert_int_equal(r, 0);
        assert_defaults(&c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_full),
                cmocka_unit_test(test_minimal_and_empty),
                cmocka_unit_test(test_comments_whitespace),
                cmocka_unit_test(test_dropins),
                cmocka_unit_test(test_missing_main_file),
                cmocka_unit_test(test_bad_files),
                cmocka_unit_test(test_bad_dropin),
                cmocka_unit_test(test_planner_profile_budget),
                cmocka_unit_test(test_move_cooldown),
                cmocka_unit_test(test_line_length),
                cmocka_unit_test(test_qmp_list),
                cmocka_unit_test(test_hint_socket),
                cmocka_unit_test(test_values),
                cmocka_unit_test(test_dump_round_trip),
                cmocka_unit_test(test_world_writable),
                cmocka_unit_test(test_file_refusals),
                cmocka_unit_test(test_error_print),
                cmocka_unit_test(test_shipped_config),
                cmocka_unit_test(test_docs_cover_keys),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
