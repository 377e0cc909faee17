#!/usr/bin/env bash
# `make cluster`: a group of three cells on one PostgreSQL 15 server, on loopback, to try
# multi-cell (docs/multi-cell.md). Ports are picked free; data directories and the database
# live in a temp dir; everything is printed. Ctrl-C (or SIGTERM) stops the three cells and
# the server and deletes the temp dir.
#
#   scripts/cluster.sh [N]     N cells (default 3)
#
# Extra flags for every cell: CELL_FLAGS="--heartbeat-ms 200 --lease-ms 1000" scripts/cluster.sh
set -euo pipefail
cd "$(dirname "$0")/.."

N="${1:-3}"
BIN=dist/cell.mjs
[[ -f "$BIN" ]] || { echo "cluster: $BIN is missing: run 'node scripts/build.mjs' (make cluster does)" >&2; exit 1; }

ROOT="$(mktemp -d "${TMPDIR:-/tmp}/cell-cluster-XXXXXX")"
PG_DIR=""
PIDS=()

cleanup() {
  trap - INT TERM EXIT
  echo
  echo "cluster: stopping…"
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ -n "$PG_DIR" ]]; then scripts/pg-test-server.sh stop "$PG_DIR" >/dev/null 2>&1 || true; fi
  rm -rf "$ROOT"
  echo "cluster: stopped"
}
trap cleanup INT TERM EXIT

# --durable: PostgreSQL's own defaults (fsync on), as a real deployment runs it.
out="$(scripts/pg-test-server.sh start --durable)"
URL="$(sed -n 's/^CELL_TEST_PG_URL=//p' <<<"$out")"
PG_DIR="$(sed -n 's/^CELL_TEST_PG_DIR=//p' <<<"$out")"
echo "cluster: PostgreSQL 15 on $URL (data in $PG_DIR)"

# The provider secrets key must be the same on every cell of a group (docs/multi-cell.md).
KEY="$ROOT/secrets.key"

# A cell's URL, from the banner line of its log (a JSON line: {"url":"http://…",…}).
url_of() {
  grep -m1 -o '"url":"http[^"]*"' "$ROOT/cell-$1/log" | sed 's/^"url":"//; s/"$//'
}
head -c 32 /dev/urandom >"$KEY"
chmod 600 "$KEY"

for i in $(seq 1 "$N"); do
  dir="$ROOT/cell-$i"
  mkdir -p "$dir"
  cp "$KEY" "$dir/secrets.key"
  # shellcheck disable=SC2086
  node "$BIN" serve --port 0 --data "$dir" --store "$URL" --posture multi-cell --cell-id "cell-$i" ${CELL_FLAGS:-} \
    >"$dir/log" 2>&1 &
  PIDS+=("$!")
  for _ in $(seq 1 200); do
    grep -q 'listening on' "$dir/log" && break
    kill -0 "${PIDS[-1]}" 2>/dev/null || { echo "cluster: cell-$i did not start:" >&2; cat "$dir/log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q 'listening on' "$dir/log" || { echo "cluster: cell-$i did not start in time" >&2; cat "$dir/log" >&2; exit 1; }
  echo "cluster: cell-$i listening on $(url_of "$i")   (log: $dir/log)"
done

# The owner's key: the first cell to start bootstrapped the group's owner and wrote it (mode 0600).
ADMIN_KEY=""
KEY_FILE=""
for f in "$ROOT"/cell-*/bootstrap-admin.key; do [[ -s "$f" ]] && { ADMIN_KEY="$(cat "$f")"; KEY_FILE="$f"; break; }; done
[[ -n "$ADMIN_KEY" ]] || { echo "cluster: no cell wrote a bootstrap key" >&2; exit 1; }
# Checked on every cell before it is named: one group, one owner, one key.
for i in $(seq 1 "$N"); do
  url="$(url_of "$i")"
  code="$(node -e 'fetch(process.argv[1] + "/api/public/v1/admin/whoami", { headers: { authorization: "Bearer " + process.argv[2] } }).then((r) => console.log(r.status), () => console.log("unreachable"))' "$url" "$ADMIN_KEY")"
  [[ "$code" == "200" ]] || { echo "cluster: cell-$i ($url) refused the owner key ($code)" >&2; exit 1; }
  echo "cluster: cell-$i $url accepts the owner key"
done
# The same rule as `serve` (docs/operations.md, "Start-up"): the secret is shown to a person at a terminal only;
# a pipe or a file (a CI log, a log shipper) is given the file that holds it.
if [[ -t 1 ]]; then
  echo "cluster: owner key (every cell accepts it; also in $KEY_FILE): $ADMIN_KEY"
  echo "cluster: try  KEY=$ADMIN_KEY; curl -s -H \"authorization: Bearer \$KEY\" <url>/api/public/v1/admin/cells"
else
  echo "cluster: owner key (every cell accepts it) in $KEY_FILE (mode 0600; not printed: stdout is not a terminal)"
  echo "cluster: try  KEY=\$(cat $KEY_FILE); curl -s -H \"authorization: Bearer \$KEY\" <url>/api/public/v1/admin/cells"
fi
echo "cluster: Ctrl-C stops all of them"
wait
