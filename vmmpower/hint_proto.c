/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Guest hint protocol, host side (docs/protocol.md).  Pure: no I/O, no clock
 * reads; `now` is always passed in.
 *
 * Framing.  The guest writes short ASCII lines.  Bytes are accumulated until
 * '\n'.  A line may hold at most HINT_LINE_MAX - 1 = 127 bytes before its
 * newline; one byte more and the line is declared oversized and everything up
 * to the next '\n' is thrown away (resynchronisation).  A byte outside
 * 0x20..0x7e (NUL, CR, TAB, DEL, 8-bit) poisons its line the same way.  The
 * cost of a hostile guest is therefore bounded by the bytes it sends: no line
 * is ever buffered beyond 128 bytes and nothing is allocated per line.
 *
 * Parsing.  Exact upper-case keywords, fields separated by exactly one space,
 * numbers strict decimal (no sign, no leading zeros, at most 10 digits, then
 * range-checked).  An empty line is allowed and ignored: guests send one
 * before HELLO so that a host that connected in the middle of a line
 * resynchronises at once.
 *
 * Policy.  Hints are accepted only after HELLO with version 1.  A vCPU index is
 * checked against the count the host knows (never the guest's claim); a HELLO
 * claiming more vCPUs is clamped to the real count and counted.  Levels are
 * clamped to the VM's max_level, boosts to its boost cap.  trust=none rejects
 * every hint, trust=advisory keeps them for display and planning input but
 * never lets them trigger actuation, trust=full lets them trigger actuation
 * when the VM's token bucket has a token.
 *
 * Levels are state, not events: the guest re-sends its whole state about once
 * a second.  A LEVEL equal to the stored one only refreshes its timestamp and
 * takes no token, so the periodic re-send costs nothing; a change (LEVEL with
 * a new value, FASTER, SLOWER, BOOST) asks the bucket for a token.  With
 * trust=full a change that finds the bucket empty is dropped (counted
 * rate_limited; the guest's next re-send tries again): the bucket limits what
 * a guest can make the host do, not only how often it re-plans.  Advisory
 * hints have no effect on the host and need no token.
 *
 * Boosts.  A BOOST is clamped to boost_cap_ms, its effect to max_level (the
 * planner runs the vCPU's domain at no more than max_level for it; max_level 0
 * makes a boost a no-op), and it is paid from the VM's boost budget: a bucket
 * of boost time holding boost_cap_ms, refilled at boost_cap_ms per
 * boost_window (10 s by default, so at most 5% of the time boosted with the
 * default 500 ms cap, however often the guest asks).  Only the time a BOOST
 * adds to a running one is paid; what the budget cannot pay is refused
 * (boost_denied).
 *
 * Decay.  A level that is not refreshed fades exponentially towards "no hint":
 * effective = level * w with w = 2^(-age / half_life).  A silent guest (dead
 * agent, host end reconnecting) therefore asks for less and less, never more.
 * The default half-life of 2 s means it loses half its influence after two
 * missed re-sends and all of it (w = 0 after HINT_EXPIRY_HALF_LIVES = 8
 * half-lives, 16 s; 2^-8 < 0.4%) soon after.  w is also exported as the
 * hint's confidence.  A handshake that hears no line at all for HINT_STALE_NS
 * (5 s: five missed re-sends of powerhintd's 1 s period) is marked stale:
 * forgotten like at a disconnect (counted `stale`) until the next HELLO.
 *
 * Replies.  A HELLO is answered with WELCOME and the LIMIT of every vCPU; a
 * guest re-sends HELLO with every state batch, so repeats are answered at
 * most every HINT_WELCOME_INTERVAL_NS (a HELLO flood costs parsing, not
 * replies), the first one of a connection and the first after a policy
 * change at once.
 *
 * Defaults.  trust=advisory: a hint can never make the host spend energy
 * unless the administrator said so.  Rate 10/s with burst 20: the guest agent
 * sends at most one change per vCPU per sample (1 s) plus boosts, so a
 * well-behaved 8-vCPU guest fits and a misbehaving one can wake the planner at
 * most 10 times a second.  Boost cap 500 ms: longer than a typical
 * interactive burst, short enough that a stuck boost costs little.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hint_proto.h"

static const char *const msg_type_table[_HINT_MSG_MAX] = {
        [HINT_MSG_HELLO] = "HELLO",   [HINT_MSG_LEVEL] = "LEVEL", [HINT_MSG_FASTER] = "FASTER",
        [HINT_MSG_SLOWER] = "SLOWER", [HINT_MSG_BOOST] = "BOOST", [HINT_MSG_UTIL] = "UTIL",
};

static const char *const reject_table[_HINT_REJECT_MAX] = {
        [HINT_REJECT_SYNTAX] = "syntax",       [HINT_REJECT_NUMBER] = "number",
        [HINT_REJECT_RANGE] = "range",         [HINT_REJECT_CHAR] = "char",
        [HINT_REJECT_OVERSIZED] = "oversized", [HINT_REJECT_HANDSHAKE] = "handshake",
        [HINT_REJECT_VERSION] = "version",     [HINT_REJECT_VCPU] = "vcpu",
        [HINT_REJECT_TRUST] = "trust",
};

static const char *const trust_table[_HINT_TRUST_MAX] = {
        [HINT_TRUST_NONE] = "none",
        [HINT_TRUST_ADVISORY] = "advisory",
        [HINT_TRUST_FULL] = "full",
};

const char *hint_msg_type_to_string(enum hint_msg_type t)
{
        return (unsigned) t < _HINT_MSG_MAX ? msg_type_table[t] : NULL;
}

const char *hint_reject_to_string(enum hint_reject r)
{
        return (unsigned) r < _HINT_REJECT_MAX ? reject_table[r] : NULL;
}

const char *hint_trust_to_string(enum hint_trust t)
{
        return (unsigned) t < _HINT_TRUST_MAX ? trust_table[t] : NULL;
}

int hint_trust_from_string(const char *s, enum hint_trust *ret)
{
        if (!s)
                return -EINVAL;
        for (unsigned i = 0; i < _HINT_TRUST_MAX; i++)
                if (strcmp(s, trust_table[i]) == 0) {
                        *ret = (enum hint_trust) i;
                        return 0;
                }
        return -EINVAL;
}

/* ---- parsing ---- */

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

static bool is_agent_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '.' || c == '_' ||
               c == '-' || c == '/' || c == '+';
}

struct field {
        const char *p;
        size_t len;
};

static bool field_is(const struct field *f, const char *s)
{
        size_t n = strlen(s);

        return f->len == n && memcmp(f->p, s, n) == 0;
}

/* Strict decimal: "0" or [1-9][0-9]{0,9}.  -EINVAL (reason NUMBER) or -ERANGE (reason RANGE). */
static int parse_dec(const char *p, size_t len, uint32_t min, uint32_t max, uint32_t *ret, enum hint_reject *reason)
{
        uint64_t v = 0;

        if (len == 0 || (len > 1 && p[0] == '0')) {
                *reason = HINT_REJECT_NUMBER;
                return -EINVAL;
        }
        for (size_t i = 0; i < len; i++)
                if (!is_digit(p[i])) {
                        *reason = HINT_REJECT_NUMBER;
                        return -EINVAL;
                }
        if (len > 10) {
                *reason = HINT_REJECT_RANGE;
                return -ERANGE;
        }
        for (size_t i = 0; i < len; i++)
                v = v * 10 + (unsigned) (p[i] - '0');
        if (v < min || v > max) {
                *reason = HINT_REJECT_RANGE;
                return -ERANGE;
        }
        *ret = (uint32_t) v;
        return 0;
}

#define MAX_FIELDS 6

/* Split on single spaces.  Returns the field count, or -EINVAL on an empty field or too many. */
static int split_fields(const char *line, size_t len, struct field f[static MAX_FIELDS])
{
        int n = 0;
        size_t start = 0;

        for (size_t i = 0; i <= len; i++) {
                if (i < len && line[i] != ' ')
                        continue;
                if (i == start || n == MAX_FIELDS)
                        return -EINVAL;
                f[n].p = line + start;
                f[n].len = i - start;
                n++;
                start = i + 1;
        }
        return n;
}

static int parse_hello(const struct field *f, int n, struct hint_msg *m, enum hint_reject *reason)
{
        bool have_vcpus = false, have_agent = false;
        int r;

        if (n < 2) {
                *reason = HINT_REJECT_SYNTAX;
                return -EINVAL;
        }
        r = parse_dec(f[1].p, f[1].len, 0, UINT32_MAX, &m->version, reason);
        if (r < 0)
                return r;
        if (m->version != HINT_PROTO_VERSION) {
                /* Whatever follows is another version's business. */
                *reason = HINT_REJECT_VERSION;
                return -EINVAL;
        }
        m->agent[0] = 0;
        for (int i = 2; i < n; i++) {
                const char *eq = memchr(f[i].p, '=', f[i].len);
                if (!eq) {
                        *reason = HINT_REJECT_SYNTAX;
                        return -EINVAL;
                }
                struct field key = { f[i].p, (size_t) (eq - f[i].p) };
                const char *val = eq + 1;
                size_t vlen = f[i].len - key.len - 1;

                if (field_is(&key, "vcpus") && !have_vcpus) {
                        r = parse_dec(val, vlen, 1, HINT_VCPUS_MAX, &m->vcpus, reason);
                        if (r < 0)
                                return r;
                        have_vcpus = true;
                } else if (field_is(&key, "agent") && !have_agent) {
                        if (vlen == 0 || vlen > HINT_AGENT_MAX) {
                                *reason = HINT_REJECT_SYNTAX;
                                return -EINVAL;
                        }
                        for (size_t j = 0; j < vlen; j++)
                                if (!is_agent_char(val[j])) {
                                        *reason = HINT_REJECT_SYNTAX;
                                        return -EINVAL;
                                }
                        memcpy(m->agent, val, vlen);
                        m->agent[vlen] = 0;
                        have_agent = true;
                } else {
                        /* unknown or repeated key */
                        *reason = HINT_REJECT_SYNTAX;
                        return -EINVAL;
                }
        }
        if (!have_vcpus) {
                *reason = HINT_REJECT_SYNTAX;
                return -EINVAL;
        }
        return 0;
}

int hint_parse_line(const char *line, size_t len, struct hint_msg *ret, enum hint_reject *reason)
{
        struct field f[MAX_FIELDS];
        struct hint_msg m = {};
        enum hint_reject why = HINT_REJECT_SYNTAX;
        uint32_t vmin = 0, vmax = HINT_LEVEL_MAX;
        int n, r;

        if (!line || len == 0 || len >= HINT_LINE_MAX) {
                *reason = len >= HINT_LINE_MAX ? HINT_REJECT_OVERSIZED : HINT_REJECT_SYNTAX;
                return -EINVAL;
        }
        for (size_t i = 0; i < len; i++)
                if ((unsigned char) line[i] < 0x20 || (unsigned char) line[i] > 0x7e) {
                        *reason = HINT_REJECT_CHAR;
                        return -EINVAL;
                }

        n = split_fields(line, len, f);
        if (n < 1) {
                *reason = HINT_REJECT_SYNTAX;
                return -EINVAL;
        }

        if (field_is(&f[0], "HELLO")) {
                m.type = HINT_MSG_HELLO;
                r = parse_hello(f, n, &m, &why);
                if (r < 0) {
                        *reason = why;
                        return -EINVAL;
                }
                *ret = m;
                return 0;
        }

        if (field_is(&f[0], "LEVEL"))
                m.type = HINT_MSG_LEVEL;
        else if (field_is(&f[0], "UTIL"))
                m.type = HINT_MSG_UTIL;
        else if (field_is(&f[0], "FASTER"))
                m.type = HINT_MSG_FASTER, vmin = 1;
        else if (field_is(&f[0], "SLOWER"))
                m.type = HINT_MSG_SLOWER, vmin = 1;
        else if (field_is(&f[0], "BOOST"))
                m.type = HINT_MSG_BOOST, vmin = 1, vmax = HINT_BOOST_MS_MAX;
        else {
                *reason = HINT_REJECT_SYNTAX;
                return -EINVAL;
        }
        if (n != 3) {
                *reason = HINT_REJECT_SYNTAX;
                return -EINVAL;
        }
        r = parse_dec(f[1].p, f[1].len, 0, HINT_VCPUS_MAX - 1, &m.vcpu, &why);
        if (r >= 0)
                r = parse_dec(f[2].p, f[2].len, vmin, vmax, &m.value, &why);
        if (r < 0) {
                *reason = why;
                return -EINVAL;
        }
        *ret = m;
        return 0;
}

/* ---- framing ---- */

void hint_framer_init(struct hint_framer *f)
{
        *f = (struct hint_framer) {};
}

void hint_framer_push(struct hint_framer *f, const void *data, size_t n, hint_frame_cb cb, void *userdata)
{
        const unsigned char *p = data;

        for (size_t i = 0; i < n; i++) {
                unsigned char c = p[i];

                if (c == '\n') {
                        if (f->discarding)
                                f->discarding = false;
                        else
                                cb(HINT_FRAME_LINE, f->buf, f->len, userdata);
                        f->len = 0;
                        continue;
                }
                if (f->discarding)
                        continue;
                if (c < 0x20 || c > 0x7e) {
                        f->discarding = true;
                        f->len = 0;
                        f->resyncs++;
                        cb(HINT_FRAME_BADCHAR, NULL, 0, userdata);
                        continue;
                }
                if (f->len >= HINT_LINE_MAX - 1) {
                        f->discarding = true;
                        f->len = 0;
                        f->resyncs++;
                        cb(HINT_FRAME_OVERSIZED, NULL, 0, userdata);
                        continue;
                }
                f->buf[f->len++] = (char) c;
        }
}

void hint_framer_reset(struct hint_framer *f)
{
        if (f->len > 0 || f->discarding)
                f->partial_dropped++;
        f->len = 0;
        f->discarding = false;
}

/* ---- policy ---- */

void hint_policy_init(struct hint_policy *p)
{
        *p = (struct hint_policy) {
                .trust = HINT_DEFAULT_TRUST,
                .max_level = HINT_DEFAULT_MAX_LEVEL,
                .boost_cap_ms = HINT_DEFAULT_BOOST_CAP_MS,
                .rate_per_sec = HINT_DEFAULT_RATE_PER_SEC,
                .burst = HINT_DEFAULT_BURST,
                .half_life_ns = HINT_DEFAULT_HALF_LIFE_NS,
                .boost_window_ns = HINT_DEFAULT_BOOST_WINDOW_NS,
        };
}

void hint_policy_limits(const struct hint_policy *p, uint32_t *min_level, uint32_t *max_level)
{
        *min_level = 0;
        *max_level = p->max_level;
}

#define RATE_MAX 100000
#define BURST_MAX 100000

int hint_policy_validate(const struct hint_policy *p)
{
        if ((unsigned) p->trust >= _HINT_TRUST_MAX || p->max_level > HINT_LEVEL_MAX ||
            p->boost_cap_ms > HINT_BOOST_MS_MAX || p->rate_per_sec < 1 || p->rate_per_sec > RATE_MAX ||
            p->burst < 1 || p->burst > BURST_MAX || p->half_life_ns < NSEC_PER_MSEC ||
            p->half_life_ns > 3600 * NSEC_PER_SEC || p->boost_window_ns < NSEC_PER_SEC ||
            p->boost_window_ns > 3600 * NSEC_PER_SEC)
                return -EINVAL;
        return 0;
}

int hint_policy_merge(const struct hint_policy *defaults, const struct hint_policy_override *o,
                      struct hint_policy *ret)
{
        struct hint_policy p = *defaults;

        if (o) {
                if (o->has_trust)
                        p.trust = o->trust;
                if (o->has_max_level)
                        p.max_level = o->max_level;
                if (o->has_boost_cap_ms)
                        p.boost_cap_ms = o->boost_cap_ms;
                if (o->has_rate_per_sec)
                        p.rate_per_sec = o->rate_per_sec;
                if (o->has_burst)
                        p.burst = o->burst;
                if (o->has_half_life_ns)
                        p.half_life_ns = o->half_life_ns;
        }
        if (hint_policy_validate(&p) < 0)
                return -EINVAL;
        *ret = p;
        return 0;
}

/* ---- token bucket ---- */

#define MILLI 1000u
/* Longest gap credited in one refill; any gap >= burst/rate fills the bucket anyway. */
#define REFILL_GAP_MAX_NS (1000 * NSEC_PER_SEC)

void hint_bucket_init(struct hint_bucket *b, const struct hint_policy *p, nsec_t now)
{
        b->tokens_milli = (uint64_t) p->burst * MILLI;
        b->last_ns = now;
}

void hint_bucket_refill(struct hint_bucket *b, const struct hint_policy *p, nsec_t now)
{
        uint64_t cap = (uint64_t) p->burst * MILLI, add, used_ns;
        nsec_t elapsed;

        if (b->tokens_milli >= cap) {
                b->tokens_milli = cap;
                b->last_ns = now; /* a full bucket banks no time */
                return;
        }
        if (now <= b->last_ns)
                return;
        elapsed = MIN(now - b->last_ns, REFILL_GAP_MAX_NS);
        /* milli-tokens = elapsed_ns * rate / 1e9 * 1000 */
        add = (uint64_t) elapsed * p->rate_per_sec / 1000000u;
        if (add == 0)
                return; /* keep last_ns: the fraction accumulates */
        /* Advance by the time those milli-tokens took, rounded up: never over-credit. */
        used_ns = (add * 1000000u + p->rate_per_sec - 1) / p->rate_per_sec;
        if (elapsed == REFILL_GAP_MAX_NS)
                b->last_ns = now;
        else
                b->last_ns += (nsec_t) used_ns;
        b->tokens_milli = MIN(b->tokens_milli + add, cap);
        if (b->tokens_milli == cap)
                b->last_ns = now;
}

bool hint_bucket_take(struct hint_bucket *b, const struct hint_policy *p, nsec_t now)
{
        hint_bucket_refill(b, p, now);
        if (b->tokens_milli < MILLI)
                return false;
        b->tokens_milli -= MILLI;
        return true;
}

/* ---- decay ---- */

uint32_t hint_decay_weight(nsec_t age_ns, nsec_t half_life_ns)
{
        if (age_ns <= 0)
                return 1024;
        if (half_life_ns <= 0 || age_ns >= (nsec_t) HINT_EXPIRY_HALF_LIVES * half_life_ns)
                return 0;
        return (uint32_t) lround(1024.0 * exp2(-(double) age_ns / (double) half_life_ns));
}

/* ---- per-VM state ---- */

struct hint_vm *hint_vm_new(uint32_t n_vcpus, const struct hint_policy *p, nsec_t now)
{
        struct hint_vm *vm;

        if (n_vcpus < 1 || n_vcpus > HINT_VCPUS_MAX || hint_policy_validate(p) < 0) {
                errno = EINVAL;
                return NULL;
        }
        vm = calloc(1, sizeof(*vm));
        if (!vm)
                return NULL;
        vm->vcpus = calloc(n_vcpus, sizeof(*vm->vcpus));
        if (!vm->vcpus) {
                free(vm);
                return NULL;
        }
        vm->n_vcpus = n_vcpus;
        vm->policy = *p;
        hint_framer_init(&vm->framer);
        hint_bucket_init(&vm->bucket, p, now);
        vm->boost_budget_ns = (uint64_t) p->boost_cap_ms * NSEC_PER_MSEC;
        vm->boost_budget_at_ns = now;
        vm->last_rx_ns = now;
        vm->welcome_due = true;
        return vm;
}

void hint_vm_free(struct hint_vm *vm)
{
        if (!vm)
                return;
        free(vm->vcpus);
        free(vm);
}

static void boost_budget_refill(struct hint_vm *vm, nsec_t now)
{
        uint64_t cap = (uint64_t) vm->policy.boost_cap_ms * NSEC_PER_MSEC;
        nsec_t elapsed = now - vm->boost_budget_at_ns;

        if (now <= vm->boost_budget_at_ns)
                return;
        vm->boost_budget_at_ns = now;
        if (elapsed >= vm->policy.boost_window_ns) {
                vm->boost_budget_ns = cap;
                return;
        }
        /* cap per window; rounding loses < 1 ns per refill, never credits more */
        vm->boost_budget_ns += (uint64_t) ((unsigned __int128) elapsed * cap / (uint64_t) vm->policy.boost_window_ns);
        vm->boost_budget_ns = MIN(vm->boost_budget_ns, cap);
}

static bool policy_equal(const struct hint_policy *a, const struct hint_policy *b)
{
        return a->trust == b->trust && a->max_level == b->max_level && a->boost_cap_ms == b->boost_cap_ms &&
               a->rate_per_sec == b->rate_per_sec && a->burst == b->burst && a->half_life_ns == b->half_life_ns &&
               a->boost_window_ns == b->boost_window_ns;
}

int hint_vm_set_policy(struct hint_vm *vm, const struct hint_policy *p, nsec_t now)
{
        uint32_t lo0, hi0, lo1, hi1;

        if (hint_policy_validate(p) < 0)
                return -EINVAL;
        if (policy_equal(&vm->policy, p))
                return 0;
        hint_bucket_refill(&vm->bucket, &vm->policy, now);
        boost_budget_refill(vm, now);
        hint_policy_limits(&vm->policy, &lo0, &hi0);
        hint_policy_limits(p, &lo1, &hi1);
        vm->policy = *p;
        vm->bucket.tokens_milli = MIN(vm->bucket.tokens_milli, (uint64_t) p->burst * MILLI);
        vm->boost_budget_ns = MIN(vm->boost_budget_ns, (uint64_t) p->boost_cap_ms * NSEC_PER_MSEC);
        /* a running boost longer than the new cap is cut to it */
        for (uint32_t i = 0; i < vm->n_vcpus; i++)
                if (vm->vcpus[i].boost_until_ns > now + (nsec_t) p->boost_cap_ms * NSEC_PER_MSEC)
                        vm->vcpus[i].boost_until_ns = now + (nsec_t) p->boost_cap_ms * NSEC_PER_MSEC;
        vm->welcome_due = true; /* the next HELLO learns the new policy at once */
        if (lo0 != lo1 || hi0 != hi1)
                vm->limits_changed = true;
        return 0;
}

bool hint_vm_take_limits_changed(struct hint_vm *vm)
{
        bool r = vm->limits_changed;

        vm->limits_changed = false;
        return r;
}

int hint_vm_set_vcpus(struct hint_vm *vm, uint32_t n_vcpus)
{
        struct hint_vcpu *v;

        if (n_vcpus < 1 || n_vcpus > HINT_VCPUS_MAX)
                return -EINVAL;
        v = realloc(vm->vcpus, n_vcpus * sizeof(*v));
        if (!v)
                return -ENOMEM;
        if (n_vcpus > vm->n_vcpus)
                memset(v + vm->n_vcpus, 0, (n_vcpus - vm->n_vcpus) * sizeof(*v));
        vm->vcpus = v;
        vm->n_vcpus = n_vcpus;
        vm->guest_vcpus = MIN(vm->guest_vcpus, n_vcpus);
        return 0;
}

static void vm_err(struct hint_vm *vm, enum hint_reject why, const char *text)
{
        if (!vm->reply)
                return;
        if (vm->err_sent && vm->now - vm->last_err_ns < HINT_ERR_INTERVAL_NS && vm->now >= vm->last_err_ns) {
                vm->counters.errors_suppressed++;
                return;
        }
        vm->err_sent = true;
        vm->last_err_ns = vm->now;
        (void) hint_format_err(vm->reply, hint_reject_to_string(why), text);
}

static void vm_reject(struct hint_vm *vm, enum hint_reject why)
{
        static const char *const text[_HINT_REJECT_MAX] = {
                [HINT_REJECT_SYNTAX] = "bad syntax",
                [HINT_REJECT_NUMBER] = "bad number",
                [HINT_REJECT_RANGE] = "number out of range",
                [HINT_REJECT_CHAR] = "non-ASCII byte, line discarded",
                [HINT_REJECT_OVERSIZED] = "line too long, discarded",
                [HINT_REJECT_HANDSHAKE] = "HELLO first",
                [HINT_REJECT_VERSION] = "supported=1",
                [HINT_REJECT_VCPU] = "no such vcpu",
                [HINT_REJECT_TRUST] = "hints disabled by host policy",
        };

        vm->counters.rejected[why]++;
        vm_err(vm, why, text[why]);
}

/*
 * A state-changing hint asks for a token.  Returns whether it may be stored:
 * with trust=full only with a token (the bucket limits the effect), advisory
 * hints have no effect and are always kept for display.
 */
static bool vm_want_actuation(struct hint_vm *vm)
{
        if (vm->policy.trust != HINT_TRUST_FULL)
                return true;
        if (hint_bucket_take(&vm->bucket, &vm->policy, vm->now)) {
                vm->counters.actuations++;
                vm->pending_actuations++;
                return true;
        }
        vm->counters.rate_limited++;
        return false;
}

/* What FASTER/SLOWER apply to: the live (decayed) level, neutral if there is none. */
static uint32_t vcpu_level_now(const struct hint_vm *vm, const struct hint_vcpu *v, nsec_t now)
{
        struct hint_effective e;

        (void) hint_vm_effective(vm, (uint32_t) (v - vm->vcpus), now, &e);
        return e.weight > 0 ? e.level : MIN((uint32_t) HINT_LEVEL_NEUTRAL, vm->policy.max_level);
}

static void vm_handle(struct hint_vm *vm, const struct hint_msg *m)
{
        const struct hint_policy *p = &vm->policy;
        struct hint_vcpu *v;
        uint32_t lvl;

        if (m->type == HINT_MSG_HELLO) {
                vm->handshaked = true;
                vm->counters.handshakes++;
                vm->counters.accepted++;
                vm->guest_vcpus = m->vcpus;
                if (m->vcpus > vm->n_vcpus) {
                        vm->guest_vcpus = vm->n_vcpus;
                        vm->counters.clamped++;
                }
                memcpy(vm->agent, m->agent, sizeof(vm->agent));
                vm->stale = false;
                if (!vm->welcome_due && vm->now >= vm->last_welcome_ns &&
                    vm->now - vm->last_welcome_ns < HINT_WELCOME_INTERVAL_NS) {
                        vm->counters.welcomes_suppressed++;
                        return;
                }
                vm->welcome_due = false;
                vm->last_welcome_ns = vm->now;
                if (vm->reply) {
                        (void) hint_format_welcome(vm->reply, vm);
                        (void) hint_format_limits(vm->reply, vm);
                }
                return;
        }
        if (!vm->handshaked)
                return vm_reject(vm, HINT_REJECT_HANDSHAKE);
        if (p->trust == HINT_TRUST_NONE)
                return vm_reject(vm, HINT_REJECT_TRUST);
        if (m->vcpu >= vm->n_vcpus)
                return vm_reject(vm, HINT_REJECT_VCPU);

        v = &vm->vcpus[m->vcpu];
        vm->counters.accepted++;
        switch (m->type) {
        case HINT_MSG_LEVEL: {
                bool changed;

                lvl = MIN(m->value, p->max_level);
                if (lvl != m->value)
                        vm->counters.clamped++;
                changed = !v->has_level || v->level != lvl;
                if (changed && !vm_want_actuation(vm))
                        break; /* no token: not stored, the old level keeps fading */
                v->has_level = true;
                v->level = lvl;
                v->level_at_ns = vm->now;
                break;
        }
        case HINT_MSG_FASTER:
        case HINT_MSG_SLOWER: {
                uint32_t base = vcpu_level_now(vm, v, vm->now);

                if (!vm_want_actuation(vm))
                        break;
                if (m->type == HINT_MSG_FASTER) {
                        lvl = base + m->value;
                        if (lvl > p->max_level) {
                                lvl = p->max_level;
                                vm->counters.clamped++;
                        }
                } else
                        lvl = base > m->value ? base - m->value : 0;
                v->has_level = true;
                v->level = lvl;
                v->level_at_ns = vm->now;
                break;
        }
        case HINT_MSG_BOOST: {
                uint32_t ms = MIN(m->value, p->boost_cap_ms);
                nsec_t until, start;
                uint64_t ext;

                if (ms != m->value)
                        vm->counters.clamped++;
                if (ms == 0)
                        break;
                until = vm->now + (nsec_t) ms * NSEC_PER_MSEC;
                start = MAX(v->boost_until_ns, vm->now);
                if (until <= start)
                        break; /* within a running boost: nothing to add */
                boost_budget_refill(vm, vm->now);
                if (vm->boost_budget_ns == 0) {
                        vm->counters.boost_denied++;
                        break;
                }
                if (!vm_want_actuation(vm))
                        break;
                ext = (uint64_t) (until - start);
                if (ext > vm->boost_budget_ns) {
                        ext = vm->boost_budget_ns;
                        vm->counters.boost_denied++;
                }
                vm->boost_budget_ns -= ext;
                vm->counters.boost_granted_ns += ext;
                v->boost_until_ns = start + (nsec_t) ext;
                break;
        }
        case HINT_MSG_UTIL:
                v->has_util = true;
                v->util = m->value;
                v->util_at_ns = vm->now;
                break;
        default:
                break;
        }
}

static void vm_frame_cb(enum hint_frame_event ev, const char *line, size_t len, void *userdata)
{
        struct hint_vm *vm = userdata;
        struct hint_msg m;
        enum hint_reject why;

        switch (ev) {
        case HINT_FRAME_OVERSIZED:
                vm->counters.oversized++;
                vm->counters.resyncs++;
                vm_reject(vm, HINT_REJECT_OVERSIZED);
                return;
        case HINT_FRAME_BADCHAR:
                vm->counters.resyncs++;
                vm_reject(vm, HINT_REJECT_CHAR);
                return;
        case HINT_FRAME_LINE:
                break;
        }
        vm->counters.lines++;
        vm->last_rx_ns = vm->now;
        if (len == 0)
                return; /* resync / keepalive */
        if (hint_parse_line(line, len, &m, &why) < 0)
                return vm_reject(vm, why);
        vm_handle(vm, &m);
}

int hint_vm_feed(struct hint_vm *vm, const void *data, size_t n, nsec_t now, struct strbuf *reply)
{
        int r;

        vm->reply = reply;
        vm->now = now;
        vm->pending_actuations = 0;
        vm->counters.bytes += n;
        hint_framer_push(&vm->framer, data, n, vm_frame_cb, vm);
        r = vm->pending_actuations;
        vm->reply = NULL;
        vm->pending_actuations = 0;
        return r;
}

void hint_vm_disconnect(struct hint_vm *vm)
{
        uint64_t before = vm->framer.partial_dropped;

        hint_framer_reset(&vm->framer);
        vm->counters.partial_dropped += vm->framer.partial_dropped - before;
        vm->handshaked = false;
        vm->err_sent = false;
        vm->welcome_due = true;
}

bool hint_vm_tick(struct hint_vm *vm, nsec_t now)
{
        if (!vm->handshaked || now < vm->last_rx_ns || now - vm->last_rx_ns < HINT_STALE_NS)
                return false;
        vm->handshaked = false;
        vm->stale = true;
        vm->welcome_due = true;
        vm->counters.stale++;
        return true;
}

int hint_vm_effective(const struct hint_vm *vm, uint32_t vcpu, nsec_t now, struct hint_effective *ret)
{
        const struct hint_vcpu *v;
        struct hint_effective e = {};
        uint64_t lvl = 0;

        if (vcpu >= vm->n_vcpus)
                return -ENOENT;
        v = &vm->vcpus[vcpu];
        if (v->has_level) {
                e.weight = hint_decay_weight(now - v->level_at_ns, vm->policy.half_life_ns);
                lvl = ((uint64_t) v->level * e.weight) / 1024; /* fades toward "no hint", never up */
        }
        e.level = (uint32_t) MIN(lvl, (uint64_t) vm->policy.max_level);
        if (v->has_util) {
                e.util_weight = hint_decay_weight(now - v->util_at_ns, vm->policy.half_life_ns);
                e.util = e.util_weight > 0 ? v->util : 0;
        }
        if (now < v->boost_until_ns) {
                e.boosted = true;
                e.boost_level = vm->policy.max_level;
                e.boost_remaining_ns = v->boost_until_ns - now;
        }
        e.may_actuate = vm->policy.trust == HINT_TRUST_FULL;
        *ret = e;
        return 0;
}

/* ---- serialisers ---- */

static int append_line(struct strbuf *sb, const char *line, int len)
{
        if (len < 0 || len >= HINT_LINE_MAX)
                return -ERANGE;
        strbuf_append(sb, line, (size_t) len);
        strbuf_append(sb, "\n", 1);
        return sb->oom ? -ENOMEM : 0;
}

int hint_format_welcome(struct strbuf *sb, const struct hint_vm *vm)
{
        char line[HINT_LINE_MAX + 32];
        int n;

        n = snprintf(line, sizeof(line), "WELCOME %d vcpus=%u max_level=%u boost_cap_ms=%u rate=%u burst=%u trust=%s",
                     HINT_PROTO_VERSION, vm->n_vcpus, vm->policy.max_level, vm->policy.boost_cap_ms,
                     vm->policy.rate_per_sec, vm->policy.burst, hint_trust_to_string(vm->policy.trust));
        return append_line(sb, line, n);
}

int hint_format_limits(struct strbuf *sb, const struct hint_vm *vm)
{
        uint32_t lo, hi;
        int r = 0;

        hint_policy_limits(&vm->policy, &lo, &hi);
        for (uint32_t i = 0; i < vm->n_vcpus && r == 0; i++)
                r = hint_format_limit(sb, i, lo, hi);
        return r;
}

int hint_format_limit(struct strbuf *sb, uint32_t vcpu, uint32_t min_level, uint32_t max_level)
{
        char line[HINT_LINE_MAX];

        if (vcpu >= HINT_VCPUS_MAX || min_level > max_level || max_level > HINT_LEVEL_MAX)
                return -EINVAL;
        return append_line(sb, line, snprintf(line, sizeof(line), "LIMIT %u %u %u", vcpu, min_level, max_level));
}

int hint_format_grant(struct strbuf *sb, uint32_t vcpu, uint32_t level)
{
        char line[HINT_LINE_MAX];

        if (vcpu >= HINT_VCPUS_MAX || level > HINT_LEVEL_MAX)
                return -EINVAL;
        return append_line(sb, line, snprintf(line, sizeof(line), "GRANT %u %u", vcpu, level));
}

int hint_format_err(struct strbuf *sb, const char *code, const char *text)
{
        char line[HINT_LINE_MAX];
        size_t n, clen;

        if (!code || !*code)
                return -EINVAL;
        clen = strlen(code);
        if (clen > 16)
                return -EINVAL;
        for (size_t i = 0; i < clen; i++)
                if (!(code[i] >= 'a' && code[i] <= 'z'))
                        return -EINVAL;
        n = (size_t) snprintf(line, sizeof(line), "ERR %s", code);
        if (text && *text) {
                line[n++] = ' ';
                for (const char *t = text; *t && n < HINT_LINE_MAX - 1; t++)
                        line[n++] = (*t >= 0x20 && *t <= 0x7e) ? *t : '?';
        }
        return append_line(sb, line, (int) n);
}
