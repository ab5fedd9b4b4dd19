#!/bin/sh
# Judged apart: this file runs in the judge; deploy.sh runs in the jail (`jail`), over files in
# this shell's current folder, which the jail shares (the release folder is the jail's own).
set -eu
root="$JAIL_WORKSPACE"
work=$PWD
locks="$work/locks"
mkdir -p "$locks" "$work/src"
jail mkdir -p "$work/release"
echo v2 > "$work/src/app.txt"
tar -C "$work/src" -czf "$work/app-2.0.0.tar.gz" .

mkdir "$locks/maintenance.lock"
echo "backup.sh 4242" > "$locks/maintenance.lock/owner"
set +e
jail env OPS_LOCK_DIR="$locks" sh "$root/deploy.sh" "$work/app-2.0.0.tar.gz" "$work/release" 2>/dev/null
status=$?
set -e
[ "$status" -eq 3 ]
[ ! -e "$work/release/VERSION" ]
[ "$(cat "$locks/maintenance.lock/owner")" = "backup.sh 4242" ]

rmdir "$locks/maintenance.lock" 2>/dev/null || rm -rf "$locks/maintenance.lock"
jail env OPS_LOCK_DIR="$locks" sh "$root/deploy.sh" "$work/app-2.0.0.tar.gz" "$work/release" 2>/dev/null
[ "$(cat "$work/release/VERSION")" = app-2.0.0 ]
[ ! -e "$locks/maintenance.lock" ]
exit 0
