/**
 * Changing, re-pinning and deleting sources (`catalog.sources.write`).
 *
 * A source is shared: every agent granted one of its tools calls its server
 * with its pinned definitions. So a change of where calls go or of how they
 * are checked (`url`, `auth`, `definition_max_age_ms`, `timeout_ms`) and any
 * re-pin reach those agents: the caller's authority covers each of them, or
 * it manages their owners (403 shared_change_exceeds_caller, audited; the one
 * gate, `iam.assertMayChangeShared`). A description changes nothing an agent
 * does.
 *
 * - PATCH re-runs registration's checks on the source as it would become
 *   (URL floor and posture, the server's trust for `cell`, the right to a
 *   client secret sent somewhere new) and reads the server's list once to
 *   know it answers (503 source_unreachable); pins stay as they are: a
 *   server whose definitions differ is refused call by call until re-pinned.
 *   `name` and `transport` cannot change (400 immutable_field).
 * - Re-pin (`POST …/pins { pins: { tool: pin | null } }`): each pin given must
 *   be the hash of the server's live definition now (409 definition_moved
 *   otherwise: what is pinned is what was reviewed); `null` removes a pin, and
 *   with it the tool from the catalog (409 in_use while anything names it).
 *   Pinning a tool the source did not import yet imports it.
 * - DELETE: refused (409 in_use) while a formation (any version), a blueprint
 *   or an agent names one of its tools.
 *
 * stdio sources come from the cell's configuration: PATCH and DELETE refuse
 * them (409 source_config_managed); their pins are reviewed and re-pinned
 * like any.
 */
import { conflict, inUse, invalid, notFound } from '../../../core/errors.ts';
import type { AuthContext } from '../../context.ts';
import type { Reached } from '../../iam/api.ts';
import type { Reader } from '../../store/types.ts';
import type { SourcesContext } from './context.ts';
import { checkSourceUrl } from '../mcp/floor.ts';
import { clientToken } from '../mcp/identity.ts';
import { importable } from './names.ts';
import { readListing } from '../mcp/read.ts';
import { resolveAuth, type AuthInput } from './register.ts';
import { deletePin, deleteSource, pinsOf, sourceById, updateSource, upsertPin } from './repository.ts';
import type { PinRow, SourceRow } from './types.ts';

export interface SourcePatch {
  url?: string | undefined;
  auth?: AuthInput | undefined;
  description?: string | undefined;
  definition_max_age_ms?: number | undefined;
  timeout_ms?: number | undefined;
}

/** The users of the named tools (any formation version, blueprints, agents), by kind; empty kinds left out. */
export async function toolUsers(ctx: SourcesContext, db: Reader, names: readonly string[]): Promise<Record<string, string[]>> {
  const usedBy: Record<string, string[]> = {};
  if (names.length === 0) return usedBy;
  for (const hook of ctx.userHooks) {
    for (const [kind, ids] of Object.entries(await hook(db, names))) if (ids.length) usedBy[kind] = [...(usedBy[kind] ?? []), ...ids];
  }
  return usedBy;
}

/** Refuses (403 shared_change_exceeds_caller, audited) unless the caller covers every agent the tools reach. */
async function assertMayChange(ctx: SourcesContext, auth: AuthContext, source: SourceRow, names: readonly string[], action: string) {
  if (names.length === 0) return;
  const reached: Reached[] = [];
  for (const hook of ctx.reachHooks) reached.push(...(await hook(ctx.core.store, names)));
  await ctx.iam.assertMayChangeShared(auth, { kind: 'source', id: source.source_id }, reached, action);
}

/** The source, or 404 `catalog source`. */
export async function sourceOr404(db: Reader, id: string): Promise<SourceRow> {
  const s = await sourceById(db, id);
  if (!s) throw notFound('catalog source');
  return s;
}

function refuseConfigManaged(s: SourceRow, what: string): void {
  if (s.origin === 'config')
    throw conflict(`the source ${s.name} comes from the cell's configuration (--tool-sources): ${what} it there`, {
      reason: 'source_config_managed',
      source_id: s.source_id,
    });
}

/** Changes a source (see the header); answers it as it is now (unchanged when nothing changed). */
export async function updateSourceWith(ctx: SourcesContext, auth: AuthContext, id: string, patch: SourcePatch): Promise<SourceRow> {
  const { core, iam } = ctx;
  const actor = auth.principal.id;
  const s = await sourceOr404(core.store, id);
  refuseConfigManaged(s, 'change');
  const url = patch.url !== undefined ? checkSourceUrl(core.config, patch.url, 'url') : new URL(s.url!);
  const next: SourceRow = {
    ...s,
    url: url.href,
    description: patch.description ?? s.description,
    definition_max_age_ms: patch.definition_max_age_ms ?? s.definition_max_age_ms,
    timeout_ms: patch.timeout_ms ?? s.timeout_ms,
  };
  const destination = next.url !== s.url || patch.auth !== undefined;
  if (destination) {
    const input: AuthInput = patch.auth ?? authInputOf(s);
    next.auth = await resolveAuth(ctx, auth, input, url, 'catalog.source.update', s.source_id);
    if (next.auth.type === 'client_credentials') {
      const was = s.auth.type === 'client_credentials' ? s.auth : undefined;
      // The secret goes somewhere new (another secret, another token endpoint): the caller's right binds it.
      const rebound =
        was === undefined || was.client_secret_id !== next.auth.client_secret_id || was.token_endpoint !== next.auth.token_endpoint;
      next.bound_by = rebound ? actor : s.bound_by;
    } else next.bound_by = null;
  }
  if (JSON.stringify(next) === JSON.stringify(s)) return s;
  const reaching = JSON.stringify({ ...next, description: '' }) !== JSON.stringify({ ...s, description: '' });
  if (reaching)
    await assertMayChange(
      ctx,
      auth,
      s,
      (await pinsOf(core.store, id)).map((p) => p.name),
      'catalog.source.update',
    );
  next.updated_at = Math.max(core.clock.now(), s.updated_at + 1);
  if (destination) {
    // The server as it would become answers, with the credentials it would get.
    if (next.auth.type === 'client_credentials') await clientToken(ctx, next, next.auth);
    await readListing(ctx, next, actor);
  }
  const fields = Object.keys(patch).filter((k) => (patch as Record<string, unknown>)[k] !== undefined);
  await core.store.write(async (tx) => {
    const now = await sourceById(tx, id);
    if (!now) throw notFound('catalog source');
    if (now.updated_at !== s.updated_at) throw conflict('the source changed meanwhile; read it again', { reason: 'concurrent_update' });
    await updateSource(tx, next);
    await iam.audit(tx, {
      at: next.updated_at,
      actor,
      action: 'catalog.source.update',
      target: id,
      outcome: 'ok',
      details: { fields, ...(next.url !== s.url ? { from_host: new URL(s.url!).host, to_host: url.host } : {}), auth: next.auth.type },
    });
  });
  ctx.connections.dropSource(id);
  await ctx.imported.reload();
  return next;
}

/** What a stored identity was registered with (for a change of URL only). */
function authInputOf(s: SourceRow): AuthInput {
  const a = s.auth;
  if (a.type === 'client_credentials')
    return {
      type: 'client_credentials',
      token_endpoint: a.token_endpoint,
      client_id: a.client_id,
      client_secret_id: a.client_secret_id,
      ...(a.scope !== null ? { scope: a.scope } : {}),
      ...(a.resource !== null ? { resource: a.resource } : {}),
    };
  return { type: a.type };
}

/** Deletes a source and its pins; refused while anything names one of its tools. */
export async function deleteSourceWith(ctx: SourcesContext, auth: AuthContext, id: string): Promise<{ source: SourceRow; pins: PinRow[] }> {
  const { core, iam } = ctx;
  const s = await sourceOr404(core.store, id);
  refuseConfigManaged(s, 'remove');
  const pins = await core.store.write(async (tx) => {
    await sourceOr404(tx, id);
    const pins = await pinsOf(tx, id);
    const usedBy = await toolUsers(
      ctx,
      tx,
      pins.map((p) => p.name),
    );
    if (Object.keys(usedBy).length) throw inUse('source', id, usedBy, `remove the tools of ${s.name} from their allowed_tools first`);
    await deleteSource(tx, id);
    await iam.audit(tx, {
      actor: auth.principal.id,
      action: 'catalog.source.delete',
      target: id,
      outcome: 'ok',
      details: { name: s.name },
    });
    return pins;
  });
  ctx.connections.dropSource(id);
  await ctx.imported.reload();
  return { source: s, pins };
}

/** Re-pins, imports or removes tools of a source (see the header); the source's pins as they are now. */
export async function repin(
  ctx: SourcesContext,
  auth: AuthContext,
  id: string,
  asked: Readonly<Record<string, string | null>>,
): Promise<{ source: SourceRow; pins: PinRow[] }> {
  const { core, iam } = ctx;
  const actor = auth.principal.id;
  const s = await sourceOr404(core.store, id);
  const before = new Map((await pinsOf(core.store, id)).map((p) => [p.tool, p]));
  const tools = Object.keys(asked);
  if (tools.length === 0) throw invalid('pins names no tool', { field: 'pins' });
  for (const t of tools)
    if (asked[t] === null && !before.has(t))
      throw invalid(`${t} is not a pinned tool of ${s.name}`, { reason: 'unknown_tool', field: `pins.${t}` });
  // Who the change reaches: the agents granted any tool it re-pins or removes.
  await assertMayChange(
    ctx,
    auth,
    s,
    tools.flatMap((t) => (before.has(t) ? [before.get(t)!.name] : [])),
    'catalog.source.repin',
  );
  const live = importable(s.name, await readListing(ctx, s, actor));
  const now = core.clock.now();
  const upserts: PinRow[] = [];
  for (const t of tools) {
    const want = asked[t];
    if (want === null || want === undefined) continue;
    const l = live.tools.get(t);
    if (l === undefined) {
      const why = live.refused.find((r) => r.tool === t);
      if (why) throw invalid(`${t} cannot be imported: ${why.problem}`, { reason: why.reason, field: `pins.${t}` });
      throw conflict(`the server of ${s.name} no longer lists ${t}`, { reason: 'definition_moved', tool: t, expected: want, live: null });
    }
    if (l.pin !== want)
      throw conflict(`the server's definition of ${t} is not the one reviewed: review it again`, {
        reason: 'definition_moved',
        tool: t,
        expected: want,
        live: l.pin,
      });
    upserts.push({ source_id: id, tool: t, name: l.name, definition: l.definition, pin: l.pin, pinned_at: now, pinned_by: actor });
  }
  const removed = tools.filter((t) => asked[t] === null);
  const pins = await core.store.write(async (tx) => {
    await sourceOr404(tx, id);
    const names = removed.map((t) => before.get(t)!.name);
    const usedBy = await toolUsers(ctx, tx, names);
    if (Object.keys(usedBy).length) throw inUse('source', id, usedBy, `remove ${names.join(', ')} from their allowed_tools first`);
    for (const p of upserts) await upsertPin(tx, p);
    for (const t of removed) await deletePin(tx, id, t);
    await iam.audit(tx, {
      at: now,
      actor,
      action: 'catalog.source.repin',
      target: id,
      outcome: 'ok',
      details: {
        pins: Object.fromEntries([
          ...upserts.map((p) => [p.name, { from: before.get(p.tool)?.pin ?? null, to: p.pin }]),
          ...removed.map((t) => [before.get(t)!.name, { from: before.get(t)!.pin, to: null }]),
        ]),
      },
    });
    return pinsOf(tx, id);
  });
  await ctx.imported.reload();
  return { source: s, pins };
}
