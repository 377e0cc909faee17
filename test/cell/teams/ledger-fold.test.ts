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
