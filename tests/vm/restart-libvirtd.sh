#!/bin/sh
# Restart libvirtd (guests keep running): stop-libvirtd.sh [--kill] then start-libvirtd.sh.
# Usage: restart-libvirtd.sh [--kill]   (--kill simulates a crash with SIGKILL)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/stop-libvirtd.sh" "$@"
exec "$HERE/start-libvirtd.sh"
