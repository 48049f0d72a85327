"""Run the real vmmpowerd binary for integration tests: a private config, state directory
and control socket under a temp dir, the real libvirtd and the real /proc and /sys."""

import json
import os
import signal
import subprocess
import tempfile
import time

BUILD_DIR = os.environ.get("VMMPOWER_BUILD_DIR") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build")
VMMPOWERD = os.path.join(BUILD_DIR, "vmmpowerd")
VMMPOWERCTL = os.path.join(BUILD_DIR, "vmmpowerctl")


class DaemonError(Exception):
    pass


class Daemon:
    """vmmpowerd --foreground with a config written from sections {section: {key: value}}."""

    def __init__(self, sections=None, args=(), period="1s"):
        self.tmp = tempfile.mkdtemp(prefix="vmmpt-daemon-")
        os.chmod(self.tmp, 0o755)
        self.socket = os.path.join(self.tmp, "control.sock")
        self.config = os.path.join(self.tmp, "vmmpower.conf")
        self.metrics = os.path.join(self.tmp, "metrics.prom")
        conf = {
            "Daemon": {"ControlPeriod": period, "StateDirectory": os.path.join(self.tmp, "state"),
                       "ControlSocket": self.socket, "LogLevel": "debug"},
            "QEMU": {"ProcScanInterval": "2s"},
            "Metrics": {"TextfilePath": self.metrics},
        }
        for sec, kv in (sections or {}).items():
            conf.setdefault(sec, {}).update(kv)
        self.write_config(conf)
        self.log_path = os.path.join(self.tmp, "vmmpowerd.log")
        self.args = list(args)
        self.proc = None

    def write_config(self, conf):
        lines = []
        for sec, kv in conf.items():
            lines.append("[%s]" % sec)
            for k, v in kv.items():
                for item in (v if isinstance(v, list) else [v]):
                    lines.append("%s = %s" % (k, item))
            lines.append("")
        with open(self.config, "w") as f:
            f.write("\n".join(lines))

    def start(self, timeout=15.0):
        self.logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen([VMMPOWERD, "--foreground", "--config", self.config] + self.args,
                                     stdout=self.logf, stderr=self.logf, stdin=subprocess.DEVNULL)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise DaemonError("vmmpowerd exited with %d:\n%s" % (self.proc.returncode, self.log()))
            rc, _, _ = self.ctl("version")
            if rc == 0:
                return self
            time.sleep(0.1)
        raise DaemonError("vmmpowerd did not answer within %.0fs:\n%s" % (timeout, self.log()))

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-8000:]
        except OSError:
            return ""

    def ctl(self, *args, user=None, timeout=30):
        argv = [VMMPOWERCTL, "--socket", self.socket] + list(args)
        if user is not None:
            argv = ["setpriv"] + user + ["--"] + argv
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def json(self, cmd):
        rc, out, err = self.ctl(cmd, "--json")
        if rc != 0:
            raise DaemonError("vmmpowerctl %s failed (%d): %s" % (cmd, rc, err))
        return json.loads(out)

    def status(self):
        return self.json("status")

    def vms(self):
        return self.json("vms")["vms"]

    def vm_by_pid(self, pid):
        for vm in self.vms():
            if vm["pid"] == pid:
                return vm
        return None

    def wait_for(self, pred, timeout, what):
        """Poll pred() until true; returns seconds waited."""
        t0 = time.monotonic()
        last = None
        while time.monotonic() - t0 < timeout:
            last = pred()
            if last:
                return time.monotonic() - t0
            time.sleep(0.1)
        raise DaemonError("timed out after %.1fs waiting for %s (last: %r)\n%s" % (
            timeout, what, last, self.log()))

    def wait_periods(self, n):
        """Wait until the daemon has run n more control periods."""
        start = self.status()["periods"]
        self.wait_for(lambda: self.status()["periods"] >= start + n, 10 + 2 * n, "%d periods" % n)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=10):
        if self.proc is None:
            return None
        try:
            if self.proc.poll() is not None:
                return self.proc.returncode
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise DaemonError("vmmpowerd did not exit on SIGTERM within %ds" % timeout)
        finally:
            self.logf.close()
