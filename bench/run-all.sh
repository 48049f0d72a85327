#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Run every benchmark (track-bench, plan-bench, hint-bench, and vmmpower-sim's speed on a
# 2-socket host) and print one summary table.  Benchmarks print numbers; nothing is asserted.
#
#   bash bench/run-all.sh [BUILD_DIR]        (default: build-sim; configured and built if needed)
#
# Full outputs are kept in BUILD_DIR/bench-results/*.txt.  track-bench runs with --no-libvirt
# (it never touches the system libvirtd); set LIBVIRT=1 to include the libvirt stats path.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-sim}
out=$build/bench-results
[ -d "$build" ] || meson setup "$build" "$src" >/dev/null
ninja -C "$build" bench/track-bench bench/plan-bench bench/hint-bench sim/vmmpower-sim >/dev/null || exit 1
mkdir -p "$out"

lv=--no-libvirt
[ "${LIBVIRT:-0}" = 1 ] && lv=
echo "bench: track-bench ..." >&2
"$build/bench/track-bench" $lv >"$out/track.txt" 2>&1
echo "bench: plan-bench ..." >&2
"$build/bench/plan-bench" 21 >"$out/plan.txt" 2>&1
echo "bench: hint-bench ..." >&2
"$build/bench/hint-bench" 2000 >"$out/hint.txt" 2>&1
trace=$src/../shared/traces/pl-20110322.csv
if [ -r "$trace" ]; then
        echo "bench: vmmpower-sim, 1,500 VMs for a day on synth:2x96 ..." >&2
        "$build/sim/vmmpower-sim" --no-progress --trace-format planetlab -t "$trace" -T synth:2x96 -m "$src/config/models/xeon-spr-2s.model" \
                --vms 1500 --period-ms 30000 --step-s 300 >"$out/sim.txt" 2>&1
fi

printf '\n%-14s %-44s %s\n' "benchmark" "case" "result"
printf '%-14s %-44s %s\n' "---------" "----" "------"
# track-bench: per-sample cost of each method at the largest thread count
awk '$1 ~ /^[0-9]+$/ && $3 ~ /^[0-9.]+$/ { last[$2] = $1; wall[$2] = $3; cpu[$2] = $4 }
     END { for (m in wall) printf "%-14s %-44s %s ns/sample wall, %s ns cpu\n", "track-bench", m " (" last[m] " threads)", wall[m], cpu[m] }' \
        "$out/track.txt" | sort
# plan-bench: steady-state plan time per size
awk '$1 ~ /^[0-9]+$/ && NF >= 9 { printf "%-14s %-44s %s us initial, %s us steady (min %s)\n", "plan-bench", $1 " pCPUs, " $2 " vCPUs", $3, $5, $6 }' \
        "$out/plan.txt"
# hint-bench: latency per phase
# (the phase name has spaces: the nine numbers are counted from the end of the row)
awk 'NF >= 10 && $(NF-8) ~ /^[0-9]+$/ && $(NF-1) ~ /%$/ {
        name = $1; for (i = 2; i <= NF - 9; i++) name = name " " $i
        printf "%-14s %-44s p50 %s us, p99 %s us, flood read %s lines/s, loop cpu %s\n", "hint-bench", name, $(NF-7), $(NF-5), $(NF-2), $(NF-1) }' \
        "$out/hint.txt"
if [ -s "$out/sim.txt" ]; then
        awk '/^simulated in/ { printf "%-14s %-44s %s s wall, %s s CPU\n", "vmmpower-sim", "1,500 VMs x 288 intervals, synth:2x96", $3, $6 }
             /^vmmpower:/ && /plans/ { match($0, /[0-9.]+ ms CPU per plan/); printf "%-14s %-44s %s plans, %s\n", "vmmpower-sim", "planner in the run", $2, substr($0, RSTART, RLENGTH) }' \
                "$out/sim.txt"
fi
echo
echo "full outputs: $out/" >&2
