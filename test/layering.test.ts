// The layering of DESIGN.md: cell/ and edge/ import core/, bundles/ and runtime/,
// never each other; core/, bundles/ and runtime/ import neither cell/ nor edge/;
// the console (console/, a browser application) imports only core/ of ours; a cell module reaches
// another only through its face, cell/<m>/api.ts, and the modules import one another in one
// direction only: no circle across modules (scripts/lint-faces.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { faceViolations, importsOf, moduleCycles } from '../scripts/lint-faces.ts';

function* files(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (name === 'node_modules') continue;
    if (statSync(p).isDirectory()) yield* files(p);
    else if (p.endsWith('.ts') || p.endsWith('.tsx')) yield p;
  }
}

function reaches(dir: string, forbidden: string[]): string[] {
  const bad: string[] = [];
  for (const f of files(dir)) {
    for (const s of importsOf(readFileSync(f, 'utf8'))) {
      const target = join(f, '..', s).split('/')[0]!;
      if (forbidden.includes(target)) bad.push(`${f} -> ${s}`);
    }
  }
  return bad;
}

test('cell/ never imports edge/, edge/ never imports cell/', () => {
  assert.deepEqual(reaches('cell', ['edge']), []);
  assert.deepEqual(reaches('edge', ['cell']), []);
});

test('core/, bundles/ and runtime/ import neither cell/ nor edge/', () => {
  for (const d of ['core', 'bundles', 'runtime']) assert.deepEqual(reaches(d, ['cell', 'edge']), [], d);
});

test('console/ imports only core/ of the project; nothing imports console/ but the build', () => {
  assert.deepEqual(reaches('console', ['cell', 'edge', 'bundles', 'runtime', 'scripts']), []);
  for (const d of ['core', 'bundles', 'runtime', 'edge']) assert.deepEqual(reaches(d, ['console']), [], d);
  // The cell reaches console/ only through its dev-time asset loader (replaced in the bundle).
  assert.deepEqual(
    reaches('cell', ['console']).map((x) => x.split(' -> ')[0]),
    ['cell/console/internal/assets.ts'],
  );
});

const SOURCE = ['core', 'bundles', 'runtime', 'cell', 'edge', 'console'];

test('an internal/ folder is private to the folder that holds it', () => {
  const bad: string[] = [];
  for (const d of [...SOURCE, 'test', 'bench', 'scripts']) {
    for (const f of files(d)) {
      for (const s of importsOf(readFileSync(f, 'utf8'))) {
        const target = join(f, '..', s);
        const i = target.indexOf('/internal/');
        if (i < 0) continue;
        const owner = target.slice(0, i);
        // The owner folder and its subfolders may import it; so may the owner's tests (test/<owner>/)
        // and the benchmarks, which build fixtures below the public surface (a store's log).
        if (!(f.startsWith(owner + '/') || f.startsWith(join('test', owner) + '/') || f.startsWith('bench/'))) bad.push(`${f} -> ${s}`);
      }
    }
  }
  assert.deepEqual(bad, []);
});

test('source files private to a folder live in internal/, not behind a _ prefix', () => {
  const prefixed = SOURCE.flatMap((d) => [...files(d)]).filter((f) => /\/_[^/]+$/.test(f));
  assert.deepEqual(prefixed, []);
});

// The faces rule (scripts/lint-faces.ts, run by `make lint`): a file of cell/<m>/ imports another
// module only through cell/<other>/api.ts; cell/store/ and cell/http/ are infrastructure, no face.
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'faces-'));
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(join(root, p, '..'), { recursive: true });
    writeFileSync(join(root, p), text);
  }
  return root;
}

test('faces: every import of a cell module from another goes through its api.ts', () => {
  assert.deepEqual(faceViolations('.'), []);
});

test('faces: an import past a face is refused, static, re-exported or dynamic', () => {
  const root = tree({
    'cell/runs/api.ts': 'export {};\n',
    'cell/runs/runs.ts': 'export const x = 1;\n',
    'cell/runs/context.ts': "import { x } from './runs.ts';\n",
    'cell/store/types.ts': 'export type Tx = unknown;\n',
    'cell/iam/api.ts': 'export {};\n',
    'cell/teams/api.ts': "import type { Tx } from '../store/types.ts';\nimport { y } from '../runs/api.ts';\n",
    'cell/teams/crew-runs/runs.ts': "import { x } from '../../runs/runs.ts';\nimport { z } from '../../runs/api.ts';\n",
    'cell/teams/crew-runs/view.ts': "export { x } from '../../runs/runs.ts';\nconst m = await import('../../iam/iam.ts');\n",
    'cell/server.ts': "import { x } from './runs/runs.ts';\n",
  });
  try {
    assert.deepEqual(faceViolations(root), [
      'cell/teams/crew-runs/runs.ts -> ../../runs/runs.ts (use cell/runs/api.ts)',
      'cell/teams/crew-runs/view.ts -> ../../runs/runs.ts (use cell/runs/api.ts)',
      'cell/teams/crew-runs/view.ts -> ../../iam/iam.ts (use cell/iam/api.ts)',
    ]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('faces: a module folder without its api.ts is refused; infrastructure folders need none', () => {
  const root = tree({
    'cell/jobs/module.ts': 'export {};\n',
    'cell/http/errors.ts': 'export {};\n',
    'cell/store/types.ts': 'export {};\n',
  });
  try {
    assert.deepEqual(faceViolations(root), ['cell/jobs: no api.ts']);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('faces: make lint fails on an import past a face', () => {
  const root = tree({ 'cell/runs/api.ts': 'export {};\n', 'cell/runs/runs.ts': '', 'cell/jobs/api.ts': "import '../runs/runs.ts';\n" });
  try {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/lint-faces.ts', root], { encoding: 'utf8' });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /cell\/jobs\/api\.ts -> \.\.\/runs\/runs\.ts \(use cell\/runs\/api\.ts\)/);
    const ok = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/lint-faces.ts'], { encoding: 'utf8' });
    assert.equal(ok.status, 0, ok.stderr);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

// No circle across modules (scripts/lint-faces.ts moduleCycles): issue 42 found one, iam -> sealed-jwk.ts -> ai -> iam
// (the secrets key lived in ai/ and IAM's signing keys reached it through a top-level file).
test('no import circle across the modules of cell/', () => {
  assert.deepEqual(moduleCycles('.'), []);
});

test('circles: through a shared top-level file, through the wiring, type-only; not through infrastructure', () => {
  const root = tree({
    'cell/ai/api.ts': "import type { Iam } from '../iam/api.ts';\n",
    'cell/iam/api.ts': 'export {};\n',
    'cell/iam/iam.ts': "import { seal } from '../sealed-jwk.ts';\n",
    'cell/sealed-jwk.ts': "import { x } from './ai/api.ts';\n",
    'cell/edge/api.ts': 'export {};\n',
    'cell/edge/cli.ts': "import { startCell } from '../server.ts';\n",
    'cell/jobs/api.ts': "import { y } from '../edge/api.ts';\n",
    'cell/server.ts': "import { z } from './jobs/api.ts';\n",
    'cell/ops/api.ts': "import type { Tx } from '../store/types.ts';\n",
    'cell/http/gateway.ts': "import type { M } from '../ops/api.ts';\n",
    'cell/store/types.ts': "import { g } from '../http/gateway.ts';\n",
  });
  try {
    assert.deepEqual(moduleCycles(root), [
      'ai -> iam -> sealed-jwk.ts -> ai (the circle joins ai, iam)',
      'edge -> server.ts -> jobs -> edge (the circle joins edge, jobs)',
    ]);
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/lint-faces.ts', root], { encoding: 'utf8' });
    assert.equal(r.status, 1, 'make lint fails on a circle');
    assert.match(r.stderr, /an import circle across modules: ai -> iam -> sealed-jwk\.ts -> ai/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
