/**
 * CPU profiles of a server process under a bench load (bench/profile-edge.ts,
 * bench/profile-gateway.ts): a preload that starts the inspector's profiler
 * on one SIGUSR2 and, on the next, stops it and writes `<n>.cpuprofile`
 * (n = 1, 2, … in turn) to the directory; and a summary of a profile as the
 * functions with the most self time, in µs a request.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Writes the preload into `dir` and returns NODE_OPTIONS that load it (`--cpu-prof` is not allowed there). */
export function profilerPreload(dir: string, intervalUs = 100): string {
  mkdirSync(dir, { recursive: true });
  for (let n = 1; existsSync(join(dir, `${n}.cpuprofile`)); n++) rmSync(join(dir, `${n}.cpuprofile`));
  writeFileSync(
    join(dir, 'prof.mjs'),
    `import { Session } from 'node:inspector';
import { renameSync, writeFileSync } from 'node:fs';
const s = new Session();
s.connect();
s.post('Profiler.enable');
s.post('Profiler.setSamplingInterval', { interval: ${intervalUs} });
let on = false;
let n = 0;
process.on('SIGUSR2', () => {
  on = !on;
  if (on) return s.post('Profiler.start');
  const file = ${JSON.stringify(dir)} + '/' + ++n + '.cpuprofile';
  s.post('Profiler.stop', (err, r) => {
    if (err) return;
    writeFileSync(file + '.tmp', JSON.stringify(r.profile));
    renameSync(file + '.tmp', file);
  });
});
`,
  );
  return `--import=${join(dir, 'prof.mjs')}`;
}

/** Profiles `pid` while `work` runs; resolves with its result once the profile is on disk (`<n>.cpuprofile`). */
export async function profiling<T>(pid: number, dir: string, n: number, work: () => Promise<T>): Promise<T> {
  process.kill(pid, 'SIGUSR2');
  const r = await work();
  process.kill(pid, 'SIGUSR2');
  const file = join(dir, `${n}.cpuprofile`);
  while (!existsSync(file)) await new Promise((res) => setTimeout(res, 50));
  return r;
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

/** The profile's time not idle, and the `top` functions by self time, in µs a request. */
export function summarise(file: string, requests: number, top = 25): string[] {
  const p = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const f = byId.get(p.samples[i]!)!.callFrame;
    const dt = p.timeDeltas[i] ?? 0;
    const key = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\//, '')}:${f.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + dt);
    if (f.functionName !== '(idle)') total += dt;
  }
  return [
    `profiled (not idle) ${(total / requests).toFixed(1)} µs a request`,
    ...[...self]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, us]) => `${(us / requests).toFixed(1).padStart(7)} µs  ${k}`),
  ];
}
