#!/usr/bin/env bash
# Install what the sandbox tests need: bubblewrap (local provider), docker.io (a private dockerd for
# the docker provider), util-linux (prlimit, taskset) and Debian's python3 (copied into the offline
# sandbox image) and chromium (the report test renders the HTML report headless). Idempotent: installs only what is missing, says what it did, exits 0 when all is there.
set -euo pipefail

declare -A need=(
  [bwrap]=bubblewrap
  [dockerd]=docker.io
  [containerd]=containerd
  [runc]=runc
  [prlimit]=util-linux
  [taskset]=util-linux
  [/usr/bin/python3]=python3
  [chromium]=chromium
)

missing=()
for cmd in "${!need[@]}"; do
  if [[ "$cmd" == /* ]]; then [[ -x "$cmd" ]] && continue; else command -v "$cmd" >/dev/null 2>&1 && continue; fi
  missing+=("${need[$cmd]}")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_test_deps: bwrap, dockerd, containerd, runc, prlimit, taskset, /usr/bin/python3 and chromium are present; nothing to do"
  exit 0
fi

packages=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
if [[ $(id -u) -ne 0 ]]; then
  echo "install_test_deps: missing packages: $packages; run this script as root (apt-get)" >&2
  exit 1
fi
echo "install_test_deps: installing $packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $packages
echo "install_test_deps: installed $packages"
