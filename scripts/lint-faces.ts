/**
 * The faces rule of docs/architecture.md, run by `make lint`: a file of a cell module
 * (`cell/<m>/…`) imports another module of cell/ only through that module's face,
 * `cell/<other>/api.ts`. The shared infrastructure folders (`cell/store/`, `cell/http/`) have no
 * face: any of their files may be imported; their own files follow the rule when they import a
 * module. Every module folder has its `api.ts`. Top-level files of cell/ (`server.ts`, `app.ts`, …)
 * wire the modules and are not checked.
 *
 * And no circle across modules: the modules of cell/ import one another in one direction only
 * (`moduleCycles`), through any file, a shared top-level file (`context.ts`, `module.ts`, …), the
 * wiring (`server.ts`: a module that imported it would reach every module) or an infrastructure
 * folder on the way.
 *
 * `node --import tsx scripts/lint-faces.ts [root]` prints each import that goes past a face and
 * each circle, and exits 1 when there is one; `faceViolations(root)` and `moduleCycles(root)`
 * return them (test/layering.test.ts).
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

/**
 * Every circle of imports that passes through two modules or more of `<root>/cell`, one per
 * strongly connected component, as the path it takes (`iam -> sealed-jwk.ts -> ai -> iam`) and the
 * modules it joins. The graph's nodes are the modules of cell/ and its top-level files (the
 * shared ones and the wiring); the infrastructure folders are shared by all and left out, as for
 * the faces (cell/http takes the ops module's metrics type, and every module takes cell/http's).
 */
export function moduleCycles(root: string): string[] {
  const cell = join(root, 'cell');
  const modules = new Set(modulesOf(root));
  const nodeOf = (rel: string): string | null => {
    const parts = rel.split('/');
    if (parts[0] !== 'cell' || parts.length < 2) return null;
    if (parts.length === 2) return parts[1]!.replace(/\.(?:ts|tsx|mts|mjs|js)$/, '.ts');
    return modules.has(parts[1]!) ? parts[1]! : null;
  };
  const edges = new Map<string, Set<string>>();
  for (const file of sources(cell)) {
    const rel = relative(root, file).split(sep).join('/');
    const from = nodeOf(rel);
    if (from === null) continue;
    for (const s of importsOf(readFileSync(file, 'utf8'))) {
      const to = nodeOf(posix.normalize(posix.join(posix.dirname(rel), s)));
      if (to === null || to === from) continue;
      if (!edges.has(from)) edges.set(from, new Set());
      edges.get(from)!.add(to);
    }
  }
  // Tarjan's strongly connected components.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const c: string[] = [];
      for (let w = stack.pop()!; ; w = stack.pop()!) {
        onStack.delete(w);
        c.push(w);
        if (w === v) break;
      }
      components.push(c);
    }
  };
  for (const v of [...edges.keys()].sort()) if (!index.has(v)) visit(v);
  const out: string[] = [];
  for (const c of components) {
    const inside = new Set(c);
    const mods = c.filter((n) => modules.has(n)).sort();
    if (mods.length < 2) continue;
    // One circle through the first module, found by a breadth-first walk inside the component.
    const start = mods[0]!;
    const back = new Map<string, string>();
    const queue = [start];
    let last: string | null = null;
    while (queue.length > 0 && last === null) {
      const v = queue.shift()!;
      for (const w of [...(edges.get(v) ?? [])].sort()) {
        if (!inside.has(w)) continue;
        if (w === start) {
          last = v;
          break;
        }
        if (!back.has(w)) {
          back.set(w, v);
          queue.push(w);
        }
      }
    }
    const path = [start];
    for (let v = last; v !== null && v !== start; v = back.get(v) ?? null) path.splice(1, 0, v);
    out.push(`${[...path, start].join(' -> ')} (the circle joins ${mods.join(', ')})`);
  }
  return out.sort();
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = process.argv[2] ?? process.cwd();
  const bad = faceViolations(root);
  for (const b of bad) console.error(`faces: ${b}`);
  const cycles = moduleCycles(root);
  for (const c of cycles) console.error(`faces: an import circle across modules: ${c}`);
  if (bad.length > 0) console.error(`faces: ${bad.length} import(s) go past a module's face (docs/architecture.md, "Faces")`);
  if (cycles.length > 0) console.error(`faces: ${cycles.length} import circle(s) across modules (docs/architecture.md, "Faces")`);
  if (bad.length > 0 || cycles.length > 0) process.exit(1);
}
