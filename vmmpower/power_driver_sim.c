/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The sim power driver backend (power_driver.h; the core is power_driver.c):
 * per-CPU perf level, floor, EPP and idle constraint in memory;
 * power_driver_config.sim_hook is called after every change
 * (the energy model is plugged in there).  No host writes, no journal.
 */
#define POWER_DRIVER_BACKEND /* struct power_driver (power_driver.h) */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "power_driver.h"

/* ---------------------------------------------------------------- sim backend */

struct sim {
        unsigned n_cpus;
        struct power_sim_cpu *cpus;
};

static int sim_init(struct power_driver *drv)
{
        struct sim *s;

        if (drv->cfg.n_cpus == 0 || drv->cfg.n_cpus > VP_MAX_CPUS)
                return -EINVAL;
        if (drv->cfg.sim_max_khz == 0)
                drv->cfg.sim_max_khz = 1000000;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->cpus = calloc(drv->cfg.n_cpus, sizeof(*s->cpus));
        if (!s->cpus) {
                free(s);
                return -ENOMEM;
        }
        s->n_cpus = drv->cfg.n_cpus;
        for (unsigned c = 0; c < s->n_cpus; c++)
                s->cpus[c] = (struct power_sim_cpu) {
                        .level_permille = 1000,
                        .idle = { .deepest_state = -1, .latency_us = -1 },
                };
        drv->priv = s;
        return 0;
}

static void sim_exit(struct power_driver *drv)
{
        struct sim *s = drv->priv;

        if (s)
                free(s->cpus);
        free(s);
        drv->priv = NULL;
}

static struct power_sim_cpu *sim_cpu(struct power_driver *drv, unsigned cpu)
{
        struct sim *s = drv->priv;
        return cpu < s->n_cpus ? &s->cpus[cpu] : NULL;
}

static void sim_changed(struct power_driver *drv, unsigned cpu)
{
        sim_cpu(drv, cpu)->changes++;
        if (drv->cfg.sim_hook)
                drv->cfg.sim_hook(drv->cfg.sim_userdata, drv, cpu);
}

static int sim_enter_idle(struct power_driver *drv, unsigned cpu, const struct power_idle_constraint *ic)
{
        struct power_sim_cpu *c = sim_cpu(drv, cpu);

        if (!c)
                return -ENOENT;
        c->idle = *ic;
        sim_changed(drv, cpu);
        return 0;
}

static unsigned khz_to_permille(const struct power_driver *drv, uint32_t khz)
{
        return (unsigned) MIN((uint64_t) khz * 1000 / drv->cfg.sim_max_khz, 1000u);
}

static int sim_set_perf(struct power_driver *drv, unsigned cpu, const struct power_perf_request *req)
{
        struct power_sim_cpu *c = sim_cpu(drv, cpu);

        if (!c)
                return -ENOENT;
        if (req->flags & POWER_PERF_LEVEL)
                c->level_permille = MIN(req->level_permille, 1000u);
        if (req->flags & POWER_PERF_MAX_KHZ)
                c->level_permille = khz_to_permille(drv, req->max_khz);
        if (req->flags & POWER_PERF_MIN_KHZ)
                c->min_permille = khz_to_permille(drv, req->min_khz);
        if (c->level_permille < c->min_permille)
                c->level_permille = c->min_permille;
        if (req->flags & POWER_PERF_EPP)
                snprintf(c->epp, sizeof(c->epp), "%s", req->epp);
        sim_changed(drv, cpu);
        return 0;
}

const struct power_sim_cpu *power_sim_cpu(const struct power_driver *drv, unsigned cpu)
{
        if (drv->ops != &power_driver_sim_ops)
                return NULL;
        return sim_cpu((struct power_driver *) drv, cpu);
}

const struct power_driver_ops power_driver_sim_ops = {
        .name = "sim",
        .init = sim_init,
        .exit = sim_exit,
        .enter_idle = sim_enter_idle,
        .set_perf = sim_set_perf,
};
