/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for the QMP reply parsers (qmp.h).  The input is one
 * reply as QEMU would send it; it is fed to every parser.  When it contains
 * a '\n', the part before is also used as the query-cpus-fast reply and the
 * part after as the query-stats reply of qmp_parse_halt_poll, so both sides
 * of the qom-path matching get fuzzed.  Seeds: the .json files in tests/data/qmp.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "qmp.h"

static const char cpus_fast[] =
        "{\"return\": [{\"thread-id\": 1665, \"qom-path\": \"/machine/unattached/device[0]\", \"cpu-index\": 0},"
        " {\"thread-id\": 1666, \"qom-path\": \"/machine/unattached/device[2]\", \"cpu-index\": 1}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct vm_info vm = {};
        char name[VM_NAME_MAX];
        enum vm_accel accel;
        uint64_t hp[8];
        char *s, *nl;

        if (size > QMP_REPLY_MAX + 16)
                return 0;
        log_set_max_level(LOG_LEVEL_ERR);
        s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = 0;

        if (qmp_parse_cpus_fast(s, &vm) == 0) {
                /* what a successful parse promises */
                for (unsigned i = 0; i < vm.n_vcpus; i++) {
                        if (vm.vcpus[i].tid <= 0 || vm.vcpus[i].index < 0 || vm.vcpus[i].index >= VM_MAX_VCPUS)
                                abort();
                        if (i > 0 && vm.vcpus[i].index <= vm.vcpus[i - 1].index)
                                abort();
                }
                vm_info_done(&vm);
        }
        if (qmp_parse_query_name(s, name, sizeof(name)) == 0 && strlen(name) >= sizeof(name))
                abort();
        (void) qmp_parse_query_kvm(s, &accel);
        (void) qmp_parse_halt_poll(s, cpus_fast, hp, 8);

        nl = strchr(s, '\n');
        if (nl) {
                *nl = 0;
                (void) qmp_parse_halt_poll(nl + 1, s, hp, 8);
        }
        free(s);
        return 0;
}
