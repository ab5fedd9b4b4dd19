#!/bin/sh
# Judged apart: this file runs in the judge; rotlog.sh runs in the jail (`jail`), in this
# shell's current folder, which the jail shares.
set -eu
script="$JAIL_WORKSPACE/rotlog.sh"

for i in 1 2 3 4 5 6; do
    echo "run $i" > app.log
    jail sh "$script" -k 3 app.log
done
[ "$(ls app.log.* | wc -l)" -eq 3 ]
[ "$(cat app.log.1)" = "run 6" ] && [ "$(cat app.log.3)" = "run 4" ]
[ ! -e app.log.4 ]

for i in 1 2 3 4; do
    echo "zipped $i" > web.log
    jail sh "$script" -k 2 -z web.log
done
[ "$(ls web.log.* | wc -l)" -eq 2 ]
[ -f web.log.1 ] && [ -f web.log.2.gz ] && [ ! -e web.log.3.gz ]

for i in 1 2 3 4 5 6 7; do
    echo "default $i" > api.log
    jail sh "$script" api.log
done
[ "$(ls api.log.* | wc -l)" -eq 5 ]
