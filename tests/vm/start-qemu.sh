#!/bin/sh
# Start a test guest under plain QEMU (TCG, no libvirt), daemonized.
# Usage: start-qemu.sh NAME VCPUS [QMP_SOCKET]
# Prints the QEMU pid on stdout. Files (under $VMMPOWER_TEST_RUNDIR, default
# /run/vmmpower-test): NAME.pid, NAME.console (serial unix socket, server),
# NAME.hint (virtio-serial port org.vmmpower.hint.0, unix socket server), NAME.log.
# The QMP socket defaults to RUNDIR/NAME.qmp; pass "none" for no QMP.
# Environment: VMMPOWER_GUEST_DIR (default /var/cache/vmmpower-test/guest), built if missing;
# VMMPOWER_GUEST_MEM_MB (default 128); VMMPOWER_GUEST_APPEND (extra kernel cmdline).
set -eu
die() { echo "start-qemu: $*" >&2; exit 1; }
[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: start-qemu.sh NAME VCPUS [QMP_SOCKET|none]"
NAME=$1
VCPUS=$2
case $NAME in ''|*[!A-Za-z0-9_.-]*) die "bad name '$NAME'" ;; esac
case $VCPUS in ''|*[!0-9]*) die "bad vcpu count '$VCPUS'" ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
RUNDIR=${VMMPOWER_TEST_RUNDIR:-/run/vmmpower-test}
GUEST=${VMMPOWER_GUEST_DIR:-/var/cache/vmmpower-test/guest}
MEM=${VMMPOWER_GUEST_MEM_MB:-128}
QMP=${3:-$RUNDIR/$NAME.qmp}
"$HERE/build-guest.sh" "$GUEST"
mkdir -p "$RUNDIR"
PIDFILE=$RUNDIR/$NAME.pid
if [ -r "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
        die "guest $NAME already running (pid $(cat "$PIDFILE"))"
fi
rm -f "$PIDFILE" "$RUNDIR/$NAME.console" "$RUNDIR/$NAME.hint"
QMPARGS=""
if [ "$QMP" != none ]; then
        rm -f "$QMP"
        QMPARGS="-qmp unix:$QMP,server=on,wait=off"
fi
APPEND="$(cat "$GUEST/cmdline") ${VMMPOWER_GUEST_APPEND:-}"
# shellcheck disable=SC2086
qemu-system-x86_64 -accel tcg,thread=multi -name "$NAME,debug-threads=on" \
        -machine pc -smp "$VCPUS" -m "$MEM" -nographic -nodefaults -no-user-config \
        -kernel "$GUEST/vmlinuz" -initrd "$GUEST/initramfs.cpio.gz" -append "$APPEND" \
        -chardev "socket,id=con0,path=$RUNDIR/$NAME.console,server=on,wait=off" \
        -serial chardev:con0 \
        -device virtio-serial-pci,id=vser0 \
        -chardev "socket,id=hint0,path=$RUNDIR/$NAME.hint,server=on,wait=off" \
        -device virtserialport,bus=vser0.0,chardev=hint0,name=org.vmmpower.hint.0 \
        $QMPARGS -monitor none -display none -D "$RUNDIR/$NAME.log" \
        -daemonize -pidfile "$PIDFILE" || die "qemu-system-x86_64 failed"
cat "$PIDFILE"
