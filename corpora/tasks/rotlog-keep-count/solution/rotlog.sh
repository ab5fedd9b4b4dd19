#!/bin/sh
# rotlog: rotate log files, keeping a fixed number of old copies.
set -u

keep=5
compress=0

usage() {
    echo "usage: rotlog.sh [-k COUNT] [-z] LOGFILE..." >&2
    exit 2
}

while getopts k:z opt; do
    case $opt in
        k) keep=$OPTARG ;;
        z) compress=1 ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
case $keep in
    ''|*[!0-9]*|0) echo "rotlog: -k needs a positive number" >&2; exit 2 ;;
esac

# copy_name FILE N: the name of the N-th rotated copy, compressed or not
copy_name() {
    if [ -e "$1.$2.gz" ]; then
        echo "$1.$2.gz"
    else
        echo "$1.$2"
    fi
}

rotate() {
    log=$1
    [ -f "$log" ] || { echo "rotlog: $log: no such file" >&2; return 1; }
    n=$keep
    while [ "$n" -ge 1 ]; do
        src=$(copy_name "$log" "$n")
        if [ -e "$src" ]; then
            case $src in
                *.gz) mv "$src" "$log.$((n + 1)).gz" ;;
                *) mv "$src" "$log.$((n + 1))" ;;
            esac
        fi
        n=$((n - 1))
    done
    rm -f "$log.$((keep + 1))" "$log.$((keep + 1)).gz"
    mv "$log" "$log.1" || return 1
    : > "$log" && chmod --reference="$log.1" "$log" 2>/dev/null
    if [ "$compress" -eq 1 ] && [ -f "$log.2" ]; then
        gzip -f "$log.2"
    fi
    return 0
}

status=0
for log in "$@"; do
    rotate "$log" || status=1
done
exit $status
