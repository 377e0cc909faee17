/**
 * The iam module's face (docs/architecture.md, "Faces"): what another module of cell/ may use of
 * it. `Iam` is the instance (cell/iam/iam.ts: who a principal is and what it holds, API keys, the
 * one containment check, the audit trail, the cell's identity key, creating a principal inside a
 * caller's transaction); `Lifecycle` is the owner lifecycle other modules hook into
 * (cell/iam/lifecycle.ts). The types below are the module's public concepts.
 */
import type { Ceiling } from '../../core/authority/ceiling.ts';
import type { Grant } from '../../core/authority/contain.ts';

export { callerHolding, Iam, isDelegated } from './iam.ts';
export { Lifecycle, type DeactivateHook, type LifecycleAction } from './lifecycle.ts';

export type PrincipalKind = 'user' | 'service' | 'agent';
export type PrincipalStatus = 'active' | 'archived' | 'deleted' | 'purged';

export interface Principal {
  id: string;
  kind: PrincipalKind;
  name: string;
  status: PrincipalStatus;
  roles: string[];
  /** Envelope ceiling: the most envelope authority this principal holds (core/authority/ceiling.ts). */
  authority: Ceiling;
  created_at: number;
  created_by: string | null;
  status_changed_at: number | null;
}

export interface NewPrincipal {
  kind: PrincipalKind;
  name: string;
  roles: string[];
  authority: Ceiling;
  passwordHash?: string | null;
  createdBy: string | null;
}

/** A credential as the right to act on it sees it. */
export interface CredentialFacts {
  kind: 'api_key' | 'oauth_client' | 'sat' | 'secret' | 'device';
  id: string;
  /** The principal it belongs to (null: the cell's own). */
  ownerId: string | null;
  /** What holding it lets one do. */
  authority: Grant;
}

export type CredentialVerdict =
  | { ok: true }
  | { ok: false; exceeds: { permissions?: string[]; envelope?: (string | 'unbounded')[] }; owner_id?: string };

/** Something a change of a shared thing reaches (an agent, hence its seats), and who owns it. */
export interface Reached {
  id: string;
  authority: Grant;
  ownerId: string | null;
}
