/* SPDX-License-Identifier: GPL-2.0-or-later */
/* On/off burst generator; the model is described in burst.h and docs/simulator.md. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "burst.h"

#define BURST_MIN_IDLE 0.005   /* 1 - m floor: a vCPU at 100% still sleeps 0.5% of the time */
#define PARETO_SHAPE 2.0

static const char *const dist_names[_BURST_DIST_MAX] = { "exp", "fixed", "pareto" };

const char *burst_dist_to_string(enum burst_dist d)
{
        return d < _BURST_DIST_MAX ? dist_names[d] : "?";
}

int burst_dist_from_string(const char *s)
{
        for (int i = 0; i < _BURST_DIST_MAX; i++)
                if (strcmp(s, dist_names[i]) == 0)
                        return i;
        return -EINVAL;
}

uint64_t rng_seed3(uint64_t seed, uint64_t a, uint64_t b)
{
        uint64_t s = seed;
        uint64_t x = splitmix64(&s);
        s = x ^ (a * 0xd1b54a32d192ed03ULL);
        x = splitmix64(&s);
        s = x ^ (b * 0x8cb92ba72f3d8dd7ULL);
        return splitmix64(&s);
}

void burst_means(const struct burst_params *p, double m, double *on_ns, double *off_ns)
{
        if (m <= 0) {
                *on_ns = 0;
                *off_ns = p->mean_ns;
                return;
        }
        if (m > 1 - BURST_MIN_IDLE)
                m = 1 - BURST_MIN_IDLE;
        if (m <= 0.5) {
                *on_ns = p->mean_ns;
                *off_ns = p->mean_ns * (1 - m) / m;
        } else {
                *on_ns = p->mean_ns * m / (1 - m);
                *off_ns = p->mean_ns;
        }
}

double burst_draw(uint64_t *rng, enum burst_dist d, double mean)
{
        switch (d) {
        case BURST_FIXED:
                return mean;
        case BURST_PARETO:
                return mean * (PARETO_SHAPE - 1) / PARETO_SHAPE / pow(rng_unit(rng), 1.0 / PARETO_SHAPE);
        case BURST_EXP:
        default:
                return -mean * log(rng_unit(rng));
        }
}
