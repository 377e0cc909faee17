/**
 * The faces rule of docs/architecture.md, run by `make lint`: a file of a cell module
 * (`cell/<m>/…`) imports another module of cell/ only through that module's face,
 * `cell/<other>/api.ts`. The shared infrastructure folders (`cell/store/`, `cell/http/`) have no
 * face: any of their files may be imported; their own files follow the rule when they import a
 * module. Every module folder has its `api.ts`. Top-level files of cell/ (`server.ts`, `app.ts`, …)
 * wire the modules and are not checked.
 *
 * `node --import tsx scripts/lint-faces.ts [root]` prints each import that goes past a face and
 * exits 1 when there is one; `faceViolations(root)` returns them (test/layering.test.ts).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Folders of cell/ that are shared infrastructure, not modules: imported file by file, no face. */
export const INFRASTRUCTURE = ['store', 'http'] as const;

/** The one file of a module other modules may import. */
export const FACE = 'api.ts';

/** Import specifiers of a source text: `import … from`, `export … from`, `import '…'`, `import('…')`, `require('…')`. */
const SPEC =
  /(?:^|[\s;])(?:import|export)\s[^'";]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]|\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)|\brequire\(\s*['"]([^'"]+)['"]\s*\)/g;

/**
 * Every module a source text names, in order: the one reader of imports of the project's checks
 * (this rule, the layering and purity tests).
 */
export function importedModules(text: string): string[] {
  return [...text.matchAll(SPEC)].map((m) => m[1] ?? m[2] ?? m[3] ?? m[4] ?? '');
}

function* sources(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (name === 'node_modules') continue;
    if (statSync(p).isDirectory()) yield* sources(p);
    else if (/\.(?:ts|tsx|mts|mjs|js)$/.test(name)) yield p;
  }
}

/** The relative specifiers a source text imports. */
export function importsOf(text: string): string[] {
  return importedModules(text).filter((s) => s.startsWith('.'));
}

/** The module folders of `<root>/cell` (every folder but the infrastructure ones). */
export function modulesOf(root: string): string[] {
  const cell = join(root, 'cell');
  return readdirSync(cell)
    .filter((n) => statSync(join(cell, n)).isDirectory())
    .filter((n) => !(INFRASTRUCTURE as readonly string[]).includes(n))
    .sort();
}

/**
 * Every import of `<root>/cell` that goes past a face (`cell/a/x.ts -> ../b/y.ts`), and every module
 * folder without its face (`cell/m: no api.ts`).
 */
export function faceViolations(root: string): string[] {
  const bad: string[] = [];
  const modules = modulesOf(root);
  for (const m of modules) if (!existsSync(join(root, 'cell', m, FACE))) bad.push(`cell/${m}: no ${FACE}`);
  for (const file of sources(join(root, 'cell'))) {
    const rel = relative(root, file).split(sep).join('/');
    const parts = rel.split('/');
    if (parts.length < 3) continue; // cell/server.ts and the other wiring files
    const own = parts[1]!;
    for (const s of importsOf(readFileSync(file, 'utf8'))) {
      const target = posix.normalize(posix.join(posix.dirname(rel), s)).split('/');
      if (target[0] !== 'cell' || target.length < 3) continue;
      const other = target[1]!;
      if (other === own || !modules.includes(other)) continue;
      const inside = target.slice(2).join('/');
      if (inside === FACE || inside === FACE.replace(/\.ts$/, '')) continue;
      bad.push(`${rel} -> ${s} (use cell/${other}/${FACE})`);
    }
  }
  return bad;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const bad = faceViolations(process.argv[2] ?? process.cwd());
  for (const b of bad) console.error(`faces: ${b}`);
  if (bad.length > 0) {
    console.error(`faces: ${bad.length} import(s) go past a module's face (docs/architecture.md, "Faces")`);
    process.exit(1);
  }
}
