/**
 * `node dist/cell.mjs backup --data DIR --out FILE [--secrets-key-file FILE]`
 * and `restore --from FILE --data NEWDIR --secrets-key-file FILE`: the
 * command-line face of cell/ops/backup.ts. Backup runs while the cell serves
 * (it takes no lock) and keys the file with the cell's secrets key; restore
 * verifies it with that key before it writes a new data directory a cell then
 * starts on.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { UsageError, type CommandHelp } from '../../runtime/cli.ts';
import { readSecretsKeyFile } from '../custody/api.ts';
import { restoreBackup, writeBackup } from './backup.ts';

export const BACKUP_HELP: CommandHelp = {
  summary: "copy a data directory's embedded store while the cell serves (one consistent LSN), keyed with its secrets key",
  usage: '--data DIR --out FILE [--secrets-key-file FILE]',
  details: `    keyed with the cell's secrets key (HMAC-SHA256 under a key derived from it); --secrets-key-file: the
    cell's key when it is not DIR/secrets.key. The secrets key and the bootstrap key are not in the backup:
    keep them apart
`,
};

export const RESTORE_HELP: CommandHelp = {
  summary: 'write a new data directory from a backup, verified first',
  usage: '--from FILE --data NEWDIR --secrets-key-file FILE',
  details: '    --secrets-key-file: the secrets key of the backed-up cell (verifies the backup, opens its store; copied in)\n',
};

export async function backupCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { data: { type: 'string' }, out: { type: 'string' }, 'secrets-key-file': { type: 'string' } },
    strict: true,
  });
  if (!values.out) throw new UsageError('backup needs --out FILE');
  const dataDir = resolve(values.data ?? process.env['CELL_DATA'] ?? './.cell');
  const secretsKeyFile = values['secrets-key-file'] !== undefined ? resolve(values['secrets-key-file']) : null;
  const m = await writeBackup(dataDir, resolve(values.out), new Date(), secretsKeyFile);
  process.stdout.write(
    `wrote backup of ${m.cell_id ?? dataDir} at LSN ${m.lsn} to ${values.out} (${m.files.length} files, keyed with the cell's secrets key)\n` +
      `not in the backup, keep them apart: ${m.not_included.map((f) => resolve(dataDir, f)).join(', ')}\n`,
  );
}

export async function restoreCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { from: { type: 'string' }, data: { type: 'string' }, 'secrets-key-file': { type: 'string' } },
    strict: true,
  });
  if (!values.from || !values.data) throw new UsageError('restore needs --from FILE and --data NEWDIR');
  if (!values['secrets-key-file'])
    throw new UsageError(
      "restore needs --secrets-key-file FILE: the backup does not hold the secrets key that keys it and seals its signing keys; name the backed-up cell's key file",
    );
  const dataDir = resolve(values.data);
  const m = await restoreBackup(resolve(values.from), dataDir, readSecretsKeyFile(resolve(values['secrets-key-file'])));
  process.stdout.write(
    `restored ${m.cell_id ?? 'the cell'} at LSN ${m.lsn} (backup of ${m.created_at}) into ${dataDir}; start it with: node dist/cell.mjs serve --data ${dataDir}\n`,
  );
}
