/**
 * `node dist/cell.mjs admin reset-owner --data DIR [--store URL]
 * [--secrets-key-file FILE] [--principal ID]`: owner recovery for an operator
 * who holds the machine (cell/iam/reset-owner.ts). Refused while a cell
 * serves on the data directory (the embedded store's lock); on PostgreSQL,
 * refused while a cell of the group is live, unless `--while-serving`: the
 * group would hear of the new key at once, but the rule makes the recovery
 * a deliberate act of whoever runs the database. The secret is printed only
 * to a terminal (as the bootstrap key, docs/operations.md, "Start-up"); it is
 * always in the file the command names.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { isoTime } from '../../core/iso-time.ts';
import { Refusal, UsageError, type CommandHelp } from '../../runtime/cli.ts';
import type { Cluster } from '../cluster/api.ts';
import type { StartCell } from '../module.ts';
import type { IamModule } from './module.ts';

/** The help of `admin reset-owner` (cell/main.ts's command table). */
export const ADMIN_HELP: Record<'reset-owner', CommandHelp> = {
  'reset-owner': {
    summary: 'mint a new owner key for an operator who lost it (the cell stopped; revokes nothing)',
    usage: '--data DIR [--store URL [--secrets-key-file FILE] [--while-serving]] [--principal ID]',
    details: '    refused (exit 3) while a cell serves on DIR, or while a cell of the group is live unless --while-serving\n',
  },
};

/**
 * `admin reset-owner`: argv[0] is the subcommand (the dispatcher checked it), the rest its options.
 * `startCell`: cell/server.ts's, handed in by cell/main.ts.
 */
export async function adminCommand(argv: string[], startCell: StartCell<{ iam: IamModule; cluster: { cluster: Cluster } }>): Promise<void> {
  const [what, ...rest] = argv;
  if (what !== 'reset-owner') throw new UsageError('admin takes reset-owner');
  const { values } = parseArgs({
    args: rest,
    options: {
      data: { type: 'string' },
      store: { type: 'string' },
      'secrets-key-file': { type: 'string' },
      principal: { type: 'string' },
      'while-serving': { type: 'boolean' },
    },
    strict: true,
  });
  const dataDir = resolve(values.data ?? process.env['CELL_DATA'] ?? './.cell');
  const storeUrl = values.store ?? process.env['CELL_STORE_URL'];
  if (storeUrl !== undefined && storeUrl !== '' && !/^postgres(ql)?:\/\//.test(storeUrl))
    throw new UsageError('--store takes a postgres://user@host:port/db URL');
  const quiet = { info() {}, warn() {}, error() {} };
  let running;
  try {
    running = await startCell({
      config: {
        dataDir,
        joinGroup: false,
        secretsKeyFile: values['secrets-key-file'] !== undefined ? resolve(values['secrets-key-file']) : null,
        ...(storeUrl ? { storeUrl } : {}),
      },
      listen: false,
      log: quiet,
    });
  } catch (err) {
    const m = /is in use by pid (\d+)/.exec((err as Error).message);
    if (m) throw new Refusal(`a cell (pid ${m[1]}) serves on ${dataDir}: stop it first, then run admin reset-owner again`);
    throw err;
  }
  try {
    if (running.core.store.engine === 'postgres' && !values['while-serving']) {
      const live = (await running.modules.cluster.cluster.members()).filter((c) => c.state !== 'dead').map((c) => c.cell_id);
      if (live.length > 0)
        throw new Refusal(
          `cells of this group are serving (${live.join(', ')}): stop them first, or pass --while-serving to mint the key while they serve`,
        );
    }
    const r = await running.modules.iam.resetOwner(values.principal !== undefined ? { principalId: values.principal } : {});
    let out = r.createdOwner
      ? `no active owner was left: created owner ${r.ownerId}\n`
      : `owner ${r.ownerId}: its other active keys are left as they were; revoke the lost ones with the new key:\n`;
    if (!r.createdOwner) for (const k of r.activeKeys) out += `  ${k.id}  ${k.name}  created ${isoTime(k.created_at)}\n`;
    out += process.stdout.isTTY
      ? `new owner key ${r.keyId} (shown once, also in ${r.file}):\n${r.secret}\n`
      : `new owner key ${r.keyId} in ${r.file} (mode 0600; not printed: stdout is not a terminal)\n`;
    out += 'recorded in the audit log as api_key.mint by system:reset-owner\n';
    process.stdout.write(out);
  } finally {
    await running.stop();
  }
}
