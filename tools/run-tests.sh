#!/bin/bash
# Set up this host (packages, libvirtd), build, and run every test:
# unit tests, the Prometheus rules' unit tests (promtool, suite prometheus), integration
# tests with a real libvirtd and real TCG guests (test_fleet also runs a real Prometheus
# and node-exporter on loopback ports), the unit
# tests again under AddressSanitizer + UBSan ($BUILD_DIR-asan), the fuzz targets' seeds
# and a short run of each fuzz target ($BUILD_DIR-fuzz).
# Usage (as root on Debian 12): bash tools/run-tests.sh [BUILD_DIR]
# Prints a closing line "tests: N passed, N failed", after a "skipped case in"
# line for each unittest case that a passing test skipped (a host without /dev/kvm).
set -euo pipefail
cd "$(dirname "$0")/.."
builddir=${1:-build}

if [ "$(id -u)" != 0 ]; then
        echo "run-tests.sh: must run as root (integration tests start libvirtd and guests)" >&2
        exit 1
fi

bash tools/setup-host.sh

if [ -d "$builddir" ]; then
        meson setup --reconfigure "$builddir" >/dev/null
else
        meson setup "$builddir" >/dev/null
fi
ninja -C "$builddir"

rc=0
meson test -C "$builddir" --print-errorlogs --num-processes 2 || rc=$?

# The unit suite again, built with AddressSanitizer and UndefinedBehaviorSanitizer: an
# overflow, use-after-free, leak or undefined behaviour in any unit test fails the run
# (UBSan stops at its first report).  Prints the seconds it took (build + tests).
asandir=$builddir-asan
t_asan=$(date +%s)
if [ -d "$asandir" ]; then
        meson setup --reconfigure "$asandir" -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
else
        meson setup "$asandir" -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C "$asandir"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        meson test -C "$asandir" --suite unit --print-errorlogs --num-processes 2 || rc=$?
echo "sanitizer build of the unit suite: $(( $(date +%s) - t_asan )) s"

# Fuzzing: libFuzzer targets (clang, ASan + UBSan) for every parser that sees guest or
# user bytes. Their seed corpora replay as tests, then each target mutates for a short
# while (VMMPOWER_FUZZ_SECONDS, default 15); a crash, leak or UB report fails the run.
fuzzdir=$builddir-fuzz
if [ -d "$fuzzdir" ]; then
        CC=clang meson setup --reconfigure "$fuzzdir" -Dfuzz=true >/dev/null
else
        CC=clang meson setup "$fuzzdir" -Dfuzz=true >/dev/null
fi
ninja -C "$fuzzdir"
meson test -C "$fuzzdir" --suite fuzz --print-errorlogs || rc=$?
fuzzlog=$fuzzdir/fuzz-runs.txt
: > "$fuzzlog"
# One target: mutate for VMMPOWER_FUZZ_SECONDS, write "fuzz-NAME OK|FAIL" to its .res file.
fuzz_one() {
        local exe=$1 name=${1##*/fuzz-} corpus seeds= d execs
        corpus=$fuzzdir/corpus-$name
        mkdir -p "$corpus"
        # fuzz/corpus/NAME, and the fixture files of config and qmp (other tests/data
        # directories hold trees, whose seeds are in fuzz/corpus/NAME: fuzz/fuzz-tree.h)
        for d in fuzz/corpus/$name; do
                [ -d "$d" ] && seeds="$seeds $d"
        done
        case $name in config | qmp) seeds="$seeds tests/data/$name" ;; esac
        # shellcheck disable=SC2086
        if "$exe" -max_total_time="${VMMPOWER_FUZZ_SECONDS:-15}" -seed=1 -print_final_stats=1 \
                  -artifact_prefix="$fuzzdir/crash-$name-" "$corpus" $seeds >"$fuzzdir/fuzz-$name.log" 2>&1; then
                execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$fuzzdir/fuzz-$name.log")
                echo "fuzz-$name OK ${execs:-?} executions" >"$fuzzdir/fuzz-$name.res"
        else
                echo "fuzz-$name FAIL (log: $fuzzdir/fuzz-$name.log)" >"$fuzzdir/fuzz-$name.res"
        fi
}
# Two targets at a time (this host has 2 CPUs; each target is single-threaded), each for
# its full VMMPOWER_FUZZ_SECONDS; the results are printed in name order.
t_fuzz=$(date +%s)
running=0
for exe in "$fuzzdir"/fuzz/fuzz-*; do
        [ -f "$exe" ] && [ -x "$exe" ] || continue
        rm -f "$fuzzdir/fuzz-${exe##*/fuzz-}.res"
        fuzz_one "$exe" &
        running=$((running + 1))
        if [ "$running" -ge 2 ]; then
                wait -n || true
                running=$((running - 1))
        fi
done
wait
for exe in "$fuzzdir"/fuzz/fuzz-*; do
        [ -f "$exe" ] && [ -x "$exe" ] || continue
        name=${exe##*/fuzz-}
        res=$fuzzdir/fuzz-$name.res
        [ -s "$res" ] || echo "fuzz-$name FAIL (no result; log: $fuzzdir/fuzz-$name.log)" >"$res"
        if grep -q " FAIL " "$res"; then
                tail -n 40 "$fuzzdir/fuzz-$name.log"
                rc=1
        fi
        tee -a "$fuzzlog" <"$res"
done
echo "fuzz runs: $(( $(date +%s) - t_fuzz )) s"

python3 - "$builddir/meson-logs/testlog.json" "$asandir/meson-logs/testlog.json" "$fuzzdir/meson-logs/testlog.json" \
        "$fuzzlog" <<'PY'
import json, re, sys
passed = failed = skipped = 0
cases = []
for path in sys.argv[1:4]:
    with open(path) as f:
        for line in f:
            t = json.loads(line)
            r = t["result"]
            # a unittest case skipped inside a test that passed (the host lacks what it needs)
            out = (t.get("stdout") or "") + (t.get("stderr") or "")
            for m in re.finditer(r"^(test_\w+) \(.*?\.\.\. skipped '(.*)'$", out, re.M):
                cases.append(f"{t['name']}: {m.group(1)} ({m.group(2)})")
            if r in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif r == "SKIP":
                skipped += 1
            else:
                failed += 1
with open(sys.argv[4]) as f:
    for line in f:
        if " OK " in line:
            passed += 1
        elif " FAIL " in line:
            failed += 1
for c in cases:
    print(f"skipped case in {c}")
print(f"tests: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
PY
exit $rc
