#!/bin/sh
# Judged apart: this file runs in the judge; diskwatch.sh runs in the jail (`jail`), in this
# shell's current folder, which the jail shares.
here=$(cd "$(dirname "$0")" && pwd)
script="$JAIL_WORKSPACE/diskwatch.sh"
cp "$here/data/df-full.txt" df-full.txt
failures=0

# check NAME EXPECTED_STATUS EXPECTED_OUTPUT_PREFIX DF_FILE [ARGS...]
check() {
    name=$1 want_status=$2 want_prefix=$3 data=$4
    shift 4
    case $data in
        df-full.txt) df="$PWD/df-full.txt" ;;
        *) df="$JAIL_WORKSPACE/tests/data/$data" ;;
    esac
    out=$(jail env DISKWATCH_DF="$df" sh "$script" "$@")
    got=$?
    case $out in
        "$want_prefix"*) prefix_ok=1 ;;
        *) prefix_ok=0 ;;
    esac
    if [ "$got" -ne "$want_status" ] || [ "$prefix_ok" -ne 1 ]; then
        echo "FAIL $name: status $got (want $want_status), output '$out' (want '$want_prefix...')"
        failures=$((failures + 1))
    else
        echo "ok   $name"
    fi
}

check "just below the default critical level" 1 "DISK WARNING - /var 91% /srv 87%" df-mixed.txt
check "above the default critical level" 2 "DISK CRITICAL - /var 93%" df-full.txt
check "explicit critical level" 1 "DISK WARNING - /var 93%" df-full.txt -c 95
check "explicit lower critical level" 2 "DISK CRITICAL" df-mixed.txt -c 90
check "bad critical level" 3 "DISK UNKNOWN" df-ok.txt -c 0
[ "$failures" -eq 0 ] || { echo "$failures failed"; exit 1; }
