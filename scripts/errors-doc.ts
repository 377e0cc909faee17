/**
 * Writes the list of refusal reasons (core/reasons.ts) into docs/errors.md,
 * between its `reasons:start` and `reasons:end` markers, as the same table
 * the curated document carries. Run after changing the registry:
 *
 *   node --import tsx scripts/errors-doc.ts
 *
 * test/cell/discovery/reasons.test.ts fails while the file lags the registry.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { withReasonsTable } from '../cell/discovery/reasons.ts';

const file = resolve(import.meta.dirname, '..', 'docs', 'errors.md');
const before = readFileSync(file, 'utf8');
const after = withReasonsTable(before);
if (after !== before) writeFileSync(file, after);
console.log(after === before ? 'docs/errors.md is up to date' : 'docs/errors.md rewritten');
