#!/bin/sh
# Judged apart: this file runs in the judge; certwatch.sh runs in the jail (`jail`), in this
# shell's current folder, which the jail shares.
set -eu
script="$JAIL_WORKSPACE/certwatch.sh"

inside=$(date -u -d "+21 days" +%F)
outside=$(date -u -d "+22 days" +%F)
printf 'api-1 %s\napi-2 %s\n' "$inside" "$outside" > hosts.txt

set +e
out=$(jail sh "$script" hosts.txt)
status=$?
set -e
[ "$status" -eq 1 ]
[ "$out" = "api-1 expires in 21 days ($inside)" ]

printf 'api-2 %s\n' "$outside" > far.txt
jail sh "$script" far.txt
if jail sh "$script" -w 30 far.txt > /dev/null; then exit 1; fi
exit 0
