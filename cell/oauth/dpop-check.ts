/**
 * The cell side of DPoP: the per-cell replay cache and the proof check of a
 * request, with the expected htu built from the configured public URL and
 * the route path (never from Host or X-Forwarded-* headers).
 */
import type { Context } from 'hono';
import { verifyDpopProof } from '../../core/tokens/dpop.ts';
import { MemoryReplayCache } from '../../core/tokens/replay.ts';
import { dpopHeaderOf } from '../../core/tokens/request.ts';
import type { AppEnv, Cell } from '../context.ts';
import { OAUTH, publicBase } from './settings.ts';

const caches = new WeakMap<Cell, MemoryReplayCache>();

export function replayCache(cell: Cell): MemoryReplayCache {
  let r = caches.get(cell);
  if (!r) { r = new MemoryReplayCache(); caches.set(cell, r); }
  return r;
}

/** The single DPoP header of the request, or null; several headers are malformed. */
export function dpopHeader(c: Context<AppEnv>): string | null {
  return dpopHeaderOf(c.req.raw.headers);
}

/** Verifies the request's DPoP proof; returns its key thumbprint. Throws TokenError. */
export async function checkRequestProof(cell: Cell, c: Context<AppEnv>, proof: string, accessToken?: string): Promise<string> {
  const r = await verifyDpopProof(proof, {
    htm: c.req.method,
    htu: publicBase(cell) + c.req.path,
    now: cell.clock.now(),
    replay: replayCache(cell),
    window: OAUTH.dpopWindow,
    ...(accessToken !== undefined ? { accessToken } : {}),
  });
  return r.jkt;
}
