/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Fixed-size CPU bitmap.  VP_MAX_CPUS bounds every host we model (the
 * kernel's NR_CPUS on Debian is 8192; hosts beyond 4096 CPUs are out of
 * scope and rejected at topology load with -E2BIG).
 */
#define VP_MAX_CPUS 4096

typedef struct cpuset {
        uint64_t w[VP_MAX_CPUS / 64];
} cpuset_t;

static inline void cpuset_zero(cpuset_t *s)
{
        for (size_t i = 0; i < VP_MAX_CPUS / 64; i++)
                s->w[i] = 0;
}
static inline void cpuset_set(cpuset_t *s, unsigned cpu)
{
        s->w[cpu / 64] |= UINT64_C(1) << (cpu % 64);
}
static inline void cpuset_clear(cpuset_t *s, unsigned cpu)
{
        s->w[cpu / 64] &= ~(UINT64_C(1) << (cpu % 64));
}
static inline bool cpuset_isset(const cpuset_t *s, unsigned cpu)
{
        return cpu < VP_MAX_CPUS && (s->w[cpu / 64] >> (cpu % 64)) & 1;
}
/* s = s without the CPUs of t */
static inline void cpuset_andnot(cpuset_t *s, const cpuset_t *t)
{
        for (unsigned k = 0; k < VP_MAX_CPUS / 64; k++)
                s->w[k] &= ~t->w[k];
}
/* Is every CPU of a in b? */
static inline bool cpuset_subset(const cpuset_t *a, const cpuset_t *b)
{
        for (unsigned k = 0; k < VP_MAX_CPUS / 64; k++)
                if (a->w[k] & ~b->w[k])
                        return false;
        return true;
}
unsigned cpuset_count(const cpuset_t *s);
bool cpuset_equal(const cpuset_t *a, const cpuset_t *b);
bool cpuset_empty(const cpuset_t *s);
/* First set CPU >= from, or -1. */
int cpuset_next(const cpuset_t *s, unsigned from);
#define CPUSET_FOREACH(cpu, set) \
        for (int cpu = cpuset_next((set), 0); cpu >= 0; cpu = cpuset_next((set), (unsigned) cpu + 1))

/*
 * Parse a kernel cpulist ("0-3,8,10-11", optional trailing newline, empty
 * string = empty set).  Strict: -EINVAL on syntax errors or reversed ranges,
 * -E2BIG for a CPU >= VP_MAX_CPUS.
 */
int cpuset_parse_list(const char *s, cpuset_t *ret);
/* Format as a cpulist with ranges.  Returns length or -ENOBUFS. */
int cpuset_format_list(const cpuset_t *s, char *buf, size_t size);
