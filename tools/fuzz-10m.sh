#!/bin/bash
# Run every libFuzzer target for N executions (default 10 million) from its seeds and
# print one line per target: executions, seconds, result. Builds build-fuzz if needed.
# Usage: bash tools/fuzz-10m.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10000000}
dir=build-fuzz
if [ ! -d "$dir" ]; then
        CC=clang meson setup "$dir" -Dfuzz=true >/dev/null
fi
ninja -C "$dir" >/dev/null
rc=0
for exe in "$dir"/fuzz/fuzz-*; do
        [ -f "$exe" ] && [ -x "$exe" ] || continue
        name=${exe##*/fuzz-}
        corpus=$dir/corpus10m-$name
        mkdir -p "$corpus"
        seeds=
        for d in fuzz/corpus/$name tests/data/$name; do
                [ -d "$d" ] && seeds="$seeds $d"
        done
        t0=$(date +%s)
        # shellcheck disable=SC2086
        if "$exe" -runs="$runs" -seed=1 -print_final_stats=1 -artifact_prefix="$dir/crash-$name-" \
                  "$corpus" $seeds >"$dir/fuzz10m-$name.log" 2>&1; then
                res=OK
        else
                res="FAIL (log: $dir/fuzz10m-$name.log)"
                rc=1
        fi
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/fuzz10m-$name.log")
        echo "fuzz-$name: ${execs:-?} executions in $(( $(date +%s) - t0 )) s: $res"
done
exit $rc
