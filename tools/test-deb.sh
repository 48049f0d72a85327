#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Build the Debian packages, check them with lintian, install vmmpowerd and vmmpower-tools
# on this machine, run the installed daemon and `vmmpowerctl status` against it, then purge
# the packages again.  Root, Debian 12; installs what it needs first (tools/setup-host.sh
# --no-libvirtd --deb: the project's packages and debhelper, dh-dkms, lintian, mandoc).
# Not part of tools/run-tests.sh (it builds the whole tree once more and installs packages system-wide;
# about 4 minutes on 2 shared CPUs): run it as its own command.
#
#   bash tools/test-deb.sh [OUTDIR]     (default: a temporary directory, removed at the end)
#
# The source is copied (tracked and untracked files, not ignored ones) to OUTDIR/src and built
# there, so the .debs never land next to the checkout.  The installed daemon runs with
# --dry-run and a conf.d drop-in written here (Apply = no, libvirt, /proc scan and hints off,
# state and socket in OUTDIR): it touches no host knob and connects to no one else's VM.
# The machine is left as it was: the test refuses to start if a vmmpower package is already
# installed, and purges what it installed (also packages apt pulled in) on every exit path.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "test-deb: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root"

keep=0
if [ $# -ge 1 ]; then
        out=$1
        keep=1
        mkdir -p "$out"
else
        out=$(mktemp -d /tmp/vmmpower-test-deb.XXXXXX)
fi
out=$(cd "$out" && pwd)
t0=$(date +%s)
sh "$src/tools/setup-host.sh" --no-libvirtd --deb
daemon_pid=
installed=
dropin=/etc/vmmpower/conf.d/zz-test-deb-$$.conf

for p in vmmpowerd vmmpower-tools vmmpower-guest; do
        s=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
        case $s in
        ""|un*|pn*) ;;
        *) die "$p is already installed ($s): not touching an existing installation" ;;
        esac
done

predirs=
restore_dirs() {
        local mode user group d
        while read -r mode user group d; do
                [ -z "$d" ] || [ -d "$d" ] || install -d -m "$mode" -o "$user" -g "$group" "$d"
        done <<<"$predirs"
}

cleanup() {
        local rc=$?
        set +e
        if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
                kill -TERM "$daemon_pid"
                wait "$daemon_pid" 2>/dev/null
        fi
        rm -f "$dropin"
        if [ -n "$installed" ]; then
                # shellcheck disable=SC2086
                DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $installed >"$out/purge.log" 2>&1 ||
                        { cat "$out/purge.log" >&2; echo "test-deb: FAIL: purge of$installed failed" >&2; rc=1; }
        fi
        restore_dirs
        [ $keep -eq 1 ] || rm -rf "$out"
        exit $rc
}
trap cleanup EXIT

# ---- build -----------------------------------------------------------------------------
echo "test-deb: copying the source to $out/src" >&2
rm -rf "$out/src"
mkdir -p "$out/src"
(cd "$src" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 -r stat --printf '%n\0' 2>/dev/null | tar --null -T - -cf -) | tar -C "$out/src" -xf -
(cd "$out/src" && dpkg-checkbuilddeps) || die "build dependencies missing (bash tools/setup-host.sh)"
echo "test-deb: dpkg-buildpackage -us -uc -b (log: $out/build.log)" >&2
b0=$(date +%s)
(cd "$out/src" && nice dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1 ||
        { tail -n 40 "$out/build.log" >&2; die "dpkg-buildpackage failed"; }
b1=$(date +%s)
ver=$(cd "$out/src" && dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
for p in vmmpowerd vmmpower-tools vmmpower-guest; do
        [ -f "$out/${p}_${ver}_${arch}.deb" ] || die "no $out/${p}_${ver}_${arch}.deb"
done
echo "test-deb: built in $((b1 - b0)) s:" $(cd "$out" && ls ./*.deb) >&2

# ---- package contents ------------------------------------------------------------------
unitdir=$(pkg-config --variable=systemdsystemunitdir systemd)
contents() { dpkg-deb -c "$out/${1}_${ver}_${arch}.deb" | awk '{print $6}' | sed 's|^\.||'; }
need() {
        local pkg=$1 f
        shift
        for f in "$@"; do
                contents "$pkg" | grep -qx -- "$f" || die "$pkg does not contain $f"
        done
}
need vmmpowerd /usr/sbin/vmmpowerd /usr/sbin/vmmpower-calibrate \
        /usr/share/man/man8/vmmpower-calibrate.8.gz /etc/vmmpower/vmmpower.conf /etc/vmmpower/conf.d/ \
        "$unitdir/vmmpowerd.service" /etc/libvirt/hooks/qemu.d/vmmpower \
        /usr/share/vmmpower/models/xeon-spr-2s.model /usr/share/vmmpower/models/epyc-genoa.model \
        /usr/share/vmmpower/prometheus/vmmpower.rules.yml \
        /usr/share/man/man8/vmmpowerd.8.gz /usr/share/man/man5/vmmpower.conf.5.gz
need vmmpower-tools /usr/bin/vmmpowerctl /usr/bin/vmmpower-sim \
        /usr/share/bash-completion/completions/vmmpowerctl \
        /usr/share/man/man8/vmmpowerctl.8.gz /usr/share/man/man1/vmmpower-sim.1.gz
need vmmpower-guest /usr/sbin/powerhintd /usr/bin/powerhint "$unitdir/powerhintd.service" \
        /usr/lib/modules-load.d/virtio-powerhint.conf \
        /usr/src/virtio-powerhint-0.1/dkms.conf /usr/src/virtio-powerhint-0.1/virtio_powerhint.c \
        /usr/src/virtio-powerhint-0.1/Kbuild \
        /usr/share/man/man8/powerhintd.8.gz /usr/share/man/man1/powerhint.1.gz
dpkg-deb -I "$out/vmmpowerd_${ver}_${arch}.deb" conffiles | grep -qx /etc/vmmpower/vmmpower.conf ||
        die "/etc/vmmpower/vmmpower.conf is not a conffile"
dpkg-deb -I "$out/vmmpower-guest_${ver}_${arch}.deb" postinst | grep -q dkms ||
        die "vmmpower-guest's postinst does not register the module with dkms"
# Not started by the install, but restarted by an upgrade if it runs, and stopped (which restores
# the host) by a removal.
dpkg-deb -I "$out/vmmpowerd_${ver}_${arch}.deb" postinst | grep -q "deb-systemd-invoke try-restart 'vmmpowerd.service'" ||
        die "vmmpowerd's postinst does not try-restart it on upgrade"
dpkg-deb -I "$out/vmmpowerd_${ver}_${arch}.deb" postinst | grep -q "deb-systemd-invoke start" &&
        die "vmmpowerd's postinst starts it"
dpkg-deb -I "$out/vmmpowerd_${ver}_${arch}.deb" prerm | grep -q "deb-systemd-invoke stop 'vmmpowerd.service'" ||
        die "vmmpowerd's prerm does not stop it on removal"
mkdir -p "$out/x"
dpkg-deb -x "$out/vmmpower-guest_${ver}_${arch}.deb" "$out/x"
grep -q '^BUILD_EXCLUSIVE_ARCH=' "$out/x/usr/src/virtio-powerhint-0.1/dkms.conf" ||
        die "dkms.conf has no BUILD_EXCLUSIVE_ARCH"

# ---- man pages: every page the packages ship, as shipped --------------------------------
for p in vmmpowerd vmmpower-tools; do dpkg-deb -x "$out/${p}_${ver}_${arch}.deb" "$out/x"; done
pages=$(find "$out/x/usr/share/man" -name '*.gz' | sort)
[ -n "$pages" ] || die "no man pages in the packages"
for m in $pages; do
        zcat "$m" | mandoc -Tlint -Wwarning >"$out/mandoc.log" 2>&1 ||
                { cat "$out/mandoc.log" >&2; die "mandoc -Tlint: $m"; }
done

# ---- lintian ---------------------------------------------------------------------------
echo "test-deb: lintian" >&2
lintian --fail-on error --display-info "$out/vmmpower_${ver}_${arch}.changes" >"$out/lintian.log" 2>&1 ||
        { cat "$out/lintian.log" >&2; die "lintian reports errors"; }
sed 's/^/test-deb: lintian: /' "$out/lintian.log" >&2

# ---- install ---------------------------------------------------------------------------
# A file the packages ship that exists already (a `meson install` to /usr, say) would be
# overwritten and then purged: refuse.
for p in vmmpowerd vmmpower-tools; do
        dpkg-deb -c "$out/${p}_${ver}_${arch}.deb" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\.||' |
                while read -r f; do
                        [ ! -e "$f" ] || { echo "$f"; break; }
                done
done >"$out/existing.txt"
[ ! -s "$out/existing.txt" ] || die "$(head -n 1 "$out/existing.txt") exists already (not from a package?): not overwriting it"
before=$(dpkg-query -W -f='${Package}\n' | sort)
# Directories of the packages that exist now (e.g. /etc/libvirt/hooks/qemu.d): purge removes
# the empty ones that no other package ships, so they are put back after it.
predirs=$(for p in vmmpowerd vmmpower-tools; do
        dpkg-deb -c "$out/${p}_${ver}_${arch}.deb" | awk '$1 ~ /^d/ {print $6}' | sed 's|^\.||; s|/$||'
done | sort -u | while read -r d; do [ -n "$d" ] && [ -d "$d" ] && stat -c '%a %U %G %n' "$d"; done || true)
installed="vmmpowerd vmmpower-tools"
echo "test-deb: apt-get install ./vmmpowerd_*.deb ./vmmpower-tools_*.deb" >&2
(cd "$out" && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "./vmmpowerd_${ver}_${arch}.deb" "./vmmpower-tools_${ver}_${arch}.deb") >"$out/install.log" 2>&1 ||
        { cat "$out/install.log" >&2; die "apt-get install failed"; }
after=$(dpkg-query -W -f='${Package}\n' | sort)
pulled=$(comm -13 <(echo "$before") <(echo "$after") | grep -vx -e vmmpowerd -e vmmpower-tools || true)
installed="vmmpowerd vmmpower-tools $(echo $pulled)"
[ -z "$pulled" ] || echo "test-deb: apt also installed (purged at the end):" $pulled >&2

# Linked only with what they use, as installed.
"$src/tools/check-link-deps.sh" /usr/bin/vmmpowerctl libm.so.6 libc.so.6 >&2
"$src/tools/check-link-deps.sh" /usr/bin/vmmpower-sim libm.so.6 libc.so.6 >&2
[ -f "$unitdir/vmmpowerd.service" ] || die "no $unitdir/vmmpowerd.service after install"
# Installed disabled and not started (debian/rules: installing must not take over the host's
# knobs or stop its tuner); the operator enables it.
[ ! -e /etc/systemd/system/multi-user.target.wants/vmmpowerd.service ] ||
        die "vmmpowerd.service enabled by the package (it must be left to the operator)"
if [ -d /run/systemd/system ] && systemctl is-active --quiet vmmpowerd.service; then
        die "vmmpowerd.service started by the package"
fi

# ---- run the installed daemon ----------------------------------------------------------
sock=$out/control.sock
mkdir -p "$out/state"
cat >"$dropin" <<EOT
# Written by tools/test-deb.sh; removed at its end.
[Daemon]
StateDirectory = $out/state
ControlSocket = $sock
[Libvirt]
Enabled = no
[QEMU]
ProcScan = no
[Planner]
Apply = no
[Hints]
Enabled = no
EOT
/usr/sbin/vmmpowerd --check-config >"$out/check-config.log" 2>&1 ||
        { cat "$out/check-config.log" >&2; die "installed vmmpowerd --check-config failed"; }
/usr/sbin/vmmpowerd --foreground --dry-run >"$out/daemon.log" 2>&1 &
daemon_pid=$!
deadline=$(($(date +%s) + 60))
until /usr/bin/vmmpowerctl --socket "$sock" status >"$out/status.txt" 2>"$out/status.err"; do
        kill -0 "$daemon_pid" 2>/dev/null || { cat "$out/daemon.log" >&2; die "vmmpowerd exited"; }
        [ "$(date +%s)" -lt $deadline ] ||
                { cat "$out/status.err" "$out/daemon.log" >&2; die "no status within 60 s"; }
        sleep 0.2
done
echo "test-deb: installed vmmpowerctl status:" >&2
sed 's/^/    /' "$out/status.txt" >&2
grep -q . "$out/status.txt" || die "empty status"
/usr/bin/vmmpowerctl --socket "$sock" --json status | python3 -c 'import json, sys; json.load(sys.stdin)' ||
        die "vmmpowerctl --json status is not JSON"
kill -TERM "$daemon_pid"
deadline=$(($(date +%s) + 30))
while kill -0 "$daemon_pid" 2>/dev/null; do
        [ "$(date +%s)" -lt $deadline ] || die "vmmpowerd did not stop within 30 s of SIGTERM"
        sleep 0.1
done
wait "$daemon_pid" && rc=0 || rc=$?
daemon_pid=
[ $rc -eq 0 ] || { cat "$out/daemon.log" >&2; die "vmmpowerd exited with status $rc after SIGTERM"; }

# ---- purge -----------------------------------------------------------------------------
rm -f "$dropin"
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $installed >"$out/purge.log" 2>&1 ||
        { cat "$out/purge.log" >&2; die "apt-get purge failed"; }
installed=
restore_dirs
for p in vmmpowerd vmmpower-tools; do
        s=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
        case $s in ""|un*|pn*) ;; *) die "$p still known to dpkg after purge ($s)" ;; esac
done
for f in /usr/sbin/vmmpowerd /usr/bin/vmmpowerctl /etc/vmmpower "$unitdir/vmmpowerd.service" \
        /etc/libvirt/hooks/qemu.d/vmmpower /etc/systemd/system/multi-user.target.wants/vmmpowerd.service; do
        [ ! -e "$f" ] && [ ! -L "$f" ] || die "$f left after purge"
done
echo "test-deb: PASS in $(($(date +%s) - t0)) s (package build $((b1 - b0)) s)" >&2
