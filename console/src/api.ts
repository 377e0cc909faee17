/**
 * Calls to the cell's API as the signed-in principal. Every answer that is
 * not 2xx becomes an `ApiError` carrying the spec's envelope (`error`,
 * `message`, `details`); views branch on `code` and `details.reason`, never
 * on the message. Paths are absolute on this origin: the console talks to
 * nothing else.
 */
import type { Session } from './auth/session.ts';
import { markAnswered, markUnreachable } from './liveness.ts';

export const API = '/api/public/v1';
export const ADMIN = `${API}/admin`;
export const TEAMS = `${ADMIN}/agent-teams`;

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> | undefined,
  ) {
    super(message);
    this.name = 'ApiError';
  }

  /** `details.reason` when the envelope has one. */
  get reason(): string | undefined {
    const r = this.details?.['reason'];
    return typeof r === 'string' ? r : undefined;
  }
}

/** Builds an ApiError from a non-2xx response (its body is the envelope, or not). */
export async function apiError(res: Response): Promise<ApiError> {
  let body: { error?: unknown; message?: unknown; details?: unknown } = {};
  try {
    body = (await res.json()) as typeof body;
  } catch {
    // not the envelope (a proxy page?): status only
  }
  const code = typeof body.error === 'string' ? body.error : `http_${res.status}`;
  const message = typeof body.message === 'string' ? body.message : `HTTP ${res.status}`;
  const details = typeof body.details === 'object' && body.details !== null ? (body.details as Record<string, unknown>) : undefined;
  return new ApiError(res.status, code, message, details);
}

export interface CallOptions {
  body?: unknown;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

/** Sends one request as the session and returns the parsed JSON answer; throws ApiError otherwise. */
export async function call<T>(session: Session, method: string, path: string, opts: CallOptions = {}): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
  let body: string | undefined;
  if (opts.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  let res: Response;
  try {
    res = await session.request(method, path, {
      headers,
      ...(body !== undefined ? { body } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  } catch (e) {
    // No answer at all (not the console's own abort): the cell is unreachable.
    if (!opts.signal?.aborted && (e as { name?: string }).name !== 'AbortError') markUnreachable();
    throw e;
  }
  // A gateway's 502/503/504 is not the cell answering.
  if (res.status === 502 || res.status === 504) markUnreachable();
  else markAnswered();
  if (!res.ok) throw await apiError(res);
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

/** A short, human sentence for an error (envelope message plus its reason). */
export function describeError(e: unknown): string {
  if (e instanceof ApiError) {
    const reason =
      e.reason ??
      (typeof e.details?.['required_permission'] === 'string' ? `needs ${String(e.details['required_permission'])}` : undefined);
    return `${e.message}${reason ? ` (${reason})` : ''} [${e.code}]`;
  }
  if (e instanceof Error) return e.message;
  return String(e);
}

/** Percent-encodes one path segment (step ids contain `/`). */
export const seg = (s: string): string => encodeURIComponent(s);
