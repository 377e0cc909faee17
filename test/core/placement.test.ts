// Placement: clearance and topology are hard constraints, never degraded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { place } from '../../core/placement.ts';

const self = { cellId: 'cell-a', clearance: 2, topology: { site: 'hq', zone: 'z1', network: 'secure' } };
const peer = { cellId: 'cell-b', clearance: 5, topology: { site: 'lab', zone: 'z2' } };

test('the first candidate meeting every constraint is chosen', () => {
  assert.deepEqual(place({ clearance: 2, topology: { site: 'hq' } }, [self, peer]), { ok: true, cellId: 'cell-a' });
  assert.deepEqual(place({ clearance: 0, topology: {} }, [self, peer]), { ok: true, cellId: 'cell-a' });
  assert.deepEqual(place({ clearance: 4, topology: {} }, [self, peer]), { ok: true, cellId: 'cell-b' });
  assert.deepEqual(place({ clearance: 3, topology: { site: 'lab' } }, [self, peer]), { ok: true, cellId: 'cell-b' });
});

test('a clearance above every cell is refused naming clearance, never degraded', () => {
  assert.deepEqual(place({ clearance: 3, topology: {} }, [self]), { ok: false, unmet: ['clearance'] });
  assert.deepEqual(place({ clearance: 9, topology: { site: 'hq' } }, [self, peer]), { ok: false, unmet: ['clearance'] });
});

test('missing or different topology labels are named', () => {
  assert.deepEqual(place({ clearance: 1, topology: { site: 'mars', network: 'secure' } }, [self]), {
    ok: false,
    unmet: ['topology.site=mars'],
  });
  assert.deepEqual(place({ clearance: 1, topology: { rack: 'r1' } }, [self, peer]), { ok: false, unmet: ['topology.rack=r1'] });
  assert.deepEqual(place({ clearance: 3, topology: { zone: 'z9' } }, [self]), { ok: false, unmet: ['clearance', 'topology.zone=z9'] });
  // each cell fails a different constraint: the combination is unmet (first candidate's problems)
  assert.deepEqual(place({ clearance: 3, topology: { site: 'hq' } }, [self, peer]), { ok: false, unmet: ['clearance'] });
  // a label is not satisfied by an inherited property
  assert.deepEqual(place({ clearance: 0, topology: { toString: 'x' } }, [self]), { ok: false, unmet: ['topology.toString=x'] });
});

test('no candidate cell', () => {
  assert.deepEqual(place({ clearance: 0, topology: {} }, []), { ok: false, unmet: ['no_candidate_cell'] });
});
