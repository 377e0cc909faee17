/**
 * `/mcp` at the edge (docs/edge.md, "MCP at the edge"): the same endpoint as
 * the cell's (runtime/mcp/endpoint.ts: Streamable HTTP, sessions bound to
 * their caller, progress, the Origin check), for the crew of the device's
 * crew bundle, so an MCP client on an air-gapped device runs it there.
 * Credentials are judged offline against the key bundle by the edge's
 * gateway, as for the routes.
 *
 * Tools, by the permissions of the routes they stand for: `crew_<crew_id>`
 * (agent_teams.write: the run route's), taking `input` (any JSON: a crew
 * bundle carries no input schema); `run_status` (agent_teams.read or
 * system.orchestration.admin.read) and `journal_verify`
 * (system.orchestration.admin.read) for this device's runs. A call starts
 * the run as the route does, follows its journal (records and model
 * fragments as progress), and answers its output with a receipt signed by
 * the device key (the key of its journals; `GET /.well-known/cell-keys.json`
 * publishes it). A run that waits on an approval ends the call `waiting`
 * (approvers decide it at the approval route, edge/approvals.ts). A client's cancel stops the call and cancels the run (the
 * cancel route's function: the run ends `cancelled` before its next call).
 */
import type { Hono, MiddlewareHandler } from 'hono';
import { grants } from '../core/authority/scopes.ts';
import { notFound, ServiceError } from '../core/errors.ts';
import { recordHash } from '../core/journal/hash.ts';
import type { JournalRecord } from '../core/journal/record.ts';
import { verifyJournal } from '../core/journal/verify.ts';
import { PERMISSIONS } from '../core/permissions.ts';
import { outputHash } from '../core/mcp-receipts/format.ts';
import { signReceipt } from '../core/mcp-receipts/sign.ts';
import { RUN_ID_PATTERN } from '../core/run-id.ts';
import { McpEndpoint } from '../runtime/mcp/endpoint.ts';
import { RUN_RESULT_SCHEMA, invalidArguments, refusalResult, structuredResult, unknownTool } from '../runtime/mcp/results.ts';
import type { CallToolResult, Tool, ToolCallContext } from '../runtime/mcp/types.ts';
import type { EdgeAuth } from './decide.ts';
import { edgeLog, ownRequestUri, type EdgeEnv, type EdgeRuntime } from './gateway.ts';
import type { OfflineRuns } from './offline.ts';
import type { RunFile } from './runs.ts';

const FAILED = new Set(['failed', 'refused', 'cancelled']);
const RUN_ID_INPUT = {
  type: 'object' as const,
  properties: { run_id: { type: 'string', maxLength: 100 } },
  required: ['run_id'],
  additionalProperties: false,
};

/** Mounts `/mcp` (behind the edge's gates) and the device key's publication. */
export function mountMcp(
  app: Hono<EdgeEnv>,
  guard: (p: string | null) => MiddlewareHandler<EdgeEnv>,
  rt: EdgeRuntime,
  runs: OfflineRuns,
  publicJwk: JsonWebKey,
): McpEndpoint<EdgeAuth> {
  const endpoint = new McpEndpoint<EdgeAuth>(
    {
      serverInfo: { name: 'agent-cell-edge', title: `agent-cell edge ${rt.deviceId}`, version: '0.1.0' },
      instructions:
        "crew_* runs this device's crew offline as you; results carry a receipt signed with the device key (GET /.well-known/cell-keys.json). run_status follows a run, journal_verify checks its journal.",
      log: edgeLog(rt),
      binding: (a) => `${a.owner_id} ${a.credential.client_id ?? ''}`,
      listTools: async (a) => toolsFor(runs, a),
      callTool: (a, name, args, call) => callTool(rt, runs, publicJwk, a, name, args, call),
    },
    {
      // The device's own origin as the request reached it (scheme of the connection and its Host).
      origins: (req) => {
        const u = URL.parse(req.url);
        return u ? [u.origin] : [];
      },
      now: () => rt.clock.now(),
    },
  );
  app.get('/.well-known/cell-keys.json', (c) =>
    c.json({ cell_id: rt.deviceId, keys: [{ cell_id: rt.deviceId, kid: runs.signer.kid, jwk: publicJwk, retired_at: null }] }, 200, {
      'Cache-Control': 'max-age=60',
    }),
  );
  app.on(['POST', 'GET', 'DELETE'], '/mcp', guard(null), async (c) => {
    const body = c.req.method === 'POST' ? await c.req.text() : undefined;
    // The URL the origin check compares with is the request's own (never an absolute-form target).
    const req = new Request(ownRequestUri(c), { method: c.req.method, headers: c.req.raw.headers, signal: c.req.raw.signal });
    return endpoint.handle(req, c.get('auth'), body);
  });
  return endpoint;
}

function toolsFor(runs: OfflineRuns, a: EdgeAuth): Tool[] {
  const tools: Tool[] = [];
  const crew = runs.crew?.crew;
  if (crew && grants(a.effective, PERMISSIONS.teamsWrite)) {
    const formation = (crew.compiler_input.formation as { name?: string } | null)?.name ?? crew.name;
    tools.push({
      name: `crew_${crew.crew_id}`,
      title: crew.name,
      description: `${formation}: runs the crew ${crew.name} offline on this device as you; answers the output with a receipt signed by the device key.`,
      inputSchema: {
        type: 'object',
        properties: { input: { description: 'The input of the run (any JSON)' } },
        additionalProperties: false,
      },
      outputSchema: RUN_RESULT_SCHEMA as unknown as Tool['outputSchema'],
      annotations: { title: crew.name, readOnlyHint: false, destructiveHint: false, openWorldHint: false },
    });
  }
  if (grants(a.effective, PERMISSIONS.teamsRead) || grants(a.effective, PERMISSIONS.jobsRead)) {
    tools.push({
      name: 'run_status',
      title: 'Run status',
      description: "A run's state and output, with a receipt signed by the device key over its journal's head now.",
      inputSchema: RUN_ID_INPUT,
      outputSchema: RUN_RESULT_SCHEMA as unknown as Tool['outputSchema'],
      annotations: { readOnlyHint: true },
    });
  }
  if (grants(a.effective, PERMISSIONS.jobsRead)) {
    tools.push({
      name: 'journal_verify',
      title: 'Verify a journal',
      description: "Verifies a run's journal against the device key.",
      inputSchema: RUN_ID_INPUT,
      annotations: { readOnlyHint: true },
    });
  }
  return tools;
}

const lacks = (permission: string) =>
  new ServiceError('forbidden', `the credential lacks the permission ${permission}`, { details: { required_permission: permission } });

async function callTool(
  rt: EdgeRuntime,
  runs: OfflineRuns,
  publicJwk: JsonWebKey,
  a: EdgeAuth,
  name: string,
  args: Record<string, unknown>,
  call: ToolCallContext,
): Promise<CallToolResult> {
  try {
    if (name.startsWith('crew_') && name === `crew_${runs.crew?.crew.crew_id}`) {
      if (!grants(a.effective, PERMISSIONS.teamsWrite)) throw lacks(PERMISSIONS.teamsWrite);
      const run = await runs.start(name.slice(5), a.owner_id, args['input'] ?? null, a.actors);
      try {
        return await answer(rt, runs, await follow(runs, run.run_id, call));
      } catch (e) {
        // The client cancelled the call: the run is cancelled too, as the requester would with the route.
        if (call.signal.aborted) runs.cancel(run.run_id, a.owner_id);
        throw e;
      }
    }
    if (name === 'run_status' || name === 'journal_verify') {
      const id = args['run_id'];
      if (typeof id !== 'string') throw invalidArguments('run_id is required', ['input.run_id: required']);
      if (name === 'run_status' && !grants(a.effective, PERMISSIONS.teamsRead) && !grants(a.effective, PERMISSIONS.jobsRead))
        throw lacks(PERMISSIONS.teamsRead);
      if (name === 'journal_verify' && !grants(a.effective, PERMISSIONS.jobsRead)) throw lacks(PERMISSIONS.jobsRead);
      const r = RUN_ID_PATTERN.test(id) ? runs.read(id) : null;
      if (!r) throw notFound('run');
      if (name === 'run_status') return await answer(rt, runs, { run: r.run, head: r.journal.records.at(-1) });
      const v = await verifyJournal(r.journal.records, (kid) => (kid === runs.signer.kid ? publicJwk : undefined));
      const head = r.journal.records.at(-1);
      return structuredResult({
        run_id: id,
        ok: v.ok,
        records: r.journal.records.length,
        journal_seq: head?.seq ?? null,
        journal_head: head ? recordHash(head) : null,
        problem: v.ok ? null : { seq: v.seq, reason: v.reason },
      });
    }
  } catch (e) {
    if (call.signal.aborted) throw e;
    return refusalResult(e);
  }
  throw unknownTool(name);
}

/** Follows the run until its drive ends: each record and model fragment is a progress notification. */
async function follow(runs: OfflineRuns, runId: string, call: ToolCallContext): Promise<{ run: RunFile; head: JournalRecord | undefined }> {
  let head: JournalRecord | undefined;
  await new Promise<void>((resolve, reject) => {
    const unwatch = runs.streams.watch(runId, {
      record(rec) {
        head = rec;
        void call.progress(`${rec.kind} ${rec.step_id}`).catch(() => undefined);
      },
      delta(d) {
        if (d.text) void call.progress(d.text).catch(() => undefined);
      },
      end() {
        call.signal.removeEventListener('abort', onAbort);
        resolve();
      },
    });
    const onAbort = () => {
      unwatch?.();
      reject(new Error('the call was cancelled'));
    };
    call.signal.addEventListener('abort', onAbort, { once: true });
    if (unwatch === undefined) resolve(); // the drive ended before it could be watched: read it from disk
  });
  const r = runs.read(runId);
  if (!r) throw notFound('run');
  return { run: r.run, head: head ?? r.journal.records.at(-1) };
}

/** A run's answer: its state, output or reason, and the receipt the device signs over its journal's head. */
async function answer(rt: EdgeRuntime, runs: OfflineRuns, f: { run: RunFile; head: JournalRecord | undefined }): Promise<CallToolResult> {
  const { run, head } = f;
  const output = run.state === 'completed' ? (run.output ?? null) : null;
  const receipt = head
    ? await signReceipt(
        {
          run_id: run.run_id,
          graph_hash: head.graph_hash,
          journal_seq: head.seq,
          journal_head: recordHash(head),
          state: run.state,
          output_hash: outputHash(output),
          issuer: rt.deviceId,
          issued_at: rt.clock.now(),
        },
        runs.signer,
      )
    : null;
  return structuredResult(
    {
      run_id: run.run_id,
      state: run.state,
      output,
      error: run.reason ? { code: run.state, reason: run.reason } : null,
      ...(receipt ? { receipt } : {}),
    },
    FAILED.has(run.state),
  );
}
