#!/bin/sh
# lockrun: run a command unless another copy holding the same lock file is still running.
set -u

usage() {
    echo "usage: lockrun.sh LOCKFILE COMMAND [ARG...]" >&2
    exit 2
}

[ $# -ge 2 ] || usage
lock=$1
shift

if [ -e "$lock" ]; then
    holder=$(cat "$lock" 2>/dev/null)
    case $holder in
        ''|*[!0-9]*) holder= ;;
    esac
    if [ -n "$holder" ] && kill -0 "$holder" 2>/dev/null; then
        echo "lockrun: $lock is held by pid $holder; not starting" >&2
        exit 75
    fi
    echo "lockrun: removing stale lock $lock (pid ${holder:-unknown} is gone)" >&2
    rm -f "$lock"
fi

echo $$ > "$lock" || { echo "lockrun: cannot write $lock" >&2; exit 2; }
trap 'rm -f "$lock"' EXIT INT TERM
"$@"
