/**
 * `make demo` (scripts/demo.ts) runs the whole story against the real programs
 * and exits 0, printing every numbered step, the expected answers, no full
 * secret, and leaving no temp directory behind. Needs `make build edge-runtime`
 * (dist/cell.mjs, dist/edge, edge-runtime/node_modules); skipped otherwise.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');

function why(): string | false {
  for (const f of ['dist/cell.mjs', 'dist/edge', 'edge-runtime/node_modules/node-llama-cpp']) {
    if (!existsSync(join(ROOT, f))) return `${f} is missing: run \`make build edge-runtime\` to test make demo`;
  }
  return false;
}

test('make demo: the whole story runs and exits 0, printing each step', { skip: why(), timeout: 150_000 }, async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts/demo.ts')], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const timer = setTimeout(() => child.kill('SIGTERM'), 140_000);
  const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  clearTimeout(timer);
  assert.equal(code, 0, `demo exited ${code}\n${out}\n${err}`);

  const steps = [
    'Start a real cell',
    'Principals and keys',
    'Jobs: compute',
    'A crew on an OpenAI-compatible model',
    'The edge:',
    'Clean up',
  ];
  for (const [i, title] of steps.entries())
    assert.match(
      out,
      new RegExp(`^${i + 1}\\. ${title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`, 'm'),
      `step ${i + 1} (${title}) not printed`,
    );
  // The answers that tell the story.
  assert.match(out, /with the jobs key -> 403 forbidden/);
  assert.match(out, /with the old secret svck_live_.{3}… -> 200/);
  assert.match(out, /with the revoked key -> 401 unauthorized \(revoked\)/);
  assert.match(out, /output\.result = \[1,4,9\]/);
  assert.match(out, /events id 1 run_started, id 2 .*run_finished/);
  assert.match(out, /400 invalid_request \(over_authority\)/);
  assert.match(out, /verifyJournal\(records, the cell's published keys\) -> ok/);
  assert.match(out, /edge\.read with the revoked key .* -> 401 unauthorized \(revoked\)/);
  assert.match(out, /edge\.read with the wrong IP key .* -> 403 forbidden \(ip_not_allowed\)/);
  assert.match(out, /completed offline on the tiny model/);
  assert.match(out, /POST \/api\/public\/v1\/admin\/edge\/journals \(the export\) -> 201, verified true/);
  assert.match(out, /demo complete in/);
  // Secrets are shortened on screen; nothing is left behind.
  assert.doesNotMatch(out, /svck_live_[A-Za-z0-9_-]{43}/, 'a full API key secret was printed');
  const work = /work directory (\S+)\)/.exec(out)?.[1];
  assert.ok(work, 'the work directory was not printed');
  assert.equal(existsSync(work), false, `${work} was not removed`);
});
