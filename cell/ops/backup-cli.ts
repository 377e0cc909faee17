/**
 * `node dist/cell.mjs backup --data DIR --out FILE` and `restore --from FILE
 * --data NEWDIR --secrets-key-file FILE`: the command-line face of
 * cell/ops/backup.ts. Backup runs while the cell serves (it takes no lock);
 * restore writes a new data directory a cell then starts on.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { UsageError, type CommandHelp } from '../../runtime/cli.ts';
import { restoreBackup, writeBackup } from './backup.ts';

export const BACKUP_HELP: CommandHelp = {
  summary: "copy a data directory's embedded store while the cell serves (one consistent LSN)",
  usage: '--data DIR --out FILE',
  details: '    the secrets key and the bootstrap key are not in the backup: keep them apart\n',
};

export const RESTORE_HELP: CommandHelp = {
  summary: 'write a new data directory from a backup',
  usage: '--from FILE --data NEWDIR --secrets-key-file FILE',
  details: '    --secrets-key-file: the secrets key of the backed-up cell (checked against its sealed keys, copied in)\n',
};

export async function backupCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { data: { type: 'string' }, out: { type: 'string' } }, strict: true });
  if (!values.out) throw new UsageError('backup needs --out FILE');
  const dataDir = resolve(values.data ?? process.env['CELL_DATA'] ?? './.cell');
  const m = await writeBackup(dataDir, resolve(values.out), new Date());
  process.stdout.write(
    `wrote backup of ${m.cell_id ?? dataDir} at LSN ${m.lsn} to ${values.out} (${m.files.length} files)\n` +
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
      "restore needs --secrets-key-file FILE: the backup does not hold the secrets key that seals its signing keys; name the backed-up cell's key file",
    );
  const dataDir = resolve(values.data);
  const m = await restoreBackup(resolve(values.from), dataDir, resolve(values['secrets-key-file']));
  process.stdout.write(
    `restored ${m.cell_id ?? 'the cell'} at LSN ${m.lsn} (backup of ${m.created_at}) into ${dataDir}; start it with: node dist/cell.mjs serve --data ${dataDir}\n`,
  );
}
