/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * libFuzzer target for libvirt's domain status XML (libvirt_src.h): the input
 * is /run/libvirt/qemu/NAME.xml, parsed with libvirt_parse_status_xml() and
 * libvirt_parse_hint_channel().  Checks what a successful parse promises:
 * a positive pid, vCPU indexes strictly ascending below VM_MAX_VCPUS, distinct
 * positive tids; a hint socket path that is absolute, NUL-terminated and free
 * of control characters.  Seeds: fuzz/corpus/libvirt_status/ (tests/data/libvirt).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "libvirt_src.h"
#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct vm_info vm = { .libvirt_id = -1 };
        char path[108];
        int r;

        log_set_max_level((enum log_level) 0);
        r = libvirt_parse_status_xml((const char *) data, size, &vm);
        if (r == 0) {
                if (vm.pid <= 0 || vm.n_vcpus > VM_MAX_VCPUS)
                        abort();
                for (unsigned k = 0; k < vm.n_vcpus; k++) {
                        if (vm.vcpus[k].tid <= 0 || vm.vcpus[k].index < 0 || vm.vcpus[k].index >= VM_MAX_VCPUS)
                                abort();
                        if (k > 0 && vm.vcpus[k].index <= vm.vcpus[k - 1].index)
                                abort();
                        for (unsigned j = 0; j < k; j++)
                                if (vm.vcpus[j].tid == vm.vcpus[k].tid)
                                        abort();
                }
        } else if (r != -EBADMSG && r != -EMSGSIZE && r != -ENOMEM)
                abort();
        vm_info_done(&vm);

        r = libvirt_parse_hint_channel((const char *) data, size, path, sizeof(path));
        if (r == 0) {
                size_t len = strnlen(path, sizeof(path));

                if (len == 0 || len >= sizeof(path) || path[0] != '/')
                        abort();
                for (size_t i = 0; i < len; i++)
                        if ((unsigned char) path[i] < 0x20 || path[i] == 0x7f)
                                abort();
        }
        return 0;
}
