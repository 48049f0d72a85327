#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Regenerate docs/results.md and docs/results-frontier.svg: vmmpower-sim over the PlanetLab days x both
# shipped host models x 1:1, 2:1, 4:1 x three burst settings at the default queueing budget, the same
# matrix at the batch profile, a frontier of budget settings (energy against wait p99), a sensitivity
# table over the model's assumed parameters, and the planner's cost (plan-bench), each target of issue 14
# checked per run.
#
#   bash tools/sim-results.sh [BUILD_DIR] [TRACE_DIR]      (defaults: build-sim, ../shared/traces)
#
# Environment (a reduced run takes minutes, e.g.
#   DAYS=pl-20110303 RATIOS="1 2" BURSTS=10 SENS=0 DEST=/tmp/x bash tools/sim-results.sh build):
#   DAYS      trace days (default: pl-20110303 pl-20110306 pl-20110322)
#   HOSTS     fixture:model pairs (default: xeon-spr-2s:xeon-spr-2s epyc-genoa-1s:epyc-genoa)
#   RATIOS    vCPU:pCPU ratios (default: 1 2 4)
#   BURSTS    burst parameters B in ms (default: 2 10 50)
#   BUDGETS   the frontier's queueing budgets in percent besides the default 1 (default: 0.2 5 20 50); the
#             frontier runs the first of DAYS at B = 10 ms (or the first of BURSTS without 10)
#   BATCH_BUDGET  the default (latency) profile at this queueing budget in percent over the batch matrix's
#             1:1 and 2:1 runs, beside the batch profile (default 50; 0: none)
#   SENS      1 (default): the sensitivity runs; 0: none
#   DEST      directory results.md and results-frontier.svg are written to (default: docs/)
#   JOBS (parallel runs, default nproc), SEED (default 1), OUT (work dir, default BUILD_DIR/sim-results).
#   ONLY      an extended regex: re-run only the runs whose label it matches from its start (e.g. 'batch;')
#             and keep the others' outputs from a complete earlier run in OUT; for a change that cannot
#             alter the others (say why in the commit).  The runtime line of results.md names it; one
#             that matches no label is an error.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-sim}
traces=${2:-$src/../shared/traces}
jobs=${JOBS:-$(nproc)}
seed=${SEED:-1}
out=${OUT:-$build/sim-results}
dest=${DEST:-$src/docs}
days=${DAYS:-pl-20110303 pl-20110306 pl-20110322}
hosts=${HOSTS:-xeon-spr-2s:xeon-spr-2s epyc-genoa-1s:epyc-genoa}
ratios=${RATIOS:-1 2 4}
bursts=${BURSTS:-2 10 50}
budgets=${BUDGETS:-0.2 5 20 50}
batch_budget=${BATCH_BUDGET:-50}
# 0 (in any spelling) runs none; the label carries the value as given (BATCH_BUDGET=50 -> bq50;...)
bq_on=bad
[[ $batch_budget =~ ^[0-9]+(\.[0-9]+)?$ ]] &&
        bq_on=$(awk -v b="$batch_budget" 'BEGIN { b += 0; print (b == 0 ? 0 : (b >= 0.01 && b <= 100 ? 1 : "bad")) }')
[ "$bq_on" != bad ] || { echo "sim-results: BATCH_BUDGET=$batch_budget is not 0 or 0.01..100" >&2; exit 1; }
sens_on=${SENS:-1}
sim=$build/sim/vmmpower-sim
# Planner every 1 s of simulated time (the daemon's ControlPeriod) and one burst window per 300 s trace
# interval; vmmpower-sim(1) defaults to 60 s steps.
simopts=${SIMOPTS:---period-ms 1000 --step-s 300}

[ -d "$build" ] || meson setup "$build" "$src"
build=$(cd "$build" && pwd)
ninja -C "$build" sim/vmmpower-sim bench/plan-bench >/dev/null
[ -d "$traces" ] || { echo "sim-results: no trace directory $traces" >&2; exit 1; }
only=${ONLY:-}
if [ -z "$only" ]; then
        rm -rf "$out"
elif [ ! -s "$out/commands" ]; then
        echo "sim-results: ONLY needs a complete earlier run in $out" >&2; exit 1
fi
mkdir -p "$out/csv" "$out/svg" "$out/models" "$dest"

# The planner's wait-model options (issue 14): the batch profile and a queueing budget the planner
# itself keeps.  Until the planner has them, the batch matrix is the default one (today's planner packs
# by its utilisation headroom, the batch profile's rule) and the frontier has its default point only.
# (vmmpower-sim's --queue-budget-percent alone sets the latency-constrained bound's budget, so --profile
# is what tells that the planner takes the budget too.)
help=$("$sim" --help)
have_profile=0
grep -q -- '--profile' <<<"$help" && have_profile=1
# At 1:1 and 2:1 the per-LLC reference's own placements are also run through the burst simulation
# (whether the reference the share is measured against keeps the budget it was sized for).
check_ref=
grep -q -- '--check-reference' <<<"$help" && check_ref=--check-reference
# The batch runs also run the bin-packing reference's own placements (the batch target's reference)
# through the burst simulation, charged as a policy.
check_bp=
grep -q -- '--check-binpack' <<<"$help" && check_bp=' --check-binpack'
fb=10; grep -qw 10 <<<"$bursts" || fb=${bursts%% *}
fday=${days%% *}

cmds=$out/commands
: >"$cmds"
run() { # label file extra-options day topo model ratio burst
        echo "$sim --no-progress --trace-format planetlab -t $traces/$4.csv -T $src/tests/data/topology/$5 -m $src/config/models/$6.model -o $7 -b $8 -s $seed $simopts $3 --label '$1' --csv $out/csv/$2.csv --svg $out/svg/$2.svg > $out/csv/$2.txt" >>"$cmds"
}
for day in $days; do for hm in $hosts; do for ov in $ratios; do for b in $bursts; do
        topo=${hm%%:*}; model=${hm##*:}
        ref=; case $ov in 1|2) ref=$check_ref ;; esac
        run "$day;$topo;$ov:1;${b}ms" "$day-$topo-$ov-$b" "$ref" "$day" "$topo" "$model" "$ov" "$b"
        [ $have_profile -eq 0 ] ||
                run "batch;$day;$topo;$ov:1;${b}ms" "batch-$day-$topo-$ov-$b" "--profile batch$check_bp" "$day" "$topo" "$model" "$ov" "$b"
        # a batch host's other documented way to pack deep: the wait model's sets at a loose budget (not at
        # 4:1, where the latency profile runs saturated at the top level: the frontier's 4:1 point shows it)
        case $ov in 1|2) [ $have_profile -eq 0 ] || [ "$bq_on" = 0 ] ||
                run "bq$batch_budget;$day;$topo;$ov:1;${b}ms" "bq$batch_budget-$day-$topo-$ov-$b" \
                        "--profile latency --queue-budget-percent $batch_budget" "$day" "$topo" "$model" "$ov" "$b" ;; esac
done; done; done; done
if [ $have_profile -eq 1 ]; then
        for q in $budgets; do for hm in $hosts; do for ov in $ratios; do
                topo=${hm%%:*}; model=${hm##*:}
                run "qb$q;$fday;$topo;$ov:1;${fb}ms" "qb$q-$fday-$topo-$ov" "--queue-budget-percent $q" "$fday" "$topo" "$model" "$ov" "$fb"
        done; done; done
fi

# Sensitivity: one setting, each assumed parameter of the SPR model moved in turn.
base=$src/config/models/xeon-spr-2s.model
sens() { # name sed-expression
        sed -e "$2" "$base" >"$out/models/$1.model"
        echo "$sim --no-progress --trace-format planetlab -t $traces/pl-20110303.csv -T $src/tests/data/topology/xeon-spr-2s -m $out/models/$1.model -o 2 -b 10 -s $seed $simopts --label '$1' --csv $out/csv/sens-$1.csv > $out/csv/sens-$1.txt" >>"$cmds"
}
if [ "$sens_on" = 1 ]; then
# (the package-domain variants set values around the calibrated model's 56.3 / 55.4 / 54.5 W awake /
# quiet / asleep; sed patterns match any value, so a refit does not turn them into silent no-ops)
sens base 's/^X//'
sens c6-power-x4 's/^PowerMW = 40$/PowerMW = 160/'
sens pkg-quiet-eq-awake '/^Scope = package$/,/^$/s/^QuietPowerMW = .*/QuietPowerMW = 56282/'
sens pkg-sleep-saves-50w '/^Scope = package$/,/^$/{s/^QuietPowerMW = .*/QuietPowerMW = 31282/;s/^AsleepPowerMW = .*/AsleepPowerMW = 6282/}'
sens no-turbo-table '/^MaxActiveCores = /d'
sens no-power-limit '/^PackagePowerLimitMW = /d'
sens no-wake-energy '/^WakeEnergyUJ = /d'
sens no-platform '/^Platform.*PowerMW = /d;/^PsuEfficiency = /d'
sens smt-gain-1.0 's/^SmtGain = 1.25$/SmtGain = 1.0/'
sens smt-gain-1.5 's/^SmtGain = 1.25$/SmtGain = 1.5/'
sens idle-interval-250us 's/^ActiveIdleIntervalUs = 1000$/ActiveIdleIntervalUs = 250/'
sens idle-interval-4ms 's/^ActiveIdleIntervalUs = 1000$/ActiveIdleIntervalUs = 4000/'
sens no-all-packages-rule 's/^PackageIdleAllPackages = yes$/PackageIdleAllPackages = no/'
fi

start=$(date +%s)
n=$(wc -l <"$cmds")
what="$n runs"
if [ -n "$only" ]; then
        # the regex is matched from the start of each run's label ('batch;' and '^batch;' alike)
        re="^($only)"
        while IFS= read -r line; do
                label=$(sed -n "s/.*--label '\([^']*\)'.*/\1/p" <<<"$line")
                if [[ $label =~ $re ]]; then printf '%s\n' "$line"; fi
        done <"$cmds" >"$cmds.only"
        [ -s "$cmds.only" ] || { echo "sim-results: ONLY='$only' matches no run's label" >&2; exit 1; }
        what="$(wc -l <"$cmds.only") of $n runs (ONLY='$only'; the rest kept from an earlier run)"
        mv "$cmds.only" "$cmds.run"
        # --csv appends: the re-run runs' rows go first
        grep -oE -- "--csv [^ ]+" "$cmds.run" | cut -d' ' -f2 | xargs -r rm -f
else
        cp "$cmds" "$cmds.run"
fi
echo "sim-results: $what, $jobs in parallel, results in $out" >&2
xargs -P "$jobs" -I{} -d '\n' bash -c {} <"$cmds.run"
secs=$(( $(date +%s) - start ))
echo "sim-results: done in $secs s" >&2
# The planner's cost: 1,000 vCPUs on 256 pCPUs (2 packages, SMT), median of 21 plans.
"$build/bench/plan-bench" 21 256 1000 >"$out/plan-bench.txt"
buildtype=$(meson introspect --buildoptions "$build" 2>/dev/null |
        python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"))' ||
        echo unknown)
python3 "$src/tools/sim-results.py" "$out" "$dest/results.md" "$seed" \
        --runtime "$what in $secs s, $jobs in parallel on $(nproc) CPUs" --profile "$have_profile" \
        --plan-bench "$out/plan-bench.txt" --buildtype "$buildtype" --svg "$dest/results-frontier.svg" \
        --batch-budget "$([ "$bq_on" = 1 ] && echo "$batch_budget" || echo 0)"
if command -v rsvg-convert >/dev/null; then # the frontier must render (librsvg2-bin, tools/setup-host.sh)
        rsvg-convert "$dest/results-frontier.svg" -o "$out/results-frontier.png"
fi
echo "sim-results: wrote $dest/results.md and $dest/results-frontier.svg" >&2
