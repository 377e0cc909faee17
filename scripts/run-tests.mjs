// The suite's runner: node:test's `run()` over the files given, each in a process of its own, with the spec
// report on stdout and, with --timed, the slowest files after it (scripts/test-times.mjs).
//
//   node --import tsx scripts/run-tests.mjs [--concurrency N] [--timed] [--beside FILE]... FILE...
//
// Each file's process ends once its tests and hooks have (`forceExit`), not when the last idle socket or pool
// timer of its fixtures lets go: a fault-suite file spent 21 of its 29 s waiting on those. This runner rather
// than `node --test --test-force-exit`: with that flag the runner's own process also exits the moment the last
// test ends, and a second reporter on stdout (the timings) lost its report to the race.
//
// --beside FILE: a file that spends its time waiting on the clock, not on a core (the Makefile's WAITING_FILES,
// e.g. a fault test whose proofs must age 50 s), runs in a lane of its own beside the N others, one such file at
// a time, instead of holding one of the N lanes while it waits. Its report follows the others' (never
// interleaved), and the run's closing counts are those of both lanes together.
// Exit status 1 when a test or a file failed.
import { Readable } from 'node:stream';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import testTimes from './test-times.mjs';

const args = process.argv.slice(2);
let concurrency = 2;
let timed = false;
const files = [];
const beside = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--concurrency') concurrency = Number(args[++i]);
  else if (a === '--timed') timed = true;
  else if (a === '--beside' && i + 1 < args.length) beside.push(args[++i]);
  else if (a.startsWith('--')) {
    console.error(`run-tests: unknown option ${a}`);
    process.exit(2);
  } else files.push(a);
}
if (!(Number.isInteger(concurrency) && concurrency > 0) || files.length + beside.length === 0) {
  console.error('usage: node --import tsx scripts/run-tests.mjs [--concurrency N] [--timed] [--beside FILE]... FILE...');
  process.exit(2);
}

// Ctrl-C or a TERM stops the files' processes too, and the reports end with what had finished (exit 130/143).
const stop = new AbortController();
for (const [sig, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
]) {
  process.once(sig, () => {
    process.exitCode = code;
    stop.abort();
  });
}
// The files' processes get this process's --import tsx (run() passes its exec arguments on).
const lanes = [];
if (files.length > 0) lanes.push(run({ files, concurrency, forceExit: true, signal: stop.signal }));
if (beside.length > 0) lanes.push(run({ files: beside, concurrency: 1, forceExit: true, signal: stop.signal }));
for (const lane of lanes)
  lane.on('test:fail', () => {
    if (!stop.signal.aborted) process.exitCode = 1;
  });
const stream = lanes.length === 1 ? lanes[0] : Readable.from(inTurn(lanes), { objectMode: true });
stream.compose(spec).pipe(process.stdout);
if (timed) stream.compose(testTimes).pipe(process.stdout);

/** A run's closing counts (node:test's last diagnostics, at nesting 0): summed over the lanes, said once. */
const COUNTS = /^(tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) (\d+(?:\.\d+)?)$/;

/**
 * The lanes' events one lane after another, every lane running meanwhile: the first as it reports, the others'
 * held until the lanes before them have ended (the spec reporter pairs each test's start with its end, so two
 * files' events must not interleave). Their closing counts are summed and said once, at the end (duration_ms:
 * the longest lane's, as the lanes ran at once).
 */
async function* inTurn([first, ...rest]) {
  const counts = new Map();
  const counted = (ev) => {
    const m = ev.type === 'test:diagnostic' && ev.data.nesting === 0 ? COUNTS.exec(ev.data.message) : null;
    if (!m) return false;
    const [, name, value] = m;
    const before = counts.get(name)?.n ?? 0;
    counts.set(name, { ev, n: name === 'duration_ms' ? Math.max(before, Number(value)) : before + Number(value) });
    return true;
  };
  const held = rest.map(() => []);
  const ended = rest.map(async (lane, i) => {
    for await (const ev of lane) held[i].push(ev);
  });
  for await (const ev of first) if (!counted(ev)) yield ev;
  for (let i = 0; i < rest.length; i++) {
    await ended[i];
    for (const ev of held[i]) if (!counted(ev)) yield ev;
  }
  for (const [name, { ev, n }] of counts) yield { ...ev, data: { ...ev.data, message: `${name} ${n}` } };
}
