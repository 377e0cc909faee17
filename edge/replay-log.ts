/**
 * The device's DPoP replay cache, durable: a proof accepted before a restart
 * (or a crash, or power loss) is still refused as a replay after it, for as
 * long as the proof could pass the freshness check.
 *
 * File DATA/dpop-replay.log (mode 0600), one JSON line per accepted proof:
 *   [expires_at_ms, "<key thumbprint>:<jti>"]\n
 * The decision is made in memory (core's MemoryReplayCache, atomic per key);
 * the line is then appended and fdatasync'd before the request is answered.
 * Appends of concurrent requests share one write and one fdatasync (group
 * commit). A line without its newline is a torn tail that was never
 * acknowledged, and is ignored. On start the log is read (expired entries
 * dropped) and rewritten with the live ones; while serving it is rewritten
 * the same way (temp, fsync, rename) when mostly expired. A write that fails
 * refuses the request (503 `replay_cache_unavailable`): fail closed.
 */
import { existsSync, readFileSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { ServiceError } from '../core/errors.ts';
import { MemoryReplayCache, type ReplayCache } from '../core/tokens/replay.ts';
import { EdgeSetupError, writeFileDurable } from './files.ts';

export const REPLAY_LOG = 'dpop-replay.log';
/** Rewrite the log once it holds this many lines and at least twice the live entries. */
const COMPACT_LINES = 50_000;

interface Waiter {
  resolve(v: boolean): void;
  reject(e: unknown): void;
}

export class DurableReplayCache implements ReplayCache {
  readonly #mem: MemoryReplayCache;
  readonly #path: string;
  #fh: FileHandle | null = null;
  #lines = 0;
  #pending: string[] = [];
  #waiters: Waiter[] = [];
  #flushing = false;
  #lastNow = 0;

  private constructor(path: string, mem: MemoryReplayCache) {
    this.#path = path;
    this.#mem = mem;
  }

  /** Reads the device's log (live entries only), rewrites it compacted, and opens it for appending. */
  static async open(dataDir: string, now: number, maxEntries?: number): Promise<DurableReplayCache> {
    const path = join(dataDir, REPLAY_LOG);
    const mem = new MemoryReplayCache(maxEntries);
    if (existsSync(path)) {
      let text: string;
      try {
        text = readFileSync(path, 'utf8');
      } catch {
        throw new EdgeSetupError(`${path} is unreadable; refusing to start rather than forget which DPoP proofs were seen`);
      }
      const lines = text.split('\n');
      lines.pop(); // '' after the last newline, or a torn (unacknowledged) tail
      for (const line of lines) {
        const e = parseLine(line);
        if (e && e[0] > now) mem.remember(e[1], e[0], now);
      }
    }
    const cache = new DurableReplayCache(path, mem);
    await cache.#rewrite(now);
    return cache;
  }

  /** Entries still live (for tests and status). */
  get size(): number {
    return this.#mem.size;
  }

  remember(key: string, expiresAt: number, now: number): boolean | Promise<boolean> {
    if (!this.#mem.remember(key, expiresAt, now)) return false;
    this.#lastNow = Math.max(this.#lastNow, now);
    return new Promise<boolean>((resolve, reject) => {
      this.#pending.push(JSON.stringify([expiresAt, key]) + '\n');
      this.#waiters.push({ resolve, reject });
      if (!this.#flushing) void this.#flush();
    });
  }

  async close(): Promise<void> {
    while (this.#flushing) await new Promise((r) => setImmediate(r));
    await this.#fh?.close();
    this.#fh = null;
  }

  async #flush(): Promise<void> {
    this.#flushing = true;
    try {
      while (this.#pending.length > 0) {
        const batch = this.#pending.join('');
        const waiters = this.#waiters;
        const n = this.#pending.length;
        this.#pending = [];
        this.#waiters = [];
        try {
          if (!this.#fh) throw new Error('replay log is closed');
          await this.#fh.write(batch);
          await this.#fh.datasync();
          this.#lines += n;
          for (const w of waiters) w.resolve(true);
        } catch (e) {
          process.stderr.write(`dpop replay log write failed: ${String(e)}\n`);
          const refusal = new ServiceError('service_unavailable', 'the DPoP replay cache cannot be made durable; the proof is refused', {
            details: { reason: 'replay_cache_unavailable' },
            retryable: true,
          });
          for (const w of waiters) w.reject(refusal);
        }
        if (this.#lines >= COMPACT_LINES && this.#lines >= 2 * this.#mem.size) {
          try {
            await this.#rewrite(this.#lastNow);
          } catch (e) {
            process.stderr.write(`dpop replay log compaction failed: ${String(e)}\n`);
          }
        }
      }
    } finally {
      this.#flushing = false;
    }
  }

  /** Replaces the log with the live entries (temp, fsync, rename) and reopens it for appending. */
  async #rewrite(now: number): Promise<void> {
    const live = this.#mem.live(now);
    await this.#fh?.close();
    this.#fh = null;
    writeFileDurable(this.#path, live.map(([k, exp]) => JSON.stringify([exp, k]) + '\n').join(''), 0o600);
    this.#fh = await open(this.#path, 'a', 0o600);
    this.#lines = live.length;
  }
}

function parseLine(line: string): [number, string] | null {
  try {
    const v = JSON.parse(line) as unknown;
    if (Array.isArray(v) && v.length === 2 && Number.isSafeInteger(v[0]) && typeof v[1] === 'string') return [v[0] as number, v[1]];
  } catch {
    // a corrupt line (a torn write that happened to end in a newline): skip it
  }
  return null;
}
