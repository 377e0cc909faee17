/**
 * The ledger fold under load (cell/teams/resources/agents.ts): every model call's reservation
 * sums its agent's reservations not folded yet, so a cell that made FOLD_AFTER reservations
 * folds at once instead of letting them pile up until the 5 s sweep. What a ledger shows is
 * the same either way (its columns plus the rows not folded yet).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { INVESTIGATE_SWEEP_MS } from '../../../cell/teams/crew-runs/runs.ts';
import { FOLD_AFTER } from '../../../cell/teams/resources/agents.ts';
import { crewFixture, ok, T, team } from '../../helpers/teams.ts';

test('past FOLD_AFTER reservations the cell folds its ledgers without waiting for the sweep', async (tt) => {
  const { t, ai, api } = await crewFixture();
  // The sweep's first fold comes INVESTIGATE_SWEEP_MS after the teams module started.
  const sweepAt = Date.now() + INVESTIGATE_SWEEP_MS;
  try {
    const seats = 20;
    const tm = await team(
      api,
      'sequential',
      Array.from({ length: seats }, (_, i) => ({ role: `f${i}` })),
    );
    const agents = Object.values(tm.agents);
    const runs = Math.ceil(FOLD_AFTER / seats) + 1;
    for (let i = 0; i < runs; i++) {
      const r = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: `go ${i}` });
      await t.modules.teams.teams.settled(r.run_id);
    }
    const calls = runs * seats;
    const count = async (folded: number) =>
      Number(
        (
          await t.row(
            `SELECT COUNT(*) AS n FROM team_reservations WHERE folded = ? AND agent_id IN (${agents.map(() => '?').join(', ')})`,
            [folded, ...agents],
          )
        )?.['n'] ?? 0,
      );
    // The fold runs off the runs' path: give it a moment to commit.
    let folded = await count(1);
    for (let i = 0; i < 100 && folded === 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      folded = await count(1);
    }
    if (Date.now() >= sweepAt) {
      tt.skip('this machine took longer than the sweep interval: the sweep may have folded instead');
      return;
    }
    assert.equal(folded + (await count(0)), calls, 'one reservation a model call');
    assert.ok(folded >= FOLD_AFTER - seats, `folded before the sweep: ${folded} of ${calls}`);
    // The ledger's view is unchanged by the fold: every call's usage is spent, none reserved.
    let spent = 0;
    for (const id of agents) {
      const l = await ok(api, 'GET', `${T}/agents/${id}/budget-ledger`);
      assert.equal(l.reserved, 0, 'nothing left reserved');
      spent += l.spent;
    }
    assert.ok(spent > 0, 'the calls are spent');
    const raw = Number((await t.row('SELECT SUM(spent) AS s FROM team_ledgers'))?.['s'] ?? 0);
    assert.ok(raw > 0 && raw <= spent, `the folded usage moved into the ledgers' columns (${raw} of ${spent})`);
  } finally {
    await t.close();
    await ai.close();
  }
});

test('a fold adds what it marks, once: committed rows only, agents with a ledger only, a commit beside it kept for the next', async () => {
  const { t, ai } = await crewFixture();
  try {
    const store = t.core.store;
    const now = Date.now();
    await store.write(async (tx) => {
      for (const [agent, spent] of [
        ['agt_fold_a', 0],
        ['agt_fold_b', 1],
      ] as const)
        await tx.run(
          'INSERT INTO team_ledgers (agent_id, budget_limit, reserved, spent, created_at, updated_at, updated_by) VALUES (?, 1000, 0, ?, ?, ?, ?)',
          [agent, spent, now, now, 'test'],
        );
      const rows: [string, string, number, number | null, number][] = [
        ['rsv_fold_a1', 'agt_fold_a', 2, now, 0],
        ['rsv_fold_a2', 'agt_fold_a', 3, now, 0],
        ['rsv_fold_a3', 'agt_fold_a', 9, null, 0], // open: not spent yet
        ['rsv_fold_b1', 'agt_fold_b', 4, now, 0],
        ['rsv_fold_b2', 'agt_fold_b', 100, now, 1], // in the ledger's columns already
        ['rsv_fold_c1', 'agt_fold_c', 5, now, 0], // no ledger row
      ];
      for (const [id, agent, actual, committedAt, folded] of rows)
        await tx.run(
          `INSERT INTO team_reservations (reservation_id, agent_id, amount, actual, run_id, step_id, created_at, committed_at, folded)
           VALUES (?, ?, ?, ?, 'run_fold', ?, ?, ?, ?)`,
          [id, agent, actual, committedAt === null ? null : actual, id, now, committedAt, folded],
        );
    });
    const spent = async (agent: string) => Number((await t.row('SELECT spent FROM team_ledgers WHERE agent_id = ?', [agent]))?.['spent']);
    const folded = async (id: string) =>
      Number((await t.row('SELECT folded FROM team_reservations WHERE reservation_id = ?', [id]))?.['folded']);

    // The open reservation commits in a transaction that stays open while a fold starts beside it.
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let committing!: () => void;
    const begun = new Promise<void>((r) => {
      committing = r;
    });
    const commit = store.write(async (tx) => {
      await tx.run('UPDATE team_reservations SET actual = 7, committed_at = ? WHERE reservation_id = ? AND folded = 0', [
        now,
        'rsv_fold_a3',
      ]);
      committing();
      await gate;
    });
    await begun;
    const sweep = t.modules.teams.teams.sweepNow();
    await new Promise((r) => setTimeout(r, 50));
    release();
    await Promise.all([commit, sweep]);
    // Whether that fold saw the commit or not, the next one takes what is left: every committed row once.
    await t.modules.teams.teams.sweepNow();
    await t.modules.teams.teams.sweepNow();

    assert.equal(await spent('agt_fold_a'), 2 + 3 + 7);
    assert.equal(await spent('agt_fold_b'), 1 + 4);
    for (const id of ['rsv_fold_a1', 'rsv_fold_a2', 'rsv_fold_a3', 'rsv_fold_b1', 'rsv_fold_b2']) assert.equal(await folded(id), 1, id);
    assert.equal(await folded('rsv_fold_c1'), 0, 'an agent without a ledger keeps its reservations unfolded');
    assert.equal(await spent('agt_fold_c'), Number.NaN, 'and gets no ledger');
  } finally {
    await t.close();
    await ai.close();
  }
});
