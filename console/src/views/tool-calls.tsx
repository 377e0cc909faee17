/**
 * A run's tool calls (issue 43 §5), from its journal: each call's tool, step and seat, who approved it
 * (under `ask`), its effect key and how an operator resolved its lost outcome (docs/engine.md, "Effect
 * keys and the crash rule"), the identity its server saw (docs/tools.md, "Who the server sees": a
 * per-call token's id and hash, the source's client, or none; never a token), and its arguments and
 * result, read by the hashes its signed record names and checked against them. The jobs' own steps
 * (`job.*`) are left out.
 */
import { nodeOfStep, type GraphLike, type RecordLike } from '../run-model.ts';
import { Time, Who, WhoList } from '../ui.tsx';
import { ValueButton, type ValuesByHash } from './run-parts.tsx';

/** A tool call as its step record tells it. */
export interface ToolCallRecord {
  seq: number;
  step_id: string;
  at: number;
  tool: string;
  seat: string | null;
  input_hash: string;
  output_hash: string;
  approved_by: string[];
  identity: Record<string, unknown> | null;
  on_behalf: Record<string, unknown> | null;
  /** A side-effecting call's effect key (sent as `Idempotency-Key` or in MCP `_meta`). */
  effect_key: string | null;
  /** An operator's resolution of its lost outcome: `{ resolution, by, attempt }`. */
  resolution: Record<string, unknown> | null;
}

const obj = (v: unknown): Record<string, unknown> | null =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;

/** The tool calls a journal recorded (their step records), in order. */
export function toolCallsOf(records: readonly RecordLike[], graph: GraphLike | null): ToolCallRecord[] {
  const ids = graph?.nodes.map((n) => n.id) ?? [];
  return records
    .filter(
      (r) =>
        r.kind === 'step' &&
        typeof r.data?.['tool'] === 'string' &&
        !String(r.data['tool']).startsWith('job.') &&
        // A tool node's own record (`executor: tool`) sums up the call recorded just before it.
        r.data['executor'] === undefined,
    )
    .map((r) => {
      const d = r.data ?? {};
      const node = nodeOfStep(r.step_id, ids);
      const seat = typeof d['seat'] === 'string' ? d['seat'] : ((node ? graph?.nodes.find((n) => n.id === node)?.seat : undefined) ?? null);
      return {
        seq: r.seq,
        step_id: r.step_id,
        at: r.at,
        tool: String(d['tool']),
        seat,
        input_hash: r.input_hash,
        output_hash: r.output_hash,
        approved_by: Array.isArray(d['approved_by']) ? d['approved_by'].filter((x): x is string => typeof x === 'string') : [],
        identity: obj(d['identity']),
        on_behalf: obj(d['on_behalf']),
        effect_key: typeof d['effect_key'] === 'string' ? d['effect_key'] : null,
        resolution: obj(d['resolution']),
      };
    });
}

/** Which identity the server saw, in words. */
function IdentityLine({ id }: { id: Record<string, unknown> }) {
  const kind = String(id['kind'] ?? 'unknown');
  const act = obj(id['act']);
  const code = (k: string) => (typeof id[k] === 'string' ? <code class="hash">{String(id[k])}</code> : null);
  if (kind === 'delegated')
    return (
      <>
        a token for this call alone: on behalf of <Who id={typeof id['sub'] === 'string' ? id['sub'] : null} />
        {act && typeof act['sub'] === 'string' ? (
          <>
            , acted by <code>{act['sub']}</code>
          </>
        ) : null}
        {typeof id['aud'] === 'string' ? <>, for {code('aud')}</> : null}; token id {code('jti')}, SHA-256 {code('token_sha256')}
      </>
    );
  if (kind === 'client')
    return (
      <>
        the source's own client {code('client_id')} (token endpoint {code('token_endpoint')}); token SHA-256 {code('token_sha256')}
      </>
    );
  if (kind === 'none') return <>no credential</>;
  return <code>{JSON.stringify(id)}</code>;
}

/** The run's tool calls, with what each one carried and answered. */
export function ToolCalls({
  runId,
  calls,
  graph,
  values,
}: {
  runId: string;
  calls: ToolCallRecord[];
  graph: GraphLike | null;
  /** The run's values, when the view holds them (an imported edge journal); else read from the cell. */
  values?: ValuesByHash;
}) {
  if (calls.length === 0) return <p class="muted">No tool call.</p>;
  return (
    <ol class="plain tool-calls" id="tool-calls">
      {calls.map((c) => {
        const role = c.seat ? graph?.seats?.[c.seat]?.role_label : undefined;
        return (
          <li key={c.seq} class="tool-call" data-tool={c.tool} data-step={c.step_id}>
            <p>
              <code class="tool-name">{c.tool}</code> at <code>{c.step_id}</code>
              {role || c.seat ? (
                <>
                  {' '}
                  · seat <bdi>{role ?? c.seat}</bdi>
                </>
              ) : null}{' '}
              · <Time at={c.at} /> · record #{c.seq}
            </p>
            <dl class="facts">
              {c.approved_by.length ? (
                <>
                  <dt>Approved by</dt>
                  <dd>
                    <WhoList ids={c.approved_by} />
                  </dd>
                </>
              ) : null}
              {c.effect_key ? (
                <>
                  <dt>Effect key</dt>
                  <dd>
                    <code class="hash effect-key">{c.effect_key}</code>
                  </dd>
                </>
              ) : null}
              {c.resolution ? (
                <>
                  <dt>Its lost outcome</dt>
                  <dd class="tool-resolution">
                    {String(c.resolution['resolution'])} by <Who id={typeof c.resolution['by'] === 'string' ? c.resolution['by'] : null} />{' '}
                    (attempt {String(c.resolution['attempt'] ?? '?')})
                  </dd>
                </>
              ) : null}
              {c.identity ? (
                <>
                  <dt>The server saw</dt>
                  <dd class="tool-identity" data-kind={String(c.identity['kind'] ?? '')}>
                    <IdentityLine id={c.identity} />
                  </dd>
                </>
              ) : null}
              {c.on_behalf ? (
                <>
                  <dt>On behalf of the requester</dt>
                  <dd>
                    token id <code class="hash">{String(c.on_behalf['jti'] ?? '')}</code>, SHA-256{' '}
                    <code class="hash">{String(c.on_behalf['token_sha256'] ?? '')}</code>
                  </dd>
                </>
              ) : null}
            </dl>
            <div class="io">
              <ValueButton runId={runId} hash={c.input_hash} what="arguments" {...(values ? { values } : {})} />
              <ValueButton runId={runId} hash={c.output_hash} what="result" {...(values ? { values } : {})} />
            </div>
          </li>
        );
      })}
    </ol>
  );
}
