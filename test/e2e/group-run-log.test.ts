/**
 * One run log for a group of cells (issue 41): two real cell processes on one PostgreSQL database
 * finish runs at the same time; the log holds every run exactly once at contiguous leaf indexes, both
 * cells serve checkpoints of the same tree (each signed with its own identity key, both listed in the
 * group's keys), every run's attestation from either cell verifies against the group's published keys,
 * and a checkpoint taken while runs were finishing is extended by the final one. Needs
 * `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { verifyAttestation } from '../../core/attestation/bundle.ts';
import { checkConsistent, verifyCheckpoint } from '../../core/transparency/checkpoint.ts';
import { call, ok, startGroup, type Group } from '../helpers/group.ts';
import { pgUnavailable } from '../helpers/postgres.ts';

const skip = pgUnavailable() ?? false;
const JOBS = 16;
const RUNS = '/api/public/v1/admin/jobs/runs';
const LOG = '/.well-known/agent-cell/run-log';

describe('a group of two cells keeps one run log', { skip, timeout: 240_000 }, () => {
  let g: Group;
  before(async () => {
    g = await startGroup(2, { args: () => ['--lease-ms', '20000'] });
  });
  after(async () => {
    await g?.stop();
  });

  test('concurrent finishes on both cells make one consistent log; attestations from either cell verify', async () => {
    const [a, b] = g.cells.map((c) => c.url) as [string, string];
    const token = g.adminKey;
    const started = await Promise.all(
      Array.from({ length: JOBS }, (_, i) =>
        ok(i % 2 === 0 ? a : b, 'POST', RUNS, {
          token,
          body: { job_type: 'compute', workspace_id: `ws${i % 3}`, spec: { code: 'return input.n * 2;', input: { n: i } } },
        }),
      ),
    );
    const ids = started.map((s) => s.run_id as string);
    // A checkpoint while the runs finish (any size up to all of them).
    const during = (await call(a, 'GET', `${LOG}/checkpoint`)).text;
    for (const id of ids) {
      for (let i = 0; ; i++) {
        const s = await ok(i % 2 === 0 ? a : b, 'GET', `${RUNS}/${id}`, { token });
        if (['completed', 'failed', 'refused', 'cancelled'].includes(s.state)) {
          assert.equal(s.state, 'completed', JSON.stringify(s.error));
          break;
        }
        assert.ok(i < 3000, `run ${id} did not finish`);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    const keys = (await ok(a, 'GET', '/.well-known/cell-keys.json')).keys as { kid: string; jwk: JsonWebKey; cell_id: string }[];
    assert.equal(new Set(keys.map((k) => k.cell_id)).size, 2, 'both cells list both keys');
    const groupId = (await call(a, 'GET', `${LOG}/checkpoint`)).headers['x-run-log-origin'] as string;
    assert.match(groupId, /^agent-cell\//);
    // Both cells sign a checkpoint of one tree: same size and root, each with its own key.
    const ca = await verifyCheckpoint((await call(a, 'GET', `${LOG}/checkpoint`)).text, groupId, keys);
    const cb = await verifyCheckpoint((await call(b, 'GET', `${LOG}/checkpoint`)).text, groupId, keys);
    assert.ok(ca.ok && cb.ok);
    if (!ca.ok || !cb.ok) return;
    assert.equal(ca.checkpoint.size, cb.checkpoint.size);
    assert.deepEqual(ca.checkpoint.root, cb.checkpoint.root);
    assert.notEqual(ca.signers[0]!.kid, cb.signers[0]!.kid);
    // Every run once, at contiguous indexes.
    const entries = (await ok(b, 'GET', '/api/public/v1/admin/run-log/entries?limit=1000', { token })).entries as {
      leaf_index: number;
      run_id: string;
      source: string;
    }[];
    assert.deepEqual(
      entries.map((e) => e.leaf_index),
      entries.map((_, i) => i),
    );
    assert.equal(entries.length, ca.checkpoint.size);
    for (const id of ids) assert.equal(entries.filter((e) => e.run_id === id).length, 1, `${id} once`);
    assert.equal(new Set(entries.filter((e) => ids.includes(e.run_id)).map((e) => e.source)).size, 2, 'both cells appended');
    // Each run's attestation, from the other cell than the one that ran it half the time, verifies.
    for (const [i, id] of ids.entries()) {
      const att = await ok(i % 2 === 0 ? b : a, 'GET', `${RUNS}/${id}/attestation`, { token });
      const v = await verifyAttestation(att, keys);
      assert.equal(v.ok, true, v.ok ? '' : v.reason);
    }
    // The checkpoint seen while the runs finished is extended by the final one.
    const final = (await call(b, 'GET', `${LOG}/checkpoint`)).text;
    const d = await verifyCheckpoint(during, groupId, keys);
    assert.ok(d.ok);
    if (!d.ok) return;
    const proof = await ok(a, 'GET', `${LOG}/consistency?first=${d.checkpoint.size}&second=${cb.checkpoint.size}`);
    const c = await checkConsistent(during, final, groupId, keys, proof);
    assert.equal(c.ok, true, c.ok ? '' : c.reason);
  });
});
