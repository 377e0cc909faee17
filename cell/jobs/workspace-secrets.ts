/**
 * A SQL workspace's secrets at rest (`job_sql_workspaces`): the key that names
 * its jobs' effect records (an HMAC of the run and the step under it) and the
 * password of the PostgreSQL role its jobs run as.
 *
 * Each is stored sealed with AES-256-GCM under the group's secrets key
 * (cell/custody: the key the signing keys and provider secrets are sealed
 * with, proven against the store before the cell writes anything, never in
 * the store), bound to its workspace and column, so a copy of the database
 * alone neither logs in as a workspace nor names its effect records.
 * Stored form: `{"sealed":1,"data":BASE64}`.
 *
 * A row in the clear (a store of an earlier version) is sealed when a cell
 * starts (`sealClearWorkspaceSecrets`), and its role password is replaced by a
 * new one: the old one is in every copy of the old store (the cell sets the
 * new one on the role before its next job there). The effect key is kept: the
 * records of steps that committed before the upgrade are named with it.
 */
import { randomBytes } from 'node:crypto';
import type { Custody } from '../custody/api.ts';
import type { JobsContext } from './context.ts';
import { clearWorkspaceSecrets, resealWorkspaceSecrets, sqlWorkspaceSecrets } from './repository.ts';

/** A workspace's secrets, opened. */
export interface WorkspaceSecrets {
  effectKey: string;
  rolePassword: string;
}

type Column = 'effect_key' | 'role_password';

/** A stored secret this cell's secrets key does not open (a member given another key). */
export class WorkspaceSecretUnreadable extends Error {
  constructor(workspaceId: string) {
    super(`the secrets of SQL workspace ${workspaceId} do not open with this cell's secrets key (--secrets-key-file)`);
    this.name = 'WorkspaceSecretUnreadable';
  }
}

const aad = (workspaceId: string, column: Column) => `agent-cell workspace secret v1:${workspaceId}:${column}`;

function seal(custody: Custody, workspaceId: string, column: Column, value: string): string {
  return JSON.stringify({ sealed: 1, data: Buffer.from(custody.seal(aad(workspaceId, column), value)).toString('base64') });
}

function open(custody: Custody, workspaceId: string, column: Column, stored: string): string {
  // In the clear (hex): a row not sealed yet (a store of an earlier version, before a cell's start sealed it).
  if (!stored.startsWith('{')) return stored;
  let data: unknown;
  try {
    data = (JSON.parse(stored) as { data?: unknown }).data;
  } catch {
    throw new WorkspaceSecretUnreadable(workspaceId);
  }
  if (typeof data !== 'string') throw new WorkspaceSecretUnreadable(workspaceId);
  try {
    return custody.open(aad(workspaceId, column), Buffer.from(data, 'base64'));
  } catch {
    throw new WorkspaceSecretUnreadable(workspaceId);
  }
}

/** Each process's cache of the workspaces' opened secrets. */
const cache = new WeakMap<JobsContext, Map<string, Promise<WorkspaceSecrets>>>();

/** The workspace's secrets, recorded (sealed) by the first cell of the group that needed them. */
export function workspaceSecrets(ctx: JobsContext, workspaceId: string): Promise<WorkspaceSecrets> {
  let m = cache.get(ctx);
  if (!m) {
    m = new Map();
    cache.set(ctx, m);
  }
  let p = m.get(workspaceId);
  if (!p) {
    const { custody } = ctx;
    const fresh = {
      effect_key: seal(custody, workspaceId, 'effect_key', randomBytes(32).toString('hex')),
      role_password: seal(custody, workspaceId, 'role_password', randomBytes(24).toString('hex')),
    };
    // Row locks, not serializable: cells recording the same new workspace at once wait for the first
    // one's row (ON CONFLICT DO NOTHING) and then read it, instead of failing serialization and retrying.
    p = ctx.core.store
      .write((tx) => sqlWorkspaceSecrets(tx, workspaceId, fresh, ctx.core.clock.now()), { isolation: 'row-locks' })
      .then((row) => ({
        effectKey: open(custody, workspaceId, 'effect_key', row.effect_key),
        rolePassword: open(custody, workspaceId, 'role_password', row.role_password),
      }));
    m.set(workspaceId, p);
    p.catch(() => m.delete(workspaceId));
  }
  return p;
}

/** Forgets the cached secrets of a workspace: the next job reads them from the store again. */
export function forgetWorkspaceSecrets(ctx: JobsContext, workspaceId: string): void {
  cache.get(ctx)?.delete(workspaceId);
}

/**
 * Seals the rows still in the clear (a store of an earlier version), a new role password each, under the
 * group's key (proven at start, so the other cells open them). Returns how many rows it sealed.
 */
export async function sealClearWorkspaceSecrets(ctx: JobsContext): Promise<number> {
  const { custody } = ctx;
  let sealed = 0;
  let after = '';
  for (;;) {
    const rows = await clearWorkspaceSecrets(ctx.core.store, after, 100);
    if (rows.length === 0) return sealed;
    for (const r of rows) {
      after = r.workspace_id;
      const effect = open(custody, r.workspace_id, 'effect_key', r.effect_key);
      await ctx.core.store.write((tx) =>
        resealWorkspaceSecrets(tx, r.workspace_id, r, {
          effect_key: seal(custody, r.workspace_id, 'effect_key', effect),
          role_password: seal(custody, r.workspace_id, 'role_password', randomBytes(24).toString('hex')),
        }),
      );
      forgetWorkspaceSecrets(ctx, r.workspace_id);
      sealed++;
    }
  }
}
