/**
 * The `local-signed` model provider: a GGUF model run on CPU by node-llama-cpp,
 * loaded only after its signed manifest verified against a pinned publisher
 * key and the file's size and SHA-256 matched the manifest. The file is read
 * once, into a private copy measured as it is written (runtime/model-file.ts),
 * and the copy is what is loaded: a file swapped after the check is never
 * loaded.
 *
 * node-llama-cpp is never bundled: it is imported at run time from
 * `edge-runtime/node_modules` beside the program (the single executable's own
 * require() reaches only built-in modules, so a small CommonJS shim in that
 * folder, `edge-runtime/load.cjs`, does the ESM import). Search order:
 * $AGENT_CELL_EDGE_RUNTIME, then `edge-runtime/` next to the executable or
 * script and one level up, then `./edge-runtime`.
 *
 * Decoding is greedy (temperature 0), `gpu: false`, `threads: 1` by default
 * (two threads contend on two cores); calls are serialized on the context's
 * one sequence, kept between the calls of one partition (a run): a call
 * evaluates only what it does not share with what the sequence holds (a
 * tool-calling prompt's function documentation, a conversation it continues);
 * a call of another partition, or of none, starts empty. The same prompt gives
 * the same output.
 */
import { createRequire } from 'node:module';
import { existsSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { ServiceError } from '../core/errors.ts';
import { checkModelFile, openModelManifest, type ModelManifest } from '../bundles/model-manifest.ts';
import { MAX_MANIFEST_BYTES, readSignedArtifact } from './read-artifact.ts';
import type { TrustedKey } from '../bundles/codec.ts';
import { SetupError } from './setup-error.ts';
import { privateCopy } from './model-file.ts';
import type { ModelDelta } from '../core/engine/types.ts';
import { toolChoiceForces } from '../core/engine/tool-choice.ts';
import {
  chatHistory,
  chatWrapper,
  engineCalls,
  functionsOf,
  paramsDelta,
  type LocalChatAnswer,
  type LocalChatRequest,
} from './local-chat.ts';

export interface LocalModel {
  manifest: ModelManifest;
  publisherKid: string;
  /**
   * Greedy completion of `prompt`, at most `maxTokens` new tokens; exact token counts.
   * `onText` receives the text as it is generated (each new piece once decodable, in order; their
   * concatenation is the answer's text). `signal` stops the call: a call still waiting for the model is
   * not started, a generation stops before its next token; either rejects with reason `cancelled`.
   */
  complete(
    prompt: string,
    maxTokens: number,
    onText?: (piece: string) => void,
    signal?: AbortSignal,
    /** Calls of one partition (a run) reuse what the model evaluated of a shared prompt start; others never. */
    partition?: string,
  ): Promise<{ text: string; inputTokens: number; outputTokens: number }>;
  /**
   * One chat turn with tools (runtime/local-chat.ts): node-llama-cpp's function calling, grammar-constrained,
   * greedy; a forced `toolChoice` makes the answer a call. `onDelta` receives the text and each call's
   * parameters as they are generated; `signal` stops it as for `complete`.
   */
  chat(req: LocalChatRequest, onDelta?: (d: ModelDelta) => void, signal?: AbortSignal): Promise<LocalChatAnswer>;
  dispose(): Promise<void>;
}

export function findRuntime(): string {
  const candidates = [
    process.env['AGENT_CELL_EDGE_RUNTIME'],
    join(dirname(process.execPath), 'edge-runtime'),
    join(dirname(process.execPath), '..', 'edge-runtime'),
    process.argv[1] ? join(dirname(resolve(process.argv[1])), 'edge-runtime') : undefined,
    process.argv[1] ? join(dirname(resolve(process.argv[1])), '..', 'edge-runtime') : undefined,
    resolve('edge-runtime'),
  ].filter((p): p is string => typeof p === 'string');
  for (const c of candidates) {
    if (existsSync(join(c, 'load.cjs')) && existsSync(join(c, 'node_modules', 'node-llama-cpp'))) return c;
  }
  throw new SetupError(
    `the local model runtime is not installed: looked for edge-runtime/ with node_modules/node-llama-cpp in ${candidates.join(', ')} (install: npm install --prefix edge-runtime --omit=optional)`,
  );
}

/**
 * When node-llama-cpp forks `process.execPath` to test its native binding and
 * the edge is a single executable, the child is the edge itself: it runs the
 * runtime's script instead of the CLI. Only a script inside the installed
 * runtime's node-llama-cpp is honoured. Returns true when this process is such a child.
 */
export function runtimeChildBridge(): boolean {
  const script = process.argv[2];
  if (process.env['TEST_BINDING_CP'] !== 'true' || !script || !script.endsWith('.js')) return false;
  let runtime: string;
  try {
    runtime = findRuntime();
  } catch {
    return false;
  }
  // Both sides resolved through symlinks: the runtime may be a link (a shared edge-runtime/), and
  // the child sees its script under the real path.
  let root: string;
  let real: string;
  try {
    root = realpathSync(join(runtime, 'node_modules', 'node-llama-cpp')) + '/';
    real = realpathSync(resolve(script));
  } catch {
    return false;
  }
  if (!real.startsWith(root)) return false;
  const shim = createRequire(join(runtime, 'load.cjs'))(join(runtime, 'load.cjs')) as { importFile(p: string): Promise<unknown> };
  shim.importFile(real).catch((e: unknown) => {
    process.stderr.write(String(e) + '\n');
    process.exit(1);
  });
  return true;
}

// biome-ignore lint/suspicious/noExplicitAny: node-llama-cpp objects; its API is checked by the tests that load a real model.
type Untyped = any;

/**
 * Tokens of context per model (a call takes at most half of it for new tokens). 4096: a turn that offers
 * tools carries their documentation (names, descriptions, parameter schemas), which takes a model with
 * byte-level tokens ~400 tokens a tool.
 */
export const DEFAULT_CONTEXT_SIZE = 4096;

/** Verifies manifest and file, then loads the model. Refuses (ServiceError model_tampered / bad_signature / untrusted_issuer) before loading anything. */
export async function loadLocalSignedModel(opts: {
  modelPath: string;
  manifestPath: string;
  publishers: readonly TrustedKey[];
  threads?: number;
  contextSize?: number;
  /** The model a crew bundle names: refused (model_mismatch) before loading when the manifest is another one. */
  expect?: { sha256: string; publisher_kid: string } | null;
  /** Where the private copy of the model is made while it loads (default: the OS temp directory); it needs the model's size free. */
  scratchDir?: string;
  /** Test seam: runs after the copy verified and before the runtime loads it (a test swaps the original file here). */
  afterVerify?: () => Promise<void> | void;
}): Promise<LocalModel> {
  const text = readSignedArtifact(opts.manifestPath, 'model manifest', opts.publishers, MAX_MANIFEST_BYTES);
  const opened = await openModelManifest(text, opts.publishers);
  if (opts.expect && (opts.expect.sha256 !== opened.payload.model.sha256 || opts.expect.publisher_kid !== opened.payload.kid)) {
    throw new ServiceError('forbidden', 'the model is not the one the crew bundle names', { details: { reason: 'model_mismatch' } });
  }
  // One read of the file: copied into a private directory and measured as it is copied; the copy is loaded.
  const copy = await privateCopy(opts.modelPath, opts.scratchDir ?? tmpdir());
  let llama: Untyped;
  let llamaCpp: Untyped;
  let model: Untyped;
  let context: Untyped;
  const contextSize = opts.contextSize ?? DEFAULT_CONTEXT_SIZE;
  try {
    checkModelFile(opened.payload, copy);
    await opts.afterVerify?.();
    const runtime = findRuntime();
    // node-llama-cpp lives beside the program (edge-runtime/), not in the build: it has no types here.
    // biome-ignore lint/suspicious/noExplicitAny: the runtime's API is checked by the tests that load a real model.
    const load = createRequire(join(runtime, 'load.cjs'))(join(runtime, 'load.cjs')) as () => Promise<any>;
    llamaCpp = await load();
    llama = await llamaCpp.getLlama({ gpu: false, build: 'never', logLevel: 'error', progressLogs: false });
    model = await llama.loadModel({ modelPath: copy.path, gpuLayers: 0 });
    context = await model.createContext({ contextSize, threads: opts.threads ?? 1, sequences: 1 });
  } catch (e) {
    await context?.dispose();
    await model?.dispose();
    throw e;
  } finally {
    // Loaded (mapped or read) by now: the name goes, the bytes stay with the runtime until it disposes them.
    await copy.remove();
  }
  let queue: Promise<unknown> = Promise.resolve();
  // The context's one sequence, kept between calls of one partition (a run): a chat turn that continues a
  // conversation already in it (the same system prompt, tools and history) evaluates only what is new. A call
  // of another partition, or of none, starts from an empty sequence: how fast a call answers must not tell
  // one caller what another's prompt began with (a prefix cache's timing channel).
  let kept: Untyped = null;
  let keptFor: string | undefined;
  const sequence = async (partition: string | undefined): Promise<Untyped> => {
    kept ??= context.getSequence();
    if (partition === undefined || partition !== keptFor) {
      if (kept.nextTokenIndex > 0) await kept.clearHistory();
      keptFor = partition;
    }
    return kept;
  };
  const stopped = () =>
    new ServiceError('service_unavailable', 'the local model call was stopped', { details: { reason: 'cancelled' }, retryable: false });

  async function completeNow(
    prompt: string,
    requested: number,
    onText?: (piece: string) => void,
    signal?: AbortSignal,
    partition?: string,
  ) {
    if (signal?.aborted) throw stopped();
    // At most half the context for new tokens; the prompt keeps its most recent tokens in the rest.
    const maxTokens = Math.min(requested, Math.floor(contextSize / 2));
    const all: number[] = Array.from(model.tokenize(prompt) as ArrayLike<number>);
    const budget = Math.max(1, contextSize - maxTokens - 1);
    const input = all.length > budget ? all.slice(all.length - budget) : all;
    const withBos = model.tokens?.bos != null ? [model.tokens.bos, ...input] : input;
    // The one sequence, kept: what it holds of this prompt's start is not evaluated again (at least the last
    // prompt token is, for its next-token scores); the rest is erased.
    const seq = await sequence(partition);
    const held = seq.contextTokens as number[];
    let same = 0;
    while (same < held.length && same < withBos.length - 1 && held[same] === withBos[same]) same++;
    if (same < seq.nextTokenIndex) await seq.eraseContextTokenRanges([{ start: same, end: seq.nextTokenIndex }]);
    const out: number[] = [];
    // The token callback: the text decoded so far, handed on as it grows; a piece that ends inside a
    // multi-byte character (U+FFFD at the end) waits for the next token.
    let sent = 0;
    const flush = (final: boolean) => {
      if (!onText) return;
      const text = model.detokenize(out) as string;
      if (!final && text.endsWith('\uFFFD')) return;
      if (text.length > sent) {
        const piece = text.slice(sent);
        sent = text.length;
        try {
          onText(piece);
        } catch {
          // a listener's failure does not stop generation
        }
      }
    };
    // The sequence stays with this prompt in it when the loop ends (the next call keeps what it shares).
    if (maxTokens > 0) {
      for await (const token of seq.evaluate(withBos.slice(same), { temperature: 0 })) {
        // Leaving the loop ends the evaluation: a stopped call generates nothing more.
        if (signal?.aborted) break;
        if (model.isEogToken?.(token)) break;
        out.push(token);
        flush(false);
        if (out.length >= maxTokens) break;
      }
    }
    if (signal?.aborted) throw stopped();
    flush(true);
    return { text: model.detokenize(out) as string, inputTokens: withBos.length, outputTokens: out.length };
  }

  async function chatNow(req: LocalChatRequest, onDelta?: (d: ModelDelta) => void, signal?: AbortSignal): Promise<LocalChatAnswer> {
    if (signal?.aborted) throw stopped();
    const maxTokens = Math.max(1, Math.min(req.maxTokens, Math.floor(contextSize / 2)));
    const functions = functionsOf(req.tools, req.toolChoice);
    const offered = Object.keys(functions).length > 0;
    const seq = await sequence(req.partition);
    const meter = seq.tokenMeter as { usedOutputTokens: number };
    const before = meter.usedOutputTokens;
    const chat = new llamaCpp.LlamaChat({
      contextSequence: seq,
      chatWrapper: chatWrapper(llamaCpp, offered && toolChoiceForces(req.toolChoice)),
      autoDisposeSequence: false,
    });
    const listen =
      <T>(f: (x: T) => void) =>
      (x: T) => {
        try {
          f(x);
        } catch {
          // a listener's failure does not stop generation
        }
      };
    let r: Untyped;
    try {
      r = await chat.generateResponse(chatHistory(req.messages), {
        ...(offered ? { functions, documentFunctionParams: true, maxParallelFunctionCalls: 1 } : {}),
        maxTokens,
        temperature: 0,
        ...(signal ? { signal } : {}),
        ...(onDelta
          ? {
              onTextChunk: listen((text: string) => onDelta({ text })),
              ...(offered ? { onFunctionCallParamsChunk: listen((c: Parameters<typeof paramsDelta>[0]) => onDelta(paramsDelta(c))) } : {}),
            }
          : {}),
      });
    } catch (e) {
      if (signal?.aborted) throw stopped();
      // The grammar bounds a number's digits, not its value: an exponent past the double range parses to a
      // number no JSON holds, which node-llama-cpp's own check of the call refuses. The call failed, as a
      // provider's malformed answer does (never a call with a value the tool's schema does not allow).
      if (e instanceof llamaCpp.LlamaJsonSchemaValidationError)
        throw new ServiceError('service_unavailable', "the local model's tool call does not fit the tool's schema", {
          details: { reason: 'provider_bad_response' },
        });
      throw e;
    } finally {
      chat.dispose({ disposeSequence: false });
    }
    // Exact token counts of this call: the tokens it generated, and its whole prompt (what the sequence holds
    // now, less them), whether or not the start of the prompt was already evaluated.
    const outputTokens = meter.usedOutputTokens - before;
    return {
      text: typeof r.response === 'string' ? r.response : '',
      toolCalls: engineCalls(req.messages, r.functionCalls),
      inputTokens: (seq.contextTokens as unknown[]).length - outputTokens,
      outputTokens,
    };
  }

  /** Calls are serialized: one context, one sequence at a time, so the same prompt gives the same answer. */
  function queued<T>(f: () => Promise<T>): Promise<T> {
    const p = queue.then(f);
    queue = p.catch(() => undefined);
    return p;
  }

  return {
    manifest: opened.payload,
    publisherKid: opened.payload.kid,
    complete(prompt, maxTokens, onText, signal, partition) {
      return queued(() => completeNow(prompt, maxTokens, onText, signal, partition));
    },
    chat(req, onDelta, signal) {
      return queued(() => chatNow(req, onDelta, signal));
    },
    async dispose() {
      kept?.dispose();
      await context.dispose();
      await model.dispose();
      await llama.dispose();
    },
  };
}
