/* SPDX-License-Identifier: GPL-2.0-or-later */
/* <asm/cpufeature.h> for virtio_powerhint.c in user space (see linux/kernel.h). */
#include "../linux/kernel.h"

#define X86_FEATURE_HYPERVISOR 0
/* The test runs "under a hypervisor" unless it says otherwise. */
static bool kshim_hypervisor = true;
#define boot_cpu_has(feature) ((void)(feature), kshim_hypervisor)
