/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance, `conformance client`) against
 * the cell's own MCP client: the scenario of a server behind its own authorization server that issues
 * tokens to machine clients (`auth/client-credentials-basic`: the client_credentials grant,
 * client_secret_basic). The client is the real cell (test/fixtures/mcp-conformance/cell-client.ts): its
 * operator registers the suite's server as a catalog source with client-credentials auth, the cell gets
 * a token and lists the tools with it, and one tool is called through a `single` job run. The suite
 * judges what it saw at its authorization server and its MCP server. The other `auth/*` client scenarios
 * and why they do not apply to the cell: docs/mcp.md, "Conformance".
 *
 * The client's cell is on the run's engine (CELL_TEST_STORE passes to the child). Needs Node 22 or newer
 * (the suite calls fs.globSync).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';

const ROOT = resolve(import.meta.dirname, '../..');
const SUITE = join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const CLIENT = resolve(import.meta.dirname, '../fixtures/mcp-conformance/cell-client.ts');

interface Check {
  id: string;
  status: string;
  details?: { mcpMethod?: string; path?: string; method?: string };
}

/** One client scenario with the cell as the client: the suite's exit code, output, and the checks it wrote. */
async function scenario(name: string): Promise<{ code: number | null; text: string; checks: Check[]; stdout: string }> {
  const out = mkdtempSync(join(tmpdir(), 'mcp-conformance-client-'));
  try {
    const run = spawn(
      process.execPath,
      [SUITE, 'client', '--command', `${process.execPath} --import tsx ${CLIENT}`, '--scenario', name, '--timeout', '50000', '-o', out],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let text = '';
    run.stdout.on('data', (d: Buffer) => (text += d.toString()));
    run.stderr.on('data', (d: Buffer) => (text += d.toString()));
    const code = await new Promise<number | null>((r) => run.once('exit', r));
    const dir = join(out, ...name.split('/').slice(0, -1));
    const [result] = readdirSync(dir).filter((d) => d.startsWith(`${name.split('/').at(-1)}-`));
    assert.ok(result, `no results for ${name}:\n${text.slice(-4000)}`);
    return {
      code,
      text,
      checks: JSON.parse(readFileSync(join(dir, result, 'checks.json'), 'utf8')) as Check[],
      stdout: readFileSync(join(dir, result, 'stdout.txt'), 'utf8'),
    };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

test('the conformance suite: the cell as a client-credentials client (auth/client-credentials-basic) passes', {
  timeout: 90_000,
}, async () => {
  const r = await scenario('auth/client-credentials-basic');
  assert.equal(r.code, 0, `the suite's verdict:\n${r.text.slice(-8000)}`);
  const status = (id: string) => r.checks.filter((c) => c.id === id).map((c) => c.status);
  assert.deepEqual(status('client-credentials-basic-auth'), ['SUCCESS'], 'one token request, client_credentials with Basic auth');
  assert.ok(!r.checks.some((c) => c.status === 'FAILURE' || c.status === 'WARNING'), JSON.stringify(r.checks));
  // Every request the server saw carried the token; it saw the tools listed and the tool called. The suite's
  // server checks the token on POST /mcp only: a GET (the standalone event stream the client may open after
  // initializing, timing permitting) or a DELETE on /mcp is logged but not routed, so it has no token check.
  const mcp = r.checks.filter((c) => c.id === 'incoming-request' && c.details?.path === '/mcp' && c.details?.method === 'POST');
  assert.ok(mcp.length > 0);
  // On a mismatch, what the server saw, in order (a request without a token is answered 401 with no token check).
  const seen = r.checks
    .filter(
      (c) => c.id === 'valid-bearer-token' || (c.details?.path === '/mcp' && ['incoming-request', 'outgoing-response'].includes(c.id)),
    )
    .map((c) =>
      c.id === 'valid-bearer-token'
        ? 'token'
        : `${c.id === 'incoming-request' ? '>' : '<'} ${c.details?.method} ${c.details?.mcpMethod ?? ''} ${(c.details as { statusCode?: number }).statusCode ?? ''}`,
    );
  assert.equal(status('valid-bearer-token').length, mcp.length, `a valid bearer token on every MCP request:\n${seen.join('\n')}`);
  const methods = new Set(mcp.map((c) => c.details?.mcpMethod));
  assert.ok(methods.has('tools/list') && methods.has('tools/call'), [...methods].join(', '));
  assert.match(r.stdout, /called test-tool: .*"kind":"client","client_id":"conformance-test-client"/);
});
