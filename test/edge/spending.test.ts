// What a device's agents spend on offline runs lives in the sealed state (edge/files.ts), not in a file of
// its own: an older release kept it in budgets.json, unsealed, and deleting or editing that file gave every
// agent its whole budget again. The spending is taken into the state once, and an edited state is refused.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { emptyDeviceState } from '../../bundles/accept.ts';
import { EdgeSetupError, LEGACY_BUDGETS_FILE, readState, takeLegacySpending, writeState, type DeviceFile } from '../../edge/files.ts';
import { deviceBudget } from '../../edge/runs.ts';
import { testDevice } from './_edge-fixtures.ts';

async function deviceDir(): Promise<{ dir: string; device: DeviceFile }> {
  const dir = mkdtempSync(join(tmpdir(), 'edge-spending-'));
  const device = await testDevice();
  writeState(dir, emptyDeviceState(device.device_id), device);
  return { dir, device };
}

test("an older release's budgets.json is taken into the sealed state once, then removed", async () => {
  const { dir, device } = await deviceDir();
  try {
    const legacy = join(dir, LEGACY_BUDGETS_FILE);
    writeFileSync(legacy, JSON.stringify({ agt_a: 900, agt_b: 12 }));
    const s = takeLegacySpending(dir, readState(dir, device), device);
    assert.deepEqual(s.spent, { agt_a: 900, agt_b: 12 });
    assert.equal(existsSync(legacy), false, 'the unsealed file is gone');
    assert.deepEqual(readState(dir, device).spent, { agt_a: 900, agt_b: 12 }, 'the sealed state on disk holds it');
    // A budgets.json put back beside a state that holds the spending is not believed: removed unread.
    writeFileSync(legacy, JSON.stringify({ agt_a: 0 }));
    assert.deepEqual(takeLegacySpending(dir, readState(dir, device), device).spent, { agt_a: 900, agt_b: 12 });
    assert.equal(existsSync(legacy), false);
    // An unreadable one stops the device rather than forget what was spent.
    const fresh = await deviceDir();
    try {
      writeFileSync(join(fresh.dir, LEGACY_BUDGETS_FILE), '{"agt_a": -5}');
      assert.throws(() => takeLegacySpending(fresh.dir, readState(fresh.dir, fresh.device), fresh.device), EdgeSetupError);
    } finally {
      rmSync(fresh.dir, { recursive: true, force: true });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the ledgers charge the sealed spending; an edited spending is refused with the state', async () => {
  const { dir, device } = await deviceDir();
  try {
    let state = readState(dir, device);
    const budget = deviceBudget(
      { agt_a: 1000 },
      {
        of: (a) => state.spent?.[a] ?? 0,
        add(a, n) {
          state = { ...state, spent: { ...(state.spent ?? {}), [a]: (state.spent?.[a] ?? 0) + n } };
          writeState(dir, state, device);
        },
      },
    );
    const ref = { run_id: 'r', step_id: 's' };
    const r = await budget.reserve('agt_a', 800, ref);
    assert.ok(r.ok);
    await budget.commit(r.reservation_id, 700);
    assert.deepEqual(readState(dir, device).spent, { agt_a: 700 });
    // 300 left: a call asking 800 gets what is left (down to the floor), one asking beyond the floor is refused.
    const left = await budget.reserve('agt_a', 800, ref, 64);
    assert.ok(left.ok && left.amount === 300);
    await budget.commit(left.reservation_id, 300);
    assert.deepEqual(await budget.reserve('agt_a', 800, ref, 64), { ok: false, reason: 'budget_exceeded' });
    assert.deepEqual(await budget.reserve('agt_z', 10, ref), { ok: false, reason: 'no_budget_ledger' });
    // Lowering the spending by hand breaks the seal: the device does not start with it.
    const file = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8'));
    file.state.spent.agt_a = 0;
    writeFileSync(join(dir, 'state.json'), JSON.stringify(file));
    assert.throws(() => readState(dir, device), /not sealed by this device's key/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
