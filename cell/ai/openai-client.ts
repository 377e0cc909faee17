/**
 * A client for the OpenAI Chat Completions protocol (OpenAI, vLLM, llama.cpp
 * server, Ollama, LM Studio), over undici.
 *
 * Each call has a connect/headers timeout and a body timeout; 429, 5xx and
 * network failures are retried with exponential backoff (honouring a short
 * Retry-After, in seconds or as an HTTP-date); everything else fails at once.
 * A streamed answer is read with eventsource-parser (the WHATWG event-stream
 * rules: CR, LF or CRLF line ends, multi-line `data:`, comments). Failures leave as ServiceError
 * `service_unavailable` with `details.reason` (`provider_timeout`,
 * `provider_unreachable`, `provider_rate_limited`, `provider_error`,
 * `provider_rejected`, `provider_bad_response`), the provider's HTTP status
 * and the number of attempts made, never the provider's body or the key.
 */
import { createParser } from 'eventsource-parser';
import { request } from 'undici';
import { promptTokens, withConsumed } from '../../core/engine/budget.ts';
import { ServiceError } from '../../core/errors.ts';
import type { Reason } from '../../core/reasons.ts';
import { timedSignal, type TimedSignal } from '../../runtime/timed-signal.ts';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  name?: string;
}

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ToolSpec {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/** Whether the model may (`auto`), must (`required`, or the named function) or must not (`none`) call a function. */
export type WireToolChoice = 'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: ToolSpec[];
  tool_choice?: WireToolChoice;
  temperature?: number;
  max_tokens?: number;
}

export interface ChatResult {
  content: string | null;
  tool_calls: ToolCall[];
  finish_reason: string | null;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  model: string;
  /** The provider's id of the answer (`chatcmpl-…`), when it gave one: `gen_ai.response.id` on the call's span. */
  id?: string;
  /**
   * What the call's failed attempts consumed before this answer (a stream cut after part of an answer,
   * then retried): charged to the budget beside `usage`, which is this answer's alone. Absent: nothing.
   */
  failed_usage?: Usage;
}

/** Tokens an attempt consumed, in the provider's words. */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

export interface ClientOptions {
  baseUrl: string;
  apiKey?: string | undefined;
  /** Headers (connect + response headers) timeout, ms. Default 30 s. */
  headersTimeoutMs?: number;
  /** Body timeout, ms. Default 120 s. */
  bodyTimeoutMs?: number;
  /** Retries after the first attempt. Default 2. */
  retries?: number;
  /** First backoff, ms; doubles per retry. Default 250 ms. */
  backoffMs?: number;
  /** Longest wait honoured from Retry-After, ms. Default 5 s. */
  maxRetryAfterMs?: number;
  sleep?: (ms: number) => Promise<void>;
  /** Ask for a streamed answer (Server-Sent Events of chunks) and assemble it; default false. */
  stream?: boolean;
  /** Receives each fragment of a streamed answer as it is read (live tokens); a retry's first fragment carries `restart`. */
  onDelta?: ((d: ChatDelta) => void) | undefined;
  /**
   * Cancellation (e.g. the run's): aborting it interrupts the request in flight
   * and any backoff sleep at once; the call then fails with reason `cancelled`
   * and is never retried.
   */
  signal?: AbortSignal | undefined;
  /** W3C `traceparent` sent with the call (the trace of the request behind it; cell/http/trace.ts). */
  traceparent?: string | undefined;
}

/** A sleep that ends early (rejecting) when `signal` aborts. */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (!signal) return new Promise<void>((r) => setTimeout(r, ms));
  if (signal.aborted) return Promise.reject(cancelledError());
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(t);
      reject(cancelledError());
    };
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The failure of a call interrupted by its caller's cancellation. */
function cancelledError(): ServiceError {
  return new ServiceError('service_unavailable', 'the model call was cancelled', { details: { reason: 'cancelled' } });
}

/** URL of the chat completions endpoint under a base URL ending in /v1 or not. */
export function completionsUrl(baseUrl: string): string {
  const b = baseUrl.replace(/\/+$/, '');
  return b.endsWith('/chat/completions') ? b : `${b}/chat/completions`;
}

function fail(reason: Reason, message: string, extra: Record<string, unknown> = {}, retryable = false): ServiceError {
  return new ServiceError('service_unavailable', message, { details: { reason, ...extra }, retryable });
}

/** The failure as it leaves the client: with the number of HTTP attempts made (`details.attempts`). */
function withAttempts(err: ServiceError, attempts: number): ServiceError {
  return new ServiceError(err.code, err.message, {
    details: { ...(err.details ?? {}), attempts },
    ...(err.retryable !== undefined ? { retryable: err.retryable } : {}),
  });
}

/**
 * What a failed attempt consumed: the usage the provider reported in the stream, else, when part of an
 * answer streamed, its fragments as completion tokens and the prompt estimated (core/engine/budget.ts);
 * an attempt that streamed nothing consumed nothing a provider bills.
 */
function attemptUsage(a: StreamAssembler | undefined, fragments: number, body: ChatRequest): Usage {
  const u = a?.reportedUsage();
  if (u) return u;
  return fragments > 0
    ? { prompt_tokens: promptTokens(body.messages), completion_tokens: fragments }
    : { prompt_tokens: 0, completion_tokens: 0 };
}

/** One chat completion, with timeouts and retries. */
export async function chatCompletion(opts: ClientOptions, body: ChatRequest): Promise<ChatResult> {
  const retries = opts.retries ?? 2;
  const cancel = opts.signal;
  const sleep = opts.sleep ?? ((ms: number) => abortableSleep(ms, cancel));
  // Built only when an attempt failed: an error captures a stack, which every call would pay for.
  let last: ServiceError | undefined;
  let streamedBefore = false;
  // What the failed attempts consumed: on the answer (`failed_usage`), or on the error that ends the call.
  const failed: Usage = { prompt_tokens: 0, completion_tokens: 0 };
  const charged = <E extends object>(e: E): E =>
    failed.prompt_tokens + failed.completion_tokens > 0
      ? withConsumed(e, { input_tokens: failed.prompt_tokens, output_tokens: failed.completion_tokens })
      : e;
  const answered = (r: ChatResult): ChatResult =>
    failed.prompt_tokens + failed.completion_tokens > 0 ? { ...r, failed_usage: { ...failed } } : r;
  for (let attempt = 0; attempt <= retries; attempt++) {
    if (cancel?.aborted) throw charged(cancelledError());
    let waitMs = (opts.backoffMs ?? 250) * 2 ** attempt;
    let assembler: StreamAssembler | undefined;
    let fragments = 0;
    let bound: TimedSignal | undefined;
    try {
      const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
      if (opts.apiKey) headers['authorization'] = `Bearer ${opts.apiKey}`;
      if (opts.traceparent) headers['traceparent'] = opts.traceparent;
      // undici's own timers are coarse (about a second); the signal bounds the whole call exactly,
      // and the caller's cancellation interrupts it at once. Released when the attempt ends.
      bound = timedSignal((opts.headersTimeoutMs ?? 30_000) + (opts.bodyTimeoutMs ?? 120_000), cancel);
      const res = await request(completionsUrl(opts.baseUrl), {
        method: 'POST',
        headers,
        body: JSON.stringify(opts.stream ? { ...body, stream: true, stream_options: { include_usage: true } } : { ...body, stream: false }),
        headersTimeout: opts.headersTimeoutMs ?? 30_000,
        bodyTimeout: opts.bodyTimeoutMs ?? 120_000,
        signal: bound.signal,
      });
      const status = res.statusCode;
      if (status >= 200 && status < 300) {
        const ctype = String(res.headers['content-type'] ?? '');
        if (opts.stream && ctype.includes('text/event-stream')) {
          // A retry after part of an answer streamed starts it over: the reader is told so.
          const emit = opts.onDelta;
          let first = true;
          // Every fragment is counted (what a cut stream consumed); the caller's receiver gets them too.
          const onDelta = (d: ChatDelta) => {
            if (d.text !== '') fragments++;
            if (!emit) return;
            emit(first && streamedBefore ? { ...d, restart: true } : d);
            first = false;
            streamedBefore = true;
          };
          assembler = new StreamAssembler(onDelta);
          return answered(parseCompletion(await readStream(res.body, assembler)));
        }
        const json: unknown = await res.body.json().catch(() => undefined);
        return answered(parseCompletion(json));
      }
      await res.body.dump();
      if (status === 429 || status >= 500) {
        last =
          status === 429
            ? fail('provider_rate_limited', 'the model provider is rate limiting', { provider_status: status }, true)
            : fail('provider_error', 'the model provider failed', { provider_status: status }, true);
        const ra = retryAfterMs(res.headers['retry-after'], Date.now());
        if (ra !== null) waitMs = Math.min(ra, opts.maxRetryAfterMs ?? 5000);
      } else {
        throw fail('provider_rejected', 'the model provider rejected the request', { provider_status: status });
      }
    } catch (err) {
      const used = attemptUsage(assembler, fragments, body);
      failed.prompt_tokens += used.prompt_tokens;
      failed.completion_tokens += used.completion_tokens;
      if (cancel?.aborted) throw charged(cancelledError());
      if (err instanceof ServiceError) {
        if (err.details?.['reason'] === 'provider_rejected' || err.details?.['reason'] === 'provider_bad_response')
          throw charged(withAttempts(err, attempt + 1));
        last = err;
      } else {
        const code = String((err as { code?: unknown }).code ?? '');
        const name = (err as { name?: string }).name ?? '';
        last =
          code.includes('TIMEOUT') || name === 'TimeoutError' || name === 'AbortError'
            ? fail('provider_timeout', 'the model provider timed out', {}, true)
            : fail('provider_unreachable', 'the model provider is unreachable', {}, true);
      }
    } finally {
      bound?.release();
    }
    if (attempt < retries) {
      try {
        await sleep(waitMs);
      } catch (e) {
        throw charged(e as ServiceError);
      }
      if (cancel?.aborted) throw charged(cancelledError());
    }
  }
  throw charged(withAttempts(last ?? fail('provider_unreachable', 'the model provider is unreachable'), retries + 1));
}

/**
 * How long a `Retry-After` asks to wait, ms (RFC 9110 §10.2.3: delay-seconds, or an HTTP-date, which is
 * `now` or later; a date in the past is no wait), or null when there is none or it is neither.
 */
export function retryAfterMs(header: string | string[] | undefined, now: number): number | null {
  const v = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!v) return null;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  // An HTTP-date: IMF-fixdate and the obsolete RFC 850 form name GMT; the asctime form is GMT without saying so.
  let at: number;
  if (/^[A-Za-z]{3,9}, .+ GMT$/.test(v)) at = Date.parse(v);
  else if (/^[A-Za-z]{3} [A-Za-z]{3} [ \d]\d \d\d:\d\d:\d\d \d{4}$/.test(v)) at = Date.parse(`${v} GMT`);
  else return null;
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** Validates a Chat Completions response body. */
export function parseCompletion(json: unknown): ChatResult {
  const bad = () => fail('provider_bad_response', 'the model provider answered with an unreadable body');
  if (typeof json !== 'object' || json === null) throw bad();
  const j = json as { choices?: unknown; usage?: unknown; model?: unknown; id?: unknown };
  if (!Array.isArray(j.choices) || j.choices.length === 0) throw bad();
  const choice = j.choices[0] as { message?: { content?: unknown; tool_calls?: unknown }; finish_reason?: unknown };
  const msg = choice.message;
  if (typeof msg !== 'object' || msg === null) throw bad();
  const content = typeof msg.content === 'string' ? msg.content : null;
  const tool_calls: ToolCall[] = [];
  if (Array.isArray(msg.tool_calls)) {
    for (const tc of msg.tool_calls as { id?: unknown; function?: { name?: unknown; arguments?: unknown } }[]) {
      if (typeof tc?.function?.name !== 'string') throw bad();
      const args = tc.function.arguments;
      tool_calls.push({
        id: typeof tc.id === 'string' ? tc.id : `call_${tool_calls.length}`,
        type: 'function',
        function: { name: tc.function.name, arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) },
      });
    }
  }
  const u = (j.usage ?? {}) as { prompt_tokens?: unknown; completion_tokens?: unknown; total_tokens?: unknown };
  const n = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) && x >= 0 ? Math.floor(x) : 0);
  const prompt_tokens = n(u.prompt_tokens);
  const completion_tokens = n(u.completion_tokens);
  return {
    content,
    tool_calls,
    finish_reason: typeof choice.finish_reason === 'string' ? choice.finish_reason : null,
    usage: { prompt_tokens, completion_tokens, total_tokens: n(u.total_tokens) || prompt_tokens + completion_tokens },
    model: typeof j.model === 'string' ? j.model : '',
    ...(typeof j.id === 'string' && j.id !== '' ? { id: j.id } : {}),
  };
}

/** A fragment of a streamed answer: answer text, or (with `tool_call`) a tool call's arguments (ModelDelta's shape). */
export interface ChatDelta {
  text: string;
  tool_call?: { index: number; id?: string; name?: string };
  restart?: boolean;
}

/**
 * Assembles a streamed Chat Completions answer (events whose data is a chunk,
 * then `[DONE]`) into the shape of a non-streamed one, an event at a time:
 * content deltas concatenated, tool calls merged by `index` (arguments
 * concatenated), the last finish_reason, the answer's id, and the usage chunk
 * when the server sends one. Each fragment is handed to `onDelta` as it is read.
 */
export class StreamAssembler {
  private content: string | null = null;
  private finish: unknown = null;
  private usage: unknown;
  private model: unknown;
  private id: unknown;
  private bad = false;
  private done = false;
  private readonly calls = new Map<number, { id?: string; type: 'function'; function: { name: string; arguments: string } }>();
  constructor(private readonly onDelta?: (d: ChatDelta) => void) {}

  /** Reads the data of one event of the stream (its `data:` lines joined, as eventsource-parser hands them). */
  data(event: string): void {
    if (this.done || this.bad) return;
    const data = event.trim();
    if (data === '') return;
    if (data === '[DONE]') {
      this.done = true;
      return;
    }
    let chunk: {
      choices?: { delta?: { content?: unknown; tool_calls?: unknown }; finish_reason?: unknown }[];
      usage?: unknown;
      model?: unknown;
      id?: unknown;
    };
    try {
      chunk = JSON.parse(data) as typeof chunk;
    } catch {
      this.bad = true;
      return;
    }
    if (chunk.usage) this.usage = chunk.usage;
    if (chunk.model) this.model = chunk.model;
    if (chunk.id) this.id = chunk.id;
    const c = chunk.choices?.[0];
    if (!c) return;
    if (c.finish_reason) this.finish = c.finish_reason;
    const d = c.delta ?? {};
    if (typeof d.content === 'string' && d.content !== '') {
      this.content = (this.content ?? '') + d.content;
      this.onDelta?.({ text: d.content });
    }
    if (Array.isArray(d.tool_calls)) {
      for (const tc of d.tool_calls as { index?: number; id?: string; function?: { name?: string; arguments?: string } }[]) {
        const i = typeof tc.index === 'number' ? tc.index : 0;
        const cur = this.calls.get(i) ?? { type: 'function' as const, function: { name: '', arguments: '' } };
        if (tc.id) cur.id = tc.id;
        if (tc.function?.name) cur.function.name += tc.function.name;
        const args = typeof tc.function?.arguments === 'string' ? tc.function.arguments : '';
        cur.function.arguments += args;
        this.calls.set(i, cur);
        if (this.onDelta) {
          const call: { index: number; id?: string; name?: string } = { index: i };
          if (cur.id) call.id = cur.id;
          if (cur.function.name) call.name = cur.function.name;
          this.onDelta({ text: args, tool_call: call });
        }
      }
    }
  }

  /** The usage the provider reported in the stream (its usage chunk), when it sent one. */
  reportedUsage(): Usage | null {
    const u = this.usage as { prompt_tokens?: unknown; completion_tokens?: unknown } | undefined;
    const n = (x: unknown) => (typeof x === 'number' && Number.isSafeInteger(x) && x >= 0 ? x : null);
    const p = n(u?.prompt_tokens);
    const c = n(u?.completion_tokens);
    return p === null || c === null ? null : { prompt_tokens: p, completion_tokens: c };
  }

  /** The answer in the shape of a non-streamed body (undefined when a chunk was unreadable). */
  result(): unknown {
    if (this.bad) return undefined;
    const tool_calls = [...this.calls.entries()].sort(([a], [b]) => a - b).map(([, v]) => v);
    return {
      id: this.id,
      model: this.model,
      usage: this.usage,
      choices: [{ message: { content: this.content, ...(tool_calls.length ? { tool_calls } : {}) }, finish_reason: this.finish }],
    };
  }
}

/**
 * An event-stream parser that hands each event's data to `a`. The body's end ends the last event too (a
 * server that closes without the blank line after it is read as if it had sent one).
 */
function eventReader(a: StreamAssembler): { feed(text: string): void; end(): void } {
  const parser = createParser({ onEvent: (e) => a.data(e.data) });
  return { feed: (text) => parser.feed(text), end: () => parser.feed('\n\n') };
}

/** Assembles a whole streamed answer at once (see StreamAssembler). */
export function assembleStream(text: string): unknown {
  const a = new StreamAssembler();
  const r = eventReader(a);
  r.feed(text);
  r.end();
  return a.result();
}

/** Reads an event-stream body as it arrives, an event at a time. */
async function readStream(body: AsyncIterable<Buffer | Uint8Array>, a: StreamAssembler): Promise<unknown> {
  const decoder = new TextDecoder();
  const r = eventReader(a);
  for await (const chunk of body) r.feed(decoder.decode(chunk, { stream: true }));
  r.feed(decoder.decode());
  r.end();
  return a.result();
}
