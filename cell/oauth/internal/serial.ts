/**
 * One load at a time, never a stale one last: `request()` resolves once a
 * load that started after the request has finished. A request made while a
 * load runs queues exactly one more (requests made meanwhile share it), so
 * a change notified during a load is always read, and two loads never race
 * to install their results.
 */
export class SerialLoad {
  #current: Promise<void> | null = null;
  #queued: Promise<void> | null = null;

  constructor(private readonly load: () => Promise<void>) {}

  request(): Promise<void> {
    if (this.#queued) return this.#queued;
    if (!this.#current) return this.#start();
    const after = () => {
      this.#queued = null;
      return this.#start();
    };
    this.#queued = this.#current.then(after, after);
    return this.#queued;
  }

  #start(): Promise<void> {
    const p = this.load();
    this.#current = p;
    const clear = () => {
      if (this.#current === p) this.#current = null;
    };
    p.then(clear, clear);
    return p;
  }
}
