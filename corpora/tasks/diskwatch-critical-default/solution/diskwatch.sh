#!/bin/sh
# diskwatch: report filesystems whose used space crosses the configured level.
set -u

warn=80
crit=92

usage() {
    echo "usage: diskwatch.sh [-w PERCENT] [-c PERCENT] [MOUNTPOINT ...]" >&2
    exit 3
}

is_percent() {
    case $1 in
        ''|*[!0-9]*) return 1 ;;
    esac
    [ "$1" -ge 1 ] && [ "$1" -le 100 ]
}

while getopts w:c: opt; do
    case $opt in
        w) warn=$OPTARG ;;
        c) crit=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))

is_percent "$warn" || { echo "DISK UNKNOWN - bad warning level: $warn"; exit 3; }
is_percent "$crit" || { echo "DISK UNKNOWN - bad critical level: $crit"; exit 3; }

df_output() {
    if [ -n "${DISKWATCH_DF:-}" ]; then
        cat "$DISKWATCH_DF"
    else
        df -P
    fi
}

wanted() {
    [ $# -eq 1 ] && return 0
    mount=$1
    shift
    for m in "$@"; do
        [ "$m" = "$mount" ] && return 0
    done
    return 1
}

report=$(df_output) || { echo "DISK UNKNOWN - df failed"; exit 3; }

status=0
worst=""
checked=0
while read -r fs _blocks _used _avail capacity mount; do
    case $fs in
        Filesystem|tmpfs|devtmpfs|overlay) continue ;;
    esac
    wanted "$mount" "$@" || continue
    checked=$((checked + 1))
    pct=${capacity%\%}
    if [ "$pct" -ge "$crit" ]; then
        status=2
        worst="$worst $mount $pct%"
    elif [ "$pct" -ge "$warn" ]; then
        [ "$status" -lt 1 ] && status=1
        worst="$worst $mount $pct%"
    fi
done <<EOD
$report
EOD

if [ "$checked" -eq 0 ]; then
    echo "DISK UNKNOWN - no matching filesystem"
    exit 3
fi
case $status in
    0) echo "DISK OK - $checked filesystems below $warn%" ;;
    1) echo "DISK WARNING -$worst" ;;
    2) echo "DISK CRITICAL -$worst" ;;
esac
exit $status
