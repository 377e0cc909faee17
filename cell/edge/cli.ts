/**
 * `node dist/cell.mjs bundle keys --data DIR --device ID --out FILE [--ttl-seconds N]`:
 * issues a signed key bundle from a stopped cell's data directory (the store
 * holds a directory lock, so the cell must not be running), for carrying to
 * a device by hand. `bundle trust --data DIR --out FILE` writes the trust
 * anchor a device pins with `edge trust`. A cell whose store is in
 * PostgreSQL is named with `--store URL` (or $CELL_STORE_URL), as for `serve`:
 * without it the command would open an empty embedded store in DIR and sign
 * with an identity the cell does not hold; a member of a group also needs the
 * group's `--secrets-key-file` (the start checks it against the store).
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { writeFileSync } from 'node:fs';
import { isoTime } from '../../core/iso-time.ts';
import { UsageError, type CommandHelp } from '../../runtime/cli.ts';
import type { StartCell } from '../module.ts';
import type { EdgeModule } from './module.ts';

const STORE_DETAILS = `    --store URL: the cell's PostgreSQL store, as for serve (also $CELL_STORE_URL); with
    --secrets-key-file FILE as for serve
`;

/** The help of `bundle keys` and `bundle trust` (cell/main.ts's command table). */
export const BUNDLE_HELP: Record<'keys' | 'trust', CommandHelp> = {
  keys: {
    summary: 'write a signed API-key bundle for an edge device (cell stopped)',
    usage: '--data DIR [--store URL [--secrets-key-file FILE]] --device ID --out FILE [--ttl-seconds N]',
    details: STORE_DETAILS,
  },
  trust: {
    summary: 'write the trust anchor a device pins (cell stopped)',
    usage: '--data DIR [--store URL [--secrets-key-file FILE]] --out FILE',
    details: STORE_DETAILS,
  },
};

/**
 * `bundle keys|trust`: argv[0] is the subcommand (the dispatcher checked it), the rest its options.
 * `startCell`: cell/server.ts's, handed in by cell/main.ts.
 */
export async function bundleCommand(argv: string[], startCell: StartCell<{ edge: EdgeModule }>): Promise<void> {
  const [what, ...rest] = argv;
  if (what !== 'keys' && what !== 'trust') throw new UsageError('bundle takes keys or trust');
  const { values } = parseArgs({
    args: rest,
    options: {
      data: { type: 'string' },
      store: { type: 'string' },
      device: { type: 'string' },
      out: { type: 'string' },
      'ttl-seconds': { type: 'string' },
      'secrets-key-file': { type: 'string' },
    },
    strict: true,
  });
  if (!values.out) throw new UsageError(`bundle ${what} needs --out FILE`);
  if (what === 'keys' && !values.device) throw new UsageError('bundle keys needs --device ID');
  const dataDir = resolve(values.data ?? process.env['CELL_DATA'] ?? './.cell');
  const storeUrl = values.store ?? process.env['CELL_STORE_URL'];
  if (storeUrl !== undefined && storeUrl !== '' && !/^postgres(ql)?:\/\//.test(storeUrl))
    throw new UsageError('--store takes a postgres://user@host:port/db URL');
  const quiet = { info() {}, warn() {}, error() {} };
  const secretsKeyFile = values['secrets-key-file'] !== undefined ? resolve(values['secrets-key-file']) : null;
  const running = await startCell({
    config: { dataDir, joinGroup: false, secretsKeyFile, ...(storeUrl ? { storeUrl } : {}) },
    listen: false,
    log: quiet,
  });
  try {
    if (what === 'trust') {
      writeFileSync(values.out, JSON.stringify(await running.modules.edge.trustAnchor(), null, 2) + '\n');
      process.stdout.write(`wrote trust anchor of ${running.core.config.groupId} to ${values.out}\n`);
      return;
    }
    const ttl = values['ttl-seconds'] !== undefined ? Number(values['ttl-seconds']) : undefined;
    const b = await running.modules.edge.issueKeyBundle(values.device!, ttl);
    writeFileSync(values.out, b.text, { mode: 0o644 });
    process.stdout.write(
      `wrote key bundle version ${b.version} for device ${values.device} to ${values.out} (${b.text.length} bytes, expires ${isoTime(b.expires_at!)})\n`,
    );
  } finally {
    await running.stop();
  }
}
