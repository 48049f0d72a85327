#!/bin/bash
# The main job on the embedded default: set up this host, build, start two small TCG guests
# under libvirt (one busy on vCPU 0), run vmmpowerd on its built-in defaults (no config
# file), and show what it tracks with vmmpowerctl; then, both guests idle, restart it with a model in
# which packing saves and show the vCPUs packed onto one pCPU and each pCPU's idle share before and
# after. Cleans up after itself.
# Usage (as root on Debian 12): bash tools/demo.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
        echo "demo.sh: must run as root (it starts libvirtd, guests and the daemon)" >&2
        exit 1
fi
bash tools/setup-host.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
exec python3 tools/demo.py "${1:-12}"
