/** Tables of the edge module: registered devices, bundle version counters, imported journals. */
import type { Migration } from '../store/types.ts';

export const EDGE_MIGRATIONS: readonly Migration[] = [
  {
    id: 'edge-001-devices',
    sql: `CREATE TABLE edge_devices (
      device_id TEXT PRIMARY KEY,          -- the device key's RFC 7638 thumbprint
      name TEXT NOT NULL,
      public_jwk TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      created_by TEXT NOT NULL
    )`,
  },
  {
    id: 'edge-002-bundle-versions',
    sql: 'CREATE TABLE edge_bundle_versions (type TEXT PRIMARY KEY, version INTEGER NOT NULL)',
  },
  {
    id: 'edge-003-journals',
    sql: `CREATE TABLE edge_journals (
      run_id TEXT PRIMARY KEY,
      device_id TEXT NOT NULL,
      crew_id TEXT NOT NULL,
      graph_hash TEXT NOT NULL,
      outcome TEXT NOT NULL,
      record_count INTEGER NOT NULL,
      hash TEXT NOT NULL,                  -- SHA-256 of the signed export payload
      export TEXT NOT NULL,                -- the export file as carried back
      imported_at INTEGER NOT NULL,
      imported_by TEXT NOT NULL
    )`,
  },
  {
    // The graphs crew bundles carried to devices, by graph hash: a journal carried back says it completed a
    // run of one, and the cell replays it on that graph (cell/edge/journal-import.ts).
    id: 'edge-004-crew-graphs',
    sql: `CREATE TABLE edge_crew_graphs (
      graph_hash TEXT PRIMARY KEY,
      graph TEXT NOT NULL,
      first_issued_at INTEGER NOT NULL
    )`,
  },
  {
    // A device can be disabled (no bundle, no token, no journal import until enabled again) and deleted
    // (soft: the row stays, so its journals keep naming it and its key cannot be registered again).
    id: 'edge-005-device-status',
    sql: `ALTER TABLE edge_devices ADD COLUMN status TEXT NOT NULL DEFAULT 'active';
    ALTER TABLE edge_devices ADD COLUMN status_at INTEGER;
    ALTER TABLE edge_devices ADD COLUMN status_by TEXT`,
  },
  {
    // Who each key bundle issued to a device let decide approvals (active principals it carried with
    // agent_teams.approve): a journal carried back is re-judged against the bundle its decisions name
    // (cell/edge/import-approvals.ts).
    id: 'edge-006-key-bundle-approvers',
    sql: `CREATE TABLE edge_key_bundles (
      device_id TEXT NOT NULL,
      version INTEGER NOT NULL,
      issued_at INTEGER NOT NULL,
      expires_at INTEGER,
      approvers TEXT NOT NULL,             -- JSON array of principal ids
      PRIMARY KEY (device_id, version)
    )`,
  },
  {
    // Who each key bundle let resolve a lost outcome on the device (active principals it carried with
    // agent_teams.write): a resolution carried back in a journal is re-judged against the bundle it names
    // (cell/edge/import-approvals.ts). Null for bundles issued before: none of their resolutions holds.
    id: 'edge-007-key-bundle-resolvers',
    sql: `ALTER TABLE edge_key_bundles ADD COLUMN resolvers TEXT`,
  },
  {
    // A device's carried journals, newest import first (the device view and its count): read by this
    // index instead of the whole table.
    id: 'edge-008-journals-by-device',
    sql: 'CREATE INDEX edge_journals_by_device ON edge_journals (device_id, imported_at DESC, run_id)',
  },
  {
    // How many of a stored journal's records were charged to the agents' ledgers (journal-import.ts): a longer
    // journal that extends it is charged the rest. Null for journals stored before imports charged: none was.
    id: 'edge-009-journals-charged',
    sql: 'ALTER TABLE edge_journals ADD COLUMN charged_records INTEGER',
  },
  {
    // Which device each crew graph was issued to (export.ts issueCrewBundle): a device's journal is charged to
    // the agents' ledgers only for a graph issued to that device (journal-import.ts), out of what it holds.
    id: 'edge-010-crew-issues',
    sql: `CREATE TABLE edge_crew_issues (
      device_id TEXT NOT NULL,
      graph_hash TEXT NOT NULL,
      first_issued_at INTEGER NOT NULL,
      PRIMARY KEY (device_id, graph_hash)
    )`,
  },
];
