#!/usr/bin/env bash
# Install the Claude Code CLI (npm package @anthropic-ai/claude-code), pinned, into
# <repo>/.memtrial/npm-claude/ (or $MEMTRIAL_CLAUDE_PREFIX), for the `claude-code` agent adapter
# and its tests (tests/test_agent_claude_code.py), and print the binary's path on the last line.
# Idempotent: does nothing when the pinned version is already installed there. Needs Node.js and
# npm. The package's postinstall copies the platform's native binary over bin/claude.exe; when
# npm skipped it (install scripts disallowed), it is run here explicitly.
set -euo pipefail
VERSION="2.1.332"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX="${MEMTRIAL_CLAUDE_PREFIX:-$ROOT/.memtrial/npm-claude}"
BIN="$PREFIX/node_modules/.bin/claude"
PKG="$PREFIX/node_modules/@anthropic-ai/claude-code"

installed() {
  [ -x "$BIN" ] && [ "$(DISABLE_AUTOUPDATER=1 "$BIN" --version 2>/dev/null | cut -d' ' -f1)" = "$VERSION" ]
}

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "install_claude_code: '$tool' is not on PATH; install Node.js with npm (apt-get install nodejs npm)" >&2; exit 1; }
done
if installed; then
  echo "install_claude_code: @anthropic-ai/claude-code $VERSION already installed in $PREFIX" >&2
  echo "$BIN"
  exit 0
fi
mkdir -p "$PREFIX"
[ -f "$PREFIX/package.json" ] || echo '{"name": "memtrial-claude-code", "private": true}' > "$PREFIX/package.json"
(cd "$PREFIX" && npm install --no-audit --no-fund --save-exact --loglevel=error "@anthropic-ai/claude-code@$VERSION" >&2)
if ! installed && [ -f "$PKG/install.cjs" ]; then
  (cd "$PKG" && node install.cjs >&2)
fi
installed || { echo "install_claude_code: npm finished but '$BIN --version' does not report $VERSION" >&2; exit 1; }
echo "install_claude_code: installed @anthropic-ai/claude-code $VERSION in $PREFIX" >&2
echo "$BIN"
