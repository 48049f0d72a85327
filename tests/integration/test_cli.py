#!/usr/bin/env python3
"""vmmpowerctl's conventions (issue 17 item 3): `help CMD` and `CMD --help`, --json honoured
or refused, connect errors that say what is wrong (permission denied vs not running), the
control socket taken from the configuration (ControlSocket of --config FILE and its conf.d,
with --socket and $VMMPOWER_CONTROL_SOCKET before it), the libvirt hook reaching a daemon on
a non-default socket, and `reload` (the unit's ExecReload=) failing with the FILE:LINE of a bad
configuration. Uses the real vmmpowerd (libvirt off, plans advisory) and, for socket
precedence, small fake servers. Must run as root (setpriv to an unprivileged user)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vmlib  # noqa: E402
from daemonlib import Daemon, VMMPOWERCTL  # noqa: E402

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
HOOK = os.path.join(vmlib.SOURCE_DIR, "config", "vmmpower-libvirt-hook")
UNIT = os.path.join(vmlib.SOURCE_DIR, "config", "vmmpowerd.service")
COMMANDS = ["status", "vms", "cpus", "plan", "top", "metrics", "notify", "reload", "version", "help"]
JSON_COMMANDS = ["status", "vms", "cpus", "plan", "version"]


def ctl(*args, env=None, prefix=(), timeout=30):
    e = dict(os.environ)
    e.pop("VMMPOWER_CONTROL_SOCKET", None)
    e.pop("VMMPOWER_CONFIG", None)
    e.update(env or {})
    p = subprocess.run(list(prefix) + [VMMPOWERCTL] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, env=e)
    return p.returncode, p.stdout, p.stderr


def default_config_dir():
    """Where vmmpowerctl reads its default configuration (from its --help)."""
    _, out, _ = ctl("--help")
    for line in out.splitlines():
        if "(default " in line and "vmmpower.conf" in line:
            return os.path.dirname(line.split("(default ", 1)[1].split()[0])
    raise AssertionError("no default configuration in vmmpowerctl --help:\n" + out)


def in_private_etc(etc, argv):
    """argv in a mount namespace where etc (a temp dir) is bind-mounted over the parent of the
    default configuration directory: the host's files are never touched."""
    parent = os.path.dirname(default_config_dir())
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh", etc, parent] + list(argv)


class FakeServer:
    """A control socket that answers every request with OK and its own name."""

    def __init__(self, path, name):
        self.path, self.name, self.requests = path, name, []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.stopping = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with c:
                c.settimeout(5)
                data = b""
                while not data.endswith(b"\n"):
                    chunk = c.recv(1024)
                    if not chunk:
                        break
                    data += chunk
                self.requests.append(data.decode(errors="replace"))
                c.sendall(("OK\n%s\n" % self.name).encode())

    def close(self):
        self.stopping = True
        self.thread.join(5)
        self.sock.close()


class Offline(unittest.TestCase):
    """What needs no daemon: help, usage errors, connect errors, socket precedence."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="vmmpt-%d-cli-" % os.getpid())
        os.chmod(self.tmp, 0o755)
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        return path

    def server(self, name):
        s = FakeServer(os.path.join(self.tmp, name + ".sock"), name)
        self.addCleanup(s.close)
        return s

    def test_help(self):
        rc, out, err = ctl("--help")
        self.assertEqual(rc, 0, err)
        for c in COMMANDS:  # one line per command
            self.assertEqual(len([l for l in out.splitlines() if l.startswith("  %s " % c)]), 1,
                             "%s in:\n%s" % (c, out))
        for c in COMMANDS:
            for argv in (("help", c), (c, "--help"), ("--help", c)):
                rc, out, err = ctl(*argv)
                self.assertEqual(rc, 0, "%s: %s" % (argv, err))
                self.assertTrue(out.startswith("Usage: vmmpowerctl "), "%s: %r" % (argv, out))
                self.assertIn(" %s" % c, out.splitlines()[0], argv)
                self.assertGreater(len(out.splitlines()), 2, "%s: no description: %r" % (argv, out))
        rc, out, _ = ctl("top", "--help")
        self.assertIn("--interval", out)
        self.assertIn("--count", out)
        rc, out, _ = ctl("help", "metrics")
        self.assertIn("--json is not supported", out)
        self.assertNotIn("[--json]", out)
        rc, out, _ = ctl("help", "status")
        self.assertIn("[--json]", out)
        # Help needs no daemon: nothing was asked of a socket (none exists here).
        for argv in (("help", "nosuch"), ("nosuch", "--help"), ("nosuch",), ("help", "status", "vms")):
            rc, out, err = ctl(*argv, env={"VMMPOWER_CONTROL_SOCKET": os.path.join(self.tmp, "none")})
            self.assertEqual(rc, 2, "%s: rc %d" % (argv, rc))
            self.assertEqual(out, "", argv)
            self.assertTrue(err.startswith("vmmpowerctl: "), "%s: %r" % (argv, err))
        self.assertIn("unknown command 'nosuch'", ctl("help", "nosuch")[2])

    def test_usage_errors_before_connecting(self):
        none = {"VMMPOWER_CONTROL_SOCKET": os.path.join(self.tmp, "none")}
        for argv, what in ((("metrics", "--json"), "--json is not supported by metrics"),
                           (("top", "--json"), "--json is not supported by top"),
                           (("reload", "--json"), "--json is not supported by reload"),
                           (("--json", "notify", "started", "x"), "--json is not supported by notify"),
                           (("status", "--count", "2"), "apply to top only"),
                           (("status", "extra"), "usage: vmmpowerctl status"),
                           (("notify", "started"), "usage: vmmpowerctl notify")):
            rc, out, err = ctl(*argv, env=none)
            self.assertEqual(rc, 2, "%s: rc %d %s" % (argv, rc, err))
            self.assertIn(what, err, argv)

    def test_connect_errors(self):
        missing = os.path.join(self.tmp, "missing.sock")
        rc, _, err = ctl("--socket", missing, "status")
        self.assertEqual(rc, 3)
        self.assertIn("vmmpowerd is not running at %s" % missing, err)

        # A socket file nobody listens on (a daemon that died): ECONNREFUSED.
        dead = os.path.join(self.tmp, "dead.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(dead)
        s.close()
        rc, _, err = ctl("--socket", dead, "status")
        self.assertEqual(rc, 3)
        self.assertIn("vmmpowerd is not running at %s" % dead, err)

        # A live socket of mode 0600 (no ControlGroup) and an unprivileged user: EACCES.
        srv = self.server("private")
        os.chmod(srv.path, 0o600)
        rc, _, err = ctl("--socket", srv.path, "status", prefix=NOBODY)
        self.assertEqual(rc, 3, err)
        self.assertIn("permission denied on %s" % srv.path, err)
        self.assertIn("root", err)
        self.assertIn("ControlGroup", err)
        self.assertNotIn("not running", err)
        self.assertEqual(srv.requests, [])

    def test_socket_from_configuration(self):
        a, b, c, e = self.server("a"), self.server("b"), self.server("c"), self.server("e")
        conf = self.write("etc/vmmpower.conf", "[Daemon]\nControlSocket = %s\n" % a.path)
        # --config FILE: its ControlSocket.
        rc, out, err = ctl("--config", conf, "version")
        self.assertEqual((rc, out), (0, "a\n"), err)
        # $VMMPOWER_CONFIG as --config.
        rc, out, err = ctl("version", env={"VMMPOWER_CONFIG": conf})
        self.assertEqual((rc, out), (0, "a\n"), err)
        # A drop-in in conf.d/ beside the file overrides it, as for vmmpowerd.
        self.write("etc/conf.d/50-socket.conf", "[Daemon]\nControlSocket = %s\n" % b.path)
        rc, out, err = ctl("--config", conf, "version")
        self.assertEqual((rc, out), (0, "b\n"), err)
        # $VMMPOWER_CONTROL_SOCKET beats the configuration; --socket beats both.
        rc, out, err = ctl("--config", conf, "version", env={"VMMPOWER_CONTROL_SOCKET": e.path})
        self.assertEqual((rc, out), (0, "e\n"), err)
        rc, out, err = ctl("--config", conf, "--socket", c.path, "version",
                           env={"VMMPOWER_CONTROL_SOCKET": e.path})
        self.assertEqual((rc, out), (0, "c\n"), err)
        self.assertEqual([a.requests, b.requests, c.requests, e.requests],
                         [["version\n"] * 2, ["version\n"], ["version\n"], ["version\n"]])
        # An explicit configuration that is invalid or missing: usage error with FILE:LINE.
        bad = self.write("bad/vmmpower.conf", "[Daemon]\nControlSocket = %s\nNoSuchKey = 1\n" % a.path)
        rc, out, err = ctl("--config", bad, "version")
        self.assertEqual(rc, 2)
        self.assertIn("%s:3: unknown key 'NoSuchKey'" % bad, err)
        rc, out, err = ctl("--config", os.path.join(self.tmp, "nosuch.conf"), "version")
        self.assertEqual(rc, 2)
        self.assertIn("nosuch.conf", err)
        self.assertEqual(len(a.requests), 2)

    def test_default_configuration(self):
        """Without options, ControlSocket of the default configuration and its conf.d/; an
        invalid default configuration is a warning with FILE:LINE and the built-in socket."""
        a, b = self.server("a"), self.server("b")
        etc = os.path.join(self.tmp, "etc")
        confdir = os.path.join(etc, os.path.basename(default_config_dir()))
        os.makedirs(os.path.join(confdir, "conf.d"))
        conf = os.path.join(confdir, "vmmpower.conf")
        with open(conf, "w") as f:
            f.write("[Daemon]\nControlSocket = %s\n" % a.path)
        p = subprocess.run(in_private_etc(etc, [VMMPOWERCTL, "version"]), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=30)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "a\n", ""))
        with open(os.path.join(confdir, "conf.d", "50-x.conf"), "w") as f:
            f.write("[Daemon]\nControlSocket = %s\n" % b.path)
        p = subprocess.run(in_private_etc(etc, [VMMPOWERCTL, "version"]), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=30)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "b\n", ""))
        with open(os.path.join(confdir, "conf.d", "60-bad.conf"), "w") as f:
            f.write("# comment\n[Daemon]\nControlPeriod = soon\n")
        p = subprocess.run(in_private_etc(etc, [VMMPOWERCTL, "version"]), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=30)
        self.assertIn("warning: %s:3: " % os.path.join(default_config_dir(), "conf.d", "60-bad.conf"),
                      p.stderr)
        self.assertIn("using the default control socket /run/vmmpower/control.sock", p.stderr)
        # Not sent to either configured socket (a host daemon may or may not be on the default one).
        self.assertEqual((len(a.requests), len(b.requests)), (1, 1))

    def test_unit_reloads_through_vmmpowerctl(self):
        with open(UNIT) as f:
            reload = [l.split("=", 1)[1].split() for l in f if l.startswith("ExecReload=")]
        self.assertEqual(reload, [["/usr/bin/vmmpowerctl", "reload"]])


class WithDaemon(unittest.TestCase):
    """The real daemon on a non-default socket named only in its configuration."""

    @classmethod
    def setUpClass(cls):
        vmlib.require_root()
        cls.d = Daemon({"Libvirt": {"Enabled": "no"}, "Planner": {"Apply": "no"}}).start()

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop()
        if rc not in (None, 0):
            raise AssertionError("vmmpowerd exited with %r on SIGTERM" % rc)

    def test_json_every_command(self):
        d = self.d
        for c in JSON_COMMANDS:
            rc, out, err = ctl("--config", d.config, c, "--json")
            self.assertEqual(rc, 0, "%s: %s" % (c, err))
            self.assertIsInstance(json.loads(out), dict, c)
        for argv in (("top", "--count", "1"), ("metrics",), ("reload",), ("notify", "started", "x")):
            rc, out, err = ctl("--config", d.config, "--json", *argv)
            self.assertEqual(rc, 2, "%s --json: rc %d" % (argv, rc))
            self.assertIn("--json is not supported", err)
            self.assertEqual(out, "")
            # Without --json they work.
            rc, out, err = ctl("--config", d.config, *argv)
            self.assertEqual(rc, 0, "%s: %s" % (argv, err))
        self.assertEqual(sorted(JSON_COMMANDS + ["top", "metrics", "reload", "notify", "help"]), sorted(COMMANDS))

        # The daemon itself refuses --json for text-only commands instead of answering text.
        def raw(line):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(d.socket)
            s.sendall(line)
            out = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                out += chunk
            s.close()
            return out
        for line in (b"metrics --json\n", b"top --json\n", b"reload --json\n", b"notify --json started x\n"):
            self.assertTrue(raw(line).startswith(b"ERR EOPNOTSUPP "), line)
        self.assertTrue(raw(b"metrics\n").startswith(b"OK\n# HELP"))

    def test_hook_reaches_daemon_on_configured_socket(self):
        """The libvirt hook, run as libvirtd runs it (empty environment, no options), with the
        built vmmpowerctl first in PATH and the daemon's configuration as the default one (in a
        private mount namespace): the notification reaches the daemon whose socket is only
        named in that configuration."""
        d = self.d
        tmp = tempfile.mkdtemp(prefix="vmmpt-%d-cli-" % os.getpid())
        self.addCleanup(shutil.rmtree, tmp, True)
        bindir, etc = os.path.join(tmp, "bin"), os.path.join(tmp, "etc")
        confdir = os.path.join(etc, os.path.basename(default_config_dir()))
        os.makedirs(bindir)
        os.makedirs(confdir)
        os.symlink(VMMPOWERCTL, os.path.join(bindir, "vmmpowerctl"))
        shutil.copy(d.config, os.path.join(confdir, "vmmpower.conf"))
        before = self._notifies()
        t0 = time.monotonic()
        p = subprocess.run(in_private_etc(etc, ["env", "-i", "PATH=%s:/usr/bin:/bin" % bindir, HOOK,
                                                "vmmpt-%d-cli-dom" % os.getpid(), "started", "begin", "-"]),
                           input="<domain/>", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=10)
        ms = (time.monotonic() - t0) * 1000
        print("[cli] hook with the real vmmpowerctl returned %d after %.0f ms" % (p.returncode, ms), flush=True)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "", ""))
        d.wait_for(lambda: self._notifies() == before + 1, 10, "the hook's notification")

    def _notifies(self):
        rc, out, err = ctl("--config", self.d.config, "status", "--json")
        self.assertEqual(rc, 0, err)
        return json.loads(out)["notifies"]

    def test_reload_error_carries_file_and_line(self):
        d = self.d
        with open(d.config) as f:
            good = f.read()

        def restore():
            with open(d.config, "w") as f:
                f.write(good)
        self.addCleanup(restore)
        n = len(good.splitlines())
        with open(d.config, "a") as f:
            f.write("[Daemon]\nNoSuchKey = 1\n")
        # ExecReload= of the unit, with the socket given (the configuration is now invalid).
        rc, out, err = ctl("--socket", d.socket, "reload")
        self.assertEqual(rc, 1, err)
        self.assertIn("%s:%d: unknown key 'NoSuchKey' in section [Daemon]" % (d.config, n + 2), err)
        self.assertIn("running configuration kept", err)
        # Fixed: the reload succeeds.
        with open(d.config, "w") as f:
            f.write(good)
        rc, out, err = ctl("--config", d.config, "reload")
        self.assertEqual((rc, out, err), (0, "", ""))


if __name__ == "__main__":
    unittest.main(verbosity=2)
