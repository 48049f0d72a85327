#!/bin/sh
# Test-guest work loop: burns CPU, counts iterations.
# Usage: busyloop CPU [BATCH SLEEP_S]   (started pinned to vCPU CPU by /init)
#   without BATCH: burns the vCPU; with BATCH: BATCH iterations, then sleeps SLEEP_S
#   seconds (busybox sleep takes fractions), so the vCPU is lightly loaded and the
#   iteration rate is a work counter that drops when the vCPU does not get the CPU
#   time its work needs.
# On SIGUSR1 it writes its iteration count to /tmp/busy.CPU.cnt (the agent's `rate`
# command asks for it); a light loop writes it after every batch instead. A busy loop
# writes nothing otherwise: periodic file writes from the loop
# cost the other vCPUs IPIs (measured ~20% of a host CPU under TCG).
f=/tmp/busy.$1.cnt
i=0
trap 'echo $i > "$f"' USR1
if [ -n "$2" ]; then
        while :; do
                n=0
                while [ $n -lt "$2" ]; do
                        n=$((n + 1))
                done
                i=$((i + $2))
                echo $i > "$f" # a shell builtin: no fork; `rate` reads it without waking us
                sleep "$3"
        done
fi
while :; do
        i=$((i + 1))
done
