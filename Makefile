# The two commands a new user needs: `make run` and `make test`.
SHELL := /bin/bash
# The project's Node (scripts/node.sh): the machine's when it is the pinned LTS major, otherwise the
# pinned, checksummed release fetched once into .node/. Every recipe (npm, npx, node) runs on it.
NODE := $(shell scripts/node.sh)
ifeq ($(NODE),)
$(error scripts/node.sh found no Node to use)
endif
export PATH := $(patsubst %/,%,$(dir $(NODE))):$(PATH)
CELL_PORT ?= 8080
CELL_DATA ?= ./.cell
# The suite's runner (scripts/run-tests.mjs): node:test over the files, two at once, each file's process ending
# with its tests and hooks rather than with its fixtures' idle sockets and timers.
NODE_TEST := node --import tsx scripts/run-tests.mjs --concurrency 2
# The suite's runs: the usual report, then the slowest files and their share of the time (scripts/test-times.mjs;
# every file's time also in test/artifacts/test-times-<run>.tsv).
NODE_TEST_TIMED = $(NODE_TEST) --timed

.PHONY: node install build edge edge-runtime typecheck lint fmt check unit test test-embedded test-postgres pg-test-files test-compat run bench demo browser-deps metrics-deps promtool-deps readme-deps faketime-deps attest-deps clean

# The path of the project's Node, for scripts and operators who run dist/cell.mjs themselves:
#   $$(make -s node) dist/cell.mjs serve --port 8080 --data ./.cell
node:
	@echo $(NODE)

# npm ci only when the lock file changed since the last install.
node_modules/.install-stamp: package-lock.json
	npm ci --no-audit --no-fund
	touch $@

install: node_modules/.install-stamp

# dist/cell.mjs (with the operator console built from console/ inside) and dist/edge.mjs (esbuild),
# then the single executable dist/edge (Node SEA). Each is rebuilt only when a file it is built
# from changed (every file of the program's source folders, the lock file, the build scripts).
BUILD_SOURCES = $(shell find core cell runtime bundles edge console -type f -not -path '*/node_modules/*' -not -path '*/dist/*') \
	package-lock.json scripts/build.mjs
dist/cell.mjs: node_modules/.install-stamp $(BUILD_SOURCES)
	node scripts/build.mjs

dist/edge: node_modules/.install-stamp $(BUILD_SOURCES) scripts/build-sea.sh
	scripts/build-sea.sh

build: dist/cell.mjs dist/edge

# The local model runtime the edge (and a cell's local-signed provider) loads from beside the
# program: node-llama-cpp, CPU only, ~85 MB, kept out of the root install.
edge-runtime/node_modules/.install-stamp: edge-runtime/package.json edge-runtime/package-lock.json
	npm install --prefix edge-runtime --omit=optional --no-audit --no-fund
	touch $@

edge-runtime: edge-runtime/node_modules/.install-stamp

edge: build edge-runtime

typecheck: install
	npx tsc --noEmit -p tsconfig.json
	npx tsc --noEmit -p core/tsconfig.json
	npx tsc --noEmit -p console/tsconfig.json

# Debian's chromium for the browser tests; installed when missing and we are root.
browser-deps:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null; \
	  else \
	    echo "chromium is missing: run 'sudo apt-get install -y chromium' (Debian) for the browser tests" >&2; exit 1; \
	  fi; \
	fi

# Debian's libfaketime, with which the fault suite (test/cell/cluster/faults/) runs cells with a skewed
# clock; installed when missing and we are root.
faketime-deps:
	@if [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ]; then \
	  if [ "$$(id -u)" = "0" ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime) >/dev/null; \
	  else \
	    echo "faketime is missing: run 'sudo apt-get install -y faketime' (Debian) for the fault suite" >&2; exit 1; \
	  fi; \
	fi

# curl and jq, with which test/e2e/readme.test.ts runs the README's walk-through as written;
# installed when missing and we are root.
readme-deps:
	@if ! command -v curl >/dev/null 2>&1 || ! command -v jq >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl jq) >/dev/null; \
	  else \
	    echo "curl or jq is missing: run 'sudo apt-get install -y curl jq' (Debian) for the README test" >&2; exit 1; \
	  fi; \
	fi

# The Prometheus project's own exposition-format parser (Debian's python3-prometheus-client), with
# which the metrics tests read what the cell serves; installed when missing and we are root.
metrics-deps:
	@if ! /usr/bin/python3 -c 'import prometheus_client.parser' >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-prometheus-client) >/dev/null; \
	  else \
	    echo "python3-prometheus-client is missing: run 'sudo apt-get install -y python3-prometheus-client' for the metrics tests" >&2; exit 1; \
	  fi; \
	fi

# Debian's in-toto, python3-securesystemslib and ruby-cose, the independent verifiers with which
# test/cell/receipts/independent.test.ts checks a run's DSSE attestation (test/attestation/verify_dsse.py)
# and its SCITT signed statement (test/attestation/verify_cose.rb); installed when missing and we are root.
attest-deps:
	@if ! /usr/bin/python3 -c 'import securesystemslib.signer, in_toto' >/dev/null 2>&1 || ! ruby -e 'require "cose"' >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq in-toto python3-securesystemslib ruby-cose) >/dev/null; \
	  else \
	    echo "in-toto, python3-securesystemslib or ruby-cose is missing: run 'sudo apt-get install -y in-toto python3-securesystemslib ruby-cose' for the attestation tests" >&2; exit 1; \
	  fi; \
	fi

# Prometheus's own linter (promtool, in Debian's prometheus package: only its binaries are used, no
# server is started), with which test/e2e/metrics-promtool.test.ts checks what a live cell serves.
promtool-deps:
	@if ! command -v promtool >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus) >/dev/null; \
	  else \
	    echo "promtool is missing: run 'sudo apt-get install -y prometheus' (Debian) for the metrics tests" >&2; exit 1; \
	  fi; \
	fi

# Lint and format check (biome.json: the layering's import rules, the formatter's width).
lint: install
	npx biome check --error-on-warnings .
	node --import tsx scripts/lint-faces.ts

# Formats and applies safe lint fixes in place.
fmt: install
	npx biome check --write .

# Node 20's test runner does not expand globs: list the files.
TEST_FILES = $(shell find test -name '*.test.ts' -not -path '*/node_modules/*' | sort)
# Files that spend their time waiting on the clock, not on a core: each run alone used 0.1-0.45 of one core's
# CPU over its wall time (the whole machine's, /proc/stat: PostgreSQL and the cells included), where the rest of
# the suite keeps both cores busy. Each takes a lane of its own beside the two others (scripts/run-tests.mjs
# --beside), one such file at a time, rather than holding one of the two while it waits: dpop-prune ages proofs
# 50 s, pg-stop and store-outage hold PostgreSQL down, group-runs waits twice for PostgreSQL's statistics,
# group-schedules and step-policy wait on cron times and backoffs, the MCP conformance suite on its own timers.
WAITING_FILES = test/cell/cluster/faults/dpop-prune.test.ts test/cell/cluster/faults/pg-stop.test.ts \
	test/e2e/group-runs.test.ts test/e2e/mcp-conformance.test.ts test/e2e/group-schedules.test.ts \
	test/cell/cluster/faults/store-outage.test.ts test/edge/step-policy.e2e.test.ts
# Node's module compile cache (V8 code cache on disk, NODE_COMPILE_CACHE) for the suite's processes: the suite
# starts hundreds of node processes (cells, edges, CLIs, test files), and each compiled the 7 MB bundle or the
# TypeScript sources afresh (a cell's --help: 0.28 s of CPU, 0.20 s with the cache). A cache that does not
# match its source is not used, so a stale or damaged one only costs the compile it would have saved.
TEST_COMPILE_CACHE ?= $(CURDIR)/.cache/node-compile
# $(call beside,FILES): FILES as the runner's arguments, the waiting ones in the lane beside the others.
beside = $(foreach f,$(filter $(WAITING_FILES),$(1)),--beside $(f)) $(filter-out $(WAITING_FILES),$(1))
# Pure code: the core, the bundle formats, the console's models, the layering, the suite's timing reporter and
# its choice of files for PostgreSQL.
UNIT_FILES = $(shell find test/core test/bundles test/console -name '*.test.ts' | sort) test/layering.test.ts test/test-times.test.ts test/test-engines.test.ts
# The suite again with every cell on PostgreSQL, for the files whose outcome can depend on the store:
# those that start a cell (in process or as a process) and assert what it wrote or reads back.
# The rule for leaving a file out: pure code (core, bundles, console models, layering, runtime); the
# store's own tests (each file already runs on both engines, or is about one engine); files on
# PostgreSQL whatever the run (those that start a group: test/e2e/group-*, run-*outage, run-conflicts,
# sql-step-outage, oauth-issuer; the fault suite, group-secrets):
# they run once; the edge program alone, or judging beside a cell whose answers are tested on
# PostgreSQL in test/cell; and what a cell answers before or without the store: static pages and
# assets (docs page, console), the gateway's body gates and headers (gateway-wire, gateway-helpers), the
# route layer's 405 and undeclared-query refusals (route-shape), the OpenAPI surface (its reasons too) and the
# client generated from it; and the browser tests (test/browser/): what a page shows is the API's answers,
# and each route a page calls is tested on PostgreSQL in test/cell, so the pages run once, on the embedded
# store. A new file that starts a cell runs here unless it fits one of these.
# A file that reaches neither test/helpers/inproc.ts nor cell-process.ts nor CELL_TEST_STORE runs the same on
# both engines and is left out too (test/test-engines.test.ts names any such file still in the run): the
# custody seals, the lean validation and request metrics (pure code), traces-off (its fixture starts an
# embedded cell), the demo (scripts/demo.ts starts its own embedded cells), every command's --help and bad
# options (no store is opened), the edge program's own files.
PG_SKIP_FILES = test/core/% test/bundles/% test/console/% test/layering.test.ts test/test-times.test.ts test/test-engines.test.ts \
	test/runtime/% test/cell/custody/seal.test.ts test/cell/custody/sealed-jwk.test.ts test/cell/http/lean-validation.test.ts \
	test/cell/ops/request-metrics.test.ts test/cell/ops/traces-off.test.ts test/e2e/demo.test.ts test/e2e/cli-help.test.ts \
	test/edge/bundle-size.test.ts test/edge/graph-matches.test.ts test/edge/state.test.ts test/edge/spending.test.ts test/edge/step-policy.e2e.test.ts \
	test/cell/store/% test/e2e/group-% test/cell/cluster/faults/% test/cell/ai/group-secrets.test.ts \
	test/e2e/run-conflicts.test.ts test/e2e/run-outage.test.ts test/e2e/run-start-outage.test.ts \
	test/e2e/sql-step-outage.test.ts test/e2e/oauth-issuer.test.ts \
	test/cell/ai/openai-client.test.ts test/cell/ai/posture.test.ts test/cell/ai/secrets.test.ts \
	test/cell/tools/catalog.test.ts test/cell/tools/ssrf.test.ts test/cell/oauth/scope.test.ts \
	test/cell/jobs/sandbox/pool.test.ts test/cell/jobs/sandbox/pg-statements.test.ts \
	test/edge/gateway-uri.test.ts test/edge/load.test.ts test/edge/local-model.test.ts test/edge/log.e2e.test.ts \
	test/edge/offline.test.ts test/edge/replay-log.test.ts test/edge/agreement.test.ts test/edge/tokens.e2e.test.ts \
	test/edge/device-tools.test.ts test/edge/device-http.test.ts test/edge/cancel.test.ts test/edge/local-tool-calls.test.ts \
	test/edge/mcp-stdio.test.ts \
	test/browser/% test/cell/console/% test/cell/discovery/curate.test.ts \
	test/cell/discovery/surface.test.ts test/cell/discovery/bundle-assets.test.ts test/cell/discovery/typed-client.test.ts \
	test/cell/http/json-depth.test.ts test/cell/http/json-duplicate-keys.test.ts test/cell/http/deny-by-default.test.ts \
	test/e2e/keep-alive.test.ts test/e2e/gateway-wire.test.ts test/edge/gateway-helpers.test.ts test/cell/http/route-shape.test.ts \
	test/cell/discovery/reasons.test.ts \
	test/edge/approvals.test.ts test/edge/approvals-tools.test.ts \
	test/edge/agreement-crew.e2e.test.ts test/cell/runs/sse-sink.test.ts
PG_TEST_FILES = $(filter-out $(PG_SKIP_FILES),$(TEST_FILES))

# The files of the PostgreSQL run, one a line (test/test-engines.test.ts checks each can tell the engines apart).
pg-test-files:
	@printf '%s\n' $(PG_TEST_FILES)

unit: install
	$(NODE_TEST) $(UNIT_FILES)

# Typecheck, lint, unit tests: under a minute.
check: typecheck lint unit

# The whole suite on the embedded store, then the store-dependent suites on PostgreSQL 15
# (scripts/pg-test-server.sh starts a throw-away server, installed with apt when missing and root).
test: install typecheck lint build edge-runtime browser-deps metrics-deps promtool-deps readme-deps faketime-deps attest-deps
	$(MAKE) --no-print-directory test-embedded
	$(MAKE) --no-print-directory test-postgres

# The store's own tests use PostgreSQL in this run too (one server for all of them).
test-embedded:
	scripts/pg-test-server.sh run -- env NODE_COMPILE_CACHE=$(TEST_COMPILE_CACHE) TEST_TIMES_FILE=test/artifacts/test-times-embedded.tsv \
	  $(NODE_TEST_TIMED) $(call beside,$(TEST_FILES))

test-postgres:
	scripts/pg-test-server.sh run -- env NODE_COMPILE_CACHE=$(TEST_COMPILE_CACHE) CELL_TEST_STORE=postgres \
	  TEST_TIMES_FILE=test/artifacts/test-times-postgres.tsv $(NODE_TEST_TIMED) $(call beside,$(PG_TEST_FILES))

# The same suite on Node 22 and 26, the supported majors beside the pinned 24 (binaries from the npm registry;
# not part of `make test`). TEST_FILES="…" runs some files only.
test-compat: install build edge-runtime browser-deps
	scripts/test-node-versions.sh

# The cell alone (the edge binary is not needed to serve), rebuilt only when its sources changed.
# Flags pass through: make run CELL_ARGS="--clearance 3 --log-format pretty"
run: dist/cell.mjs
	node dist/cell.mjs serve --port $(CELL_PORT) --data $(CELL_DATA) $(CELL_ARGS)

bench: build edge-runtime bench-peers-deps
	node --import tsx bench/run.ts

# The peers measured beside the cell (DBOS, LangGraph): a package of their own under bench/peers,
# installed for benchmarks only (never by run or test).
.PHONY: bench-peers-deps bench-peers
bench-peers-deps:
	npm ci --prefix bench/peers --no-audit --no-fund

# Just the peers' rows, short: make bench-peers (BENCH_ARGS= for the full rounds).
BENCH_ARGS ?= --short
bench-peers: build bench-peers-deps
	node --import tsx bench/peers.bench.ts $(BENCH_ARGS)

demo: build edge-runtime
	node --import tsx scripts/demo.ts

# Three cells on one throw-away PostgreSQL 15 server, on loopback (docs/multi-cell.md); Ctrl-C stops all.
.PHONY: cluster
cluster: build
	scripts/cluster.sh

clean:
	rm -rf dist node_modules edge-runtime/node_modules .node-versions .cell test/artifacts

# A throw-away PostgreSQL 15 server (scripts/pg-test-server.sh: installed with apt when missing
# and root) for the duration of one command, its URL exported as CELL_TEST_PG_URL, e.g.
#   make with-pg CMD="node --import tsx --test test/cell/store/contract.test.ts"
# Test files then create their own database on it (test/helpers/postgres.ts).
.PHONY: with-pg
with-pg: install
	@test -n "$(CMD)" || { echo 'usage: make with-pg CMD="command to run"' >&2; exit 2; }
	scripts/pg-test-server.sh run -- bash -c '$(CMD)'
