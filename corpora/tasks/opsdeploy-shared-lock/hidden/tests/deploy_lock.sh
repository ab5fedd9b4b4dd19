#!/bin/sh
set -eu
root="$(cd "$(dirname "$0")/.." && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPS_LOCK_DIR="$work/locks"
mkdir -p "$OPS_LOCK_DIR" "$work/src" "$work/release"
echo v2 > "$work/src/app.txt"
tar -C "$work/src" -czf "$work/app-2.0.0.tar.gz" .

mkdir "$OPS_LOCK_DIR/maintenance.lock"
echo "backup.sh 4242" > "$OPS_LOCK_DIR/maintenance.lock/owner"
set +e
sh "$root/deploy.sh" "$work/app-2.0.0.tar.gz" "$work/release" 2>/dev/null
status=$?
set -e
[ "$status" -eq 3 ]
[ ! -e "$work/release/VERSION" ]
[ "$(cat "$OPS_LOCK_DIR/maintenance.lock/owner")" = "backup.sh 4242" ]

rmdir "$OPS_LOCK_DIR/maintenance.lock" 2>/dev/null || rm -rf "$OPS_LOCK_DIR/maintenance.lock"
sh "$root/deploy.sh" "$work/app-2.0.0.tar.gz" "$work/release" 2>/dev/null
[ "$(cat "$work/release/VERSION")" = app-2.0.0 ]
[ ! -e "$OPS_LOCK_DIR/maintenance.lock" ]
exit 0
