// console/src/router.ts: fragments to views and back; anything unknown or
// malformed goes to the runs list, never to a view with a bad id.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { href, parseRoute } from '../../console/src/router.ts';

test('routes', () => {
  assert.deepEqual(parseRoute('#/runs/run_0123456789abcdef0123'), { view: 'run', runId: 'run_0123456789abcdef0123' });
  assert.equal(parseRoute('#/approvals').view, 'approvals');
  assert.deepEqual(parseRoute('#/formations/frm_1'), { view: 'formations', formationId: 'frm_1' });
  assert.deepEqual(parseRoute('#/formations'), { view: 'formations', formationId: null });
  for (const v of ['keys', 'audit', 'cells', 'catalog']) assert.equal(parseRoute(`#/${v}`).view, v);
  const runs = parseRoute('#/runs?state=waiting&crew=crw_1');
  assert.equal(runs.view, 'runs');
  assert.equal(runs.view === 'runs' ? runs.query.get('state') : null, 'waiting');
  for (const bad of ['', '#', '#/nope', '#/runs/<script>', '#/runs/%E0%A4%A', '#/formations/a b']) {
    const r = parseRoute(bad);
    assert.ok(r.view === 'runs' || (r.view === 'formations' && r.formationId === null), `${bad} -> ${JSON.stringify(r)}`);
  }
  assert.equal(href('runs', 'run_1'), '#/runs/run_1');
  assert.equal(href('runs', null, { state: 'waiting', kind: '' }), '#/runs?state=waiting');
  assert.deepEqual(parseRoute(href('formations', 'frm_x')), { view: 'formations', formationId: 'frm_x' });
});
