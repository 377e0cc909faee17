// The run id's syntax (core/run-id.ts): declared once, for the cell's random ids and a device's derived
// ones alike, and written nowhere else in the sources.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { RUN_ID_PATTERN } from '../../core/run-id.ts';
import { edgeRunId } from '../../bundles/run-id.ts';

test('a run id is run_ + 20 lower-case hex digits, whether the cell drew it or a device derived it', async () => {
  assert.ok(RUN_ID_PATTERN.test('run_0123456789abcdef0123'));
  // test/bundles/run-id.test.ts pins this device-derived id.
  assert.ok(RUN_ID_PATTERN.test(await edgeRunId('_VUrItvHr1FtK2abzLtyqfbUxGycwQs4pAcyyVxj0iM', '00112233445566778899aabbccddeeff')));
  for (const bad of [
    '',
    'run_',
    'run_0123456789abcdef012',
    'run_0123456789abcdef01234',
    'run_0123456789ABCDEF0123',
    'job_0123456789abcdef0123',
    ' run_0123456789abcdef0123',
    'run_0123456789abcdef0123\n',
    'run_0123456789abcdef0123/..',
  ]) {
    assert.equal(RUN_ID_PATTERN.test(bad), false, JSON.stringify(bad));
  }
});

function* sources(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (name === 'node_modules' || name === 'dist') continue;
    if (statSync(p).isDirectory()) yield* sources(p);
    else if (/\.tsx?$/.test(p)) yield p;
  }
}

test('no source but core/run-id.ts writes the run id pattern again', () => {
  const again: string[] = [];
  for (const root of ['core', 'bundles', 'runtime', 'cell', 'edge', 'console']) {
    for (const f of sources(root)) {
      if (f !== join('core', 'run-id.ts') && readFileSync(f, 'utf8').includes('run_[0-9a-f]{20}')) again.push(f);
    }
  }
  assert.deepEqual(again, []);
});
