/**
 * Trace export settings from the standard OpenTelemetry variables (and the
 * `--otlp-endpoint` flag, which wins): the OTLP/HTTP endpoint, the service
 * name, the GenAI content-capture opt-in. Export is off unless an endpoint is
 * given, and off again when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none
 * say so. Only `http/protobuf` is spoken; another OTEL_EXPORTER_OTLP_PROTOCOL
 * is refused at start rather than silently ignored. docs/operations.md "Traces".
 */
import type { TracesConfig } from '../config.ts';

export type Env = Record<string, string | undefined>;

/** The trace settings, null when export is off; throws TypeError with an operator's message for a bad value. */
export function tracesConfig(env: Env, flagEndpoint: string | undefined): TracesConfig | null {
  const truthy = (v: string | undefined) => v !== undefined && v.trim().toLowerCase() === 'true';
  if (truthy(env['OTEL_SDK_DISABLED'])) return null;
  const exporter = env['OTEL_TRACES_EXPORTER']?.trim().toLowerCase();
  if (exporter === 'none') return null;
  if (exporter !== undefined && exporter !== '' && exporter !== 'otlp')
    throw new TypeError(`OTEL_TRACES_EXPORTER=${exporter} is not supported: the cell exports traces over OTLP only (otlp or none)`);
  const protocol = (env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] ?? env['OTEL_EXPORTER_OTLP_PROTOCOL'])?.trim();
  if (protocol !== undefined && protocol !== '' && protocol !== 'http/protobuf')
    throw new TypeError(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported: the cell exports traces over http/protobuf`);
  let endpoint: string | undefined;
  if (flagEndpoint !== undefined) endpoint = signalUrl(flagEndpoint, '--otlp-endpoint');
  else if (env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']?.trim())
    endpoint = url(env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'].trim(), 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  else if (env['OTEL_EXPORTER_OTLP_ENDPOINT']?.trim())
    endpoint = signalUrl(env['OTEL_EXPORTER_OTLP_ENDPOINT'].trim(), 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (endpoint === undefined) return null;
  return {
    endpoint,
    serviceName: env['OTEL_SERVICE_NAME']?.trim() || 'agent-cell',
    captureContent: truthy(env['OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT']),
  };
}

function url(v: string, name: string): string {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new TypeError(`${name} must be an http(s) URL, e.g. http://127.0.0.1:4318`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TypeError(`${name} must be an http(s) URL, e.g. http://127.0.0.1:4318`);
  if (u.username || u.password) throw new TypeError(`${name} must not carry credentials: pass them in OTEL_EXPORTER_OTLP_HEADERS`);
  return u.toString();
}

/** The base endpoint with the traces path appended, as the OTLP exporter specification says (`/v1/traces`). */
function signalUrl(v: string, name: string): string {
  const base = url(v, name);
  return `${base.endsWith('/') ? base : `${base}/`}v1/traces`;
}
