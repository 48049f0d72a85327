#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# `make module` builds for the kernel given as KVER= (default: uname -r).  When the
# headers of that kernel are missing it must say so, name the version and the fix, and
# fail before calling the kernel's build system (not with make's "No such file or
# directory" from `make -C`).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
kver=0.0.0-vmmpower-no-such-kernel
out=$(make -s -C "$here" module KVER=$kver 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -ne 0 ] || fail "make module KVER=$kver succeeded"
printf '%s\n' "$out" | grep -q "no kernel headers for $kver at /lib/modules/$kver/build" ||
        fail "no message naming the kernel version and the headers path"
printf '%s\n' "$out" | grep -q "linux-headers-$kver" || fail "no hint which package to install"
printf '%s\n' "$out" | grep -q "KVER=" || fail "no hint about KVER="
# KDIR= still overrides the headers directory (the message names it)
out=$(make -s -C "$here" module KDIR=/nonexistent/kdir 2>&1) && fail "make module KDIR=/nonexistent/kdir succeeded"
printf '%s\n' "$out" | grep -q "at /nonexistent/kdir" || fail "KDIR not named: $out"
echo "OK: make module fails clearly without headers"
