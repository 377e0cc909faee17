/**
 * A small HTTP exchange of the MCP client outside a session (a token request,
 * a protected-resource metadata document): through the network floor's
 * dispatcher, no redirect followed, 5 s for the headers and for the body, and
 * at most 64 KiB read (more is an error).
 */
import { request, type Dispatcher } from 'undici';

const TIMEOUT_MS = 5000;
const BODY_LIMIT = 64 * 1024;

/** The answer's status and text; throws on a network failure, a timeout or an answer past the limit. */
export async function smallRequest(
  dispatcher: Dispatcher,
  url: URL,
  init: { method: 'GET' | 'POST'; headers: Record<string, string>; body?: string },
): Promise<{ status: number; text: string }> {
  const res = await request(url, {
    ...init,
    headersTimeout: TIMEOUT_MS,
    bodyTimeout: TIMEOUT_MS,
    dispatcher,
  } as Parameters<typeof request>[1]);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of res.body) {
    size += (c as Buffer).length;
    if (size > BODY_LIMIT) {
      res.body.destroy();
      throw new Error(`the answer of ${url.origin} is larger than ${BODY_LIMIT} bytes`);
    }
    chunks.push(c as Buffer);
  }
  return { status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') };
}
