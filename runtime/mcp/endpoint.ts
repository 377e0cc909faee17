/**
 * The MCP endpoint both programs serve (`/mcp`: the cell, `edge serve`):
 * Streamable HTTP with the reference SDK's Web-standard transport, the
 * newest protocol revision the SDK implements (2025-11-25; earlier ones are
 * negotiated by the SDK), behind the host's gateway (rate budget,
 * authentication, the credential's rpm), which hands each request here with
 * its caller.
 *
 * - Sessions: `initialize` opens one (an `Mcp-Session-Id`), bound to its
 *   caller (the host's `binding`): a request that names a session another
 *   caller opened, or one this process does not hold, is 404 "Session not
 *   found" (the client starts a new one). Each request still runs with its
 *   own caller's authority now, never the session's. Sessions idle longer
 *   than `idleMs` with no call in flight are closed; a caller holding
 *   `maxPerCaller` sessions loses its least recently used one to a new one.
 * - Origin (DNS rebinding, MCP transports): a request whose `Origin` is not
 *   one of the host's own origins is 403, before anything is read.
 * - Tools: the host's, listed per caller; calls may report progress (when
 *   the client sent a progressToken), ask the client's user (elicitation,
 *   when the client declared it) and are aborted when the client cancels
 *   (`notifications/cancelled`). A disconnection is not a cancellation (the
 *   MCP transports section): the client resumes the stream with
 *   `Last-Event-ID` (events kept per session, event-store.ts).
 * - Errors: a refusal is a tool result with `isError` and the service's
 *   envelope; anything unexpected is logged with a correlation id and
 *   answered as `internal_error` with that id, never its text.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import {
  CallToolRequestSchema,
  ElicitResultSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type ElicitResult,
} from '@modelcontextprotocol/sdk/types.js';
import { SessionEventStore } from './event-store.ts';
import type { McpHost, ToolCallContext } from './types.ts';

export interface McpEndpointOptions {
  /** The origins a browser request may come from (the host's public origin); other `Origin`s are 403. */
  origins: (req: Request) => readonly string[];
  /** Most sessions one caller holds at once (default 16). */
  maxPerCaller?: number;
  /** Most sessions in all (default 10,000): past it, `initialize` is 503. */
  maxSessions?: number;
  /** A session with no request and no call in flight for this long is closed (default 30 minutes). */
  idleMs?: number;
  /** Events kept per session for resumption (default 1,000). */
  eventsPerSession?: number;
  /** The clock (ms). */
  now?: () => number;
}

interface Session {
  id: string;
  binding: string;
  transport: WebStandardStreamableHTTPServerTransport;
  server: Server;
  lastUsed: number;
  inFlight: number;
}

/** The JSON-RPC error bodies the transport itself answers with, for the refusals made here. */
function jsonRpcError(status: number, code: number, message: string): Response {
  return new Response(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }), {
    status,
    headers: { 'Content-Type': 'application/json' },
  });
}

const SESSION_HEADER = 'mcp-session-id';

export class McpEndpoint<A> {
  readonly #sessions = new Map<string, Session>();
  readonly #opts: Required<Omit<McpEndpointOptions, 'origins'>> & Pick<McpEndpointOptions, 'origins'>;
  #sweep: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly host: McpHost<A>,
    opts: McpEndpointOptions,
  ) {
    this.#opts = {
      maxPerCaller: 16,
      maxSessions: 10_000,
      idleMs: 30 * 60_000,
      eventsPerSession: 1_000,
      now: Date.now,
      ...opts,
    };
    this.#sweep = setInterval(() => void this.closeIdle(), Math.min(60_000, this.#opts.idleMs));
    this.#sweep.unref();
  }

  /** Sessions held now (tests, metrics). */
  get size(): number {
    return this.#sessions.size;
  }

  /**
   * Answers one HTTP request to the endpoint (POST, GET or DELETE) for an
   * authenticated caller; `body` is the request's JSON text (POST) as the
   * host's gateway read it.
   */
  async handle(req: Request, auth: A, body: string | undefined): Promise<Response> {
    const origin = req.headers.get('origin');
    if (origin !== null && !this.#opts.origins(req).includes(origin)) {
      return jsonRpcError(403, ErrorCode.InvalidRequest, 'Forbidden: this Origin may not use the endpoint');
    }
    let parsed: unknown;
    if (req.method === 'POST') {
      try {
        parsed = JSON.parse(body ?? '');
      } catch {
        return jsonRpcError(400, ErrorCode.ParseError, 'Parse error: Invalid JSON');
      }
    }
    const binding = this.host.binding(auth);
    const authInfo = { token: '', clientId: binding, scopes: [], extra: { auth } };
    const sessionId = req.headers.get(SESSION_HEADER);
    if (sessionId === null) {
      if (req.method === 'POST' && isInitialize(parsed)) return this.#open(req, parsed, binding, authInfo);
      return jsonRpcError(400, ErrorCode.ConnectionClosed, 'Bad Request: Mcp-Session-Id header is required');
    }
    const s = this.#sessions.get(sessionId);
    // Another caller's session is not revealed: the same answer as one that does not exist.
    if (!s || s.binding !== binding) return jsonRpcError(404, -32001, 'Session not found');
    s.lastUsed = this.#opts.now();
    return s.transport.handleRequest(req, { authInfo, ...(parsed !== undefined ? { parsedBody: parsed } : {}) });
  }

  async #open(
    req: Request,
    parsed: unknown,
    binding: string,
    authInfo: { token: string; clientId: string; scopes: string[]; extra: { auth: A } },
  ) {
    if (this.#sessions.size >= this.#opts.maxSessions) {
      await this.closeIdle();
      if (this.#sessions.size >= this.#opts.maxSessions)
        return jsonRpcError(503, ErrorCode.InternalError, 'Too many MCP sessions; try again later');
    }
    const mine = [...this.#sessions.values()].filter((s) => s.binding === binding).sort((a, b) => a.lastUsed - b.lastUsed);
    for (const old of mine.slice(0, Math.max(0, mine.length - this.#opts.maxPerCaller + 1))) await this.#close(old);
    const server = this.#server();
    let session: Session | undefined;
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      eventStore: new SessionEventStore(this.#opts.eventsPerSession),
      retryInterval: 1000,
      onsessioninitialized: (id) => {
        session = { id, binding, transport, server, lastUsed: this.#opts.now(), inFlight: 0 };
        this.#sessions.set(id, session);
      },
      onsessionclosed: (id) => {
        this.#sessions.delete(id);
      },
    });
    transport.onclose = () => {
      if (session) this.#sessions.delete(session.id);
    };
    server.onerror = (e) => this.host.log.warn('mcp session error', { error: e.message });
    await server.connect(transport);
    return transport.handleRequest(req, { authInfo, parsedBody: parsed });
  }

  /** A session's protocol server: the host's tools behind the SDK's handlers. */
  #server(): Server {
    const host = this.host;
    const server = new Server(host.serverInfo, {
      capabilities: { tools: { listChanged: false }, logging: {} },
      ...(host.instructions ? { instructions: host.instructions } : {}),
    });
    const callerOf = (extra: { authInfo?: { extra?: Record<string, unknown> } }): A => {
      const auth = extra.authInfo?.extra?.['auth'];
      if (auth === undefined) throw new McpError(ErrorCode.InvalidRequest, 'no caller');
      return auth as A;
    };
    server.setRequestHandler(ListToolsRequestSchema, async (_req, extra) => ({ tools: await host.listTools(callerOf(extra)) }));
    server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
      const auth = callerOf(extra);
      const session = extra.sessionId ? this.#sessions.get(extra.sessionId) : undefined;
      if (session) session.inFlight++;
      const token = extra._meta?.progressToken;
      let progress = 0;
      // Notifications go out in order, and all of them before the result (awaited below).
      let sent: Promise<void> = Promise.resolve();
      const caps = server.getClientCapabilities();
      const ctx: ToolCallContext = {
        signal: extra.signal,
        wantsProgress: token !== undefined,
        progress(message) {
          if (token === undefined || extra.signal.aborted) return sent;
          const params = { progressToken: token, progress: ++progress, message };
          sent = sent.then(() => extra.sendNotification({ method: 'notifications/progress', params })).catch(() => undefined);
          return sent;
        },
        canElicit: caps?.elicitation !== undefined && (caps.elicitation.form !== undefined || Object.keys(caps.elicitation).length === 0),
        async elicit(form, timeoutMs, signal): Promise<ElicitResult> {
          return extra.sendRequest({ method: 'elicitation/create', params: { mode: 'form', ...form } }, ElicitResultSchema, {
            timeout: timeoutMs,
            signal: signal ? AbortSignal.any([extra.signal, signal]) : extra.signal,
          });
        },
        async log(level, data) {
          await server.sendLoggingMessage({ level, logger: host.serverInfo.name, data }, extra.sessionId).catch(() => undefined);
        },
      };
      try {
        const result = await host.callTool(auth, req.params.name, req.params.arguments ?? {}, ctx);
        await sent;
        return result;
      } catch (e) {
        // A cancelled call is answered by nobody (the SDK sends nothing for it); a protocol error is the SDK's to send.
        if (e instanceof McpError || extra.signal.aborted) throw e;
        const id = crypto.randomUUID();
        host.log.error('mcp tool call failed', {
          correlation_id: id,
          tool: req.params.name,
          error: e instanceof Error ? (e.stack ?? e.message) : String(e),
        });
        const envelope = { error: 'internal_error', message: 'the call failed; the operator log has the cause', correlation_id: id };
        return { content: [{ type: 'text', text: JSON.stringify(envelope) }], isError: true } satisfies CallToolResult;
      } finally {
        if (session) {
          session.inFlight--;
          session.lastUsed = this.#opts.now();
        }
      }
    });
    return server;
  }

  async #close(s: Session): Promise<void> {
    this.#sessions.delete(s.id);
    await s.server.close().catch(() => undefined);
  }

  /** Closes the sessions idle for longer than `idleMs` (none of their calls in flight). */
  async closeIdle(): Promise<void> {
    const before = this.#opts.now() - this.#opts.idleMs;
    for (const s of [...this.#sessions.values()]) if (s.inFlight === 0 && s.lastUsed < before) await this.#close(s);
  }

  /** Closes every session (the host stops). */
  async close(): Promise<void> {
    clearInterval(this.#sweep);
    for (const s of [...this.#sessions.values()]) await this.#close(s);
  }
}

function isInitialize(m: unknown): boolean {
  const one = Array.isArray(m) ? (m.length === 1 ? m[0] : undefined) : m;
  return typeof one === 'object' && one !== null && (one as { method?: unknown }).method === 'initialize';
}
