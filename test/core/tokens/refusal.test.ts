// core/tokens/refusal.ts: the challenge of a refused token, in the scheme it came with. `algs` is a parameter of the
// DPoP scheme (RFC 9449 §7.1) and of no other: a Bearer challenge (RFC 6750 §3) never carries it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tokenRefusal } from '../../../core/tokens/refusal.ts';
import { DPOP_ALGS } from '../../../core/tokens/dpop.ts';

const challenge = (...a: Parameters<typeof tokenRefusal>) => tokenRefusal(...a).headers?.['WWW-Authenticate'];

test('a Bearer challenge: realm and error, no algs; a DPoP challenge names the proof algorithms', () => {
  assert.equal(challenge({ code: 'expired', message: 'x' }, 'bearer', { realm: 'cell' }), 'Bearer realm="cell", error="invalid_token"');
  assert.equal(
    challenge({ code: 'expired', message: 'x' }, 'dpop', { realm: 'cell' }),
    `DPoP realm="cell", error="invalid_token", algs="${DPOP_ALGS.join(' ')}"`,
  );
  assert.equal(
    challenge({ code: 'dpop_replay', message: 'x' }, 'dpop', { realm: 'edge' }),
    `DPoP realm="edge", error="invalid_dpop_proof", algs="${DPOP_ALGS.join(' ')}"`,
  );
});

test('resource_metadata (RFC 9728 §5.1) is kept on both schemes', () => {
  const o = { realm: 'edge', resourceMetadata: 'https://edge.example/.well-known/oauth-protected-resource' };
  assert.equal(
    challenge({ code: 'bad_signature', message: 'x' }, 'bearer', o),
    `Bearer realm="edge", error="invalid_token", resource_metadata="${o.resourceMetadata}"`,
  );
  assert.match(challenge({ code: 'bad_signature', message: 'x' }, 'dpop', o) ?? '', /, algs="[^"]+", resource_metadata="/);
});
