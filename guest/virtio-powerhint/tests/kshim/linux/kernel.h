/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Userspace stand-ins for the few kernel interfaces virtio_powerhint.c uses,
 * so that tests/test-module-index.c can compile the module's own code and
 * call its cpufreq callbacks.  Only what the module needs; the cpufreq table
 * lookups in linux/cpufreq.h are copied from the kernel (6.1) unchanged.
 */
#ifndef KSHIM_KERNEL_H
#define KSHIM_KERNEL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

typedef uint64_t u64;

#define __init
#define __exit
#define KBUILD_MODNAME "virtio_powerhint"
#define CONFIG_X86 1
#define NSEC_PER_USEC 1000L
#define NR_CPUS 8

#define READ_ONCE(x) (x)
#define WRITE_ONCE(x, v) ((x) = (v))
#define clamp_val(v, lo, hi) ((v) < (lo) ? (lo) : (v) > (hi) ? (hi) : (v))
#define unlikely(x) (x)

#define pr_info(fmt, ...) fprintf(stderr, pr_fmt(fmt), ##__VA_ARGS__)
#define pr_err(fmt, ...) fprintf(stderr, pr_fmt(fmt), ##__VA_ARGS__)

static inline u64 div_u64(u64 dividend, uint32_t divisor)
{
	return dividend / divisor;
}

static inline int kstrtouint(const char *s, unsigned int base, unsigned int *res)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, (int)base);
	if (end == s || (*end && !(*end == '\n' && !end[1])) || errno || v > ~0u)
		return -EINVAL;
	*res = (unsigned int)v;
	return 0;
}

#define sysfs_emit(buf, ...) sprintf(buf, __VA_ARGS__)

/* per-CPU data: an array indexed by CPU */
#define DEFINE_PER_CPU(type, name) type name[NR_CPUS]
#define per_cpu_ptr(ptr, cpu) (&(*(ptr))[cpu])

/* module boilerplate */
#define module_param(name, type, perm)
#define MODULE_PARM_DESC(name, desc)
#define module_init(fn)
#define module_exit(fn)
#define MODULE_DESCRIPTION(s)
#define MODULE_AUTHOR(s)
#define MODULE_LICENSE(s)

#endif
