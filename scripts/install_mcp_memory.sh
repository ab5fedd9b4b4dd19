#!/usr/bin/env bash
# Install the MCP knowledge-graph memory server (@modelcontextprotocol/server-memory) from the npm
# registry into <repo>/.memtrial/npm/ with `npm ci`, exactly as scripts/mcp-memory/package-lock.json
# pins it, so the mcp-memory adapter can start it offline afterwards.
# Idempotent: does nothing when that lock file is already installed. Needs Node.js >= 20 and npm.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SPEC="$ROOT/scripts/mcp-memory"
PREFIX="${MEMTRIAL_NPM_PREFIX:-$ROOT/.memtrial/npm}"
ENTRY="$PREFIX/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
STAMP="$PREFIX/.installed-lock.sha256"

for tool in node npm sha256sum; do
  command -v "$tool" >/dev/null || { echo "install_mcp_memory: '$tool' is not on PATH; install Node.js >= 20 with npm (apt-get install nodejs npm)" >&2; exit 1; }
done
WANT="$(sha256sum "$SPEC/package-lock.json" | cut -d' ' -f1)"
if [ -f "$ENTRY" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  echo "install_mcp_memory: already installed in $PREFIX"
  exit 0
fi
mkdir -p "$PREFIX"
cp "$SPEC/package.json" "$SPEC/package-lock.json" "$PREFIX/"
(cd "$PREFIX" && npm ci --no-audit --no-fund --loglevel=error)
[ -f "$ENTRY" ] || { echo "install_mcp_memory: npm ci finished but $ENTRY is missing" >&2; exit 1; }
echo "$WANT" > "$STAMP"
echo "install_mcp_memory: installed $(node -p "require('$PREFIX/node_modules/@modelcontextprotocol/server-memory/package.json').version") in $PREFIX"
