#!/bin/bash
# Run every libFuzzer target (or the ones named) for N executions (default 10 million) from
# its seeds and print one line per target: executions, seconds, executions per second, result.
# FUZZ_MAX_SECONDS caps each target's time (libFuzzer -max_total_time; default: no cap).
# FUZZ_WORKERS=W splits the runs over W processes (seeds 1..W) that share one corpus
# directory (libFuzzer re-reads it, so each sees what the others found); the line adds
# their executions up and is OK only if every worker ends clean.
# Builds build-fuzz (or $FUZZ_BUILD_DIR) if needed.  Run it nice'd: it keeps one CPU busy.
# Usage: bash tools/fuzz-10m.sh [RUNS [TARGET...]]     e.g. tools/fuzz-10m.sh 10000000 control trace
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10000000}
shift || true
dir=${FUZZ_BUILD_DIR:-build-fuzz}
if [ ! -d "$dir" ]; then
        CC=clang meson setup "$dir" -Dfuzz=true >/dev/null
fi
ninja -C "$dir" >/dev/null
rc=0
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
        for exe in "$dir"/fuzz/fuzz-*; do
                [ -f "$exe" ] && [ -x "$exe" ] && targets+=("${exe##*/fuzz-}")
        done
fi
for name in "${targets[@]}"; do
        exe=$dir/fuzz/fuzz-$name
        corpus=$dir/corpus10m-$name
        mkdir -p "$corpus"
        seeds=
        # fuzz/corpus/NAME, and the fixture files of config and qmp (other tests/data
        # directories hold trees, whose seeds are in fuzz/corpus/NAME: fuzz/fuzz-tree.h)
        for d in fuzz/corpus/$name; do
                [ -d "$d" ] && seeds="$seeds $d"
        done
        case $name in config | qmp) seeds="$seeds tests/data/$name" ;; esac
        t0=$(date +%s)
        workers=${FUZZ_WORKERS:-1}
        pids=()
        for w in $(seq 1 "$workers"); do
                log=$dir/fuzz10m-$name.log
                [ "$workers" -gt 1 ] && log=$dir/fuzz10m-$name.$w.log
                # shellcheck disable=SC2086
                "$exe" -runs=$(( runs / workers )) -max_total_time="${FUZZ_MAX_SECONDS:-0}" -seed="$w" \
                       -print_final_stats=1 -artifact_prefix="$dir/crash-$name-" "$corpus" $seeds \
                       >"$log" 2>&1 &
                pids+=($!)
        done
        res=OK
        for pid in "${pids[@]}"; do
                if ! wait "$pid"; then
                        res="FAIL (logs: $dir/fuzz10m-$name*.log)"
                        rc=1
                fi
        done
        if [ "$workers" -gt 1 ]; then
                logs=$(seq -f "$dir/fuzz10m-$name.%g.log" 1 "$workers")
        else
                logs=$dir/fuzz10m-$name.log
        fi
        # shellcheck disable=SC2086
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' $logs | awk '{s += $1} END {print s + 0}')
        secs=$(( $(date +%s) - t0 ))
        echo "fuzz-$name: $execs executions in $secs s ($(( execs / (secs > 0 ? secs : 1) )) exec/s, $workers worker(s)): $res"
done
exit $rc
