/**
 * Edge devices and the runs they carried back (docs/edge.md, "Cell side"): the registered devices
 * (`GET /admin/edge/devices`), a device's page with the budgets it holds (`GET …/budget-holds`, released
 * by `POST …/budget-release` once its crew bundles expired) and its imported journals (`GET /admin/edge/journals?device_id=`),
 * and an imported run (`GET /admin/edge/journals/{run_id}`): its outcome, its records verified here, in this
 * browser, with the device's registered key (core/journal/verify.ts), and its tool calls as any run shows
 * them (tool-calls.tsx), their arguments and results from the export's own values, each checked against the
 * hash its signed record names, and the decisions approvers took on the device.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { ADMIN, call, describeError, seg } from '../api.ts';
import { can } from '../auth/session.ts';
import type { JournalRecord } from '../../../core/journal/record.ts';
import { verifyJournal, type JournalVerdict } from '../../../core/journal/verify.ts';
import { href } from '../router.ts';
import type { GraphLike, RecordLike } from '../run-model.ts';
import { Confirm, ErrorNote, StateBadge, Time, useApp, useLoad } from '../ui.tsx';
import { DecisionList, type DecisionLike } from './decision-list.tsx';
import { ToolCalls, toolCallsOf } from './tool-calls.tsx';

interface Device {
  device_id: string;
  name: string;
  status: string;
  public_jwk: JsonWebKey;
  created_at?: string;
}

interface JournalSummary {
  run_id: string;
  device_id: string;
  crew_id: string;
  graph_hash: string;
  outcome: string;
  record_count: number;
  imported_at: string;
}

interface Hold {
  agent_id: string;
  allotted: number;
  charged: number;
  released: number;
  outstanding: number;
  until: string;
}

interface ImportedJournal extends JournalSummary {
  records: (RecordLike & { signer_kid?: string })[];
  values: Record<string, unknown>;
  graph: GraphLike | null;
}

async function devicesOf(session: ReturnType<typeof useApp>['session'], signal: AbortSignal): Promise<Device[]> {
  return (await call<{ devices: Device[] }>(session, 'GET', `${ADMIN}/edge/devices?limit=1000&include_deleted=true`, { signal })).devices;
}

/** The devices, or one device's page with the journals its runs carried back. */
export function DevicesView({ deviceId }: { deviceId: string | null }) {
  const { session } = useApp();
  const devices = useLoad((signal) => devicesOf(session, signal), [session]);
  const journals = useLoad(
    async (signal) =>
      deviceId === null
        ? null
        : (
            await call<{ journals: JournalSummary[] }>(session, 'GET', `${ADMIN}/edge/journals?device_id=${seg(deviceId)}&limit=1000`, {
              signal,
            })
          ).journals,
    [session, deviceId],
  );
  if (deviceId === null)
    return (
      <>
        <h1>Edge devices</h1>
        <ErrorNote error={devices.error} prefix="The devices could not be loaded" />
        {devices.data ? (
          devices.data.length === 0 ? (
            <p id="devices-none">No edge device is registered on this cell.</p>
          ) : (
            <ul class="plain" id="devices-list">
              {devices.data.map((d) => (
                <li key={d.device_id} data-device={d.device_id}>
                  <a href={href('devices', d.device_id)}>
                    <bdi>{d.name}</bdi>
                  </a>{' '}
                  <StateBadge state={d.status} /> <code class="hash">{d.device_id}</code>
                </li>
              ))}
            </ul>
          )
        ) : (
          <p role="status">Loading…</p>
        )}
      </>
    );
  const device = devices.data?.find((d) => d.device_id === deviceId);
  return (
    <>
      <p>
        <a href={href('devices')}>All edge devices</a>
      </p>
      <h1>
        Edge device <bdi>{device?.name ?? deviceId}</bdi>
      </h1>
      <p>
        <code class="hash">{deviceId}</code> {device ? <StateBadge state={device.status} /> : null}
      </p>
      <Holds deviceId={deviceId} />
      <h2>Runs carried back</h2>
      <ErrorNote error={journals.error} prefix="The device's journals could not be loaded" />
      {journals.data ? (
        journals.data.length === 0 ? (
          <p id="device-journals-none">No journal of this device was imported.</p>
        ) : (
          <div class="table-wrap">
            <table id="device-journals">
              <caption class="sr-only">Journals imported from this device</caption>
              <thead>
                <tr>
                  <th scope="col">Run</th>
                  <th scope="col">Outcome</th>
                  <th scope="col">Records</th>
                  <th scope="col">Imported</th>
                </tr>
              </thead>
              <tbody>
                {journals.data.map((j) => (
                  <tr key={j.run_id} data-run={j.run_id}>
                    <th scope="row" data-label="Run">
                      <a href={href('edge-runs', j.run_id)}>
                        <code>{j.run_id}</code>
                      </a>
                    </th>
                    <td data-label="Outcome">
                      <StateBadge state={j.outcome} />
                    </td>
                    <td data-label="Records">{j.record_count}</td>
                    <td data-label="Imported">
                      <Time at={j.imported_at} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )
      ) : journals.error ? null : (
        <p role="status">Loading…</p>
      )}
    </>
  );
}

/**
 * What the device holds of the agents' budget ledgers (docs/edge.md, "Budgets a device holds"), and the
 * release that gives the outstanding part back: the cell refuses it (`bundle_live`) until every crew
 * bundle of the device has expired, and says until when.
 */
function Holds({ deviceId }: { deviceId: string }) {
  const { session } = useApp();
  const holds = useLoad(
    async (signal) =>
      (await call<{ holds: Hold[] }>(session, 'GET', `${ADMIN}/edge/devices/${seg(deviceId)}/budget-holds?limit=1000`, { signal })).holds,
    [session, deviceId],
  );
  const [ask, setAsk] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const release = async () => {
    setBusy(true);
    setError(null);
    try {
      await call(session, 'POST', `${ADMIN}/edge/devices/${seg(deviceId)}/budget-release`, { body: {} });
      setAsk(false);
      holds.reload();
    } catch (e) {
      setError(describeError(e));
    } finally {
      setBusy(false);
    }
  };
  const outstanding = (holds.data ?? []).reduce((n, h) => n + h.outstanding, 0);
  return (
    <>
      <h2>Budgets held</h2>
      <ErrorNote error={holds.error} prefix="The device's budget holds could not be loaded" />
      {holds.data ? (
        holds.data.length === 0 ? (
          <p id="device-holds-none">No crew bundle handed this device any budget.</p>
        ) : (
          <>
            <div class="table-wrap">
              <table id="device-holds">
                <caption class="sr-only">What the device holds of each agent's budget ledger, in tokens</caption>
                <thead>
                  <tr>
                    <th scope="col">Agent</th>
                    <th scope="col">Handed out</th>
                    <th scope="col">Charged</th>
                    <th scope="col">Released</th>
                    <th scope="col">Outstanding</th>
                    <th scope="col">Bundles live until</th>
                  </tr>
                </thead>
                <tbody>
                  {holds.data.map((h) => (
                    <tr key={h.agent_id} data-agent={h.agent_id}>
                      <th scope="row" data-label="Agent">
                        <code>{h.agent_id}</code>
                      </th>
                      <td data-label="Handed out">{h.allotted}</td>
                      <td data-label="Charged">{h.charged}</td>
                      <td data-label="Released">{h.released}</td>
                      <td data-label="Outstanding" class="outstanding">
                        {h.outstanding}
                      </td>
                      <td data-label="Bundles live until">
                        <Time at={h.until} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            {outstanding > 0 && can(session, 'edge.write') ? (
              <div class="buttons">
                {ask ? (
                  <Confirm
                    question={`Give ${outstanding} tokens back to the ledgers? Carry the device's journals back first: what it spent and was not imported is charged beyond the limit later.`}
                    act="Release"
                    cls="primary"
                    id="holds-release-confirm"
                    small
                    busy={busy}
                    onConfirm={release}
                    onKeep={() => setAsk(false)}
                  />
                ) : (
                  <button type="button" class="small" id="holds-release" onClick={() => setAsk(true)}>
                    Release what the device holds
                  </button>
                )}
              </div>
            ) : null}
            {error ? (
              <p class="error" role="alert" id="holds-release-error">
                {error}
              </p>
            ) : null}
          </>
        )
      ) : holds.error ? null : (
        <p role="status">Loading…</p>
      )}
    </>
  );
}

/** The decisions approvers took on the device: its journal's `approval_received` records, oldest first. */
function decisionsOf(records: readonly RecordLike[]): DecisionLike[] {
  return records
    .filter((r) => r.kind === 'approval_received')
    .map((r) => {
      const d = r.data ?? {};
      const chain = Array.isArray(d['chain']) ? d['chain'].filter((x): x is string => typeof x === 'string') : undefined;
      return {
        step_id: r.step_id,
        principal: typeof d['by'] === 'string' ? d['by'] : '?',
        ...(chain ? { chain } : {}),
        decision: typeof d['decision'] === 'string' ? d['decision'] : '?',
        comment: typeof d['comment'] === 'string' ? d['comment'] : null,
        at: new Date(r.at).toISOString(),
      };
    });
}

/** A run an edge device carried back: its journal verified with the device's key, and its tool calls. */
export function EdgeRunView({ runId }: { runId: string }) {
  const { session } = useApp();
  const j = useLoad(
    (signal) => call<ImportedJournal>(session, 'GET', `${ADMIN}/edge/journals/${seg(runId)}`, { signal }),
    [session, runId],
  );
  const devices = useLoad((signal) => devicesOf(session, signal), [session]);
  const [verdict, setVerdict] = useState<JournalVerdict | { error: string } | null>(null);
  const data = j.data;
  const key = data ? devices.data?.find((d) => d.device_id === data.device_id)?.public_jwk : undefined;
  useEffect(() => {
    if (!data || !key) return;
    verifyJournal(data.records as unknown as JournalRecord[], (kid) => (kid === data.device_id ? key : undefined)).then(setVerdict, (e) =>
      setVerdict({ error: String(e) }),
    );
  }, [data, key]);
  const values = useMemo(() => new Map(Object.entries(data?.values ?? {})), [data]);
  const calls = useMemo(() => (data ? toolCallsOf(data.records, data.graph) : []), [data]);
  const decisions = useMemo(() => (data ? decisionsOf(data.records) : []), [data]);
  return (
    <>
      <h1>
        Edge run <code>{runId}</code>
      </h1>
      <ErrorNote error={j.error} prefix="The imported journal could not be loaded" />
      {data ? (
        <>
          <dl class="facts" id="edge-run-facts">
            <dt>Device</dt>
            <dd>
              <a href={href('devices', data.device_id)}>
                <code class="hash">{data.device_id}</code>
              </a>
            </dd>
            <dt>Outcome</dt>
            <dd>
              <StateBadge state={data.outcome} />
            </dd>
            <dt>Crew</dt>
            <dd>
              <code>{data.crew_id}</code>
            </dd>
            <dt>Graph</dt>
            <dd>
              <code class="hash">{data.graph_hash}</code>
            </dd>
            <dt>Imported</dt>
            <dd>
              <Time at={data.imported_at} />
            </dd>
            <dt>Journal</dt>
            <dd id="edge-run-verdict">
              {verdict === null ? (
                <span role="status">checking {data.records.length} records…</span>
              ) : 'error' in verdict ? (
                <span class="bad-text">{verdict.error}</span>
              ) : verdict.ok ? (
                <span class="ok-text">{data.records.length} records verify with the device's registered key</span>
              ) : (
                <span class="bad-text">
                  does NOT verify at record {verdict.seq}: {verdict.reason}
                </span>
              )}
            </dd>
          </dl>
          <h2>Tool calls</h2>
          <ToolCalls runId={runId} calls={calls} graph={data.graph} values={values} />
          <h2>Decisions</h2>
          {decisions.length === 0 ? (
            <p class="muted">No approval was decided on the device.</p>
          ) : (
            <DecisionList decisions={decisions} label="Decisions taken on the device" />
          )}
        </>
      ) : j.error ? null : (
        <p role="status">Loading…</p>
      )}
    </>
  );
}
