// The suite's runner: node:test's `run()` over the files given, each in a process of its own, with the spec
// report on stdout and, with --timed, the slowest files after it (scripts/test-times.mjs).
//
//   node --import tsx scripts/run-tests.mjs [--concurrency N] [--timed] FILE...
//
// Each file's process ends once its tests and hooks have (`forceExit`), not when the last idle socket or pool
// timer of its fixtures lets go: a fault-suite file spent 21 of its 29 s waiting on those. This runner rather
// than `node --test --test-force-exit`: with that flag the runner's own process also exits the moment the last
// test ends, and a second reporter on stdout (the timings) lost its report to the race.
// Exit status 1 when a test or a file failed.
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import testTimes from './test-times.mjs';

const args = process.argv.slice(2);
let concurrency = 2;
let timed = false;
const files = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--concurrency') concurrency = Number(args[++i]);
  else if (a === '--timed') timed = true;
  else if (a.startsWith('--')) {
    console.error(`run-tests: unknown option ${a}`);
    process.exit(2);
  } else files.push(a);
}
if (!(Number.isInteger(concurrency) && concurrency > 0) || files.length === 0) {
  console.error('usage: node --import tsx scripts/run-tests.mjs [--concurrency N] [--timed] FILE...');
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
const stream = run({ files, concurrency, forceExit: true, signal: stop.signal });
stream.on('test:fail', () => {
  if (!stop.signal.aborted) process.exitCode = 1;
});
stream.compose(spec).pipe(process.stdout);
if (timed) stream.compose(testTimes).pipe(process.stdout);
