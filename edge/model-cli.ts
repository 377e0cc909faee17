/**
 * `edge model keygen --out PUB.json` and `edge model sign --model FILE --key PUB.json --name N --out MANIFEST`:
 * the publisher's side of the model manifest. The key file holds the private
 * key: keep it with the publisher, pin only {kid, jwk} on devices (`edge trust --publisher`).
 */
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { generateEd25519, signerFromJwk } from '../bundles/codec.ts';
import { buildModelManifest } from '../bundles/model-manifest.ts';
import { writeFileDurable } from './files.ts';
import { measureFile } from '../runtime/model-file.ts';
import { UsageError, type CommandHelp } from '../runtime/cli.ts';

/** The help of `model keygen` and `model sign` (edge/main.ts's command table). */
export const MODEL_HELP: Record<'keygen' | 'sign', CommandHelp> = {
  keygen: {
    summary: 'a model publisher key pair (keep it off the device; pin only {kid, jwk} with trust --publisher)',
    usage: '--out PUBLISHER.json [--publisher NAME]',
  },
  sign: {
    summary: 'sign a model manifest (the file SHA-256 and size)',
    usage: '--model FILE --key PUBLISHER.json [--name NAME] --out MANIFEST',
  },
};

/** `model keygen|sign`: argv[0] is the subcommand (the dispatcher checked it), the rest its options. */
export async function modelCommand(argv: string[]): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub === 'keygen') {
    const { values } = parseArgs({ args: rest, options: { out: { type: 'string' }, publisher: { type: 'string' } }, strict: true });
    if (!values.out) throw new UsageError('model keygen needs --out FILE');
    const k = await generateEd25519();
    writeFileDurable(
      values.out,
      JSON.stringify({ publisher: values.publisher ?? 'publisher', kid: k.kid, jwk: k.publicJwk, private_jwk: k.privateJwk }, null, 1) +
        '\n',
      0o600,
    );
    process.stdout.write(JSON.stringify({ kid: k.kid, jwk: k.publicJwk }) + '\n');
    return;
  }
  if (sub === 'sign') {
    const { values } = parseArgs({
      args: rest,
      options: { model: { type: 'string' }, key: { type: 'string' }, name: { type: 'string' }, out: { type: 'string' } },
      strict: true,
    });
    if (!values.model || !values.key || !values.out) throw new UsageError('model sign needs --model FILE --key PUBLISHER.json --out FILE');
    const key = JSON.parse(readFileSync(values.key, 'utf8')) as { publisher: string; kid: string; private_jwk: JsonWebKey };
    const m = await measureFile(values.model);
    const text = await buildModelManifest({
      publisher: key.publisher,
      signer: signerFromJwk(key.kid, key.private_jwk),
      issuedAt: Date.now(),
      model: { name: values.name ?? basename(values.model), format: 'gguf', size: m.size, sha256: m.sha256 },
    });
    writeFileDurable(values.out, text);
    process.stdout.write(`signed manifest for ${values.model} (${m.size} bytes, sha256 ${m.sha256})\n`);
    return;
  }
  throw new UsageError('model takes keygen or sign');
}
