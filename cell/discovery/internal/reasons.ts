/**
 * The closed set of refusal reasons (core/reasons.ts) in the curated
 * document (issue 27): on the `Error` schema, `x-reasons` maps each reason to
 * its HTTP statuses, envelope codes, run error codes and sentence for tools,
 * and the description of `details` lists them as a table the docs page shows.
 * Adds no constraint: a response validates as before.
 */
import { ERROR_STATUS } from '../../../core/errors.ts';
import { REASONS, type Reason } from '../../../core/reasons.ts';
import type { JsonObject } from '../curate.ts';

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The registry as the document carries it: reason -> { status, code, run, sentence }. */
export function reasonsExtension(): JsonObject {
  const out: JsonObject = {};
  for (const [name, e] of Object.entries(REASONS)) {
    out[name] = {
      status: e.codes.map((c) => ERROR_STATUS[c]),
      code: [...e.codes],
      ...('runs' in e ? { run: [...e.runs] } : {}),
      sentence: e.sentence,
    };
  }
  return out;
}

/** The Markdown table of every reason (also the body of docs/errors.md's list). */
export function reasonsTable(): string {
  const rows = (Object.keys(REASONS) as Reason[]).map((name) => {
    const e = REASONS[name];
    const http = e.codes.map((c) => `${ERROR_STATUS[c]} \`${c}\``).join(', ') || '—';
    const run = 'runs' in e ? e.runs.map((r) => `\`${r}\``).join(', ') : '—';
    return `| \`${name}\` | ${http} | ${run} | ${e.sentence.replaceAll('|', '\\|')} |`;
  });
  return ['| reason | HTTP status and `error` | run `error.code` | meaning |', '|---|---|---|---|', ...rows].join('\n');
}

/** Puts `x-reasons` on the `Error` schema and the table on its `details`, in place; a document without it is left alone. */
export function describeReasons(doc: JsonObject): void {
  const schemas = isObject(doc['components']) ? doc['components']['schemas'] : undefined;
  const error = isObject(schemas) ? schemas['Error'] : undefined;
  if (!isObject(error)) return;
  error['x-reasons'] = reasonsExtension();
  const props = isObject(error['properties']) ? error['properties'] : undefined;
  const details = props && isObject(props['details']) ? props['details'] : undefined;
  if (details)
    details['description'] = [
      'Safe detail of the refusal. `details.reason`, when present, is a stable machine sub-code from the closed set below',
      "(also under this schema's `x-reasons`); a refusal relayed from a dependency that named none carries that dependency's `error` code.",
      'A run that ends refused or failed carries the same reasons in its `error.reason`.',
      '',
      reasonsTable(),
    ].join('\n');
}
