/** Form bodies of the OAuth endpoints: parsed by hand (string fields only), declared as plain schemas for the OpenAPI document. */
import type { Context } from 'hono';
import type { createRoute, OpenAPIHono } from '@hono/zod-openapi';
import type { AppEnv } from '../context.ts';

export async function readForm(c: Context<AppEnv>): Promise<Record<string, string>> {
  const ct = c.req.header('content-type') ?? '';
  if (!/^application\/x-www-form-urlencoded\b/i.test(ct)) return {};
  let body: Record<string, unknown>;
  try {
    body = await c.req.parseBody();
  } catch {
    return {};
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(body)) if (typeof v === 'string') out[k] = v;
  return out;
}

/** An OpenAPI request body for a form with these string fields. */
export function formBody(fields: Record<string, string>, required: string[] = []) {
  return {
    required: true,
    content: {
      'application/x-www-form-urlencoded': {
        schema: {
          type: 'object' as const,
          properties: Object.fromEntries(Object.entries(fields).map(([k, d]) => [k, { type: 'string' as const, description: d }])),
          required,
        },
      },
    },
  };
}

/** Mounts a declared route whose handler answers with a plain Response (protocol bodies are not zod-typed). */
export function mountRaw(
  app: OpenAPIHono<AppEnv>,
  route: ReturnType<typeof createRoute>,
  handler: (c: Context<AppEnv>) => Response | Promise<Response>,
): void {
  app.openapi(route, handler as never);
}
