#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build virtio_powerhint.ko out of tree against the installed headers of the
# test guest's kernel (default: the newest /boot/vmlinuz-*-amd64; KVER=... to change) in a
# scratch copy, so the source tree stays clean.  Fails on any compiler warning.
# Fails when the headers are not installed (apt-get install linux-headers-amd64).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
kver=${KVER:-$(ls -1 /boot/vmlinuz-*-amd64 2>/dev/null | grep -v -e '-cloud-amd64$' -e '-rt-amd64$' | sort -V | tail -n 1 | sed 's|.*/vmlinuz-||')}
if [ -z "$kver" ]; then
        echo "no guest kernel /boot/vmlinuz-*-amd64 (apt-get install linux-image-amd64)" >&2
        exit 1
fi
kdir=/lib/modules/$kver/build

if [ ! -e "$kdir/Makefile" ]; then
        echo "no kernel headers at $kdir (apt-get install linux-headers-$kver)" >&2
        exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/virtio_powerhint.c" "$here/Kbuild" "$work/"

log="$work/build.log"
if ! make -C "$kdir" M="$work" modules >"$log" 2>&1; then
        cat "$log" >&2
        echo "FAIL: module build failed" >&2
        exit 1
fi
if grep -E 'warning:|error:' "$log" >&2; then
        echo "FAIL: compiler warnings" >&2
        exit 1
fi
ko="$work/virtio_powerhint.ko"
[ -f "$ko" ] || { echo "FAIL: no $ko" >&2; exit 1; }
vermagic=$(modinfo -F vermagic "$ko")
case "$vermagic" in
"$kver "*) ;;
*) echo "FAIL: vermagic '$vermagic' does not match $kver" >&2; exit 1 ;;
esac
for p in max_khz force transition_delay_us; do
        modinfo -F parm "$ko" | grep -q "^$p:" || { echo "FAIL: parameter $p missing" >&2; exit 1; }
done
if [ -n "${OUT_KO:-}" ]; then
        cp "$ko" "$OUT_KO"
fi
echo "OK: $(basename "$ko") for $vermagic ($(stat -c %s "$ko") bytes)"
