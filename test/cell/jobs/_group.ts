/** The config of the in-process cells of a group on one PostgreSQL store, as the SQL workspace tests start them. */
import { groupSecretsKeyFile } from '../../helpers/cell-process.ts';

export function groupConfig(onPostgres: boolean) {
  return {
    posture: 'multi-cell' as const,
    heartbeatMs: 100,
    // Long: on a loaded machine a late beat must not look like a dead cell (no fault here; a takeover's
    // claims would be store traffic the tests do not expect).
    leaseMs: 20_000,
    // The members share one secrets key (it seals the OAuth signing keys they share: docs/multi-cell.md).
    ...(onPostgres ? { secretsKeyFile: groupSecretsKeyFile() } : {}),
  };
}
