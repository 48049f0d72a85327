/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * virtio_powerhint.c's frequency-to-table-index choice, compiled in user
 * space: the module's own code against the stand-in headers of tests/kshim
 * (whose table lookups are the kernel's own).  The cpufreq core clamps a
 * fast_switch target to policy->min..max, so the driver can be asked for a
 * frequency between two table entries; it must answer with the lowest entry at
 * or above it (CPUFREQ_RELATION_L, as the core does for target_index), on a
 * table that ascends.  A lookup for descending tables answers the table's
 * lowest frequency instead.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "../virtio_powerhint.c"

/* As the core's set_freq_table_sorted() after the driver's init(). */
static void sort_like_core(struct cpufreq_policy *policy)
{
	struct cpufreq_frequency_table *pos;
	unsigned int prev = 0;
	bool asc = true, desc = true;
	int idx;

	cpufreq_for_each_valid_entry_idx(pos, policy->freq_table, idx) {
		if (idx > 0) {
			asc = asc && pos->frequency > prev;
			desc = desc && pos->frequency < prev;
		}
		prev = pos->frequency;
	}
	policy->freq_table_sorted = asc ? CPUFREQ_TABLE_SORTED_ASCENDING :
				    desc ? CPUFREQ_TABLE_SORTED_DESCENDING : CPUFREQ_TABLE_UNSORTED;
}

static void new_policy(struct cpufreq_policy *policy, unsigned int cpu)
{
	memset(policy, 0, sizeof(*policy));
	policy->cpu = cpu;
	assert_int_equal(kshim_driver->init(policy), 0);
	policy->min = policy->freq_table[0].frequency;
	policy->max = policy->freq_table[POWERHINT_LEVELS - 1].frequency;
	sort_like_core(policy);
}

static int setup(void **state)
{
	max_khz = 2000000;
	assert_int_equal(powerhint_init(), 0);
	assert_non_null(kshim_driver);
	return 0;
}

static int teardown(void **state)
{
	powerhint_exit();
	memset(powerhint_cpus, 0, sizeof(powerhint_cpus));
	return 0;
}

static void test_table_ascends(void **state)
{
	struct cpufreq_policy policy;

	new_policy(&policy, 0);
	assert_int_equal(policy.freq_table_sorted, CPUFREQ_TABLE_SORTED_ASCENDING);
	for (int i = 0; i < POWERHINT_LEVELS; i++)
		assert_int_equal(policy.freq_table[i].frequency, 250000 * (i + 1));
}

/* What fast_switch() records as the request, read back as sysfs shows it. */
static unsigned int fast_switch_request_khz(struct cpufreq_policy *policy, unsigned int target_khz)
{
	unsigned int cur = kshim_driver->fast_switch(policy, target_khz);

	assert_int_equal(per_cpu_ptr(&powerhint_cpus, policy->cpu)->request_khz, cur); /* no grant */
	return cur;
}

static void test_fast_switch_between_entries(void **state)
{
	struct cpufreq_policy policy;
	char buf[32];

	new_policy(&policy, 1);
	/* exact entries map to themselves */
	for (int i = 0; i < POWERHINT_LEVELS; i++)
		assert_int_equal(fast_switch_request_khz(&policy, 250000 * (i + 1)), 250000 * (i + 1));
	/* between two entries: the one above */
	assert_int_equal(fast_switch_request_khz(&policy, 1100000), 1250000);
	assert_int_equal(fast_switch_request_khz(&policy, 1000001), 1250000);
	assert_int_equal(fast_switch_request_khz(&policy, 250001), 500000);
	assert_int_equal(fast_switch_request_khz(&policy, 1999999), 2000000);
	show_powerhint_request(&policy, buf);
	assert_string_equal(buf, "1024\n");
	/* below the table: its lowest entry; above: its highest */
	assert_int_equal(fast_switch_request_khz(&policy, 1), 250000);
	assert_int_equal(fast_switch_request_khz(&policy, 3000000), 2000000);
	/* a policy->max between entries, as the core clamps to it */
	policy.max = 1100000;
	assert_int_equal(fast_switch_request_khz(&policy, policy.max), 1250000);
	show_powerhint_request(&policy, buf);
	assert_string_equal(buf, "640\n");
}

/*
 * A grant is stored and read back, snapped up to a table level; the current
 * frequency stays the governor's request (a grant held as policy->cur stalls
 * a non-invariant schedutil at saturation: virtio_powerhint.c's header).
 */
static void test_grant_is_current(void **state)
{
	struct cpufreq_policy policy;
	char buf[32];

	new_policy(&policy, 2);
	policy.cur = 500000;
	assert_int_equal(store_powerhint_grant(&policy, "600\n", 4), 4);
	assert_int_equal(policy.cur, 500000);
	show_powerhint_grant(&policy, buf);
	assert_string_equal(buf, "640\n"); /* 600 snapped up to 1250000 kHz */
	assert_int_equal(kshim_driver->fast_switch(&policy, 1100000), 1250000);
	assert_int_equal(kshim_driver->fast_switch(&policy, 300000), 500000);
	show_powerhint_request(&policy, buf);
	assert_string_equal(buf, "256\n"); /* 500000 kHz */
	assert_int_equal(kshim_driver->get(2), 500000);
	assert_int_equal(store_powerhint_grant(&policy, "0\n", 2), 2);
	show_powerhint_grant(&policy, buf);
	assert_string_equal(buf, "0\n");
	assert_int_equal(store_powerhint_grant(&policy, "1025\n", 5), -ERANGE);
}

/* Not under a hypervisor: refused unless force=1. */
static void test_bare_metal_refused(void **state)
{
	powerhint_exit();
	kshim_hypervisor = false;
	assert_int_equal(powerhint_init(), -ENODEV);
	assert_null(kshim_driver);
	force = true;
	assert_int_equal(powerhint_init(), 0);
	force = false;
	kshim_hypervisor = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_table_ascends, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fast_switch_between_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grant_is_current, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bare_metal_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
