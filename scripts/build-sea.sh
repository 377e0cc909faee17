#!/usr/bin/env bash
# Builds the single-file edge program as a Node single executable application (SEA), with V8's code
# cache of the program (useCodeCache: no compile at start; the cache is the building node's, which it embeds):
#   dist/edge.cjs  edge/bin.ts (edge/main.ts) bundled as CommonJS (SEA runs CommonJS), core and bundles included
#   dist/edge      a copy of this node binary (stripped when `strip` exists) with the blob injected
# The local model runtime (edge-runtime/node_modules/node-llama-cpp) is the only part loaded from
# beside the binary at run time; it is never bundled.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p dist

node scripts/build.mjs --edge-sea

cat > dist/sea-config.json <<JSON
{ "main": "dist/edge.cjs", "output": "dist/edge.blob", "disableExperimentalSEAWarning": true, "useCodeCache": true }
JSON
node --experimental-sea-config dist/sea-config.json

rm -f dist/edge
cp "$(command -v node)" dist/edge
chmod u+w dist/edge
if command -v strip >/dev/null 2>&1; then strip dist/edge; fi
npx postject dist/edge NODE_SEA_BLOB dist/edge.blob \
  --sentinel-fuse NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2 2>&1 | { grep -v -e "Can.t find string offset" -e "Start injection" -e "Injection done" || true; }
rm -f dist/edge.blob dist/sea-config.json
echo "built dist/edge ($(du -h dist/edge | cut -f1))"
