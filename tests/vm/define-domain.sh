#!/bin/sh
# Render tests/vm/domain.xml.in on stdout.
# Usage: define-domain.sh NAME VCPUS [EXTRA_CMDLINE]   e.g. ... | virsh define /dev/stdin
# Environment: VMMPOWER_GUEST_DIR (default /var/cache/vmmpower-test/guest, built if
# missing), VMMPOWER_GUEST_MEM_MB (default 128), VMMPOWER_TEST_RUNDIR (default
# /run/vmmpower-test; the serial console socket is RUNDIR/NAME.console).
set -eu
die() { echo "define-domain: $*" >&2; exit 1; }
[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: define-domain.sh NAME VCPUS [EXTRA_CMDLINE]"
case $1 in ''|*[!A-Za-z0-9_.-]*) die "bad name '$1'" ;; esac
case $2 in ''|*[!0-9]*) die "bad vcpu count '$2'" ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
GUEST=${VMMPOWER_GUEST_DIR:-/var/cache/vmmpower-test/guest}
RUNDIR=${VMMPOWER_TEST_RUNDIR:-/run/vmmpower-test}
"$HERE/build-guest.sh" "$GUEST" >&2
mkdir -p "$RUNDIR" && chmod 755 "$RUNDIR"
CMDLINE="$(cat "$GUEST/cmdline") ${3:-}"
case $CMDLINE in *[\&\<\>\'\"@\|]*) die "cmdline must not contain XML or sed metacharacters" ;; esac
sed -e "s|@NAME@|$1|g" -e "s|@VCPUS@|$2|g" -e "s|@MEMORY_MIB@|${VMMPOWER_GUEST_MEM_MB:-128}|g" \
    -e "s|@KERNEL@|$GUEST/vmlinuz|g" -e "s|@INITRD@|$GUEST/initramfs.cpio.gz|g" \
    -e "s|@CMDLINE@|$CMDLINE|g" -e "s|@CONSOLE@|$RUNDIR/$1.console|g" "$HERE/domain.xml.in"
