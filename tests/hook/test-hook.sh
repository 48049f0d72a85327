#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Test of config/vmmpower-libvirt-hook with a fake vmmpowerctl that records
# its arguments: which operations notify, with which arguments, that the hook
# always exits 0 without output, that it is bounded when vmmpowerctl hangs
# (also when it ignores SIGTERM), and that it is a no-op without vmmpowerctl.
# Usage: test-hook.sh PATH-TO-HOOK
set -u

hook=${1:?usage: test-hook.sh HOOK}
tmp=$(mktemp -d /tmp/vmmpower-hook-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
        echo "FAIL: $*"
        failures=$((failures + 1))
}

# bin-none: only the tools the hook needs; bin-fake: plus the fake vmmpowerctl.
mkdir -p "$tmp/bin-none" "$tmp/bin-fake"
for tool in timeout; do
        ln -s "$(command -v $tool)" "$tmp/bin-none/$tool"
        ln -s "$(command -v $tool)" "$tmp/bin-fake/$tool"
done
cat > "$tmp/bin-fake/vmmpowerctl" <<'FAKE'
#!/bin/sh
# One line per call: arguments joined by '|'.
out=""
for a in "$@"; do out="$out$a|"; done
printf '%s\n' "$out" >> "$FAKE_LOG"
echo "noise on stdout"
echo "noise on stderr" >&2
case ${FAKE_MODE:-} in
hang) exec /bin/sleep 30 ;;
stubborn) trap '' TERM; /bin/sleep 30 ;;
fail) exit 3 ;;
esac
exit 0
FAKE
chmod +x "$tmp/bin-fake/vmmpowerctl"

# run_hook BIN-DIR DOMAIN OP: sets rc, out, ms (wall time in milliseconds).
run_hook() {
        local start end
        : > "$tmp/out"
        start=$(date +%s%N)
        printf '<domain type="qemu"><name>%s</name></domain>\n' "$2" |
                env -i PATH="$1" FAKE_LOG="$tmp/log" FAKE_MODE="${FAKE_MODE:-}" \
                "$hook" "$2" "$3" begin - > "$tmp/out" 2>&1
        rc=$?
        end=$(date +%s%N)
        ms=$(((end - start) / 1000000))
        out=$(cat "$tmp/out")
}

# 1. Every operation exits 0; only started/stopped/release/reconnect notify.
for op in prepare start started stopped release migrate restore reconnect attach unknown ""; do
        : > "$tmp/log"
        run_hook "$tmp/bin-fake" vm1 "$op"
        [ "$rc" = 0 ] || fail "op '$op': exit $rc"
        [ -z "$out" ] || fail "op '$op': hook printed '$out'"
        case $op in
        started|stopped|release|reconnect) want="notify|--|$op|vm1|" ;;
        *) want="" ;;
        esac
        got=$(cat "$tmp/log")
        [ "$got" = "$want" ] || fail "op '$op': vmmpowerctl called with '$got', expected '$want'"
done

# 2. Odd domain names reach vmmpowerctl as one argument, not as options.
for dom in "-x" "--socket=/tmp/evil" "a*b" 'd$(touch /tmp/pwned-by-hook)'; do
        : > "$tmp/log"
        run_hook "$tmp/bin-fake" "$dom" started
        [ "$rc" = 0 ] || fail "domain '$dom': exit $rc"
        got=$(cat "$tmp/log")
        [ "$got" = "notify|--|started|$dom|" ] || fail "domain '$dom': got '$got'"
done
[ ! -e /tmp/pwned-by-hook ] || { fail "domain name was evaluated"; rm -f /tmp/pwned-by-hook; }

# 3. vmmpowerctl failing: still exit 0.
: > "$tmp/log"
FAKE_MODE=fail run_hook "$tmp/bin-fake" vm1 stopped
[ "$rc" = 0 ] || fail "failing vmmpowerctl: exit $rc"
[ "$(cat "$tmp/log")" = "notify|--|stopped|vm1|" ] || fail "failing vmmpowerctl: not called"

# 4. vmmpowerctl hanging: bounded under 3 s, exit 0; also when it ignores SIGTERM.
for mode in hang stubborn; do
        : > "$tmp/log"
        FAKE_MODE=$mode run_hook "$tmp/bin-fake" vm1 started
        echo "hook with a '$mode' vmmpowerctl returned $rc after $ms ms"
        [ "$rc" = 0 ] || fail "$mode: exit $rc"
        [ "$ms" -lt 3000 ] || fail "$mode: took $ms ms (limit 3000)"
        [ "$ms" -ge 1900 ] || fail "$mode: returned after $ms ms: did it wait for vmmpowerctl at all?"
        [ "$(cat "$tmp/log")" = "notify|--|started|vm1|" ] || fail "$mode: not called"
done

# 5. No vmmpowerctl installed: exit 0 at once, nothing printed.
run_hook "$tmp/bin-none" vm1 started
[ "$rc" = 0 ] || fail "no vmmpowerctl: exit $rc"
[ -z "$out" ] || fail "no vmmpowerctl: printed '$out'"
[ "$ms" -lt 1000 ] || fail "no vmmpowerctl: took $ms ms"

# 6. It is POSIX sh (dash parses it).
if command -v dash > /dev/null; then
        dash -n "$hook" || fail "dash -n rejects the hook"
fi

if [ "$failures" -gt 0 ]; then
        echo "$failures failure(s)"
        exit 1
fi
echo "all hook checks passed"
