/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Energy model: parameters of a host type, the model file parser, defaults
 * derived from sysfs, and the evaluation of a load on a concrete topology.
 *
 * The modelled average power of a load (docs/energy-model.md, "Equations"):
 *
 *   For every core c (threads t, level L = highest level of the threads'
 *   frequency domains, capacity C_L, n_c vCPUs hosted by its threads):
 *     b_t     = min(1, work_t * 1024 / C_L)        busy fraction of a thread
 *     idle_c  = Π_t (1 - b_t)                       threads run independently
 *     busy_c  = 1 - idle_c
 *     Every hosted vCPU wakes its CPU as a Poisson process of mean interval
 *     I = ActiveIdleIntervalUs; a group hosting n vCPUs sees exponential idle
 *     gaps of mean I/n, and the share of its idle time spent in gaps of at
 *     least r is F(n, r) = e^-x (1 + x), x = n r / I (F = 1 when n = 0).
 *     A gap of length >= R_i (target residency) is spent in state i or deeper,
 *     for the states allowed by every thread's exit latency limit (s_max):
 *     Pidle_c = Σ_{i<=s_max} (F(n_c, R_i) - F(n_c, R_{i+1})) * P_i
 *               (F(., R_0) := 1, F(., R_{s_max+1}) := 0)
 *     P_c     = busy_c * P_active(L) + idle_c * Pidle_c
 *   For every idle domain d (LLC/CCX, package) over its cores, n_d vCPUs:
 *     q_d     = Π_c idle_c * F(n_d, R_deepest core state)  all cores in the
 *               deepest core state (0 if a CPU's latency limit forbids it)
 *     a_d     = Π_c idle_c * F(n_d, R_d) if the domain's exit latency is
 *               within every CPU's limit, else 0 (capped at q_d); with
 *               PackageIdleAllPackages the package term uses every core and
 *               vCPU of the host instead of the package's own
 *     P_d     = (1 - q_d) * P_awake + (q_d - a_d) * P_quiet + a_d * P_asleep
 *   P = Σ_c P_c + Σ_d P_d; energy over a period T is P * T.
 *
 * This is the design's "Σ freq domains busy × P_active + Σ CPUs idle ×
 * P_idle + Σ idle domains (awake, asleep)" with the per-CPU idle term taken
 * per core: on x86 no idle state saves power per thread while its sibling
 * runs, so a thread's idle time costs nothing beyond its busy sibling's core.
 *
 * The model file parser follows config.c: strict line grammar, exact keys,
 * FILE:LINE errors, whole-model validation at the end; nothing is returned
 * unless all of it is valid.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "energy_model.h"
#include "log.h"
#include "util.h"

static inline bool streq_(const char *a, const char *b)
{
        return strcmp(a, b) == 0;
}

#define MODEL_FILE_MAX (256 * 1024)
#define MODEL_LINE_MAX 1024

/*
 * Assumptions used by energy_model_from_topology() where the kernel publishes
 * no watts.  They describe "a generic x86 server core"; a model file for the
 * host type replaces all of them.
 */
#define DEFAULT_CORE_MAX_MW 4000           /* assumption: busy core at the top level */
#define DEFAULT_STATIC_PERMILLE 150        /* assumption: leakage share of that at any level */
#define DEFAULT_SHALLOW_IDLE_PERMILLE 200  /* assumption: clock-gated idle = 20% of the lowest level */
#define DEFAULT_DEEP_IDLE_PERMILLE 20      /* assumption: power-gated idle (residency >= 100us) = 2% of max */
#define DEFAULT_DEEP_RESIDENCY_US 100
#define DEFAULT_LLC_AWAKE_MW 2000          /* assumption: L3 slice + fabric port of a CCX */
#define DEFAULT_LLC_ASLEEP_MW 300
#define DEFAULT_PKG_AWAKE_MW 30000         /* assumption: uncore (mesh/IOD, memory controllers) */
#define DEFAULT_PKG_QUIET_MW 20000
#define DEFAULT_PKG_ASLEEP_MW 10000
#define DEFAULT_SMT_GAIN_PERMILLE 1250     /* assumption: SMT adds ~25% throughput */
#define DEFAULT_MIGRATION_COST_UJ 50       /* assumption: ~25us of cache refill at ~2W */
#define DEFAULT_ACTIVE_IDLE_INTERVAL_US 1000 /* assumption: a guest's CPU wakes about every 1ms */

const char *em_freq_scope_to_string(enum em_freq_scope s)
{
        switch (s) {
        case EM_FREQ_POLICY: return "policy";
        case EM_FREQ_CORE: return "core";
        case EM_FREQ_PACKAGE: return "package";
        }
        return "?";
}

static const char *const domain_scope_names[_EM_DOMAIN_MAX] = {
        [EM_DOMAIN_LLC] = "llc",
        [EM_DOMAIN_PACKAGE] = "package",
};

/* ---- validation ----------------------------------------------------------- */

static int verr(struct em_error *err, unsigned line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int verr(struct em_error *err, unsigned line, const char *fmt, ...)
{
        va_list ap;

        if (err) {
                err->line = line;
                va_start(ap, fmt);
                vsnprintf(err->message, sizeof(err->message), fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

/* The model file's rule for Name values: 1..max-1 letters, digits, '-', '_', '.'. */
static bool name_valid(const char *s, size_t max)
{
        size_t n = strnlen(s, max);

        if (n == 0 || n >= max)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '_' || c == '.'))
                        return false;
        }
        return true;
}

bool energy_model_name_valid(const char *name)
{
        return name_valid(name, sizeof(((struct energy_model *) NULL)->name));
}

uint32_t energy_model_min_power_limit(const struct energy_model *m)
{
        uint64_t mw = m->n_levels > 0 ? m->levels[0].active_mw : 0;

        for (unsigned d = 0; d < _EM_DOMAIN_MAX; d++)
                if (m->domain[d].present)
                        mw += m->domain[d].awake_mw;
        return (uint32_t) MIN(mw, (uint64_t) UINT32_MAX);
}

int energy_model_validate(const struct energy_model *m, struct em_error *err)
{
        char shown[80];

        if (!energy_model_name_valid(m->name)) {
                escape_bytes(m->name, strnlen(m->name, sizeof(m->name)), shown, sizeof(shown));
                return verr(err, 0, "invalid Name '%s' (1..%zu letters, digits, '-', '_', '.')", shown,
                            sizeof(m->name) - 1);
        }
        if (m->active_idle_interval_us == 0)
                return verr(err, 0, "ActiveIdleIntervalUs 0 outside 1..%u", UINT32_MAX);
        if (m->n_levels == 0)
                return verr(err, 0, "no [PerfLevel] section (at least one is required)");
        if (m->n_idle == 0)
                return verr(err, 0, "no [IdleState] section (at least one is required)");
        for (unsigned i = 0; i < m->n_levels; i++) {
                const struct em_perf_level *l = &m->levels[i];

                if (l->capacity == 0 || l->capacity > EM_CAPACITY_SCALE)
                        return verr(err, 0, "PerfLevel %u: Capacity %u outside 1..%d", i + 1, l->capacity,
                                    EM_CAPACITY_SCALE);
                if (l->freq_khz == 0 && m->n_levels > 1)
                        return verr(err, 0, "PerfLevel %u: FrequencyKHz 0 (unknown) is only allowed with one level",
                                    i + 1);
                if (i > 0) {
                        const struct em_perf_level *p = &m->levels[i - 1];
                        if (l->freq_khz <= p->freq_khz)
                                return verr(err, 0, "PerfLevel %u: frequencies must increase (%u after %u kHz)",
                                            i + 1, l->freq_khz, p->freq_khz);
                        if (l->capacity <= p->capacity)
                                return verr(err, 0, "PerfLevel %u: capacities must increase (%u after %u)",
                                            i + 1, l->capacity, p->capacity);
                        if (l->active_mw < p->active_mw)
                                return verr(err, 0, "PerfLevel %u: ActivePowerMW must not decrease (%u after %u)",
                                            i + 1, l->active_mw, p->active_mw);
                }
        }
        for (unsigned i = 1; i < m->n_levels; i++) {
                uint32_t a = m->levels[i - 1].max_active_cores, b = m->levels[i].max_active_cores;
                /* 0 = any number: a faster level cannot allow more busy cores than a slower one */
                if (b == 0 ? a != 0 : a != 0 && b > a)
                        return verr(err, 0, "PerfLevel %u: MaxActiveCores must not increase with the level (%u after %u; "
                                    "0 = any, only on the slowest levels)", i + 1, b, a);
        }
        if (m->levels[m->n_levels - 1].capacity != EM_CAPACITY_SCALE)
                return verr(err, 0, "the last PerfLevel must have Capacity %d (it is %u)", EM_CAPACITY_SCALE,
                            m->levels[m->n_levels - 1].capacity);
        for (unsigned i = 0; i < m->n_idle; i++) {
                const struct em_idle_state *s = &m->idle[i];

                if (!name_valid(s->name, sizeof(s->name))) {
                        escape_bytes(s->name, strnlen(s->name, sizeof(s->name)), shown, sizeof(shown));
                        return verr(err, 0, "IdleState %u: invalid Name '%s' (1..%zu letters, digits, '-', '_', '.')",
                                    i + 1, shown, sizeof(s->name) - 1);
                }
                if (s->target_residency_us < s->exit_latency_us)
                        return verr(err, 0, "IdleState %s: TargetResidencyUs %u < ExitLatencyUs %u", s->name,
                                    s->target_residency_us, s->exit_latency_us);
                if (s->power_mw > m->levels[0].active_mw)
                        return verr(err, 0, "IdleState %s: PowerMW %u above the lowest level's ActivePowerMW %u",
                                    s->name, s->power_mw, m->levels[0].active_mw);
                for (unsigned j = 0; j < i; j++)
                        if (strcmp(m->idle[j].name, s->name) == 0)
                                return verr(err, 0, "IdleState %s defined twice", s->name);
                if (i > 0) {
                        const struct em_idle_state *p = &m->idle[i - 1];
                        if (s->exit_latency_us < p->exit_latency_us ||
                            s->target_residency_us < p->target_residency_us)
                                return verr(err, 0, "IdleState %s: states must be listed shallow to deep "
                                            "(latency and residency not below %s's)", s->name, p->name);
                        if (s->power_mw > p->power_mw)
                                return verr(err, 0, "IdleState %s: PowerMW %u above the shallower %s's %u",
                                            s->name, s->power_mw, p->name, p->power_mw);
                }
        }
        for (unsigned d = 0; d < _EM_DOMAIN_MAX; d++) {
                const struct em_idle_domain *x = &m->domain[d];
                if (!x->present)
                        continue;
                if (!(x->asleep_mw <= x->quiet_mw && x->quiet_mw <= x->awake_mw))
                        return verr(err, 0, "IdleDomain %s: need AsleepPowerMW <= QuietPowerMW <= AwakePowerMW "
                                    "(%u, %u, %u)", domain_scope_names[d], x->asleep_mw, x->quiet_mw,
                                    x->awake_mw);
                if (x->target_residency_us < x->exit_latency_us)
                        return verr(err, 0, "IdleDomain %s: TargetResidencyUs %u < ExitLatencyUs %u",
                                    domain_scope_names[d], x->target_residency_us, x->exit_latency_us);
        }
        if (m->smt_gain_permille < 1000 || m->smt_gain_permille > 2000)
                return verr(err, 0, "SmtGain must be within 1.0..2.0");
        if (m->psu_efficiency_permille < 500 || m->psu_efficiency_permille > 1000)
                return verr(err, 0, "PsuEfficiency must be within 0.5..1.0");
        if (m->package_idle_all_packages && !m->domain[EM_DOMAIN_PACKAGE].present)
                return verr(err, 0, "PackageIdleAllPackages = yes needs an [IdleDomain] with Scope = package");
        /* Below this even one busy core at the slowest level is over the limit: every busy package would be
         * held at the slowest level, whatever its load (docs/energy-model.md §4). */
        if (m->package_power_limit_mw > 0 && m->package_power_limit_mw < energy_model_min_power_limit(m))
                return verr(err, 0, "PackagePowerLimitMW %u below %u, the power of one core busy at the slowest "
                            "level with its package awake (ActivePowerMW + the domains' AwakePowerMW): "
                            "0 for no limit", m->package_power_limit_mw, energy_model_min_power_limit(m));
        return 0;
}

/* ---- parser --------------------------------------------------------------- */

enum section { SEC_NONE, SEC_MODEL, SEC_LEVEL, SEC_IDLE, SEC_DOMAIN };

struct key {
        enum section sec;
        const char *name;
        bool required;
};

enum {
        K_NAME, K_FREQ_SCOPE, K_SMT_GAIN, K_MIGRATION, K_ACTIVE_INTERVAL, K_PKG_ALL,
        K_PKG_LIMIT, K_PLATFORM, K_PLATFORM_BUSY, K_PSU_EFF,
        K_L_FREQ, K_L_CAP, K_L_POWER, K_L_MAX_ACTIVE,
        K_I_NAME, K_I_LAT, K_I_RES, K_I_POWER, K_I_WAKE,
        K_D_SCOPE, K_D_AWAKE, K_D_QUIET, K_D_ASLEEP, K_D_LAT, K_D_RES, K_D_WAKE,
        _K_MAX,
};

static const struct key keys[_K_MAX] = {
        [K_NAME] = { SEC_MODEL, "Name", true },
        [K_FREQ_SCOPE] = { SEC_MODEL, "FrequencyScope", false },
        [K_SMT_GAIN] = { SEC_MODEL, "SmtGain", false },
        [K_MIGRATION] = { SEC_MODEL, "MigrationCostUJ", false },
        [K_ACTIVE_INTERVAL] = { SEC_MODEL, "ActiveIdleIntervalUs", false },
        [K_PKG_ALL] = { SEC_MODEL, "PackageIdleAllPackages", false },
        [K_PKG_LIMIT] = { SEC_MODEL, "PackagePowerLimitMW", false },
        [K_PLATFORM] = { SEC_MODEL, "PlatformPowerMW", false },
        [K_PLATFORM_BUSY] = { SEC_MODEL, "PlatformBusyPowerMW", false },
        [K_PSU_EFF] = { SEC_MODEL, "PsuEfficiency", false },
        [K_L_FREQ] = { SEC_LEVEL, "FrequencyKHz", true },
        [K_L_CAP] = { SEC_LEVEL, "Capacity", true },
        [K_L_POWER] = { SEC_LEVEL, "ActivePowerMW", true },
        [K_L_MAX_ACTIVE] = { SEC_LEVEL, "MaxActiveCores", false },
        [K_I_NAME] = { SEC_IDLE, "Name", true },
        [K_I_LAT] = { SEC_IDLE, "ExitLatencyUs", true },
        [K_I_RES] = { SEC_IDLE, "TargetResidencyUs", true },
        [K_I_POWER] = { SEC_IDLE, "PowerMW", true },
        [K_I_WAKE] = { SEC_IDLE, "WakeEnergyUJ", false },
        [K_D_SCOPE] = { SEC_DOMAIN, "Scope", true },
        [K_D_AWAKE] = { SEC_DOMAIN, "AwakePowerMW", true },
        [K_D_QUIET] = { SEC_DOMAIN, "QuietPowerMW", false },
        [K_D_ASLEEP] = { SEC_DOMAIN, "AsleepPowerMW", true },
        [K_D_LAT] = { SEC_DOMAIN, "ExitLatencyUs", true },
        [K_D_RES] = { SEC_DOMAIN, "TargetResidencyUs", true },
        [K_D_WAKE] = { SEC_DOMAIN, "WakeEnergyUJ", false },
};

struct mparser {
        struct energy_model m;
        struct em_error *err;
        const char *name;
        unsigned line;
        enum section sec;
        unsigned sec_line;
        bool seen[_K_MAX];
        unsigned seen_line[_K_MAX];
        bool model_seen;
        struct em_idle_domain dom;   /* the [IdleDomain] being read */
        int dom_scope;
};

static int pfail(struct mparser *p, unsigned line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pfail(struct mparser *p, unsigned line, const char *fmt, ...)
{
        va_list ap;

        if (p->err) {
                memset(p->err, 0, sizeof(*p->err));
                snprintf(p->err->file, sizeof(p->err->file), "%s", p->name);
                p->err->line = line;
                va_start(ap, fmt);
                vsnprintf(p->err->message, sizeof(p->err->message), fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

static const char *section_name(enum section s)
{
        switch (s) {
        case SEC_MODEL: return "Model";
        case SEC_LEVEL: return "PerfLevel";
        case SEC_IDLE: return "IdleState";
        case SEC_DOMAIN: return "IdleDomain";
        default: return "";
        }
}

/* "1.25" -> 1250.  At most 3 decimals, no sign, no exponent. */
static int parse_permille(const char *s, uint32_t *ret)
{
        uint64_t v = 0;
        unsigned decimals = 0;
        bool dot = false, digit = false;

        for (; *s; s++) {
                if (*s == '.' && !dot && digit) {
                        dot = true;
                        continue;
                }
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                if (dot && ++decimals > 3)
                        return -EINVAL;
                v = v * 10 + (uint64_t) (*s - '0');
                if (v > UINT32_MAX)
                        return -ERANGE;
                digit = true;
        }
        if (!digit || (dot && decimals == 0))
                return -EINVAL;
        for (; decimals < 3; decimals++)
                v *= 10;
        if (v > UINT32_MAX)
                return -ERANGE;
        *ret = (uint32_t) v;
        return 0;
}

/* Close the current section: required keys, then commit it into the model. */
static int end_section(struct mparser *p)
{
        for (unsigned k = 0; k < _K_MAX; k++)
                if (keys[k].sec == p->sec && keys[k].required && !p->seen[k])
                        return pfail(p, p->sec_line, "section [%s] lacks the required key %s",
                                     section_name(p->sec), keys[k].name);
        if (p->sec == SEC_DOMAIN) {
                if (p->m.domain[p->dom_scope].present)
                        return pfail(p, p->sec_line, "second [IdleDomain] with Scope = %s",
                                     domain_scope_names[p->dom_scope]);
                if (!p->seen[K_D_QUIET])
                        p->dom.quiet_mw = p->dom.awake_mw;
                p->dom.present = true;
                p->m.domain[p->dom_scope] = p->dom;
        }
        return 0;
}

static int begin_section(struct mparser *p, const char *name)
{
        enum section s;
        int r;

        if (streq_(name, "Model"))
                s = SEC_MODEL;
        else if (streq_(name, "PerfLevel"))
                s = SEC_LEVEL;
        else if (streq_(name, "IdleState"))
                s = SEC_IDLE;
        else if (streq_(name, "IdleDomain"))
                s = SEC_DOMAIN;
        else
                return pfail(p, p->line, "unknown section [%s]", name);

        if (p->sec != SEC_NONE) {
                r = end_section(p);
                if (r < 0)
                        return r;
        }
        if (s == SEC_MODEL) {
                if (p->model_seen)
                        return pfail(p, p->line, "second [Model] section");
                p->model_seen = true;
        } else if (s == SEC_LEVEL) {
                if (p->m.n_levels >= EM_MAX_LEVELS)
                        return pfail(p, p->line, "too many [PerfLevel] sections (at most %d)", EM_MAX_LEVELS);
                p->m.n_levels++;
        } else if (s == SEC_IDLE) {
                if (p->m.n_idle >= EM_MAX_IDLE_STATES)
                        return pfail(p, p->line, "too many [IdleState] sections (at most %d)",
                                     EM_MAX_IDLE_STATES);
                p->m.n_idle++;
        } else {
                memset(&p->dom, 0, sizeof(p->dom));
                p->dom_scope = -1;
        }
        p->sec = s;
        p->sec_line = p->line;
        memset(p->seen, 0, sizeof(p->seen));
        return 0;
}

static int set_key(struct mparser *p, unsigned k, const char *v)
{
        struct em_perf_level *lvl = &p->m.levels[p->m.n_levels ? p->m.n_levels - 1 : 0];
        struct em_idle_state *st = &p->m.idle[p->m.n_idle ? p->m.n_idle - 1 : 0];
        uint32_t *u32 = NULL;
        char shown[80];
        int r;

        escape_bytes(v, strlen(v), shown, sizeof(shown));
        switch (k) {
        case K_NAME:
        case K_I_NAME: {
                char *dst = k == K_NAME ? p->m.name : st->name;
                size_t max = k == K_NAME ? sizeof(p->m.name) : sizeof(st->name);
                size_t n = strlen(v);
                if (n == 0 || n >= max)
                        return pfail(p, p->line, "%s must be 1..%zu characters", keys[k].name, max - 1);
                if (!name_valid(v, max))
                        return pfail(p, p->line, "invalid %s '%s' (letters, digits, '-', '_', '.')",
                                     keys[k].name, shown);
                memcpy(dst, v, n + 1);
                return 0;
        }
        case K_FREQ_SCOPE:
                if (streq_(v, "policy"))
                        p->m.freq_scope = EM_FREQ_POLICY;
                else if (streq_(v, "core"))
                        p->m.freq_scope = EM_FREQ_CORE;
                else if (streq_(v, "package"))
                        p->m.freq_scope = EM_FREQ_PACKAGE;
                else
                        return pfail(p, p->line, "invalid FrequencyScope '%s' (expected policy, core or package)",
                                     shown);
                return 0;
        case K_SMT_GAIN:
                r = parse_permille(v, &p->m.smt_gain_permille);
                if (r < 0 || p->m.smt_gain_permille < 1000 || p->m.smt_gain_permille > 2000)
                        return pfail(p, p->line, "invalid SmtGain '%s' (expected a decimal within 1.0..2.0)",
                                     shown);
                return 0;
        case K_PSU_EFF:
                r = parse_permille(v, &p->m.psu_efficiency_permille);
                if (r < 0 || p->m.psu_efficiency_permille < 500 || p->m.psu_efficiency_permille > 1000)
                        return pfail(p, p->line, "invalid PsuEfficiency '%s' (expected a decimal within 0.5..1.0)",
                                     shown);
                return 0;
        case K_PKG_ALL:
                if (parse_bool(v, &p->m.package_idle_all_packages) < 0)
                        return pfail(p, p->line, "invalid PackageIdleAllPackages '%s' (expected yes or no)",
                                     shown);
                return 0;
        case K_D_SCOPE:
                for (int d = 0; d < _EM_DOMAIN_MAX; d++)
                        if (streq_(v, domain_scope_names[d])) {
                                p->dom_scope = d;
                                return 0;
                        }
                return pfail(p, p->line, "invalid Scope '%s' (expected llc or package)", shown);
        case K_MIGRATION: u32 = &p->m.migration_cost_uj; break;
        case K_ACTIVE_INTERVAL: u32 = &p->m.active_idle_interval_us; break;
        case K_PKG_LIMIT: u32 = &p->m.package_power_limit_mw; break;
        case K_PLATFORM: u32 = &p->m.platform_mw; break;
        case K_PLATFORM_BUSY: u32 = &p->m.platform_busy_mw; break;
        case K_L_MAX_ACTIVE: u32 = &lvl->max_active_cores; break;
        case K_I_WAKE: u32 = &st->wake_energy_uj; break;
        case K_D_WAKE: u32 = &p->dom.wake_energy_uj; break;
        case K_L_FREQ: u32 = &lvl->freq_khz; break;
        case K_L_CAP: u32 = &lvl->capacity; break;
        case K_L_POWER: u32 = &lvl->active_mw; break;
        case K_I_LAT: u32 = &st->exit_latency_us; break;
        case K_I_RES: u32 = &st->target_residency_us; break;
        case K_I_POWER: u32 = &st->power_mw; break;
        case K_D_AWAKE: u32 = &p->dom.awake_mw; break;
        case K_D_QUIET: u32 = &p->dom.quiet_mw; break;
        case K_D_ASLEEP: u32 = &p->dom.asleep_mw; break;
        case K_D_LAT: u32 = &p->dom.exit_latency_us; break;
        case K_D_RES: u32 = &p->dom.target_residency_us; break;
        }
        if (!u32 || parse_u32(v, u32) < 0)
                return pfail(p, p->line, "invalid value for %s: '%s' (expected a non-negative integer)",
                             keys[k].name, shown);
        if (k == K_L_CAP && (*u32 == 0 || *u32 > EM_CAPACITY_SCALE))
                return pfail(p, p->line, "Capacity %u outside 1..%d", *u32, EM_CAPACITY_SCALE);
        if (k == K_ACTIVE_INTERVAL && *u32 == 0)
                return pfail(p, p->line, "ActiveIdleIntervalUs 0 outside 1..%u (a vCPU waking its CPU all the "
                             "time leaves no idle time to model)", UINT32_MAX);
        return 0;
}

static bool is_space(char c)
{
        return c == ' ' || c == '\t';
}

static int parse_line(struct mparser *p, char *s)
{
        char *e, *key, *val;
        size_t n;

        while (is_space(*s))
                s++;
        n = strlen(s);
        while (n > 0 && is_space(s[n - 1]))
                s[--n] = '\0';
        if (n == 0 || s[0] == '#')
                return 0;
        if (s[0] == '[') {
                /* A comment after the header: '#' preceded by whitespace, as after a value. */
                for (char *c = s + 1; *c; c++)
                        if (*c == '#' && is_space(c[-1])) {
                                *c = '\0';
                                break;
                        }
                n = strlen(s);
                while (n > 0 && is_space(s[n - 1]))
                        s[--n] = '\0';
                if (s[n - 1] != ']' || n < 3)
                        return pfail(p, p->line, "malformed section header (expected [Name])");
                s[n - 1] = '\0';
                return begin_section(p, s + 1);
        }
        key = s;
        for (e = s; (*e >= 'A' && *e <= 'Z') || (*e >= 'a' && *e <= 'z') || (*e >= '0' && *e <= '9'); e++)
                ;
        if (e == s)
                return pfail(p, p->line, "expected 'Key = Value'");
        val = e;
        while (is_space(*val))
                val++;
        if (*val != '=')
                return pfail(p, p->line, "missing '=' after key '%.*s'", (int) (e - s), s);
        *e = '\0';
        val++;
        while (is_space(*val))
                val++;
        /* A comment after the value: '#' preceded by whitespace. */
        for (char *c = val; *c; c++)
                if (*c == '#' && c > val && is_space(c[-1])) {
                        *c = '\0';
                        break;
                }
        n = strlen(val);
        while (n > 0 && is_space(val[n - 1]))
                val[--n] = '\0';
        if (p->sec == SEC_NONE)
                return pfail(p, p->line, "key '%s' outside of any section", key);
        for (unsigned k = 0; k < _K_MAX; k++) {
                if (keys[k].sec != p->sec || !streq_(keys[k].name, key))
                        continue;
                if (p->seen[k])
                        return pfail(p, p->line, "duplicate key '%s' in [%s] (first set on line %u)", key,
                                     section_name(p->sec), p->seen_line[k]);
                p->seen[k] = true;
                p->seen_line[k] = p->line;
                if (val[0] == '\0')
                        return pfail(p, p->line, "empty value for %s", key);
                return set_key(p, k, val);
        }
        return pfail(p, p->line, "unknown key '%s' in section [%s]", key, section_name(p->sec));
}

static void model_init_defaults(struct energy_model *m)
{
        memset(m, 0, sizeof(*m));
        m->freq_scope = EM_FREQ_CORE;
        m->smt_gain_permille = DEFAULT_SMT_GAIN_PERMILLE;
        m->migration_cost_uj = DEFAULT_MIGRATION_COST_UJ;
        m->active_idle_interval_us = DEFAULT_ACTIVE_IDLE_INTERVAL_US;
        m->psu_efficiency_permille = 1000;
}

int energy_model_parse_string(const char *text, const char *name, struct energy_model *ret, struct em_error *err)
{
        struct mparser *p;
        const char *c = text;
        int r = 0;

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        model_init_defaults(&p->m);
        p->err = err;
        p->name = name ? name : "";

        while (*c && r >= 0) {
                char line[MODEL_LINE_MAX + 1];
                size_t n = 0;

                p->line++;
                for (; *c && *c != '\n'; c++) {
                        unsigned char ch = (unsigned char) *c;
                        bool cr_eol = ch == '\r' && (c[1] == '\n' || c[1] == '\0');
                        if (cr_eol)
                                continue;
                        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
                                r = pfail(p, p->line, "invalid control character 0x%02x", ch);
                                break;
                        }
                        if (n >= MODEL_LINE_MAX) {
                                r = pfail(p, p->line, "line too long (more than %d bytes)", MODEL_LINE_MAX);
                                break;
                        }
                        line[n++] = (char) ch;
                }
                if (r < 0)
                        break;
                if (*c == '\n')
                        c++;
                line[n] = '\0';
                r = parse_line(p, line);
        }
        if (r >= 0 && p->sec != SEC_NONE)
                r = end_section(p);
        if (r >= 0 && !p->model_seen)
                r = pfail(p, 0, "no [Model] section");
        if (r >= 0) {
                struct em_error verr_buf = {};
                r = energy_model_validate(&p->m, &verr_buf);
                if (r < 0)
                        r = pfail(p, 0, "%s", verr_buf.message);
        }
        if (r >= 0)
                *ret = p->m;
        free(p);
        return r;
}

int energy_model_parse_file(const char *path, struct energy_model *ret, struct em_error *err)
{
        _cleanup_free_ char *buf = NULL;
        ssize_t n;

        buf = malloc(MODEL_FILE_MAX);
        if (!buf)
                return -ENOMEM;
        n = read_small_file(path, buf, MODEL_FILE_MAX);
        if (n < 0) {
                if (err) {
                        memset(err, 0, sizeof(*err));
                        snprintf(err->file, sizeof(err->file), "%s", path);
                        snprintf(err->message, sizeof(err->message), "cannot read: %s", strerror((int) -n));
                }
                return (int) n;
        }
        if (memchr(buf, '\0', (size_t) n)) {
                if (err) {
                        memset(err, 0, sizeof(*err));
                        snprintf(err->file, sizeof(err->file), "%s", path);
                        snprintf(err->message, sizeof(err->message), "NUL byte in file (not a text file?)");
                }
                return -EINVAL;
        }
        return energy_model_parse_string(buf, path, ret, err);
}

void energy_model_write(const struct energy_model *m, FILE *f)
{
        fprintf(f, "# vmmpower energy model\n[Model]\nName = %s\nFrequencyScope = %s\n", m->name,
                em_freq_scope_to_string(m->freq_scope));
        fprintf(f, "SmtGain = %u.%03u\nMigrationCostUJ = %u\nActiveIdleIntervalUs = %u\nPackageIdleAllPackages = %s\n",
                m->smt_gain_permille / 1000, m->smt_gain_permille % 1000, m->migration_cost_uj,
                m->active_idle_interval_us, m->package_idle_all_packages ? "yes" : "no");
        /* the keys added with issue 18 only when set: a model without them prints as before */
        if (m->package_power_limit_mw)
                fprintf(f, "PackagePowerLimitMW = %u\n", m->package_power_limit_mw);
        if (m->platform_mw)
                fprintf(f, "PlatformPowerMW = %u\n", m->platform_mw);
        if (m->platform_busy_mw)
                fprintf(f, "PlatformBusyPowerMW = %u\n", m->platform_busy_mw);
        if (m->psu_efficiency_permille != 1000)
                fprintf(f, "PsuEfficiency = %u.%03u\n", m->psu_efficiency_permille / 1000,
                        m->psu_efficiency_permille % 1000);
        for (unsigned i = 0; i < m->n_levels; i++) {
                fprintf(f, "\n[PerfLevel]\nFrequencyKHz = %u\nCapacity = %u\nActivePowerMW = %u\n",
                        m->levels[i].freq_khz, m->levels[i].capacity, m->levels[i].active_mw);
                if (m->levels[i].max_active_cores)
                        fprintf(f, "MaxActiveCores = %u\n", m->levels[i].max_active_cores);
        }
        for (unsigned i = 0; i < m->n_idle; i++) {
                fprintf(f, "\n[IdleState]\nName = %s\nExitLatencyUs = %u\nTargetResidencyUs = %u\nPowerMW = %u\n",
                        m->idle[i].name, m->idle[i].exit_latency_us, m->idle[i].target_residency_us,
                        m->idle[i].power_mw);
                if (m->idle[i].wake_energy_uj)
                        fprintf(f, "WakeEnergyUJ = %u\n", m->idle[i].wake_energy_uj);
        }
        for (unsigned d = 0; d < _EM_DOMAIN_MAX; d++) {
                const struct em_idle_domain *x = &m->domain[d];
                if (!x->present)
                        continue;
                fprintf(f, "\n[IdleDomain]\nScope = %s\nAwakePowerMW = %u\nQuietPowerMW = %u\nAsleepPowerMW = %u\n"
                        "ExitLatencyUs = %u\nTargetResidencyUs = %u\n", domain_scope_names[d], x->awake_mw,
                        x->quiet_mw, x->asleep_mw, x->exit_latency_us, x->target_residency_us);
                if (x->wake_energy_uj)
                        fprintf(f, "WakeEnergyUJ = %u\n", x->wake_energy_uj);
        }
}

/* ---- defaults from a topology --------------------------------------------- */

static uint32_t default_active_mw(uint32_t f_khz, uint32_t fmax_khz)
{
        /* assumption: P(f) = Pmax * (static + (1 - static) * (f/fmax)^3), dynamic power ~ f * V^2 with V ~ f */
        double x = fmax_khz ? (double) f_khz / fmax_khz : 1.0;
        double s = DEFAULT_STATIC_PERMILLE / 1000.0;
        return (uint32_t) lround(DEFAULT_CORE_MAX_MW * (s + (1.0 - s) * x * x * x));
}

int energy_model_from_topology(const struct topology *t, struct energy_model *ret)
{
        struct energy_model m;
        const struct topo_cpu *c0 = NULL;
        uint32_t freqs[MAX(EM_MAX_LEVELS, TOPO_MAX_FREQS)];
        unsigned nf = 0;

        model_init_defaults(&m);
        snprintf(m.name, sizeof(m.name), "defaults");
        for (unsigned i = 0; i < t->n_cpus; i++)
                if (t->cpus[i].present && t->cpus[i].online) {
                        c0 = &t->cpus[i];
                        break;
                }
        if (!c0)
                return -ENODEV;

        /* Perf levels: the cpufreq table, else min..max in 7 steps plus base_frequency.  A 0 kHz
         * entry means nothing (and would be the divisor below): skipped.  A table longer than
         * EM_MAX_LEVELS gives EM_MAX_LEVELS entries spread evenly over it, the slowest and the
         * fastest included: the levels must reach the host's top speed (a lower top level would cap
         * the host, em_host_check() refuses it) and its bottom one (the light loads' saving). */
        if (c0->policy >= 0 && (unsigned) c0->policy < t->n_policies) {
                const struct topo_cpufreq_policy *p = &t->policies[c0->policy];
                if (p->n_freqs > 0) {
                        for (unsigned i = 0; i < p->n_freqs && i < TOPO_MAX_FREQS; i++)
                                if (p->freqs_khz[i] > 0 && (nf == 0 || p->freqs_khz[i] > freqs[nf - 1]))
                                        freqs[nf++] = p->freqs_khz[i];
                        if (nf > EM_MAX_LEVELS) {
                                /* level i: entry round(i (nf - 1) / (EM_MAX_LEVELS - 1)), at or after i (steps of
                                 * at least one entry, strictly increasing): read before it is overwritten */
                                const unsigned d = EM_MAX_LEVELS - 1;
                                for (unsigned i = 0; i <= d; i++)
                                        freqs[i] = freqs[(i * (nf - 1) + d / 2) / d];
                                nf = EM_MAX_LEVELS;
                        }
                } else if (p->cpuinfo_max_khz > 0) {
                        /* The host's range: hosts with favoured cores (Turbo Boost Max 3.0) publish a higher
                         * cpuinfo_max_freq on some policies; the top level is the highest (em_host_check()). */
                        uint32_t hi = p->cpuinfo_max_khz, lo;
                        for (unsigned i = 0; i < t->n_cpus; i++) {
                                const struct topo_cpu *c = &t->cpus[i];
                                if (c->present && c->online && c->policy >= 0 && (unsigned) c->policy < t->n_policies &&
                                    t->policies[c->policy].n_freqs == 0 &&
                                    t->policies[c->policy].cpuinfo_min_khz <= t->policies[c->policy].cpuinfo_max_khz)
                                        hi = MAX(hi, t->policies[c->policy].cpuinfo_max_khz);
                        }
                        lo = p->cpuinfo_min_khz && p->cpuinfo_min_khz <= hi ? p->cpuinfo_min_khz : hi;
                        for (unsigned i = 0; i <= 6; i++) {
                                uint32_t f = lo + (uint32_t) ((uint64_t) (hi - lo) * i / 6);
                                if (i > 0 && i < 6)
                                        f = (f + 50000) / 100000 * 100000;
                                if (p->base_khz > 0 && (nf == 0 || freqs[nf - 1] < p->base_khz) && f > p->base_khz)
                                        freqs[nf++] = p->base_khz;
                                if (nf == 0 || f > freqs[nf - 1])
                                        freqs[nf++] = f;
                        }
                }
        }
        if (nf == 0) {
                m.n_levels = 1;
                m.levels[0] = (struct em_perf_level) { 0, EM_CAPACITY_SCALE, DEFAULT_CORE_MAX_MW, 0 };
        } else {
                uint32_t fmax = freqs[nf - 1];
                unsigned n = 0;
                for (unsigned i = 0; i < nf; i++) {
                        uint32_t cap = (uint32_t) (((uint64_t) freqs[i] * EM_CAPACITY_SCALE + fmax / 2) / fmax);
                        if (cap == 0)
                                cap = 1;
                        if (n > 0 && cap <= m.levels[n - 1].capacity)
                                continue;
                        m.levels[n++] = (struct em_perf_level) { freqs[i], cap, default_active_mw(freqs[i], fmax), 0 };
                }
                m.n_levels = n;
        }

        /* Idle states: cpuidle of the first online CPU without POLL (a busy loop, not a power state). */
        uint32_t shallow_mw = (uint32_t) ((uint64_t) m.levels[0].active_mw * DEFAULT_SHALLOW_IDLE_PERMILLE / 1000);
        uint32_t deep_mw = DEFAULT_CORE_MAX_MW * DEFAULT_DEEP_IDLE_PERMILLE / 1000;
        for (unsigned i = 0; i < c0->n_idle_states && m.n_idle < EM_MAX_IDLE_STATES; i++) {
                const struct topo_idle_state *s = &c0->idle[i];
                struct em_idle_state *d = &m.idle[m.n_idle];
                if (streq_(s->name, "POLL"))
                        continue;
                snprintf(d->name, sizeof(d->name), "%s", s->name[0] ? s->name : "state");
                for (char *x = d->name; *x; x++)
                        if (!((*x >= 'a' && *x <= 'z') || (*x >= 'A' && *x <= 'Z') || (*x >= '0' && *x <= '9') ||
                              *x == '-' || *x == '.'))
                                *x = '_';
                d->exit_latency_us = s->exit_latency_us;
                d->target_residency_us = MAX(s->target_residency_us, s->exit_latency_us);
                if (m.n_idle > 0) {
                        /* keep the model's ordering rule even if the kernel table is odd */
                        d->exit_latency_us = MAX(d->exit_latency_us, m.idle[m.n_idle - 1].exit_latency_us);
                        d->target_residency_us = MAX(d->target_residency_us,
                                                     m.idle[m.n_idle - 1].target_residency_us);
                }
                d->power_mw = d->target_residency_us >= DEFAULT_DEEP_RESIDENCY_US ? deep_mw : shallow_mw;
                if (s->has_power && s->power_mw <= m.levels[0].active_mw)
                        d->power_mw = s->power_mw; /* the kernel's number, when it publishes one */
                if (m.n_idle > 0 && d->power_mw > m.idle[m.n_idle - 1].power_mw)
                        d->power_mw = m.idle[m.n_idle - 1].power_mw;
                m.n_idle++;
        }
        /* Interpolate shallow states between the first and a deep last state (geometric). */
        if (m.n_idle >= 3 && m.idle[m.n_idle - 1].power_mw < m.idle[0].power_mw) {
                double a = m.idle[0].power_mw, z = m.idle[m.n_idle - 1].power_mw;
                for (unsigned i = 1; i + 1 < m.n_idle; i++)
                        if (m.idle[i].power_mw == m.idle[0].power_mw)
                                m.idle[i].power_mw = (uint32_t) lround(a * pow(z / a, 0.5 * i / (m.n_idle - 1)));
        }
        if (m.n_idle == 0) {
                /* assumption: HLT (C1) exists on every x86 CPU */
                m.idle[0] = (struct em_idle_state) { "C1", 1, 1, shallow_mw, 0 };
                m.n_idle = 1;
        }

        /* Idle domains: LLC when it is smaller than the package (CCX), and the package. */
        const struct em_idle_state *deep = &m.idle[m.n_idle - 1];
        if (t->n_llcs > t->n_packages && t->n_llcs < t->n_cores)
                m.domain[EM_DOMAIN_LLC] = (struct em_idle_domain) {
                        true, DEFAULT_LLC_AWAKE_MW, DEFAULT_LLC_AWAKE_MW, DEFAULT_LLC_ASLEEP_MW,
                        deep->exit_latency_us + deep->exit_latency_us / 2,
                        2 * deep->target_residency_us, 0 };
        m.domain[EM_DOMAIN_PACKAGE] = (struct em_idle_domain) {
                true, DEFAULT_PKG_AWAKE_MW, DEFAULT_PKG_QUIET_MW, DEFAULT_PKG_ASLEEP_MW,
                2 * deep->exit_latency_us, 4 * deep->target_residency_us, 0 };
        /* Intel Xeon up to Emerald Rapids: PC6 only when every socket's cores are in CC6. */
        m.package_idle_all_packages = streq_(t->cpuidle_driver, "intel_idle") && t->n_packages > 1;

        if (energy_model_validate(&m, NULL) < 0)
                return -EINVAL;
        *ret = m;
        return 0;
}

/* ---- the model bound to a topology ---------------------------------------- */

static double gap_fraction(const struct energy_model *m, unsigned n, uint32_t r_us);
static uint32_t gap_residency(const struct energy_model *m, unsigned j);

void em_host_free(struct em_host *h)
{
        if (!h)
                return;
        free(h->cpu_core);
        free(h->cpu_thread);
        free(h->cpu_fdom);
        free(h->cpu_node);
        free(h->cores);
        free(h->llcs);
        free(h->pkgs);
        free(h->order_smt_first);
        free(h->order_cores_first);
        free(h->gapf);
        free(h);
}

static unsigned uf_find(unsigned *parent, unsigned x)
{
        while (parent[x] != x) {
                parent[x] = parent[parent[x]];
                x = parent[x];
        }
        return x;
}

static void uf_union(unsigned *parent, unsigned a, unsigned b)
{
        a = uf_find(parent, a);
        b = uf_find(parent, b);
        if (a != b)
                parent[MAX(a, b)] = MIN(a, b);
}

struct core_key {
        int pkg, llc, core_id, first_cpu;
};

static int cmp_core_key(const void *a, const void *b)
{
        const struct core_key *x = a, *y = b;
        if (x->pkg != y->pkg)
                return x->pkg < y->pkg ? -1 : 1;
        if (x->llc != y->llc)
                return x->llc < y->llc ? -1 : 1;
        if (x->core_id != y->core_id)
                return x->core_id < y->core_id ? -1 : 1;
        return x->first_cpu < y->first_cpu ? -1 : x->first_cpu > y->first_cpu;
}

/*
 * em_host_new(), step 1: the cores.  The first online CPU of each SMT sibling
 * set stands for its core: one key per core in keys_[] (n_cpus of room),
 * sorted by package, LLC, core id.  Sets every h->cpu_core[] to -1 and counts
 * h->n_online.  Returns the number of cores, or -ENODEV if there is none.
 */
static int em_host_core_keys(struct em_host *h, const struct topology *t, struct core_key *keys_)
{
        unsigned n = t->n_cpus, nc = 0;

        for (unsigned i = 0; i < n; i++)
                h->cpu_core[i] = -1;
        for (unsigned i = 0; i < n; i++) {
                const struct topo_cpu *c = &t->cpus[i];
                int first = -1;
                if (!c->present || !c->online)
                        continue;
                h->n_online++;
                CPUSET_FOREACH(s, &c->smt_siblings)
                        if ((unsigned) s < n && t->cpus[s].online) {
                                first = s;
                                break;
                        }
                if (first != (int) i)
                        continue;
                keys_[nc++] = (struct core_key) { c->package_id, c->llc_id, c->core_id, (int) i };
        }
        if (nc == 0)
                return -ENODEV;
        qsort(keys_, nc, sizeof(*keys_), cmp_core_key);
        return (int) nc;
}

/*
 * Step 2: h->cores, h->llcs and h->pkgs in key order (an LLC or a package is a
 * range of cores), each online CPU's core and thread (at most two threads a
 * core; a third is not modelled and leaves h->n_online, and so does a CPU
 * whose first sibling's core does not take it).  The first key always makes a
 * core (its CPU is in none yet).
 */
static int em_host_fill_cores(struct em_host *h, const struct topology *t, const struct core_key *keys_, unsigned nc)
{
        unsigned n = t->n_cpus, prev = 0;

        h->cores = calloc(nc, sizeof(*h->cores));
        h->llcs = calloc(nc, sizeof(*h->llcs));
        h->pkgs = calloc(nc, sizeof(*h->pkgs));
        h->order_smt_first = malloc(sizeof(int) * h->n_online);
        h->order_cores_first = malloc(sizeof(int) * h->n_online);
        if (!h->cores || !h->llcs || !h->pkgs || !h->order_smt_first || !h->order_cores_first)
                return -ENOMEM;
        for (unsigned i = 0; i < nc; i++) {
                const unsigned k = h->n_cores; /* the core being filled */
                struct em_core *core = &h->cores[k];
                const struct topo_cpu *c = &t->cpus[keys_[i].first_cpu];
                bool new_pkg, new_llc;

                core->cpu[0] = core->cpu[1] = -1;
                /* A CPU already in a core is not taken again: sibling lists that disagree (topology_load()
                 * makes them agree; a hand-made topology may not) would put it in two cores, and the wake
                 * orders (n_online long) would overflow.  A core left without a thread is none. */
                CPUSET_FOREACH(s, &c->smt_siblings) {
                        if ((unsigned) s >= n || !t->cpus[s].online || h->cpu_core[s] >= 0 || core->n_threads >= 2)
                                continue;
                        core->cpu[core->n_threads] = s;
                        h->cpu_core[s] = (int) k;
                        h->cpu_thread[s] = core->n_threads;
                        core->n_threads++;
                }
                if (core->n_threads == 0)
                        continue;
                new_pkg = k == 0 || keys_[i].pkg != keys_[prev].pkg;
                new_llc = new_pkg || keys_[i].llc != keys_[prev].llc;
                if (new_pkg) {
                        if (h->n_pkgs > 0)
                                h->pkgs[h->n_pkgs - 1].end = k;
                        h->pkgs[h->n_pkgs++].first = k;
                }
                if (new_llc) {
                        if (h->n_llcs > 0)
                                h->llcs[h->n_llcs - 1].end = k;
                        h->llcs[h->n_llcs++].first = k;
                }
                core->pkg = h->n_pkgs - 1;
                core->llc = h->n_llcs - 1;
                prev = i;
                h->n_cores++;
        }
        h->pkgs[h->n_pkgs - 1].end = h->n_cores;
        h->llcs[h->n_llcs - 1].end = h->n_cores;
        /* Online CPUs outside every core (a third SMT thread): not modelled. */
        for (unsigned i = 0; i < n; i++)
                if (t->cpus[i].present && t->cpus[i].online && h->cpu_core[i] < 0)
                        h->n_online--;
        return 0;
}

/*
 * Step 3: frequency domains, the union of related_cpus, SMT siblings (core
 * scope) and packages (package scope); numbered in core order so that output
 * is stable and readable.
 */
static int em_host_freq_domains(struct em_host *h, const struct topology *t, const struct energy_model *m)
{
        unsigned n = t->n_cpus, nc = h->n_cores;
        _cleanup_free_ unsigned *parent = malloc(sizeof(unsigned) * (n ? n : 1));
        _cleanup_free_ int *fdom_of_root = malloc(sizeof(int) * (n ? n : 1));

        if (!parent || !fdom_of_root)
                return -ENOMEM;
        for (unsigned i = 0; i < n; i++)
                parent[i] = i;
        for (unsigned i = 0; i < n; i++) {
                const struct topo_cpu *c = &t->cpus[i];
                if (h->cpu_core[i] < 0)
                        continue;
                if (c->policy >= 0 && (unsigned) c->policy < t->n_policies)
                        CPUSET_FOREACH(s, &t->policies[c->policy].related_cpus)
                                if ((unsigned) s < n && h->cpu_core[s] >= 0)
                                        uf_union(parent, i, (unsigned) s);
                if (m->freq_scope >= EM_FREQ_CORE) {
                        const struct em_core *core = &h->cores[h->cpu_core[i]];
                        uf_union(parent, i, (unsigned) core->cpu[0]);
                }
                if (m->freq_scope == EM_FREQ_PACKAGE) {
                        const struct em_core *core = &h->cores[h->cpu_core[i]];
                        uf_union(parent, i, (unsigned) h->cores[h->pkgs[core->pkg].first].cpu[0]);
                }
        }
        for (unsigned i = 0; i < n; i++)
                fdom_of_root[i] = -1;
        for (unsigned k = 0; k < nc; k++)
                for (unsigned th = 0; th < h->cores[k].n_threads; th++) {
                        unsigned cpu = (unsigned) h->cores[k].cpu[th], root = uf_find(parent, cpu);
                        if (fdom_of_root[root] < 0)
                                fdom_of_root[root] = (int) h->n_fdoms++;
                        h->cpu_fdom[cpu] = (unsigned) fdom_of_root[root];
                }
        for (unsigned k = 0; k < nc; k++)
                h->cores[k].fdom = h->cpu_fdom[h->cores[k].cpu[0]];
        return 0;
}

/*
 * Step 4: what evaluations look up: the wake orders (static topology
 * preference; the planner still evaluates the model), whether the model has
 * limits and wake energies, and the idle-gap fractions for small vCPU counts
 * (exp() is the costly part of an evaluation).
 */
static int em_host_precompute(struct em_host *h, const struct energy_model *m)
{
        unsigned a = 0, b = 0, nj = m->n_idle + _EM_DOMAIN_MAX;

        for (unsigned k = 0; k < h->n_cores; k++)
                for (unsigned th = 0; th < h->cores[k].n_threads; th++)
                        h->order_smt_first[a++] = h->cores[k].cpu[th];
        for (unsigned l = 0; l < h->n_llcs; l++)
                for (unsigned th = 0; th < 2; th++)
                        for (unsigned k = h->llcs[l].first; k < h->llcs[l].end; k++)
                                if (th < h->cores[k].n_threads)
                                        h->order_cores_first[b++] = h->cores[k].cpu[th];
        h->has_limits = m->package_power_limit_mw > 0;
        for (unsigned i = 0; i < m->n_levels; i++)
                h->has_limits |= m->levels[i].max_active_cores > 0;
        for (unsigned i = 0; i < m->n_idle; i++)
                h->has_wake |= m->idle[i].wake_energy_uj > 0;
        for (unsigned d = 0; d < _EM_DOMAIN_MAX; d++)
                h->has_wake |= m->domain[d].present && m->domain[d].wake_energy_uj > 0;
        h->gapf = malloc(sizeof(double) * EM_GAPF_N * nj);
        if (!h->gapf)
                return -ENOMEM;
        for (unsigned g = 0; g < EM_GAPF_N; g++)
                for (unsigned j = 0; j < nj; j++)
                        h->gapf[g * nj + j] = gap_fraction(m, g, gap_residency(m, j));
        return 0;
}

/*
 * The model meets the host's cpufreq.  The levels are one table for every frequency domain; the
 * planner writes a level's frequency as the domain's scaling_max_freq (the power driver clamps it
 * into the policy's cpuinfo range).  So: a level below a policy's cpuinfo_min_freq is a speed that
 * policy cannot run at, and one above the host's highest cpuinfo_max_freq one no CPU can; a top
 * level below the highest cpuinfo_max_freq would hold every busy CPU below the host's top speed
 * for good, silently, which is never what the operator of a KVM host wants: all three are errors
 * at load, not warnings.  A level above one policy's cpuinfo_max_freq but within the host's is
 * allowed: hosts with favoured cores (Turbo Boost Max 3.0) publish a higher maximum on some
 * policies, and the others run such a level at their own maximum.  Frequencies are compared
 * exactly (kHz, as cpufreq publishes them).
 */
/* The cpufreq policy of CPU i if it is present and online, else NULL. */
static const struct topo_cpufreq_policy *online_policy(const struct topology *t, unsigned i)
{
        const struct topo_cpu *c = &t->cpus[i];

        if (!c->present || !c->online || c->policy < 0 || (unsigned) c->policy >= t->n_policies)
                return NULL;
        return &t->policies[c->policy];
}

int em_host_check(const struct topology *t, const struct energy_model *m, struct em_error *err)
{
        const struct topo_cpufreq_policy *top = NULL;
        uint32_t top_khz;

        if (err)
                memset(err, 0, sizeof(*err));
        if (t->synthetic || m->n_levels == 0 || (m->n_levels == 1 && m->levels[0].freq_khz == 0))
                return 0;
        /* the host's highest cpuinfo_max_freq over the policies of online CPUs */
        for (unsigned i = 0; i < t->n_cpus; i++) {
                const struct topo_cpufreq_policy *p = online_policy(t, i);

                if (p && p->cpuinfo_max_khz > 0 && (!top || p->cpuinfo_max_khz > top->cpuinfo_max_khz))
                        top = p;
        }
        if (!top)
                return 0; /* no cpufreq (or it publishes no range): the levels are not written */
        top_khz = m->levels[m->n_levels - 1].freq_khz;
        for (unsigned i = 0; i < t->n_cpus; i++) {
                const struct topo_cpufreq_policy *p = online_policy(t, i);

                if (!p || p->cpuinfo_max_khz == 0)
                        continue;
                for (unsigned l = 0; l < m->n_levels; l++) {
                        uint32_t f = m->levels[l].freq_khz;
                        if (f < p->cpuinfo_min_khz) {
                                verr(err, 0, "model %s: PerfLevel %u (%u kHz) below this host's cpufreq range %u..%u kHz "
                                     "(policy%u cpuinfo_min_freq): a model of another host type?", m->name, l + 1, f,
                                     p->cpuinfo_min_khz, top->cpuinfo_max_khz, p->id);
                                return -ERANGE;
                        }
                        if (f > top->cpuinfo_max_khz) {
                                verr(err, 0, "model %s: PerfLevel %u (%u kHz) above this host's cpufreq range %u..%u kHz "
                                     "(policy%u cpuinfo_max_freq): a model of another host type?", m->name, l + 1, f,
                                     top->cpuinfo_min_khz, top->cpuinfo_max_khz, top->id);
                                return -ERANGE;
                        }
                }
        }
        if (top_khz < top->cpuinfo_max_khz) {
                verr(err, 0, "model %s: top PerfLevel (%u kHz) below this host's cpufreq range %u..%u kHz "
                     "(policy%u cpuinfo_max_freq): every plan would cap the host at %u kHz; the model needs a "
                     "level at %u kHz", m->name, top_khz, top->cpuinfo_min_khz, top->cpuinfo_max_khz, top->id,
                     top_khz, top->cpuinfo_max_khz);
                return -ERANGE;
        }
        return 0;
}

int em_host_new(const struct topology *t, const struct energy_model *m, struct em_host **ret)
{
        _cleanup_free_ struct core_key *keys_ = NULL;
        unsigned n = t->n_cpus;
        struct em_error err;
        struct em_host *h;
        int r = -ENOMEM;

        if (energy_model_validate(m, NULL) < 0)
                return -EINVAL;
        r = em_host_check(t, m, &err);
        if (r < 0)
                return log_error_errno(r, "%s", err.message);
        r = -ENOMEM;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->model = *m;
        h->n_cpus = n;
        h->cpu_core = malloc(sizeof(int) * (n ? n : 1));
        h->cpu_thread = calloc(n ? n : 1, sizeof(int));
        h->cpu_fdom = calloc(n ? n : 1, sizeof(unsigned));
        h->cpu_node = malloc(sizeof(int) * (n ? n : 1));
        keys_ = calloc(n ? n : 1, sizeof(*keys_));
        if (!h->cpu_core || !h->cpu_thread || !h->cpu_fdom || !h->cpu_node || !keys_)
                goto fail;
        for (unsigned i = 0; i < n; i++)
                h->cpu_node[i] = t->cpus[i].present && t->cpus[i].online ? t->cpus[i].node : -1;

        r = em_host_core_keys(h, t, keys_);
        if (r >= 0)
                r = em_host_fill_cores(h, t, keys_, (unsigned) r);
        if (r >= 0)
                r = em_host_freq_domains(h, t, m);
        if (r >= 0)
                r = em_host_precompute(h, m);
        if (r < 0)
                goto fail;
        *ret = h;
        return 0;
fail:
        em_host_free(h);
        return r;
}

int em_deepest_idle(const struct energy_model *m, uint32_t max_latency_us, uint32_t max_residency_us)
{
        int best = -1;
        for (unsigned i = 0; i < m->n_idle; i++)
                if (m->idle[i].exit_latency_us <= max_latency_us &&
                    m->idle[i].target_residency_us <= max_residency_us)
                        best = (int) i;
        return best;
}

struct core_eval {
        double power_mw, active_mw, idle_mw, wake_mw;
        double busy, idle;     /* busy and idle fractions */
        bool deep_ok;          /* the deepest core state is within the latency limits */
        unsigned vcpus;
        unsigned level;        /* the level it was evaluated at */
        uint32_t min_latency_us;
};

/*
 * Share of the idle time of a group hosting n vCPUs that falls in idle gaps
 * of at least r_us.  Each vCPU wakes its CPU as a Poisson process of mean
 * interval I = ActiveIdleIntervalUs, so the group's wake-ups have rate n/I,
 * its gaps are exponential, and the time in gaps >= r is e^-x (1 + x) with
 * x = n r / I of the idle time.  n == 0: nothing wakes it, every gap is long.
 */
/* Residency index j: idle state j, or n_idle + domain scope. */
static uint32_t gap_residency(const struct energy_model *m, unsigned j)
{
        return j < m->n_idle ? m->idle[j].target_residency_us : m->domain[j - m->n_idle].target_residency_us;
}

static double host_gap(const struct em_host *h, unsigned n, unsigned j)
{
        if (n < EM_GAPF_N)
                return h->gapf[n * (h->model.n_idle + _EM_DOMAIN_MAX) + j];
        return gap_fraction(&h->model, n, gap_residency(&h->model, j));
}

static double gap_fraction(const struct energy_model *m, unsigned n, uint32_t r_us)
{
        double x;
        if (n == 0)
                return 1.0;
        if (m->active_idle_interval_us == 0)
                return 0.0;
        x = (double) n * r_us / m->active_idle_interval_us;
        return exp(-x) * (1.0 + x);
}

/*
 * Busy fraction of a 2-thread core whose threads need d0 and d1 of a
 * thread's capacity (their work at the core's level, busy fractions if they
 * ran alone).  While both threads are busy each runs at SmtGain / 2 of that
 * capacity (the evsim's rule), so the overlap o stretches both threads:
 * t_i = d_i + k o with k = 1 - g / 2, and with independent busy periods
 * o = t0 t1.  The smaller root of k^2 o^2 + (k (d0 + d1) - 1) o + d0 d1 = 0
 * gives the core's busy time t0 + t1 - o; no root (or a thread over 1) means
 * the work does not fit: the core is busy all the time.  g = 2 is two
 * independent CPUs (1 - (1 - d0)(1 - d1)); the result is never below
 * (d0 + d1) / g, the throughput limit.
 */
bool smt_thread_busy(double d0, double d1, double g, double *t0, double *t1, double *overlap)
{
        double k = 1.0 - g / 2.0, o, disc, b;

        *t0 = *t1 = *overlap = 1.0;
        if (k < 0.0)
                k = 0.0;
        b = 1.0 - k * (d0 + d1);
        disc = b * b - 4.0 * k * k * d0 * d1;
        if (b <= 0.0 || disc < 0.0)
                return false;
        o = 2.0 * d0 * d1 / (b + sqrt(disc)); /* the smaller root, stable form */
        if (d0 + k * o >= 1.0 || d1 + k * o >= 1.0)
                return false;
        *t0 = d0 + k * o;
        *t1 = d1 + k * o;
        *overlap = o;
        return true;
}

double smt_core_busy(double d0, double d1, double g)
{
        double t0, t1, o, b;

        if (!smt_thread_busy(d0, d1, g, &t0, &t1, &o))
                return 1.0;
        b = t0 + t1 - o;
        return b > 1.0 ? 1.0 : b;
}

/*
 * Wake-up power of a group woken by n vCPUs (rate n / I) during its idle share `idle`,
 * sleeping in gaps of at least r_us (energy e_uj per wake-up from there): the
 * wake-ups that end such a gap, n / I x e^(-n r / I) per us of idle time.  mW.
 */
static double wake_rate_mw(const struct energy_model *m, unsigned n, double idle, uint32_t r_us, uint32_t e_uj)
{
        double lambda;

        if (n == 0 || e_uj == 0 || idle <= 0.0 || m->active_idle_interval_us == 0)
                return 0.0;
        lambda = (double) n / m->active_idle_interval_us;  /* per us */
        return idle * lambda * exp(-lambda * r_us) * e_uj * 1000.0; /* uJ/us = W */
}

#define EM_CORE_MEMO_SLOTS 256
struct em_core_slot {
        uint64_t w0, w1;        /* the threads' work, bits (w1 0 for a 1-thread core) */
        uint32_t lat;           /* the least latency limit of the threads */
        unsigned vcpus;         /* the threads' vCPUs */
        uint8_t level, n_threads;
        bool wake_given, used;
        struct core_eval e;
};
struct em_core_memo {
        unsigned n_slots;
        unsigned long hits, misses;
        struct em_core_slot slot[];
};

struct em_core_memo *em_core_memo_new(unsigned slots)
{
        struct em_core_memo *m;

        if (slots == 0)
                slots = EM_CORE_MEMO_SLOTS;
        m = calloc(1, sizeof(*m) + slots * sizeof(m->slot[0]));
        if (m)
                m->n_slots = slots;
        return m;
}

void em_core_memo_free(struct em_core_memo *m)
{
        free(m);
}

void em_core_memo_counts(const struct em_core_memo *m, unsigned long *hits, unsigned long *misses)
{
        *hits = m ? m->hits : 0;
        *misses = m ? m->misses : 0;
}

static void eval_core_compute(const struct em_host *h, const struct em_load *l, unsigned k, unsigned level,
                              struct core_eval *e);

static void eval_core_at(const struct em_host *h, const struct em_load *l, unsigned k, int level_override,
                         int level_cap, struct core_eval *e)
{
        const struct energy_model *m = &h->model;
        const struct em_core *c = &h->cores[k];
        unsigned level = 0;

        for (unsigned t = 0; t < c->n_threads; t++) {
                unsigned lv = l->fdom_level[h->cpu_fdom[c->cpu[t]]];
                level = MAX(level, lv);
        }
        if (level_override >= 0)
                level = (unsigned) level_override;
        if (level_cap >= 0 && level > (unsigned) level_cap)
                level = (unsigned) level_cap;
        if (level >= m->n_levels)
                level = m->n_levels - 1;
        if (l->memo && c->n_threads >= 1 && c->n_threads <= 2) {
                /* everything eval_core_compute() reads of the load: the rest is the host's */
                struct em_core_memo *mm = l->memo;
                uint64_t w0, w1 = 0, hsh;
                uint32_t lat = l->cpu_max_latency_us[c->cpu[0]];
                unsigned vc = l->cpu_vcpus[c->cpu[0]];
                memcpy(&w0, &l->cpu_work[c->cpu[0]], sizeof(w0));
                if (c->n_threads == 2) {
                        memcpy(&w1, &l->cpu_work[c->cpu[1]], sizeof(w1));
                        lat = MIN(lat, l->cpu_max_latency_us[c->cpu[1]]);
                        vc += l->cpu_vcpus[c->cpu[1]];
                }
                hsh = (w0 ^ (w1 * 0xff51afd7ed558ccdULL) ^ ((uint64_t) vc << 40) ^ ((uint64_t) lat << 8) ^ level) *
                      0x9e3779b97f4a7c15ULL;
                struct em_core_slot *x = &mm->slot[(unsigned) (((hsh >> 32) * mm->n_slots) >> 32)];
                if (x->used && x->w0 == w0 && x->w1 == w1 && x->lat == lat && x->vcpus == vc && x->level == level &&
                    x->n_threads == c->n_threads && x->wake_given == l->wake_given) {
                        mm->hits++;
                        *e = x->e;
                        return;
                }
                mm->misses++;
                eval_core_compute(h, l, k, level, e);
                x->w0 = w0;
                x->w1 = w1;
                x->lat = lat;
                x->vcpus = vc;
                x->level = (uint8_t) level;
                x->n_threads = (uint8_t) c->n_threads;
                x->wake_given = l->wake_given;
                x->used = true;
                x->e = *e;
                return;
        }
        eval_core_compute(h, l, k, level, e);
}

/* The core's figures at level (resolved by eval_core_at()). */
static void eval_core_compute(const struct em_host *h, const struct em_load *l, unsigned k, unsigned level,
                              struct core_eval *e)
{
        const struct energy_model *m = &h->model;
        const struct em_core *c = &h->cores[k];
        double idle_prod = 1.0, cap, p_idle;
        int s;

        e->vcpus = 0;
        e->wake_mw = 0.0;
        e->min_latency_us = EM_LATENCY_ANY;
        e->level = level;
        cap = m->levels[level].capacity;
        double d[2] = { 0.0, 0.0 };
        for (unsigned t = 0; t < c->n_threads; t++) {
                int cpu = c->cpu[t];
                double b = l->cpu_work[cpu] * EM_CAPACITY_SCALE / cap;
                if (b > 1.0)
                        b = 1.0;
                if (b < 0.0)
                        b = 0.0;
                if (t < 2)
                        d[t] = b;
                idle_prod *= 1.0 - b;
                e->vcpus += l->cpu_vcpus[cpu];
                e->min_latency_us = MIN(e->min_latency_us, l->cpu_max_latency_us[cpu]);
        }
        if (c->n_threads == 2 && d[0] > 0.0 && d[1] > 0.0)
                idle_prod = 1.0 - smt_core_busy(d[0], d[1], m->smt_gain_permille / 1000.0);
        e->busy = 1.0 - idle_prod;
        s = em_deepest_idle(m, e->min_latency_us, UINT32_MAX);
        if (s < 0)
                p_idle = m->levels[0].active_mw; /* no state allowed: the CPU polls */
        else {
                /* Idle time split by gap length: gaps >= R_i are spent in state i (or deeper). */
                double upper = 1.0;
                p_idle = 0.0;
                for (int i = s; i >= 0; i--) {
                        double f = i == 0 ? 1.0 : host_gap(h, e->vcpus, (unsigned) i);
                        if (f > 1.0)
                                f = 1.0;
                        p_idle += (f - (i == s ? 0.0 : upper)) * m->idle[i].power_mw;
                        upper = f;
                }
                /* Wake-ups: a gap of length in [R_i, R_i+1) ends with an exit from state i. */
                if (h->has_wake && !l->wake_given)
                        for (int i = 0; i <= s; i++) {
                                uint32_t e_uj = m->idle[i].wake_energy_uj;
                                if (!e_uj)
                                        continue;
                                double w = wake_rate_mw(m, e->vcpus, idle_prod, i ? m->idle[i].target_residency_us : 0,
                                                        e_uj);
                                if (i < s)
                                        w -= wake_rate_mw(m, e->vcpus, idle_prod, m->idle[i + 1].target_residency_us,
                                                          e_uj);
                                e->wake_mw += w;
                        }
        }
        e->active_mw = e->busy * m->levels[level].active_mw;
        e->idle_mw = idle_prod * p_idle;
        e->power_mw = e->active_mw + e->idle_mw + e->wake_mw;
        e->deep_ok = s == (int) m->n_idle - 1;
        e->idle = idle_prod;
}

double em_core_power_at(const struct em_host *h, const struct em_load *l, unsigned core, unsigned level)
{
        struct core_eval e;
        eval_core_at(h, l, core, (int) level, -1, &e);
        /* the core's share of the platform's busy power, as em_host_power() charges it (the PSU
         * efficiency scales every term alike and does not change which level is cheapest) */
        return e.power_mw + (h->n_cores ? e.busy * h->model.platform_busy_mw / h->n_cores : 0.0);
}

unsigned em_turbo_level(const struct energy_model *m, double busy_cores)
{
        unsigned L = m->n_levels - 1;

        /* MaxActiveCores does not increase with the level: the first level that allows it, from the top */
        while (L > 0 && m->levels[L].max_active_cores && busy_cores > m->levels[L].max_active_cores + 1e-9)
                L--;
        return L;
}

double em_wall_mw(const struct energy_model *m, double dc_mw, double busy_share)
{
        double plat = m->platform_mw + m->platform_busy_mw * (busy_share < 0 ? 0 : busy_share > 1 ? 1 : busy_share);
        return (dc_mw + plat) * 1000.0 / m->psu_efficiency_permille;
}

static double domain_power(const struct em_idle_domain *d, double q, double a)
{
        return (1.0 - q) * d->awake_mw + (q - a) * d->quiet_mw + a * d->asleep_mw;
}

/*
 * Power of one idle domain over cores with all-idle fraction idle_all, n vCPUs, latency limit lat;
 * *wake_mw: its wake-ups from the deep state (the rate model; 0 when the load gives its own).
 */
static double domain_term(const struct em_host *h, const struct em_load *l, enum em_domain_scope scope,
                          double idle_all, bool deep_ok, unsigned n, uint32_t lat, double asleep_override,
                          double *wake_mw)
{
        const struct energy_model *m = &h->model;
        const struct em_idle_domain *d = &m->domain[scope];
        double q = deep_ok ? idle_all * host_gap(h, n, m->n_idle - 1) : 0.0;
        double a;

        if (asleep_override >= 0.0)
                a = asleep_override;
        else
                a = deep_ok && d->exit_latency_us <= lat ? idle_all * host_gap(h, n, m->n_idle + scope) : 0.0;
        if (a > q)
                a = q;
        *wake_mw = 0.0;
        if (d->wake_energy_uj && !l->wake_given && a > 0.0 && idle_all > 0.0) {
                /* the wake-ups ending a gap >= R_d; as a / idle_all is the time share of those gaps */
                double w = wake_rate_mw(m, n, idle_all, d->target_residency_us, d->wake_energy_uj);
                double a_own = idle_all * host_gap(h, n, m->n_idle + scope);
                *wake_mw = a_own > 0.0 && a < a_own ? w * a / a_own : w;
        }
        return domain_power(d, q, a);
}

struct pkg_eval {
        double active_mw, idle_mw, wake_mw, llc_mw;
        double idle_pkg, busy_cores;
        bool ok;
        unsigned n, top_used;
        uint32_t lat;
};

/* The cores and LLC domains of package p, levels capped at cap (-1: none). */
static void eval_package(const struct em_host *h, const struct em_load *l, unsigned p, int cap, struct pkg_eval *pe)
{
        const struct em_idle_domain *dl = &h->model.domain[EM_DOMAIN_LLC];
        unsigned k = h->pkgs[p].first;

        memset(pe, 0, sizeof(*pe));
        pe->idle_pkg = 1.0;
        pe->ok = true;
        pe->lat = EM_LATENCY_ANY;
        while (k < h->pkgs[p].end) {
                unsigned llc = h->cores[k].llc, end = h->llcs[llc].end;
                double idle_llc = 1.0;
                bool ok_llc = true;
                unsigned n_llc = 0;
                uint32_t lat_llc = EM_LATENCY_ANY;

                for (; k < end; k++) {
                        struct core_eval e;
                        eval_core_at(h, l, k, -1, cap, &e);
                        pe->active_mw += e.active_mw;
                        pe->idle_mw += e.idle_mw;
                        pe->wake_mw += e.wake_mw;
                        pe->busy_cores += e.busy;
                        if (e.busy > 0.0 && e.level > pe->top_used)
                                pe->top_used = e.level;
                        idle_llc *= e.idle;
                        ok_llc &= e.deep_ok;
                        n_llc += e.vcpus;
                        lat_llc = MIN(lat_llc, e.min_latency_us);
                }
                if (dl->present) {
                        double w;
                        pe->llc_mw += domain_term(h, l, EM_DOMAIN_LLC, idle_llc, ok_llc, n_llc, lat_llc, -1.0, &w);
                        pe->wake_mw += w;
                }
                pe->idle_pkg *= idle_llc;
                pe->ok &= ok_llc;
                pe->n += n_llc;
                pe->lat = MIN(pe->lat, lat_llc);
        }
}

#define DEFER_PKGS_MAX 64

/*
 * em_host_power() with, per package, the level cap that the turbo table and the
 * package power limit force (cap_out[p], -1: none; may be NULL).
 */
static double host_power(const struct em_host *h, const struct em_load *l, struct em_breakdown *b, int *cap_out)
{
        const struct energy_model *m = &h->model;
        struct em_breakdown sum = {};
        const struct em_idle_domain *dp = &m->domain[EM_DOMAIN_PACKAGE];
        bool all_pkgs = m->package_idle_all_packages && dp->present;
        bool limits = h->has_limits;
        /* With the all-packages rule the package terms need the whole host: they are
         * computed after the walk (one pass) when the packages fit this array. */
        struct { double idle; bool ok; unsigned n; uint32_t lat; } pk[DEFER_PKGS_MAX];
        bool defer = all_pkgs && h->n_pkgs <= DEFER_PKGS_MAX;
        double a_sys = -1.0, idle_sys = 1.0, busy_cores = 0.0, w;
        bool ok_sys = true;
        unsigned n_sys = 0;
        uint32_t lat_sys = EM_LATENCY_ANY;

        if (all_pkgs && !defer)
                for (unsigned k = 0; k < h->n_cores; k++) {
                        struct core_eval e;
                        eval_core_at(h, l, k, -1, -1, &e);
                        idle_sys *= e.idle;
                        ok_sys &= e.deep_ok;
                        n_sys += e.vcpus;
                        lat_sys = MIN(lat_sys, e.min_latency_us);
                }
        if (all_pkgs && !defer)
                a_sys = ok_sys && dp->exit_latency_us <= lat_sys
                                ? idle_sys * host_gap(h, n_sys, m->n_idle + EM_DOMAIN_PACKAGE) : 0.0;

        for (unsigned p = 0; p < h->n_pkgs; p++) {
                struct pkg_eval pe;
                int cap = -1;

                eval_package(h, l, p, -1, &pe);
                /*
                 * Turbo table and package power limit: the package runs at most at the
                 * level its busy cores allow, and lower until its power (cores, LLC
                 * domains and its own package domain, without the all-packages rule)
                 * is within the limit.  A lower level raises the busy time, so the
                 * busy cores are counted again at each step.
                 */
                while (limits) {
                        int next = -1;
                        unsigned tl = em_turbo_level(m, pe.busy_cores);
                        if (pe.top_used > tl)
                                next = (int) tl;
                        else if (m->package_power_limit_mw && pe.top_used > 0) {
                                double pw = pe.active_mw + pe.idle_mw + pe.wake_mw + pe.llc_mw;
                                if (dp->present)
                                        pw += domain_term(h, l, EM_DOMAIN_PACKAGE, pe.idle_pkg, pe.ok, pe.n, pe.lat,
                                                          -1.0, &w);
                                if (pw > m->package_power_limit_mw)
                                        next = (int) pe.top_used - 1;
                        }
                        if (next < 0)
                                break;
                        cap = next;
                        eval_package(h, l, p, cap, &pe);
                }
                if (cap_out)
                        cap_out[p] = cap;
                if (cap >= 0) {
                        if (sum.capped_pkgs == 0 || (unsigned) cap < sum.capped_level)
                                sum.capped_level = (unsigned) cap;
                        sum.capped_pkgs++;
                }
                sum.active_mw += pe.active_mw;
                sum.idle_mw += pe.idle_mw;
                sum.wake_mw += pe.wake_mw;
                sum.domain_mw += pe.llc_mw;
                busy_cores += pe.busy_cores;
                if (defer) {
                        pk[p].idle = pe.idle_pkg;
                        pk[p].ok = pe.ok;
                        pk[p].n = pe.n;
                        pk[p].lat = pe.lat;
                        idle_sys *= pe.idle_pkg;
                        ok_sys &= pe.ok;
                        n_sys += pe.n;
                        lat_sys = MIN(lat_sys, pe.lat);
                } else if (dp->present) {
                        sum.domain_mw += domain_term(h, l, EM_DOMAIN_PACKAGE, pe.idle_pkg, pe.ok, pe.n, pe.lat, a_sys, &w);
                        sum.wake_mw += w;
                }
        }
        if (defer) {
                a_sys = ok_sys && dp->exit_latency_us <= lat_sys
                                ? idle_sys * host_gap(h, n_sys, m->n_idle + EM_DOMAIN_PACKAGE) : 0.0;
                for (unsigned p = 0; p < h->n_pkgs; p++) {
                        sum.domain_mw += domain_term(h, l, EM_DOMAIN_PACKAGE, pk[p].idle, pk[p].ok, pk[p].n, pk[p].lat,
                                                     a_sys, &w);
                        sum.wake_mw += w;
                }
        }
        if (l->wake_given)
                sum.wake_mw = l->wake_mw > 0.0 ? l->wake_mw : 0.0;
        double dc = sum.active_mw + sum.idle_mw + sum.domain_mw + sum.wake_mw;
        sum.platform_mw = m->platform_mw + m->platform_busy_mw * (h->n_cores ? busy_cores / h->n_cores : 0.0);
        sum.total_mw = em_wall_mw(m, dc, h->n_cores ? busy_cores / h->n_cores : 0.0);
        sum.psu_loss_mw = sum.total_mw - dc - sum.platform_mw;
        if (b)
                *b = sum;
        return sum.total_mw;
}

double em_host_power(const struct em_host *h, const struct em_load *l, struct em_breakdown *b)
{
        return host_power(h, l, b, NULL);
}

double em_host_power_caps(const struct em_host *h, const struct em_load *l, struct em_breakdown *b, int *cap_out)
{
        return host_power(h, l, b, cap_out);
}

unsigned em_host_level_caps(const struct em_host *h, const struct em_load *l, int *cap_out)
{
        struct em_breakdown b;
        host_power(h, l, &b, cap_out);
        return b.capped_pkgs;
}
