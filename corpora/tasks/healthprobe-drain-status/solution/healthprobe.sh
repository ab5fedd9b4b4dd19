#!/bin/sh
# healthprobe: tell the load balancer whether this node should get traffic.
# Reads the node's state files under STATE_DIR (default /run/app).
set -u

state_dir=${STATE_DIR:-/run/app}

if [ ! -f "$state_dir/ready" ]; then
    echo "down: app not ready"
    exit 2
fi

if [ -f "$state_dir/draining" ]; then
    echo "drain: maintenance requested"
    exit 9
fi

if [ -f "$state_dir/error" ]; then
    echo "down: $(head -n 1 "$state_dir/error")"
    exit 2
fi

load=$(cut -d ' ' -f 1 "$state_dir/loadavg" 2>/dev/null || echo 0)
limit=${LOAD_LIMIT:-6}
if awk -v l="$load" -v m="$limit" 'BEGIN { exit !(l > m) }'; then
    echo "warn: load $load above $limit"
    exit 1
fi

echo "ok"
exit 0
