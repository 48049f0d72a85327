#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Aggregate vmmpower-sim CSVs (tools/sim-results.sh) into docs/results.md and the frontier SVG,
checking issue 14's targets run by run.

    sim-results.py OUT_DIR RESULTS_MD SEED [--runtime TEXT] [--profile 0|1] [--plan-bench FILE]
                   [--buildtype T] [--svg FILE]
"""
import argparse, csv, glob, math, os, statistics

ap = argparse.ArgumentParser()
ap.add_argument('out')
ap.add_argument('dest')
ap.add_argument('seed')
ap.add_argument('--runtime', default='')
ap.add_argument('--profile', default='1', help='1: the batch runs are their own (--profile batch)')
ap.add_argument('--plan-bench', default='')
ap.add_argument('--buildtype', default='unknown')
ap.add_argument('--svg', default='')
ap.add_argument('--batch-budget', default=None,
                help='the budget of the bq runs to read (tools/sim-results.sh BATCH_BUDGET; 0: none; '
                     'default: the one budget the bq runs have)')
args = ap.parse_args()

BUDGET = 1.0        # the default queueing budget (percent): the planner's and the lat-bound's
POLS = ['vmmpower', 'B0', 'B1', 'B2', 'B3']
BOUNDS = ['binpack-ref', 'fluid', 'lat-bound']


def fnum(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return float('nan')


def no_placement(row):
    """A reference row's intervals without a placement (the fluid bound counted in its energy there): the
    column no_placement (vmmpower-sim since stop 35), 0 in older CSVs."""
    return int(row['no_placement']) if row.get('no_placement') else 0


rows = []
for f in sorted(glob.glob(os.path.join(args.out, 'csv', '*.csv'))):
    with open(f) as fh:
        rows += list(csv.DictReader(fh))
runs = {}
for r in rows:
    # 'binpack' is the bin-packing reference's name in CSVs written before issue 18
    runs.setdefault(r['run'], {})['binpack-ref' if r['policy'] == 'binpack' else r['policy']] = r
for v in runs.values():
    # the per-LLC reference: a row of its own (vmmpower-sim since stop 26), its energy relative to B0
    if 'lat-bound-llc' in v:
        llc = v.pop('lat-bound-llc')
        v['_llc_ref'] = fnum(llc['rel_b0'])
        v['_llc_ref_np'] = no_placement(llc)
        # --check-reference: its placements in the burst simulation (queued share, wait p99), and
        # the same reference at smaller budgets (rows lat-bound-llc@BUDGET%)
        if llc.get('queued_share'):
            v['_llc_ref_placed'] = (100 * fnum(llc['queued_share']), fnum(llc['wait_p99_us']) / 1000)
            v['_llc_refs'] = [(None, fnum(llc['rel_b0']), v['_llc_ref_placed'][1], v['_llc_ref_placed'][0],
                               no_placement(llc))]
    for name in [p for p in v if p.startswith('lat-bound-llc@')]:
        x = v.pop(name)
        if '_llc_refs' in v and x.get('wait_p99_us'):
            v['_llc_refs'].append((name.split('@')[1], fnum(x['rel_b0']), fnum(x['wait_p99_us']) / 1000,
                                   100 * fnum(x.get('queued_share')), no_placement(x)))
    # --check-reference since stop 35: the lat-bound's own one set placed the same way (row lat-bound-set,
    # its energy the placement's charge, not the bound's), and at the smaller budgets (rows
    # lat-bound-set@BUDGET%); in the kept references beside the per-LLC ones, named 'set' and its budget
    if 'lat-bound-set' in v:
        x = v.pop('lat-bound-set')
        if x.get('queued_share'):
            v['_set_placed'] = (100 * fnum(x['queued_share']), fnum(x['wait_p99_us']) / 1000, fnum(x['rel_b0']),
                                no_placement(x))
            v.setdefault('_llc_refs', []).append(('set %g%%' % BUDGET, fnum(x['rel_b0']), v['_set_placed'][1],
                                                  v['_set_placed'][0], no_placement(x)))
    for name in [p for p in v if p.startswith('lat-bound-set@')]:
        x = v.pop(name)
        if x.get('wait_p99_us'):
            v.setdefault('_llc_refs', []).append(('set ' + name.split('@')[1], fnum(x['rel_b0']),
                                                  fnum(x['wait_p99_us']) / 1000, 100 * fnum(x.get('queued_share')),
                                                  no_placement(x)))
    # --check-binpack since stop 36 (the batch runs): the bin-packing reference's own placements in the burst
    # simulation, charged as a policy is (row binpack-placed): energy (share of B0), queued %, wait p99 ms
    # (the row stays too: the frontier plots it as a point)
    if 'binpack-placed' in v:
        x = v['binpack-placed']
        v['_bp_placed'] = (fnum(x['rel_b0']), 100 * fnum(x['queued_share']), fnum(x['wait_p99_us']) / 1000)
    # and the same packing one interval late (row binpack-lagged): energy (share of B0), undelivered %, wait p99 ms
    if 'binpack-lagged' in v:
        x = v.pop('binpack-lagged')
        v['_bp_lag'] = (fnum(x['rel_b0']), 100 * fnum(x['undelivered_share']), fnum(x['wait_p99_us']) / 1000)
    # since stop 38: the reference packed within the level headroom (row binpack-ref@FILL%: its energy) and its
    # placements charged (row binpack-placed@FILL%): fill %, energy (share of B0), placed: queued %, wait p99 ms
    fill_rows = [p for p in v if p.startswith('binpack-ref@')]
    if len(fill_rows) > 1:
        raise SystemExit('sim-results.py: run %s has more than one binpack-ref@ row (%s)' % (
            next(iter(v.values()))['run'], ', '.join(fill_rows)))
    for name in fill_rows:
        x = v.pop(name)
        fill = name.split('@')[1]
        y = v.pop('binpack-placed@' + fill, None)
        v['_bp_fill'] = (float(fill.rstrip('%')), fnum(x['rel_b0']),
                         100 * fnum(y['queued_share']) if y else None, fnum(y['wait_p99_us']) / 1000 if y else None)


def key_of(label):
    """(day, host, ratio, burst) of a matrix-like label 'PREFIX;day;host;R:1;Bms' or 'day;host;R:1;Bms'."""
    f = label.split(';')
    return tuple(f[-4:])


matrix = {key_of(k): v for k, v in runs.items() if k.startswith('pl-')}
own_batch = args.profile == '1'
batch = {key_of(k): v for k, v in runs.items() if k.startswith('batch;')} if own_batch else dict(matrix)
# the default (latency) profile at a loose queueing budget over the batch matrix's 1:1 and 2:1 runs
# (tools/sim-results.sh BATCH_BUDGET, since stop 37; labels 'bq<budget>;day;host;R:1;Bms'): a batch host's
# other documented way to pack deep, beside the batch profile
# (an OUT directory can hold runs of an earlier BATCH_BUDGET: only the given one is read)
def label_budget(label):
    """The budget in a 'qb<budget>;...' or 'bq<budget>;...' label."""
    return float(label.split(';')[0][2:])


bq_budgets = sorted({label_budget(k) for k in runs if k.startswith('bq')})
if args.batch_budget is not None:
    BQ = float(args.batch_budget) or None
elif len(bq_budgets) > 1:
    raise SystemExit('sim-results.py: runs at more than one BATCH_BUDGET (%s) in %s: say which (--batch-budget)' % (
        bq_budgets, args.out))
else:
    BQ = bq_budgets[0] if bq_budgets else None
bq = {key_of(k): v for k, v in runs.items() if own_batch and k.startswith('bq') and label_budget(k) == BQ}
frontier = {}  # budget percent -> {key: run}
for k, v in runs.items():
    if k.startswith('qb'):
        frontier.setdefault(label_budget(k), {})[key_of(k)] = v
sens = {k: v for k, v in runs.items() if not k.startswith(('pl-', 'batch;', 'qb', 'bq'))}


def ratio(key):
    return float(key[2][:-2])


def sort_key(key):
    return (key[1], ratio(key), float(key[3][:-2]), key[0])


def e(v, p):
    return fnum(v[p]['energy_kwh'])


def w99(v, p):
    return fnum(v[p]['wait_p99_us']) / 1e3


def queued(v, p):
    return 100 * fnum(v[p].get('queued_share'))


def pct_b0(v, p):
    return 100 * e(v, p) / e(v, 'B0')


def fmt(x, f='%.1f'):
    return f % x if x == x else '-'


# ---- the targets, run by run ------------------------------------------------------------------
def wait_limit_b3(v):
    b3 = w99(v, 'B3')
    return max(1.5 * b3, b3 + 0.5)


def kept_ref(v, budget=True):
    """The least energy (share of B0's) of the references (the per-LLC sets and, in runs since stop 35, the
    lat-bound's one set), at the budget and the smaller ones, whose own placements keep the run's wait limit in
    the burst simulation and (budget) queue at most the budget's share of their wake-ups there, the promise
    vmmpower is held to, and that has a placement in every interval (where it has none its energy counts the
    fluid bound); None when none does or none was run."""
    ok = [r for r in v.get('_llc_refs', [])
          if r[2] <= wait_limit_b3(v) and (not budget or r[3] <= BUDGET) and r[4] == 0]
    return min(ok, key=lambda r: r[1]) if ok else None


def kept_mean(ks, budget=True):
    """(mean, n) of kept_share over the runs ks that have a kept reference; (nan, 0) when none has."""
    xs = [x for x in (kept_share(matrix[k], budget) for k in ks) if x == x]
    return (statistics.mean(xs), len(xs)) if xs else (float('nan'), 0)


def kept_share(v, budget=True):
    """(B3 - vmmpower) / (B3 - kept_ref): the share against a reference that keeps the promise."""
    r = kept_ref(v, budget)
    b3 = e(v, 'B3') / e(v, 'B0')
    if r is None or not b3 > r[1]:
        return float('nan')
    return (b3 - e(v, 'vmmpower') / e(v, 'B0')) / (b3 - r[1])


def latency_share(v):
    """(B3 - vmmpower) / (B3 - lat-bound): the share of what the latency-constrained bound saves against
    B3 that vmmpower saves."""
    b3, vm, lb = e(v, 'B3'), e(v, 'vmmpower'), e(v, 'lat-bound') if 'lat-bound' in v else float('nan')
    return (b3 - vm) / (b3 - lb) if b3 > lb else float('nan')


def llc_share(v):
    """(B3 - vmmpower) / (B3 - per-LLC reference): the same share against the least energy of sets kept
    within an LLC, as the planner keeps them (a reference, not a bound; docs/simulator.md §5)."""
    if '_llc_ref' not in v:
        return float('nan')
    b3, vm, ref = e(v, 'B3'), e(v, 'vmmpower'), v['_llc_ref'] * e(v, 'B0')
    return (b3 - vm) / (b3 - ref) if b3 > ref else float('nan')


def undelivered(v, p):
    return 100 * fnum(v[p].get('undelivered_share'))


def charge_b0(v, p):
    """The energy charged for p's undelivered work, % of B0's energy (NaN in CSVs without the column)."""
    return 100 * fnum(v[p].get('undelivered_kwh')) / e(v, 'B0')


def gap_binpack(v):
    """Share of the B0 -> bin-packing-reference gap closed by vmmpower (the batch target)."""
    b0, bp = e(v, 'B0'), e(v, 'binpack-ref')
    return (b0 - e(v, 'vmmpower')) / (b0 - bp) if b0 > bp else float('nan')


def gap_fill(v):
    """Share of the B0 -> gap to the bin-packing reference within the level headroom closed by vmmpower."""
    f = v['_bp_fill'][1]
    return (1 - e(v, 'vmmpower') / e(v, 'B0')) / (1 - f) if f < 1 else float('nan')


def moves(v):
    return fnum(v['vmmpower']['moves_per_vcpu_hour'])


def ok(b):
    return 'pass' if b else '**FAIL**'


def queue_note(v):
    return 'queued %.2f%% of wake-ups against the %g%% budget' % (queued(v, 'vmmpower'), BUDGET)


L = []
L.append('# vmmpower-sim results\n')
L.append('Generated by `bash tools/sim-results.sh` (seed %s%s) from the PlanetLab traces in `../shared/traces/`; '
         'every number is modelled (docs/simulator.md), not measured on hardware. Hosts: the `xeon-spr-2s` fixture '
         '(2 x 8 cores x 2 threads) with `config/models/xeon-spr-2s.model` and the `epyc-genoa-1s` fixture (32 cores x 2, '
         '4 CCX) with `config/models/epyc-genoa.model`; VMs drawn from the day at each vCPU:pCPU ratio; bursts '
         'exponential with mean parameter B; planner every 1 s of simulated time (`--period-ms 1000`, the daemon\'s '
         'ControlPeriod), one burst window per 300 s trace interval (`--step-s 300`; window max(1 s, 50 x B)).\n'
         % (args.seed, '; ' + args.runtime if args.runtime else ''))
L.append('Columns: energy relative to B0; **queued** = share of the wake-ups that found no idle CPU they may run on '
         '(the event the queueing budget, default %g%%, bounds); wait = vCPU run-queue wait per wake-up episode (ms); '
         '**lat-bound** = the latency-constrained bound: per trace interval the least modelled energy of a pack set '
         'whose Erlang C queueing probability with the interval\'s demand is within the budget, two busy threads of a '
         'core worth SmtGain of one (docs/simulator.md '
         '§5); **per-LLC ref** = the same search with every set inside one LLC, as the planner keeps its sets (a '
         'reference, not a bound: the pooling of sets across LLCs is what separates it from the lat-bound; and it is '
         'charged for its vCPUs\' idle gaps and wake-ups as the policies are, each CPU counting its share of them, '
         'where the bound counts none); '
         '**per-LLC ref placed** = the per-LLC reference\'s placements themselves run through the burst simulation '
         '(`vmmpower-sim --check-reference`, 1:1 and 2:1): the share of their wake-ups that queued and their wait '
         'p99, **bold** over the run\'s wait limit; **lat-bound placed** = the same for the lat-bound\'s own set, and '
         'its energy charged as a placement of the run\'s vCPUs (each CPU its share of them in the idle gaps and '
         'wake-ups, as the policies are; the bound counts none); '
         '**kept ref** = the least energy of the references (per-LLC sets, and the lat-bound\'s one set: "set") at '
         'the budget and at 1/2, 1/5 and 1/10 of it whose own placements keep the run\'s wait limit there and queue at '
         'most the budget\'s share of their wake-ups, as vmmpower must (the budget it was sized for in brackets); '
         '**binpack-ref placed** (batch runs) = the bin-packing reference\'s own placements (first fit decreasing '
         'at its level, on each interval\'s demand) run through the burst simulation and charged as a policy is '
         '(`vmmpower-sim --check-binpack`): its energy with its vCPUs\' idle gaps and wake-ups and its work over '
         'capacity, which the reference counts none of, the share of its wake-ups that queued and its wait p99; '
         '**one interval late** = the same packing made on each interval\'s demand but run in the next interval '
         '(what a packer that knew the last interval\'s demand exactly and re-packed every interval would do): its '
         'energy so charged, the share of the demand it left undelivered (charged in the energy) and its wait p99; '
         '**latency profile at QueueBudgetPercent Q** (batch runs at 1:1 and 2:1) = the default profile, its pack sets '
         'sized by the wait model at a budget of Q%% of the wake-ups instead of the 1%% default (a batch host\'s other '
         'documented way to pack deep): its energy, its share of the B0 -> bin-packing gap, its wait p99 and queued '
         'share; '
         '**moves** = placement changes (planner or balancer) per vCPU-hour; **undelivered** = demand the '
         'placement could not run; every policy\'s energy includes it, charged as that many CPU-seconds on a busy '
         'CPU at the top level (vmmpower-sim\'s default; docs/simulator.md §5), so leaving work undone saves '
         'nothing.\n' % BUDGET)
if not own_batch:
    L.append('**This build\'s planner has no batch profile (`vmmpower-sim --help` lists no `--profile`)**: its default '
             'packs by the utilisation headroom, the batch profile\'s rule, so the batch target is read on the default '
             'runs, the default-budget targets are read against a planner that keeps no budget, and the frontier has '
             'no budget settings.\n')

# targets summary
d12 = sorted((k for k in matrix if ratio(k) in (1, 2)), key=sort_key)
d4 = sorted((k for k in matrix if ratio(k) == 4), key=sort_key)
bk = sorted(batch, key=sort_key)
allk = [(matrix, k) for k in sorted(matrix, key=sort_key)] + ([(batch, k) for k in bk] if own_batch else [])
shares = [latency_share(matrix[k]) for k in d12]
shares = [x for x in shares if x == x]
mean_share = statistics.mean(shares) if shares else float('nan')
L.append('## Targets (issue 14)\n')
L.append('| target | runs | met |')
L.append('|---|---|---|')
L.append('| default budget, 1:1 and 2:1: wait p99 <= max(1.5 x B3\'s, B3\'s + 0.5 ms) | %d | %d |' % (
    len(d12), sum(w99(matrix[k], 'vmmpower') <= wait_limit_b3(matrix[k]) for k in d12)))
L.append('| default budget, 1:1 and 2:1: energy below B3\'s | %d | %d |' % (
    len(d12), sum(e(matrix[k], 'vmmpower') < e(matrix[k], 'B3') for k in d12)))
L.append('| default budget, 1:1 and 2:1: mean (B3 - vmmpower) / (B3 - lat-bound) >= 0.9 | mean of %d | %s (%s) |' % (
    len(shares), fmt(mean_share, '%.2f'), 'pass' if mean_share >= 0.9 else '**FAIL**'))
llc_below = [k for k in d12 if '_llc_ref' in matrix[k] and not matrix[k].get('_llc_ref_np')]
if llc_below:
    L.append('| (not a target) runs where the per-LLC reference (Erlang C sets inside the LLCs) uses less energy '
             'than vmmpower (runs where it has a placement in every interval) | %d | %d |' % (
                 len(llc_below), sum(matrix[k]['_llc_ref'] < pct_b0(matrix[k], 'vmmpower') / 100 for k in llc_below)))
placed = [k for k in d12 if '_llc_ref_placed' in matrix[k]]
if placed:
    L.append('| (not a target) the per-LLC reference\'s own placements, run in the burst simulation: wait p99 within '
             'the same limit (queued share, mean) | %d | %d (%.2f%%) |' % (
                 len(placed), sum(matrix[k]['_llc_ref_placed'][1] <= wait_limit_b3(matrix[k]) for k in placed),
                 statistics.mean(matrix[k]['_llc_ref_placed'][0] for k in placed)))
    wmean, wn = kept_mean(placed, False)
    L.append('| (not a target; the proposal of stops 30-31) the same against the per-LLC references whose own '
             'placements keep the wait limit alone, whatever share of their wake-ups queued | mean of %d (runs with '
             'one) | %s |' % (wn, fmt(wmean, '%.2f')))
    kmean, kn = kept_mean(placed)
    L.append('| (proposed in place of the share above) mean (B3 - vmmpower) / (B3 - kept ref), kept ref = the least '
             'energy of the references (the lat-bound\'s one set and the per-LLC sets) at the budget, 1/2, 1/5 and '
             '1/10 of it whose own placements keep the wait limit and queue at most the budget (%g%%) of their '
             'wake-ups in the burst simulation, the promise vmmpower is held to; and the runs where vmmpower uses '
             'no more energy than it | mean of %d (runs with one below B3) | %s; %d of %d |' % (
                 BUDGET, kn, fmt(kmean, '%.2f'),
                 sum(1 for k in placed if kept_ref(matrix[k]) and
                     e(matrix[k], 'vmmpower') / e(matrix[k], 'B0') <= kept_ref(matrix[k])[1]),
                 sum(1 for k in placed if kept_ref(matrix[k]))))
splaced = [k for k in d12 if '_set_placed' in matrix[k]]
if splaced:
    L.append('| (not a target) the lat-bound\'s own placements (its one set, the demand homed LLC by LLC), run in the '
             'burst simulation: wait p99 within the same limit; also at most the budget queued (queued share, mean) | '
             '%d | %d; %d (%.2f%%) |' % (
                 len(splaced), sum(matrix[k]['_set_placed'][1] <= wait_limit_b3(matrix[k]) for k in splaced),
                 sum(matrix[k]['_set_placed'][1] <= wait_limit_b3(matrix[k]) and matrix[k]['_set_placed'][0] <= BUDGET
                     for k in splaced),
                 statistics.mean(matrix[k]['_set_placed'][0] for k in splaced)))
    sfull = [k for k in splaced if matrix[k]['_set_placed'][3] == 0]
    L.append('| (not a target) the lat-bound\'s own sets charged as placements of the run\'s vCPUs (each CPU its share of '
             'them in the idle gaps and wake-ups, as every policy is; the bound counts none): runs where they use more '
             'energy than vmmpower (runs where the bound has a placement in every interval) | %d | %d |' % (
                 len(sfull), sum(matrix[k]['_set_placed'][2] > e(matrix[k], 'vmmpower') / e(matrix[k], 'B0')
                                 for k in sfull)))
if d12:
    L.append('| (not a target) demand left undelivered, vmmpower / B3 (mean; runs where vmmpower leaves more; '
             'its charge in the energy, %% of B0) | mean of %d | %.2f%% / %.2f%% (%d; %s / %s) |' % (
                 len(d12), statistics.mean(undelivered(matrix[k], 'vmmpower') for k in d12),
                 statistics.mean(undelivered(matrix[k], 'B3') for k in d12),
                 sum(undelivered(matrix[k], 'vmmpower') > undelivered(matrix[k], 'B3') for k in d12),
                 fmt(statistics.mean(charge_b0(matrix[k], 'vmmpower') for k in d12), '%.2f%%'),
                 fmt(statistics.mean(charge_b0(matrix[k], 'B3') for k in d12), '%.2f%%')))
L.append('| default budget, 4:1: wait p99 <= 1.5 x B0\'s | %d | %d |' % (
    len(d4), sum(w99(matrix[k], 'vmmpower') <= 1.5 * w99(matrix[k], 'B0') for k in d4)))
L.append('| default budget, 4:1: energy below B0\'s | %d | %d |' % (
    len(d4), sum(e(matrix[k], 'vmmpower') < e(matrix[k], 'B0') for k in d4)))
L.append('| batch profile: >= 70%% of the B0 -> bin-packing gap | %d | %d |' % (
    len(bk), sum(gap_binpack(batch[k]) >= 0.7 for k in bk)))
bqk = [k for k in bk if k in bq]
if bqk:
    L.append('| (not a target) the same target reached by the default (latency) profile at QueueBudgetPercent %g instead '
             '(1:1 and 2:1); by the batch profile or it; runs where its wait p99 is lower than the batch profile\'s, '
             'and its energy | %d | %d; %d; %d, %d |' % (
                 BQ, len(bqk), sum(gap_binpack(bq[k]) >= 0.7 for k in bqk),
                 sum(gap_binpack(bq[k]) >= 0.7 or gap_binpack(batch[k]) >= 0.7 for k in bqk),
                 sum(w99(bq[k], 'vmmpower') < w99(batch[k], 'vmmpower') for k in bqk),
                 sum(e(bq[k], 'vmmpower') / e(bq[k], 'B0') < e(batch[k], 'vmmpower') / e(batch[k], 'B0') for k in bqk)))
fk = [k for k in bk if '_bp_fill' in batch[k]]
if fk:
    fills = sorted({batch[k]['_bp_fill'][0] for k in fk})
    L.append('| (not a target) the same target read against the bin-packing reference packed within the planner\'s '
             'level headroom (%s%% of every CPU\'s capacity, `LevelHeadroomPercent`: the least margin the planner '
             'keeps), as a share of the B0 -> it gap (`--check-binpack`); the least share | %d | %d; %.1f%% |' % (
                 '/'.join('%g' % f for f in fills), len(fk), sum(gap_fill(batch[k]) >= 0.7 for k in fk),
                 100 * min((g for g in (gap_fill(batch[k]) for k in fk) if g == g), default=float('nan'))))
bpk = [k for k in bk if '_bp_placed' in batch[k]]
if bpk:
    add = [100 * batch[k]['_bp_placed'][0] - pct_b0(batch[k], 'binpack-ref') for k in bpk]
    L.append('| (not a target) the bin-packing reference\'s own placements run in the burst simulation and charged as '
             'a policy is (`--check-binpack`: its vCPUs in the idle gaps and wake-ups, its work over capacity '
             'undelivered): points of B0 over the reference (mean, most); their queued share and wait p99 ms '
             'against vmmpower\'s at the batch profile (means) | %d | %+.2f, %+.2f; %.1f%% / %.1f ms against '
             '%.1f%% / %.1f ms |' % (
                 len(bpk), statistics.mean(add), max(add),
                 statistics.mean(batch[k]['_bp_placed'][1] for k in bpk),
                 statistics.mean(batch[k]['_bp_placed'][2] for k in bpk),
                 statistics.mean(queued(batch[k], 'vmmpower') for k in bpk),
                 statistics.mean(w99(batch[k], 'vmmpower') for k in bpk)))
    lgk = [k for k in bpk if '_bp_lag' in batch[k]]
    if lgk:
        L.append('| (not a target) the same packing one interval late (each interval run on the packing of the one '
                 'before, as a packer that knew the last interval\'s demand exactly and re-packed every interval): runs '
                 'where it uses more energy than vmmpower at the batch profile; its demand left undelivered against '
                 'vmmpower\'s (means) | %d | %d; %.2f%% against %.2f%% |' % (
                     len(lgk), sum(batch[k]['_bp_lag'][0] > e(batch[k], 'vmmpower') / e(batch[k], 'B0') for k in lgk),
                     statistics.mean(batch[k]['_bp_lag'][1] for k in lgk),
                     statistics.mean(undelivered(batch[k], 'vmmpower') for k in lgk)))
    L.append('| (not a target) batch runs where vmmpower queues a smaller share of its wake-ups than the bin-packing '
             'reference\'s own placements; where its wait p99 is lower too | %d | %d; %d |' % (
                 len(bpk), sum(queued(batch[k], 'vmmpower') < batch[k]['_bp_placed'][1] for k in bpk),
                 sum(queued(batch[k], 'vmmpower') < batch[k]['_bp_placed'][1] and
                     w99(batch[k], 'vmmpower') < batch[k]['_bp_placed'][2] for k in bpk)))
L.append('| <= 60 planner moves per vCPU-hour (every run above) | %d | %d |' % (
    len(allk), sum(moves(m[k]) <= 60 for m, k in allk)))
L.append('')
if placed:
    kg = {}
    for k in placed:
        kg.setdefault((k[1], k[2]), []).append(k)

    def kmean_text(ks, budget):
        x, n = kept_mean(ks, budget)
        return '%.2f (%d runs)' % (x, n) if n else '-'
    L.append('The proposed share per host and ratio, against the references that keep the wait limit and the budget '
             '(against those that keep the wait limit alone): %s.\n' % '; '.join(
                 '%s %s %s (%s)' % (hk[0], hk[1], kmean_text(ks, True), kmean_text(ks, False)) for hk, ks in sorted(kg.items())))

misses = []
L.append('### Default budget, 1:1 and 2:1, run by run\n')
# the placed reference's columns when the runs have them (vmmpower-sim --check-reference)
ref_cols = any('_llc_ref_placed' in matrix[k] for k in d12)
set_cols = any('_set_placed' in matrix[k] for k in d12)
L.append('| run | vmm wait p99 ms | limit ms | | vmm energy vs B0 | B3 | lat-bound | | share of the lat-bound saving | ' +
         ('lat-bound placed: queued / wait p99 ms / energy charged | ' if set_cols else '') + 'per-LLC ref | share of its saving | ' +
         ('per-LLC ref placed: queued / wait p99 ms | kept ref (its budget) | share of its saving | ' if ref_cols else '') +
         'queued vmm / B3 | undelivered vmm / B3 | moves/vCPU-h |')
L.append('|---' * ((17 if ref_cols else 14) + set_cols) + '|')
for k in d12:
    v = matrix[k]
    wl, wv = wait_limit_b3(v), w99(v, 'vmmpower')
    wok, eok = wv <= wl, e(v, 'vmmpower') < e(v, 'B3')
    rp, kr, sp = v.get('_llc_ref_placed'), kept_ref(v), v.get('_set_placed')
    placed_cols = (' %s | %s | %s |' % (
        '%.2f%% / %s%.2f%s' % (rp[0], '**' if rp[1] > wl else '', rp[1], '**' if rp[1] > wl else '') if rp else '-',
        '%.1f%% (%s)' % (100 * kr[1], kr[0] or '%g%%' % BUDGET) if kr else '-', fmt(kept_share(v), '%.2f'))
        if ref_cols else '')
    set_col = (' %s |' % ('%.2f%% / %s%.2f%s / %.1f%%%s' % (sp[0], '**' if sp[1] > wl else '', sp[1],
                                                          '**' if sp[1] > wl else '', 100 * sp[2],
                                                          ' (%d without)' % sp[3] if sp[3] else '')
                          if sp else '-') if set_cols else '')
    L.append(('| %s | %.2f | %.2f | %s | %.1f%% | %.1f%% | %s%% | %s | %s |' + set_col.replace('%', '%%') + ' %s | %s |' +
              placed_cols.replace('%', '%%') + ' %.2f%% / %.2f%% | %.2f%% / %.2f%% | %.1f |') % (
        ';'.join(k), wv, wl, ok(wok), pct_b0(v, 'vmmpower'), pct_b0(v, 'B3'),
        fmt(pct_b0(v, 'lat-bound')) if 'lat-bound' in v else '-', ok(eok), fmt(latency_share(v), '%.2f'),
        (fmt(100 * v['_llc_ref'], '%.1f%%') + (' (%d without)' % v['_llc_ref_np'] if v.get('_llc_ref_np') else ''))
        if '_llc_ref' in v else '-',
        'vmm below' if '_llc_ref' in v and v['_llc_ref'] * e(v, 'B0') > e(v, 'vmmpower') else fmt(llc_share(v), '%.2f'),
        queued(v, 'vmmpower'), queued(v, 'B3'), undelivered(v, 'vmmpower'), undelivered(v, 'B3'), moves(v)))
    if not wok:
        misses.append('%s: wait p99 %.2f ms > %.2f ms (B3 %.2f ms); %s.' % (';'.join(k), wv, wl, w99(v, 'B3'), queue_note(v)))
    if not eok:
        misses.append('%s: energy %.1f%% of B0, not below B3\'s %.1f%% (lat-bound %s%%).' % (
            ';'.join(k), pct_b0(v, 'vmmpower'), pct_b0(v, 'B3'), fmt(pct_b0(v, 'lat-bound'))))
if shares and not mean_share >= 0.9:
    groups = {}
    for k in d12:
        groups.setdefault((k[1], k[2]), []).append(k)
    per = '; '.join('%s %s %s (kept ref %s)' % (
        hk[0], hk[1], fmt(statistics.mean(latency_share(matrix[k]) for k in ks), '%.2f'),
        fmt(kept_mean(ks)[0], '%.2f')) for hk, ks in sorted(groups.items()))
    misses.append('default budget, 1:1 and 2:1: mean share of the lat-bound saving %.2f < 0.9; per host and ratio: %s '
                  '(the bound counts none of its vCPUs\' idle gaps and wake-ups; where the runs place its sets and charge '
                  'them as the policies are, the lines above, they use more energy than vmmpower in most runs; the '
                  'variants measured: docs/simulator.md §5).'
                  % (mean_share, per))
L.append('')
if d4:
    L.append('### Default budget, 4:1, run by run\n')
    L.append('| run | vmm wait p99 ms | 1.5 x B0 ms | | vmm energy vs B0 | | lat-bound vs B0 | queued vmm / B0 | moves/vCPU-h |')
    L.append('|---|---|---|---|---|---|---|---|---|')
    for k in d4:
        v = matrix[k]
        wl, wv = 1.5 * w99(v, 'B0'), w99(v, 'vmmpower')
        wok, eok = wv <= wl, e(v, 'vmmpower') < e(v, 'B0')
        L.append('| %s | %.2f | %.2f | %s | %.1f%% | %s | %s%% | %.2f%% / %.2f%% | %.1f |' % (
            ';'.join(k), wv, wl, ok(wok), pct_b0(v, 'vmmpower'), ok(eok), fmt(pct_b0(v, 'lat-bound')),
            queued(v, 'vmmpower'), queued(v, 'B0'), moves(v)))
        if not wok:
            misses.append('%s: wait p99 %.2f ms > 1.5 x B0\'s %.2f ms; %s.' % (';'.join(k), wv, w99(v, 'B0'), queue_note(v)))
        if not eok:
            misses.append('%s: energy %.1f%% of B0.' % (';'.join(k), pct_b0(v, 'vmmpower')))
    L.append('')
L.append('### Batch profile, run by run%s\n' % ('' if own_batch else ' (the default runs: no batch profile in this build)'))
L.append('| run | vmm energy vs B0 | binpack-ref | share of the B0 -> bin-packing gap | | wait p99 ms vmm / B0 / B3 | '
         'queued vmm | binpack-ref placed: energy charged / queued / wait p99 ms | one interval late: energy / '
         'undelivered / wait p99 ms | moves/vCPU-h | | %s | within the level headroom: binpack-ref / vmm\'s share of '
         'the B0 -> it gap / its placements queued / wait p99 ms |' % (
             'latency profile at QueueBudgetPercent %g: energy / share of the gap / wait p99 ms / queued' % BQ
             if BQ is not None else 'latency profile at a loose budget (not run)'))
L.append('|---|---|---|---|---|---|---|---|---|---|---|---|---|')
for k in bk:
    v = batch[k]
    g = gap_binpack(v)
    bpp, lag, q = v.get('_bp_placed'), v.get('_bp_lag'), bq.get(k)
    q_cell = ('%.1f%% / %.1f%% / %.2f / %.2f%%' % (pct_b0(q, 'vmmpower'), 100 * gap_binpack(q), w99(q, 'vmmpower'),
                                                  queued(q, 'vmmpower')) if q else '-')
    bf = v.get('_bp_fill')
    f_cell = ('%g%%: %.1f%% / %.1f%% / %s / %s' % (
        bf[0], 100 * bf[1], 100 * gap_fill(v), '-' if bf[2] is None else '%.2f%%' % bf[2],
        '-' if bf[3] is None else '%.2f' % bf[3]) if bf else '-')
    L.append('| %s | %.1f%% | %.1f%% | %.1f%% | %s | %.2f / %.2f / %.2f | %.2f%% | %s | %s | %.1f | %s | %s | %s |' % (
        ';'.join(k), pct_b0(v, 'vmmpower'), pct_b0(v, 'binpack-ref'), 100 * g, ok(g >= 0.7), w99(v, 'vmmpower'),
        w99(v, 'B0'), w99(v, 'B3'), queued(v, 'vmmpower'),
        '%.1f%% / %.2f%% / %.2f' % (100 * bpp[0], bpp[1], bpp[2]) if bpp else '-',
        '%.1f%% / %.2f%% / %.2f' % (100 * lag[0], lag[1], lag[2]) if lag else '-', moves(v), ok(moves(v) <= 60),
        q_cell, f_cell))
    if not g >= 0.7:
        placed_txt = ('; the reference\'s own placements, charged, %.1f%% of B0 with %.1f%% of their wake-ups queued '
                      'and a wait p99 of %.2f ms, where vmmpower queues %.1f%% with %.2f ms' % (
                          100 * bpp[0], bpp[1], bpp[2], queued(v, 'vmmpower'), w99(v, 'vmmpower'))) if bpp else ''
        lag_txt = ('; one interval late, %.1f%% of B0 with %.2f%% of the demand undelivered (vmmpower %.2f%%)' % (
            100 * lag[0], lag[1], undelivered(v, 'vmmpower'))) if lag else ''
        q_txt = ('; the latency profile at QueueBudgetPercent %g, %.1f%% of the gap (%.1f%% of B0) with a wait p99 of '
                 '%.2f ms and %.1f%% queued' % (BQ, 100 * gap_binpack(q), pct_b0(q, 'vmmpower'), w99(q, 'vmmpower'),
                                                queued(q, 'vmmpower'))) if q else ''
        f_txt = ('; within the level headroom (%g%% of capacity) the reference uses %.1f%% of B0, and vmmpower closes '
                 '%.1f%% of the gap to that' % (bf[0], 100 * bf[1], 100 * gap_fill(v))) if bf else ''
        misses.append('batch %s: %.1f%% of the B0 -> bin-packing gap (vmmpower %.1f%%, binpack-ref %.1f%% of B0)%s%s%s%s.' % (
            ';'.join(k), 100 * g, pct_b0(v, 'vmmpower'), pct_b0(v, 'binpack-ref'), placed_txt, lag_txt, q_txt, f_txt))
for m, k in allk:
    if moves(m[k]) > 60:
        misses.append('%s%s: %.1f planner moves per vCPU-hour.' % ('batch ' if m is batch else '', ';'.join(k),
                                                                   moves(m[k])))
L.append('')
L.append('### Where a target is missed\n')
if misses:
    L += ['- ' + x for x in misses]
else:
    L.append('Every run meets every target.')
L.append('')

# ---- the frontier -----------------------------------------------------------------------------
def frontier_points():
    """Per (host, ratio): [(setting, budget or None, run)] for the frontier day and burst, tightest first."""
    fk = {k for runs_ in frontier.values() for k in runs_}
    pts = {}
    for hk in sorted({(k[1], k[2]) for k in fk} | {(k[1], k[2]) for k in matrix}, key=lambda t: (t[0], float(t[1][:-2]))):
        sel = [k for k in fk if (k[1], k[2]) == hk] or [k for k in matrix if (k[1], k[2]) == hk]
        day, burst = sorted(sel)[0][0], sorted(sel)[0][3]
        key = (day, hk[0], hk[1], burst)
        row = []
        for q in sorted(set(frontier) | {BUDGET}):
            v = frontier.get(q, {}).get(key) if q != BUDGET else matrix.get(key)
            if v:
                row.append(('%g%%' % q + (' (default)' if q == BUDGET else ''), q, v))
        if own_batch and key in batch:
            row.append(('batch', None, batch[key]))
        pts[hk] = (key, row)
    return pts


FP = frontier_points()
L.append('## The frontier: energy against wait p99 per budget setting\n')
L.append('Per host and ratio, on %s: vmmpower at each queueing budget (`--queue-budget-percent`) and at the batch '
         'profile, with B0-B3 as points (their figures from the default run), the bin-packing reference\'s own '
         'placements as a point (`--check-binpack`, from the batch run: what the batch target\'s reference costs in '
         'wait) and the latency-constrained bound at each budget. Each cell: energy vs B0 / wait p99 ms / queued share. `%s` plots it.\n' % (
             ', '.join(sorted({'%s, B = %s' % (key[0], key[3]) for key, _ in FP.values()})) or '-',
             os.path.basename(args.svg) if args.svg else 'results-frontier.svg'))
L.append('| host | ratio | setting | energy vs B0 | wait p99 ms | queued | lat-bound vs B0 |')
L.append('|---|---|---|---|---|---|---|')
for (host, rat), (key, row) in FP.items():
    for name, q, v in row:
        L.append('| %s | %s | vmmpower %s | %.1f%% | %.2f | %.2f%% | %s |' % (
            host, rat, name, pct_b0(v, 'vmmpower'), w99(v, 'vmmpower'), queued(v, 'vmmpower'),
            fmt(pct_b0(v, 'lat-bound')) + '%' if q is not None and 'lat-bound' in v else '-'))
    base = matrix.get(key)
    if base:
        for p in ['B0', 'B1', 'B2', 'B3']:
            L.append('| %s | %s | %s | %.1f%% | %.2f | %.2f%% | - |' % (host, rat, p, pct_b0(base, p), w99(base, p),
                                                                       queued(base, p)))
    bv = batch.get(key) if own_batch else None
    if bv and 'binpack-placed' in bv:
        L.append('| %s | %s | binpack-ref placed (its batch run) | %.1f%% | %.2f | %.2f%% | - |' % (
            host, rat, pct_b0(bv, 'binpack-placed'), w99(bv, 'binpack-placed'), queued(bv, 'binpack-placed')))
L.append('')


def write_svg(path):
    """Panels per host (rows) and ratio (columns): x = wait p99 (ms, log), y = energy vs B0 (%)."""
    hosts = sorted({h for h, _ in FP})
    rats = sorted({r for _, r in FP}, key=lambda r: float(r[:-2]))
    if not hosts:
        return
    PW, PH, ML, MT, GAP = 360, 270, 70, 60, 60
    W = ML + len(rats) * (PW + GAP) + 20
    H = MT + len(hosts) * (PH + GAP + 20) + 70
    colours = {'vmmpower': '#d62728', 'B0': '#1f77b4', 'B1': '#2ca02c', 'B2': '#9467bd', 'B3': '#ff7f0e',
               'lat-bound': '#17becf', 'binpack-placed': '#8c564b'}
    o = ['<?xml version="1.0" encoding="UTF-8"?>',
         '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="22" font-size="15">vmmpower-sim: energy against run-queue wait p99, per queueing budget '
         '(modelled)</text>' % ML,
         '<text x="%d" y="40" fill="#444">red line: vmmpower from the tightest budget to the batch profile; '
         'B0-B3: the baselines; cyan dashes: the latency-constrained bound at the default budget</text>' % ML,
         '<text x="%d" y="55" fill="#444">brown: the bin-packing reference\'s own placements, run and charged as a '
         'policy (vmmpower-sim --check-binpack, the batch run)</text>' % ML]
    for hi, host in enumerate(hosts):
        for ri, rat in enumerate(rats):
            if (host, rat) not in FP:
                continue
            key, row = FP[(host, rat)]
            base = matrix.get(key)
            pts = [('vmm ' + n.split(' ')[0], v, 'vmmpower') for n, _, v in row]
            bpts = [(p, base, p) for p in ['B0', 'B1', 'B2', 'B3']] if base else []
            bv = batch.get(key) if own_batch else None
            if bv and 'binpack-placed' in bv:
                bpts.append(('binpack-ref placed', bv, 'binpack-placed'))
            xs = [w99(v, p) for _, v, p in pts + bpts]
            ys = [pct_b0(v, p) for _, v, p in pts + bpts]
            lb = pct_b0(base, 'lat-bound') if base and 'lat-bound' in base else float('nan')
            if lb == lb:
                ys.append(lb)
            xs = [max(x, 0.01) for x in xs if x == x]
            if not xs:
                continue
            x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
            x1 = max(x1, x0 + 1)
            y0, y1 = 5 * math.floor(min(ys) / 5), 5 * math.ceil(max(ys) / 5)
            y1 = max(y1, y0 + 5)
            px, py = ML + ri * (PW + GAP), MT + 20 + hi * (PH + GAP + 20)
            X = lambda x: px + PW * (math.log10(max(x, 0.01)) - x0) / (x1 - x0)
            Y = lambda y: py + PH - PH * (y - y0) / (y1 - y0)
            o.append('<text x="%d" y="%d" font-weight="bold">%s, %s (%s, B = %s)</text>' % (px, py - 8, host, rat, key[0], key[3]))
            o.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>' % (px, py, PW, PH))
            for d in range(x0, x1 + 1):
                xx = X(10 ** d)
                o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e4e4e4"/>' % (xx, py, xx, py + PH))
                o.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (xx, py + PH + 16, 10 ** d))
            step = 1 if y1 - y0 <= 10 else 5 if y1 - y0 <= 40 else 10
            for yv in range(int(y0), int(y1) + 1, step):
                o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e4e4e4"/>' % (px, Y(yv), px + PW, Y(yv)))
                o.append('<text x="%d" y="%.1f" text-anchor="end">%d%%</text>' % (px - 5, Y(yv) + 4, yv))
            o.append('<text x="%d" y="%d" text-anchor="middle">wait p99 (ms, log scale)</text>' % (px + PW / 2, py + PH + 34))
            o.append('<text x="%d" y="%d" transform="rotate(-90 %d %d)" text-anchor="middle">energy vs B0</text>' % (
                px - 45, py + PH / 2, px - 45, py + PH / 2))
            if lb == lb:
                o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-width="1.6" stroke-dasharray="6,4"/>' % (
                    px, Y(lb), px + PW, Y(lb), colours['lat-bound']))
                o.append('<text x="%d" y="%.1f" fill="%s">lat-bound %.1f%%</text>' % (
                    px + 4, Y(lb) + 14, colours['lat-bound'], lb))
            if pts:
                o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (
                    colours['vmmpower'], ' '.join('%.1f,%.1f' % (X(w99(v, p)), Y(pct_b0(v, p))) for _, v, p in pts)))
            # points at the same place share one label ("B0 = B2"); labels pushed 13 px apart
            groups = []
            for name, v, p in pts + bpts:
                cx, cy = X(w99(v, p)), Y(pct_b0(v, p))
                o.append('<circle cx="%.1f" cy="%.1f" r="4.5" fill="%s"/>' % (cx, cy, colours[p]))
                for g in groups:
                    if abs(g[0] - cx) < 6 and abs(g[1] - cy) < 6 and g[3] == p:
                        g[2].append(name.replace('vmm ', ''))
                        break
                    if abs(g[0] - cx) < 6 and abs(g[1] - cy) < 6:
                        g[2].append(name.replace('vmm ', ''))
                        break
                else:
                    groups.append([cx, cy, [name.replace('vmm ', '')], p])
            placed = []
            for cx, cy, names, p in groups:
                ly = cy + 4
                while any(abs(ly - py_) < 13 and abs(cx - px_) < 70 for px_, py_ in placed):
                    ly += 13
                placed.append((cx, ly))
                right = cx > px + PW - 110  # near the right edge: the label goes left of the point
                o.append('<text x="%.1f" y="%.1f" fill="%s"%s>%s</text>' % (
                    cx - 8 if right else cx + 8, ly, colours[p], ' text-anchor="end"' if right else '', ' = '.join(names)))
    o.append('</svg>')
    with open(path, 'w') as fh:
        fh.write('\n'.join(o) + '\n')


if args.svg:
    write_svg(args.svg)

# ---- means and every run ------------------------------------------------------------------------
def agg(m, pol, fn, sel=None):
    vals = [fn(v, pol) for k, v in m.items() if pol in v and (sel is None or sel(k))]
    vals = [x for x in vals if x == x]
    return statistics.mean(vals) if vals else float('nan')


L.append('## Means over the default-budget runs (%d)\n' % len(matrix))
L.append('| policy | energy vs B0 | wait p99 (ms) | queued | moves/vCPU-h | undelivered |')
L.append('|---|---|---|---|---|---|')
for p in POLS + BOUNDS:
    run_ = p in POLS
    L.append('| %s | %.1f%% | %s | %s | %s | %s |' % (
        p, agg(matrix, p, pct_b0), fmt(agg(matrix, p, w99), '%.2f') if run_ else '-',
        fmt(agg(matrix, p, queued), '%.2f%%') if run_ else '-',
        fmt(agg(matrix, p, lambda v, q: fnum(v[q]['moves_per_vcpu_hour']))) if run_ else '-',
        fmt(agg(matrix, p, lambda v, q: 100 * fnum(v[q]['undelivered_share'])), '%.2f%%') if run_ else '-'))
L.append('')
L.append('## By host, ratio and burst (mean over the days)\n')
L.append('| host | ratio | B | energy vs B0: vmm / B3 / lat-bound / binpack-ref / fluid | wait p99 ms vmm / B0 / B1 / B3 | '
         'queued vmm / B3 | vmm moves/h | batch vmm vs B0 / gap to binpack-ref |')
L.append('|---|---|---|---|---|---|---|---|')
for hk in sorted({k[1:] for k in matrix}, key=lambda t: (t[0], float(t[1][:-2]), float(t[2][:-2]))):
    sel = lambda k, hk=hk: k[1:] == hk
    bsel = [batch[k] for k in batch if sel(k)]
    L.append('| %s | %s | %s | %.1f%% / %.1f%% / %s%% / %.1f%% / %.1f%% | %.2f / %.2f / %.2f / %.2f | %.2f%% / %.2f%% | %.1f | %s |' % (
        hk[0], hk[1], hk[2], agg(matrix, 'vmmpower', pct_b0, sel), agg(matrix, 'B3', pct_b0, sel),
        fmt(agg(matrix, 'lat-bound', pct_b0, sel)), agg(matrix, 'binpack-ref', pct_b0, sel), agg(matrix, 'fluid', pct_b0, sel),
        agg(matrix, 'vmmpower', w99, sel), agg(matrix, 'B0', w99, sel), agg(matrix, 'B1', w99, sel),
        agg(matrix, 'B3', w99, sel), agg(matrix, 'vmmpower', queued, sel), agg(matrix, 'B3', queued, sel),
        agg(matrix, 'vmmpower', lambda v, q: fnum(v[q]['moves_per_vcpu_hour']), sel),
        ('%.1f%% / %.1f%%' % (statistics.mean(pct_b0(v, 'vmmpower') for v in bsel),
                              100 * statistics.mean(gap_binpack(v) for v in bsel))) if bsel else '-'))
L.append('')
L.append('## Every default-budget run\n')
L.append('| run | policy | kWh | vs B0 | vs fluid | wait p50 / p99 / p99.9 ms | queued | deep | moves/h | migr/h | undelivered | decide s |')
L.append('|---|---|---|---|---|---|---|---|---|---|---|---|')
for k in sorted(matrix, key=sort_key):
    for p in POLS + BOUNDS:
        r = matrix[k].get(p)
        if not r:
            continue
        if p in POLS:
            w = '%.2f / %.2f / %.1f' % (fnum(r['wait_p50_us']) / 1e3, fnum(r['wait_p99_us']) / 1e3, fnum(r['wait_p999_us']) / 1e3)
            extra = '%.2f%% | %.1f%% | %.1f | %.0f | %.2f%% | %.2f' % (
                100 * fnum(r.get('queued_share')), 100 * fnum(r['deep_share']), fnum(r['moves_per_vcpu_hour']),
                fnum(r['migrations_per_vcpu_hour']), 100 * fnum(r['undelivered_share']), fnum(r['decide_cpu_s']))
        else:
            w, extra = '-', '- | - | - | - | - | -'
        L.append('| %s | %s | %.3f | %.1f%% | %+.1f%% | %s | %s |' % (
            ';'.join(k), p, fnum(r['energy_kwh']), 100 * fnum(r['rel_b0']), 100 * fnum(r['vs_fluid']), w, extra))
L.append('')
if sens:
    L.append('## Sensitivity to the model\'s assumed parameters\n')
    L.append('pl-20110303, xeon-spr-2s, 2:1, B = 10 ms, default budget; one parameter of '
             '`config/models/xeon-spr-2s.model` changed per row.\n')
    L.append('| variant | vmm vs B0 | B1 vs B0 | B3 vs B0 | lat-bound vs B0 | binpack ref vs B0 | vmm wait p99 ms | B3 wait p99 ms |')
    L.append('|---|---|---|---|---|---|---|---|')
    for k in sorted(sens, key=lambda x: (x != 'base', x)):
        v = sens[k]
        L.append('| %s | %.1f%% | %.1f%% | %.1f%% | %s%% | %.1f%% | %.2f | %.2f |' % (
            k, pct_b0(v, 'vmmpower'), pct_b0(v, 'B1'), pct_b0(v, 'B3'),
            fmt(pct_b0(v, 'lat-bound')) if 'lat-bound' in v else '-', pct_b0(v, 'binpack-ref'),
            w99(v, 'vmmpower'), w99(v, 'B3')))
    L.append('')
# ---- cost ---------------------------------------------------------------------------------------
L.append('## Cost\n')
if args.plan_bench and os.path.exists(args.plan_bench):
    with open(args.plan_bench) as fh:
        lines = [x.split() for x in fh if x.strip() and x.split()[0].isdigit()]
    for f in lines:
        if f[0] == '256' and f[1] == '1000':
            ini, steady, ini_min, steady_min = float(f[2]), float(f[4]), float(f[3]), float(f[5])
            L.append('Plan time for 1,000 vCPUs on 256 pCPUs (`bench/plan-bench 21 256 1000`, median of 21 plans, %s '
                     'build): %.0f us for the first plan, %.0f us for a steady one (the fastest of the 21: %.0f and '
                     '%.0f us; CPU time on a shared VM, whose slow phases raise both by about half: '
                     'docs/simulator.md §8); the target, under 1 ms: %s.' % (
                         args.buildtype, ini, steady, ini_min, steady_min,
                         'met' if max(ini, steady) < 1000 else '**missed**'))
            if len(f) >= 11:
                L.append('A grow plan (the same load with 16 of the vCPUs waiting, each moved to a CPU the grow '
                         'wakes for it, placement.c `ws_best_wake`): %.0f us (the fastest %.0f us), %s.' % (
                             float(f[9]), float(f[10]),
                             'under 1 ms too' if float(f[9]) < 1000 else 'over 1 ms'))
            L.append('')
else:
    L.append('(no plan-bench output)\n')
L.append('Plots per run (power over the day and wait p99 per policy) are written next to the CSVs in '
         '`BUILD_DIR/sim-results/svg/`; `rsvg-convert X.svg -o X.png` renders one.\n')
with open(args.dest, 'w') as fh:
    fh.write('\n'.join(L))
