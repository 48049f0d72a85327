// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * virtio_powerhint: a paravirtual cpufreq driver for vmmpower guests.
 *
 * A guest has no real frequency control: the host decides how fast a vCPU
 * runs.  This driver gives the guest's own cpufreq governor (schedutil) a
 * frequency table to choose from, so that the scheduler's per-CPU demand
 * becomes an explicit request, and lets the host's answer flow back:
 *
 *  - The table has POWERHINT_LEVELS (8) entries, level i = i/8 of max_khz
 *    (module parameter, default 2000000 kHz).  Every CPU is its own policy.
 *  - target_index() and fast_switch() record the requested frequency per CPU.
 *    The governor's request is exported as a level 0..1024 in the policy's
 *    sysfs directory, cpuN/cpufreq/powerhint_request, which powerhintd reads
 *    and sends to the host as "LEVEL <cpu> <level>".  powerhint_requests
 *    counts the calls (to see that the governor drives the driver).
 *  - powerhintd writes the host's "GRANT <cpu> <level>" into
 *    cpuN/cpufreq/powerhint_grant (snapped up to a table entry, read back as
 *    a level; 0 clears it).  The grant is reported, not made the CPU's
 *    current frequency: the current frequency is the governor's own request.
 *    A guest without frequency invariance (x86 under TCG or KVM: no
 *    APERF/MPERF) has schedutil map util to policy->cur x 1.25 x util/max; a
 *    grant held as policy->cur makes that raw target repeat at saturation,
 *    and schedutil's cached_raw_freq shortcut then returns the last, lower
 *    request: a busy vCPU stayed at level 384 or 640 with util 1024
 *    (test_hints_hostile.py HostileGuest, 2 of 2 runs; never without grants).
 *
 * Nothing here talks to the host directly: the virtio-serial port belongs to
 * powerhintd in user space, which keeps the protocol parser out of the kernel.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpu.h>
#include <linux/cpufreq.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/percpu.h>
#include <linux/slab.h>
#ifdef CONFIG_X86
#include <asm/cpufeature.h>
#endif

#define POWERHINT_LEVELS	8
#define POWERHINT_LEVEL_MAX	1024

static unsigned int max_khz = 2000000;
module_param(max_khz, uint, 0444);
MODULE_PARM_DESC(max_khz, "frequency reported for the highest level, in kHz (default 2000000)");

static bool force;
module_param(force, bool, 0444);
MODULE_PARM_DESC(force, "load even when not running under a hypervisor");

static unsigned int transition_delay_us = 1000;
module_param(transition_delay_us, uint, 0444);
MODULE_PARM_DESC(transition_delay_us, "minimum interval between governor requests (default 1000)");

struct powerhint_cpu {
	unsigned int request_khz;	/* last frequency the governor asked for */
	unsigned int grant_khz;		/* last frequency the host granted, 0 = none */
	unsigned long requests;		/* number of target/fast_switch calls */
};

static DEFINE_PER_CPU(struct powerhint_cpu, powerhint_cpus);

static struct cpufreq_frequency_table powerhint_table[POWERHINT_LEVELS + 1];

static unsigned int khz_to_level(unsigned int khz)
{
	return (unsigned int)div_u64((u64)khz * POWERHINT_LEVEL_MAX, max_khz);
}

/* The lowest table frequency >= level (levels round up: a grant is a floor). */
static unsigned int level_to_khz(unsigned int level)
{
	int i;

	for (i = 0; i < POWERHINT_LEVELS; i++)
		if (khz_to_level(powerhint_table[i].frequency) >= level)
			return powerhint_table[i].frequency;
	return powerhint_table[POWERHINT_LEVELS - 1].frequency;
}

static unsigned int powerhint_current(struct powerhint_cpu *pc)
{
	return READ_ONCE(pc->request_khz);
}

static unsigned int powerhint_record(unsigned int cpu, unsigned int khz)
{
	struct powerhint_cpu *pc = per_cpu_ptr(&powerhint_cpus, cpu);

	WRITE_ONCE(pc->request_khz, khz);
	WRITE_ONCE(pc->requests, READ_ONCE(pc->requests) + 1);
	return powerhint_current(pc);
}

static int powerhint_target_index(struct cpufreq_policy *policy, unsigned int index)
{
	powerhint_record(policy->cpu, powerhint_table[index].frequency);
	return 0;
}

/*
 * The core clamps target_freq to policy->min..max before calling this, so it
 * need not be a table entry (scaling_max_freq between two entries).  Pick the
 * lowest entry at or above it, the rule (CPUFREQ_RELATION_L) the core uses for
 * target_index(); cpufreq_table_find_index_l() follows the table's order,
 * which is ascending here.
 */
static unsigned int powerhint_fast_switch(struct cpufreq_policy *policy, unsigned int target_freq)
{
	int index = cpufreq_table_find_index_l(policy, target_freq, false);

	if (index < 0)
		return 0;
	return powerhint_record(policy->cpu, powerhint_table[index].frequency);
}

static unsigned int powerhint_get(unsigned int cpu)
{
	return powerhint_current(per_cpu_ptr(&powerhint_cpus, cpu));
}

static int powerhint_cpu_init(struct cpufreq_policy *policy)
{
	struct powerhint_cpu *pc = per_cpu_ptr(&powerhint_cpus, policy->cpu);

	/* one policy per vCPU: the host schedules each vCPU on its own */
	cpumask_copy(policy->cpus, cpumask_of(policy->cpu));
	policy->freq_table = powerhint_table;
	policy->cpuinfo.transition_latency = transition_delay_us * NSEC_PER_USEC;
	policy->transition_delay_us = transition_delay_us;
	policy->fast_switch_possible = true;
	if (!READ_ONCE(pc->request_khz))
		WRITE_ONCE(pc->request_khz, max_khz);
	policy->cur = powerhint_current(pc);
	return 0;
}

static ssize_t show_powerhint_request(struct cpufreq_policy *policy, char *buf)
{
	struct powerhint_cpu *pc = per_cpu_ptr(&powerhint_cpus, policy->cpu);

	return sysfs_emit(buf, "%u\n", khz_to_level(READ_ONCE(pc->request_khz)));
}

static ssize_t show_powerhint_requests(struct cpufreq_policy *policy, char *buf)
{
	struct powerhint_cpu *pc = per_cpu_ptr(&powerhint_cpus, policy->cpu);

	return sysfs_emit(buf, "%lu\n", READ_ONCE(pc->requests));
}

static ssize_t show_powerhint_grant(struct cpufreq_policy *policy, char *buf)
{
	struct powerhint_cpu *pc = per_cpu_ptr(&powerhint_cpus, policy->cpu);
	unsigned int grant = READ_ONCE(pc->grant_khz);

	return sysfs_emit(buf, "%u\n", grant ? khz_to_level(grant) : 0);
}

static ssize_t store_powerhint_grant(struct cpufreq_policy *policy, const char *buf, size_t count)
{
	struct powerhint_cpu *pc = per_cpu_ptr(&powerhint_cpus, policy->cpu);
	unsigned int level;
	int ret;

	ret = kstrtouint(buf, 10, &level);
	if (ret)
		return ret;
	if (level > POWERHINT_LEVEL_MAX)
		return -ERANGE;
	WRITE_ONCE(pc->grant_khz, level ? level_to_khz(level) : 0);
	return count;
}

cpufreq_freq_attr_ro(powerhint_request);
cpufreq_freq_attr_ro(powerhint_requests);
cpufreq_freq_attr_rw(powerhint_grant);

static struct freq_attr *powerhint_attrs[] = {
	&cpufreq_freq_attr_scaling_available_freqs,
	&powerhint_request,
	&powerhint_requests,
	&powerhint_grant,
	NULL,
};

static struct cpufreq_driver powerhint_driver = {
	.name		= "powerhint",	/* < CPUFREQ_NAME_LEN (16) with its NUL */
	.flags		= CPUFREQ_CONST_LOOPS,
	.verify		= cpufreq_generic_frequency_table_verify,
	.target_index	= powerhint_target_index,
	.fast_switch	= powerhint_fast_switch,
	.get		= powerhint_get,
	.init		= powerhint_cpu_init,
	.attr		= powerhint_attrs,
};

static int __init powerhint_init(void)
{
	int i, ret;

#ifdef CONFIG_X86
	if (!boot_cpu_has(X86_FEATURE_HYPERVISOR) && !force) {
		pr_info("not running under a hypervisor, not loading (force=1 to override)\n");
		return -ENODEV;
	}
#endif
	if (max_khz < POWERHINT_LEVELS * 1000 || max_khz > 100000000) {
		pr_err("max_khz=%u out of range\n", max_khz);
		return -EINVAL;
	}
	for (i = 0; i < POWERHINT_LEVELS; i++) {
		powerhint_table[i].driver_data = i;
		powerhint_table[i].frequency =
			(unsigned int)div_u64((u64)max_khz * (i + 1), POWERHINT_LEVELS);
	}
	powerhint_table[POWERHINT_LEVELS].frequency = CPUFREQ_TABLE_END;

	ret = cpufreq_register_driver(&powerhint_driver);
	if (ret) {
		pr_err("cannot register cpufreq driver: %d (another driver loaded?)\n", ret);
		return ret;
	}
	pr_info("registered, %d levels up to %u kHz\n", POWERHINT_LEVELS, max_khz);
	return 0;
}

static void __exit powerhint_exit(void)
{
	cpufreq_unregister_driver(&powerhint_driver);
}

module_init(powerhint_init);
module_exit(powerhint_exit);

MODULE_DESCRIPTION("Paravirtual cpufreq driver exporting governor requests to vmmpower hosts");
MODULE_AUTHOR("vmmpower");
MODULE_LICENSE("GPL");
