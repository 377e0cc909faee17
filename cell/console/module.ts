/**
 * The operator console (docs/console.md): a web application served by the
 * cell itself under /console, built from console/src (Preact, dagre) by the
 * project's build and embedded in dist/cell.mjs.
 *
 * - `GET /console`: the application page; `GET /console/assets/{name}` its
 *   script and style sheet; `GET /console/callback` the sign-in pop-up's
 *   return page; `GET /console/config.json` the console's OAuth client id,
 *   redirect URI and issuer (public, no secret).
 * - On start, the console's built-in public OAuth client is registered with
 *   this cell's authorization server (./client.ts).
 *
 * None of these need a credential (the console signs in through the API like
 * any client and can do only what the signed-in principal can); they pass the
 * gateway's rate gate like every request.
 */
import { brotliCompressSync, constants as zlib, gzipSync } from 'node:zlib';
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { ServiceError, notFound } from '../../core/errors.ts';
import type { AppEnv, CellCore } from '../context.ts';
import type { OAuthApi } from '../oauth/api.ts';
import type { CellModule } from '../module.ts';
import { consoleFiles, type ConsoleFile } from './internal/assets.ts';
import { consoleConfig, registerConsoleClient } from './client.ts';
import {
  CALLBACK_HTML,
  CONSOLE_ASSETS_PATH,
  CONSOLE_CALLBACK_PATH,
  CONSOLE_CONFIG_PATH,
  CONSOLE_HEADERS,
  CONSOLE_HTML,
  CONSOLE_PATH,
} from './page.ts';
import { etagOf } from '../../runtime/page-headers.ts';

interface Served extends ConsoleFile {
  etag: string;
  /** The same bytes compressed once at first use (176 kB of script is about 60 kB gzipped). */
  br: Uint8Array;
  gzip: Uint8Array;
}

function serve(f: ConsoleFile): Served {
  const raw = Buffer.from(f.body, 'utf8');
  return {
    ...f,
    etag: etagOf(f.body),
    br: brotliCompressSync(raw, { params: { [zlib.BROTLI_PARAM_QUALITY]: 9, [zlib.BROTLI_PARAM_SIZE_HINT]: raw.length } }),
    gzip: gzipSync(raw, { level: 9 }),
  };
}

/** The encoding to send: br, else gzip, when the request accepts it (q=0 refuses); null for identity. */
export function pickEncoding(accept: string | undefined): 'br' | 'gzip' | null {
  if (!accept) return null;
  const ok = new Set<string>();
  for (const part of accept.split(',')) {
    const [name = '', ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (q && Number(q.slice(2)) === 0) continue;
    ok.add(name.trim());
  }
  if (ok.has('br')) return 'br';
  if (ok.has('gzip')) return 'gzip';
  return null;
}

function withHeaders(c: Context<AppEnv>): void {
  for (const [k, v] of Object.entries(CONSOLE_HEADERS)) c.header(k, v);
}

/** Mounts the console's pages, assets and configuration on `app`. */
export function mountConsole(app: OpenAPIHono<AppEnv>, core: CellCore, oauth: OAuthApi): void {
  let served: Promise<Map<string, Served>> | null = null;
  const assets = (): Promise<Map<string, Served>> => {
    served ??= consoleFiles().then((files) => new Map(Object.entries(files).map(([name, f]) => [name, serve(f)])));
    served.catch(() => {
      served = null;
    });
    return served;
  };

  const page = (c: Context<AppEnv>) => {
    withHeaders(c);
    c.header('Cache-Control', 'no-cache');
    return c.html(CONSOLE_HTML, 200);
  };
  app.get(CONSOLE_PATH, page);
  app.get(`${CONSOLE_PATH}/`, page);

  app.get(CONSOLE_CALLBACK_PATH, (c) => {
    withHeaders(c);
    c.header('Cache-Control', 'no-store');
    return c.html(CALLBACK_HTML, 200);
  });

  app.get(CONSOLE_CONFIG_PATH, (c) => {
    withHeaders(c);
    c.header('Cache-Control', 'no-cache');
    return c.json(consoleConfig(core, oauth), 200);
  });

  app.get(`${CONSOLE_ASSETS_PATH}/:name`, async (c) => {
    let files: Map<string, Served>;
    try {
      files = await assets();
    } catch (e) {
      core.log.error('console assets unavailable', { error: e });
      throw new ServiceError('service_unavailable', 'the console could not be built', {
        details: { reason: 'console_unavailable' },
        retryable: true,
      });
    }
    const a = files.get(c.req.param('name'));
    if (!a) throw notFound('console asset');
    withHeaders(c);
    const enc = pickEncoding(c.req.header('accept-encoding'));
    // One ETag per representation: a cache never serves compressed bytes to a client that did not ask.
    const etag = enc ? `${a.etag.slice(0, -1)}-${enc}"` : a.etag;
    c.header('ETag', etag);
    c.header('Vary', 'Accept-Encoding');
    // Names are stable across releases: revalidate every time (a 304 is cheap).
    c.header('Cache-Control', 'no-cache');
    if (c.req.header('if-none-match') === etag) return c.body(null, 304);
    c.header('Content-Type', a.contentType);
    if (enc) {
      c.header('Content-Encoding', enc);
      const bytes = enc === 'br' ? a.br : a.gzip;
      return c.body(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer, 200);
    }
    return c.body(a.body, 200);
  });
}

export function createConsoleModule(core: CellCore, deps: { oauth: OAuthApi }): CellModule {
  return {
    name: 'console',
    routes: (app) => mountConsole(app, core, deps.oauth),
    // The redirect URI follows the public URL, known once the cell listens.
    start: () => registerConsoleClient(core, deps.oauth),
  };
}
