/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>

#include "util.h"

/*
 * Sub-interval bursts (docs/simulator.md, "Bursts and run-queue wait").
 *
 * A vCPU whose utilisation over an interval is m (0..1, work at the top perf
 * level) alternates on-bursts (it is runnable and has that much work, in ns
 * at the top level) and off-gaps (it sleeps).  With B the burst parameter:
 *
 *   m <= 1/2:  mean on = B,                 mean off = B (1 - m) / m
 *   m >  1/2:  mean on = B m / (1 - m),     mean off = B
 *
 * so the long-run share of on-time is exactly m and the number of wake-ups
 * per second stays bounded at high m; 1 - m is floored at 0.005 (a VM at
 * 100% is treated as 99.5%).  On and off lengths are drawn independently
 * from the chosen distribution with those means:
 *
 *   exp     exponential (Poisson-like wake-ups; the default)
 *   fixed   the mean itself (periodic)
 *   pareto  Pareto with shape 2 (heavy tail, finite mean): x_m / U^(1/2),
 *           x_m = mean / 2
 *
 * The generator is a splitmix64 stream per (seed, vCPU, window), so every
 * policy sees the same wake-ups (common random numbers) and runs are
 * deterministic for a seed.
 */

enum burst_dist {
        BURST_EXP,
        BURST_FIXED,
        BURST_PARETO,
        _BURST_DIST_MAX,
};
const char *burst_dist_to_string(enum burst_dist d);
int burst_dist_from_string(const char *s); /* -EINVAL */

struct burst_params {
        double mean_ns;         /* B */
        enum burst_dist dist;
};

static inline uint64_t splitmix64(uint64_t *s)
{
        uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

/* Uniform in (0, 1]. */
static inline double rng_unit(uint64_t *s)
{
        return ((double) (splitmix64(s) >> 11) + 1.0) / 9007199254740992.0;
}

/* Seed for (seed, a, b): independent streams. */
uint64_t rng_seed3(uint64_t seed, uint64_t a, uint64_t b);

/* Mean on and off lengths (ns) for utilisation m; on = 0 when m <= 0. */
void burst_means(const struct burst_params *p, double m, double *on_ns, double *off_ns);
double burst_draw(uint64_t *rng, enum burst_dist d, double mean);
