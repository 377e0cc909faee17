// stdio sources come only from the cell's configuration (`serve --tool-sources FILE`): the real program
// started with the flag imports the tools of a small SDK stdio server (test/fixtures/mcp-stdio-server.mjs)
// and calls them; the API cannot register, change or delete such a source (it can review and re-pin it);
// egress to it is named `mcp:<source>`. A file that is not a valid configuration stops the start.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { parseToolSources } from '../../../cell/tools/sources/config.ts';
import { inProcessCell } from '../../helpers/inproc.ts';
import { jobEnded, SOURCES as S } from '../../helpers/mcp.ts';
import { CELL_BIN, startCellProcess } from '../../helpers/cell-process.ts';
import { A, httpApi, ok, type Api } from '../../helpers/teams.ts';

const SERVER = resolve(import.meta.dirname, '../../fixtures/mcp-stdio-server.mjs');
const files = { name: 'files', command: process.execPath, args: [SERVER], env: { ECHO_PREFIX: 'echo: ' } };

test('the configuration file is read strictly: what is wrong is named', () => {
  const bad: [string, RegExp][] = [
    ['[]', /must be \{ "sources"/],
    ['{"sources":[{"name":"Files","command":"x"}]}', /name/],
    ['{"sources":[{"name":"f","command":""}]}', /command/],
    ['{"sources":[{"name":"f","command":"x","args":"a"}]}', /args/],
    ['{"sources":[{"name":"f","command":"x","env":{"A":1}}]}', /env/],
    ['{"sources":[{"name":"f","command":"x","url":"http://x"}]}', /url is not a setting/],
    ['{"sources":[{"name":"f","command":"x"},{"name":"f","command":"y"}]}', /twice/],
    ['{"sources":[{"name":"f","command":"x","timeout_ms":1}]}', /timeout_ms/],
  ];
  for (const [text, why] of bad) {
    const r = parseToolSources(text, '/');
    assert.equal(r.ok, false, text);
    if (!r.ok) assert.match(r.error, why, text);
  }
  const good = parseToolSources(JSON.stringify({ sources: [{ ...files, cwd: 'srv' }] }), '/etc/cell');
  assert.ok(good.ok);
  if (good.ok) assert.deepEqual(good.sources[0]!.cwd, '/etc/cell/srv');
});

test('a configured stdio source is imported at start and called; the API cannot make, change or delete one', {
  timeout: 180_000,
}, async () => {
  const t = await inProcessCell({
    config: { toolSources: [{ ...files, cwd: null, description: 'local files', definition_max_age_ms: 0, timeout_ms: 10_000 }] },
  });
  const api: Api = { request: t.request, token: t.adminKey };
  try {
    const list = await ok(api, 'GET', S);
    assert.equal(list.total, 1);
    const src = list.sources[0];
    assert.equal(src.origin, 'config');
    assert.equal(src.transport, 'stdio');
    assert.equal(src.url, null);
    assert.deepEqual(
      src.tools.map((x: { name: string; side_effects: boolean }) => [x.name, x.side_effects]),
      [
        ['mcp.files.counter', true],
        ['mcp.files.echo', false],
      ],
    );
    const id = src.source_id as string;
    for (const [method, path, body] of [
      ['PATCH', `${S}/${id}`, { description: 'x' }],
      ['DELETE', `${S}/${id}`, undefined],
    ] as const) {
      const r = await t.request(method, path, { token: t.adminKey, ...(body ? { body } : {}) });
      assert.equal(r.status, 409, r.text);
      assert.equal(r.body.details.reason, 'source_config_managed');
    }
    const taken = await t.request('POST', S, { token: t.adminKey, body: { name: 'files', url: 'http://127.0.0.1:9/mcp' } });
    assert.equal(taken.status, 409);
    assert.equal(taken.body.details.reason, 'name_taken');
    const review = await ok(api, 'GET', `${S}/${id}/review`);
    assert.deepEqual(
      review.tools.map((x: { status: string }) => x.status),
      ['pinned', 'pinned'],
    );
    // Egress to a stdio source is named mcp:<source>.
    const single = (egress: string[]) => ({
      job_type: 'single',
      workspace_id: 'w',
      spec: { tool: 'mcp.files.echo', args: { text: 'hi' }, authority: { egress_allowlist: egress } },
    });
    const denied = await jobEnded(api, (await ok(api, 'POST', `${A}/jobs/runs`, single(['*.example.com']))).run_id);
    assert.equal(denied.state, 'failed');
    assert.equal(denied.error.reason, 'egress_denied');
    const done = await jobEnded(api, (await ok(api, 'POST', `${A}/jobs/runs`, single(['mcp:files']))).run_id);
    assert.equal(done.state, 'completed', JSON.stringify(done));
    assert.deepEqual(done.output.content, [{ type: 'text', text: 'echo: hi' }]);
    assert.deepEqual(done.output.identity, { kind: 'none' });
    // A side-effecting tool of a stdio source: `mcp:<source>` reaches it (an entry only MCP reads, so it names no
    // methods), and the call carries its effect key in _meta, the one its intent recorded.
    const counted = await jobEnded(
      api,
      (
        await ok(api, 'POST', `${A}/jobs/runs`, {
          job_type: 'single',
          workspace_id: 'w',
          spec: { tool: 'mcp.files.counter', args: {}, authority: { egress_allowlist: ['mcp:files'] } },
        })
      ).run_id,
    );
    assert.equal(counted.state, 'completed', JSON.stringify(counted));
    const j = await ok(api, 'GET', `${A}/jobs/runs/${counted.run_id}/journal`);
    const intent = j.records.find((r: { kind: string }) => r.kind === 'intent');
    assert.match(intent.data.effect_key, /^[0-9a-f-]{36}$/);
    assert.deepEqual(JSON.parse(counted.output.content[0].text), { count: 1, effect_key: intent.data.effect_key });
  } finally {
    await t.close();
  }
});

test('the program reads --tool-sources at start, and refuses to start on a bad file', { timeout: 180_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tool-sources-'));
  const file = join(dir, 'sources.json');
  writeFileSync(file, JSON.stringify({ sources: [files] }));
  const badFile = join(dir, 'bad.json');
  writeFileSync(badFile, JSON.stringify({ sources: [{ name: 'files' }] }));
  try {
    const bad = spawnSync(process.execPath, [CELL_BIN, 'serve', '--port', '0', '--data', join(dir, 'd'), '--tool-sources', badFile], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr + bad.stdout, /--tool-sources .*command must be a string/);
    // A new stdio source is imported before the cell says it listens (its server started once): allow for a loaded machine.
    const cell = await startCellProcess({ args: ['--tool-sources', file], timeoutMs: 90_000 });
    try {
      const api = httpApi(cell.url, cell.adminKey);
      const src = (await ok(api, 'GET', S)).sources[0];
      assert.equal(src.name, 'files');
      assert.equal(src.tools.length, 2);
      const run = await ok(api, 'POST', `${A}/jobs/runs`, {
        job_type: 'single',
        workspace_id: 'w',
        spec: { tool: 'mcp.files.echo', args: { text: 'from the program' }, authority: { egress_allowlist: ['mcp:files'] } },
      });
      const v = await jobEnded(api, run.run_id);
      assert.equal(v.state, 'completed', JSON.stringify(v));
      assert.deepEqual(v.output.content, [{ type: 'text', text: 'echo: from the program' }]);
    } finally {
      await cell.stop();
      cell.cleanup();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
