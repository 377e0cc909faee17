/**
 * The device's DPoP replay cache, without a disk write per proof: a proof
 * accepted before a restart (or a crash, or power loss) is still refused
 * after it, for as long as it could pass the freshness check.
 *
 * The decision is made in memory (core's MemoryReplayCache, atomic per key).
 * What a restart forgets is covered by a **horizon**: a time, in the proofs'
 * `iat` seconds, that no accepted proof was issued after. It is written to
 * disk (appended and fdatasync'd) before any proof that needs it is accepted,
 * and kept a second or two ahead of the clock in the background, so a proof
 * dated now never waits for it; one write a second under load, none when
 * idle. After a crash the device refuses every proof issued at or before
 * the last horizon on disk (`dpop_replay`), since it cannot tell which of
 * them it saw, and `untilFresh` holds the device's start until its clock has
 * passed that horizon, so a client's next proof is served. A clean stop
 * (`close`) writes the live proofs themselves instead, and the device starts
 * again at once with exactly those refused.
 *
 * File DATA/dpop-replay.log (mode 0600), JSON lines:
 *   {"horizon":S}                    no proof accepted after this line was issued after S
 *   [expires_at_ms, "<jkt>:<jti>"]   a proof seen, kept until it could no longer pass
 *   {"closed":true}                  written last by a clean stop: the lines before it
 *                                    list every live proof
 * A line without its newline is a torn tail that was never acknowledged, and
 * is ignored. The log of an earlier version (a proof line per accepted proof,
 * each fdatasync'd) reads as exact, as it was. On start the log is read and
 * rewritten (temp, fsync, rename) with the live proofs and a horizon at least
 * as late as any before; while serving it is rewritten the same way when it
 * grows long. A horizon that cannot be written refuses the proofs waiting
 * for it (503 `replay_cache_unavailable`), and an unreadable log stops the
 * device from starting: fail closed.
 */
import { existsSync, readFileSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { ServiceError } from '../core/errors.ts';
import { DEFAULT_DPOP_WINDOW } from '../core/tokens/dpop.ts';
import { MemoryReplayCache, type ReplayCache } from '../core/tokens/replay.ts';
import { EdgeSetupError, writeFileDurable } from './files.ts';

export const REPLAY_LOG = 'dpop-replay.log';
/** The horizon is moved to now + LEAD seconds once now + 1 reaches it. */
const LEAD_SECONDS = 2;
/** Rewrite the log past this many horizon lines (one a second at most: hours of service). */
const COMPACT_LINES = 10_000;
/**
 * The longest `untilFresh` waits: the horizon is at most LEAD s ahead of the
 * clock, or a future-dated proof's `iat` (the freshness window's future
 * seconds). A horizon further ahead means the clock went back: the device
 * starts, and proofs issued before the horizon are refused.
 */
export const MAX_START_WAIT_MS = (LEAD_SECONDS + DEFAULT_DPOP_WINDOW.futureSeconds + 1) * 1000;

interface Waiter {
  /** The horizon this waiter's proof needs, seconds. */
  upTo: number;
  resolve(v: boolean): void;
  reject(e: unknown): void;
}

export class DurableReplayCache implements ReplayCache {
  readonly #mem: MemoryReplayCache;
  readonly #path: string;
  #fh: FileHandle | null = null;
  #lines = 0;
  /** Proofs issued at or before this (seconds) are refused: a crash forgot which of them were seen. */
  readonly #floor: number;
  /** The horizon on disk, and the one asked for (seconds). */
  #durable: number;
  #target: number;
  #waiters: Waiter[] = [];
  #flushing: Promise<void> | null = null;
  #closed = false;

  private constructor(path: string, mem: MemoryReplayCache, floor: number, horizon: number) {
    this.#path = path;
    this.#mem = mem;
    this.#floor = floor;
    this.#durable = horizon;
    this.#target = horizon;
  }

  /** Reads the device's log, rewrites it (live proofs, a horizon no earlier than any before), and opens it for appending. */
  static async open(dataDir: string, now: number, maxEntries?: number): Promise<DurableReplayCache> {
    const path = join(dataDir, REPLAY_LOG);
    const mem = new MemoryReplayCache(maxEntries);
    let horizon = Number.NEGATIVE_INFINITY;
    let clean = false;
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
        const l = parseLine(line);
        clean = l?.kind === 'closed';
        if (l?.kind === 'proof' && l.expiresAt > now) mem.remember(l.key, l.expiresAt, now);
        else if (l?.kind === 'horizon') horizon = Math.max(horizon, l.at);
      }
    }
    const floor = clean ? Number.NEGATIVE_INFINITY : horizon;
    const cache = new DurableReplayCache(path, mem, floor, Math.max(horizon, Math.floor(now / 1000) + LEAD_SECONDS));
    await cache.#rewrite(now, false);
    return cache;
  }

  /** Entries still live (for tests and status). */
  get size(): number {
    return this.#mem.size;
  }

  /** The earliest time (ms) at which a proof issued then is past the floor a crash left; -Infinity when there is none. */
  get freshFrom(): number {
    return (this.#floor + 1) * 1000;
  }

  /**
   * Resolves once `clock` has passed the floor a crash left, so a proof made
   * from then on is served; at most `maxWaitMs` (a clock that went back is
   * not waited for: its proofs before the floor stay refused). Resolves with
   * the milliseconds waited.
   */
  async untilFresh(clock: { now(): number }, maxWaitMs = MAX_START_WAIT_MS): Promise<number> {
    const start = clock.now();
    for (;;) {
      const now = clock.now();
      const left = Math.min(this.freshFrom - now, start + maxWaitMs - now);
      if (left <= 0) return now - start;
      await new Promise((r) => setTimeout(r, left));
    }
  }

  remember(key: string, expiresAt: number, now: number, issuedAt: number): boolean | Promise<boolean> {
    if (this.#closed) return Promise.reject(unavailable());
    const iat = issuedAt / 1000;
    if (!(iat > this.#floor)) return false;
    if (!this.#mem.remember(key, expiresAt, now)) return false;
    // Keep the horizon ahead of proofs dated now, off the request's path.
    const nowS = Math.floor(now / 1000);
    if (this.#target < nowS + 1) this.#extend(nowS + LEAD_SECONDS);
    if (iat <= this.#durable) return true;
    // Dated past the horizon on disk (ahead of the clock, or the first proof after a pause): wait for one that covers it.
    const upTo = Math.ceil(iat);
    this.#extend(upTo);
    return new Promise<boolean>((resolve, reject) => this.#waiters.push({ upTo, resolve, reject }));
  }

  /** A clean stop: the live proofs are written with a closing mark, so the next start refuses exactly those. */
  async close(now = Date.now()): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    while (this.#flushing) await this.#flushing;
    if (!this.#fh) return;
    await this.#rewrite(now, true);
    await this.#fh?.close();
    this.#fh = null;
  }

  #extend(upTo: number): void {
    if (upTo <= this.#target) return;
    this.#target = upTo;
    // Started in a microtask, so #flush's own `#flushing = null` always comes after this assignment.
    this.#flushing ??= Promise.resolve().then(() => this.#flush());
  }

  /** Writes horizons until the one asked for is on disk; clears `#flushing` in the same turn as its last check. */
  async #flush(): Promise<void> {
    while (this.#target > this.#durable) {
      const h = this.#target;
      try {
        if (!this.#fh) throw new Error('replay log is closed');
        await this.#fh.write(`{"horizon":${h}}\n`);
        await this.#fh.datasync();
      } catch (e) {
        process.stderr.write(`dpop replay horizon write failed: ${String(e)}\n`);
        this.#target = this.#durable;
        const refusal = unavailable();
        for (const w of this.#waiters.splice(0)) w.reject(refusal);
        this.#flushing = null;
        return;
      }
      this.#durable = h;
      this.#lines++;
      const waiting: Waiter[] = [];
      for (const w of this.#waiters) {
        if (w.upTo <= h) w.resolve(true);
        else waiting.push(w);
      }
      this.#waiters = waiting;
      if (this.#lines >= COMPACT_LINES) {
        try {
          // The horizon covers every proof accepted before it; proofs read at the start expired hours ago.
          await this.#rewrite(h * 1000, false, false);
        } catch (e) {
          process.stderr.write(`dpop replay log compaction failed: ${String(e)}\n`);
        }
      }
    }
    this.#flushing = null;
  }

  /** Replaces the log (temp, fsync, rename) with the horizon, the live proofs when asked, and the closing mark; reopens it for appending. */
  async #rewrite(now: number, closed: boolean, withProofs = true): Promise<void> {
    const proofs = withProofs ? this.#mem.live(now).map(([k, exp]) => JSON.stringify([exp, k]) + '\n') : [];
    await this.#fh?.close();
    this.#fh = null;
    writeFileDurable(this.#path, `${proofs.join('')}{"horizon":${this.#durable}}\n${closed ? '{"closed":true}\n' : ''}`, 0o600);
    if (closed) return;
    this.#fh = await open(this.#path, 'a', 0o600);
    this.#lines = 1;
  }
}

function unavailable(): ServiceError {
  return new ServiceError('service_unavailable', 'the DPoP replay cache cannot be made durable; the proof is refused', {
    details: { reason: 'replay_cache_unavailable' },
    retryable: true,
  });
}

type Line = { kind: 'proof'; expiresAt: number; key: string } | { kind: 'horizon'; at: number } | { kind: 'closed' };

function parseLine(line: string): Line | null {
  try {
    const v = JSON.parse(line) as unknown;
    if (Array.isArray(v) && v.length === 2 && Number.isSafeInteger(v[0]) && typeof v[1] === 'string')
      return { kind: 'proof', expiresAt: v[0] as number, key: v[1] };
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
      const o = v as Record<string, unknown>;
      if (Number.isSafeInteger(o['horizon'])) return { kind: 'horizon', at: o['horizon'] as number };
      if (o['closed'] === true) return { kind: 'closed' };
    }
  } catch {
    // a corrupt line (a torn write that happened to end in a newline): skip it
  }
  return null;
}
