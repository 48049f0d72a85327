/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stddef.h>

#include "vm.h"

/*
 * Hint channel sockets of plain-QEMU VMs ([QEMU] HintSocket in
 * vmmpower.conf(5)).  libvirt names a domain's channel socket in its live XML;
 * a QEMU process started by hand, found by the /proc scan or a QMPSocket, has
 * no such record, so the operator gives a pattern, and the VM's name (its
 * -name guest=, or QMP query-name) fills it in:
 *
 *     HintSocket = /run/qemu/%n.hint
 *     qemu-system-x86_64 -name web1 ... \
 *         -chardev socket,id=ph0,path=/run/qemu/web1.hint,server=on,wait=off \
 *         -device virtserialport,chardev=ph0,name=org.vmmpower.hint.0
 *
 * "%n" is the name, "%%" a '%'; nothing else may follow a '%'.  The name is
 * whatever started QEMU chose, so it is only used when it names one file (a
 * portable file name: [A-Za-z0-9._+-], not starting with '.' or '-'), and the
 * socket found there must be a socket owned by the user the QEMU process runs
 * as (its effective uid): another local user who starts a process calling
 * itself "web1" gets no other user's channel.  A QEMU that drops privileges
 * (-run-with user=, -runas) creates its sockets before it does, as root: such
 * a socket is refused until chowned to the user QEMU runs as.
 *
 * The owner is checked here, once, on the path; what listens on the socket
 * when the daemon connects is checked by guest_hint.c (SO_PEERCRED pid ==
 * vm->pid, for every channel that is not a libvirt domain's), which catches
 * two QEMUs started with the same name and a socket replaced after the lstat.
 */

/* Check a pattern: absolute, printable, at least one %n, only %n/%% escapes.  0 or -EINVAL. */
int qemu_hint_pattern_check(const char *pattern);

/*
 * The pattern with the name filled in.  Returns 0, -EINVAL (bad pattern, or a
 * name that is not a portable file name) or -ENAMETOOLONG (does not fit in
 * size, or in a unix socket address).
 */
int qemu_hint_path(const char *pattern, const char *name, char *buf, size_t size);

/*
 * The hint socket of a plain-QEMU VM: qemu_hint_path() for vm->name, checked
 * to be a socket (-ENOTSOCK; -ENOENT if absent) owned by the effective uid in
 * procfs_root/<vm->pid>/status (-EPERM otherwise; -ESRCH when the process is
 * gone, -EBADMSG if its status has no Uid line).
 * buf must hold sizeof(vm->hint_socket) bytes.
 */
int qemu_hint_socket(const char *pattern, const char *procfs_root, const struct vm_info *vm, char *buf,
                     size_t size);
