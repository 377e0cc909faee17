/**
 * Changing and deleting model providers.
 *
 * A change re-runs what registration checks, on the provider as it would
 * become: the posture allow-gate (403 posture_forbidden, audited), the
 * local-signed rules, and the right to the secret. Binding a secret sends it
 * to base_url, so a change of either (while a secret is bound) needs the
 * caller's own right to act on that secret (its creator's credential with secrets.write, or secrets.use and managing the creator: 403
 * secret_not_usable, audited); the caller then becomes the principal whose
 * right every call checks (`bound_by`). `provider_type` cannot change.
 *
 * A change of the destination (base_url, default_model, the secret) reaches
 * every agent that calls the provider: the caller's authority covers them,
 * or it manages their owners (403 shared_change_exceeds_caller, details.reaches);
 * a new base_url is an audit record of its own (`ai.provider.destination`,
 * the old and the new host).
 *
 * Deleting is refused while something names the provider (Agent Teams:
 * agents with that `provider_id`): 409 in_use, details.used_by. Agents
 * without a provider_id call the oldest registered provider, whichever it is
 * then.
 */
import { ServiceError, invalid, notFound } from '../../core/errors.ts';
import { PERMISSIONS } from '../../core/permissions.ts';
import type { AuthContext } from '../context.ts';
import { callerHolding, type Reached } from '../iam/api.ts';
import { postureAllows } from './posture.ts';
import { LOCAL_MODEL_NAME, type AiContext } from './providers.ts';
import {
  deleteProvider as deleteRow,
  listProviders,
  providerById,
  secretCreator,
  updateProvider as updateRow,
  type Provider,
} from './repository.ts';
import { mayUseSecret } from './secrets.ts';

export interface ProviderPatch {
  name?: string | undefined;
  default_model?: string | undefined;
  base_url?: string | null | undefined;
  api_key_secret_id?: string | null | undefined;
  timeout_ms?: number | undefined;
  max_retries?: number | undefined;
  stream?: boolean | undefined;
}

/** Changes a provider; returns it as it is now (unchanged when nothing changed). */
export async function updateProvider(ctx: AiContext, auth: AuthContext, providerId: string, patch: ProviderPatch): Promise<Provider> {
  const { core, iam } = ctx;
  const actor = auth.principal.id;
  const p = await providerById(core.store, providerId);
  if (!p) throw notFound('model provider');
  const next: Provider = {
    ...p,
    name: patch.name ?? p.name,
    default_model: patch.default_model ?? p.default_model,
    base_url: patch.base_url === undefined ? p.base_url : patch.base_url,
    api_key_secret_id: patch.api_key_secret_id === undefined ? p.api_key_secret_id : patch.api_key_secret_id,
    timeout_ms: patch.timeout_ms ?? p.timeout_ms,
    max_retries: patch.max_retries ?? p.max_retries,
    stream: patch.stream ?? p.stream,
  };
  const decision = postureAllows(core.config.posture, next);
  if (!decision.allowed) {
    const details = {
      reason: 'posture_forbidden' as const,
      posture: core.config.posture,
      rule: decision.rule,
      provider_type: p.provider_type,
    };
    await iam.auditNow({ actor, action: 'ai.provider.update', target: providerId, outcome: 'refused', details });
    throw new ServiceError('forbidden', `provider refused by the deployment posture: ${decision.reason}`, { details });
  }
  if (p.provider_type === 'local-signed') {
    if (next.api_key_secret_id !== null)
      throw invalid('a local-signed provider takes no api_key_secret_id', { reason: 'field_not_allowed', field: 'api_key_secret_id' });
    if (!LOCAL_MODEL_NAME.test(next.default_model))
      throw invalid('a local-signed default_model is a file name: letters, digits, dot, dash, underscore', {
        reason: 'bad_model_name',
        field: 'default_model',
      });
  }
  const secretId = next.api_key_secret_id;
  // Where prompts, inputs and outputs of every agent calling the provider go: a shared thing.
  const destinationChanged =
    next.base_url !== p.base_url || next.default_model !== p.default_model || next.api_key_secret_id !== p.api_key_secret_id;
  if (destinationChanged) await assertMayRedirect(ctx, auth, providerId, 'ai.provider.update');
  const rebound = secretId !== null && (secretId !== p.api_key_secret_id || next.base_url !== p.base_url);
  if (rebound) {
    if (secretId !== p.api_key_secret_id && (await secretCreator(core.store, secretId)) === undefined) {
      throw invalid('api_key_secret_id names no stored secret', { reason: 'unknown_secret', field: 'api_key_secret_id' });
    }
    // Sending the secret somewhere new is acting on it: the right to act on that credential, from this credential.
    if (!(await mayUseSecret(core.store, iam, { principalId: actor, holding: callerHolding(auth) }, secretId))) {
      const details = { reason: 'secret_not_usable' as const, field: 'api_key_secret_id', required_permission: PERMISSIONS.secretsUse };
      await iam.auditNow({ actor, action: 'ai.provider.update', target: providerId, outcome: 'refused', details });
      throw new ServiceError(
        'forbidden',
        'the caller may not send this secret to a new place: the calling credential has no right to act on it',
        {
          details,
        },
      );
    }
    next.bound_by = actor;
  }
  const fields = Object.keys(patch).filter((k) => (patch as Record<string, unknown>)[k] !== undefined);
  if (JSON.stringify(next) === JSON.stringify(p)) return p;
  next.updated_at = core.clock.now();
  await core.store.write(async (tx) => {
    if (!(await providerById(tx, providerId))) throw notFound('model provider');
    // Again inside the transaction: a secret deleted meanwhile is never bound (its delete checks for providers in its own).
    if (secretId !== null && secretId !== p.api_key_secret_id && (await secretCreator(tx, secretId)) === undefined)
      throw invalid('api_key_secret_id names no stored secret', { reason: 'unknown_secret', field: 'api_key_secret_id' });
    await updateRow(tx, next);
    await iam.audit(tx, {
      at: next.updated_at,
      actor,
      action: 'ai.provider.update',
      target: providerId,
      outcome: 'ok',
      details: { fields, rule: decision.rule, ...(rebound ? { secret_bound_by: actor } : {}) },
    });
    if (next.base_url !== p.base_url) {
      // A change of destination is a record of its own, naming the old and the new host.
      await iam.audit(tx, {
        at: next.updated_at,
        actor,
        action: 'ai.provider.destination',
        target: providerId,
        outcome: 'ok',
        details: { from_host: hostOf(p.base_url), to_host: hostOf(next.base_url), secret_bound: next.api_key_secret_id !== null },
      });
    }
  });
  return next;
}

/** Refuses a change of where the provider's callers' traffic goes unless the caller covers every agent calling it. */
async function assertMayRedirect(ctx: AiContext, auth: AuthContext, providerId: string, action: string): Promise<void> {
  const oldest = (await listProviders(ctx.core.store, 1, 0))[0];
  const reached: Reached[] = [];
  for (const hook of ctx.providerReachHooks) reached.push(...(await hook(ctx.core.store, providerId, oldest?.provider_id === providerId)));
  await ctx.iam.assertMayChangeShared(auth, { kind: 'provider', id: providerId }, reached, action);
}

/** The host (and port) of a base URL, or null when it has none (the provider's default endpoint). */
function hostOf(url: string | null): string | null {
  if (url === null) return null;
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

/** Deletes a provider; refused (409 in_use) while another module names it. */
export async function deleteProvider(ctx: AiContext, auth: AuthContext, providerId: string): Promise<Provider> {
  const { core, iam } = ctx;
  const p = await providerById(core.store, providerId);
  if (!p) throw notFound('model provider');
  // Agents naming no provider call the oldest: deleting it sends them to the next one.
  await assertMayRedirect(ctx, auth, providerId, 'ai.provider.delete');
  await core.store.write(async (tx) => {
    if (!(await providerById(tx, providerId))) throw notFound('model provider');
    const usedBy: Record<string, string[]> = {};
    for (const hook of ctx.providerUserHooks) {
      for (const [kind, ids] of Object.entries(await hook(tx, providerId)))
        if (ids.length) usedBy[kind] = [...(usedBy[kind] ?? []), ...ids];
    }
    if (Object.keys(usedBy).length) {
      const named = Object.entries(usedBy).map(([k, ids]) => `${k} ${ids.slice(0, 5).join(', ')}${ids.length > 5 ? ', …' : ''}`);
      throw new ServiceError('conflict', `the model provider is in use by ${named.join('; ')}: point them at another provider first`, {
        details: { reason: 'in_use', provider_id: providerId, used_by: usedBy },
      });
    }
    await deleteRow(tx, providerId);
    await iam.audit(tx, {
      actor: auth.principal.id,
      action: 'ai.provider.delete',
      target: providerId,
      outcome: 'ok',
      details: { name: p.name },
    });
  });
  return p;
}
