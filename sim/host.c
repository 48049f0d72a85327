/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The modelled host of a simulation: a topology (fixture tree, sysfs root or
 * a synthetic "synth:PxC" layout) bound to an energy model file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sim.h"

/*
 * synth:PxC: P packages of C cores with 2 SMT threads (siblings numbered in
 * the second half, as Linux does on x86), one LLC per 8 cores, one cpufreq
 * policy per CPU (800 MHz..3.8 GHz), cpuidle C1/C1E/C6 with SPR's latencies.
 * The same layout as bench/plan_bench.c, for host sizes no fixture has.
 */
static void set_err(struct sim_error *err, const char *file, unsigned line, const char *msg)
{
        if (!err)
                return;
        snprintf(err->file, sizeof(err->file), "%s", file);
        err->line = line;
        snprintf(err->message, sizeof(err->message), "%s", msg);
}

void sim_host_done(struct sim_host *h)
{
        em_host_free(h->em);
        topology_free(h->topo);
        h->em = NULL;
        h->topo = NULL;
}

int sim_host_load(const char *topology, const char *model_file, struct sim_host *ret, struct sim_error *err)
{
        struct sim_host h = { 0 };
        struct energy_model m;
        struct em_error merr = { 0 };
        unsigned p, c;
        char root[512], extra;
        struct stat st;
        const char *base;
        int r;

        if (sscanf(topology, "synth:%ux%u%c", &p, &c, &extra) == 2) {
                r = topology_synthetic(p, c, &h.topo);
                if (r < 0) {
                        set_err(err, topology, 0, "bad synthetic host (P packages x C cores, at most 4096 CPUs)");
                        return r;
                }
        } else {
                snprintf(root, sizeof(root), "%s/sys", topology);
                if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode))
                        snprintf(root, sizeof(root), "%s", topology);
                r = topology_load(root, &h.topo);
                if (r < 0) {
                        char msg[128];
                        snprintf(msg, sizeof(msg), "cannot read the topology: %s", strerror(-r));
                        set_err(err, topology, 0, msg);
                        return r;
                }
        }
        if (model_file) {
                r = energy_model_parse_file(model_file, &m, &merr);
                if (r < 0) {
                        set_err(err, merr.file[0] ? merr.file : model_file, merr.line, merr.message);
                        sim_host_done(&h);
                        return r;
                }
        } else {
                r = energy_model_from_topology(h.topo, &m);
                if (r < 0) {
                        set_err(err, topology, 0, "cannot derive an energy model from the topology");
                        sim_host_done(&h);
                        return r;
                }
        }
        r = em_host_new(h.topo, &m, &h.em);
        if (r < 0) {
                set_err(err, topology, 0, "the model does not fit the topology");
                sim_host_done(&h);
                return r;
        }
        base = strrchr(topology, '/');
        snprintf(h.topo_name, sizeof(h.topo_name), "%s", base && base[1] ? base + 1 : topology);
        snprintf(h.model_name, sizeof(h.model_name), "%s", m.name);
        *ret = h;
        return 0;
}
