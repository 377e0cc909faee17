/**
 * The cell's `local-signed` model runtime (the AI module's, for providers of
 * type local-signed, when node-llama-cpp is installed beside the program in
 * edge-runtime/): the same verified loader the edge runs
 * (runtime/local-model.ts: manifest signature against a pinned publisher,
 * file size and SHA-256, then node-llama-cpp on CPU, greedy).
 *
 * Files, in the cell's data directory:
 *   models/<default_model>.gguf       the model
 *   models/<default_model>.manifest   its signed manifest (`edge model sign`)
 *   models/publishers.json            pinned publisher keys: [{ kid, jwk }]
 * A provider's `default_model` names the pair. Models load on first use and
 * stay loaded; a model that fails verification is never loaded (403
 * model_tampered / bad_signature / untrusted_issuer). The file is read once
 * into a private copy in the data directory, verified, and the copy loaded.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ServiceError, invalid } from '../../core/errors.ts';
import type { TrustedKey } from '../../bundles/codec.ts';
import { findRuntime, loadLocalSignedModel, type LocalModel } from '../../runtime/local-model.ts';
import type { ChatRequest, ChatResult } from './openai-client.ts';
import { LOCAL_MODEL_NAME, type CallOptions, type LocalModelRuntime, type Provider } from './providers.ts';

const DEFAULT_MAX_TOKENS = 256;

/** The runtime when node-llama-cpp is installed beside the program (edge-runtime/), else null. */
export function localRuntime(dataDir: string): (LocalModelRuntime & { dispose(): Promise<void> }) | null {
  try {
    findRuntime();
  } catch {
    return null;
  }
  const dir = join(dataDir, 'models');
  const loaded = new Map<string, Promise<LocalModel>>();

  function publishers(): TrustedKey[] {
    const f = join(dir, 'publishers.json');
    if (!existsSync(f)) return [];
    try {
      return (JSON.parse(readFileSync(f, 'utf8')) as { kid: string; jwk: JsonWebKey }[]).map((p) => ({
        kid: p.kid,
        jwk: { kty: 'OKP', crv: 'Ed25519', x: p.jwk.x } as JsonWebKey,
      }));
    } catch {
      return []; // unreadable pins trust nobody: every manifest is refused
    }
  }

  function model(name: string): Promise<LocalModel> {
    if (!LOCAL_MODEL_NAME.test(name))
      return Promise.reject(invalid('a local-signed model name is letters, digits, dot, dash, underscore', { reason: 'bad_model_name' }));
    let p = loaded.get(name);
    if (!p) {
      const modelPath = join(dir, `${name}.gguf`);
      const manifestPath = join(dir, `${name}.manifest`);
      if (!existsSync(modelPath) || !existsSync(manifestPath)) {
        return Promise.reject(
          new ServiceError('service_unavailable', `local model ${name} is not installed on this cell`, {
            details: { reason: 'model_missing', model: name },
          }),
        );
      }
      p = loadLocalSignedModel({ modelPath, manifestPath, publishers: publishers(), scratchDir: dataDir });
      loaded.set(name, p);
      p.catch(() => loaded.delete(name));
    }
    return p;
  }

  return {
    async dispose() {
      const all = [...loaded.values()];
      loaded.clear();
      for (const p of all)
        await p.then(
          (m) => m.dispose(),
          () => undefined,
        );
    },
    async complete(provider: Provider, req: ChatRequest, opts: CallOptions = {}): Promise<ChatResult> {
      const name = req.model || provider.default_model;
      const m = await model(name);
      const prompt = req.messages.map((x) => `${x.role}: ${x.content ?? ''}`).join('\n') + '\nassistant:';
      const max = req.max_tokens ?? DEFAULT_MAX_TOKENS;
      const onDelta = opts.onDelta;
      const r = await m.complete(prompt, max, onDelta ? (text) => onDelta({ text }) : undefined);
      return {
        content: r.text,
        tool_calls: [],
        finish_reason: r.outputTokens >= max ? 'length' : 'stop',
        usage: { prompt_tokens: r.inputTokens, completion_tokens: r.outputTokens, total_tokens: r.inputTokens + r.outputTokens },
        model: name,
      };
    },
  };
}
