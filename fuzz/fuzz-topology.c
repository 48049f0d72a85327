/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for the sysfs topology loader (topology.h): the input is
 * a tree of sysfs files (format in fuzz-tree.h) standing for /sys, loaded
 * with topology_load() and, when accepted, dumped and turned into the
 * default energy model.  The tree is served from memory (fuzz-memfs.c);
 * VMMPOWER_FUZZ_TREE_CHECK=1 also loads it from disk and compares.
 * Checks what a successful load promises: every CPU
 * below VP_MAX_CPUS, each CPU's policy index inside policies[], ascending
 * frequency tables of at most TOPO_MAX_FREQS, idle states within
 * TOPO_MAX_IDLE_STATES, and an error that is a negative errno otherwise.
 * Seeds: fuzz/corpus/topology/ (the recorded trees of tests/data/topology).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_TREE_MEMFS
#include "energy_model.h"
#include "fuzz-tree.h"
#include "log.h"
#include "topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Load the tree at root, check what a load promises, and return what it
 * loaded as text (the error, or topology_dump's output; malloc'ed) for the
 * memory-vs-disk comparison.
 */
static char *load_and_check(const char *root)
{
        struct topology *t = NULL;
        struct energy_model m;
        char *text = NULL;
        size_t len = 0;
        FILE *f;
        int r;

        f = open_memstream(&text, &len);
        if (!f)
                abort();
        r = topology_load(root, &t);
        if (r < 0) {
                if (t || r < -4095)
                        abort();
                fprintf(f, "error %d\n", r);
                fclose(f);
                return text;
        }
        if (t->n_cpus > VP_MAX_CPUS)
                abort();
        for (unsigned c = 0; c < t->n_cpus; c++) {
                const struct topo_cpu *cpu = &t->cpus[c];

                if (cpu->id != c || cpu->n_idle_states > TOPO_MAX_IDLE_STATES)
                        abort();
                if (cpu->policy < -1 || (cpu->policy >= 0 && (unsigned) cpu->policy >= t->n_policies))
                        abort();
        }
        for (unsigned p = 0; p < t->n_policies; p++) {
                const struct topo_cpufreq_policy *pol = &t->policies[p];

                if (pol->n_freqs > TOPO_MAX_FREQS)
                        abort();
                for (unsigned i = 1; i < pol->n_freqs; i++)
                        if (pol->freqs_khz[i] < pol->freqs_khz[i - 1])
                                abort();
        }
        topology_dump(t, f);
        if (energy_model_from_topology(t, &m) == 0)
                fprintf(f, "model valid %d\n", energy_model_validate(&m, &(struct em_error) { 0 }));
        fclose(f);
        topology_free(t);
        return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > 256 * 1024)
                return 0;
        log_set_max_level((enum log_level) 0); /* the loader logs every bad file at error */
        fuzz_tree_run("sys", data, size, load_and_check);
        return 0;
}
