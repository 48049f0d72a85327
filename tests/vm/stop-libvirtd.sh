#!/bin/sh
# Stop libvirtd (and virtlogd with --all) started by start-libvirtd.sh: SIGTERM, wait up to
# 10 s, then SIGKILL. Running guests are not touched (QEMU processes outlive libvirtd and
# libvirtd reconnects to them when it starts again).
# Usage: stop-libvirtd.sh [--all] [--kill]   (--kill: SIGKILL right away, like a crash)
set -eu
[ "$(id -u)" -eq 0 ] || { echo "stop-libvirtd: must run as root" >&2; exit 1; }
ALL=0; SIG=TERM
for a in "$@"; do
        case $a in
        --all) ALL=1 ;;
        --kill) SIG=KILL ;;
        *) echo "usage: stop-libvirtd.sh [--all] [--kill]" >&2; exit 2 ;;
        esac
done
pids_of() { # exact comm match
        for c in /proc/[0-9]*/comm; do
                if [ "$(cat "$c" 2>/dev/null)" = "$1" ]; then
                        p=${c#/proc/}; echo "${p%/comm}"
                fi
        done
}
stop() {
        pids=$(pids_of "$1")
        [ -n "$pids" ] || return 0
        kill -s $SIG $pids 2>/dev/null || true
        i=0
        while [ $i -lt 40 ]; do
                pids=$(pids_of "$1")
                [ -n "$pids" ] || return 0
                sleep 0.25
                i=$((i + 1))
        done
        kill -s KILL $pids 2>/dev/null || true
        sleep 0.2
}
stop libvirtd
rm -f /var/run/libvirtd.pid
if [ $ALL -eq 1 ]; then
        stop virtlogd
        rm -f /var/run/virtlogd.pid
fi
