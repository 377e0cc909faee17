import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openEnvelope, sealEnvelope, splitEnvelope, type PayloadHeader } from '../../bundles/envelope.ts';
import { acceptArtifact, emptyDeviceState, checkClock } from '../../bundles/accept.ts';
import { canonicalJson } from '../../bundles/codec.ts';
import { keyPair, T0 } from './_fixtures.ts';

function header(kid: string, over: Partial<PayloadHeader> = {}): PayloadHeader & Record<string, unknown> {
  return {
    format_version: 1,
    type: 'crew',
    issuer: 'cell-a',
    kid,
    audience: 'dev-1',
    version: 3,
    issued_at: T0,
    expires_at: T0 + 3600_000,
    ...over,
  };
}

function reason(e: unknown): string {
  return (e as { details?: { reason?: string } }).details?.reason ?? 'none';
}

test('a sealed envelope is canonical JSON and opens with the trusted key', async () => {
  const { signer, trusted } = await keyPair();
  const text = await sealEnvelope({ ...header(signer.kid), crew: { b: 1, a: 2 } }, signer);
  const parts = splitEnvelope(text)!;
  assert.equal(text.split('\n')[0], canonicalJson(parts.header), 'header line is canonical JSON');
  assert.equal(parts.header['format'], 'agent-cell-signed/1');
  assert.equal(parts.payload, canonicalJson(JSON.parse(parts.payload)), 'payload is canonical JSON');
  const opened = await openEnvelope(text, [trusted], 'crew');
  assert.equal(opened.payload.version, 3);
  assert.match(opened.hash, /^[0-9a-f]{64}$/);
});

test('refuses a bad signature (payload changed after signing)', async () => {
  const { signer, trusted } = await keyPair();
  const text = await sealEnvelope(header(signer.kid), signer);
  const tampered = text.replace('"version":3', '"version":4');
  assert.notEqual(tampered, text);
  await assert.rejects(
    openEnvelope(tampered, [trusted], 'crew'),
    (e) => reason(e) === 'bad_signature' && (e as { code: string }).code === 'forbidden',
  );
});

test('refuses a signature from another key that claims a trusted kid', async () => {
  const a = await keyPair();
  const b = await keyPair();
  const forged = await sealEnvelope(header(b.signer.kid), b.signer);
  const claimed = forged.replaceAll(b.signer.kid, a.signer.kid);
  await assert.rejects(openEnvelope(claimed, [a.trusted], 'crew'), (e) => reason(e) === 'bad_signature');
});

test("refuses another cell's bundle: untrusted key, or a trusted key naming another issuer", async () => {
  const a = await keyPair();
  const other = await keyPair();
  const text = await sealEnvelope(header(other.signer.kid, { issuer: 'cell-b' }), other.signer);
  await assert.rejects(openEnvelope(text, [a.trusted], 'crew'), (e) => reason(e) === 'untrusted_issuer');
  const sameKey = await sealEnvelope(header(a.signer.kid, { issuer: 'cell-b' }), a.signer);
  const opened = await openEnvelope(sameKey, [a.trusted], 'crew');
  assert.throws(
    () => acceptArtifact(emptyDeviceState('dev-1'), opened, { now: T0, issuer: 'cell-a' }),
    (e) => reason(e) === 'wrong_issuer',
  );
});

test("refuses another device's bundle (audience)", async () => {
  const { signer, trusted } = await keyPair();
  const opened = await openEnvelope(await sealEnvelope(header(signer.kid, { audience: 'dev-2' }), signer), [trusted], 'crew');
  assert.throws(
    () => acceptArtifact(emptyDeviceState('dev-1'), opened, { now: T0, issuer: 'cell-a' }),
    (e) => reason(e) === 'wrong_audience',
  );
  assert.doesNotThrow(() => acceptArtifact(emptyDeviceState('dev-2'), opened, { now: T0, issuer: 'cell-a' }));
});

test('refuses an expired bundle (at and after expires_at)', async () => {
  const { signer, trusted } = await keyPair();
  const opened = await openEnvelope(await sealEnvelope(header(signer.kid), signer), [trusted], 'crew');
  const s = emptyDeviceState('dev-1');
  assert.doesNotThrow(() => acceptArtifact(s, opened, { now: T0 + 3600_000 - 1, issuer: 'cell-a' }));
  assert.throws(
    () => acceptArtifact(s, opened, { now: T0 + 3600_000, issuer: 'cell-a' }),
    (e) => reason(e) === 'expired',
  );
});

test('refuses a version lower than the highest seen, accepts higher and the same bytes again', async () => {
  const { signer, trusted } = await keyPair();
  const v3 = await openEnvelope(await sealEnvelope(header(signer.kid, { version: 3 }), signer), [trusted], 'crew');
  const v2 = await openEnvelope(await sealEnvelope(header(signer.kid, { version: 2 }), signer), [trusted], 'crew');
  const v4 = await openEnvelope(await sealEnvelope(header(signer.kid, { version: 4 }), signer), [trusted], 'crew');
  let s = acceptArtifact(emptyDeviceState('dev-1'), v3, { now: T0, issuer: 'cell-a' });
  assert.throws(
    () => acceptArtifact(s, v2, { now: T0 + 1, issuer: 'cell-a' }),
    (e) => reason(e) === 'version_rollback' && (e as { code: string }).code === 'conflict',
  );
  s = acceptArtifact(s, v3, { now: T0 + 2, issuer: 'cell-a' });
  assert.equal(s.seen['crew:cell-a']!.accepted_at, T0, 'reloading the same bytes keeps the first acceptance');
  s = acceptArtifact(s, v4, { now: T0 + 3, issuer: 'cell-a' });
  assert.equal(s.seen['crew:cell-a']!.version, 4);
  // What the device has seen survives a save/load round trip as JSON.
  const reloaded = JSON.parse(JSON.stringify(s));
  assert.throws(
    () => acceptArtifact(reloaded, v3, { now: T0 + 4, issuer: 'cell-a' }),
    (e) => reason(e) === 'version_rollback',
  );
});

test('refuses the same version with a different hash', async () => {
  const { signer, trusted } = await keyPair();
  const a = await openEnvelope(await sealEnvelope({ ...header(signer.kid), crew: 'a' }, signer), [trusted], 'crew');
  const b = await openEnvelope(await sealEnvelope({ ...header(signer.kid), crew: 'b' }, signer), [trusted], 'crew');
  const s = acceptArtifact(emptyDeviceState('dev-1'), a, { now: T0, issuer: 'cell-a' });
  assert.throws(
    () => acceptArtifact(s, b, { now: T0 + 1, issuer: 'cell-a' }),
    (e) => reason(e) === 'version_conflict',
  );
});

test('refuses when the clock was set back before the last accepted bundle', async () => {
  const { signer, trusted } = await keyPair();
  const v3 = await openEnvelope(await sealEnvelope(header(signer.kid, { version: 3 }), signer), [trusted], 'crew');
  const v4 = await openEnvelope(await sealEnvelope(header(signer.kid, { version: 4 }), signer), [trusted], 'crew');
  const s = acceptArtifact(emptyDeviceState('dev-1'), v3, { now: T0 + 60_000, issuer: 'cell-a' });
  assert.throws(
    () => acceptArtifact(s, v4, { now: T0 + 59_999, issuer: 'cell-a' }),
    (e) => reason(e) === 'clock_rollback',
  );
  assert.throws(
    () => checkClock(s, T0),
    (e) => reason(e) === 'clock_rollback',
  );
  assert.doesNotThrow(() => checkClock(s, T0 + 60_000));
});

test("refuses a bundle issued far in the device's future (clock behind)", async () => {
  const { signer, trusted } = await keyPair();
  const opened = await openEnvelope(
    await sealEnvelope(header(signer.kid, { issued_at: T0 + 3600_000, expires_at: null }), signer),
    [trusted],
    'crew',
  );
  assert.throws(
    () => acceptArtifact(emptyDeviceState('dev-1'), opened, { now: T0, issuer: 'cell-a' }),
    (e) => reason(e) === 'clock_behind',
  );
});

test('refuses malformed files, unknown formats and the wrong artifact type', async () => {
  const { signer, trusted } = await keyPair();
  await assert.rejects(
    openEnvelope('not json', [trusted], 'crew'),
    (e) => reason(e) === 'malformed' && (e as { code: string }).code === 'invalid_request',
  );
  const text = await sealEnvelope(header(signer.kid), signer);
  await assert.rejects(
    openEnvelope(text.replace('agent-cell-signed/1', 'agent-cell-signed/9'), [trusted], 'crew'),
    (e) => reason(e) === 'unsupported_format',
  );
  await assert.rejects(openEnvelope('{"a":1}', [trusted], 'crew'), (e) => reason(e) === 'malformed');
  await assert.rejects(openEnvelope(text, [trusted], 'api-key-records'), (e) => reason(e) === 'wrong_type');
  const v9 = await sealEnvelope({ ...header(signer.kid), format_version: 9 }, signer);
  await assert.rejects(openEnvelope(v9, [trusted], 'crew'), (e) => reason(e) === 'unsupported_format');
});
