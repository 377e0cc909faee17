/**
 * Which transaction a piece of code runs inside (both engines use it: a read
 * inside a transaction function sees that transaction, a nested write is
 * refused).
 *
 * It is an AsyncLocalStorage entered only while a transaction function runs,
 * and disabled again as soon as none does. On Node 20 an enabled
 * AsyncLocalStorage installs promise hooks that tax every promise of the
 * process, every await of every request included (a CPU profile of the cell
 * under a read load showed them at 5–7 % of its busy time); disabled, it
 * costs nothing, so reads and requests served between writes do not pay for
 * the writes' bookkeeping.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export class TxContext<T> {
  readonly #als = new AsyncLocalStorage<T>();
  #running = 0;

  /** The transaction the caller runs inside, if any. */
  current(): T | undefined {
    return this.#running > 0 ? this.#als.getStore() : undefined;
  }

  /** Runs `fn` inside `tx`; the storage is switched off again once no transaction function runs. */
  async run<R>(tx: T, fn: () => Promise<R>): Promise<R> {
    this.#running++;
    try {
      return await this.#als.run(tx, fn);
    } finally {
      if (--this.#running === 0) this.#als.disable();
    }
  }
}
