/**
 * Offline crews at the edge: the crew bundle (verified against the pinned
 * cell, addressed to this device, graph hash rechecked), the local signed
 * model it names, and the run routes, with the same paths and permissions as
 * the cell:
 *   POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs         agent_teams.write
 *   GET  /api/public/v1/admin/agent-teams/crews/{crew_id}/runs         agent_teams.read (the cell's list shape)
 *   GET  /api/public/v1/admin/agent-teams/runs?state=waiting            agent_teams.read (what waits for a decision)
 *   GET  /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id} agent_teams.read
 *   POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/cancel agent_teams.write (its requester only)
 *   POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/approvals/{step_id} agent_teams.approve (edge/approvals.ts)
 *   POST /api/public/v1/admin/agent-teams/crews/{crew_id}/runs/{run_id}/outcomes/{step_id} agent_teams.write (edge/outcomes.ts)
 *   GET  /api/public/v1/admin/jobs/runs/{run_id}/journal                system.orchestration.admin.read
 *   GET  /api/public/v1/admin/jobs/runs/{run_id}/events/sse             system.orchestration.admin.read (run-events.ts)
 * A run executes on core's engine (runGraph) with the local model, the
 * device's budget ledgers, its approvals port (edge/approvals.ts) and a
 * journal signed by the device key. Everything that writes a run's journal (a
 * drive, a decision) runs one at a time per run, each from the journal on disk.
 */
import type { Context, Hono, MiddlewareHandler } from 'hono';
import { notFound, invalid, ServiceError } from '../core/errors.ts';
import { isoTime } from '../core/iso-time.ts';
import { contentHash } from '../core/canonical.ts';
import { PERMISSIONS } from '../core/permissions.ts';
import { runGraph } from '../core/engine/run.ts';
import type { EnginePorts, Graph, ModelPort } from '../core/engine/types.ts';
import { memoryJournal } from '../core/journal/memory.ts';
import type { JournalKind } from '../core/journal/record.ts';
import { joinStates, type DeviceState } from '../bundles/accept.ts';
import type { CrewBundle } from '../bundles/crew-bundle.ts';
import type { OpenedEnvelope } from '../bundles/envelope.ts';
import { signerFromJwk, type Signer } from '../bundles/codec.ts';
import type { EdgeClock } from './clock.ts';
import { EdgeSetupError, takeLegacySpending, updateState, type DeviceFile, type TrustFile } from './files.ts';
import { edgeLog, type EdgeEnv, type EdgeRuntime } from './gateway.ts';
import { loadCrewBundle } from './load.ts';
import { loadLocalSignedModel, type LocalModel } from '../runtime/local-model.ts';
import { stepDeadline } from '../runtime/step-deadline.ts';
import { malformedRequest } from '../runtime/gateway.ts';
import { newEdgeRun } from '../bundles/run-id.ts';
import { mountRunEvents, RunStreams } from './run-events.ts';
import { deviceBudget, deviceRuns, interruptedRuns, readRun, writeJournal, writeRun, type JournalFile, type RunFile } from './runs.ts';
import { appendRunHead } from './run-log.ts';
import { runListQuery } from './run-list.ts';
import { approvalsView, decisionBody, deviceApprovalsPort, judgeDecision, type EdgeDecider } from './approvals.ts';
import { deviceToolsPort, KvNotSealed, readKv, unhonouredTools } from './tools.ts';
import { deviceOutcomesPort, judgeResolution, resolutionBody, unknownOutcomeView } from './outcomes.ts';
import { deviceMcpTools, type DeviceMcpTools } from './mcp-tools.ts';
import type { StdioSourceConfig } from '../runtime/mcp-client/config.ts';

const TERMINAL: readonly RunFile['state'][] = ['completed', 'failed', 'refused', 'cancelled'];

export interface OfflineSetup {
  state: DeviceState;
  info: Record<string, unknown>;
  crew: OpenedEnvelope<CrewBundle> | null;
  model: LocalModel | null;
  dir: string;
  device: DeviceFile;
  clock: EdgeClock;
  /** Non-public ranges the device's HTTP tools may reach (`--egress-allow-private`; none by default). */
  egressAllowPrivate: readonly string[];
  /** The stdio MCP servers the device's operator names (`--tool-sources`; none by default). */
  toolSources: readonly StdioSourceConfig[];
}

export async function prepareOffline(opts: {
  dir: string;
  device: DeviceFile;
  trust: TrustFile;
  state: DeviceState;
  clock: EdgeClock;
  crewBundle: string | undefined;
  /** The largest crew bundle file read (`--max-bundle-bytes`; default runtime/read-artifact.ts MAX_BUNDLE_BYTES). */
  maxBundleBytes?: number;
  model: string | undefined;
  modelManifest: string | undefined;
  egressAllowPrivate?: readonly string[];
  toolSources?: readonly StdioSourceConfig[];
}): Promise<OfflineSetup> {
  let state = opts.state;
  let crew: OpenedEnvelope<CrewBundle> | null = null;
  if (opts.crewBundle) {
    const loaded = await loadCrewBundle(opts.crewBundle, opts.trust, state, opts.clock.now(), opts.maxBundleBytes);
    crew = loaded.crew;
    state = loaded.state;
  }
  if ((opts.model === undefined) !== (opts.modelManifest === undefined))
    throw new EdgeSetupError('--model and --model-manifest go together');
  let model: LocalModel | null = null;
  const ref = crew?.payload.model ?? null;
  if (opts.model && opts.modelManifest) {
    model = await loadLocalSignedModel({
      modelPath: opts.model,
      manifestPath: opts.modelManifest,
      publishers: opts.trust.publishers,
      expect: ref,
      // The private copy the model loads from lives in the device's own directory (it needs the model's size).
      scratchDir: opts.dir,
    });
  }
  return {
    state,
    crew,
    model,
    dir: opts.dir,
    device: opts.device,
    clock: opts.clock,
    egressAllowPrivate: opts.egressAllowPrivate ?? [],
    toolSources: opts.toolSources ?? [],
    info: {
      crew: crew ? { crew_id: crew.payload.crew.crew_id, version: crew.payload.version, graph_hash: crew.payload.crew.graph_hash } : null,
      model: model ? { name: model.manifest.model.name, sha256: model.manifest.model.sha256, publisher_kid: model.publisherKid } : null,
    },
  };
}

/**
 * Test hook (end-to-end tests of the retry policy on the real program): the first N local model calls of
 * this process fail as a provider error would. Unset in production.
 */
export const TEST_FAIL_MODEL_CALLS_ENV = 'AGENT_CELL_EDGE_TEST_FAIL_MODEL_CALLS';

/**
 * The engine's model port over the local model, greedy, exact token usage: a step offered tools is a chat
 * turn with node-llama-cpp's function calling (its calls grammar-constrained, a forced tool_choice honoured:
 * runtime/local-chat.ts); one without, the chat flattened to a prompt.
 * A step's `timeout_ms` stops the generation (before its next token; a call still queued is not started)
 * and fails the step `step_timeout`, as the cell's port cancels a provider call.
 */
function localModelPort(model: LocalModel | null): (runId: string) => ModelPort {
  let failures = Number(process.env[TEST_FAIL_MODEL_CALLS_ENV] ?? 0) || 0;
  // One port a run: the run's calls reuse what the model evaluated of their shared prompt start (runtime/local-model.ts).
  return (runId) => ({
    async complete(req, opts) {
      if (!model) throw new ServiceError('forbidden', 'no local model is loaded on this device', { details: { reason: 'no_local_model' } });
      if (failures > 0) {
        failures--;
        throw new Error('the local model call failed (test hook)');
      }
      const onDelta = opts?.onDelta;
      const deadline = stepDeadline(req.timeout_ms);
      // Offered tools: node-llama-cpp's function calling, grammar-constrained (runtime/local-chat.ts).
      if (req.tools.length > 0 && req.tool_choice !== 'none') {
        const a = await deadline.race(
          model.chat(
            { messages: req.messages, tools: req.tools, toolChoice: req.tool_choice, maxTokens: req.max_tokens, partition: runId },
            onDelta,
            deadline.signal,
          ),
        );
        return {
          content: a.text,
          ...(a.toolCalls.length > 0 ? { tool_calls: a.toolCalls } : {}),
          usage: { input_tokens: a.inputTokens, output_tokens: a.outputTokens },
        };
      }
      const prompt = req.messages.map((m) => `${m.role}: ${m.content}`).join('\n') + '\nassistant:';
      const r = await deadline.race(
        model.complete(prompt, req.max_tokens, onDelta ? (text) => onDelta({ text }) : undefined, deadline.signal, runId),
      );
      return { content: r.text, usage: { input_tokens: r.inputTokens, output_tokens: r.outputTokens } };
    },
  });
}

export function mountOffline(
  app: Hono<EdgeEnv>,
  guard: (p: string) => MiddlewareHandler<EdgeEnv>,
  rt: EdgeRuntime,
  setup: OfflineSetup,
): OfflineRuns {
  const crew = setup.crew?.payload.crew ?? null;
  // What the agents spend is kept in the sealed state (edge/files.ts), written with each model call's commit.
  rt.state = takeLegacySpending(setup.dir, rt.state, setup.device);
  const budget = deviceBudget(crew?.budgets ?? {}, {
    of: (agent) => rt.state.spent?.[agent] ?? 0,
    add(agent, tokens) {
      // Added to the file's figure under the state lock, not to this process's copy (edge/files.ts updateState).
      const next = updateState(setup.dir, setup.device, (current) => {
        const s = current === null ? rt.state : joinStates(current, rt.state);
        const spent = s.spent ?? {};
        return { ...s, spent: { ...spent, [agent]: (spent[agent] ?? 0) + tokens } };
      });
      rt.state = joinStates(rt.state, next);
    },
  });
  const signer = signerFromJwk(setup.device.device_id, setup.device.private_jwk);
  const modelPort = localModelPort(setup.model);
  const workspaceId = crew?.workspace_id ?? null;
  // The bundle's MCP tools on the device's stdio servers (edge/mcp-tools.ts), started now.
  const imported = deviceMcpTools({ sources: setup.toolSources, tools: crew?.mcp_tools ?? [], clock: rt.clock, log: edgeLog(rt) });
  if (crew?.mcp_tools !== undefined) imported.warm();
  const deviceTools = deviceToolsPort(setup.dir, setup.device, rt.clock, workspaceId, setup.egressAllowPrivate, imported);
  // A kv file the device did not seal fails every kv call (edge/tools.ts): said once at the start, with what to do.
  try {
    if (workspaceId !== null) readKv(setup.dir, setup.device);
  } catch (e) {
    if (e instanceof KvNotSealed) edgeLog(rt).warn('kv calls will fail', { reason: e.message });
    else throw e;
  }
  const unhonoured = crew ? unhonouredTools(crew.graph as Graph, workspaceId, imported) : [];
  const P = '/api/public/v1/admin/agent-teams/crews/:crew_id/runs';
  const streams = new RunStreams();
  mountRunEvents(app, guard, streams, (id) => readRun(setup.dir, id)?.journal.records);
  /** The runs being driven now, by id: a cancel marks the object the drive holds, so its last write keeps the mark. */
  const driving = new Map<string, RunFile>();
  /** Per run, the tail of its journal writers (drives and decisions): each starts when the one before has ended. */
  const writers = new Map<string, Promise<void>>();
  function serial<T>(runId: string, fn: () => Promise<T>): Promise<T> {
    const p = (writers.get(runId) ?? Promise.resolve()).then(fn);
    const tail = p.then(
      () => undefined,
      () => undefined,
    );
    writers.set(runId, tail);
    void tail.then(() => {
      if (writers.get(runId) === tail) writers.delete(runId);
    });
    return p;
  }

  /** Drives a waiting run again at its wake-up time (a retry's backoff, a timer stage), from its journal. */
  function wakeAt(runId: string, at: number | null): void {
    if (at === null) return;
    const timer = setTimeout(
      () => {
        const r = readRun(setup.dir, runId);
        if (r?.run.state === 'waiting') void drive(r.run);
      },
      Math.min(Math.max(0, at - rt.clock.now()), 2 ** 31 - 1),
    );
    timer.unref();
  }

  /**
   * Drives a run after its earlier writers, from its journal on disk (a decision recorded meanwhile is in it);
   * a run that ended meanwhile is left as it is. `run` carries what the caller changed (a cancel's mark).
   */
  function drive(run: RunFile): Promise<void> {
    return serial(run.run_id, async () => {
      const cur = readRun(setup.dir, run.run_id);
      if (cur === null || TERMINAL.includes(cur.run.state)) return;
      const live = run.cancel_requested_by !== undefined ? { ...cur.run, cancel_requested_by: run.cancel_requested_by } : cur.run;
      await driveNow(live, cur.journal.records.length > 0 ? cur.journal : undefined);
    });
  }

  async function driveNow(run: RunFile, existing?: JournalFile): Promise<void> {
    driving.set(run.run_id, run);
    if (run.state === 'waiting') {
      run.state = 'running';
      writeRun(setup.dir, run);
    }
    // Recovery: an interrupted run continues from its journal; recorded steps are reused, never re-run.
    const journal = memoryJournal(
      run.run_id,
      signer,
      existing ? { records: existing.records, blobs: new Map(Object.entries(existing.values)) } : undefined,
    );
    const persist = () => writeJournal(setup.dir, run.run_id, { records: journal.records, values: Object.fromEntries(journal.blobs) });
    streams.begin(run.run_id, journal.records);
    const ports: EnginePorts = {
      model: modelPort(run.run_id),
      delta: (d) => streams.delta(run.run_id, d),
      budget,
      // The device's catalog (edge/tools.ts), judged from the bundle's seats as at the cell.
      tools: deviceTools,
      // Human approvals wait offline: requests on disk, decisions in this journal (edge/approvals.ts).
      approvals: deviceApprovalsPort(
        setup.dir,
        run.run_id,
        () => journal.records,
        () => rt.clock.now(),
      ),
      contracts: { get: async (id) => crew!.contracts.find((k) => k.id === id) },
      clock: rt.clock,
      // A cancel asked for (by the route or a client of /mcp) stops the run before its next call; a local
      // generation in flight runs to its end (bounded by the step's max_tokens and timeout_ms).
      isCancelled: () => run.cancel_requested_by !== undefined,
      journal: {
        append: async (fields, payload) => {
          await journal.port.append(fields, payload);
          persist();
          const rec = journal.records.at(-1);
          if (rec !== undefined) streams.record(run.run_id, rec);
        },
      },
      recorded: journal.recorded,
      // Each call's intent is journaled before it leaves: after a crash, a side-effecting call found in flight
      // is issued again only when idempotent, else the run waits outcome_unknown (the crash rule, as at the cell).
      intents: journal.intents,
      // A retry's backoff resumes at its recorded due time on a later drive (docs/engine.md, "Step policies").
      attempts: journal.attempts,
      // An operator's resolution of a lost outcome, read from this journal (edge/outcomes.ts).
      outcomes: deviceOutcomesPort(() => ({ records: journal.records, values: Object.fromEntries(journal.blobs) })),
    };
    let waitingUntil: number | null = null;
    try {
      const r = await runGraph(crew!.graph as Graph, run.input, ports, {
        run_id: run.run_id,
        graph_hash: crew!.graph_hash,
        requester: run.requester,
        ...(run.requester_actors !== undefined ? { requester_actors: run.requester_actors } : {}),
      });
      waitingUntil = r.waiting?.wake_at ?? null;
      Object.assign(run, {
        state: r.outcome,
        output: r.output ?? null,
        reason: r.reason ?? null,
        steps: r.steps,
        updated_at: rt.clock.now(),
      });
    } catch (e) {
      edgeLog(rt).error('run failed', { run_id: run.run_id, error: e });
      Object.assign(run, { state: 'failed', reason: 'engine_error', updated_at: rt.clock.now() });
    }
    persist();
    driving.delete(run.run_id);
    writeRun(setup.dir, run);
    // A finished run's head joins the device's own run log (edge/run-log.ts), before anyone can export it.
    if (TERMINAL.includes(run.state) && journal.records.length > 0) {
      appendRunHead(setup.dir, setup.device.device_id, run.run_id, journal.records, run.graph_hash);
    }
    streams.end(run.run_id);
    // A run waiting on a due time (a retry's backoff, a timer) goes on by itself when it is due; the wait is
    // in its journal, so a restart of the device resumes it rather than starting it again.
    if ((run.state as RunFile['state']) === 'waiting') wakeAt(run.run_id, waitingUntil);
  }

  // Runs interrupted by a crash or a stop of this device continue now, from their journals (a waiting run
  // is driven again: the engine finds its due time in the journal and waits for what is left of it).
  if (crew) {
    for (const id of interruptedRuns(setup.dir)) {
      const r = readRun(setup.dir, id);
      if (!r || r.run.crew_id !== crew.crew_id) continue;
      if (r.run.graph_hash !== crew.graph_hash) {
        // The crew changed since the run started: refused, as the cell refuses a resumed run (graph-hash enforcement).
        writeRun(setup.dir, { ...r.run, state: 'refused', reason: 'graph_changed', updated_at: rt.clock.now() });
        continue;
      }
      void drive(r.run);
    }
  }

  /** Refuses a run of `crewId` that cannot start now: not the bundle's crew, the bundle expired, tools this device cannot honour. */
  function assertStartable(crewId: string): void {
    if (!crew || crew.crew_id !== crewId) throw notFound('crew');
    const expiresAt = setup.crew!.payload.expires_at;
    if (expiresAt !== null && rt.clock.now() >= expiresAt) {
      throw new ServiceError('forbidden', 'the crew bundle on this device has expired', {
        details: { reason: 'expired', expires_at: isoTime(expiresAt) },
      });
    }
    // A crew whose tools the device cannot honour is refused before a run starts, naming them.
    if (unhonoured.length > 0) {
      throw new ServiceError('conflict', `this device cannot honour the crew's tools: ${unhonoured.map((u) => u.tool).join(', ')}`, {
        details: { reason: 'device_tools_unavailable', tools: unhonoured.map((u) => ({ ...u })) },
      });
    }
  }

  /** Starts an offline run of the bundle's crew for `requester` (the POST route and the MCP endpoint). */
  async function start(crewId: string, requester: string, input: unknown, actors?: readonly string[]): Promise<RunFile> {
    assertStartable(crewId);
    await assertImportedHonoured(crew!.graph as Graph, imported);
    const now = rt.clock.now();
    // The run id is derived from this device's id and a fresh nonce: the cell imports it from this device only.
    const ids = await newEdgeRun(setup.device.device_id);
    const run: RunFile = {
      run_id: ids.run_id,
      run_nonce: ids.run_nonce,
      crew_id: crew!.crew_id,
      graph_hash: crew!.graph_hash,
      requester,
      ...(actors !== undefined && actors.length > 0 ? { requester_actors: [...actors] } : {}),
      input,
      state: 'running',
      output: null,
      reason: null,
      steps: 0,
      created_at: now,
      updated_at: now,
    };
    writeRun(setup.dir, run);
    void drive(run);
    return run;
  }

  app.post(P, guard(PERMISSIONS.teamsWrite), async (c) => {
    assertStartable(c.req.param('crew_id'));
    let body: { input?: unknown } = {};
    const raw = await c.req.text();
    if (raw.trim() !== '') {
      try {
        body = JSON.parse(raw) as { input?: unknown };
      } catch {
        throw malformedRequest('malformed JSON body');
      }
      if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('the body must be an object');
    }
    const auth = c.get('auth');
    const run = await start(c.req.param('crew_id'), auth.owner_id, body.input ?? null, auth.actors);
    return c.json({ run_id: run.run_id, crew_id: run.crew_id, state: run.state, graph_hash: run.graph_hash }, 202);
  });

  /**
   * Cancels a run for `caller`: only its requester may (the device cannot judge offline whether a caller
   * manages another principal, so it refuses as the cell refuses a caller without that reach). A run being
   * driven stops before its next call; a waiting run is driven again to record its end; an ended run is
   * answered as it is.
   */
  function cancel(crewId: string, runId: string, caller: string): RunFile {
    const r = readRun(setup.dir, runId);
    if (!r || r.run.crew_id !== crewId) throw notFound('run');
    if (r.run.requester !== caller) {
      throw new ServiceError('forbidden', "crew.run.cancel: the run is another principal's; only its requester cancels it on a device", {
        details: { reason: 'shared_change_exceeds_caller' },
      });
    }
    if (TERMINAL.includes(r.run.state)) return r.run;
    const live = driving.get(runId);
    if (live !== undefined) {
      live.cancel_requested_by ??= caller;
      writeRun(setup.dir, live);
      return live;
    }
    const run: RunFile = { ...r.run, cancel_requested_by: caller, updated_at: rt.clock.now() };
    writeRun(setup.dir, run);
    void drive(run);
    return run;
  }

  app.post(`${P}/:run_id/cancel`, guard(PERMISSIONS.teamsWrite), (c) => {
    const run = cancel(c.req.param('crew_id'), c.req.param('run_id'), c.get('auth').owner_id);
    // 200 with the run after the cancel, as the cell answers (a driven run ends `cancelled` at its next call).
    return c.json(
      { run_id: run.run_id, crew_id: run.crew_id, state: run.state, cancel_requested: run.cancel_requested_by !== undefined },
      200,
    );
  });

  /** A run as the routes answer it: times as the cell answers them (ISO 8601 UTC), its approvals in the cell's shape. */
  function runView(r: { run: RunFile; journal: JournalFile }) {
    return {
      ...r.run,
      created_at: isoTime(r.run.created_at),
      updated_at: isoTime(r.run.updated_at),
      journal_records: r.journal.records.length,
      ...approvalsView(setup.dir, r.run, r.journal),
      unknown_outcome: unknownOutcomeView(r.run, r.journal),
    };
  }

  /**
   * The device's runs in the cell's list shape (`{runs, limit, offset, total}`, oldest first), each the run view
   * with its `pending_approvals`: `state=waiting` is what waits for a decision. The cell's query (`state`,
   * `crew_id`, `limit` 1..1000 default 100, `offset`); a value the cell would refuse is 400 as there.
   */
  function listRuns(c: Context<EdgeEnv>, crewId: string | undefined) {
    const q = runListQuery(c.req.query());
    const all = deviceRuns(setup.dir).filter(
      (r) => (q.state === undefined || r.run.state === q.state) && (crewId === undefined || r.run.crew_id === crewId),
    );
    return c.json({ runs: all.slice(q.offset, q.offset + q.limit).map(runView), limit: q.limit, offset: q.offset, total: all.length }, 200);
  }

  app.get(P, guard(PERMISSIONS.teamsRead), (c) => {
    if (c.req.param('crew_id') !== crew?.crew_id) throw notFound('crew');
    return listRuns(c, c.req.param('crew_id'));
  });
  app.get('/api/public/v1/admin/agent-teams/runs', guard(PERMISSIONS.teamsRead), (c) => listRuns(c, c.req.query('crew_id')));

  app.get(`${P}/:run_id`, guard(PERMISSIONS.teamsRead), (c) => {
    const r = readRun(setup.dir, c.req.param('run_id'));
    if (!r || r.run.crew_id !== c.req.param('crew_id')) throw notFound('run');
    return c.json(runView(r));
  });

  /**
   * Records a decision on a waiting step, judged as the cell's approval route judges it (edge/approvals.ts):
   * an `approval_received` record in the run's journal, signed by the device key, naming the approver, its
   * chain, the digest it approved and the key bundle it was judged with. Then the waiting run is driven again.
   */
  function decide(crewId: string, runId: string, stepId: string, decider: EdgeDecider, body: ReturnType<typeof decisionBody>) {
    return serial(runId, async () => {
      const r = readRun(setup.dir, runId);
      if (!r || r.run.crew_id !== crewId) throw notFound('run');
      const fields = judgeDecision(setup.dir, r.run, r.journal, stepId, decider, body.decision, body.comment, rt.keys?.version ?? null);
      const journal = memoryJournal(runId, signer, { records: r.journal.records, blobs: new Map(Object.entries(r.journal.values)) });
      // Not a kind the engine writes (the port's type names those): the cell appends it beside them too.
      await journal.port.append({ ...fields, kind: fields.kind as JournalKind, at: rt.clock.now() }, { input: null, output: null });
      writeJournal(setup.dir, runId, { records: journal.records, values: Object.fromEntries(journal.blobs) });
      return r.run;
    });
  }

  app.post(`${P}/:run_id/approvals/:step_id`, guard(PERMISSIONS.teamsApprove), async (c) => {
    const decision = decisionBody(await jsonBody(c));
    const auth = c.get('auth');
    const runId = c.req.param('run_id');
    const run = await decide(
      c.req.param('crew_id'),
      runId,
      c.req.param('step_id'),
      { principal: auth.owner_id, actors: auth.actors },
      decision,
    );
    if (run.state === 'waiting') void drive(run);
    return c.json(runView(readRun(setup.dir, runId)!), 200);
  });

  // A lost outcome resolved as at the cell (edge/outcomes.ts): an `outcome_resolved` record signed by the device,
  // appended after the run's earlier writers; then the run is driven again and the engine follows it.
  app.post(`${P}/:run_id/outcomes/:step_id`, guard(PERMISSIONS.teamsWrite), async (c) => {
    const ask = resolutionBody(await jsonBody(c));
    const runId = c.req.param('run_id');
    const run = await serial(runId, async () => {
      const r = readRun(setup.dir, runId);
      if (!r || r.run.crew_id !== c.req.param('crew_id')) throw notFound('run');
      const rec = judgeResolution(r.run, r.journal, c.req.param('step_id'), c.get('auth').owner_id, ask, rt.keys?.version ?? null);
      const journal = memoryJournal(runId, signer, { records: r.journal.records, blobs: new Map(Object.entries(r.journal.values)) });
      await journal.port.append(
        {
          ...rec.fields,
          kind: rec.fields.kind as JournalKind,
          graph_hash: r.run.graph_hash,
          input_hash: contentHash(null),
          at: rt.clock.now(),
        },
        { input: null, output: rec.value },
      );
      writeJournal(setup.dir, runId, { records: journal.records, values: Object.fromEntries(journal.blobs) });
      return r.run;
    });
    void drive(run);
    return c.json(runView(readRun(setup.dir, runId)!), 200);
  });

  app.get('/api/public/v1/admin/jobs/runs/:run_id/journal', guard(PERMISSIONS.jobsRead), (c) => {
    const r = readRun(setup.dir, c.req.param('run_id'));
    if (!r) throw notFound('run');
    return c.json({ run_id: r.run.run_id, records: r.journal.records });
  });

  return {
    crew: setup.crew?.payload ?? null,
    signer,
    start,
    cancel: (runId, caller) => cancel(crew?.crew_id ?? '', runId, caller),
    read: (runId) => readRun(setup.dir, runId),
    streams,
    close: async () => {
      await Promise.all([imported.close(), deviceTools.close()]);
    },
  };
}

/** A request's JSON body (400 `malformed JSON body` when it does not parse). */
async function jsonBody(c: Context<EdgeEnv>): Promise<unknown> {
  try {
    return JSON.parse(await c.req.text()) as unknown;
  } catch {
    throw malformedRequest('malformed JSON body');
  }
}

/**
 * Refuses a run whose imported tools the device cannot honour now (a source not configured, a server whose
 * definition does not hash to the bundle's pin: edge/mcp-tools.ts), 409 `device_tools_unavailable`, naming them.
 */
async function assertImportedHonoured(graph: Graph, imported: DeviceMcpTools): Promise<void> {
  const u = await imported.unhonoured(graph);
  if (u.length === 0) return;
  throw new ServiceError('conflict', `this device cannot honour the crew's tools: ${u.map((x) => x.tool).join(', ')}`, {
    details: { reason: 'device_tools_unavailable', tools: u.map((x) => ({ ...x })) },
  });
}

/** The device's offline runs as the MCP endpoint (edge/mcp.ts) drives them: the same start, journal and events as the routes. */
export interface OfflineRuns {
  /** The crew bundle's payload, or null without one. */
  crew: CrewBundle | null;
  /** The device key: it signs the journals, and the MCP receipts. */
  signer: Signer;
  start(crewId: string, requester: string, input: unknown, actors?: readonly string[]): Promise<RunFile>;
  /** Cancels a run of the bundle's crew for `caller` (its requester only), as the cancel route does. */
  cancel(runId: string, caller: string): RunFile;
  read(runId: string): { run: RunFile; journal: JournalFile } | null;
  streams: RunStreams;
  /** Stops the stdio MCP servers the device started and closes the HTTP tools' connections. */
  close(): Promise<void>;
}
