/**
 * Every default of the cell in one place, each with why it is what it is.
 * Command-line flags (cell/main.ts) override these; tests pass their own.
 */

import type { StdioSourceConfig } from '../runtime/mcp-client/config.ts';
import { MCP_TOOL_PERMISSIONS } from '../core/permissions.ts';

export type Posture = 'single-cell' | 'multi-cell' | 'sovereign' | 'cloud-enabled';
export const POSTURES: readonly Posture[] = ['single-cell', 'multi-cell', 'sovereign', 'cloud-enabled'];

export interface CellConfig {
  /** Stable id of this cell; tokens carry iss `service://<cellId>`. Generated on first start when not given. */
  cellId: string | null;
  /** Region this cell serves from; keys with allowed_regions must list it. */
  region: string;
  posture: Posture;
  dataDir: string;
  /** PostgreSQL URL of the store (`--store`, `CELL_STORE_URL`); null: the embedded store in dataDir. */
  storeUrl: string | null;
  /** Connections of the PostgreSQL pool (`--store-pool`). */
  storePoolSize: number;
  /**
   * How long a group of journal appends may wait for more to join it (PostgreSQL; cell/runs/group-commit.ts):
   * while this cell drives more runs than are waiting, each of whose steps took five times this at least. 0: never.
   */
  appendLingerMs: number;
  /**
   * Where `pg_dump` and `pg_restore` are (`--pg-bin-dir`); null: the PATH, then the usual install
   * directories. Used once per SQL workspace an earlier version kept in the cells' database, to move it
   * into a database of its own (cell/jobs/legacy-workspaces.ts).
   */
  pgBinDir: string | null;
  host: string;
  port: number;
  /** Public base URL (issuer metadata, DPoP htu). Derived from host:port when null. */
  publicUrl: string | null;
  /** Gateway token bucket per client IP. */
  rate: { capacity: number; refillPerSecond: number };
  /** Socket addresses allowed to set X-Forwarded-For. Empty: X-Forwarded-For is ignored. */
  trustedProxies: string[];
  /** Largest request body accepted, bytes. */
  bodyLimitBytes: number;
  /** Deepest nesting of arrays and objects accepted in a request body. */
  jsonMaxDepth: number;
  /** Grace window during which a rotated key's previous secret still verifies, seconds. */
  keyRotationGraceSeconds: number;
  /** How long archived principals' soft-deleted keys stay recoverable, seconds. */
  retentionSeconds: number;
  /** Standing-agent work quota: most agents that may exist at once. */
  agentQuota: number;
  /** Most bytes one run may store: journal records, distinct step payloads, final output (cell/runs/storage.ts). */
  runStorageCapBytes: number;
  /** Most bytes the runs of one workspace may keep in the store, plus its SQL database file. */
  workspaceQuotaBytes: number;
  /** Most bytes all runs of the cell may keep in the store. */
  runStorageQuotaBytes: number;
  /** Shortest time between two fires of one job definition, seconds (crons firing more often are refused). */
  scheduleMinIntervalSeconds: number;
  /** Most live job definitions that may act as one principal. */
  definitionQuota: number;
  /** OAuth access token lifetime, seconds. */
  accessTokenTtlSeconds: number;
  /** Longest RFC 8693 delegation chain (`act` depth) the cell issues and honours (`--max-delegation-depth`). */
  maxDelegationDepth: number;
  /**
   * Longest lifetime of an edge key bundle, seconds (`--max-key-bundle-ttl`): a device honours the keys of
   * a bundle until it expires, whatever is revoked at the cell meanwhile (docs/edge.md, "Revocation windows").
   */
  maxKeyBundleTtlSeconds: number;
  /**
   * External protected resources (RFC 8707 resource URIs, exact strings) the cell issues tokens for
   * (`--protected-resource`): services that verify the cell's tokens offline against /oauth/jwks.json.
   */
  protectedResources: string[];
  /**
   * This cell's OAuth issuer URL (`--oauth-issuer`), for RFC 8414 clients that require the issuer to be
   * the URL the metadata is fetched from; null: the spec's `service://<group id>` (cell/oauth/settings.ts).
   */
  oauthIssuer: string | null;
  /**
   * RFC 7591 dynamic client registration at `/oauth/register` (`--oauth-dynamic-registration`): a client
   * registers itself, public or confidential, for the authorization code grant only; it holds nothing
   * until a principal consents, then no more than that principal (docs/oauth.md).
   */
  dynamicRegistration: boolean;
  /**
   * The scopes a client that registered itself (dynamic registration) or describes itself (a client ID
   * metadata document) may ever be given (`--oauth-registration-scope`).
   */
  registrationScope: string[];
  /**
   * Client ID Metadata Documents (`--oauth-client-id-metadata on|off`): an `https://` client_id whose
   * document the cell fetches through the egress floor. Always off in the `sovereign` posture (air-gapped).
   */
  clientIdMetadataDocuments: boolean;
  /** Placement: this cell's clearance ceiling and topology labels. */
  clearance: number;
  topology: Record<string, string>;
  /** CIDR ranges (or addresses) of non-public networks tools may reach anyway (runtime/ssrf.ts). */
  egressAllowPrivate: string[];
  /** Group membership (docs/multi-cell.md): how often this cell writes its heartbeat, ms (`--heartbeat-ms`). */
  heartbeatMs: number;
  /** How long this cell's runs stay its own after its last heartbeat, ms (`--lease-ms`); then a peer may take them over. */
  leaseMs: number;
  /**
   * How far this cell's clock may stray from the database's, ms (`--max-clock-skew-ms`): beyond it
   * the cell takes over no run, fires no schedule and reports not-ready (docs/multi-cell.md).
   */
  maxClockSkewMs: number;
  /** False for a one-shot command on a cell's data (`bundle`): it neither joins the group nor heartbeats nor takes runs over. */
  joinGroup: boolean;
  /** Port of the loopback-only metrics listener (`--metrics-port`); null: metrics are not served. */
  metricsPort: number | null;
  /**
   * Whether the cell terminates TLS and verifies client certificates against a
   * client CA (`serve --client-ca`): RFC 8705 (tls_client_auth, certificate-bound
   * tokens) is offered only then. Not a setting: startCell derives it from its TLS options.
   */
  clientCertificates: boolean;
  /**
   * The file of the group's secrets key (32 bytes; provider secrets and signing keys are sealed with it), the
   * same for every cell of a group; null: `<dataDir>/secrets.key` (cell/custody/key-file.ts).
   */
  secretsKeyFile: string | null;
  /** Trace export over OTLP/HTTP (docs/operations.md "Traces"); null: off, and the SDK is never loaded. */
  traces: TracesConfig | null;
  /**
   * The stdio MCP servers whose tools the catalog imports (`--tool-sources FILE`, docs/tools.md): the
   * only place a command the cell starts is named. Never set through the API.
   */
  toolSources: StdioSourceConfig[];
}

/** One stdio source of `--tool-sources` (runtime/mcp-client/config.ts: the same file a device reads). */
export type { StdioSourceConfig };

/** Where spans go and what they may carry (cell/ops/traces-config.ts reads it from flags and OTEL_* variables). */
export interface TracesConfig {
  /** The OTLP/HTTP traces URL (`…/v1/traces`). */
  endpoint: string;
  /** `service.name` of the spans (OTEL_SERVICE_NAME; default `agent-cell`). */
  serviceName: string;
  /** Prompt and completion text on model and tool spans (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT); off by default. */
  captureContent: boolean;
}

export const DEFAULTS: CellConfig = {
  cellId: null,
  region: 'local',
  posture: 'single-cell',
  dataDir: './.cell',
  storeUrl: null,
  // Searched for (PATH, then /usr/lib/postgresql/*/bin and the like): only a workspace of an earlier
  // version needs the tools, once; most cells never run them.
  pgBinDir: null,
  // 10 connections: enough for a cell's concurrent transactions on 2-8 cores;
  // a group of N cells uses N x this many server connections (default max 100).
  storePoolSize: 10,
  // One timer tick: a run whose step takes 5 ms or more waits at most a fifth of it, and one whose model
  // answers in seconds nothing it would notice (docs/storage.md "Group commit").
  appendLingerMs: 1,
  host: '127.0.0.1',
  port: 8080,
  publicUrl: null,
  // 600 requests of burst per client IP, refilled at 100/s: a busy script is
  // never throttled, a runaway loop is within seconds.
  rate: { capacity: 600, refillPerSecond: 100 },
  trustedProxies: [],
  // 1 MiB: every documented body is far smaller; larger bodies are refused.
  bodyLimitBytes: 1024 * 1024,
  // 64: the deepest documented body (a notebook cell's input inside a spec) is a
  // handful of levels; thousands of levels overflow the stack of every recursive
  // walker downstream (validation, canonical JSON, storage), so the gateway
  // refuses them before anything parses the body.
  jsonMaxDepth: 64,
  // 24 hours: long enough to roll a secret through a fleet, short enough to bound exposure.
  keyRotationGraceSeconds: 24 * 3600,
  // 30 days of recovery for an archived owner's keys.
  retentionSeconds: 30 * 24 * 3600,
  agentQuota: 100,
  // 1 MiB per run (journal, payloads, output): as large as a request body; a
  // run's product is meant to be read by a person or the next step, not to move
  // bulk data (a job writes that to its workspace database instead). The output
  // is kept twice (last step, run row), so a run keeps an output of ~512 KiB.
  runStorageCapBytes: 1024 * 1024,
  // 128 MiB per workspace (its runs and its SQL database file): thousands of
  // ordinary runs, while four full workspaces cannot exhaust the cell.
  workspaceQuotaBytes: 128 * 1024 * 1024,
  // 512 MiB for all runs of the cell: the embedded store holds the whole
  // database in memory (sql.js, WebAssembly: 4 GiB at most) and a checkpoint
  // exports a copy of it, which failed for good past 2 GiB. Workspace ids are
  // the caller's choice, so only a cell-wide figure bounds the store.
  runStorageQuotaBytes: 512 * 1024 * 1024,
  // 60 s: a schedule is for periodic work, not a loop; an every-second cron is
  // 86,400 runs a day from one request. Continuous work is a run, not a schedule.
  scheduleMinIntervalSeconds: 60,
  // 100 live definitions per principal: far above what a team schedules by hand,
  // low enough that one principal (or a leaked key of it) cannot flood the
  // scheduler; a service that needs more gets a higher value from its operator.
  definitionQuota: 100,
  // 10 minutes: short-lived, as the spec asks; clients refresh with their grant.
  accessTokenTtlSeconds: 600,
  // Three hops (a person, an agent, a sub-agent, a service it calls): each hop narrows, and a longer
  // chain is harder for a resource server to reason about than it is useful (docs/oauth.md).
  maxDelegationDepth: 3,
  // 30 days: a key revoked at the cell is honoured by a device until its bundle expires, so this bounds
  // that window for every bundle anyone issues; a site that carries bundles less often than monthly
  // raises it (at most 365 days), one that can carry them weekly keeps the 7-day default lifetime.
  maxKeyBundleTtlSeconds: 30 * 24 * 3600,
  // None: the cell issues tokens only for its group's APIs and its devices until an operator names a service.
  protectedResources: [],
  // The spec's `service://<group id>`: an operator opts in to a URL issuer for clients that need one.
  oauthIssuer: null,
  // Off: a client that registers itself is named by nobody; an operator who wants MCP clients to
  // register on their own turns it on (metadata documents, below, need no registration at all).
  dynamicRegistration: false,
  // What the MCP endpoint's tools need (core/permissions.ts MCP_TOOL_PERMISSIONS), and no more: such a
  // client gets at most this, and only what a consenting principal holds of it.
  registrationScope: [...MCP_TOOL_PERMISSIONS],
  // On (but in the sovereign posture): MCP clients name themselves by URL; the document is fetched
  // through the same network floor as tools (no private address unless --egress-allow-private), and
  // the client still holds nothing until a principal consents.
  clientIdMetadataDocuments: true,
  clearance: 0,
  topology: {},
  // None: no tool reaches loopback, private or link-local addresses (SSRF) unless an
  // operator names the range for the whole cell, whatever an egress allowlist says.
  egressAllowPrivate: [],
  // One heartbeat write per cell every 500 ms (never one per run): a few writes a second for a
  // whole group. A run's lease is its owner's heartbeat: 2 s without one and a peer takes the
  // run over, so takeover after a crash lands within lease + one heartbeat (< 3 s), while a
  // cell that misses three beats in a row under load is still not taken over.
  heartbeatMs: 500,
  leaseMs: 2000,
  // Leases are judged on the database's clock; a cell whose own clock strays further than this
  // from it would fire schedules early or late, and its tokens' times would be off: it stands down.
  maxClockSkewMs: 2000,
  joinGroup: true,
  clientCertificates: false,
  // Off: metrics name routes and the cell's load, so an operator opts in to a
  // loopback-only listener for a local scraper (docs/operations.md).
  metricsPort: null,
  // Off: spans name routes, crews and agents, and export is a network destination
  // the operator chooses (OTEL_EXPORTER_OTLP_ENDPOINT or --otlp-endpoint).
  traces: null,
  // None: a cell alone keeps its key in its data directory. A group shares its secrets in
  // the store, so its cells must share the key: each is given the same file.
  secretsKeyFile: null,
  // None: the cell starts no process of its own for tools unless the operator names it in a file.
  toolSources: [],
};
