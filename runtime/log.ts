/**
 * The operator log of both programs (the cell and the edge), through pino:
 * one line per event, `info` (and `debug`) on stdout, `warn` and `error` on
 * stderr; JSON by default (`{"level":30,"time":"<ISO>",...fields,"msg":"…"}`: pino's
 * numeric levels, which pino-pretty, pino's transports and `jq 'select(.level>=40)'`
 * read; for a log shipper) or a short line for people (`--log-format pretty`,
 * through pino-pretty, in-process). `--log-level` drops the lines below it.
 *
 * Lines are written asynchronously (pino's SonicBoom destinations, in this
 * thread: the bundles and the single executable carry no worker-thread
 * transport), so a request never waits for a write syscall; lines gather for
 * up to 20 ms into one write, and while one is in flight the next lines gather
 * into the following one. The access line, one per request, takes a fast path
 * past pino's generic serialisation (`request`), many lines at a time. Each destination
 * holds at most `maxBufferBytes`; past that, lines are dropped and counted, and
 * one `warn` line says how many once the output has caught up. `close()` waits
 * until every line is written (a clean stop loses none); on an uncaught error
 * `exitOnFatalError` logs it and does the same before exiting; and pino writes
 * what is still buffered, synchronously, when the process exits any other way.
 *
 * Redaction is set here once for every line (runtime/internal/redact.ts).
 */
import { pino } from 'pino';
import { prettyFactory } from 'pino-pretty';
import { type AccessFields, accessLine, AccessLineEncoder, ENCODE_ROOM, mayHoldKeySecret } from './internal/access-line.ts';
import { prettyLine } from './internal/pretty-line.ts';
import { redactFields, redactLine } from './internal/redact.ts';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
export type { AccessFields } from './internal/access-line.ts';

/** What modules log through (the cell's `CellCore.log`, the edge's runtime). */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /** False when lines of `level` are dropped (callers then skip building them); absent: every level is written. */
  enabled?(level: 'info' | 'warn' | 'error'): boolean;
  /**
   * A request's access-log line: the same line as `info('request', fields)`, through a fixed-shape
   * serializer (one a request: its cost is the access log's), serialised with the next few, in order
   * with every other line: `fields` is read later (within GATHER_MS) and must not be changed. Absent:
   * callers use `info`.
   */
  request?(fields: AccessFields): void;
}

/** The process's own logger: a Logger that also owns its output. */
export interface ProcessLogger extends Logger {
  enabled(level: 'info' | 'warn' | 'error'): boolean;
  request(fields: AccessFields): void;
  /**
   * The start-up banner (where the program listens, where its key is): written on stdout whatever
   * `--log-level` says, in one write, in order with the lines logged before it. In the json format each is
   * an `info` line like the others (stdout carries JSON only), in the pretty format its message alone.
   * Not redacted: the banner is the one place a secret is meant to be seen (on a terminal only).
   */
  banner(lines: readonly BannerLine[]): void;
  /** Resolves once every line logged so far is written, or after `timeoutMs` (then what is left is written synchronously). */
  close(timeoutMs?: number): Promise<void>;
}

/** One line of the start-up banner: its message, and in the json format its fields beside it. */
export interface BannerLine {
  msg: string;
  fields?: Record<string, string | number | boolean | null>;
}

export interface LoggerOptions {
  level: LogLevel;
  format: LogFormat;
  /** Where info and debug lines go: a file descriptor or a file path (default 1, stdout). */
  out?: number | string;
  /** Where warn and error lines go (default 2, stderr). */
  err?: number | string;
  /** Most bytes a destination holds while its output is busy; lines past it are dropped (default 16 MiB). */
  maxBufferBytes?: number;
}

/** `true` in the bench build of the cell only (scripts/build.mjs --bench-log-toggle); undefined everywhere else. */
declare const AGENT_CELL_BENCH_LOG_TOGGLE: boolean | undefined;

const DEFAULT_MAX_BUFFER = 16 * 1024 * 1024;
const NEWLINE = 10;
/** How long a line may wait for others before it is handed to be written (an operator tailing the log does not see 20 ms). */
const GATHER_MS = 20;
/** How many bytes are handed at once at most, without waiting for GATHER_MS (a pipe's default capacity; fewer writes, fewer wake-ups). */
const CHUNK = 64 * 1024;
const WARN = 40; // pino's number for `warn`

type Destination = ReturnType<typeof pino.destination>;

/**
 * How many access lines wait, as their fields, before they are serialised together (or GATHER_MS has
 * passed, which comes first below ~50,000 requests a second): the larger the batch, the less a line
 * costs (the encoder's code and kept bytes stay warm); 1,024 lines are about a millisecond's work.
 */
const QUEUED = 1024;

/**
 * One asynchronous destination, with what the logger needs to know of it:
 * lines gather for up to GATHER_MS, or until a chunk of CHUNK bytes is full,
 * and go to SonicBoom as one buffer (each write handed to the thread pool
 * wakes a thread and then the event loop, which costs tens of lines'
 * serialisation); a write in flight; lines dropped.
 *
 * Each line is encoded to UTF-8 as it comes, into the chunk being gathered
 * (one Buffer, handed as it is and never written to again), and SonicBoom runs
 * in its `buffer` content mode: in its `utf8` mode each write measures its
 * string (and the string it is appended to) and encodes it again after
 * writing; gathering the lines as one string and encoding it at the end built,
 * flattened and encoded a rope of hundreds of pieces.
 *
 * Access lines (`queue`) wait as their fields and instant, up to QUEUED of
 * them, and are serialised together, in one loop, when the queue is full, when
 * the chunk is handed, or before any other line of this destination (so the
 * order of the lines is the order they were logged in): serialised one per
 * request, between the requests' own work, the same code cost about three
 * times as much (bench/RESULTS.md, issue 28, stop 25), and batches of up to
 * 1,024 cost less again than batches of 32 (stop 27). Each is encoded
 * straight into the chunk (`encode`: no string, a quarter of the CPU of
 * building the line and writing it in); the few it leaves (a value to escape
 * or redact) are rendered as strings.
 */
class Outlet {
  /** The chunk being gathered (null: none), and how many of its bytes are lines. */
  private chunk: Buffer | null = null;
  private used = 0;
  /** Access lines not serialised yet (the first `count`): their fields, and Date.now() when each was logged. */
  private readonly queued: (AccessFields | undefined)[] = new Array(QUEUED).fill(undefined);
  private readonly stamps = new Float64Array(QUEUED);
  private count = 0;
  private scheduled: NodeJS.Timeout | null = null;
  private busy = false;
  private broken = false;
  private waiting: (() => void)[] = [];
  dropped = 0;

  constructor(
    readonly dest: Destination,
    onDrain: (o: Outlet) => void,
    /** An access line into `buf` at `off` (ENCODE_ROOM bytes free): the offset after it, or -1 when it must be rendered. */
    private readonly encode: (buf: Buffer, off: number, fields: AccessFields, ms: number) => number,
    /** An access line as a string (redacted): the lines `encode` does not write. */
    private readonly render: (fields: AccessFields, ms: number) => string,
  ) {
    dest.on('drain', () => {
      if (this.scheduled) return; // more lines are gathering
      this.idle();
      onDrain(this);
    });
    dest.on('drop', (data: Buffer) => {
      for (let i = data.indexOf(NEWLINE); i >= 0; i = data.indexOf(NEWLINE, i + 1)) this.dropped++;
    });
    // A broken output (EPIPE: nobody reads; a full disk) stops this destination's lines, never the program.
    dest.on('error', () => {
      this.broken = true;
      this.chunk = null;
      this.queued.fill(undefined);
      this.count = 0;
      this.idle();
    });
  }

  /** An access line, logged at `ms` (Date.now()): serialised later, in order with the others. */
  queue(fields: AccessFields, ms: number): void {
    if (this.broken) return;
    this.busy = true;
    this.queued[this.count] = fields;
    this.stamps[this.count] = ms;
    if (++this.count >= QUEUED) this.serialise();
    else this.scheduled ??= setTimeout(this.hand, GATHER_MS);
  }

  write(line: string): void {
    if (this.broken) return;
    if (this.count > 0) this.serialise();
    this.put(line);
  }

  /** The queued access lines, serialised into the chunk in the order they came. */
  private serialise(): void {
    const n = this.count;
    this.count = 0;
    for (let i = 0; i < n; i++) {
      const fields = this.queued[i]!;
      this.queued[i] = undefined;
      const end = this.encode(this.room(ENCODE_ROOM), this.used, fields, this.stamps[i]!);
      if (end >= 0) this.used = end;
      else this.put(this.render(fields, this.stamps[i]!));
    }
  }

  private put(line: string): void {
    if (this.broken) return;
    this.busy = true;
    const chunk = this.room(line.length * 3); // UTF-8 bytes of `line` at most
    this.used += chunk.write(line, this.used);
  }

  /** The chunk being gathered, with at least `most` bytes free (the full one handed to SonicBoom first). */
  private room(most: number): Buffer {
    if (this.chunk !== null && this.used + most > this.chunk.length) this.send();
    if (this.chunk === null) {
      this.chunk = Buffer.allocUnsafeSlow(Math.max(CHUNK, most));
      this.used = 0;
    }
    this.scheduled ??= setTimeout(this.hand, GATHER_MS);
    return this.chunk;
  }

  /** At GATHER_MS, at a deadline, on the way out: every line so far to SonicBoom. */
  private hand = (): void => {
    if (this.scheduled) clearTimeout(this.scheduled);
    this.scheduled = null;
    if (this.count > 0) this.serialise();
    this.send();
    if (this.scheduled) clearTimeout(this.scheduled); // set again by serialise, for lines handed now
    this.scheduled = null;
  };

  /** Gives the chunk to SonicBoom (which writes it now, or after the write in flight). */
  private send(): void {
    const chunk = this.chunk;
    this.chunk = null;
    // SonicBoom's types name only strings; in buffer mode it takes (and wants) a Buffer, and keeps it until written.
    if (chunk !== null && this.used > 0 && !this.broken) this.dest.write(chunk.subarray(0, this.used) as unknown as string);
  }

  /** Resolves when no write is in flight and nothing waits to be written. */
  drained(): Promise<void> {
    return this.busy ? new Promise((r) => this.waiting.push(r)) : Promise.resolve();
  }

  /** Writes whatever is still buffered, synchronously (at a deadline, or on the way out). */
  flushSync(): void {
    if (!this.busy || this.broken) return;
    // From now on SonicBoom writes in this thread, at once: the process may be gone before a pooled write runs.
    (this.dest as unknown as { sync: boolean }).sync = true;
    try {
      this.hand();
      this.dest.flushSync();
    } catch {
      // Nothing is left to report a failing output to: the process is leaving.
    }
  }

  private idle(): void {
    this.busy = false;
    for (const w of this.waiting.splice(0)) w();
  }
}

const live = new Set<Outlet>();

/** Whatever way the process leaves (process.exit on a start-up failure included), the pending lines go too: one listener for all loggers. */
function flushOnExit(outlets: Outlet[]): void {
  if (live.size === 0)
    process.once('exit', () => {
      for (const o of live) o.flushSync();
    });
  for (const o of outlets) live.add(o);
}

/**
 * pino's `,"time":"<ISO>"` (`Date#toISOString`) of `now` (default: this instant), built once per
 * millisecond (a busy cell logs many lines in one) from its date and second, built once per second.
 */
export function isoTime(): (now?: number) => string {
  let ms = -1;
  let second = -1;
  let head = '';
  let text = '';
  return (now = Date.now()) => {
    if (now !== ms) {
      ms = now;
      const s = Math.floor(now / 1000);
      if (s !== second) {
        second = s;
        head = `,"time":"${new Date(s * 1000).toISOString().slice(0, 20)}`; // up to the seconds' dot
      }
      const m = now - s * 1000;
      text = `${head}${m < 10 ? '00' : m < 100 ? '0' : ''}${m}Z"`;
    }
    return text;
  };
}

/** The logger of this process, writing to stdout and stderr (or the given outputs). */
export function createLogger(opts: LoggerOptions): ProcessLogger {
  const maxLength = opts.maxBufferBytes ?? DEFAULT_MAX_BUFFER;
  const reportDrops = (o: Outlet) => {
    if (o.dropped === 0) return;
    const dropped = o.dropped;
    o.dropped = 0;
    logger.warn({ dropped }, 'log lines dropped: the output did not keep up');
  };
  const time = isoTime();
  // An access line as pino would write it (the same bytes, redacted as every line is: none of its fields is secret-named):
  // encoded straight into the chunk, or, for the lines the encoder leaves (a value to escape or redact), as a string.
  const encoder = new AccessLineEncoder();
  const encode = (buf: Buffer, off: number, fields: AccessFields, ms: number): number => encoder.encode(buf, off, time(ms), fields);
  const render = (fields: AccessFields, ms: number): string => {
    const line = accessLine(time(ms), fields);
    // A key secret can only come in a value: the template holds none (and a value is never split).
    return mayHoldKeySecret(fields) ? redactLine(line) : line;
  };
  const open = (dest: number | string) =>
    new Outlet(pino.destination({ dest, sync: false, maxLength, mkdir: false, contentMode: 'buffer' }), reportDrops, encode, render);
  const out = open(opts.out ?? 1);
  const err = opts.err === (opts.out ?? 1) ? out : open(opts.err ?? 2);
  const pretty =
    opts.format === 'pretty' ? prettyFactory({ messageFormat: prettyLine, hideObject: true, ignore: 'level,time', colorize: false }) : null;
  // pino tells this stream each line's level (needsMetadataGsym): warn and above go to stderr.
  const router = {
    [pino.symbols.needsMetadataGsym]: true,
    lastLevel: 0,
    write(line: string) {
      (this.lastLevel >= WARN ? err : out).write(pretty ? pretty(line) : line);
    },
  };
  const logger = pino(
    {
      level: opts.level,
      base: null,
      timestamp: () => time(),
      // pino's numeric levels (30 info, 40 warn, 50 error): what pino-pretty, pino's transports and jq filters expect.
      formatters: { log: redactFields },
      // Errors, under any key, are already plain objects (type, message, stack) after redactFields.
      serializers: { err: (e: unknown) => e },
      hooks: { streamWrite: redactLine },
    },
    router,
  );
  const on = { info: logger.isLevelEnabled('info'), warn: logger.isLevelEnabled('warn'), error: logger.isLevelEnabled('error') };
  // Only in the bench build (scripts/build.mjs --bench-log-toggle, bench/access-log-toggle.ts): SIGUSR2 switches
  // info lines off and on, so that one process serves both sides of the access log's comparison.
  if (typeof AGENT_CELL_BENCH_LOG_TOGGLE !== 'undefined' && AGENT_CELL_BENCH_LOG_TOGGLE)
    process.on('SIGUSR2', () => {
      on.info = !on.info;
    });
  // Past pino for JSON, serialised many at a time (Outlet); pretty lines go through pino-pretty.
  const writeAccessLine = (fields: AccessFields) => {
    if (on.info) out.queue(fields, Date.now());
  };
  const outlets = out === err ? [out] : [out, err];
  flushOnExit(outlets);
  return {
    info: (msg, fields) => logger.info(fields, msg),
    warn: (msg, fields) => logger.warn(fields, msg),
    error: (msg, fields) => logger.error(fields, msg),
    enabled: (level) => on[level],
    request: pretty ? (fields) => logger.info(fields, 'request') : writeAccessLine,
    banner(lines) {
      const at = time();
      const line = (l: BannerLine) => {
        if (pretty) return `${l.msg}\n`;
        const fields = l.fields ? JSON.stringify(l.fields).slice(1, -1) : '';
        return `{"level":30${at}${fields ? `,${fields}` : ''},"msg":${JSON.stringify(l.msg)}}\n`;
      };
      out.write(lines.map(line).join(''));
    },
    async close(timeoutMs = 5000) {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((r) => {
        timer = setTimeout(r, timeoutMs);
      });
      await Promise.race([Promise.all(outlets.map((o) => o.drained())), deadline]);
      clearTimeout(timer);
      for (const o of outlets) o.flushSync();
    },
  };
}

/**
 * On an uncaught exception (an unhandled rejection is one too: Node's default
 * `--unhandled-rejections=throw`): one `error` line with the stack, every
 * pending line written (up to `timeoutMs`), then exit status 1, as Node's own
 * handling would.
 */
export function exitOnFatalError(log: ProcessLogger, timeoutMs = 2000): void {
  let dying = false;
  process.on('uncaughtException', (e, origin) => {
    if (dying) return;
    dying = true;
    log.error(origin === 'unhandledRejection' ? 'unhandled rejection' : 'uncaught exception', {
      error: e,
    });
    void log.close(timeoutMs).finally(() => process.exit(1));
  });
}
