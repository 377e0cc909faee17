/**
 * The flags `serve` takes in both programs (the cell's `agent-cell serve`, the device's `agent-cell-edge
 * serve`) and what they mean alike: where it listens, the gateway's rate, TLS and client certificates, the
 * operator log, the private ranges tools may reach, the stdio tool sources. Each program's help says them.
 */
import { readFileSync } from 'node:fs';
import { parseIpRule } from '../core/apikey/network.ts';
import { fail } from './cli.ts';
import { createLogger, exitOnFatalError, LOG_FORMATS, LOG_LEVELS, type LogFormat, type LogLevel, type ProcessLogger } from './log.ts';

/** A flag that takes a value (parseArgs). */
const VALUE = { type: 'string' } as const;

/** parseArgs options of the flags both programs' `serve` takes. */
export const SHARED_SERVE_OPTIONS = {
  port: VALUE,
  host: VALUE,
  region: VALUE,
  'rate-capacity': VALUE,
  'rate-refill': VALUE,
  'tls-cert': VALUE,
  'tls-key': VALUE,
  'client-ca': VALUE,
  'egress-allow-private': VALUE,
  'tool-sources': VALUE,
  'log-level': VALUE,
  'log-format': VALUE,
};

/** The operator log of `--log-level` and `--log-format`; a fatal error is logged before the process exits. */
export function serveLogger(values: { 'log-level'?: string | undefined; 'log-format'?: string | undefined }): ProcessLogger {
  const logLevel = (values['log-level'] ?? 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) fail(`--log-level must be one of ${LOG_LEVELS.join(', ')}`);
  const logFormat = (values['log-format'] ?? 'json') as LogFormat;
  if (!LOG_FORMATS.includes(logFormat)) fail(`--log-format must be one of ${LOG_FORMATS.join(', ')}`);
  const log = createLogger({ level: logLevel, format: logFormat });
  exitOnFatalError(log);
  return log;
}

/**
 * The certificate, key and client CA of `--tls-cert`, `--tls-key` and `--client-ca`, each read with `read`
 * (its flag and path); undefined: plain http. The first two go together; the CA needs them.
 */
export function tlsFiles(
  values: { 'tls-cert'?: string | undefined; 'tls-key'?: string | undefined; 'client-ca'?: string | undefined },
  read: (flag: string, path: string) => Buffer = (_flag, path) => readFileSync(path),
): { cert: Buffer; key: Buffer; ca?: Buffer } | undefined {
  if ((values['tls-cert'] === undefined) !== (values['tls-key'] === undefined)) fail('--tls-cert and --tls-key go together');
  if (values['client-ca'] !== undefined && values['tls-cert'] === undefined) fail('--client-ca needs --tls-cert and --tls-key');
  return values['tls-cert'] !== undefined && values['tls-key'] !== undefined
    ? {
        cert: read('tls-cert', values['tls-cert']),
        key: read('tls-key', values['tls-key']),
        ...(values['client-ca'] !== undefined ? { ca: read('client-ca', values['client-ca']) } : {}),
      }
    : undefined;
}

/** `--egress-allow-private CIDR,...`: the non-public ranges tools may reach (runtime/ssrf.ts), each checked. */
export function egressAllowPrivateRules(v: string): string[] {
  const rules = v
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x.length > 0);
  for (const r of rules) if (parseIpRule(r) === null) fail(`--egress-allow-private: '${r}' is not an address or CIDR range`);
  return rules;
}
