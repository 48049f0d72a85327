#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Record the subset of sysfs that vmmpower's topology reader uses
# (vmmpower/topology.c, docs/topology.md) into OUTDIR/sys/..., so that a host
# layout can be sent to the project and replayed as a test fixture:
#
#   tools/record-sysfs-topology.sh /tmp/myhost            # reads the real /sys
#   tools/record-sysfs-topology.sh /tmp/myhost /some/sys  # re-record a tree
#   tar czf myhost.tar.gz -C /tmp myhost
#
# Only small text attributes are copied (no binary files, no symlinks, nothing
# identifying beyond the CPU layout).  The cpuidle usage/time counters are
# copied too (pcpu_stat tests use them); they are a snapshot at record time.
# Unreadable files are skipped with a warning.  Needs only POSIX sh + coreutils.
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
        echo "usage: $0 OUTDIR [SYSFS_ROOT]" >&2
        exit 2
fi
out=$1/sys
src=${2:-/sys}
cpu=devices/system/cpu

if [ ! -d "$src/$cpu" ]; then
        echo "$0: $src/$cpu: not a directory" >&2
        exit 1
fi

copy() { # copy REL if it is a regular readable file
        [ -f "$src/$1" ] || return 0
        mkdir -p "$out/$(dirname "$1")"
        if ! cat "$src/$1" > "$out/$1" 2>/dev/null; then
                echo "$0: warning: cannot read $src/$1, skipped" >&2
                rm -f "$out/$1"
        fi
}

for f in possible present online smt/active cpuidle/current_driver cpuidle/current_governor \
         cpuidle/current_governor_ro; do
        copy "$cpu/$f"
done

for d in "$src/$cpu"/cpu[0-9]*; do
        [ -d "$d" ] || continue
        c=$cpu/$(basename "$d")
        mkdir -p "$out/$c"
        copy "$c/online"
        for f in physical_package_id die_id cluster_id core_id thread_siblings_list core_cpus_list \
                 core_siblings_list package_cpus_list die_cpus_list; do
                copy "$c/topology/$f"
        done
        for i in "$d"/cache/index[0-9]*; do
                [ -d "$i" ] || continue
                for f in level type shared_cpu_list; do
                        copy "$c/cache/$(basename "$i")/$f"
                done
        done
        for s in "$d"/cpuidle/state[0-9]*; do
                [ -d "$s" ] || continue
                for f in name desc latency residency disable power time usage; do
                        copy "$c/cpuidle/$(basename "$s")/$f"
                done
        done
done

for p in "$src/$cpu"/cpufreq/policy[0-9]*; do
        [ -d "$p" ] || continue
        for f in related_cpus affected_cpus scaling_driver scaling_governor cpuinfo_min_freq \
                 cpuinfo_max_freq scaling_min_freq scaling_max_freq base_frequency \
                 scaling_available_frequencies scaling_available_governors \
                 energy_performance_preference energy_performance_available_preferences; do
                copy "$cpu/cpufreq/$(basename "$p")/$f"
        done
done

for n in "$src"/devices/system/node/node[0-9]*; do
        [ -d "$n" ] || continue
        copy "devices/system/node/$(basename "$n")/cpulist"
done

echo "recorded $(find "$out" -type f | wc -l) files from $src into $out"
