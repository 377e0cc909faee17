/**
 * The PostgreSQL engine's LISTEN connection: one dedicated connection that
 * receives the change notifications every cell of the database issues inside
 * its committing transactions (NOTIFY is transactional: delivered at commit,
 * never for a rolled-back transaction). When the connection drops it is
 * re-established with backoff; notifications sent meanwhile are lost, so
 * `onLost` tells the store the moment the loss is seen (its caches must stop
 * trusting what they hold) and, after each reconnect, `onGap` that anything
 * may have changed. A connection that died silently (a network cut, a
 * half-open socket: no error, no end) is found by a probe, `SELECT 1` every
 * `probeMs`, that must answer within `probeTimeoutMs`.
 */
import pg from 'pg';

export interface ListenerOptions {
  config: pg.ClientConfig;
  channel: string;
  onPayload: (payload: string) => void;
  onGap: () => void;
  /** The connection was lost: from now until `onGap`, other cells' changes are not heard. */
  onLost: () => void;
  note: (msg: string) => void;
  /** Liveness probe of the connection: interval and the answer's deadline (ms). Default 1000 and 2000. */
  probeMs?: number;
  probeTimeoutMs?: number;
  /** Reconnect delays: first, doubled up to max (ms). */
  minDelayMs?: number;
  maxDelayMs?: number;
}

export class ChangeListener {
  #client: pg.Client | null = null;
  #connected = false;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  #probe: NodeJS.Timeout | undefined;
  #delay: number;
  readonly #opts: ListenerOptions;
  /** Times the connection was re-established after a loss. */
  reconnects = 0;

  constructor(opts: ListenerOptions) {
    this.#opts = opts;
    this.#delay = opts.minDelayMs ?? 100;
  }

  get connected(): boolean {
    return this.#connected;
  }

  /** Connects and listens; rejects if the first connection fails. */
  async start(): Promise<void> {
    await this.#connect();
  }

  async #connect(): Promise<void> {
    const client = new pg.Client(this.#opts.config);
    // Until it is ours, a failure is reported by connect()/query() rejecting.
    const quiet = (): void => undefined;
    client.on('error', quiet);
    try {
      await client.connect();
      await client.query(`LISTEN ${this.#opts.channel}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return;
    }
    client.off('error', quiet);
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    client.on('notification', (msg) => {
      if (msg.channel === this.#opts.channel && typeof msg.payload === 'string') this.#opts.onPayload(msg.payload);
    });
    this.#client = client;
    this.#connected = true;
    this.#delay = this.#opts.minDelayMs ?? 100;
    this.#startProbe(client);
  }

  /** Asks the connection to answer now and then; no answer in time is a lost connection. */
  #startProbe(client: pg.Client): void {
    clearInterval(this.#probe);
    let inFlight = false;
    this.#probe = setInterval(() => {
      if (this.#client !== client) return;
      if (inFlight) return;
      inFlight = true;
      const deadline = setTimeout(() => this.#lost(client), this.#opts.probeTimeoutMs ?? 2000);
      deadline.unref();
      client.query('SELECT 1').then(
        () => {
          inFlight = false;
          clearTimeout(deadline);
        },
        () => {
          inFlight = false;
          clearTimeout(deadline);
          this.#lost(client);
        },
      );
    }, this.#opts.probeMs ?? 1000);
    this.#probe.unref();
  }

  #lost(client: pg.Client): void {
    if (this.#client !== client) return;
    this.#client = null;
    clearInterval(this.#probe);
    this.#probe = undefined;
    const was = this.#connected;
    this.#connected = false;
    client.removeAllListeners('end');
    client.removeAllListeners('notification');
    client.end().catch(() => undefined);
    if (this.#closed) return;
    if (was) {
      this.#opts.note('store: lost the change-notification connection to PostgreSQL; reconnecting');
      this.#opts.onLost();
    }
    this.#schedule();
  }

  #schedule(): void {
    if (this.#closed || this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#connect().then(
        () => {
          if (this.#closed) return;
          this.reconnects++;
          this.#opts.note('store: change-notification connection to PostgreSQL re-established');
          this.#opts.onGap();
        },
        () => {
          this.#delay = Math.min(this.#delay * 2, this.#opts.maxDelayMs ?? 2000);
          this.#schedule();
        },
      );
    }, this.#delay);
    this.#timer.unref();
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    clearInterval(this.#probe);
    this.#probe = undefined;
    const c = this.#client;
    this.#client = null;
    this.#connected = false;
    if (c) {
      c.removeAllListeners('end');
      await c.end().catch(() => undefined);
    }
  }
}
