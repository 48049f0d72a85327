/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The parts of <linux/cpufreq.h> virtio_powerhint.c uses (see kernel.h). */
#ifndef KSHIM_CPUFREQ_H
#define KSHIM_CPUFREQ_H

#include "kernel.h"

struct cpumask {
	unsigned long bits;
};

static inline const struct cpumask *cpumask_of(unsigned int cpu)
{
	static struct cpumask masks[NR_CPUS];

	masks[cpu].bits = 1ul << cpu;
	return &masks[cpu];
}

static inline void cpumask_copy(struct cpumask *dst, const struct cpumask *src)
{
	*dst = *src;
}

enum cpufreq_table_sorting {
	CPUFREQ_TABLE_UNSORTED,
	CPUFREQ_TABLE_SORTED_ASCENDING,
	CPUFREQ_TABLE_SORTED_DESCENDING
};

struct cpufreq_frequency_table {
	unsigned int flags;
	unsigned int driver_data;
	unsigned int frequency;
};

#define CPUFREQ_ENTRY_INVALID		~0u
#define CPUFREQ_TABLE_END		~1u
#define CPUFREQ_INEFFICIENT_FREQ	(1 << 1)
#define CPUFREQ_CONST_LOOPS		(1 << 1)

struct cpufreq_cpuinfo {
	unsigned int max_freq;
	unsigned int min_freq;
	unsigned int transition_latency;
};

struct cpufreq_policy {
	struct cpumask cpus[1];
	unsigned int cpu;
	struct cpufreq_cpuinfo cpuinfo;
	unsigned int min;
	unsigned int max;
	unsigned int cur;
	struct cpufreq_frequency_table *freq_table;
	enum cpufreq_table_sorting freq_table_sorted;
	bool fast_switch_possible;
	unsigned int transition_delay_us;
};

struct cpufreq_policy_data;

struct freq_attr {
	const char *name;
	ssize_t (*show)(struct cpufreq_policy *policy, char *buf);
	ssize_t (*store)(struct cpufreq_policy *policy, const char *buf, size_t count);
};

#define cpufreq_freq_attr_ro(_name) \
	static struct freq_attr _name = { .name = #_name, .show = show_##_name }
#define cpufreq_freq_attr_rw(_name) \
	static struct freq_attr _name = { .name = #_name, .show = show_##_name, .store = store_##_name }

static struct freq_attr cpufreq_freq_attr_scaling_available_freqs = { .name = "scaling_available_frequencies" };

struct cpufreq_driver {
	char name[16];
	unsigned int flags;
	int (*init)(struct cpufreq_policy *policy);
	int (*verify)(struct cpufreq_policy_data *policy);
	int (*target_index)(struct cpufreq_policy *policy, unsigned int index);
	unsigned int (*fast_switch)(struct cpufreq_policy *policy, unsigned int target_freq);
	unsigned int (*get)(unsigned int cpu);
	struct freq_attr **attr;
};

static inline int cpufreq_generic_frequency_table_verify(struct cpufreq_policy_data *policy)
{
	return 0;
}

/* The test sees the registered driver here. */
static const struct cpufreq_driver *kshim_driver;

static inline int cpufreq_register_driver(struct cpufreq_driver *driver)
{
	kshim_driver = driver;
	return 0;
}

static inline void cpufreq_unregister_driver(struct cpufreq_driver *driver)
{
	kshim_driver = NULL;
}

/* From here to the end: include/linux/cpufreq.h of Linux 6.1, unchanged. */

#define cpufreq_for_each_entry_idx(pos, table, idx)	\
	for (pos = table, idx = 0; pos->frequency != CPUFREQ_TABLE_END; \
		pos++, idx++)

#define cpufreq_for_each_valid_entry_idx(pos, table, idx)		\
	cpufreq_for_each_entry_idx(pos, table, idx)			\
		if (pos->frequency == CPUFREQ_ENTRY_INVALID)		\
			continue;					\
		else

#define cpufreq_for_each_efficient_entry_idx(pos, table, idx, efficiencies)	\
	cpufreq_for_each_valid_entry_idx(pos, table, idx)			\
		if (efficiencies && (pos->flags & CPUFREQ_INEFFICIENT_FREQ))	\
			continue;						\
		else
/* Find lowest freq at or above target in a table in ascending order */
static inline int cpufreq_table_find_index_al(struct cpufreq_policy *policy,
					      unsigned int target_freq,
					      bool efficiencies)
{
	struct cpufreq_frequency_table *table = policy->freq_table;
	struct cpufreq_frequency_table *pos;
	unsigned int freq;
	int idx, best = -1;

	cpufreq_for_each_efficient_entry_idx(pos, table, idx, efficiencies) {
		freq = pos->frequency;

		if (freq >= target_freq)
			return idx;

		best = idx;
	}

	return best;
}

/* Find lowest freq at or above target in a table in descending order */
static inline int cpufreq_table_find_index_dl(struct cpufreq_policy *policy,
					      unsigned int target_freq,
					      bool efficiencies)
{
	struct cpufreq_frequency_table *table = policy->freq_table;
	struct cpufreq_frequency_table *pos;
	unsigned int freq;
	int idx, best = -1;

	cpufreq_for_each_efficient_entry_idx(pos, table, idx, efficiencies) {
		freq = pos->frequency;

		if (freq == target_freq)
			return idx;

		if (freq > target_freq) {
			best = idx;
			continue;
		}

		/* No freq found above target_freq */
		if (best == -1)
			return idx;

		return best;
	}

	return best;
}

static inline int find_index_l(struct cpufreq_policy *policy,
			       unsigned int target_freq,
			       unsigned int min, unsigned int max,
			       bool efficiencies)
{
	target_freq = clamp_val(target_freq, min, max);

	if (policy->freq_table_sorted == CPUFREQ_TABLE_SORTED_ASCENDING)
		return cpufreq_table_find_index_al(policy, target_freq,
						   efficiencies);
	else
		return cpufreq_table_find_index_dl(policy, target_freq,
						   efficiencies);
}

/* Works only on sorted freq-tables */
static inline int cpufreq_table_find_index_l(struct cpufreq_policy *policy,
					     unsigned int target_freq,
					     bool efficiencies)
{
	return find_index_l(policy, target_freq, policy->min, policy->max, efficiencies);
}

#endif
