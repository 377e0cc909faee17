/**
 * Provider secrets (API keys of model providers), encrypted at rest.
 *
 * `POST /admin/secrets` stores a value and returns only its `secret_id`; no
 * route ever returns the value (the others list, rotate and delete it:
 * cell/ai/routes-secrets.ts). Values are sealed under the group's secrets key
 * (the custody module's: cell/custody/seal.ts, AES-256-GCM), each with its
 * own random nonce and the secret id as the additional authenticated data, so
 * a ciphertext moved to another row does not open. Secret values are never
 * logged and never put in errors.
 */
import type { Holding } from '../../core/authority/contain.ts';
import { ServiceError } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import { newId } from '../ids.ts';
import type { CellCore } from '../context.ts';
import { openSecret, sealSecret, type Custody, type Witness } from '../custody/api.ts';
import type { CredentialFacts, Iam } from '../iam/api.ts';
import type { Reader } from '../store/types.ts';
import type { SourceSecrets } from '../tools/api.ts';
import { sealedSecret, sealedSecrets, secretCreator, touchSecret } from './repository.ts';

/** Most provider secrets a store from before the key check offers as witnesses of its key (cell/custody/key-check.ts). */
const WITNESS_LIMIT = 10_000;

/**
 * The provider secrets of a store from before the key check, as witnesses of
 * the group's secrets key: every one must open under the key a process starts with.
 */
export async function secretWitnesses(db: Reader): Promise<Witness[]> {
  return (await sealedSecrets(db, WITNESS_LIMIT)).map((s) => ({
    what: `provider secret ${s.secretId}`,
    opens: (key: Buffer) => {
      try {
        openSecret(key, s.secretId, s.sealed);
        return true;
      } catch {
        return false;
      }
    },
  }));
}

/** A fresh secret id and the value sealed under it (sealing is random: do it before the transaction). */
export function prepareSecret(key: Buffer, value: string): { secretId: string; sealed: Uint8Array } {
  const secretId = newId('sec');
  return { secretId, sealed: sealSecret(key, secretId, value) };
}

/**
 * A stored secret as the right to act on a credential sees it
 * (cell/iam/iam.ts `credentialVerdict`): it belongs to its creator; its
 * authority is the right to use it, `secrets.write` for the creator's own
 * credential (what made it) and `secrets.use` for anyone else, who must also
 * manage the creator. A creator acting through a credential without
 * `secrets.write` (a narrow key of theirs) may not point it anywhere.
 */
export function secretFacts(secretId: string, creator: string, actorId: string): CredentialFacts {
  return {
    kind: 'secret',
    id: secretId,
    ownerId: creator,
    authority: { permissions: [creator === actorId ? PERMISSIONS.secretsWrite : PERMISSIONS.secretsUse] },
  };
}

/**
 * Whether `holder` may bind the secret to a provider (and so send it wherever
 * the provider's base_url points), at registration, at a change of the
 * provider's destination and before every call: the right to act on the
 * secret. An unknown secret: nobody.
 */
export async function mayUseSecret(
  db: Reader,
  iam: Pick<Iam, 'credentialVerdict'>,
  holder: { principalId: string; holding: Holding },
  secretId: string,
): Promise<boolean> {
  const creator = await secretCreator(db, secretId);
  if (creator === undefined) return false;
  return mayUseSecretAs(iam, holder, secretId, creator);
}

/** mayUseSecret for a secret whose creator the caller has read already (a provider call). */
export async function mayUseSecretAs(
  iam: Pick<Iam, 'credentialVerdict'>,
  holder: { principalId: string; holding: Holding },
  secretId: string,
  creator: string,
): Promise<boolean> {
  return (await iam.credentialVerdict(holder, secretFacts(secretId, creator, holder.principalId))).ok;
}

/** How stale a secret's `last_used_at` may be: one write per secret per minute at most, however many calls use it. */
export const SECRET_USE_RESOLUTION_MS = 60_000;

/**
 * The plaintext of a stored secret, for a provider call only. Records the use
 * (`last_used_at`, to the minute); a failure to record it is logged and does
 * not stop the call.
 */
/** Values opened, by secrets key then secret id, with the sealed bytes they came from. */
const opened = new WeakMap<Buffer, Map<string, { sealed: Buffer; value: string }>>();
/** Secrets kept open per key; past it the map starts over. */
const OPENED_MAX = 256;

/**
 * openSecret, once per sealed value: every model call of a provider reads its
 * secret's row, and opening it again each time (a cipher context, AES-GCM)
 * was ~2 % of a run step's CPU. The value is reused only while the row holds
 * the very bytes it was opened from, so a rotation, a tampered row or a row
 * moved under another id is opened (and refused) afresh. The plaintext stays
 * in the process's memory, where the key that opens it already is.
 */
export function openSecretCached(key: Buffer, secretId: string, sealed: Uint8Array): string {
  let byId = opened.get(key);
  if (byId === undefined) {
    byId = new Map();
    opened.set(key, byId);
  }
  const hit = byId.get(secretId);
  if (hit?.sealed.equals(sealed)) return hit.value;
  const value = openSecret(key, secretId, sealed);
  if (byId.size >= OPENED_MAX) byId.clear();
  byId.set(secretId, { sealed: Buffer.from(sealed), value });
  return value;
}

export async function readSecret(
  ctx: { core: CellCore; custody: Custody },
  secretId: string,
  /** The sealed row, when the caller read it already for this call. */
  read?: Promise<Awaited<ReturnType<typeof sealedSecret>>>,
): Promise<string> {
  const { store, clock, log } = ctx.core;
  const row = await (read ?? sealedSecret(store, secretId));
  if (!row)
    throw new ServiceError('service_unavailable', 'the provider secret is missing', {
      details: { reason: 'secret_missing', secret_id: secretId },
    });
  let value: string;
  try {
    value = openSecretCached(ctx.custody.key(), secretId, row.sealed);
  } catch {
    // The key file changed or the row was altered: refuse without the cause.
    throw new ServiceError('service_unavailable', 'the provider secret cannot be opened', {
      details: { reason: 'secret_unreadable', secret_id: secretId },
    });
  }
  const now = clock.now();
  if (row.lastUsedAt === null || now - row.lastUsedAt >= SECRET_USE_RESOLUTION_MS) {
    await store
      // One statement on a row every run using the provider shares: row locks, never a serialization failure.
      .write((tx) => touchSecret(tx, secretId, now), { isolation: 'row-locks' })
      .catch((e: unknown) => {
        log.warn('ai: could not record a secret use', { secret_id: secretId, error: e });
      });
  }
  return value;
}

/**
 * The stored secrets as the tools module's sources use them (a client secret of their own authorization
 * server): who stored one, whether a holder may send it somewhere (the provider rule), its value.
 */
export function sourceSecrets(ctx: { core: CellCore; iam: Pick<Iam, 'credentialVerdict'>; custody: Custody }): SourceSecrets {
  return {
    creator: (db, secretId) => secretCreator(db, secretId),
    mayUse: (holder, secretId) => mayUseSecret(ctx.core.store, ctx.iam, holder, secretId),
    read: (secretId) => readSecret(ctx, secretId),
  };
}
