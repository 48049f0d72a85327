/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for the per-VM policy metadata parser (vm_policy.h).  The
 * input is the metadata element as virDomainGetMetadata() would return it.
 * Checks what a successful parse promises: every set field within the range
 * hint_policy_validate() accepts (so the merge with the defaults succeeds),
 * a known placement mode, and a printable reason on failure; and the domain
 * XML reader of the operator's pins on the same bytes.
 * Seeds: fuzz/corpus/vm_policy/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vm_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct vm_policy p;
        struct hint_policy defaults, merged;
        struct vm_domain_pins dp;
        char err[VM_POLICY_ERROR_MAX];
        int r;

        /* The same bytes as a domain XML (the operator's pins, <numatune>): printable, bounded. */
        r = vm_policy_parse_domain_xml((const char *) data, size, &dp);
        if (r < 0 && r != -EBADMSG)
                abort();
        if (r == 0 && ((dp.pins & ~(unsigned) (VM_PIN_VCPUPIN | VM_PIN_EMULATORPIN | VM_PIN_VCPU_CPUSET)) ||
                       !memchr(dp.mem_nodeset, '\0', sizeof(dp.mem_nodeset))))
                abort();

        r = vm_policy_parse_metadata((const char *) data, size, &p, err, sizeof(err));
        if (r < 0) {
                if (r != -EBADMSG && r != -EMSGSIZE)
                        abort();
                for (const char *c = err; *c; c++)
                        if (*c < 0x20 || *c >= 0x7f)
                                abort();
                return 0;
        }
        if (p.source != VM_POLICY_METADATA || (unsigned) p.place_mode >= _PLACE_MODE_MAX || p.error[0])
                abort();
        hint_policy_init(&defaults);
        if (vm_policy_hint_policy(&p, &defaults, &merged) < 0)
                abort();
        return 0;
}
