#!/bin/sh
set -eu
script="$(cd "$(dirname "$0")/.." && pwd)/certwatch.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

inside=$(date -u -d "+21 days" +%F)
outside=$(date -u -d "+22 days" +%F)
printf 'api-1 %s\napi-2 %s\n' "$inside" "$outside" > hosts.txt

set +e
out=$(sh "$script" hosts.txt)
status=$?
set -e
[ "$status" -eq 1 ]
[ "$out" = "api-1 expires in 21 days ($inside)" ]

printf 'api-2 %s\n' "$outside" > far.txt
sh "$script" far.txt
if sh "$script" -w 30 far.txt > /dev/null; then exit 1; fi
exit 0
