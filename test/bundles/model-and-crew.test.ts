import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildModelManifest, checkModelFile, openModelManifest } from '../../bundles/model-manifest.ts';
import { buildCrewBundle, openCrewBundle, type CrewContent } from '../../bundles/crew-bundle.ts';
import { sha256Hex } from '../../bundles/codec.ts';
import { contentHash } from '../../core/canonical.ts';
import { keyPair, T0 } from './_fixtures.ts';

const reason = (e: unknown) => (e as { details?: { reason?: string } }).details?.reason;

test('a model manifest binds the file hash and size; a tampered file or manifest is refused', async () => {
  const pub = await keyPair();
  const file = new TextEncoder().encode('GGUF fake model bytes');
  const sha256 = await sha256Hex(file);
  const text = await buildModelManifest({
    publisher: 'acme',
    signer: pub.signer,
    issuedAt: T0,
    model: { name: 'tiny', format: 'gguf', size: file.length, sha256 },
  });
  const opened = await openModelManifest(text, [pub.trusted]);
  assert.doesNotThrow(() => checkModelFile(opened.payload, { size: file.length, sha256 }));
  const tampered = file.slice();
  tampered[0] = tampered[0]! ^ 1;
  const tamperedHash = await sha256Hex(tampered);
  assert.throws(
    () => checkModelFile(opened.payload, { size: tampered.length, sha256: tamperedHash }),
    (e) => reason(e) === 'model_tampered',
  );
  await assert.rejects(openModelManifest(text.replace(sha256, tamperedHash), [pub.trusted]), (e) => reason(e) === 'bad_signature');
  const other = await keyPair();
  await assert.rejects(openModelManifest(text, [other.trusted]), (e) => reason(e) === 'untrusted_issuer');
});

test('a crew bundle is refused when the verifier cannot reproduce its graph and hash', async () => {
  const { signer, trusted } = await keyPair();
  const graph = { nodes: [{ id: 'a' }], edges: [] };
  const crew: CrewContent = {
    crew_id: 'crew_1',
    name: 'c',
    formation_id: 'f_1',
    graph,
    graph_hash: contentHash(graph),
    compiler_input: { formation: {}, billets: [], bindings: null },
    agents: [],
    blueprints: [],
    skills: [],
    contracts: [],
    tool_grants: {},
    budgets: {},
  };
  const ok = await buildCrewBundle({
    issuer: 'cell-a',
    signer,
    audience: 'dev-1',
    version: 1,
    issuedAt: T0,
    expiresAt: null,
    crew,
    model: null,
  });
  const check = (c: CrewContent) => contentHash(c.graph) === c.graph_hash; // stand-in for recompiling
  const opened = await openCrewBundle(ok, [trusted], check);
  assert.equal(opened.payload.crew.crew_id, 'crew_1');
  const bad = await buildCrewBundle({
    issuer: 'cell-a',
    signer,
    audience: 'dev-1',
    version: 2,
    issuedAt: T0,
    expiresAt: null,
    crew: { ...crew, graph: { nodes: [], edges: [] } },
    model: null,
  });
  await assert.rejects(openCrewBundle(bad, [trusted], check), (e) => reason(e) === 'graph_hash_mismatch');
});
