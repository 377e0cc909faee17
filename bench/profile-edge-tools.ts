import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildModelManifest } from '../bundles/model-manifest.ts';
import { generateEd25519, sha256Hex, signerFromJwk } from '../bundles/codec.ts';
import { CALC } from '../core/catalog/builtin.ts';
import { loadLocalSignedModel } from '../runtime/local-model.ts';
import { makeTinyGguf } from '../scripts/make-tiny-gguf.ts';
const dir = mkdtempSync(join(tmpdir(), 'prof-'));
const bytes = makeTinyGguf(42);
writeFileSync(join(dir, 'tiny.gguf'), bytes);
const pub = await generateEd25519();
writeFileSync(
  join(dir, 'tiny.manifest'),
  await buildModelManifest({
    publisher: 'p',
    signer: signerFromJwk(pub.kid, pub.privateJwk),
    issuedAt: 0,
    model: { name: 'tiny', format: 'gguf', size: bytes.length, sha256: await sha256Hex(bytes) },
  }),
);
const model = await loadLocalSignedModel({
  modelPath: join(dir, 'tiny.gguf'),
  manifestPath: join(dir, 'tiny.manifest'),
  publishers: [{ kid: pub.kid, jwk: pub.publicJwk }],
  scratchDir: dir,
});
const tools = [{ name: CALC.name, description: CALC.description, parameters: CALC.parameters }];
const req = {
  messages: [
    { role: 'system' as const, content: 'You are the field recorder.' },
    { role: 'user' as const, content: 'Record pump 7.' },
  ],
  tools,
  toolChoice: { name: 'calc' },
  maxTokens: 400,
  partition: 'run',
};
await model.chat(req);
const t0 = performance.now();
for (let i = 0; i < 40; i++) await model.chat(req);
console.log('warm call ms', (performance.now() - t0) / 40);
await model.dispose();
