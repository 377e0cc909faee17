/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance, `conformance server`) against
 * the real cell: every server scenario, the whole suite (`--suite all`), with the scenarios that do not
 * apply to the cell listed, each with why, in test/fixtures/mcp-conformance/baseline.yml
 * (docs/mcp.md, "Conformance"). The run fails when a scenario not listed fails, or when a listed one
 * passes (a stale entry), so this test fails both ways.
 *
 * The suite sends no credential of its own: it talks to the cell through a small proxy that adds one
 * (`Authorization: Bearer` with an API key scoped to what the MCP tools need) and forwards everything
 * else as it came, Host and Origin included; the cell's public URL is the proxy's, as it would be behind
 * any proxy (its DNS-rebinding scenario then judges the cell's Origin check).
 *
 * Needs `node scripts/build.mjs` first, and Node 22 or newer (the suite calls fs.globSync).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { startCellProcess } from '../helpers/cell-process.ts';

const SUITE = resolve(import.meta.dirname, '../../node_modules/@modelcontextprotocol/conformance/dist/index.js');
const BASELINE = resolve(import.meta.dirname, '../fixtures/mcp-conformance/baseline.yml');

/** A proxy on port 0 that adds `Authorization` and forwards the rest as it came (streaming both ways). */
function credentialProxy(): Promise<{ server: Server; url: string; target(url: string, token: string): void }> {
  let upstream: URL | undefined;
  let bearer = '';
  const server = createServer((req, res) => {
    const up = request(
      {
        host: upstream!.hostname,
        port: upstream!.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, authorization: `Bearer ${bearer}` },
      },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  return new Promise((ok) =>
    server.listen(0, '127.0.0.1', () =>
      ok({
        server,
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        target(u, t) {
          upstream = new URL(u);
          bearer = t;
        },
      }),
    ),
  );
}

test('the official MCP conformance suite: every server scenario that applies passes', { timeout: 600_000 }, async () => {
  const proxy = await credentialProxy();
  const cell = await startCellProcess({ args: ['--public-url', proxy.url, '--rate-capacity', '100000', '--rate-refill', '100000'] });
  const out = mkdtempSync(join(tmpdir(), 'mcp-conformance-'));
  try {
    const key = await fetch(`${cell.url}/api/public/v1/admin/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${cell.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        name: 'conformance',
        scopes: ['agent_teams.read', 'agent_teams.write', 'agent_teams.approve', 'system.orchestration.admin.read'],
      }),
    }).then((r) => r.json() as Promise<{ secret: string }>);
    proxy.target(cell.url, key.secret);
    const run = spawn(
      process.execPath,
      [SUITE, 'server', '--url', `${proxy.url}/mcp`, '--suite', 'all', '--expected-failures', BASELINE, '-o', out],
      {
        cwd: out,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let text = '';
    run.stdout.on('data', (d: Buffer) => (text += d.toString()));
    run.stderr.on('data', (d: Buffer) => (text += d.toString()));
    const code = await new Promise<number | null>((r) => run.once('exit', r));
    assert.equal(code, 0, `the suite's verdict against the baseline:\n${text.slice(-12000)}`);

    // What ran, from the suite's own results: all 32 server scenarios; the 6 that apply passed every check.
    const byScenario = new Map<string, { status: string }[]>();
    for (const d of readdirSync(out)) {
      const m = /^server-(.+)-\d{4}-\d\d-\d\dT/.exec(d);
      if (m) byScenario.set(m[1]!, JSON.parse(readFileSync(join(out, d, 'checks.json'), 'utf8')) as { status: string }[]);
    }
    assert.equal(byScenario.size, 32, [...byScenario.keys()].join(', '));
    const notApplicable = readFileSync(BASELINE, 'utf8')
      .match(/^ {2}- (\S+)$/gm)!
      .map((l) => l.slice(4));
    assert.equal(notApplicable.length, 26);
    const applicable = [...byScenario.keys()].filter((s) => !notApplicable.includes(s)).sort();
    assert.deepEqual(applicable, [
      'dns-rebinding-protection',
      'logging-set-level',
      'ping',
      'server-initialize',
      'server-sse-multiple-streams',
      'tools-list',
    ]);
    for (const s of applicable)
      assert.ok(!byScenario.get(s)!.some((c) => c.status === 'FAILURE'), `${s}: ${JSON.stringify(byScenario.get(s))}`);
  } finally {
    await cell.stop();
    cell.cleanup();
    proxy.server.closeAllConnections();
    proxy.server.close();
    if (!process.env['KEEP_CONFORMANCE']) rmSync(out, { recursive: true, force: true });
    else console.log('results in', out);
  }
});
