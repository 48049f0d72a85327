#!/bin/sh
# Start libvirtd (+ virtlogd) without systemd, idempotently.
# Creates the libvirt-qemu user / kvm group if missing and the runtime directories, starts
# the daemons if they are not running and waits (bounded, $VMMPOWER_LIBVIRTD_WAIT seconds,
# default 20) until `virsh -c qemu:///system version` answers.
# QEMU runs as libvirt's default user (libvirt-qemu:kvm on Debian); /etc/libvirt/qemu.conf
# is not modified: the test tooling keeps files QEMU must open world-readable and its
# sockets in directories QEMU's user can enter (see tests/vm/README).
set -eu
die() { echo "start-libvirtd: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root"
WAIT=${VMMPOWER_LIBVIRTD_WAIT:-20}
URI=qemu:///system

for b in libvirtd virtlogd virsh; do
        command -v $b >/dev/null 2>&1 || [ -x /usr/sbin/$b ] ||
                die "$b not found (run tools/setup-host.sh or apt-get install libvirt-daemon-system libvirt-clients)"
done
PATH=$PATH:/usr/sbin:/sbin

getent group kvm >/dev/null || groupadd --system kvm
getent group libvirt-qemu >/dev/null || groupadd --system libvirt-qemu
getent group libvirt >/dev/null || groupadd --system libvirt
id libvirt-qemu >/dev/null 2>&1 ||
        useradd --system --gid kvm --groups kvm,libvirt-qemu --home-dir /var/lib/libvirt \
                --no-create-home --shell /usr/sbin/nologin libvirt-qemu
mkdir -p /var/log/libvirt/qemu /var/run/libvirt /var/lib/libvirt/qemu /var/cache/libvirt

running() { # NAME: a process with this exact name runs (pidfile first, then /proc scan)
        pf=/var/run/$1.pid
        if [ -r "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null &&
           [ "$(cat /proc/"$(cat "$pf")"/comm 2>/dev/null)" = "$1" ]; then
                return 0
        fi
        for c in /proc/[0-9]*/comm; do
                [ "$(cat "$c" 2>/dev/null)" = "$1" ] && return 0
        done
        return 1
}

running virtlogd || virtlogd -d || die "virtlogd -d failed"
if ! running libvirtd; then
        # a stale pidfile from a killed daemon makes libvirtd refuse to start
        rm -f /var/run/libvirtd.pid
        libvirtd -d || die "libvirtd -d failed"
fi

i=0
while [ $i -lt $((WAIT * 4)) ]; do
        if virsh -q -c $URI version >/dev/null 2>&1; then
                exit 0
        fi
        sleep 0.25
        i=$((i + 1))
done
die "libvirtd did not answer 'virsh -c $URI version' within ${WAIT}s (see /var/log/libvirt/)"
