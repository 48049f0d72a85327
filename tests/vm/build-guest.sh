#!/bin/sh
# Build the tiny test guest used by the integration tests: the host's Debian kernel plus a
# busybox-static initramfs whose /init runs a line-command agent on the serial console
# (see tests/vm/guest-init.sh for the protocol).
#
# Usage: build-guest.sh OUTDIR
#   OUTDIR/vmlinuz            copy of the newest /boot/vmlinuz-*-amd64, cloud and rt flavours
#                             left out (or $VMMPOWER_GUEST_KERNEL)
#   OUTDIR/initramfs.cpio.gz  busybox + /init + virtio console modules (uncompressed .ko)
#   OUTDIR/cmdline            the default kernel command line
#
# Pure: uses only installed packages (busybox-static, linux-image-amd64, cpio, gzip).
# Idempotent: rebuilds only when an input changed (signature in OUTDIR/.stamp).
# Optional environment:
#   VMMPOWER_GUEST_KERNEL   path of the vmlinuz to use (modules from /lib/modules/<ver>)
#   VMMPOWER_GUEST_EXTRA_KO space-separated extra .ko files, insmod'ed after the virtio ones
#   VMMPOWER_GUEST_EXTRA_DIR directory copied over the initramfs root (e.g. guest agents)
set -eu

die() { echo "build-guest: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: build-guest.sh OUTDIR"
OUT=$1
HERE=$(cd "$(dirname "$0")" && pwd)
INIT_SRC=$HERE/guest-init.sh
BUSYLOOP_SRC=$HERE/guest-busyloop.sh
[ -r "$INIT_SRC" ] && [ -r "$BUSYLOOP_SRC" ] || die "missing $INIT_SRC or $BUSYLOOP_SRC"

BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || BUSYBOX=/usr/bin/busybox
[ -x "$BUSYBOX" ] || die "busybox not found (apt-get install busybox-static)"
# busybox-static is a static binary; the dynamic 'busybox' package would need libc too.
if command -v file >/dev/null 2>&1; then
        file -L "$BUSYBOX" | grep -q 'statically linked' || die "$BUSYBOX is not static (apt-get install busybox-static)"
elif ldd "$BUSYBOX" >/dev/null 2>&1; then
        die "$BUSYBOX is dynamically linked (apt-get install busybox-static)"
fi
command -v cpio >/dev/null 2>&1 || die "cpio not found (apt-get install cpio)"

if [ -n "${VMMPOWER_GUEST_KERNEL:-}" ]; then
        KERNEL=$VMMPOWER_GUEST_KERNEL
else
        # the generic flavour: Debian's cloud and rt kernels (also *-amd64) have no headers
        # from linux-headers-amd64, which tools/setup-host.sh installs
        KERNEL=$(ls -1 /boot/vmlinuz-*-amd64 2>/dev/null | grep -v -e '-cloud-amd64$' -e '-rt-amd64$' | sort -V | tail -n 1)
fi
[ -n "$KERNEL" ] && [ -r "$KERNEL" ] || die "no kernel /boot/vmlinuz-*-amd64 (apt-get install linux-image-amd64)"
KVER=${KERNEL##*/vmlinuz-}
MODDIR=/lib/modules/$KVER
[ -r "$MODDIR/modules.dep" ] || die "no $MODDIR/modules.dep for kernel $KERNEL"

# Modules wanted; their dependencies are resolved from modules.dep.
WANT="virtio_pci virtio_console"

sig() {
        for f in "$KERNEL" "$MODDIR/modules.dep" "$BUSYBOX" "$INIT_SRC" "$BUSYLOOP_SRC" "$0" \
                 ${VMMPOWER_GUEST_EXTRA_KO:-}; do
                stat -L -c '%n %s %Y' "$f"
        done
        if [ -n "${VMMPOWER_GUEST_EXTRA_DIR:-}" ]; then
                find "$VMMPOWER_GUEST_EXTRA_DIR" -printf '%P %s %T@\n' | sort
        fi
        echo "want=$WANT"
}

mkdir -p "$OUT"
NEWSIG=$(sig)
if [ -r "$OUT/.stamp" ] && [ -r "$OUT/vmlinuz" ] && [ -r "$OUT/initramfs.cpio.gz" ] &&
   [ "$(cat "$OUT/.stamp")" = "$NEWSIG" ]; then
        exit 0
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vmmpt-guest.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
ROOT=$WORK/root
mkdir -p "$ROOT/bin" "$ROOT/sbin" "$ROOT/dev" "$ROOT/proc" "$ROOT/sys" "$ROOT/tmp" \
         "$ROOT/run" "$ROOT/lib/modules"
cp "$BUSYBOX" "$ROOT/bin/busybox"
ln -s busybox "$ROOT/bin/sh"
cp "$INIT_SRC" "$ROOT/init"
cp "$BUSYLOOP_SRC" "$ROOT/bin/busyloop"
chmod 755 "$ROOT/init" "$ROOT/bin/busyloop"

# Resolve load order: a module's dependencies (modules.dep lists them so that the last one
# must be loaded first) before the module itself, each module once.
ORDER=$WORK/order
: > "$ORDER"
modpath() {
        # print the modules.dep path of module $1 ('-' and '_' are equivalent)
        n=$(echo "$1" | tr '-' '_')
        awk -F: -v n="$n" '{ p=$1; b=p; sub(/.*\//, "", b); sub(/\.ko(\.xz|\.zst|\.gz)?$/, "", b);
                             gsub(/-/, "_", b); if (b == n) { print p; exit } }' "$MODDIR/modules.dep"
}
add_mod() { # $1 = modules.dep path
        grep -qx "$1" "$ORDER" && return 0
        deps=$(awk -F: -v p="$1" '$1 == p { print $2; exit }' "$MODDIR/modules.dep")
        rev=""
        for d in $deps; do rev="$d $rev"; done
        for d in $rev; do add_mod "$d"; done
        echo "$1" >> "$ORDER"
}
for m in $WANT; do
        p=$(modpath "$m")
        if [ -z "$p" ]; then
                # built into this kernel: nothing to load
                grep -q "/$m.ko" "$MODDIR/modules.builtin" 2>/dev/null ||
                        die "module $m neither in modules.dep nor modules.builtin of $KVER"
                continue
        fi
        add_mod "$p"
done

LOAD=$ROOT/lib/modules/load-order
: > "$LOAD"
while read -r p; do
        src=$MODDIR/$p
        base=${p##*/}
        case $base in
        *.ko.xz)  name=${base%.xz};  xz -dc "$src" > "$ROOT/lib/modules/$name" ;;
        *.ko.zst) name=${base%.zst}; zstd -qdc "$src" > "$ROOT/lib/modules/$name" ;;
        *.ko.gz)  name=${base%.gz};  gzip -dc "$src" > "$ROOT/lib/modules/$name" ;;
        *)        name=$base;        cp "$src" "$ROOT/lib/modules/$name" ;;
        esac
        echo "$name" >> "$LOAD"
done < "$ORDER"
for ko in ${VMMPOWER_GUEST_EXTRA_KO:-}; do
        [ -r "$ko" ] || die "extra module $ko not readable"
        cp "$ko" "$ROOT/lib/modules/"
        echo "${ko##*/}" >> "$LOAD"
done
if [ -n "${VMMPOWER_GUEST_EXTRA_DIR:-}" ]; then
        cp -a "$VMMPOWER_GUEST_EXTRA_DIR"/. "$ROOT"/
fi

# The kernel's built-in initramfs already has /dev/console; add it anyway when we can.
mknod -m 600 "$ROOT/dev/console" c 5 1 2>/dev/null || true
(cd "$ROOT" && { find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet; }) > "$WORK/initramfs.cpio"
gzip -1 -n -c "$WORK/initramfs.cpio" > "$WORK/initramfs.cpio.gz"
cp "$KERNEL" "$WORK/vmlinuz"
echo "console=ttyS0 quiet loglevel=1 panic=-1 rdinit=/init" > "$WORK/cmdline"
for f in vmlinuz initramfs.cpio.gz cmdline; do
        mv -f "$WORK/$f" "$OUT/$f"
done
chmod 644 "$OUT/vmlinuz" "$OUT/initramfs.cpio.gz" "$OUT/cmdline"
printf '%s\n' "$NEWSIG" > "$OUT/.stamp"
