#!/bin/bash
# Run every libFuzzer target (or the ones named) for N executions (default 10 million) from
# its seeds and print one line per target: executions, seconds, executions per second, result.
# FUZZ_MAX_SECONDS caps each target's time (libFuzzer -max_total_time; default: no cap).
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
        # shellcheck disable=SC2086
        if "$exe" -runs="$runs" -max_total_time="${FUZZ_MAX_SECONDS:-0}" -seed=1 -print_final_stats=1 \
                  -artifact_prefix="$dir/crash-$name-" "$corpus" $seeds >"$dir/fuzz10m-$name.log" 2>&1; then
                res=OK
        else
                res="FAIL (log: $dir/fuzz10m-$name.log)"
                rc=1
        fi
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/fuzz10m-$name.log")
        secs=$(( $(date +%s) - t0 ))
        echo "fuzz-$name: ${execs:-?} executions in $secs s ($(( ${execs:-0} / (secs > 0 ? secs : 1) )) exec/s): $res"
done
exit $rc
