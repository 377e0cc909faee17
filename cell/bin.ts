/**
 * The entry of dist/cell.mjs: runs the command line (cell/main.ts). Apart from it so that tests import
 * the command table without running it.
 */
import { isMainThread } from 'node:worker_threads';
import { main } from './main.ts';

// The bundle is also the entry of the job sandbox's worker threads (cell/jobs/sandbox/worker.ts):
// there the command line is not ours to run.
if (isMainThread) await main(process.argv.slice(2));
