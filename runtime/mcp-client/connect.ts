/**
 * Connections to MCP servers, with the reference SDK's client
 * (`@modelcontextprotocol/sdk`): Streamable HTTP for the cell's sources
 * registered by URL, stdio for the sources of a program's configuration
 * (`--tool-sources`, ./config.ts: the cell's and a device's, edge/mcp-tools.ts).
 * Shared by the cell's catalog (cell/tools/) and a device's (edge/).
 *
 * - Every HTTP request leaves through the tools module's dispatcher (the
 *   network floor, runtime/ssrf.ts: the address dialled is the address
 *   checked), with no redirect to another origin, and a response larger than
 *   MAX_RESPONSE_BYTES is cut off (`tool_result_too_large`).
 * - Each request carries the credential of the call it is part of
 *   (`withCredentials`: an AsyncLocalStorage the request's own async context
 *   reads), so one session serves many calls, each with its own token and
 *   DPoP proof. A session is keyed by the source and the identity it was
 *   opened for (a server that binds its sessions to a user sees one user per
 *   session).
 * - The cell opens no standing stream (the optional GET of the transport is
 *   answered 405 without leaving the process): a server cannot push requests
 *   to the cell, and no request leaves without a call's credential.
 * - A session keeps the server's tool list as last read (`live`), read again
 *   when it is older than the source's `definition_max_age_ms`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike, Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ListToolsResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { fetch as undiciFetch, type Dispatcher } from 'undici';
import { definitionPin, pinnedDefinition, type PinnedDefinition } from '../../core/catalog/pin.ts';
import type { Logger } from '../log.ts';

/**
 * A source as a connection needs it: the cell's stored source row (cell/tools/sources/types.ts) has these
 * and more; a device makes one for each stdio source of its configuration (edge/mcp-tools.ts).
 */
export interface SourceEndpoint {
  source_id: string;
  name: string;
  transport: 'http' | 'stdio';
  /** The server's URL; null for a stdio source, whose command only the program's configuration holds. */
  url: string | null;
  timeout_ms: number;
  /** A new version of the source gets new sessions. */
  updated_at: number;
}

/** The largest answer the cell reads from a source's server (one HTTP response, or one stdio message). */
export const MAX_RESPONSE_BYTES = 1024 * 1024;
/** Pages of `tools/list` read at most, and tools kept at most. */
const MAX_PAGES = 20;
export const MAX_TOOLS = 500;
/** Sessions kept open at most (all sources); the least recently used one is closed first. */
const MAX_SESSIONS = 256;

/** The headers one HTTP request carries: the credential of the call it belongs to, with a fresh proof. */
export interface RequestCredentials {
  headers(method: string, htu: string): Promise<Record<string, string>>;
}

const current = new AsyncLocalStorage<RequestCredentials | null>();

/** Runs `fn` with every request it makes to a source carrying `c`'s headers (none for null). */
export function withCredentials<T>(c: RequestCredentials | null, fn: () => Promise<T>): Promise<T> {
  return current.run(c, fn);
}

/**
 * The signal one request of a session is given, following `signal` (a step's deadline, the run driver's)
 * while the request is in flight. The SDK keeps the abort listener it adds to the signal it is given after
 * the request has ended, and when that signal aborts it sends the server a cancellation of the request: a
 * run cancelled steps later would cancel every call it had made (its listeners piling up on the run's
 * signal meanwhile), and each cancellation would leave in the aborting code's async context, without the
 * credentials of the call (`withCredentials`). This signal is let go of when the request ends (`release`),
 * and its abort runs with the credentials of the call that made it.
 */
export function requestSignal(signal: AbortSignal | undefined): { signal: AbortSignal | undefined; release(): void } {
  if (signal === undefined) return { signal: undefined, release: () => undefined };
  const c = new AbortController();
  if (signal.aborted) {
    c.abort(signal.reason);
    return { signal: c.signal, release: () => undefined };
  }
  const credentials = current.getStore() ?? null;
  const onAbort = () => current.run(credentials, () => c.abort(signal.reason));
  signal.addEventListener('abort', onAbort, { once: true });
  return { signal: c.signal, release: () => signal.removeEventListener('abort', onAbort) };
}

/** How a stdio source's server is started: from the program's configuration only (./config.ts). */
export interface StdioSpec {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string | null;
}

/** A tool as the server lists it now: its reviewed part and that part's pin. */
export interface LiveTool {
  definition: PinnedDefinition;
  pin: string;
}

/** What a server listed: the tools that are tools, and the names of entries that are not. */
export interface Listing {
  tools: Map<string, LiveTool>;
  invalid: { tool: string; problem: string }[];
}

/** An open session with a source's server. */
export class Session {
  #current: { at: number; listing: Listing } | undefined;
  #inflight: Promise<Listing> | undefined;
  /** Set when a response of this session was cut off for its size. */
  tooLarge = false;
  closed = false;

  constructor(
    readonly key: string,
    readonly sourceId: string,
    readonly client: Client,
  ) {}

  /**
   * The server's tool list, read again when the copy is `maxAge` ms old or older (0: always). Calls that
   * ask while a read is under way share it (so it takes no call's signal: one call stopping does not
   * fail the others; each call's own deadline still ends its wait).
   */
  live(maxAge: number, now: number, timeout: number): Promise<Listing> {
    const c = this.#current;
    if (c !== undefined && now - c.at < maxAge) return Promise.resolve(c.listing);
    this.#inflight ??= listTools(this.client, { timeout })
      .then((listing) => {
        this.#current = { at: now, listing };
        return listing;
      })
      .finally(() => {
        this.#inflight = undefined;
      });
    return this.#inflight;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.client.close().catch(() => undefined);
  }
}

/** Every page of `tools/list` (at most MAX_PAGES pages and MAX_TOOLS tools). */
export async function listTools(client: Client, opts: { signal?: AbortSignal | undefined; timeout: number }): Promise<Listing> {
  const tools = new Map<string, LiveTool>();
  const invalid: Listing['invalid'] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const r = await client.request({ method: 'tools/list', params: cursor !== undefined ? { cursor } : {} }, ListToolsResultSchema, {
      timeout: opts.timeout,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    for (const t of r.tools) {
      if (tools.size + invalid.length >= MAX_TOOLS) break;
      const d = pinnedDefinition(t);
      if (!d.ok) invalid.push({ tool: typeof t.name === 'string' ? t.name : '', problem: d.problem });
      else tools.set(d.definition.name, { definition: d.definition, pin: definitionPin(d.definition) });
    }
    cursor = r.nextCursor;
    if (cursor === undefined) break;
  }
  return { tools, invalid };
}

/**
 * The fetch of a source's transport: the network floor's dispatcher, the call's credential, no standing
 * stream, a size cap. The transport only ever requests the source's URL (redirects to another origin are
 * not followed), so the proof's `htu` is the source's URL without query and fragment.
 */
function sourceFetch(dispatcher: Dispatcher, sourceUrl: URL, onTooLarge: () => void): FetchLike {
  const htu = `${sourceUrl.origin}${sourceUrl.pathname}`;
  return async (url, init) => {
    const method = (init?.method ?? 'GET').toUpperCase();
    if (method === 'GET') return new Response(null, { status: 405, statusText: 'no standing stream' });
    const c = current.getStore();
    let headers = init?.headers;
    if (c) {
      const h = headers instanceof Headers ? headers : new Headers(headers);
      for (const [k, v] of Object.entries(await c.headers(method, htu))) h.set(k, v);
      headers = h;
    }
    const res = await undiciFetch(url, { ...(init as object), headers, dispatcher } as Parameters<typeof undiciFetch>[1]);
    return capped(res as unknown as Response, onTooLarge);
  };
}

/**
 * The response with its body cut off (an error) past MAX_RESPONSE_BYTES. It is handed to the transport
 * as the slice of a Response the transport reads (status, headers, the body as a stream, as text or
 * JSON), the headers as they came: building a whole Response again would copy them for every request.
 */
function capped(res: Response, onTooLarge: () => void): Response {
  if (res.body === null) return res;
  let n = 0;
  const body = res.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, ctl) {
        n += chunk.byteLength;
        if (n > MAX_RESPONSE_BYTES) {
          onTooLarge();
          ctl.error(new Error('response too large'));
        } else ctl.enqueue(chunk);
      },
    }),
  );
  const text = async () => new TextDecoder().decode(await new Response(body).arrayBuffer());
  const slice = {
    ok: res.ok,
    status: res.status,
    statusText: res.statusText,
    headers: res.headers,
    body,
    text,
    json: async () => JSON.parse(await text()) as unknown,
  };
  return slice as unknown as Response;
}

/** The sessions of every source, by source, version and identity. */
export class Connections {
  readonly #sessions = new Map<string, Promise<Session>>();

  constructor(
    private readonly deps: {
      dispatcher: Dispatcher;
      log: Logger;
      /** The command of a stdio source, from the program's configuration; undefined: not configured here. */
      stdio(name: string): StdioSpec | undefined;
    },
  ) {}

  /**
   * The open session of `source` for `identity`, opened now (inside the caller's credentials, so its
   * `initialize` carries them) when there is none; calls that ask meanwhile share the opening (which
   * takes no call's signal, only the source's timeout). A stdio source not in this program's
   * configuration throws `StdioNotConfigured`.
   */
  session(source: SourceEndpoint, identity: string): Promise<Session> {
    const key = `${source.source_id}\u0000${source.updated_at}\u0000${identity}`;
    let s = this.#sessions.get(key);
    if (s !== undefined) {
      // Most recently used last (the eviction order).
      this.#sessions.delete(key);
      this.#sessions.set(key, s);
      return s;
    }
    s = openClient(source, this.deps, key);
    this.#sessions.set(key, s);
    s.catch(() => this.#sessions.get(key) === s && this.#sessions.delete(key));
    if (this.#sessions.size > MAX_SESSIONS) {
      const [oldest] = this.#sessions.keys();
      if (oldest !== undefined) this.#forget(oldest);
    }
    return s;
  }

  /** Closes a session that failed (a new one is opened by the next call). */
  discard(session: Session): void {
    if (this.#sessions.has(session.key)) this.#forget(session.key);
    else void session.close();
  }

  /** Closes every session of a source (it changed or was deleted). */
  dropSource(sourceId: string): void {
    for (const k of [...this.#sessions.keys()]) if (k.startsWith(`${sourceId}\u0000`)) this.#forget(k);
  }

  async closeAll(): Promise<void> {
    const all = [...this.#sessions.values()];
    this.#sessions.clear();
    await Promise.all(all.map((s) => s.then((x) => x.close()).catch(() => undefined)));
  }

  #forget(key: string): void {
    const s = this.#sessions.get(key);
    this.#sessions.delete(key);
    s?.then((x) => x.close()).catch(() => undefined);
  }
}

/** A stdio source this program's configuration does not name. */
export class StdioNotConfigured extends Error {
  constructor(readonly source: string) {
    super(`the stdio source ${source} is not in this program's configuration`);
    this.name = 'StdioNotConfigured';
  }
}

/**
 * Opens a client on a source (initialize included), outside any pool: the pool's sessions, and the
 * one-off sessions of a registration or a review.
 */
export async function openClient(
  source: Omit<SourceEndpoint, 'updated_at'>,
  deps: { dispatcher: Dispatcher; log: Logger; stdio(name: string): StdioSpec | undefined },
  key = '',
): Promise<Session> {
  const client = new Client({ name: 'agent-cell', version: '1' }, { capabilities: {} });
  let session: Session | undefined;
  let transport: Transport;
  if (source.transport === 'stdio') {
    const spec = deps.stdio(source.name);
    if (spec === undefined) throw new StdioNotConfigured(source.name);
    const t = new StdioClientTransport({
      command: spec.command,
      args: spec.args,
      env: { ...getDefaultEnvironment(), ...spec.env },
      ...(spec.cwd !== null ? { cwd: spec.cwd } : {}),
      stderr: 'pipe',
      maxBufferSize: MAX_RESPONSE_BYTES,
    });
    t.stderr?.on('data', (b: Buffer) =>
      deps.log.warn('tools: a stdio source wrote to stderr', { source: source.name, text: b.toString('utf8').slice(0, 1000) }),
    );
    transport = t;
  } else {
    const url = new URL(source.url!);
    transport = new StreamableHTTPClientTransport(url, {
      // An answer cut off for its size fails every request of the session at once (closing it), rather than at its timeout.
      fetch: sourceFetch(deps.dispatcher, url, () => {
        if (!session) return;
        session.tooLarge = true;
        void session.close();
      }),
      reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1000, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1 },
    });
  }
  session = new Session(key, source.source_id, client);
  const s = session;
  client.onclose = () => {
    s.closed = true;
  };
  try {
    await client.connect(transport, { timeout: source.timeout_ms });
  } catch (e) {
    await client.close().catch(() => undefined);
    throw e;
  }
  return s;
}
