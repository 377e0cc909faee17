/**
 * Every SQL statement of the tools module: the kv tools' workspace storage
 * (`tool_kv`), with its row decoder. Statements stay in the dialect both
 * engines run (docs/storage.md).
 */
import { anyJson, json, num, stringArray } from '../store/decode.ts';
import type { Reader, Tx } from '../store/types.ts';
import type { KvEntry } from '../../core/catalog/builtin.ts';

export async function kvEntry(db: Reader, workspaceId: string, key: string): Promise<KvEntry | undefined> {
  const r = await db.get('SELECT value, classification, compartments FROM tool_kv WHERE workspace_id = ? AND key = ?', [workspaceId, key]);
  return r
    ? { value: json(r, 'value', anyJson), classification: num(r, 'classification'), compartments: json(r, 'compartments', stringArray) }
    : undefined;
}

/** The compartment labels of an entry, or undefined when there is none. */
export async function kvCompartments(db: Reader, workspaceId: string, key: string): Promise<string[] | undefined> {
  const r = await db.get('SELECT compartments FROM tool_kv WHERE workspace_id = ? AND key = ?', [workspaceId, key]);
  return r ? json(r, 'compartments', stringArray) : undefined;
}

export interface KvWrite {
  workspaceId: string;
  key: string;
  /** The value as JSON text. */
  value: string;
  classification: number;
  compartments: string[];
  at: number;
  by: string;
}

/** Inserts or overwrites an entry. */
export async function upsertKv(tx: Tx, w: KvWrite): Promise<void> {
  await tx.run(
    `INSERT INTO tool_kv (workspace_id, key, value, classification, compartments, updated_at, updated_by) VALUES (?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (workspace_id, key) DO UPDATE SET value = excluded.value, classification = excluded.classification,
       compartments = excluded.compartments, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
    [w.workspaceId, w.key, w.value, w.classification, JSON.stringify(w.compartments), w.at, w.by],
  );
}
