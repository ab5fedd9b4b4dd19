#!/bin/sh
set -eu
script="$(cd "$(dirname "$0")/.." && pwd)/rotlog.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

for i in 1 2 3 4 5 6; do
    echo "run $i" > app.log
    sh "$script" -k 3 app.log
done
[ "$(ls app.log.* | wc -l)" -eq 3 ]
[ "$(cat app.log.1)" = "run 6" ] && [ "$(cat app.log.3)" = "run 4" ]
[ ! -e app.log.4 ]

for i in 1 2 3 4; do
    echo "zipped $i" > web.log
    sh "$script" -k 2 -z web.log
done
[ "$(ls web.log.* | wc -l)" -eq 2 ]
[ -f web.log.1 ] && [ -f web.log.2.gz ] && [ ! -e web.log.3.gz ]

for i in 1 2 3 4 5 6 7; do
    echo "default $i" > api.log
    sh "$script" api.log
done
[ "$(ls api.log.* | wc -l)" -eq 5 ]
