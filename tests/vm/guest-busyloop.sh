#!/bin/sh
# Test-guest work loop: burns CPU, counts iterations.
# Usage: busyloop CPU   (started pinned to vCPU CPU by /init)
# On SIGUSR1 it writes its iteration count to /tmp/busy.CPU.cnt (the agent's `rate`
# command asks for it). It writes nothing otherwise: periodic file writes from the loop
# cost the other vCPUs IPIs (measured ~20% of a host CPU under TCG).
f=/tmp/busy.$1.cnt
i=0
trap 'echo $i > "$f"' USR1
while :; do
        i=$((i + 1))
done
