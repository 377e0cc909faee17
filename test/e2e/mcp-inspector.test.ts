/**
 * The MCP Inspector's CLI (@modelcontextprotocol/inspector-cli), a client no one here wrote, lists the
 * tools of the real cell over Streamable HTTP with a bearer credential: the crews the key may run and
 * the read tools, and for a narrow key only what it may call; it calls a read tool too.
 *
 * Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { startCellProcess } from '../helpers/cell-process.ts';
import { httpApi, ok, T, A } from '../helpers/teams.ts';

const INSPECTOR = resolve(import.meta.dirname, '../../node_modules/@modelcontextprotocol/inspector-cli/build/index.js');
const run = promisify(execFile);

test('the MCP Inspector CLI lists the tools each key may call, and calls one', { timeout: 120_000 }, async () => {
  const cell = await startCellProcess();
  try {
    const api = httpApi(cell.url, cell.adminKey);
    const f = await ok(api, 'POST', `${T}/formations`, { name: 'Inspected', purpose: 'Seen by the inspector.' });
    const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: 'r',
      required_skills: [],
      authority_cap: {},
    });
    const a = await ok(api, 'POST', `${T}/agents`, { source: 'scratch', role_label: 'r', authority_template: {} });
    const crew = await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments: { [b.billet_id]: a.agent_id } });
    const narrow = await ok(api, 'POST', `${A}/api-keys`, { name: 'reader', scopes: ['agent_teams.read'] });
    const inspect = async (key: string, ...args: string[]) => {
      const { stdout } = await run(
        process.execPath,
        [INSPECTOR, `${cell.url}/mcp`, '--transport', 'http', '--header', `Authorization: Bearer ${key}`, ...args],
        // The CLI finds its own package.json relative to the working directory (its build folder).
        { timeout: 60_000, cwd: dirname(INSPECTOR) },
      );
      return JSON.parse(stdout) as Record<string, any>;
    };
    const all = await inspect(cell.adminKey, '--method', 'tools/list');
    const names = (all.tools as { name: string; description: string }[]).map((x) => x.name).sort();
    assert.deepEqual(names, ['approval_decide', `crew_${crew.crew_id}`, 'journal_verify', 'run_status'].sort());
    assert.match(all.tools.find((x: { name: string }) => x.name === `crew_${crew.crew_id}`).description, /Seen by the inspector/);
    const few = await inspect(narrow.secret, '--method', 'tools/list');
    assert.deepEqual(
      (few.tools as { name: string }[]).map((x) => x.name),
      ['run_status'],
    );
    const missing = await inspect(
      narrow.secret,
      '--method',
      'tools/call',
      '--tool-name',
      'run_status',
      '--tool-arg',
      'run_id=run_00000000000000000000',
    );
    assert.equal(missing.isError, true);
    assert.equal(JSON.parse(missing.content[0].text).error, 'not_found');
  } finally {
    await cell.stop();
    cell.cleanup();
  }
});
