#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Test of config/vmmpowerctl.bash-completion: sources it, sets COMP_WORDS and
# COMP_CWORD as bash does, calls the function and compares COMPREPLY.
# Usage: test-completion.sh PATH-TO-COMPLETION-FILE
set -u

file=${1:?usage: test-completion.sh COMPLETION-FILE}
failures=0

# check "EXPECTED WORDS" WORD... : the last WORD is the one being completed.
check() {
        local want=$1 got
        shift
        got=$(bash -c '
                source "$1" || exit 99
                shift
                complete -p vmmpowerctl > /dev/null || exit 98
                COMP_WORDS=("$@")
                COMP_CWORD=$(($# - 1))
                COMP_LINE="$*"
                COMP_POINT=${#COMP_LINE}
                _vmmpowerctl vmmpowerctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}" || exit 97
                # "ok:" marks a completed call, so that an expected empty reply can fail too.
                printf "ok:"
                printf "%s\n" "${COMPREPLY[@]}" | LC_ALL=C sort | tr "\n" " "
        ' completion-test "$file" "$@")
        got=${got% }
        if [ "${got#ok:}" = "$got" ]; then
                echo "FAIL: completing '$*': the completion function did not run ('$got')"
                failures=$((failures + 1))
                return
        fi
        got=${got#ok:}
        if [ "$got" != "$want" ]; then
                echo "FAIL: completing '$*': got '$got', expected '$want'"
                failures=$((failures + 1))
        fi
}

check "cpus help metrics notify plan reload status top version vms" vmmpowerctl ""
check "cpus plan status version vms" vmmpowerctl --json ""
check "status" vmmpowerctl -j st
check "reload" vmmpowerctl re
check "vms" vmmpowerctl --socket /tmp/x.sock vm
check "cpus" vmmpowerctl -c /etc/vmmpower/vmmpower.conf cp
check "--config --help --json --socket --version" vmmpowerctl --
check "--interval" vmmpowerctl top --int
check "--config --count --help --interval --json --socket --version" vmmpowerctl top --
check "--config --help --socket --version" vmmpowerctl metrics --
check "" vmmpowerctl top --count ""
check "started stopped" vmmpowerctl notify st
check "reconnect release" vmmpowerctl notify -- re
check "" vmmpowerctl notify started ""
check "plan" vmmpowerctl help pl
check "" vmmpowerctl help plan ""
check "" vmmpowerctl status ""

# --socket and --config complete file names.
tmp=$(mktemp -d /tmp/vmmpower-compl-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/control.sock"
check "$tmp/control.sock" vmmpowerctl --socket "$tmp/con"
check "$tmp/control.sock" vmmpowerctl status --config "$tmp/con"

if [ "$failures" -gt 0 ]; then
        echo "$failures failure(s)"
        exit 1
fi
echo "all completion checks passed"
