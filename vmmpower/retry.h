/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>

#include "util.h"

/*
 * Retry with exponential backoff; pure, `now` passed in.  After a
 * transient failure call retry_schedule(): it returns true and sets
 * next_ns = now + delay (delay = initial * 2^attempts, capped at max), or
 * false once max_attempts retries were used (gave_up set; counted).
 *
 * A leaf: used by the actuator's callers (apply.c) and by the power driver,
 * which must not depend on the actuator (or the journal on either).
 */
struct backoff {
        nsec_t initial_ns;
        nsec_t max_ns;
        unsigned max_attempts;
};
#define BACKOFF_DEFAULT ((struct backoff) { 10 * NSEC_PER_MSEC, 5 * NSEC_PER_SEC, 8 })

struct retry_state {
        unsigned attempts;
        nsec_t next_ns;
        bool pending;
        bool gave_up;
};

struct retry_counters {
        unsigned scheduled;
        unsigned gave_up;
};

bool retry_schedule(struct retry_state *s, const struct backoff *b, nsec_t now, struct retry_counters *c);
static inline bool retry_due(const struct retry_state *s, nsec_t now)
{
        return s->pending && now >= s->next_ns;
}
/* Success (or the need went away): forget the attempts. */
static inline void retry_reset(struct retry_state *s)
{
        *s = (struct retry_state) { 0 };
}
