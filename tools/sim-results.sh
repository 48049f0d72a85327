#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Regenerate docs/results.md: vmmpower-sim over the PlanetLab days x both shipped host models x
# 1:1, 2:1, 4:1 x three burst settings, plus a sensitivity table over the model's assumed parameters and
# a table of the planner's headrooms against wait, and a sweep of the packing headroom at 1:1.
#
#   bash tools/sim-results.sh [BUILD_DIR] [TRACE_DIR]      (defaults: build-sim, ../shared/traces)
#
# Environment: JOBS (parallel runs, default nproc), SEED (default 1), OUT (work dir, default BUILD_DIR/sim-results).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-sim}
traces=${2:-$src/../shared/traces}
jobs=${JOBS:-$(nproc)}
seed=${SEED:-1}
out=${OUT:-$build/sim-results}
sim=$build/sim/vmmpower-sim
# Planner every 1 s of simulated time (the daemon's ControlPeriod) and one burst window per 300 s trace
# interval: the 184 runs take about 32 minutes on 2 CPUs; vmmpower-sim(1) defaults to 60 s steps.
simopts=${SIMOPTS:---period-ms 1000 --step-s 300}

[ -d "$build" ] || meson setup "$build" "$src"
ninja -C "$build" sim/vmmpower-sim >/dev/null
[ -d "$traces" ] || { echo "sim-results: no trace directory $traces" >&2; exit 1; }
rm -rf "$out"; mkdir -p "$out/csv" "$out/svg" "$out/models"

days="pl-20110303 pl-20110306 pl-20110322"
hosts="xeon-spr-2s:xeon-spr-2s epyc-genoa-1s:epyc-genoa"
ratios="1 2 4"
bursts="2 10 50"

cmds=$out/commands
: >"$cmds"
for day in $days; do for hm in $hosts; do for ov in $ratios; do for b in $bursts; do
        topo=${hm%%:*}; model=${hm##*:}
        label="$day;$topo;$ov:1;${b}ms"
        echo "$sim --no-progress --trace-format planetlab -t $traces/$day.csv -T $src/tests/data/topology/$topo -m $src/config/models/$model.model -o $ov -b $b -s $seed $simopts --label '$label' --csv $out/csv/$day-$topo-$ov-$b.csv --svg $out/svg/$day-$topo-$ov-$b.svg > $out/csv/$day-$topo-$ov-$b.txt" >>"$cmds"
done; done; done; done

# Sensitivity: one setting, each assumed parameter of the SPR model moved in turn.
base=$src/config/models/xeon-spr-2s.model
sens() { # name sed-expression
        sed -e "$2" "$base" >"$out/models/$1.model"
        echo "$sim --no-progress --trace-format planetlab -t $traces/pl-20110303.csv -T $src/tests/data/topology/xeon-spr-2s -m $out/models/$1.model -o 2 -b 10 -s $seed $simopts --label '$1' --csv $out/csv/sens-$1.csv > $out/csv/sens-$1.txt" >>"$cmds"
}
sens base 's/^X//'
sens c6-power-x4 's/^PowerMW = 40$/PowerMW = 160/'
sens pkg-quiet-eq-awake 's/^QuietPowerMW = 40000$/QuietPowerMW = 70000/'
sens pkg-asleep-x2 's/^AsleepPowerMW = 20000$/AsleepPowerMW = 40000/'
sens pkg-awake-half 's/^AwakePowerMW = 70000$/AwakePowerMW = 45000/'
sens smt-gain-1.0 's/^SmtGain = 1.25$/SmtGain = 1.0/'
sens smt-gain-1.5 's/^SmtGain = 1.25$/SmtGain = 1.5/'
sens idle-interval-250us 's/^ActiveIdleIntervalUs = 1000$/ActiveIdleIntervalUs = 250/'
sens idle-interval-4ms 's/^ActiveIdleIntervalUs = 1000$/ActiveIdleIntervalUs = 4000/'
sens no-all-packages-rule 's/^PackageIdleAllPackages = yes$/PackageIdleAllPackages = no/'

# The planner's two headrooms against wait: B = 10 ms, every day, host, ratio.  hr100: HeadroomPercent = 100
# (packing); lh80: LevelHeadroomPercent = 80 (levels as schedutil sets them: the default before 95); lh95: the
# default before 97; lh100: LevelHeadroomPercent = 100 (a CPU short of capacity looks exactly full).
for knob in hr100:HeadroomPercent:100 lh80:LevelHeadroomPercent:80 lh95:LevelHeadroomPercent:95 lh100:LevelHeadroomPercent:100; do
        tag=${knob%%:*}; kv=${knob#*:}
        printf '[Planner]\n%s = %s\n' "${kv%%:*}" "${kv##*:}" >"$out/models/$tag.conf"
        for day in $days; do for hm in $hosts; do for ov in $ratios; do
                topo=${hm%%:*}; model=${hm##*:}
                echo "$sim --no-progress -c $out/models/$tag.conf --trace-format planetlab -t $traces/$day.csv -T $src/tests/data/topology/$topo -m $src/config/models/$model.model -o $ov -b 10 -s $seed $simopts --label '$tag;$day;$topo;$ov:1;10ms' --csv $out/csv/$tag-$day-$topo-$ov.csv > $out/csv/$tag-$day-$topo-$ov.txt" >>"$cmds"
        done; done; done
done

# 1:1, the gap target against the wait target: the packing headroom swept down to its floor (10), B = 2 and
# 10 ms, every day and host.  At 1:1 B1 gives every vCPU its own CPU; the sweep shows what each step towards
# that costs in energy and buys in wait.
for hr in 10 20 40 60; do
        printf '[Planner]\nHeadroomPercent = %s\n' "$hr" >"$out/models/one-hr$hr.conf"
        for day in $days; do for hm in $hosts; do for b in 2 10; do
                topo=${hm%%:*}; model=${hm##*:}
                echo "$sim --no-progress -c $out/models/one-hr$hr.conf --trace-format planetlab -t $traces/$day.csv -T $src/tests/data/topology/$topo -m $src/config/models/$model.model -o 1 -b $b -s $seed $simopts --label 'one-hr$hr;$day;$topo;1:1;${b}ms' --csv $out/csv/one-hr$hr-$day-$topo-$b.csv > $out/csv/one-hr$hr-$day-$topo-$b.txt" >>"$cmds"
        done; done; done
done

start=$(date +%s)
n=$(wc -l <"$cmds")
echo "sim-results: $n runs, $jobs in parallel, results in $out" >&2
xargs -P "$jobs" -I{} -d '\n' bash -c {} <"$cmds"
echo "sim-results: done in $(( $(date +%s) - start )) s" >&2
python3 "$src/tools/sim-results.py" "$out" "$src/docs/results.md" "$seed"
echo "sim-results: wrote $src/docs/results.md" >&2
