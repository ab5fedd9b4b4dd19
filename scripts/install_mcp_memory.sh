#!/usr/bin/env bash
# Install the MCP knowledge-graph memory server (@modelcontextprotocol/server-memory) from the
# npm registry into <repo>/.memtrial/npm/, pinned, so the mcp-memory adapter can start it offline.
# Idempotent: does nothing when the pinned version is already there. Needs node >= 18 and npm.
set -euo pipefail
VERSION="${MEMTRIAL_MCP_MEMORY_VERSION:-2026.8.31}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX="${MEMTRIAL_NPM_PREFIX:-$ROOT/.memtrial/npm}"
PKG="$PREFIX/node_modules/@modelcontextprotocol/server-memory/package.json"

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "install_mcp_memory: '$tool' is not on PATH; install Node.js >= 18 (apt-get install nodejs npm)" >&2; exit 1; }
done
if [ -f "$PKG" ] && node -e "process.exit(require('$PKG').version === '$VERSION' ? 0 : 1)"; then
  echo "install_mcp_memory: @modelcontextprotocol/server-memory@$VERSION already in $PREFIX"
  exit 0
fi
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund --no-save --loglevel=error \
  "@modelcontextprotocol/server-memory@$VERSION"
echo "install_mcp_memory: installed @modelcontextprotocol/server-memory@$VERSION in $PREFIX"
