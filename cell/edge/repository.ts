/**
 * Every SQL statement of the edge module: registered devices, the bundle
 * version counters (one per bundle type, shared by a group of cells, so
 * versions stay monotonic across it), and journals carried back from devices.
 */
import { count, num, numOrNull, str, strOrNull } from '../store/decode.ts';
import type { Reader, Row, Tx } from '../store/types.ts';

/** A device's state: bundles, tokens and journal imports only for an active one; a deleted one is kept, not listed. */
export const DEVICE_STATUSES = ['active', 'disabled', 'deleted'] as const;
export type DeviceStatus = (typeof DEVICE_STATUSES)[number];

export interface DeviceRow {
  device_id: string;
  name: string;
  public_jwk: string;
  created_at: number;
  created_by: string;
  status: DeviceStatus;
  /** When, and by whom, the status last changed (null: never since registration). */
  status_at: number | null;
  status_by: string | null;
}

const DEVICE_COLUMNS = 'device_id, name, public_jwk, created_at, created_by, status, status_at, status_by';

function deviceStatus(r: Row): DeviceStatus {
  const s = str(r, 'status');
  if (!(DEVICE_STATUSES as readonly string[]).includes(s)) throw new TypeError(`edge_devices.status: unknown status ${s}`);
  return s as DeviceStatus;
}

const decodeDevice = (r: Row): DeviceRow => ({
  device_id: str(r, 'device_id'),
  name: str(r, 'name'),
  public_jwk: str(r, 'public_jwk'),
  created_at: num(r, 'created_at'),
  created_by: str(r, 'created_by'),
  status: deviceStatus(r),
  status_at: numOrNull(r, 'status_at'),
  status_by: strOrNull(r, 'status_by'),
});

export async function deviceById(db: Reader, deviceId: string): Promise<DeviceRow | undefined> {
  const r = await db.get(`SELECT ${DEVICE_COLUMNS} FROM edge_devices WHERE device_id = ?`, [deviceId]);
  return r ? decodeDevice(r) : undefined;
}

/** Devices oldest first; deleted ones only with `includeDeleted`. */
export async function listDevices(db: Reader, limit: number, offset: number, includeDeleted = false): Promise<DeviceRow[]> {
  return (
    await db.all(`SELECT ${DEVICE_COLUMNS} FROM edge_devices WHERE status <> ? OR ? = 1 ORDER BY created_at, device_id LIMIT ? OFFSET ?`, [
      'deleted',
      includeDeleted ? 1 : 0,
      limit,
      offset,
    ])
  ).map(decodeDevice);
}

/** How many devices listDevices pages through. */
export async function countDevices(db: Reader, includeDeleted = false): Promise<number> {
  return count(await db.get('SELECT COUNT(*) AS n FROM edge_devices WHERE status <> ? OR ? = 1', ['deleted', includeDeleted ? 1 : 0]));
}

/** Sets a device's status (the caller checked the change is one it may make). */
export async function setDeviceStatus(tx: Tx, deviceId: string, status: DeviceStatus, at: number, by: string): Promise<void> {
  await tx.run('UPDATE edge_devices SET status = ?, status_at = ?, status_by = ? WHERE device_id = ?', [status, at, by, deviceId]);
}

export async function insertDevice(tx: Tx, d: Omit<DeviceRow, 'status' | 'status_at' | 'status_by'>): Promise<void> {
  await tx.run('INSERT INTO edge_devices (device_id, name, public_jwk, created_at, created_by) VALUES (?, ?, ?, ?, ?)', [
    d.device_id,
    d.name,
    d.public_jwk,
    d.created_at,
    d.created_by,
  ]);
}

/** The next version of a bundle type (one higher than any issued before), taken in the caller's transaction. */
export async function nextBundleVersion(tx: Tx, type: string): Promise<number> {
  const r = await tx.get('SELECT version FROM edge_bundle_versions WHERE type = ?', [type]);
  const v = (r ? num(r, 'version') : 0) + 1;
  await tx.run(
    'INSERT INTO edge_bundle_versions (type, version) VALUES (?, ?) ON CONFLICT (type) DO UPDATE SET version = excluded.version',
    [type, v],
  );
  return v;
}

/** The highest version of a bundle type issued so far (0: none). */
export async function latestBundleVersion(db: Reader, type: string): Promise<number> {
  const r = await db.get('SELECT version FROM edge_bundle_versions WHERE type = ?', [type]);
  return r ? num(r, 'version') : 0;
}

export interface JournalRow {
  run_id: string;
  device_id: string;
  crew_id: string;
  graph_hash: string;
  outcome: string;
  record_count: number;
  hash: string;
  export: string;
  imported_at: number;
  /** How many of its records were charged to the ledgers (null: stored before imports charged, none was). */
  charged_records: number | null;
}

export async function journalByRun(db: Reader, runId: string): Promise<JournalRow | undefined> {
  const r = await db.get(
    'SELECT run_id, device_id, crew_id, graph_hash, outcome, record_count, hash, export, imported_at, charged_records FROM edge_journals WHERE run_id = ?',
    [runId],
  );
  return r
    ? {
        run_id: str(r, 'run_id'),
        device_id: str(r, 'device_id'),
        crew_id: str(r, 'crew_id'),
        graph_hash: str(r, 'graph_hash'),
        outcome: str(r, 'outcome'),
        record_count: num(r, 'record_count'),
        hash: str(r, 'hash'),
        export: str(r, 'export'),
        imported_at: num(r, 'imported_at'),
        charged_records: numOrNull(r, 'charged_records'),
      }
    : undefined;
}

/** A stored journal's summary, without its export. */
export type JournalSummaryRow = Omit<JournalRow, 'hash' | 'export' | 'charged_records'>;

/** The journals runs carried back (a device's, or every device's for null), newest import first. */
export async function journalsOfDevice(db: Reader, deviceId: string | null, limit: number, offset: number): Promise<JournalSummaryRow[]> {
  const cols = 'SELECT run_id, device_id, crew_id, graph_hash, outcome, record_count, imported_at FROM edge_journals';
  // Two statements rather than `device_id = ? OR ? = 1`, which no plan can answer from the device index.
  const rows =
    deviceId === null
      ? await db.all(`${cols} ORDER BY imported_at DESC, run_id LIMIT ? OFFSET ?`, [limit, offset])
      : await db.all(`${cols} WHERE device_id = ? ORDER BY imported_at DESC, run_id LIMIT ? OFFSET ?`, [deviceId, limit, offset]);
  return rows.map((r) => ({
    run_id: str(r, 'run_id'),
    device_id: str(r, 'device_id'),
    crew_id: str(r, 'crew_id'),
    graph_hash: str(r, 'graph_hash'),
    outcome: str(r, 'outcome'),
    record_count: num(r, 'record_count'),
    imported_at: num(r, 'imported_at'),
  }));
}

export async function countJournalsOfDevice(db: Reader, deviceId: string | null): Promise<number> {
  return count(
    deviceId === null
      ? await db.get('SELECT COUNT(*) AS n FROM edge_journals')
      : await db.get('SELECT COUNT(*) AS n FROM edge_journals WHERE device_id = ?', [deviceId]),
  );
}

/** Replaces a stored journal with a longer one of the same run that extends it (only while it is still `prevHash`). */
export async function replaceJournal(tx: Tx, prevHash: string, j: JournalRow & { imported_by: string }): Promise<void> {
  await tx.run(
    'UPDATE edge_journals SET outcome = ?, record_count = ?, hash = ?, export = ?, imported_at = ?, imported_by = ?, charged_records = ? WHERE run_id = ? AND hash = ?',
    [j.outcome, j.record_count, j.hash, j.export, j.imported_at, j.imported_by, j.charged_records, j.run_id, prevHash],
  );
}

/** Records the graph a crew bundle carries (once per graph hash). */
export async function insertCrewGraph(tx: Tx, graphHash: string, graph: string, at: number): Promise<void> {
  await tx.run('INSERT INTO edge_crew_graphs (graph_hash, graph, first_issued_at) VALUES (?, ?, ?) ON CONFLICT (graph_hash) DO NOTHING', [
    graphHash,
    graph,
    at,
  ]);
}

/** Records that a crew bundle of `graphHash` was issued to `deviceId` (once per pair). */
export async function insertCrewIssue(tx: Tx, deviceId: string, graphHash: string, at: number): Promise<void> {
  await tx.run(
    'INSERT INTO edge_crew_issues (device_id, graph_hash, first_issued_at) VALUES (?, ?, ?) ON CONFLICT (device_id, graph_hash) DO NOTHING',
    [deviceId, graphHash, at],
  );
}

/** Whether a crew bundle of `graphHash` was issued to `deviceId` (by a cell of this release or later). */
export async function crewIssued(db: Reader, deviceId: string, graphHash: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS x FROM edge_crew_issues WHERE device_id = ? AND graph_hash = ?', [deviceId, graphHash])) !== undefined;
}

/** The graph (JSON text) a crew bundle of this cell carried under `graphHash`, or undefined. */
export async function crewGraphByHash(db: Reader, graphHash: string): Promise<string | undefined> {
  const r = await db.get('SELECT graph FROM edge_crew_graphs WHERE graph_hash = ?', [graphHash]);
  return r ? str(r, 'graph') : undefined;
}

/** Records who a key bundle issued to a device let decide approvals, and resolve lost outcomes. */
export async function insertKeyBundle(
  tx: Tx,
  b: {
    device_id: string;
    version: number;
    issued_at: number;
    expires_at: number | null;
    approvers: readonly string[];
    resolvers: readonly string[];
  },
): Promise<void> {
  await tx.run('INSERT INTO edge_key_bundles (device_id, version, issued_at, expires_at, approvers, resolvers) VALUES (?, ?, ?, ?, ?, ?)', [
    b.device_id,
    b.version,
    b.issued_at,
    b.expires_at,
    JSON.stringify(b.approvers),
    JSON.stringify(b.resolvers),
  ]);
}

/**
 * The principals a key bundle of `version` issued to `deviceId` carried with agent_teams.write (who may resolve a
 * lost outcome), or undefined when no such bundle was issued; empty for a bundle issued before they were kept.
 */
export async function keyBundleResolvers(db: Reader, deviceId: string, version: number): Promise<string[] | undefined> {
  const r = await db.get('SELECT resolvers FROM edge_key_bundles WHERE device_id = ? AND version = ?', [deviceId, version]);
  if (!r) return undefined;
  return r['resolvers'] === null ? [] : (JSON.parse(str(r, 'resolvers')) as string[]);
}

/** The approvers a key bundle of `version` issued to `deviceId` carried, or undefined when no such bundle was issued. */
export async function keyBundleApprovers(db: Reader, deviceId: string, version: number): Promise<string[] | undefined> {
  const r = await db.get('SELECT approvers FROM edge_key_bundles WHERE device_id = ? AND version = ?', [deviceId, version]);
  return r ? (JSON.parse(str(r, 'approvers')) as string[]) : undefined;
}

export async function insertJournal(tx: Tx, j: JournalRow & { imported_by: string }): Promise<void> {
  await tx.run(
    'INSERT INTO edge_journals (run_id, device_id, crew_id, graph_hash, outcome, record_count, hash, export, imported_at, imported_by, charged_records) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    [
      j.run_id,
      j.device_id,
      j.crew_id,
      j.graph_hash,
      j.outcome,
      j.record_count,
      j.hash,
      j.export,
      j.imported_at,
      j.imported_by,
      j.charged_records,
    ],
  );
}
