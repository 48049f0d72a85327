#!/bin/sh
# /init of the vmmpower test guest (busybox-static initramfs, see build-guest.sh).
#
# Mounts proc/sys/dev, loads the virtio modules listed in /lib/modules/load-order, then runs
# a line-command agent on the serial console (ttyS0). Every reply line starts with "@@ " so
# the host can find it among kernel messages; every command ends with exactly one final
# line "@@ ok CMD ..." or "@@ err CMD ...".
#
#   ping              -> @@ ok ping pong
#   busy CPU          start a busy loop pinned to vCPU CPU  -> @@ ok busy CPU PID
#   light CPU N S     a light loop instead: N iterations, sleep S seconds, repeat
#                     -> @@ ok light CPU PID (`rate` counts its iterations too)
#   idle CPU          stop it                               -> @@ ok idle CPU
#   idle all          stop all busy loops                   -> @@ ok idle all
#   rate [SECS]       per-vCPU busy-loop iterations per second over SECS (default 2):
#                     -> @@ ok rate SECS 0=N 1=N ...  (one entry per online vCPU, 0 if idle)
#   busylist          -> @@ ok busylist CPU...
#   run CMD...        run a shell command: "@@ out LINE" per output line, then @@ ok run RC
#   nproc             -> @@ ok nproc N
#
# Kernel command line: vmmpower.busy=0,1 starts busy loops at boot.

export PATH=/bin:/sbin
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts 2>/dev/null
echo 1 > /proc/sys/kernel/printk 2>/dev/null

while read -r ko; do
        [ -n "$ko" ] || continue
        insmod "/lib/modules/$ko" 2>/dev/null || echo "@@ log insmod $ko failed" > /dev/ttyS0
done < /lib/modules/load-order

exec < /dev/ttyS0 > /dev/ttyS0 2>&1
stty -echo -echoctl -icanon min 1 2>/dev/null; stty icanon 2>/dev/null

NCPU=$(nproc)

reply() { echo "@@ $*"; }

start_busy() { # CPU [BATCH SLEEP_S]
        c=$1
        verb=busy; [ -z "$2" ] || verb=light
        case $c in ''|*[!0-9]*) reply err $verb "$c" bad-cpu; return ;; esac
        if [ "$c" -ge "$NCPU" ]; then reply err $verb "$c" no-such-cpu; return; fi
        case "$2$3" in *[!0-9.]*) reply err $verb "$c" bad-args; return ;; esac
        if [ -r /tmp/busy.$c.pid ] && kill -0 "$(cat /tmp/busy.$c.pid)" 2>/dev/null; then
                reply ok $verb "$c" "$(cat /tmp/busy.$c.pid)"
                return
        fi
        rm -f /tmp/busy.$c.cnt /tmp/busy.$c.light
        [ -z "$2" ] || : > /tmp/busy.$c.light
        taskset -c "$c" /bin/busyloop "$c" $2 $3 < /dev/null > /dev/null 2>&1 &
        echo $! > /tmp/busy.$c.pid
        reply ok $verb "$c" $!
}

stop_busy() { # CPU
        c=$1
        if [ -r /tmp/busy.$c.pid ]; then
                kill -KILL "$(cat /tmp/busy.$c.pid)" 2>/dev/null
                rm -f /tmp/busy.$c.pid /tmp/busy.$c.cnt /tmp/busy.$c.light
        fi
}

uptime_cs() { # uptime in centiseconds
        read -r up _ < /proc/uptime
        cs="${up%.*}${up#*.}"
        while [ "${cs#0}" != "$cs" ] && [ ${#cs} -gt 1 ]; do cs=${cs#0}; done  # not octal
        echo "$cs"
}

counts() { # print "c0 c1 ..." (iteration counts; 0 for idle vCPUs)
        c=0
        while [ $c -lt "$NCPU" ]; do
                if [ ! -e /tmp/busy.$c.light ]; then # a light loop keeps its count file current
                        rm -f /tmp/busy.$c.cnt
                        [ -r /tmp/busy.$c.pid ] && kill -USR1 "$(cat /tmp/busy.$c.pid)" 2>/dev/null
                fi
                c=$((c + 1))
        done
        out=""
        c=0
        while [ $c -lt "$NCPU" ]; do
                v=""
                if [ -r /tmp/busy.$c.pid ]; then
                        # the loop answers between two iterations; the file may still be
                        # empty (created, not yet written): retry, bounded (~2 s)
                        n=0
                        while [ -z "$v" ] && [ $n -lt 200 ]; do
                                [ -r /tmp/busy.$c.cnt ] && read -r v < /tmp/busy.$c.cnt
                                [ -n "$v" ] || usleep 10000
                                n=$((n + 1))
                        done
                fi
                [ -n "$v" ] || v=0
                out="$out $v"
                c=$((c + 1))
        done
        echo $out
}

rate() { # [SECS]
        secs=${1:-2}
        case $secs in ''|*[!0-9.]*) reply err rate bad-seconds; return ;; esac
        t0=$(uptime_cs); a=$(counts)
        sleep "$secs"
        t1=$(uptime_cs); b=$(counts)
        dt=$((t1 - t0)); [ $dt -gt 0 ] || dt=1
        out=""
        c=0
        set -- $b
        for x in $a; do
                y=$1; shift
                d=$((y - x)); [ $d -ge 0 ] || d=0
                out="$out $c=$((d * 100 / dt))"
                c=$((c + 1))
        done
        reply ok rate "$secs"$out
}

for c in $(sed -n 's/.*vmmpower\.busy=\([0-9,]*\).*/\1/p' /proc/cmdline | tr ',' ' '); do
        start_busy "$c" > /dev/null
done

reply ready
while :; do
        if ! read -r cmd arg rest; then
                sleep 1
                continue
        fi
        cmd=$(echo "$cmd" | tr -d '\r')
        arg=$(echo "$arg" | tr -d '\r')
        case $cmd in
        '') ;;
        ping) reply ok ping pong ;;
        nproc) reply ok nproc "$NCPU" ;;
        busy) start_busy "$arg" ;;
        light)
                set -- $(echo "$rest" | tr -d '\r')
                start_busy "$arg" "$1" "$2"
                ;;
        idle)
                if [ "$arg" = all ]; then
                        for p in /tmp/busy.*.pid; do
                                [ -e "$p" ] || continue
                                c=${p#/tmp/busy.}; stop_busy "${c%.pid}"
                        done
                        reply ok idle all
                else
                        case $arg in ''|*[!0-9]*) reply err idle bad-cpu ;;
                        *) stop_busy "$arg"; reply ok idle "$arg" ;;
                        esac
                fi
                ;;
        busylist)
                l=""
                for p in /tmp/busy.*.pid; do
                        [ -e "$p" ] || continue
                        c=${p#/tmp/busy.}; l="$l ${c%.pid}"
                done
                reply ok busylist$l
                ;;
        rate) rate "$arg" ;;
        run)
                line=$(echo "$arg $rest" | tr -d '\r')
                out=$(sh -c "$line" < /dev/null 2>&1)
                rc=$?
                [ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/@@ out /'
                reply ok run "$rc"
                ;;
        *) reply err "$cmd" unknown-command ;;
        esac
done
