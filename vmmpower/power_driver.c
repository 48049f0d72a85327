/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Power driver core (power_driver.h): the registry of backends, the
 * validation of their ops tables, the power_driver_* wrappers every caller
 * goes through, and what the backends share (stats, last write, events).
 * The backends: power_driver_sysfs.c (the real host) and power_driver_sim.c
 * (in memory, for the energy model and the simulator).
 */
#define POWER_DRIVER_BACKEND /* struct power_driver (power_driver.h) */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "power_driver.h"

#define MAX_DRIVERS 8

/* ---------------------------------------------------------------- core */

static const struct power_driver_ops *registry[MAX_DRIVERS];
static size_t n_registry;

int power_driver_validate(const struct power_driver_ops *ops, const char **ret_missing)
{
        const char *missing = NULL;

        if (!ops)
                missing = "ops";
        else if (!ops->name || !*ops->name)
                missing = "name";
        else if (!ops->enter_idle)
                missing = "enter_idle";
        else if (!ops->set_perf)
                missing = "set_perf";
        else if (ops->exit && !ops->init)
                missing = "init"; /* exit without init frees what nobody allocated */
        if (missing) {
                if (ret_missing)
                        *ret_missing = missing;
                return -EINVAL;
        }
        return 0;
}

int power_driver_register(const struct power_driver_ops *ops)
{
        const char *missing;
        int r;

        r = power_driver_validate(ops, &missing);
        if (r < 0)
                return log_debug_errno(r, "Power driver %s: required member '%s' missing, not registering",
                                       ops && ops->name ? ops->name : "(unnamed)", missing);
        for (size_t i = 0; i < n_registry; i++)
                if (strcmp(registry[i]->name, ops->name) == 0)
                        return registry[i] == ops ? 0 : -EEXIST;
        if (n_registry == MAX_DRIVERS)
                return -ENOSPC;
        registry[n_registry++] = ops;
        return 0;
}

int power_driver_new(const char *name, const struct power_driver_config *cfg, struct power_driver **ret)
{
        const struct power_driver_ops *ops = NULL;
        struct power_driver *drv;
        int r;

        (void) power_driver_register(&power_driver_sysfs_ops);
        (void) power_driver_register(&power_driver_sim_ops);
        for (size_t i = 0; i < n_registry; i++)
                if (strcmp(registry[i]->name, name) == 0)
                        ops = registry[i];
        if (!ops)
                return -ENOENT;
        drv = calloc(1, sizeof(*drv));
        if (!drv)
                return -ENOMEM;
        drv->ops = ops;
        if (cfg)
                drv->cfg = *cfg;
        if (drv->cfg.backoff.max_attempts == 0 && drv->cfg.backoff.initial_ns == 0)
                drv->cfg.backoff = BACKOFF_DEFAULT;
        if (ops->init) {
                r = ops->init(drv);
                if (r < 0) {
                        free(drv);
                        return r;
                }
        }
        *ret = drv;
        return 0;
}

struct power_driver *power_driver_free(struct power_driver *drv)
{
        if (!drv)
                return NULL;
        if (drv->ops->exit)
                drv->ops->exit(drv);
        free(drv);
        return NULL;
}

void power_driver_set_now(struct power_driver *drv, nsec_t now)
{
        drv->now = now;
}

int power_driver_enter_idle(struct power_driver *drv, unsigned cpu, const struct power_idle_constraint *c)
{
        return drv->ops->enter_idle(drv, cpu, c);
}

int power_driver_late_callback(struct power_driver *drv, nsec_t now)
{
        drv->now = now;
        if (!drv->ops->late_callback)
                return 0;
        return drv->ops->late_callback(drv, now);
}

int power_driver_set_perf(struct power_driver *drv, unsigned cpu, const struct power_perf_request *req)
{
        return drv->ops->set_perf(drv, cpu, req);
}

const char *power_driver_name(const struct power_driver *drv)
{
        return drv->ops->name;
}

const struct power_driver_config *power_driver_get_config(const struct power_driver *drv)
{
        return &drv->cfg;
}

void *power_driver_priv(const struct power_driver *drv)
{
        return drv->priv;
}

void power_driver_set_priv(struct power_driver *drv, void *priv)
{
        drv->priv = priv;
}

struct power_driver_stats *power_driver_stats(struct power_driver *drv)
{
        return &drv->stats;
}

const struct power_write_info *power_driver_last_write(const struct power_driver *drv)
{
        return &drv->last;
}

bool power_driver_class_disabled(const struct power_driver *drv, enum power_knob_class c)
{
        return c < _POWER_KNOB_CLASS_MAX && drv->class_disabled[c];
}

const char *power_knob_class_to_string(enum power_knob_class c)
{
        static const char *const names[_POWER_KNOB_CLASS_MAX] = {
                [POWER_KNOB_CPUFREQ] = "cpufreq",
                [POWER_KNOB_CPUIDLE] = "cpuidle",
                [POWER_KNOB_PM_QOS] = "pm_qos",
        };

        return c < _POWER_KNOB_CLASS_MAX ? names[c] : NULL;
}

void power_event_format(const struct power_event *ev, char *buf, size_t size)
{
        const char *path = ev->path ? ev->path : "?", *cls = power_knob_class_to_string(ev->cls);
        const char *err = strerror(ev->error < 0 ? -ev->error : ev->error);

        if (!cls)
                cls = "?";
        switch (ev->type) {
        case POWER_EVENT_GAVE_UP:
                snprintf(buf, size, "%s: still busy after %u retries, giving up: %s", path, ev->attempts, err);
                break;
        case POWER_EVENT_CLASS_DISABLED:
                snprintf(buf, size, "%s: %s; disabling all %s writes, trying one again in %" PRId64 " s", path, err,
                         cls, ev->retry_in_ns / NSEC_PER_SEC);
                break;
        case POWER_EVENT_CLASS_ENABLED:
                snprintf(buf, size, "%s: written; %s writes are allowed again", path, cls);
                break;
        case POWER_EVENT_WRITE_FAILED:
                snprintf(buf, size, "%s: write of %s failed: %s", path, ev->value ? ev->value : "?", err);
                break;
        case POWER_EVENT_JOURNAL_FAILED:
                snprintf(buf, size, "%s: not changed (not written, or written and put back), the journal cannot "
                         "record it: %s", path, err);
                break;
        case POWER_EVENT_POLICY_UNREADABLE:
                snprintf(buf, size, "%s: cpufreq policy unreadable, ignoring: %s", path, err);
                break;
        default:
                snprintf(buf, size, "%s: event %d: %s", path, (int) ev->type, err);
                break;
        }
}

enum log_level power_event_level(const struct power_event *ev)
{
        switch (ev->type) {
        case POWER_EVENT_CLASS_ENABLED:
                return LOG_LEVEL_INFO;
        case POWER_EVENT_JOURNAL_FAILED:
                return LOG_LEVEL_ERR;
        default:
                return LOG_LEVEL_WARNING;
        }
}

unsigned power_driver_pending_retries(const struct power_driver *drv)
{
        return drv->pending_retries;
}
