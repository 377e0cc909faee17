// console/src/graph/layout.ts: dagre places every node of a compiled graph
// in its own box, left to right along the edges, the same way every time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compileFormation } from '../../core/compiler/compile.ts';
import { layoutGraph } from '../../console/src/graph/layout.ts';
import type { GraphLike } from '../../console/src/run-model.ts';

function graphOf(name: string): GraphLike {
  const f = JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures/journals', `${name}.v1.json`), 'utf8'));
  const c = compileFormation(f.formation, f.billets, f.bindings);
  assert.ok(c.ok);
  return c.graph as unknown as GraphLike;
}

test('every node gets a box, no two boxes overlap, edges run forward, and the layout is deterministic', () => {
  for (const name of ['manager-delegates-approval', 'sequential-tools-gate']) {
    const g = graphOf(name);
    const l = layoutGraph(g);
    assert.deepEqual(
      l.nodes.map((n) => n.id),
      g.nodes.map((n) => n.id),
    );
    for (const n of l.nodes) {
      assert.ok(
        n.x >= 0 && n.y >= 0 && n.x + n.width <= l.width + 0.5 && n.y + n.height <= l.height + 0.5,
        `${name}: ${n.id} inside the drawing`,
      );
      assert.ok(n.width >= 120 && n.width >= n.sublabel.length * 6, `${n.id} is wide enough for its text`);
    }
    for (const a of l.nodes) {
      for (const b of l.nodes) {
        if (a === b) continue;
        const apart = a.x + a.width <= b.x || b.x + b.width <= a.x || a.y + a.height <= b.y || b.y + b.height <= a.y;
        assert.ok(apart, `${name}: ${a.id} and ${b.id} overlap`);
      }
    }
    assert.equal(l.edges.length, g.edges.length);
    const at = new Map(l.nodes.map((n) => [n.id, n]));
    for (const e of l.edges) {
      assert.ok(at.get(e.from)!.x < at.get(e.to)!.x, `${name}: ${e.from} -> ${e.to} runs left to right`);
      assert.ok(e.points.length >= 2);
    }
    assert.deepEqual(layoutGraph(g), l, 'same graph, same picture');
  }
});

test('seated nodes are labelled with their role; routed edges keep their route', () => {
  const l = layoutGraph(graphOf('manager-delegates-approval'));
  assert.deepEqual(
    l.nodes.map((n) => n.label),
    ['release lead', 'developer', 'tester', 'release lead', 'post:0'],
  );
  assert.deepEqual(
    l.edges
      .filter((e) => e.when !== null)
      .map((e) => `${e.from}->${e.to}:${e.when}`)
      .sort(),
    ['delegate:lead->agent:dev:dev', 'delegate:lead->agent:qa:qa'],
  );
});
