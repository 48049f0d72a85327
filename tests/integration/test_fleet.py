#!/usr/bin/env python3
"""Fleet metrics as a real Prometheus sees them (issue 17 item 4).

Metrics: vmmpowerd's Prometheus text passes `promtool check metrics`, carries
vmmpower_build_info, the plan's modelled watts and pCPU counts, the applier's and the
restores' families also in a dry run, per-VM labels domain/uuid/vcpu and no pid label; the
textfile follows a reload (a moved TextfilePath removes the old file) and is removed when the
daemon stops.

Fleet: a real Prometheus (Debian's `prometheus`) scraping a real prometheus-node-exporter whose
textfile collector reads the daemon's textfile directory, both started here on free loopback
ports, with the shipped rules (config/prometheus/vmmpower.rules.yml) loaded; vmmpowerd packs
two real TCG guests under libvirt.  The modelled watts saved (spread - plan, through the
recording rule and as a raw PromQL expression), the active pCPU count and the per-VM labels
are read back through Prometheus's HTTP query API and checked against what the daemon wrote
(`vmmpowerctl plan --json`, the textfile); when the daemon stops, its series go stale in
Prometheus.  Every process and domain started here is stopped and removed.

Run: meson test -C build --suite integration fleet -v   (root; real libvirtd)."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmlib  # noqa: E402
from daemonlib import Daemon  # noqa: E402
from test_packing import LIGHT_SLEEP_S, core_model  # noqa: E402

SRC = vmlib.SOURCE_DIR
RULES = os.path.join(SRC, "config", "prometheus", "vmmpower.rules.yml")
SAMPLE_S = 12          # how long the daemon's own values are sampled around the Prometheus queries
LEAD_S = 4             # ... and for this long before the first query (a scrape + a rule evaluation old)


def log(msg):
    print("[fleet] " + msg, flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_prom(text):
    """{(name, frozenset(labels.items())): value} of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, value = line.rsplit(" ", 1)
        name, labels = series, {}
        if "{" in series:
            name, rest = series.split("{", 1)
            for part in rest.rstrip("}").split('",'):
                if part:
                    k, v = part.split("=", 1)
                    labels[k] = v.strip('"')
        out[(name, frozenset(labels.items()))] = float(value)
    return out


def one(metrics, name):
    vals = [v for (n, _), v in metrics.items() if n == name]
    if len(vals) != 1:
        raise AssertionError("%d series named %s" % (len(vals), name))
    return vals[0]


def promtool_check(text):
    p = subprocess.run(["promtool", "check", "metrics"], input=text, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
    return p.returncode, p.stdout


class Metrics(unittest.TestCase):
    """The exposition itself, without guests: vmmpowerd --dry-run, libvirt off."""

    def setUp(self):
        vmlib.require_root()
        self.d = Daemon(sections={"Libvirt": {"Enabled": "no"}}, args=["--dry-run"], period="500ms")
        self.addCleanup(shutil.rmtree, self.d.tmp, True)
        self.d.start()
        self.addCleanup(self.d.stop)

    def test_exposition(self):
        d = self.d
        d.wait_periods(2)
        rc, text, err = d.ctl("metrics")
        self.assertEqual(rc, 0, err)
        rc, out = promtool_check(text)
        log("promtool check metrics (dry run, no VMs): rc %d %s" % (rc, out.strip() or "no findings"))
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.strip(), "")
        m = parse_prom(text)
        self.assertEqual(m[("vmmpower_build_info", frozenset({("version", self.version())}))], 1)
        self.assertEqual(one(m, "vmmpower_dry_run"), 1)
        self.assertEqual(one(m, "vmmpower_plans_applied"), 0)
        self.assertEqual(one(m, "vmmpower_wait_budget_ratio"), 0.05)
        self.assertEqual(one(m, "vmmpower_cpus_online"), len(os.sched_getaffinity(0)))
        # No spread, dedicated or excluded vCPU: every online pCPU may take packed vCPUs.
        self.assertEqual(one(m, "vmmpower_cpus_packable"), one(m, "vmmpower_cpus_online"))
        # The plan of an empty host: nothing active, nothing saved, in watts.
        st = d.json("plan")
        self.assertEqual(one(m, "vmmpower_cpus_active"), st["n_active"])
        self.assertAlmostEqual(one(m, "vmmpower_plan_watts"), st["plan_mw"] / 1000, places=3)
        self.assertAlmostEqual(one(m, "vmmpower_spread_watts"), st["spread_mw"] / 1000, places=3)
        # The applier's families in a dry run too (zeros), and the restores'.
        for name in ("vmmpower_apply_pins_total", "vmmpower_apply_knobs_foreign_total",
                     "vmmpower_apply_knob_errors_total", "vmmpower_restore_runs_total",
                     "vmmpower_restore_errors_total"):
            self.assertEqual(one(m, name), 0, name)
        results = {dict(l)["result"] for (n, l) in m if n == "vmmpower_restore_knobs_total"}
        self.assertEqual(results, {"restored", "unchanged", "foreign", "gone", "failed", "skipped"})
        self.assertNotIn('pid="', text)
        # A reload that replaces the dry run's applier (on the sim driver: it changed nothing) runs
        # no restore, so none is counted.
        with open(d.config) as f:
            conf = f.read()
        with open(d.config, "w") as f:
            f.write(conf.replace("[Libvirt]\nEnabled = no", "[Libvirt]\nEnabled = yes", 1))
        d.signal(signal.SIGHUP)
        d.wait_for(lambda: d.json("status")["reloads"] >= 1, 10, "the reload")
        d.wait_periods(3)
        m = parse_prom(d.ctl("metrics")[1])
        self.assertEqual(one(m, "vmmpower_restore_runs_total"), 0)
        self.assertTrue(d.json("status")["apply"]["simulated"]["passes"] >= 1)
        log("dry run: a reload replaced the sim-driver applier, no restore counted")

    def version(self):
        rc, out, _ = self.d.ctl("version", "--json")
        self.assertEqual(rc, 0)
        return json.loads(out)["version"]

    def test_textfile_follows_reload_and_stop(self):
        d = self.d
        d.wait_for(lambda: os.path.exists(d.metrics), 10, "textfile written")
        moved = os.path.join(d.tmp, "moved.prom")
        with open(d.config) as f:
            conf = f.read()
        with open(d.config, "w") as f:
            f.write(conf.replace(d.metrics, moved))
        rc, out, err = d.ctl("reload")
        self.assertEqual(rc, 0, err)
        # At once (the reload's reply comes after the rewrite), not a period later.
        self.assertFalse(os.path.exists(d.metrics), "old textfile left after a reload that moved it")
        self.assertTrue(os.path.exists(moved), "new textfile not written by the reload")
        with open(moved) as f:
            self.assertIn("vmmpower_build_info{", f.read())
        self.assertEqual(d.stop(), 0)
        self.assertFalse(os.path.exists(moved), "textfile left behind by a stopped daemon")
        log("textfile moved by reload (old removed at once), removed on SIGTERM")


class Prometheus:
    """prometheus-node-exporter (textfile collector on textdir) and prometheus scraping it every
    second with the shipped rules, both on free loopback ports under a temp dir."""

    def __init__(self, textdir):
        self.tmp = tempfile.mkdtemp(prefix="vmmpt-prom-")
        self.procs = []
        self.ne_port, self.port = free_port(), free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.textdir = textdir

    def start(self):
        with open(os.path.join(self.tmp, "node-exporter.log"), "wb") as ne_log:
            self.procs.append(subprocess.Popen(
                ["prometheus-node-exporter", "--web.listen-address=127.0.0.1:%d" % self.ne_port,
                 "--collector.disable-defaults", "--collector.textfile",
                 "--collector.textfile.directory=" + self.textdir],
                stdout=ne_log, stderr=ne_log, stdin=subprocess.DEVNULL))
        conf = os.path.join(self.tmp, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "rule_files:\n  - %s\n"
                    "scrape_configs:\n  - job_name: node\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n        labels:\n          fqdn: testhost\n"
                    % (json.dumps(RULES), self.ne_port))
        with open(os.path.join(self.tmp, "prometheus.log"), "wb") as p_log:
            self.procs.append(subprocess.Popen(
                ["prometheus", "--config.file=" + conf, "--storage.tsdb.path=" + os.path.join(self.tmp, "data"),
                 "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
                stdout=p_log, stderr=p_log, stdin=subprocess.DEVNULL))
        end = time.monotonic() + 60
        while time.monotonic() < end:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError("%s exited with %d:\n%s" % (p.args[0], p.returncode, self.logs()))
            try:
                if self.query('up{job="node"}') == [1.0]:
                    return self
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError("prometheus did not scrape node-exporter within 60 s:\n" + self.logs())

    def logs(self):
        out = ""
        for name in ("node-exporter.log", "prometheus.log"):
            try:
                with open(os.path.join(self.tmp, name), errors="replace") as f:
                    out += "%s:\n%s\n" % (name, f.read()[-3000:])
            except OSError:
                pass
        return out

    def query_raw(self, expr):
        url = "%s/api/v1/query?%s" % (self.url, urllib.parse.urlencode({"query": expr}))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read().decode())
        if body.get("status") != "success":
            raise RuntimeError("query %r: %r" % (expr, body))
        return body["data"]["result"]

    def query(self, expr):
        return [float(s["value"][1]) for s in self.query_raw(expr)]

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []
        shutil.rmtree(self.tmp, True)


FLEET_SHARE = 0.25  # each guest's loop, share of a busy loop's work per second


class Fleet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        vmlib.require_root()
        vmlib.ensure_libvirtd()
        vmlib.ensure_guest_image()
        cls.d = cls.prom = None
        cls.guests = [vmlib.define_and_start_domain("fleet-a", 1), vmlib.define_and_start_domain("fleet-b", 1)]
        for g in cls.guests:
            log("%s booted in %.1fs" % (g.name, g.wait_booted(180)))

    @classmethod
    def tearDownClass(cls):
        if cls.prom:
            cls.prom.stop()
        if cls.d:
            cls.d.stop()
            shutil.rmtree(cls.d.tmp, True)
        for g in getattr(cls, "guests", []):
            g.destroy()

    def textfile(self):
        with open(self.metrics) as f:
            return parse_prom(f.read())

    def test_watts_saved_through_prometheus(self):
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("needs 2 pCPUs")
        t_start = time.monotonic()
        # A loop of ~25% of a CPU in each guest: with two vCPUs on this host the model's core terms
        # find packing cheaper only for a joint load near 0.5 (plan_compute on this host's topology:
        # two vCPUs at 0.02, 0.05 or 0.15 each plan spread, at 0.25 each packed, 20 mW less); idle
        # guests' cores reach C6 either way (plan = spread, nothing saved).
        a = self.guests[0]
        a.console.busy(0)
        full = a.console.rate(3)[0]
        a.console.idle(0)
        batch = max(50, int(full * FLEET_SHARE * float(LIGHT_SLEEP_S)))
        for g in self.guests:
            g.console.light(0, batch, LIGHT_SLEEP_S)
        # The core terms of the shipped Sapphire Rapids model (test_packing.core_model: this
        # host is a VM whose own idle states say nothing about power): packing saves here.
        model = core_model(os.path.join(SRC, "config", "models", "xeon-spr-2s.model"))
        self.addCleanup(os.unlink, model)
        textdir = tempfile.mkdtemp(prefix="vmmpt-textfile-")
        os.chmod(textdir, 0o755)
        self.addCleanup(shutil.rmtree, textdir, True)
        self.metrics = os.path.join(textdir, "vmmpower.prom")
        # The widest wait budget and packing headroom: this 2-CPU host is shared, and others'
        # load makes a packed idle guest wait (and grow the plan: nothing saved) whatever the
        # placement.  The test is about the numbers reaching Prometheus, not the planner's policy:
        # the batch profile (the latency profile, the default, keeps two guests' vCPUs on two
        # pCPUs here: a wake-up would find the one pCPU busy more often than its 1% budget).
        self.__class__.d = d = Daemon(sections={"Planner": {"ShrinkDwell": "2s", "ModelFile": model,
                                                            "Profile": "batch", "QueueBudgetPercent": "100",
                                                            "WaitBudgetPercent": "100",
                                                            "HeadroomPercent": "100"},
                                                "Metrics": {"TextfilePath": self.metrics}}).start()
        names = {g.name for g in self.guests}

        def packed():
            p = d.json("plan")
            return (p.get("apply", {}).get("enabled") and p.get("n_active") == 1 and
                    {v["vm"] for v in p.get("vcpus", [])} >= names)
        waited = d.wait_for(packed, 90, "both guests packed onto one pCPU")
        log("packed %.1fs after start" % waited)
        self.__class__.prom = prom = Prometheus(textdir).start()
        log("prometheus on %s, node-exporter on 127.0.0.1:%d" % (prom.url, prom.ne_port))
        d.wait_for(lambda: prom.query("instance:vmmpower_watts_saved:spread_minus_plan"), 30,
                   "the recording rule evaluated")

        # The daemon's own values over a window, read while Prometheus scrapes them: what it
        # answers must be among them (idle guests: the load moves the watts a little).
        seen_saved, seen_active, prom_saved, prom_raw, prom_active, plans = [], [], [], [], [], []
        # Prometheus answers with a sample up to a scrape and a rule evaluation old (1 s each, and
        # node-exporter reads the textfile at its scrape): the daemon's values are read for
        # LEAD_S before the first query, so that what Prometheus returns was seen here too.
        start_queries = time.monotonic() + LEAD_S
        end = start_queries + SAMPLE_S
        while time.monotonic() < end:
            p = d.json("plan")
            plans.append(p)
            seen_saved.append((p["spread_mw"] - p["plan_mw"]) / 1000)
            seen_active.append(p["n_active"])
            try:
                m = self.textfile()
                seen_saved.append(one(m, "vmmpower_spread_watts") - one(m, "vmmpower_plan_watts"))
                seen_active.append(one(m, "vmmpower_cpus_active"))
            except FileNotFoundError:
                pass  # between the temporary file's rename and the next read: never absent for long
            if time.monotonic() >= start_queries:
                prom_saved += prom.query("instance:vmmpower_watts_saved:spread_minus_plan")
                prom_raw += prom.query('vmmpower_spread_watts{job="node"} - vmmpower_plan_watts{job="node"}')
                prom_active += prom.query('vmmpower_cpus_active{job="node",fqdn="testhost"}')
            time.sleep(0.25)
        lo, hi = min(seen_saved), max(seen_saved)
        log("daemon: watts saved %.4f..%.4f W over %d reads, active pCPUs %s, plan decisions %s" %
            (lo, hi, len(seen_saved), sorted(set(seen_active)), sorted({p.get("decision") for p in plans})))
        log("prometheus: watts saved (rule) %.4f..%.4f W, (raw PromQL) %.4f..%.4f W, active pCPUs %s, "
            "%d queries each" % (min(prom_saved), max(prom_saved), min(prom_raw), max(prom_raw),
                                 sorted(set(prom_active)), len(prom_saved)))
        if max(prom_saved) <= 0:
            log("no saving; the plan now:\n" + d.ctl("plan")[1])
        # A saving must have travelled: a Prometheus that read 0 W from a daemon that saved 0 W
        # shows nothing.
        self.assertGreater(max(prom_saved), 0, "no saving read back through Prometheus")
        self.assertEqual(len(prom_saved), len(prom_raw))
        eps = 1e-6
        for v in prom_saved + prom_raw:
            self.assertTrue(lo - eps <= v <= hi + eps, "Prometheus says %.6f W saved, the daemon %.6f..%.6f" %
                            (v, lo, hi))
        self.assertTrue(set(prom_active) <= {float(a) for a in seen_active}, (prom_active, seen_active))
        self.assertIn(1.0, prom_active, "never packed while Prometheus looked")
        fleet = prom.query("fleet:vmmpower_watts_saved:sum")
        self.assertEqual(len(fleet), 1)
        self.assertTrue(lo - eps <= fleet[0] <= hi + eps, fleet)

        # Per-VM series as libvirt exporters label them: domain, uuid (libvirt's), vcpu; no pid.
        for g in self.guests:
            uuid = vmlib.virsh("domuuid", g.name).stdout.strip()
            series = prom.query_raw('vmmpower_vcpu_wait_avg_ratio{domain="%s"}' % g.name)
            self.assertEqual(len(series), 1, series)
            labels = series[0]["metric"]
            self.assertEqual((labels.get("uuid"), labels.get("vcpu")), (uuid, "0"), labels)
            self.assertNotIn("pid", labels)
        self.assertEqual(prom.query('node_textfile_scrape_error{job="node"}'), [0.0])
        budget = prom.query("vmmpower_wait_budget_ratio")
        self.assertEqual(budget, [1.0])

        # The exposition with real domains in it passes promtool too.
        with open(self.metrics) as f:
            rc, out = promtool_check(f.read())
        log("promtool check metrics (two guests, plans applied): rc %d %s" % (rc, out.strip() or "no findings"))
        self.assertEqual((rc, out.strip()), (0, ""))

        # The daemon stops: its textfile goes, and with it every vmmpower series in Prometheus.
        self.assertEqual(d.stop(), 0)
        self.assertFalse(os.path.exists(self.metrics), "textfile left behind")
        waited = d.wait_for(lambda: prom.query("vmmpower_build_info") == [], 15,
                            "vmmpower_build_info gone from Prometheus")
        log("daemon stopped: textfile removed, series stale in Prometheus after %.1fs" % waited)
        log("test ran %.0fs (guests booted before it)" % (time.monotonic() - t_start))


if __name__ == "__main__":
    unittest.main(verbosity=2)
