// Spawned by log.test.ts: logs 50,000 lines at once to its stdout (a pipe), then leaves as argv[2] says.
import { createLogger, exitOnFatalError } from '../../runtime/log.ts';

const log = createLogger({ level: 'info', format: 'json' });
exitOnFatalError(log);
// Half through pino, half through the access line's fast path (request_id: the line's number): both reach the output, in order, before the process leaves.
const access = {
  request_id: 'r',
  route: '/x',
  method: 'GET',
  status: 200,
  duration_ms: 1,
  principal_id: null,
  credential_kind: null,
  key_id: null,
};
for (let i = 0; i < 50_000; i++) {
  if (i % 2 === 0) log.info('line', { i });
  else log.request({ ...access, request_id: String(i) });
}
const KEY = `svck_live_${'Z'.repeat(43)}`;
switch (process.argv[2]) {
  case 'sigterm':
    // As cell/main.ts and edge/main.ts stop: close the log, then exit.
    process.on('SIGTERM', () => void log.close().then(() => process.exit(0)));
    process.kill(process.pid, 'SIGTERM');
    break;
  case 'throw':
    setTimeout(() => {
      throw new Error(`boom ${KEY}`);
    });
    break;
  case 'reject':
    setTimeout(() => void Promise.reject(new Error('nope')));
    break;
  case 'exit':
    process.exit(3);
}
