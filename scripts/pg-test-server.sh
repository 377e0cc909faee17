#!/usr/bin/env bash
# A throw-away PostgreSQL 15 server for tests and benchmarks, on a free loopback port.
#
#   scripts/pg-test-server.sh start [--durable]    start one; prints CELL_TEST_PG_URL=… and CELL_TEST_PG_DIR=…
#   scripts/pg-test-server.sh stop DIR             stop it and delete DIR
#   scripts/pg-test-server.sh restart-immediate DIR  `pg_ctl restart -m immediate` (a crash of the server)
#   scripts/pg-test-server.sh stop-immediate DIR   `pg_ctl stop -m immediate` (the server crashes; DIR kept)
#   scripts/pg-test-server.sh start-again DIR      start it again on the same port (after stop-immediate)
#   scripts/pg-test-server.sh run [--durable] -- CMD [ARGS…]
#                                                  start, run CMD with CELL_TEST_PG_URL exported, stop;
#                                                  exits with CMD's status
#
# The server runs as the `postgres` user when we are root (PostgreSQL refuses to run as root), else
# as the current user, in a temp dir that user owns. It trusts loopback connections (user postgres,
# no password): it is for tests only. Without --durable it runs with fsync=off (fast; a crash of the
# machine may lose data, a crash of a process does not); --durable keeps PostgreSQL's defaults
# (fsync=on, synchronous_commit=on, full_page_writes=on) for the durability tests.
# When PostgreSQL 15 is missing it is installed with apt-get when we are root; otherwise the script
# says how to install it and exits 1.
set -euo pipefail

PG_VERSION=15

die() { echo "pg-test-server: $*" >&2; exit 1; }

pg_bindir() {
  local d
  for d in "/usr/lib/postgresql/$PG_VERSION/bin" "$(pg_config --bindir 2>/dev/null || true)"; do
    if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]]; then echo "$d"; return 0; fi
  done
  return 1
}

ensure_installed() {
  if pg_bindir >/dev/null; then return 0; fi
  if [[ "$(id -u)" != "0" ]]; then
    die "PostgreSQL $PG_VERSION is not installed. Install it with 'sudo apt-get install -y postgresql-$PG_VERSION' (Debian), or run as root to let this script do it."
  fi
  echo "pg-test-server: installing postgresql-$PG_VERSION with apt-get…" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-$PG_VERSION" "postgresql-client-$PG_VERSION") >&2 \
    || die "apt-get install postgresql-$PG_VERSION failed"
  pg_bindir >/dev/null || die "postgresql-$PG_VERSION installed but initdb/pg_ctl not found"
}

# Runs a command as the server's user: postgres when we are root, else ourselves.
as_owner() {
  if [[ "$(id -u)" == "0" ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

cmd_start() {
  local durable=0
  [[ "${1:-}" == "--durable" ]] && durable=1
  ensure_installed
  local bin dir
  bin="$(pg_bindir)"
  dir="$(mktemp -d "${TMPDIR:-/tmp}/cell-pg.XXXXXX")"
  chmod 0755 "$dir"
  if [[ "$(id -u)" == "0" ]]; then
    id postgres >/dev/null 2>&1 || die "no 'postgres' user (the PostgreSQL package creates it)"
    chown postgres: "$dir"
  fi
  cd "$dir"
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; rm -rf "$dir"; die "initdb failed"; }
  # PG_EXTRA_SETTINGS: more "-c name=value" settings (test/helpers/postgres.ts startPgServer `settings`).
  # shellcheck disable=SC2206
  local settings=(-c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_buffers=64MB ${PG_EXTRA_SETTINGS:-})
  if [[ "$durable" == "0" ]]; then
    settings+=(-c fsync=off -c synchronous_commit=off -c full_page_writes=off)
  fi
  local port attempt
  for attempt in 1 2 3 4 5; do
    port="$(free_port)"
    if as_owner "$bin/pg_ctl" start -w -t 60 -D "$dir/data" -l "$dir/server.log" \
        -o "-p $port -k $dir ${settings[*]}" >"$dir/pg_ctl.log" 2>&1; then
      echo "$port" >"$dir/port"
      echo "-p $port -k $dir ${settings[*]}" >"$dir/opts"
      echo "CELL_TEST_PG_URL=postgres://postgres@127.0.0.1:$port/postgres"
      echo "CELL_TEST_PG_DIR=$dir"
      return 0
    fi
    if ! grep -q "could not bind\|Address already in use" "$dir/server.log" 2>/dev/null; then break; fi
  done
  cat "$dir/pg_ctl.log" "$dir/server.log" >&2 2>/dev/null || true
  rm -rf "$dir"
  die "the server did not start"
}

cmd_stop() {
  local dir="${1:?stop needs the server directory}"
  [[ -d "$dir/data" ]] || die "$dir is not a test server directory"
  local bin
  bin="$(pg_bindir)" || die "PostgreSQL $PG_VERSION is not installed"
  (cd "$dir" && as_owner "$bin/pg_ctl" stop -m fast -w -t 60 -D "$dir/data" >/dev/null 2>&1) || true
  rm -rf "$dir"
}

cmd_restart_immediate() {
  local dir="${1:?restart-immediate needs the server directory}"
  local bin
  bin="$(pg_bindir)" || die "PostgreSQL $PG_VERSION is not installed"
  (cd "$dir" && as_owner "$bin/pg_ctl" restart -m immediate -w -t 60 -D "$dir/data" -l "$dir/server.log" >/dev/null) \
    || { tail -n 20 "$dir/server.log" >&2; die "restart failed"; }
}

cmd_stop_immediate() {
  local dir="${1:?stop-immediate needs the server directory}"
  local bin
  bin="$(pg_bindir)" || die "PostgreSQL $PG_VERSION is not installed"
  (cd "$dir" && as_owner "$bin/pg_ctl" stop -m immediate -w -t 60 -D "$dir/data" >/dev/null) || die "stop failed"
}

cmd_start_again() {
  local dir="${1:?start-again needs the server directory}"
  local bin
  bin="$(pg_bindir)" || die "PostgreSQL $PG_VERSION is not installed"
  (cd "$dir" && as_owner "$bin/pg_ctl" start -w -t 60 -D "$dir/data" -l "$dir/server.log" -o "$(cat "$dir/opts")" >/dev/null) \
    || { tail -n 20 "$dir/server.log" >&2; die "start failed"; }
}

cmd_run() {
  local flags=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do flags+=("$1"); shift; done
  [[ "${1:-}" == "--" ]] && shift
  [[ $# -gt 0 ]] || die "run needs a command after --"
  local out url dir
  out="$(cmd_start "${flags[@]}")"
  url="$(sed -n 's/^CELL_TEST_PG_URL=//p' <<<"$out")"
  dir="$(sed -n 's/^CELL_TEST_PG_DIR=//p' <<<"$out")"
  RUN_DIR="$dir"
  trap 'cmd_stop "$RUN_DIR"' EXIT
  echo "pg-test-server: PostgreSQL $PG_VERSION on $url" >&2
  local status=0
  CELL_TEST_PG_URL="$url" CELL_TEST_PG_DIR="$dir" "$@" || status=$?
  return "$status"
}

case "${1:-}" in
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  restart-immediate) shift; cmd_restart_immediate "$@" ;;
  stop-immediate) shift; cmd_stop_immediate "$@" ;;
  start-again) shift; cmd_start_again "$@" ;;
  run) shift; cmd_run "$@" ;;
 *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
