/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Retry with exponential backoff (see retry.h); no libvirt, so that the
 * simulator, which drives power_driver.c, does not link it.
 *
 * Backoff: delay = initial_ns * 2^attempts capped at max_ns; after
 * max_attempts retries the caller gives up (counted).  Defaults (10 ms,
 * 5 s, 8 attempts) cover a libvirt job lock held for a few seconds by a
 * migration or a snapshot without retrying in a tight loop.
 */
#include "retry.h"

bool retry_schedule(struct retry_state *s, const struct backoff *b, nsec_t now, struct retry_counters *c)
{
        nsec_t delay = b->initial_ns;

        if (s->attempts >= b->max_attempts) {
                if (!s->gave_up && c)
                        c->gave_up++;
                s->gave_up = true;
                s->pending = false;
                return false;
        }
        for (unsigned i = 0; i < s->attempts && delay < b->max_ns; i++)
                delay *= 2;
        if (delay > b->max_ns)
                delay = b->max_ns;
        s->attempts++;
        s->next_ns = now + delay;
        s->pending = true;
        if (c)
                c->scheduled++;
        return true;
}
