/**
 * Group membership (cell/cluster): registration, heartbeat classification
 * (live / suspect / dead by the member's own interval and lease), the
 * permission-gated member list, the posture rules, and, on PostgreSQL, two
 * cells on one store: each lists both members and both cells' identity keys.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClusterRefusal } from '../../../cell/cluster/cluster.ts';
import { actor } from '../../helpers/actors.ts';
import { groupSecretsKeyFile } from '../../helpers/cell-process.ts';
import { inProcessCell, TEST_ENGINE } from '../../helpers/inproc.ts';

const CELLS = '/api/public/v1/admin/cells';

test('a cell registers itself; its state follows the age of its heartbeat', async () => {
  const t = await inProcessCell({
    config: { region: 'eu-1', clearance: 2, topology: { site: 'hq' }, heartbeatMs: 60_000, leaseMs: 600_000 },
  });
  try {
    const r = await t.request('GET', CELLS, { token: t.adminKey });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.items.length, 1);
    const me = r.body.items[0];
    assert.equal(me.cell_id, 'cell-test');
    assert.equal(me.self, true);
    assert.equal(me.state, 'live');
    assert.equal(me.region, 'eu-1');
    assert.equal(me.clearance, 2);
    assert.deepEqual(me.topology, { site: 'hq' });
    assert.equal(me.posture, 'single-cell');
    assert.equal(me.lease_ms, 600_000);
    assert.deepEqual(me.key_ids, [t.modules.iam.iam.signer().kid]);
    if (t.engine === 'embedded') {
      // Alone by its directory lock: no heartbeat is written, and the cell is live while it runs.
      t.clock.advance(10 * 600_000);
      assert.equal((await t.request('GET', CELLS, { token: t.adminKey })).body.items[0].state, 'live');
      return;
    }
    t.clock.advance(130_000);
    assert.equal((await t.request('GET', CELLS, { token: t.adminKey })).body.items[0].state, 'suspect', 'late by more than two beats');
    t.clock.advance(480_000);
    assert.equal((await t.request('GET', CELLS, { token: t.adminKey })).body.items[0].state, 'dead', 'past its lease');
    await t.modules.cluster.cluster.tick();
    const back = (await t.request('GET', CELLS, { token: t.adminKey })).body.items[0];
    assert.equal(back.state, 'live', 'a heartbeat makes it live again');
    assert.equal(back.heartbeat_age_ms, 0);
  } finally {
    await t.close();
  }
});

test('the member list needs a credential and the orchestration read permission', async () => {
  const t = await inProcessCell();
  try {
    assert.equal((await t.request('GET', CELLS)).status, 401);
    const other = await actor(t, { permissions: ['catalog.read'] });
    const denied = await t.request('GET', CELLS, { token: other.key });
    assert.equal(denied.status, 403, denied.text);
    assert.equal(denied.body.error, 'forbidden');
    const reader = await actor(t, { permissions: ['system.orchestration.admin.read'] });
    assert.equal((await t.request('GET', CELLS, { token: reader.key })).status, 200);
  } finally {
    await t.close();
  }
});

test('a lease shorter than two heartbeats is refused at start', async () => {
  await assert.rejects(
    inProcessCell({ config: { heartbeatMs: 500, leaseMs: 600 } }),
    (e: unknown) => e instanceof ClusterRefusal && e.reason === 'lease_too_short',
  );
});

test('posture multi-cell needs the PostgreSQL store', async (t) => {
  if (TEST_ENGINE === 'postgres') {
    const c = await inProcessCell({ config: { posture: 'multi-cell' } });
    await c.close();
    return;
  }
  await assert.rejects(inProcessCell({ config: { posture: 'multi-cell' } }), (e: unknown) => {
    assert.ok(e instanceof ClusterRefusal);
    assert.equal(e.reason, 'multi_cell_needs_postgres');
    assert.match(e.message, /PostgreSQL/);
    return true;
  });
  t.diagnostic('embedded engine: refused');
});

test('cells on one PostgreSQL store form a group; single-cell refuses to join one', { skip: TEST_ENGINE !== 'postgres' }, async () => {
  // The members of a group share one secrets key (it seals the OAuth signing keys they share).
  const secretsKeyFile = groupSecretsKeyFile();
  const a = await inProcessCell({ config: { cellId: 'cell-a', posture: 'multi-cell', heartbeatMs: 100, leaseMs: 1000, secretsKeyFile } });
  const storeUrl = a.core.config.storeUrl!;
  let b: Awaited<ReturnType<typeof inProcessCell>> | null = null;
  try {
    await assert.rejects(inProcessCell({ clock: a.clock, config: { cellId: 'cell-s', storeUrl, secretsKeyFile } }), (e: unknown) => {
      assert.ok(e instanceof ClusterRefusal);
      assert.equal(e.reason, 'single_cell_group');
      assert.match(e.message, /posture single-cell: this store already has a live cell \(cell-a\)/);
      return true;
    });
    b = await inProcessCell({
      clock: a.clock,
      config: { cellId: 'cell-b', posture: 'multi-cell', storeUrl, clearance: 3, secretsKeyFile },
    });
    const list = await b.request('GET', CELLS, { token: a.adminKey });
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(
      list.body.items.map((m: { cell_id: string; state: string; self: boolean }) => [m.cell_id, m.state, m.self]),
      [
        ['cell-a', 'live', false],
        ['cell-b', 'live', true],
      ],
      'the refused cell left no row',
    );
    // Each cell signs with its own key; each publishes both.
    for (const c of [a, b]) {
      const keys = await c.request('GET', '/.well-known/cell-keys.json');
      assert.equal(keys.status, 200);
      assert.deepEqual(keys.body.keys.map((k: { cell_id: string }) => k.cell_id).sort(), ['cell-a', 'cell-b']);
      assert.equal(keys.body.keys[0].cell_id, c.core.config.cellId, "the answering cell's keys first");
    }
    assert.notEqual(a.modules.iam.iam.signer().kid, b.modules.iam.iam.signer().kid);
    // A clean stop: dead at once.
    await b.running.stop();
    const after = await a.request('GET', CELLS, { token: a.adminKey });
    assert.equal(after.body.items.find((m: { cell_id: string }) => m.cell_id === 'cell-b').state, 'dead');
    assert.ok(after.body.items.find((m: { cell_id: string }) => m.cell_id === 'cell-b').stopped_at);
  } finally {
    await b?.close();
    await a.close();
  }
});

test('after a store outage a peer is judged from when the store answered again, not from its last beat', {
  skip: TEST_ENGINE !== 'postgres',
}, async () => {
  const secretsKeyFile = groupSecretsKeyFile();
  const a = await inProcessCell({ config: { cellId: 'cell-a', posture: 'multi-cell', heartbeatMs: 100, leaseMs: 1000, secretsKeyFile } });
  let b: Awaited<ReturnType<typeof inProcessCell>> | null = null;
  const stateOf = async (id: string) =>
    (await a.request('GET', CELLS, { token: a.adminKey })).body.items.find((m: { cell_id: string }) => m.cell_id === id).state;
  try {
    b = await inProcessCell({
      clock: a.clock,
      config: {
        cellId: 'cell-b',
        posture: 'multi-cell',
        storeUrl: a.core.config.storeUrl!,
        heartbeatMs: 100,
        leaseMs: 1000,
        secretsKeyFile,
      },
    });
    const cluster = a.modules.cluster.cluster;
    // cell-a's beats fail for five seconds (the store away for it): cell-b could not beat either.
    const beat = cluster.beat.bind(cluster);
    cluster.beat = async () => {
      throw new Error('the store is unreachable');
    };
    assert.equal(await cluster.beatLogged(), false);
    a.clock.advance(5_000);
    cluster.beat = beat;
    assert.equal(await cluster.beatLogged(), true, 'the store answers again');
    assert.equal(await stateOf('cell-b'), 'live', 'not dead for the beats nobody could write');
    a.clock.advance(600);
    assert.equal(await stateOf('cell-b'), 'suspect', 'late since the store came back');
    a.clock.advance(500);
    assert.equal(await stateOf('cell-b'), 'dead', 'a whole lease since the store came back');
  } finally {
    await b?.close();
    await a.close();
  }
});
