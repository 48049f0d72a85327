#!/bin/sh
# Prepare a Debian 12 host to build and test vmmpower, then start libvirtd (no systemd
# needed). Run as root. Non-interactive, idempotent, quiet unless something fails;
# apt is skipped entirely when every package is already installed.
# Usage: tools/setup-host.sh [--no-libvirtd] [--deb]
#   --deb   also the Debian packaging tools that tools/test-deb.sh needs (not needed by
#           tools/run-tests.sh, so not installed by default)
set -eu

# Everything the project needs to build and test, in one place.
PACKAGES="
build-essential meson ninja-build pkg-config clang python3
libvirt-dev liburing-dev libcmocka-dev libjson-c-dev libxml2-dev libbpf-dev bpftool
libvirt-clients libvirt-daemon libvirt-daemon-driver-qemu libvirt-daemon-system
qemu-system-x86 busybox-static linux-image-amd64 linux-headers-amd64 cpio gzip
libclang-rt-14-dev llvm
prometheus prometheus-node-exporter
librsvg2-bin
"
# tools/test-deb.sh (--deb): dpkg-buildpackage with dh and dh_dkms, lintian, mandoc -Tlint.
DEB_PACKAGES="debhelper dh-dkms lintian mandoc"

die() { echo "setup-host: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root"
HERE=$(cd "$(dirname "$0")" && pwd)
START=1
for a in "$@"; do
        case $a in
        --no-libvirtd) START=0 ;;
        --deb) PACKAGES="$PACKAGES $DEB_PACKAGES" ;;
        *) die "usage: setup-host.sh [--no-libvirtd] [--deb]" ;;
        esac
done

missing=""
for p in $PACKAGES; do
        s=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
        case $s in ii*) ;; *) missing="$missing $p" ;; esac
done

if [ -n "$missing" ]; then
        export DEBIAN_FRONTEND=noninteractive
        LOG=$(mktemp /tmp/setup-host.XXXXXX)
        # policy-rc.d: do not let package scripts try to start services (there may be no
        # systemd); libvirtd is started below.
        PRC=/usr/sbin/policy-rc.d
        made_prc=0
        if [ ! -e $PRC ]; then
                # removed however this script ends: left behind, it would refuse every service
                # start and stop of every later package operation on this host
                trap 'rm -f "$PRC"' EXIT
                trap 'rm -f "$PRC"; exit 130' INT TERM HUP
                printf '#!/bin/sh\nexit 101\n' > $PRC && chmod 755 $PRC && made_prc=1
        fi
        ok=1
        apt-get update -q > "$LOG" 2>&1 || ok=0
        # shellcheck disable=SC2086
        [ $ok -eq 0 ] || apt-get install -y -q --no-install-recommends $missing >> "$LOG" 2>&1 || ok=0
        if [ $made_prc -eq 1 ]; then
                rm -f $PRC
                trap - EXIT INT TERM HUP
        fi
        if [ $ok -eq 0 ]; then
                cat "$LOG" >&2
                rm -f "$LOG"
                die "installing$missing failed"
        fi
        rm -f "$LOG"
fi

if [ $START -eq 1 ]; then
        "$HERE/../tests/vm/start-libvirtd.sh"
fi
