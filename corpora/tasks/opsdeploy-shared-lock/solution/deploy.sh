#!/bin/sh
# deploy: unpack a release tarball into the release directory and record the version.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/common.sh"

[ $# -eq 2 ] || { echo "usage: deploy.sh TARBALL RELEASE_DIR" >&2; exit 2; }
take_lock maintenance
tarball=$1
release=$2
[ -f "$tarball" ] || { log "no such tarball $tarball"; exit 2; }
mkdir -p "$release"
tar -C "$release" -xzf "$tarball"
basename "$tarball" .tar.gz > "$release/VERSION"
log "deployed $(cat "$release/VERSION")"
