#!/bin/sh
# certwatch: list the certificates of a host list that expire within a warning window.
set -u

usage() {
    echo "usage: certwatch.sh -w DAYS [-q] LISTFILE" >&2
    exit 2
}

window=21
quiet=0
while getopts w:q opt; do
    case $opt in
        w) window=$OPTARG ;;
        q) quiet=1 ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || usage
case $window in
    *[!0-9]*) echo "certwatch: -w needs a whole number of days" >&2; exit 2 ;;
esac
list=$1
[ -r "$list" ] || { echo "certwatch: $list: cannot read" >&2; exit 2; }

# days are counted from midnight UTC, so a certificate ending tomorrow has 1 day left
today=$(date -u -d "$(date -u +%F)" +%s)
found=0
while read -r host expiry; do
    case $host in ''|'#'*) continue ;; esac
    if ! ends=$(date -u -d "$expiry" +%s 2>/dev/null); then
        echo "certwatch: $host: cannot read the date '$expiry'" >&2
        continue
    fi
    left=$(( (ends - today) / 86400 ))
    if [ "$left" -le "$window" ]; then
        found=1
        [ "$quiet" -eq 1 ] || echo "$host expires in $left days ($expiry)"
    fi
done < "$list"
exit $found
