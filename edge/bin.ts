/**
 * The entry of dist/edge.mjs and of the single executable dist/edge: runs the command line
 * (edge/main.ts), unless this process is the local model's runtime child. Apart from main.ts so that
 * tests import the command table without running it. No top-level await: bundled as CommonJS for the SEA.
 */
import { runtimeChildBridge } from '../runtime/local-model.ts';
import { installNativeSha256 } from '../runtime/native-hash.ts';
import { EXIT, fail } from '../runtime/cli.ts';
import { main } from './main.ts';

installNativeSha256();
if (!runtimeChildBridge()) main(process.argv.slice(2)).catch((e: unknown) => fail(String(e), EXIT.failure));
