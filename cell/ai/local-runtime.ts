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
 * A request offering tools is answered with node-llama-cpp's function calling
 * (grammar-constrained, `tool_choice` honoured: runtime/local-chat.ts), as at
 * the edge; one without, from the chat flattened to one prompt.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ServiceError, invalid } from '../../core/errors.ts';
import type { TrustedKey } from '../../bundles/codec.ts';
import { findRuntime, loadLocalSignedModel, type LocalModel } from '../../runtime/local-model.ts';
import type { ChatDelta, ChatRequest, ChatResult } from './openai-client.ts';
import type { ChatMessage, ModelDelta } from '../../core/engine/types.ts';
import type { JsonObject } from '../../core/journal/record.ts';
import { fromWireName, toWireName } from '../../core/engine/wire-name.ts';
import type { LocalChatRequest } from '../../runtime/local-chat.ts';
import { LOCAL_MODEL_NAME, type CallOptions, type LocalModelRuntime, type Provider } from './providers.ts';

const DEFAULT_MAX_TOKENS = 256;

/** A piece of the answer as the call path streams it (a call's name in its wire spelling). */
function wireDelta(d: ModelDelta): ChatDelta {
  const c = d.tool_call;
  return { text: d.text, ...(c ? { tool_call: { index: c.index, ...(c.name !== undefined ? { name: toWireName(c.name) } : {}) } } : {}) };
}

/**
 * A request offering tools as the local runtime's chat (engine shapes: catalog names, parsed arguments);
 * null when it offers none or says `none` (then the chat is one prompt, as before tools).
 */
function localChatOf(req: ChatRequest): Omit<LocalChatRequest, 'maxTokens'> | null {
  const tools = req.tools ?? [];
  if (tools.length === 0 || req.tool_choice === 'none') return null;
  const messages: ChatMessage[] = req.messages.map((x) => ({
    role: x.role,
    content: x.content ?? '',
    ...(x.tool_call_id !== undefined ? { tool_call_id: x.tool_call_id } : {}),
    ...(x.tool_calls?.length
      ? {
          tool_calls: x.tool_calls.map((c) => ({
            id: c.id,
            name: fromWireName(c.function.name),
            arguments: parsedArguments(c.function.arguments),
          })),
        }
      : {}),
  }));
  const choice = req.tool_choice;
  return {
    messages,
    tools: tools.map((t) => ({
      name: fromWireName(t.function.name),
      description: t.function.description,
      parameters: t.function.parameters as JsonObject,
    })),
    toolChoice:
      choice === undefined || choice === 'auto'
        ? undefined
        : typeof choice === 'string'
          ? choice
          : { name: fromWireName(choice.function.name) },
  };
}

/** A call's arguments (JSON text on the wire) as an object; anything else as none. */
function parsedArguments(text: string): JsonObject {
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as JsonObject) : {};
  } catch {
    return {};
  }
}

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
      const max = req.max_tokens ?? DEFAULT_MAX_TOKENS;
      const onDelta = opts.onDelta;
      const usage = (i: number, o: number) => ({ prompt_tokens: i, completion_tokens: o, total_tokens: i + o });
      // Offered tools: node-llama-cpp's function calling, grammar-constrained (runtime/local-chat.ts), as at the edge.
      const chat = localChatOf(req);
      if (chat !== null) {
        const a = await m.chat({ ...chat, maxTokens: max }, onDelta ? (d) => onDelta(wireDelta(d)) : undefined, opts.signal);
        return {
          content: a.text,
          tool_calls: a.toolCalls.map((c) => ({
            id: c.id,
            type: 'function' as const,
            function: { name: toWireName(c.name), arguments: JSON.stringify(c.arguments) },
          })),
          finish_reason: a.toolCalls.length > 0 ? 'tool_calls' : a.outputTokens >= max ? 'length' : 'stop',
          usage: usage(a.inputTokens, a.outputTokens),
          model: name,
        };
      }
      const prompt = req.messages.map((x) => `${x.role}: ${x.content ?? ''}`).join('\n') + '\nassistant:';
      const r = await m.complete(prompt, max, onDelta ? (text) => onDelta({ text }) : undefined, opts.signal);
      return {
        content: r.text,
        tool_calls: [],
        finish_reason: r.outputTokens >= max ? 'length' : 'stop',
        usage: usage(r.inputTokens, r.outputTokens),
        model: name,
      };
    },
  };
}
