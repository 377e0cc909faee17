/**
 * Run ids of offline runs, bound to the device that ran them.
 *
 * A device names a run `run_` + the first 20 hex digits (80 bits) of
 * SHA-256("agent-cell/edge-run/1\n" + device_id + "\n" + nonce), with a fresh
 * 128-bit nonce it keeps with the run and carries in the journal export
 * (format 2). The importing cell recomputes the id from the registered device
 * that signed the export: a device cannot import under another device's run id
 * (that would need a second preimage of 80 bits), so it cannot take a run id
 * first and lock the real journal out.
 */
import { sha256Hex } from './codec.ts';

const DOMAIN = 'agent-cell/edge-run/1';

/** A run nonce: 32 lower-case hex digits (128 bits). */
export const RUN_NONCE = /^[0-9a-f]{32}$/;

/** The run id a device with id `deviceId` gives the run of `nonce`. */
export async function edgeRunId(deviceId: string, nonce: string): Promise<string> {
  if (!RUN_NONCE.test(nonce)) throw new TypeError('a run nonce is 32 lower-case hex digits');
  const h = await sha256Hex(`${DOMAIN}\n${deviceId}\n${nonce}`);
  return `run_${h.slice(0, 20)}`;
}

/** A fresh run of device `deviceId`: its nonce and the id derived from it. */
export async function newEdgeRun(deviceId: string): Promise<{ run_id: string; run_nonce: string }> {
  const b = globalThis.crypto.getRandomValues(new Uint8Array(16));
  const nonce = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return { run_id: await edgeRunId(deviceId, nonce), run_nonce: nonce };
}
