#!/bin/sh
set -eu
script="$(cd "$(dirname "$0")/.." && pwd)/healthprobe.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STATE_DIR="$work"
touch "$work/ready" "$work/draining"
echo "0.10 0.10 0.10 1/200 999" > "$work/loadavg"

set +e
sh "$script" > /dev/null
status=$?
set -e
[ "$status" -eq 9 ]

rm "$work/draining"
sh "$script" > /dev/null
exit 0
