// Every command and subcommand of both programs explains itself: walked from the programs' own command
// tables (CELL_PROGRAM, EDGE_PROGRAM), so a command added without its help fails here. Each `--help`
// exits 0 with its usage line and the exit statuses; each bad option exits 2 (usage) with the usage
// line; `--version` prints package.json's version and the Node the program runs on (dist/edge: the
// Node it embeds, the project's pinned major). The statuses 1 and 3 are told apart on real cases.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { CELL_PROGRAM } from '../../cell/main.ts';
import { EDGE_PROGRAM } from '../../edge/main.ts';
import { EXIT, type Program } from '../../runtime/cli.ts';

const ROOT = resolve(import.meta.dirname, '../..');
// Started with no store (--help, bad options; the statuses 1 and 3 on the edge): the file runs once, on no engine.
const CELL_BIN = join(ROOT, 'dist/cell.mjs');
const EDGE_BIN = join(ROOT, 'dist/edge');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

interface Ran {
  code: number;
  out: string;
  err: string;
}

/** Runs a program to its end with stdin closed; never rejects on a non-zero exit. */
async function run(argv: readonly string[]): Promise<Ran> {
  try {
    const r = await promisify(execFile)(argv[0]!, argv.slice(1), { encoding: 'utf8', timeout: 60_000 });
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, out: x.stdout, err: x.stderr };
  }
}

/** Every command path of a program's table: `serve`, `bundle keys`, `bundle trust`, …; groups as themselves too. */
function paths(p: Program): { leaves: string[][]; groups: string[] } {
  const leaves: string[][] = [];
  const groups: string[] = [];
  for (const [name, e] of Object.entries(p.commands)) {
    if ('subcommands' in e) {
      groups.push(name);
      for (const sub of Object.keys(e.subcommands)) leaves.push([name, sub]);
    } else leaves.push([name]);
  }
  return { leaves, groups };
}

const PROGRAMS: { program: Program; start: string[] }[] = [
  { program: CELL_PROGRAM, start: [process.execPath, CELL_BIN] },
  { program: EDGE_PROGRAM, start: [EDGE_BIN] },
];

for (const { program, start } of PROGRAMS) {
  describe(`${program.name}: every command explains itself`, () => {
    const { leaves, groups } = paths(program);

    it('the table is walked, not a list kept by hand', () => {
      assert.ok(leaves.length >= 5, `${program.name} has commands: ${leaves.map((l) => l.join(' ')).join(', ')}`);
    });

    it('--help of every command and subcommand: exit 0, its usage line, the exit statuses, nothing run', async () => {
      const results = await Promise.all(leaves.map((path) => run([...start, ...path, '--help'])));
      leaves.forEach((path, i) => {
        const r = results[i]!;
        const name = path.join(' ');
        assert.equal(r.code, 0, `${name} --help: ${r.err}`);
        assert.ok(r.out.startsWith(`Usage: ${program.invocation} ${name}`), `${name} --help starts with its usage line:\n${r.out}`);
        assert.match(r.out, /Exit status:\n {2}0 {2}done\n {2}1 {2}failed[\s\S]*\n {2}2 {2}usage[\s\S]*\n {2}3 {2}refused/, name);
        assert.equal(r.err, '', `${name} --help writes nothing on stderr`);
      });
    });

    it('help COMMAND is COMMAND --help; a group answers --help with its subcommands', async () => {
      const [first] = leaves;
      const viaHelp = await run([...start, 'help', ...first!]);
      const viaFlag = await run([...start, ...first!, '--help']);
      assert.equal(viaHelp.code, 0);
      assert.equal(viaHelp.out, viaFlag.out);
      for (const g of groups) {
        const r = await run([...start, g, '--help']);
        assert.equal(r.code, 0, `${g} --help: ${r.err}`);
        for (const [name, sub] of leaves.filter((l) => l[0] === g))
          assert.ok(r.out.includes(`${program.invocation} ${name} ${sub}`), `${g} --help names ${sub}`);
      }
    });

    it('a bad option on every command and subcommand: exit 2 with the usage line, nothing run', async () => {
      const results = await Promise.all(leaves.map((path) => run([...start, ...path, '--no-such-option'])));
      leaves.forEach((path, i) => {
        const r = results[i]!;
        const name = path.join(' ');
        assert.equal(r.code, EXIT.usage, `${name} --no-such-option: ${r.code} ${r.err}`);
        assert.match(r.err, /^error: .+\n/, name);
        assert.ok(r.err.includes(`usage: ${program.invocation} ${name}`), `${name}: the usage line on stderr:\n${r.err}`);
        assert.doesNotMatch(r.err, /\n\s+at /, 'no stack trace');
      });
    });

    it('an unknown command or subcommand, a group without one: exit 2', async () => {
      assert.equal((await run([...start, 'no-such-command'])).code, EXIT.usage);
      for (const g of groups) {
        assert.equal((await run([...start, g])).code, EXIT.usage, `${g} alone`);
        assert.equal((await run([...start, g, 'no-such-subcommand'])).code, EXIT.usage, `${g} no-such-subcommand`);
      }
    });

    it('--help of the program lists every command with the exit statuses', async () => {
      const r = await run([...start, '--help']);
      assert.equal(r.code, 0);
      for (const path of leaves) assert.match(r.out, new RegExp(`^  ${path.join(' ')} `, 'm'), path.join(' '));
      assert.match(r.out, /Exit status:/);
    });
  });
}

describe('--version: the program and the Node it runs on', () => {
  it('cell: package.json version and this Node', () => {
    const out = execFileSync(process.execPath, [CELL_BIN, '--version'], { encoding: 'utf8' });
    assert.equal(out, `cell ${VERSION} (Node ${process.version})\n`);
  });

  it('dist/edge: package.json version and the Node it embeds, the project pinned major', () => {
    const out = execFileSync(EDGE_BIN, ['--version'], { encoding: 'utf8' });
    const m = /^edge (\S+) \(Node v(\d+)\.(\d+)\.(\d+)\)\n$/.exec(out);
    assert.ok(m, out);
    assert.equal(m[1], VERSION);
    const pinned = execFileSync(join(ROOT, 'scripts/node.sh'), ['--version'], { encoding: 'utf8' }).trim();
    assert.equal(m[2], pinned.split('.')[0], `dist/edge embeds Node ${m[2]}, the project pins ${pinned}`);
    assert.ok(Number(m[2]) >= 22, 'a supported Node: 22 or later');
  });
});

describe('exit statuses told apart', () => {
  it('edge: 3 for a refusal (init over an existing device key), 1 for a start-up failure (serve on a directory with no device)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cli-exit-'));
    try {
      const first = spawnSync(EDGE_BIN, ['init', '--data', dir], { encoding: 'utf8' });
      assert.equal(first.status, EXIT.ok, first.stderr);
      const again = spawnSync(EDGE_BIN, ['init', '--data', dir], { encoding: 'utf8' });
      assert.equal(again.status, EXIT.refused, again.stderr);
      assert.match(again.stderr, /^error: a device key already exists in .*; refusing to replace it\n$/);
      const empty = mkdtempSync(join(tmpdir(), 'cli-exit-empty-'));
      try {
        const serve = spawnSync(EDGE_BIN, ['serve', '--data', empty, '--port', '0'], { encoding: 'utf8' });
        assert.equal(serve.status, EXIT.failure, serve.stderr);
        assert.match(serve.stderr, /^error: device key missing .*: run `edge init --data DIR` first\n$/);
      } finally {
        rmSync(empty, { recursive: true, force: true });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
