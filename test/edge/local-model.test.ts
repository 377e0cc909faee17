// The local-signed model: verified before loading, greedy and deterministic, exact token counts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeTinyGguf } from '../../scripts/make-tiny-gguf.ts';
import { buildModelManifest } from '../../bundles/model-manifest.ts';
import { generateEd25519, sha256Hex, signerFromJwk } from '../../bundles/codec.ts';
import { findRuntime, loadLocalSignedModel } from '../../runtime/local-model.ts';
import { signedTinyModel } from '../fixtures/tiny-model.ts';

let runtime: string | null = null;
try {
  runtime = findRuntime();
} catch {
  runtime = null;
}
const skip = runtime ? false : 'edge-runtime/ is not installed (npm install --prefix edge-runtime --omit=optional)';

const fixture = () => signedTinyModel('edge-model-');

test('the tiny GGUF is byte-identical for a seed and different across seeds', () => {
  const a = makeTinyGguf(42);
  assert.deepEqual(a, makeTinyGguf(42));
  assert.notDeepEqual(a, makeTinyGguf(43));
  assert.ok(a.length > 400_000 && a.length < 520_000, `size ${a.length}`);
  assert.equal(new TextDecoder().decode(a.subarray(0, 4)), 'GGUF');
});

test('loads only a verified model; greedy output is identical across runs; tokens are counted', { skip, timeout: 60_000 }, async () => {
  const f = await fixture();
  try {
    const m = await loadLocalSignedModel({ modelPath: f.modelPath, manifestPath: f.manifestPath, publishers: f.publishers });
    try {
      const a = await m.complete('Summarise the field report.', 24);
      const b = await m.complete('Summarise the field report.', 24);
      assert.equal(a.text, b.text);
      assert.equal(a.outputTokens, b.outputTokens);
      assert.ok(a.outputTokens > 0 && a.outputTokens <= 24);
      // Byte-level vocabulary: at least one token per UTF-8 byte of the prompt, plus BOS.
      assert.equal(a.inputTokens, b.inputTokens);
      assert.ok(a.inputTokens > new TextEncoder().encode('Summarise the field report.').length, `input tokens ${a.inputTokens}`);
      const z = await m.complete('x', 0);
      assert.equal(z.outputTokens, 0);
    } finally {
      await m.dispose();
    }
  } finally {
    rmSync(f.dir, { recursive: true, force: true });
  }
});

test('a signal stops a generation before its next token, and a queued call is never started', { skip, timeout: 120_000 }, async () => {
  const f = await fixture();
  try {
    const m = await loadLocalSignedModel({ modelPath: f.modelPath, manifestPath: f.manifestPath, publishers: f.publishers });
    try {
      const prompt = 'system: You review.\nuser: go\nassistant:';
      // Stopped at its first piece: one piece, where the whole answer is hundreds of tokens.
      const ac = new AbortController();
      const pieces: string[] = [];
      const stopped = m.complete(
        prompt,
        400,
        (p) => {
          pieces.push(p);
          ac.abort();
        },
        ac.signal,
      );
      // A call queued behind it with a signal already aborted never runs.
      const queued = m.complete(prompt, 400, () => assert.fail('a stopped call generated'), AbortSignal.abort());
      await assert.rejects(stopped, (e: any) => e.details?.reason === 'cancelled');
      await assert.rejects(queued, (e: any) => e.details?.reason === 'cancelled');
      assert.equal(pieces.length, 1);
      // The model is free again, and the whole answer is long.
      const whole = await m.complete(prompt, 400);
      assert.ok(whole.outputTokens > 100, `${whole.outputTokens} tokens`);
    } finally {
      await m.dispose();
    }
  } finally {
    rmSync(f.dir, { recursive: true, force: true });
  }
});

test('a tampered model file or manifest is never loaded', { skip, timeout: 60_000 }, async () => {
  const f = await fixture();
  try {
    const t = f.bytes.slice();
    t[t.length - 1] = t[t.length - 1]! ^ 0xff;
    writeFileSync(f.modelPath, t);
    await assert.rejects(
      loadLocalSignedModel({ modelPath: f.modelPath, manifestPath: f.manifestPath, publishers: f.publishers }),
      (e) => (e as { details?: { reason?: string } }).details?.reason === 'model_tampered',
    );
    writeFileSync(f.modelPath, f.bytes);
    const manifest = (await import('node:fs')).readFileSync(f.manifestPath, 'utf8');
    writeFileSync(f.manifestPath, manifest.replace('"name":"tiny"', '"name":"tinz"'));
    await assert.rejects(
      loadLocalSignedModel({ modelPath: f.modelPath, manifestPath: f.manifestPath, publishers: f.publishers }),
      (e) => (e as { details?: { reason?: string } }).details?.reason === 'bad_signature',
    );
    const other = await generateEd25519();
    await assert.rejects(
      loadLocalSignedModel({
        modelPath: f.modelPath,
        manifestPath: f.manifestPath,
        publishers: [{ kid: other.kid, jwk: other.publicJwk }],
      }),
      (e) => (e as { details?: { reason?: string } }).details?.reason === 'untrusted_issuer',
    );
  } finally {
    rmSync(f.dir, { recursive: true, force: true });
  }
});

test('a model file swapped after verification is never loaded: the bytes loaded are the bytes hashed', {
  skip,
  timeout: 120_000,
}, async () => {
  const f = await fixture();
  const scratch = mkdtempSync(join(tmpdir(), 'edge-scratch-'));
  try {
    const evil = makeTinyGguf(43);
    assert.equal(evil.length, f.bytes.length, 'the swapped-in file has the same size');
    const prompt = 'Summarise the field report.';
    const outputOf = async (modelPath: string, manifestPath: string) => {
      const m = await loadLocalSignedModel({ modelPath, manifestPath, publishers: f.publishers, scratchDir: scratch });
      try {
        return (await m.complete(prompt, 24)).text;
      } finally {
        await m.dispose();
      }
    };
    const genuine = await outputOf(f.modelPath, f.manifestPath);
    // What the swapped-in model would say, were it loaded (verified by a manifest of its own, in another directory).
    const evilDir = mkdtempSync(join(tmpdir(), 'edge-evil-'));
    try {
      writeFileSync(join(evilDir, 'evil.gguf'), evil);
      writeFileSync(join(evilDir, 'evil.manifest'), await manifestFor(f, evil));
      const evilSays = await outputOf(join(evilDir, 'evil.gguf'), join(evilDir, 'evil.manifest'));
      assert.notEqual(evilSays, genuine, 'the two models answer differently');

      // The attack: the original path is swapped (a new file renamed over it) for the other model once the
      // check has passed, and swapped back once loading is done (so measuring the path again would not notice).
      const swapIn = (bytes: Uint8Array) => {
        writeFileSync(`${f.modelPath}.new`, bytes);
        renameSync(`${f.modelPath}.new`, f.modelPath);
      };
      let during: { entries: string[]; mode: number } | null = null;
      const m = await loadLocalSignedModel({
        modelPath: f.modelPath,
        manifestPath: f.manifestPath,
        publishers: f.publishers,
        scratchDir: scratch,
        afterVerify: () => {
          const entries = readdirSync(scratch);
          during = { entries, mode: statSync(join(scratch, entries[0]!)).mode & 0o777 };
          swapIn(evil);
        },
      });
      try {
        swapIn(f.bytes);
        assert.equal((await m.complete(prompt, 24)).text, genuine, 'the verified bytes were loaded, not the swapped file');
      } finally {
        await m.dispose();
      }
      assert.equal(during!.entries.length, 1);
      assert.match(during!.entries[0]!, /^\.model-/);
      assert.equal(during!.mode, 0o700, 'the private copy sits in a directory only this user can enter');
      assert.deepEqual(readdirSync(scratch), [], 'the private copy is removed once loaded');
    } finally {
      rmSync(evilDir, { recursive: true, force: true });
    }
  } finally {
    rmSync(f.dir, { recursive: true, force: true });
    rmSync(scratch, { recursive: true, force: true });
  }
});

async function manifestFor(f: Awaited<ReturnType<typeof fixture>>, bytes: Uint8Array): Promise<string> {
  return buildModelManifest({
    publisher: 'test-publisher',
    signer: signerFromJwk(f.publishers[0]!.kid, f.privateJwk),
    issuedAt: Date.UTC(2026, 0, 1),
    model: { name: 'tiny', format: 'gguf', size: bytes.length, sha256: await sha256Hex(bytes) },
  });
}
