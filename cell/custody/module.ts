/**
 * The custody module: the group's secrets key and what is kept under it.
 * Before anything is written (cell/server.ts calls `proveKey` right after the
 * store opens, before the cell's id is settled), the process's key is proven
 * against the group's key check (cell/custody/key-check.ts); a key that is
 * not the group's stops the start, having written nothing. The module is then
 * built first, from the proven key; the iam, oauth and ai modules (and
 * whoever else seals) take the `Custody` instance it holds. It has no routes.
 */
import type { CellCore } from '../context.ts';
import type { CellModule } from '../module.ts';
import { Custody } from './custody.ts';
import { SECRETS_KEY_HINT } from './key-file.ts';
import { KEY_CHECK_TABLE } from './repository.ts';

export interface CustodyModule extends CellModule {
  custody: Custody;
}

/** `key`: the process's secrets key, proven against the group's check (`proveKey`). */
export function createCustodyModule(core: CellCore, deps: { key: Buffer }): CustodyModule {
  const custody = new Custody(core, deps.key);
  // The check replaced while this cell runs (by someone with the database, or a process with another key on a
  // store restored without one): say so at once; sealing is refused from then on (Custody.assertKeyMatchesTx).
  const unsubscribe = core.store.onChange((c) => {
    if (!c.remote || !c.tables.has(KEY_CHECK_TABLE)) return;
    custody.matchesStore().then(
      (ok) => {
        if (!ok) core.log.error(`the group's key check in the store no longer opens under this cell's secrets key; ${SECRETS_KEY_HINT}`);
      },
      () => undefined,
    );
  });
  return {
    name: 'custody',
    custody,
    async stop() {
      unsubscribe();
    },
  };
}
