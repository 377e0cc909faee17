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
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { ServiceError, notFound } from '../../core/errors.ts';
import type { AppEnv, CellCore } from '../context.ts';
import type { OAuthApi } from '../oauth/module.ts';
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
  etagOf,
} from './page.ts';

interface Served extends ConsoleFile {
  etag: string;
}

function withHeaders(c: Context<AppEnv>): void {
  for (const [k, v] of Object.entries(CONSOLE_HEADERS)) c.header(k, v);
}

/** Mounts the console's pages, assets and configuration on `app`. */
export function mountConsole(app: OpenAPIHono<AppEnv>, core: CellCore, oauth: OAuthApi): void {
  let served: Promise<Map<string, Served>> | null = null;
  const assets = (): Promise<Map<string, Served>> => {
    served ??= consoleFiles().then((files) => new Map(Object.entries(files).map(([name, f]) => [name, { ...f, etag: etagOf(f.body) }])));
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
      core.log.error('console assets unavailable', { error: e instanceof Error ? e.message : String(e) });
      throw new ServiceError('service_unavailable', 'the console could not be built', {
        details: { reason: 'console_unavailable' },
        retryable: true,
      });
    }
    const a = files.get(c.req.param('name'));
    if (!a) throw notFound('console asset');
    withHeaders(c);
    c.header('ETag', a.etag);
    // Names are stable across releases: revalidate every time (a 304 is cheap).
    c.header('Cache-Control', 'no-cache');
    if (c.req.header('if-none-match') === a.etag) return c.body(null, 304);
    c.header('Content-Type', a.contentType);
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
