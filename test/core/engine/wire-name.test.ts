// Tool names on the model's wire (core/engine/wire-name.ts): `.` as `__`, reversible only for names
// that survive the round trip.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fromWireName, toWireName, wireNameOk } from '../../../core/engine/wire-name.ts';

test('catalog names go to the model with . spelled __ and come back', () => {
  for (const n of ['calc', 'clock.now', 'kv.put', 'mcp.crm.lookup', 'mcp.crm.get-customer', 'mcp.crm._private', 'mcp.crm.admin.list']) {
    assert.ok(wireNameOk(n), n);
    assert.equal(fromWireName(toWireName(n)), n);
  }
  assert.equal(toWireName('mcp.crm.lookup'), 'mcp__crm__lookup');
});

test('names that would come back as another name, or cannot be sent, are not ok', () => {
  assert.equal(wireNameOk('mcp.crm.get__x'), false, '__ comes back as .');
  assert.equal(wireNameOk('mcp.crm.get_.x'), false, '_ before . is ambiguous');
  assert.equal(wireNameOk('mcp.crm.get x'), false);
  assert.equal(wireNameOk('mcp.crm.get/x'), false);
  assert.equal(wireNameOk('mcp.crm.ünïcode'), false);
  assert.equal(wireNameOk(`mcp.crm.${'x'.repeat(60)}`), false, 'longer than 64 on the wire');
});
