/**
 * Model manifest: a model file's identity signed by its publisher.
 *
 * Payload (type `model-manifest`, audience null: a model is for any device):
 *   model: { name, format: 'gguf', size (bytes), sha256 (hex of the file) }
 * The edge verifies the manifest against the pinned publisher key, then the
 * file's size and SHA-256, before the runtime ever opens the file: a model
 * whose signature, size or hash does not match is never loaded.
 */
import { PAYLOAD_FORMAT_VERSION } from './format.ts';
import { isObject, openEnvelope, refused, sealEnvelope, type OpenedEnvelope, type PayloadHeader } from './envelope.ts';
import type { Signer, TrustedKey } from './codec.ts';

export const MODEL_FORMATS = ['gguf'] as const;

export interface ModelDescriptor {
  name: string;
  format: (typeof MODEL_FORMATS)[number];
  size: number;
  sha256: string;
}

export interface ModelManifest extends PayloadHeader {
  type: 'model-manifest';
  model: ModelDescriptor;
}

/** Signs a manifest for a model file whose size and SHA-256 the caller measured. */
export async function buildModelManifest(opts: {
  publisher: string;
  signer: Signer;
  model: ModelDescriptor;
  version?: number;
  issuedAt: number;
}): Promise<string> {
  const payload: ModelManifest = {
    format_version: PAYLOAD_FORMAT_VERSION,
    type: 'model-manifest',
    issuer: opts.publisher,
    kid: opts.signer.kid,
    audience: null,
    version: opts.version ?? 1,
    issued_at: opts.issuedAt,
    expires_at: null,
    model: opts.model,
  };
  return sealEnvelope(payload as unknown as ModelManifest & Record<string, unknown>, opts.signer);
}

/** Verifies a manifest's signature and shape. */
export async function openModelManifest(
  text: string | Uint8Array,
  publishers: readonly TrustedKey[],
): Promise<OpenedEnvelope<ModelManifest>> {
  const opened = await openEnvelope(text, publishers, 'model-manifest');
  const m = (opened.payload as Partial<ModelManifest>).model;
  if (
    !isObject(m) ||
    typeof m['name'] !== 'string' ||
    !(MODEL_FORMATS as readonly string[]).includes(m['format'] as string) ||
    !Number.isSafeInteger(m['size']) ||
    typeof m['sha256'] !== 'string' ||
    !/^[0-9a-f]{64}$/.test(m['sha256'])
  ) {
    throw refused('malformed', 'the model manifest is malformed', 'invalid_request');
  }
  return opened as OpenedEnvelope<ModelManifest>;
}

/** Refuses a model file whose measured size or SHA-256 differs from the manifest. */
export function checkModelFile(manifest: ModelManifest, measured: { size: number; sha256: string }): void {
  if (measured.size !== manifest.model.size || measured.sha256 !== manifest.model.sha256) {
    throw refused('model_tampered', 'the model file does not match its signed manifest; it is not loaded', 'forbidden');
  }
}
