#!/usr/bin/env bash
# What `make demo` (the embedded default, sandbox: local) needs besides Python, git and make:
# bubblewrap (the sandbox every post-turn check runs in) and util-linux (prlimit, taskset; setpriv,
# with which a root runner drops the check to an unprivileged uid). Idempotent: silent when all is
# there; as root with apt-get it installs what is missing and says so in one line; otherwise it
# installs nothing and exits 2 with the one-line fix, before the run. MEMTRIAL_ALLOW_UNSANDBOXED_CHECK=1
# (checks run unsandboxed, named in every record) lets the run start without them.
set -euo pipefail

declare -A need=([bwrap]=bubblewrap [prlimit]=util-linux [taskset]=util-linux [setpriv]=util-linux)
missing=()
for cmd in "${!need[@]}"; do
  found=$(command -v "$cmd" 2>/dev/null || true)
  [[ -f "$found" && -x "$found" ]] || missing+=("${need[$cmd]}")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

packages=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ' | sed 's/ $//')
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "make demo: installing $packages (apt-get): the embedded default runs every post-turn check in bubblewrap"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $packages >/dev/null
  exit 0
fi
if [[ "${MEMTRIAL_ALLOW_UNSANDBOXED_CHECK:-}" == 1 ]]; then
  echo "make demo: $packages missing; MEMTRIAL_ALLOW_UNSANDBOXED_CHECK=1: every check runs unsandboxed and every record says so"
  exit 0
fi
echo "make demo: $packages missing: install it (sudo apt-get install $packages), or run a config with sandbox: docker and a Docker engine, or set MEMTRIAL_ALLOW_UNSANDBOXED_CHECK=1 to run checks unsandboxed" >&2
exit 2
