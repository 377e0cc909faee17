/**
 * The cell's operator log: one line per event on stdout (info) or stderr
 * (warn, error), as JSON (the default: one object per line, for a log
 * shipper) or as a short human-readable line (`--log-format pretty`).
 * `--log-level` drops the lines below it (`error` keeps only errors).
 */
import type { Logger } from './context.ts';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export interface LoggerOptions {
  level: LogLevel;
  format: LogFormat;
  /** Where lines go (default: info to stdout, warn and error to stderr). */
  write?: (level: LogLevel, line: string) => void;
}

const RANK: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

const writeStd = (level: LogLevel, line: string) => (level === 'warn' || level === 'error' ? process.stderr : process.stdout).write(line);

export function createLogger(opts: LoggerOptions): Logger {
  const write = opts.write ?? writeStd;
  const min = RANK[opts.level];
  const emit = (level: LogLevel) => (msg: string, fields?: Record<string, unknown>) => {
    if (RANK[level] < min) return;
    write(level, opts.format === 'json' ? `${JSON.stringify({ level, msg, ...fields })}\n` : pretty(level, msg, fields));
  };
  return { info: emit('info'), warn: emit('warn'), error: emit('error'), enabled: (level) => RANK[level] >= min };
}

/** `INFO  request GET /api/… 200 1.2ms request_id=… principal_id=…`: the access log's fields first, the rest as key=value. */
function pretty(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): string {
  const { time, method, route, status, duration_ms, ...rest } = fields;
  const head = [typeof time === 'string' ? time : new Date().toISOString(), level.toUpperCase().padEnd(5), msg];
  if (method !== undefined) head.push(String(method), String(route), String(status), `${String(duration_ms)}ms`);
  const tail = Object.entries(rest)
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return `${[...head, ...tail].join(' ')}\n`;
}
