#!/bin/sh
set -eu
script="$(cd "$(dirname "$0")/.." && pwd)/lockrun.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

sh -c 'exit 0' &
gone=$!
wait "$gone"
echo "$gone" > job.lock
sh "$script" job.lock sh -c 'echo ran > out.txt' 2>/dev/null
[ "$(cat out.txt)" = ran ]
[ ! -e job.lock ]

printf 'garbage\n' > odd.lock
sh "$script" odd.lock sh -c 'echo again > out2.txt' 2>/dev/null
[ "$(cat out2.txt)" = again ]
exit 0
