#!/bin/sh
# Judged apart: this file runs in the judge; healthprobe.sh runs in the jail (`jail`), with its
# state in this shell's current folder, which the jail shares.
set -eu
script="$JAIL_WORKSPACE/healthprobe.sh"
work=$PWD
touch "$work/ready" "$work/draining"
echo "0.10 0.10 0.10 1/200 999" > "$work/loadavg"

set +e
jail env STATE_DIR="$work" sh "$script" > /dev/null
status=$?
set -e
[ "$status" -eq 9 ]

rm "$work/draining"
jail env STATE_DIR="$work" sh "$script" > /dev/null
exit 0
