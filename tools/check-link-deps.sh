#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Fail if BINARY needs a shared library (DT_NEEDED) not in the ALLOWED list.
#   tools/check-link-deps.sh BINARY ALLOWED...     e.g. build/vmmpowerctl libc.so.6
# Used by the link-deps meson tests (vmmpowerctl and vmmpower-sim must not link libvirt,
# libxml2, json-c or libbpf) and by tools/test-deb.sh on the installed binaries.
set -eu
[ $# -ge 1 ] || { echo "usage: check-link-deps.sh BINARY ALLOWED..." >&2; exit 2; }
bin=$1
shift
needed=$(LC_ALL=C readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
[ -n "$needed" ] || { echo "check-link-deps: $bin: no DT_NEEDED (not a dynamic binary?)" >&2; exit 1; }
bad=
for lib in $needed; do
        ok=0
        for a in "$@"; do [ "$lib" = "$a" ] && ok=1; done
        [ $ok -eq 1 ] || bad="$bad $lib"
done
if [ -n "$bad" ]; then
        echo "check-link-deps: $bin links$bad (allowed: $*)" >&2
        exit 1
fi
echo "check-link-deps: $bin:" $needed
