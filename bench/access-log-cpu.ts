/**
 * The access log's cost as CPU a request of the cell process (issue 28), for
 * a machine shared with other load, where throughput swings with whatever
 * else runs: starts one cell per entry of MODES, alternates ROUNDS rounds of
 * N requests (autocannon, 50 connections, the authenticated GET of the tool
 * registry) over all of them, order flipped each round, and prints each
 * cell's µs of CPU (/proc: main thread and the others, user and system) per
 * request.
 *
 *   MODES=off,fifo,null,drain node --import tsx bench/access-log-cpu.ts
 *   MODES="before=info@/tmp/before.mjs,after=info@dist/cell.mjs@null,off=warn@dist/cell.mjs" …
 *
 * Built-in modes, all dist/cell.mjs (or $CELL): `off` (--log-level warn,
 * stdout /dev/null), `null` (info, /dev/null), `fifo` (info, a FIFO drained
 * by a separate `cat`, as a log shipper reads), `drain` (info, a pipe drained
 * by this process, as bench/access-log.bench.ts does). `name=level@build[@out]`
 * names a build and an output (`null`, the default, or `fifo`).
 * PROFILE_DIR=dir: each cell runs with --cpu-prof, and the share of its main
 * thread's busy time spent serialising and handing access lines (and in GC) is
 * printed from its profile. Not a `*.bench.ts`: a tool, not one of make bench's figures.
 */
import autocannon from 'autocannon';
import { spawn, execSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBenchCell, type BenchCell } from './_util.ts';

const N = Number(process.env['N'] ?? 20000);
const ROUNDS = Number(process.env['ROUNDS'] ?? 6);
const modes = (process.env['MODES'] ?? 'off,fifo,null,drain').split(',');
const CELL = process.env['CELL'] ?? join(import.meta.dirname, '../dist/cell.mjs');
const PROFILE_DIR = process.env['PROFILE_DIR'];
const EXTRA = PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`, '--cpu-prof-interval=200'] : [];
/** The functions of the access log's path (runtime/log.ts, runtime/internal/access-line.ts), as the bundle names them. */
const LOG_PATH = new Set([
  'writeAccessLine',
  'queue',
  'serialise',
  'hand',
  'send',
  'put',
  'render',
  'render2',
  'accessLine',
  'SonicBoom.release',
  'actualWriteBuffer',
  'writeBuffer',
]);
const PATH = '/api/public/v1/admin/ai/tool-registry';

function threads(pid: number): { main: number; other: number; user: number; sys: number } {
  let main = 0,
    other = 0,
    user = 0,
    sys = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      const st = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      const u = Number(f[11]) / 100,
        s = Number(f[12]) / 100;
      user += u;
      sys += s;
      if (t === String(pid)) main += u + s;
      else other += u + s;
    } catch {}
  }
  return { main, other, user, sys };
}
const cpuOf = (pid: number) => {
  const st = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
};

interface T {
  name: string;
  pid: number;
  url: string;
  key: string;
  stop: () => Promise<void>;
  acc: { main: number; other: number; user: number; sys: number; n: number };
  extraPid?: number | undefined;
  extraCpu: number;
}
const root = mkdtempSync(join(tmpdir(), 'alog-exp-'));
let port = 39100 + Math.floor(Math.random() * 500);
async function direct(name: string, level: string, out: number, extraPid?: number, cell = CELL, exp = '0'): Promise<T> {
  const dir = join(root, name);
  const p = port++;
  const proc = spawn(
    process.execPath,
    [
      ...EXTRA,
      cell,
      'serve',
      '--port',
      String(p),
      '--data',
      dir,
      '--rate-capacity',
      '100000000',
      '--rate-refill',
      '100000000',
      '--log-level',
      level,
    ],
    { stdio: ['ignore', out, 'inherit'], env: { ...process.env, ALOG_EXP: exp } },
  );
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const url = `http://127.0.0.1:${p}`;
  for (let i = 0; i < 300; i++) {
    try {
      const r = await fetch(url + '/healthz');
      if (r.status < 500 && existsSync(join(dir, 'bootstrap-admin.key'))) break;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    name,
    pid: proc.pid!,
    url,
    key: readFileSync(join(dir, 'bootstrap-admin.key'), 'utf8').trim(),
    stop: () => {
      proc.kill('SIGTERM');
      return exited;
    },
    acc: { main: 0, other: 0, user: 0, sys: 0, n: 0 },
    extraPid,
    extraCpu: 0,
  };
}
const targets: T[] = [];
const children: ChildProcess[] = [];
try {
  for (const m of modes) {
    if (m.includes('=')) {
      const [name, rest] = m.split('=') as [string, string];
      const [level, cell, out, exp] = rest.split('@') as [string, string, string | undefined, string | undefined];
      let fd = openSync('/dev/null', 'w');
      let pid: number | undefined;
      if (out === 'fifo') {
        const fifo = join(root, `${name}.fifo`);
        execSync(`mkfifo ${fifo}`);
        const cat = spawn('sh', ['-c', `exec cat ${fifo} > /dev/null`], { stdio: 'ignore' });
        children.push(cat);
        fd = openSync(fifo, 'w');
        pid = cat.pid;
      }
      targets.push(await direct(name, level, fd, pid, cell, exp ?? '0'));
    } else if (m === 'off') targets.push(await direct('off', 'warn', openSync('/dev/null', 'w')));
    else if (m === 'null') targets.push(await direct('null', 'info', openSync('/dev/null', 'w')));
    else if (m === 'fifo') {
      const fifo = join(root, 'log.fifo');
      execSync(`mkfifo ${fifo}`);
      const cat = spawn('sh', ['-c', `exec cat ${fifo} > /dev/null`], { stdio: 'ignore' });
      children.push(cat);
      const fd = openSync(fifo, 'w');
      targets.push(await direct('fifo', 'info', fd, cat.pid));
    } else if (m === 'drain') {
      const c: BenchCell = await startBenchCell({ accessLog: true, cell: CELL });
      targets.push({
        name: 'drain',
        pid: c.proc.pid!,
        url: c.url,
        key: c.adminKey,
        stop: () => c.stop(),
        acc: { main: 0, other: 0, user: 0, sys: 0, n: 0 },
        extraCpu: 0,
      });
    }
  }
  const run = (t: T, amount: number) =>
    autocannon({ url: t.url + PATH, connections: 50, amount, headers: { authorization: `Bearer ${t.key}` } });
  for (const t of targets) {
    await run(t, 5000);
  }
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? targets : [...targets].reverse();
    for (const t of order) {
      const a = threads(t.pid);
      const e0 = t.extraPid ? cpuOf(t.extraPid) : 0;
      const res = await run(t, N);
      await new Promise((r) => setTimeout(r, 50));
      const b = threads(t.pid);
      t.acc.main += b.main - a.main;
      t.acc.other += b.other - a.other;
      t.acc.user += b.user - a.user;
      t.acc.sys += b.sys - a.sys;
      t.acc.n += res.requests.total;
      if (t.extraPid) t.extraCpu += cpuOf(t.extraPid) - e0;
      if (res.non2xx) throw new Error('non2xx');
    }
    process.stderr.write(`round ${r + 1} load ${loadavg()[0]!.toFixed(2)}\n`);
  }
  const us = (x: number, n: number) => ((x * 1e6) / n).toFixed(1);
  for (const t of targets) {
    const { main, other, user, sys, n } = t.acc;
    console.log(
      `${t.name.padEnd(6)} µs/req: total ${us(main + other, n)} (main ${us(main, n)}, other threads ${us(other, n)}; user ${us(user, n)}, sys ${us(sys, n)})${t.extraPid ? ` cat ${us(t.extraCpu, n)}` : ''}  n=${n}`,
    );
  }
  console.log(
    `load ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
} finally {
  await Promise.all(targets.map((t) => t.stop())); // a CPU profile is written as the cell exits
  for (const c of children) c.kill();
  rmSync(root, { recursive: true, force: true });
  if (PROFILE_DIR) for (const t of targets) profileShare(t.name, t.pid);
}

/** From the cell's CPU profile: the share of busy (not idle) samples with the access log's path on the stack, and in GC. */
function profileShare(name: string, pid: number): void {
  const file = readdirSync(PROFILE_DIR!).find((f) => f.includes(`.${pid}.`) && f.endsWith('.cpuprofile'));
  if (!file) {
    console.log(`${name}: no profile`);
    return;
  }
  type Node = { id: number; callFrame: { functionName: string }; children?: number[] };
  const p = JSON.parse(readFileSync(join(PROFILE_DIR!, file), 'utf8')) as { nodes: Node[]; samples: number[]; timeDeltas: number[] };
  const byId = new Map(p.nodes.map((x) => [x.id, x]));
  const parent = new Map<number, number>();
  for (const x of p.nodes) for (const c of x.children ?? []) parent.set(c, x.id);
  let busy = 0;
  let log = 0;
  let gc = 0;
  p.samples.forEach((id, i) => {
    const t = p.timeDeltas[i + 1] ?? 0;
    const fn = byId.get(id)!.callFrame.functionName;
    if (fn === '(idle)') return;
    busy += t;
    if (fn === '(garbage collector)') gc += t;
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur))
      if (LOG_PATH.has(byId.get(cur)!.callFrame.functionName)) {
        log += t;
        break;
      }
  });
  console.log(
    `${name.padEnd(6)} profile: access log ${((100 * log) / busy).toFixed(2)} % of busy time, GC ${((100 * gc) / busy).toFixed(2)} % (${file})`,
  );
}
