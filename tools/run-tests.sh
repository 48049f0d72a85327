#!/bin/bash
# Set up this host (packages, libvirtd), build, and run every test:
# unit tests, integration tests with a real libvirtd and real TCG guests.
# Usage (as root on Debian 12): bash tools/run-tests.sh [BUILD_DIR]
# Prints a closing line "tests: N passed, N failed".
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

python3 - "$builddir/meson-logs/testlog.json" <<'PY'
import json, sys
passed = failed = skipped = 0
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line)["result"]
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
print(f"tests: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
PY
exit $rc
