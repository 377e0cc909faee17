/**
 * `make bench`: runs every bench/*.bench.ts in turn (or those whose name
 * contains an argument: `node --import tsx bench/run.ts gateway store`).
 * Each prints its own figures as ratios against a baseline measured in the
 * same run. Benchmarks are never timed tests: they report, they do not fail.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const dir = import.meta.dirname;
const filters = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.ts'))
  .sort()
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));

console.log(`# make bench — ${new Date().toISOString()} — node ${process.version}, ${(await import('node:os')).cpus().length} cores`);
for (const f of files) {
  console.log(`\n## ${f}`);
  const mod = (await import(pathToFileURL(join(dir, f)).href)) as { default: () => Promise<void> };
  const t0 = performance.now();
  try {
    await mod.default();
  } catch (err) {
    console.log(`  FAILED: ${err instanceof Error ? err.message : String(err)}`);
  }
  console.log(`  (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
}
