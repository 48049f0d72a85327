/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/*
 * Guest hint protocol, host side: the pure pieces (no I/O, no clock reads).
 * The wire format is specified in docs/protocol.md; this file is its reference
 * implementation on the host.
 *
 *   bytes from the socket ──> struct hint_framer   (lines, resync, oversize)
 *                         ──> hint_parse_line()    (strict syntax, protocol ranges)
 *                         ──> struct hint_vm       (handshake, vCPU count the host knows,
 *                                                   per-VM policy caps, token bucket,
 *                                                   per-vCPU state with decay and boost expiry)
 *                         ──> replies appended to a strbuf (WELCOME, ERR)
 *
 * The caller (the hint server) owns the socket: it passes every chunk it reads
 * to hint_vm_feed() with the current time, writes whatever was appended to the
 * reply buffer, calls hint_vm_disconnect() when the socket closes, and lets the
 * planner read hint_vm_effective().  A struct hint_vm belongs to one VM, and
 * the VM is identified by the socket it arrived on, never by anything the guest
 * wrote.
 */

#define HINT_PROTO_VERSION 1
#define HINT_LINE_MAX 128           /* bytes per line, including the '\n' */
#define HINT_LEVEL_MAX 1024         /* levels, magnitudes and utilisation are 0..1024 */
#define HINT_LEVEL_NEUTRAL 512      /* what FASTER/SLOWER start from without a live level */
#define HINT_BOOST_MS_MAX 10000     /* protocol limit of one BOOST; policy caps further */
#define HINT_VCPUS_MAX 4096         /* protocol limit of a vCPU index / count */
#define HINT_AGENT_MAX 32           /* agent= token length */

enum hint_msg_type {
        HINT_MSG_HELLO,  /* HELLO <version> vcpus=<n> agent=<token> */
        HINT_MSG_LEVEL,  /* LEVEL <vcpu> <0..1024> */
        HINT_MSG_FASTER, /* FASTER <vcpu> <1..1024> */
        HINT_MSG_SLOWER, /* SLOWER <vcpu> <1..1024> */
        HINT_MSG_BOOST,  /* BOOST <vcpu> <1..10000 ms> */
        HINT_MSG_UTIL,   /* UTIL <vcpu> <0..1024> */
        _HINT_MSG_MAX,
};

struct hint_msg {
        enum hint_msg_type type;
        uint32_t vcpu;  /* all but HELLO */
        uint32_t value; /* level, magnitude, duration in ms or utilisation */
        /* HELLO only */
        uint32_t version;
        uint32_t vcpus;
        char agent[HINT_AGENT_MAX + 1];
};

/* Why a line was not accepted.  Each has a counter and an ERR code on the wire. */
enum hint_reject {
        HINT_REJECT_SYNTAX,    /* unknown keyword, wrong field count, bad separators */
        HINT_REJECT_NUMBER,    /* not a strict decimal number */
        HINT_REJECT_RANGE,     /* number outside the protocol range */
        HINT_REJECT_CHAR,      /* a byte outside printable ASCII (NUL, CR, >= 0x7f, ...) */
        HINT_REJECT_OVERSIZED, /* line longer than HINT_LINE_MAX */
        HINT_REJECT_HANDSHAKE, /* hint before a successful HELLO */
        HINT_REJECT_VERSION,   /* HELLO with a version the host does not speak */
        HINT_REJECT_VCPU,      /* vCPU index >= the VM's real vCPU count */
        HINT_REJECT_TRUST,     /* policy trust=none */
        _HINT_REJECT_MAX,
};

const char *hint_msg_type_to_string(enum hint_msg_type t);
const char *hint_reject_to_string(enum hint_reject r); /* also the ERR code on the wire */

/*
 * Parse one line (without its '\n'; len bytes, need not be NUL-terminated).
 * Checks syntax and protocol ranges only, not policy or the vCPU count.
 * Returns 0 and fills *ret, or -EINVAL and sets *reason.
 */
int hint_parse_line(const char *line, size_t len, struct hint_msg *ret, enum hint_reject *reason);

/*
 * Line framing with resynchronisation.  A line that grows beyond
 * HINT_LINE_MAX - 1 bytes, or that contains a byte outside 0x20..0x7e, is
 * discarded up to and including the next '\n' and reported once.
 */
enum hint_frame_event {
        HINT_FRAME_LINE,      /* a complete line: line, len (without '\n') */
        HINT_FRAME_OVERSIZED, /* a line was too long; now discarding */
        HINT_FRAME_BADCHAR,   /* a line contained a bad byte; now discarding */
};
typedef void (*hint_frame_cb)(enum hint_frame_event ev, const char *line, size_t len, void *userdata);

struct hint_framer {
        char buf[HINT_LINE_MAX];
        size_t len;
        bool discarding;
        uint64_t resyncs;         /* lines discarded (oversized or bad byte) */
        uint64_t partial_dropped; /* partial lines dropped by hint_framer_reset() */
};

void hint_framer_init(struct hint_framer *f);
/* Consume n bytes (any chunking), calling cb for each event in order. */
void hint_framer_push(struct hint_framer *f, const void *data, size_t n, hint_frame_cb cb, void *userdata);
/* Connection closed: a partial line is dropped (counted), discard state cleared. */
void hint_framer_reset(struct hint_framer *f);

/* ---- per-VM policy ---- */

enum hint_trust {
        HINT_TRUST_NONE,     /* every hint rejected (counted); the handshake still answers */
        HINT_TRUST_ADVISORY, /* hints are kept and shown, never cause actuation */
        HINT_TRUST_FULL,     /* hints within the token bucket may cause actuation */
        _HINT_TRUST_MAX,
};

const char *hint_trust_to_string(enum hint_trust t);
int hint_trust_from_string(const char *s, enum hint_trust *ret);

struct hint_policy {
        enum hint_trust trust;
        uint32_t max_level;     /* LEVEL/FASTER results and BOOST are clamped to this (0..1024) */
        uint32_t boost_cap_ms;  /* BOOST durations clamped to this; 0 disables boosts */
        nsec_t boost_window_ns; /* boost budget: at most boost_cap_ms of boost per window and VM (1 s..1 h) */
        uint32_t rate_per_sec;  /* token refill: hints per second that may actuate (1..100000) */
        uint32_t burst;         /* bucket size in tokens (1..100000) */
        nsec_t half_life_ns;    /* decay half-life of levels and utilisation (>= 1 ms) */
};

/* Host defaults, see hint_proto.c for why. */
#define HINT_DEFAULT_TRUST HINT_TRUST_ADVISORY
#define HINT_DEFAULT_MAX_LEVEL HINT_LEVEL_MAX
#define HINT_DEFAULT_BOOST_CAP_MS 500
#define HINT_DEFAULT_RATE_PER_SEC 10
#define HINT_DEFAULT_BURST 20
#define HINT_DEFAULT_HALF_LIFE_NS (2 * NSEC_PER_SEC)
#define HINT_DEFAULT_BOOST_WINDOW_NS (10 * NSEC_PER_SEC)
/* Host-wide hint read budget, bytes per second over all VMs (guest_hint.h). */
#define HINT_HOST_READ_BYTES_PER_SEC_DEFAULT (4u << 20)
/* A handshake with no line from the guest for this long is stale (hint_vm_tick()). */
#define HINT_STALE_NS (5 * NSEC_PER_SEC)
/* A repeated HELLO is answered (WELCOME + LIMITs) at most this often. */
#define HINT_WELCOME_INTERVAL_NS (500 * NSEC_PER_MSEC)
/* A level or utilisation older than this many half-lives is expired (weight 0). */
#define HINT_EXPIRY_HALF_LIVES 8

void hint_policy_init(struct hint_policy *p);

/* Per-VM overrides (from the domain's metadata): only fields with has_* set apply. */
struct hint_policy_override {
        bool has_trust, has_max_level, has_boost_cap_ms, has_rate_per_sec, has_burst, has_half_life_ns;
        enum hint_trust trust;
        uint32_t max_level;
        uint32_t boost_cap_ms;
        uint32_t rate_per_sec;
        uint32_t burst;
        nsec_t half_life_ns;
};

/* LIMIT <vcpu> <min> <max> of a policy: the range of levels the host accepts now. */
void hint_policy_limits(const struct hint_policy *p, uint32_t *min_level, uint32_t *max_level);
/* Validate a policy.  Returns 0 or -EINVAL. */
int hint_policy_validate(const struct hint_policy *p);
/* *ret = defaults with overrides applied, validated.  Returns 0 or -EINVAL (ret untouched). */
int hint_policy_merge(const struct hint_policy *defaults, const struct hint_policy_override *o,
                      struct hint_policy *ret);

/* ---- token bucket (fixed point: milli-tokens) ---- */

struct hint_bucket {
        uint64_t tokens_milli;
        nsec_t last_ns;
};

void hint_bucket_init(struct hint_bucket *b, const struct hint_policy *p, nsec_t now);
/* Refill for the time since the last call (time going backwards refills nothing). */
void hint_bucket_refill(struct hint_bucket *b, const struct hint_policy *p, nsec_t now);
/* Refill, then take one token if there is one.  Returns true if taken. */
bool hint_bucket_take(struct hint_bucket *b, const struct hint_policy *p, nsec_t now);

/* Exponential decay factor 2^(-age/half_life) in 1/1024 units (1024 at age <= 0, 0 once expired). */
uint32_t hint_decay_weight(nsec_t age_ns, nsec_t half_life_ns);

/* ---- per-VM state ---- */

struct hint_vcpu {
        bool has_level;
        uint32_t level;       /* last requested level after FASTER/SLOWER arithmetic, clamped */
        nsec_t level_at_ns;
        bool has_util;
        uint32_t util;        /* guest-reported utilisation 0..1024 */
        nsec_t util_at_ns;
        nsec_t boost_until_ns; /* boost active while now < boost_until_ns; 0 = never boosted */
};

struct hint_counters {
        uint64_t bytes;
        uint64_t lines;
        uint64_t accepted;
        uint64_t clamped;         /* accepted with a value clamped by policy or vCPU count */
        uint64_t rejected[_HINT_REJECT_MAX];
        uint64_t resyncs;         /* = oversized + bad-char lines discarded */
        uint64_t oversized;
        uint64_t partial_dropped; /* disconnect mid-line */
        uint64_t actuations;      /* hints that got a token and may actuate */
        uint64_t rate_limited;    /* state-changing hints that found the bucket empty (trust=full: dropped) */
        uint64_t boost_denied;    /* BOOSTs (or parts of them) refused: boost budget used up */
        uint64_t boost_granted_ns; /* boost time granted in all (paid from the boost budget) */
        uint64_t handshakes;
        uint64_t welcomes_suppressed; /* HELLOs not answered: HINT_WELCOME_INTERVAL_NS */
        uint64_t stale;           /* handshakes marked stale after HINT_STALE_NS of silence */
        uint64_t errors_suppressed; /* ERR replies not sent because of the ERR rate limit */
};

struct hint_vm {
        uint32_t n_vcpus;            /* the real count, known by the host */
        struct hint_policy policy;
        struct hint_framer framer;
        struct hint_bucket bucket;
        bool handshaked;
        bool stale;                  /* the last handshake went stale (silence); cleared by HELLO */
        nsec_t last_rx_ns;           /* last complete line from the guest */
        bool welcome_due;            /* answer the next HELLO whatever the interval (new connection, policy) */
        nsec_t last_welcome_ns;
        uint64_t boost_budget_ns;    /* boost time left in the VM's budget (<= boost_cap_ms) */
        nsec_t boost_budget_at_ns;   /* last refill */
        bool limits_changed;         /* policy changed the LIMITs: resend (hint_vm_take_limits_changed) */
        uint32_t guest_vcpus;        /* from HELLO, clamped to n_vcpus */
        char agent[HINT_AGENT_MAX + 1];
        nsec_t last_err_ns;          /* ERR replies: at most one per HINT_ERR_INTERVAL_NS */
        bool err_sent;
        struct hint_counters counters;
        struct hint_vcpu *vcpus;     /* n_vcpus entries, owned */
        /* scratch for hint_vm_feed() */
        struct strbuf *reply;
        nsec_t now;
        int pending_actuations;
};

#define HINT_ERR_INTERVAL_NS NSEC_PER_SEC

/* Returns a new object or NULL (ENOMEM / EINVAL in errno).  n_vcpus 1..HINT_VCPUS_MAX. */
struct hint_vm *hint_vm_new(uint32_t n_vcpus, const struct hint_policy *p, nsec_t now);
void hint_vm_free(struct hint_vm *vm); /* NULL ok */
/* New policy (metadata change); the bucket keeps its tokens, clamped to the new burst. */
int hint_vm_set_policy(struct hint_vm *vm, const struct hint_policy *p, nsec_t now);
/* vCPU hotplug: state of remaining vCPUs is kept.  Returns 0 or -errno. */
int hint_vm_set_vcpus(struct hint_vm *vm, uint32_t n_vcpus);

/*
 * Feed bytes read from the VM's socket.  Replies (WELCOME, rate-limited ERR)
 * are appended to reply (may be NULL).  Returns the number of accepted hints
 * that took a token and may cause actuation now (wake the planner if > 0).
 */
int hint_vm_feed(struct hint_vm *vm, const void *data, size_t n, nsec_t now, struct strbuf *reply);
/* Socket closed: partial line dropped, handshake must be redone.  State stays and decays. */
void hint_vm_disconnect(struct hint_vm *vm);
/*
 * Time passes without bytes (called once per control period): a handshake
 * that heard no line for HINT_STALE_NS is marked stale (handshake forgotten,
 * counted; the hints keep fading).  Returns true if it went stale now.
 */
bool hint_vm_tick(struct hint_vm *vm, nsec_t now);
/* The LIMITs changed with the policy since the last call (then the caller sends them). */
bool hint_vm_take_limits_changed(struct hint_vm *vm);
/* Append the LIMIT line of every vCPU (what a WELCOME is followed by). */
int hint_format_limits(struct strbuf *sb, const struct hint_vm *vm);

/* What the planner sees for one vCPU at time now. */
struct hint_effective {
        uint32_t level;       /* level x weight: fades toward 0 ("no hint"), clamped to max_level */
        uint32_t weight;      /* confidence 0..1024 (2^-age/half_life); 0 = no live hint */
        uint32_t util;        /* guest utilisation, 0 if none or expired */
        uint32_t util_weight; /* 0..1024 */
        bool boosted;         /* a boost is running (its level is boost_level) */
        uint32_t boost_level; /* what a running boost asks for: max_level (0 = no effect) */
        nsec_t boost_remaining_ns;
        bool may_actuate;     /* trust == full */
};
int hint_vm_effective(const struct hint_vm *vm, uint32_t vcpu, nsec_t now, struct hint_effective *ret);

/* ---- host -> guest serialisers: append one line to sb.  Return 0 or -EINVAL/-ERANGE. ---- */
int hint_format_welcome(struct strbuf *sb, const struct hint_vm *vm);
int hint_format_limit(struct strbuf *sb, uint32_t vcpu, uint32_t min_level, uint32_t max_level);
int hint_format_grant(struct strbuf *sb, uint32_t vcpu, uint32_t level);
/* text: printable ASCII, no newline, shortened to fit the line limit. */
int hint_format_err(struct strbuf *sb, const char *code, const char *text);
