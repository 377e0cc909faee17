/**
 * `make demo`: the whole story against the real programs, one numbered step
 * at a time, printing what was sent and what came back.
 *
 *   1. a real cell (dist/cell.mjs) on a temp data directory
 *   2. principals and keys: a jobs-only service key, rotation, revocation
 *   3. jobs: compute (QuickJS) and sql, the journal, the SSE event ids
 *   4. a crew against a fake OpenAI-compatible server on loopback, its journal verified
 *   5. the edge (dist/edge): bundles, keys judged offline, a crew run offline on the tiny
 *      signed model, the journal carried back to the restarted cell and verified
 *   6. clean-up of every process and temp directory (also on failure)
 *
 * Exits non-zero on any unexpected answer. Needs `make build edge-runtime` (`make demo` does).
 * Usage: node --import tsx scripts/demo.ts
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startCellProcess, type CellProcess } from '../test/helpers/cell-process.ts';
import { startOpenAIServer, type FakeOpenAI, type ChatRequestBody } from '../test/fixtures/openai-server.ts';
import { edgeListening } from '../test/edge/_listening.ts';
import { verifyJournal } from '../core/journal/verify.ts';
import type { JournalRecord } from '../core/journal/record.ts';
import { makeTinyGguf } from './make-tiny-gguf.ts';

const ROOT = resolve(import.meta.dirname, '..');
const EDGE = join(ROOT, 'dist/edge');
const V1 = '/api/public/v1';
const A = `${V1}/admin`;
const T = `${A}/agent-teams`;
const RUNS = `${A}/jobs/runs`;
const SIGNED = 'application/vnd.agent-cell.signed';
const started = performance.now();

// ---------------------------------------------------------------- printing

let stepNo = 0;
function step(title: string): void {
  stepNo++;
  console.log(`\n${stepNo}. ${title}`);
}
function say(line: string): void {
  console.log(`   ${line}`);
}
/** A secret shortened for the screen: `svck_live_AbC…`. */
function short(secret: string): string {
  return secret.length > 14 ? `${secret.slice(0, 13)}…` : secret;
}
function clip(s: string, n = 70): string {
  const one = s.replace(/\s+/g, ' ');
  return one.length > n ? `${one.slice(0, n)}…` : one;
}
function fail(message: string): never {
  throw new Error(message);
}
function check(cond: unknown, message: string): asserts cond {
  if (!cond) fail(message);
}

// ---------------------------------------------------------------- resources (cleaned up in finally)

const work = mkdtempSync(join(tmpdir(), 'agent-cell-demo-'));
const procs = new Set<ChildProcess>();
let cell: CellProcess | null = null;
let ai: FakeOpenAI | null = null;

async function stopProc(p: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) {
    procs.delete(p);
    return;
  }
  const done = new Promise<void>((r) => p.once('exit', () => r()));
  p.kill(signal);
  const timer = setTimeout(() => p.kill('SIGKILL'), 5_000);
  await done;
  clearTimeout(timer);
  procs.delete(p);
}

async function cleanup(): Promise<void> {
  for (const p of [...procs]) await stopProc(p).catch(() => undefined);
  if (cell) {
    const c = cell;
    // SIGTERM, and SIGKILL if the cell has not exited after 10 s.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      c.stop(),
      new Promise<void>((r) => {
        timer = setTimeout(() => void c.kill('SIGKILL').then(r, r), 10_000);
      }),
    ]).catch(() => undefined);
    clearTimeout(timer);
  }
  if (ai) await ai.close().catch(() => undefined);
  rmSync(work, { recursive: true, force: true });
}

// ---------------------------------------------------------------- HTTP

interface Answer {
  status: number;
  body: any;
  text: string;
}

async function http(
  base: string,
  method: string,
  path: string,
  o: { token?: string; body?: unknown; raw?: string; type?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (o.token !== undefined) headers['authorization'] = `Bearer ${o.token}`;
  if (o.body !== undefined || o.raw !== undefined) headers['content-type'] = o.type ?? 'application/json';
  const r = await fetch(base + path, {
    method,
    headers,
    signal: AbortSignal.timeout(30_000),
    ...(o.raw !== undefined ? { body: o.raw } : o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
  });
  const text = await r.text();
  let body: any;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: r.status, body, text };
}

/** The cell's answer must be one of `expect`; returns the parsed body. */
async function must(
  method: string,
  path: string,
  o: { token?: string; body?: unknown; raw?: string; type?: string } = {},
  expect = [200, 201, 202],
): Promise<Answer> {
  check(cell, 'no cell running');
  const r = await http(cell.url, method, path, { token: cell.adminKey, ...o });
  check(expect.includes(r.status), `${method} ${path}: expected ${expect.join('/')} but got ${r.status} ${clip(r.text, 400)}`);
  return r;
}

/** `401 revoked`, `403 ip_not_allowed`, `200`: what a refusal looks like on one line. */
function verdict(r: Answer): string {
  if (r.status < 300) return `${r.status}`;
  const reason = r.body?.details?.reason;
  return `${r.status} ${r.body?.error ?? ''}${reason ? ` (${reason})` : ''}`;
}

async function poll<R>(what: string, fn: () => Promise<R | undefined>, ms = 30_000): Promise<R> {
  const end = Date.now() + ms;
  for (let i = 0; i < 10_000 && Date.now() < end; i++) {
    const v = await fn();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  return fail(`timed out waiting for ${what}`);
}

const TERMINAL = ['completed', 'failed', 'refused', 'cancelled'];

// ---------------------------------------------------------------- the edge program

function edgeCli(args: string[]): string {
  const r = spawnSync(EDGE, args, { encoding: 'utf8', timeout: 60_000 });
  check(r.status === 0, `edge ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

async function startEdge(args: string[]): Promise<{ url: string; proc: ChildProcess }> {
  const proc = spawn(EDGE, ['serve', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  procs.add(proc);
  const { url } = await edgeListening(proc, 30_000);
  return { url, proc };
}

// ---------------------------------------------------------------- the story

async function main(): Promise<void> {
  for (const f of ['dist/cell.mjs', 'dist/edge', 'edge-runtime/node_modules/node-llama-cpp']) {
    check(existsSync(join(ROOT, f)), `${f} is missing: run 'make build edge-runtime' (make demo does)`);
  }
  console.log(`agent-cell demo (work directory ${work})`);
  const dataDir = join(work, 'cell-data');
  mkdirSync(dataDir);

  // 1 ---------------------------------------------------------------------
  step('Start a real cell');
  say(`$ node dist/cell.mjs serve --port 0 --data ${dataDir}`);
  cell = await startCellProcess({ dataDir });
  check(cell.adminKey.startsWith('svck_live_'), 'no bootstrap key written');
  // stdout is a pipe here: the cell names the 0600 file and keeps the secret off its output (on a terminal it shows it once).
  check(!cell.output().includes(cell.adminKey), 'the bootstrap key was printed to a pipe');
  check(cell.output().includes(`bootstrap admin key created, in ${dataDir}/bootstrap-admin.key`), 'the bootstrap key file was not named');
  say(`listening on ${cell.url}`);
  say(`bootstrap owner key written once on first start to ${dataDir}/bootstrap-admin.key (mode 0600): ${short(cell.adminKey)}`);
  const health = await must('GET', `${A}/roles`);
  say(
    `GET ${A}/roles with it -> ${health.status}: roles ${(health.body.roles ?? health.body.items ?? []).map((r: { name: string }) => r.name).join(', ')}`,
  );

  // 2 ---------------------------------------------------------------------
  step('Principals and keys');
  const svc = await must('POST', `${A}/principals`, { body: { kind: 'service', name: 'batch', roles: ['jobs'] } });
  const svcId: string = svc.body.id;
  say(`POST ${A}/principals {kind: service, name: batch, roles: [jobs]} -> ${svc.status} ${svcId}`);
  const jobScopes = ['system.orchestration.admin.read', 'system.orchestration.admin.write'];
  const batchKey = await must('POST', `${A}/api-keys`, { body: { name: 'batch-ci', owner_id: svcId, scopes: jobScopes } });
  const batchKeyId: string = batchKey.body.key_id;
  const batchOld: string = batchKey.body.secret;
  say(
    `POST ${A}/api-keys {owner_id: ${svcId}, scopes: [${jobScopes.join(', ')}]} -> ${batchKey.status} ${batchKeyId}, secret ${short(batchOld)} (shown this once)`,
  );
  const asBatch = (secret: string, method: string, path: string, body?: unknown) =>
    http(cell!.url, method, path, { token: secret, ...(body !== undefined ? { body } : {}) });
  const reach = await asBatch(batchOld, 'GET', RUNS);
  check(reach.status === 200, `jobs key on jobs: ${reach.status} ${reach.text}`);
  say(`GET ${RUNS} with the jobs key -> ${verdict(reach)}`);
  const elsewhere = await asBatch(batchOld, 'GET', `${A}/principals`);
  check(elsewhere.status === 403, `jobs key on principals: ${elsewhere.status} ${elsewhere.text}`);
  say(
    `GET ${A}/principals with the jobs key -> ${verdict(elsewhere)}${elsewhere.body?.details?.required_permission ? `, needs ${elsewhere.body.details.required_permission}` : ''}`,
  );
  const rot = await must('POST', `${A}/api-keys/${batchKeyId}/rotate`, { body: { grace_seconds: 3600 } });
  const batchNew: string = rot.body.secret;
  check(batchNew !== batchOld, 'rotation returned the same secret');
  say(
    `POST ${A}/api-keys/${batchKeyId}/rotate {grace_seconds: 3600} -> ${rot.status}, new secret ${short(batchNew)}, old one valid until ${new Date(rot.body.previous_secret_valid_until).toISOString()}`,
  );
  for (const [name, secret] of [
    ['old', batchOld],
    ['new', batchNew],
  ] as const) {
    const r = await asBatch(secret, 'GET', RUNS);
    check(r.status === 200, `${name} secret during grace: ${r.status} ${r.text}`);
    say(`GET ${RUNS} with the ${name} secret ${short(secret)} -> ${verdict(r)}`);
  }
  const tmp = await must('POST', `${A}/api-keys`, { body: { name: 'temporary', scopes: jobScopes } });
  const before = await asBatch(tmp.body.secret, 'GET', RUNS);
  check(before.status === 200, `temporary key: ${before.status}`);
  say(`another key ${tmp.body.key_id} (${short(tmp.body.secret)}): GET ${RUNS} -> ${verdict(before)}`);
  const rev = await must('POST', `${A}/api-keys/${tmp.body.key_id}/revoke`, { body: {} });
  say(`POST ${A}/api-keys/${tmp.body.key_id}/revoke -> ${rev.status} ${rev.body?.status ?? ''}`);
  const after = await asBatch(tmp.body.secret, 'GET', RUNS);
  check(after.status === 401, `revoked key: ${after.status} ${after.text}`);
  say(`GET ${RUNS} with the revoked key -> ${verdict(after)}`);

  // 3 ---------------------------------------------------------------------
  step('Jobs: compute (QuickJS) and sql, with the jobs key');
  const runJob = async (job_type: string, spec: unknown, show: string) => {
    const r = await asBatch(batchNew, 'POST', RUNS, { job_type, workspace_id: 'demo', spec });
    check(r.status === 202, `POST ${job_type} job: ${r.status} ${r.text}`);
    say(`POST ${RUNS} {job_type: ${job_type}, ${show}} -> ${r.status} ${r.body.run_id} (${r.body.state})`);
    const done = await poll(`job ${r.body.run_id}`, async () => {
      const s = await asBatch(batchNew, 'GET', `${RUNS}/${r.body.run_id}`);
      return TERMINAL.includes(s.body?.state) ? s.body : undefined;
    });
    check(done.state === 'completed', `${job_type} job ended ${done.state}: ${JSON.stringify(done.error)}`);
    const j = await asBatch(batchNew, 'GET', `${RUNS}/${r.body.run_id}/journal`);
    check(j.status === 200 && Array.isArray(j.body.records), `journal: ${j.status}`);
    return { run: done, records: j.body.records as JournalRecord[] };
  };
  const compute = await runJob(
    'compute',
    { code: 'return input.xs.map((x) => x * x);', input: { xs: [1, 2, 3] } },
    'code: return input.xs.map((x) => x * x), input: {xs: [1,2,3]}',
  );
  check(JSON.stringify(compute.run.output?.result) === '[1,4,9]', `compute output ${JSON.stringify(compute.run.output)}`);
  say(
    `  -> completed, output.result = ${JSON.stringify(compute.run.output.result)}; journal: ${compute.records.length} records (${compute.records.map((r) => r.kind).join(', ')})`,
  );
  const sqlW = await runJob(
    'sql',
    {
      statements: [
        { sql: 'CREATE TABLE pumps (id TEXT PRIMARY KEY, pressure DOUBLE PRECISION)' },
        // Positional parameters ($1, $2 and an array) read the same on both engines.
        { sql: 'INSERT INTO pumps VALUES ($1, $2)', params: ['pump-7', 4.2] },
        { sql: 'INSERT INTO pumps VALUES ($1, $2)', params: ['pump-9', 3.1] },
      ],
    },
    'statements: CREATE TABLE pumps; 2 x INSERT',
  );
  say(`  -> completed; journal: ${sqlW.records.length} records`);
  const sqlR = await runJob('sql', { sql: 'SELECT id, pressure FROM pumps ORDER BY id' }, 'sql: SELECT id, pressure FROM pumps');
  const rows = sqlR.run.output?.results?.[0]?.rows;
  check(JSON.stringify(rows) === '[["pump-7",4.2],["pump-9",3.1]]', `sql rows ${JSON.stringify(sqlR.run.output)}`);
  say(`  -> completed, rows = ${JSON.stringify(rows)}; journal: ${sqlR.records.length} records`);
  // The SSE stream of a finished run replays its journal and ends after run_finished.
  const sse = await fetch(`${cell.url}${RUNS}/${compute.run.run_id}/events/sse`, {
    headers: { authorization: `Bearer ${batchNew}` },
    signal: AbortSignal.timeout(10_000),
  });
  check(sse.status === 200, `SSE: ${sse.status}`);
  const events = (await sse.text())
    .split('\n\n')
    .filter((b) => /^id: /m.test(b))
    .map((b) => ({
      id: /^id: (.*)$/m.exec(b)![1]!,
      event: /^event: (.*)$/m.exec(b)?.[1] ?? 'message',
    }));
  check(events.length === compute.records.length, `SSE gave ${events.length} events, the journal has ${compute.records.length}`);
  check(
    events.every((e, i) => Number(e.id) === i + 1),
    'SSE ids are not the journal seqs',
  );
  say(
    `GET ${RUNS}/${compute.run.run_id}/events/sse -> ${sse.status} text/event-stream, events ${events.map((e) => `id ${e.id} ${e.event}`).join(', ')}`,
  );

  // 4 ---------------------------------------------------------------------
  step('A crew on an OpenAI-compatible model (a fake server on loopback)');
  ai = await startOpenAIServer({ apiKey: 'sk-demo-not-real' });
  const roleOf = (req: ChatRequestBody) => /ROLE:(\S+)/.exec(req.messages.find((m) => m.role === 'system')?.content ?? '')?.[1] ?? '?';
  ai.setResponder((req) => {
    const role = roleOf(req);
    if (role === 'inspector') return { content: 'Pump 7: pressure 4.2 bar, seal worn, schedule replacement.' };
    if (role === 'reviewer') return { content: 'Reviewed: replace the pump 7 seal this week; pressure within limits.' };
    return { content: `${role} has nothing to add` };
  });
  say(`fake Chat Completions server on ${ai.url} (loopback)`);
  const sec = await must('POST', `${A}/secrets`, { body: { name: 'fake-openai-key', value: 'sk-demo-not-real' } });
  say(
    `POST ${A}/secrets {name: fake-openai-key, value: sk-demo-…} -> ${sec.status} ${sec.body.secret_id} (the value is sealed, never returned)`,
  );
  const prov = await must('POST', `${A}/ai/model-providers`, {
    body: {
      provider_type: 'openai-compatible',
      default_model: 'fake-model',
      base_url: `${ai.url}/v1`,
      api_key_secret_id: sec.body.secret_id,
      max_retries: 0,
    },
  });
  const providerId: string = prov.body.provider_id;
  say(
    `POST ${A}/ai/model-providers {openai-compatible, base_url: ${ai.url}/v1} -> ${prov.status} ${providerId}, posture ${prov.body.posture?.posture}: allowed=${prov.body.posture?.allowed}`,
  );
  for (const [name, prompt] of [
    ['inspect', 'Inspect the equipment named in the task and report findings.'],
    ['review', 'Review the previous report and give one recommendation.'],
  ] as const) {
    const s = await must('POST', `${T}/skills`, { body: { name, skill_kind: 'prompt', definition: { prompt } } });
    say(`POST ${T}/skills {name: ${name}, skill_kind: prompt} -> ${s.status} ${s.body.skill_id ?? ''}`);
  }
  const cap = {
    allowed_tools: ['calc', 'clock.now'],
    permission_mode: 'auto',
    clearance_level: 0,
    egress_allowlist: [],
    data_grant_ids: [],
  };
  const narrow = { ...cap, allowed_tools: ['calc'] };
  const agents: Record<string, string> = {};
  for (const [role, skill] of [
    ['inspector', 'inspect'],
    ['reviewer', 'review'],
  ] as const) {
    const bp = await must('POST', `${T}/blueprints`, {
      body: {
        name: `${role}-bp`,
        role_label: role,
        system_prompt_ref: `ROLE:${role} You are the ${role} of a pump-station crew.`,
        required_skills: [`skill:${skill}`],
        authority_template: cap,
      },
    });
    say(`POST ${T}/blueprints {name: ${role}-bp, required_skills: [skill:${skill}]} -> ${bp.status} ${bp.body.blueprint_id}`);
    const ag = await must('POST', `${T}/agents`, {
      body: { source: 'blueprint', blueprint_id: bp.body.blueprint_id, name: role, provider_id: providerId },
    });
    agents[role] = ag.body.agent_id;
    const led = await must('POST', `${T}/agents/${ag.body.agent_id}/budget-ledger`, { body: { budget_limit: 20_000 } });
    say(
      `POST ${T}/agents {source: blueprint} -> ${ag.status} ${ag.body.agent_id}; budget ledger ${led.body.budget_limit} ${led.body.unit ?? 'tokens'}`,
    );
  }
  const form = await must('POST', `${T}/formations`, {
    body: { name: 'pump-inspection', coordination_policy: 'sequential', limits: { default_max_tokens: 256 } },
  });
  const formationId: string = form.body.formation_id;
  say(`POST ${T}/formations {name: pump-inspection, coordination_policy: sequential} -> ${form.status} ${formationId}`);
  const b1 = await must('POST', `${T}/formations/${formationId}/billets`, {
    body: { role_label: 'inspector', required_skills: ['skill:inspect'], authority_cap: cap },
  });
  say(`POST .../billets {role_label: inspector, cap tools [${cap.allowed_tools.join(', ')}]} -> ${b1.status} ${b1.body.billet_id}`);
  const b2 = await must('POST', `${T}/formations/${formationId}/billets`, {
    body: { role_label: 'reviewer', required_skills: ['skill:review'], reports_to: b1.body.billet_id, authority_cap: narrow },
  });
  say(
    `POST .../billets {role_label: reviewer, reports_to: inspector, cap tools [${narrow.allowed_tools.join(', ')}]} -> ${b2.status} ${b2.body.billet_id}`,
  );
  const over = await must(
    'POST',
    `${T}/formations/${formationId}/billets`,
    {
      body: {
        role_label: 'intern',
        required_skills: [],
        reports_to: b1.body.billet_id,
        authority_cap: { ...cap, allowed_tools: ['calc', 'kv.put'], clearance_level: 3 },
      },
    },
    [400],
  );
  check(over.body?.details?.reason === 'over_authority', `over-authority billet: ${over.text}`);
  say(
    `POST .../billets {role_label: intern, reports_to: inspector, tools [calc, kv.put], clearance 3} -> ${verdict(over)}, fields ${JSON.stringify(over.body.details.fields)} (refused at authoring)`,
  );
  const crew = await must('POST', `${T}/crews`, {
    body: {
      formation_id: formationId,
      name: 'pump-crew',
      assignments: { [b1.body.billet_id]: agents['inspector'], [b2.body.billet_id]: agents['reviewer'] },
    },
  });
  const crewId: string = crew.body.crew_id;
  say(
    `POST ${T}/crews {assignments: inspector, reviewer} -> ${crew.status} ${crewId}, graph ${String(crew.body.graph_hash).slice(0, 19)}…`,
  );
  const run = await must('POST', `${T}/crews/${crewId}/runs`, { body: { input: 'Inspect pump 7 and report.' } });
  say(`POST ${T}/crews/${crewId}/runs {input: "Inspect pump 7 and report."} -> ${run.status} ${run.body.run_id} (${run.body.state})`);
  const crewRun = await poll('the crew run', async () => {
    const s = await must('GET', `${T}/crews/${crewId}/runs/${run.body.run_id}`);
    return TERMINAL.includes(s.body.state) ? s.body : undefined;
  });
  check(crewRun.state === 'completed', `crew run ended ${crewRun.state}: ${JSON.stringify(crewRun.error)}`);
  say(
    `  -> ${crewRun.state}, ${ai.requests.length} model calls, ${crewRun.tokens_used ?? '?'} tokens; output: "${clip(String(crewRun.output))}"`,
  );
  for (const role of ['inspector', 'reviewer']) {
    const l = await must('GET', `${T}/agents/${agents[role]}/budget-ledger`);
    say(`  ledger of ${role}: spent ${l.body.spent} of ${l.body.budget_limit}, available ${l.body.available}`);
  }
  const cj = await must('GET', `${RUNS}/${run.body.run_id}/journal`);
  const crewRecords = cj.body.records as JournalRecord[];
  say(
    `GET ${RUNS}/${run.body.run_id}/journal -> ${cj.status}, ${crewRecords.length} records: ${crewRecords.map((r) => r.kind).join(', ')}`,
  );
  // The cell's published identity keys (public, like /oauth/jwks.json): what the journal is verified against.
  const published = await fetch(`${cell.url}/.well-known/cell-keys.json`);
  const pub1 = (await published.json()) as { cell_id: string; keys: { kid: string; jwk: JsonWebKey }[] };
  const cellKeys = new Map<string, JsonWebKey>(pub1.keys.map((k) => [k.kid, k.jwk]));
  say(`GET /.well-known/cell-keys.json -> ${published.status}, cell ${pub1.cell_id}, keys ${[...cellKeys.keys()].join(', ')}`);
  const verdictOk = await verifyJournal(crewRecords, (kid) => cellKeys.get(kid));
  check(verdictOk.ok, `journal does not verify: ${JSON.stringify(verdictOk)}`);
  say(`core/journal verifyJournal(records, the cell's published keys) -> ok: every signature and the hash chain verify`);
  const forged = crewRecords.map((r) => (r.kind === 'run_finished' ? { ...r, data: { ...r.data, outcome: 'failed' } } : r));
  const verdictBad = await verifyJournal(forged, (kid) => cellKeys.get(kid));
  check(!verdictBad.ok, 'a forged journal verified');
  say(
    `the same journal with run_finished.outcome changed to "failed" -> not ok at seq ${verdictBad.ok ? '?' : verdictBad.seq}: ${verdictBad.ok ? '' : verdictBad.reason}`,
  );

  // 5 ---------------------------------------------------------------------
  step('The edge: signed bundles, keys judged offline, a crew run offline on a signed local model');
  const dev = join(work, 'device');
  const init = JSON.parse(edgeCli(['init', '--data', dev]));
  say(`$ dist/edge init --data <work>/device -> device ${init.device_id}`);
  const reg = await must('POST', `${A}/edge/devices`, { body: { name: 'pump-house', public_jwk: init.public_jwk } });
  writeFileSync(join(work, 'trust.json'), reg.text);
  say(
    `POST ${A}/edge/devices {name: pump-house, public_jwk} -> ${reg.status}, trust anchor: cell ${reg.body.trust.cell_id} and its published keys`,
  );
  const pub = join(work, 'publisher.json');
  edgeCli(['model', 'keygen', '--out', pub]);
  say("$ dist/edge model keygen --out publisher.json   (the model publisher's signing key)");
  writeFileSync(join(work, 'tiny.gguf'), makeTinyGguf(42));
  say(`scripts/make-tiny-gguf.ts -> tiny.gguf (${readFileSync(join(work, 'tiny.gguf')).length} bytes, llama architecture, seeded weights)`);
  edgeCli(['model', 'sign', '--model', join(work, 'tiny.gguf'), '--key', pub, '--name', 'tiny', '--out', join(work, 'tiny.manifest.json')]);
  const manifestText = readFileSync(join(work, 'tiny.manifest.json'), 'utf8');
  say(`$ dist/edge model sign --model tiny.gguf --name tiny -> tiny.manifest.json (${manifestText.split('\n')[0]!.slice(0, 60)}…)`);
  edgeCli(['trust', '--data', dev, '--file', join(work, 'trust.json'), '--publisher', pub]);
  say('$ dist/edge trust --data <work>/device --file trust.json --publisher publisher.json   (pins the cell and the publisher)');
  const edgeScopes = ['agent_teams', 'system.orchestration.admin.read', 'edge.read'];
  const mint = async (name: string, extra: Record<string, unknown> = {}) =>
    (await must('POST', `${A}/api-keys`, { body: { name, scopes: edgeScopes, ...extra } })).body;
  const valid = await mint('edge-operator');
  const revoked = await mint('edge-revoked');
  await must('POST', `${A}/api-keys/${revoked.key_id}/revoke`, { body: {} });
  const wrongIp = await mint('edge-elsewhere', { allowed_ips: ['10.9.9.9'] });
  say(
    `keys for the device: valid ${short(valid.secret)}, revoked ${short(revoked.secret)}, allowed only from 10.9.9.9 ${short(wrongIp.secret)}`,
  );
  // The edge crew: two scratch agents with ledgers; on the device they run on the local model.
  const ef = await must('POST', `${T}/formations`, {
    body: { name: 'edge-inspection', coordination_policy: 'sequential', limits: { default_max_tokens: 48 } },
  });
  const eb: string[] = [];
  const ea: string[] = [];
  for (const role of ['inspector', 'reviewer']) {
    const b = await must('POST', `${T}/formations/${ef.body.formation_id}/billets`, {
      body: { role_label: role, required_skills: [], authority_cap: cap },
    });
    const a = await must('POST', `${T}/agents`, {
      body: { source: 'scratch', role_label: role, system_prompt: `You are the ${role}. Answer briefly.`, authority_template: cap },
    });
    await must('POST', `${T}/agents/${a.body.agent_id}/budget-ledger`, { body: { budget_limit: 50_000 } });
    eb.push(b.body.billet_id);
    ea.push(a.body.agent_id);
  }
  const ecrew = await must('POST', `${T}/crews`, {
    body: { formation_id: ef.body.formation_id, name: 'edge-crew', assignments: { [eb[0]!]: ea[0], [eb[1]!]: ea[1] } },
  });
  const edgeCrewId: string = ecrew.body.crew_id;
  say(`edge crew ${edgeCrewId}: sequential, 2 scratch agents with budget ledgers of 50000 tokens`);
  const kb = await must('POST', `${A}/edge/key-bundles`, { body: { device_id: init.device_id } }, [201]);
  writeFileSync(join(work, 'keys.bundle.json'), kb.text);
  check(!kb.text.includes(valid.secret.slice(10)), 'a secret is in the key bundle');
  say(
    `POST ${A}/edge/key-bundles {device_id} -> ${kb.status}, ${kb.text.length} bytes, signed (${kb.text.split('\n')[0]!.slice(0, 50)}…), no secret inside`,
  );
  const cb = await must(
    'POST',
    `${A}/edge/crew-bundles`,
    { body: { device_id: init.device_id, crew_id: edgeCrewId, model_manifest: manifestText } },
    [201],
  );
  writeFileSync(join(work, 'crew.bundle.json'), cb.text);
  say(`POST ${A}/edge/crew-bundles {device_id, crew_id, model_manifest} -> ${cb.status}, ${cb.text.length} bytes`);
  await cell.stop();
  say('cell stopped: from here on the device is on its own');

  const e = await startEdge([
    '--data',
    dev,
    '--bundle',
    join(work, 'keys.bundle.json'),
    '--crew-bundle',
    join(work, 'crew.bundle.json'),
    '--model',
    join(work, 'tiny.gguf'),
    '--model-manifest',
    join(work, 'tiny.manifest.json'),
  ]);
  say(
    `$ dist/edge serve --data <work>/device --bundle keys.bundle.json --crew-bundle crew.bundle.json --model tiny.gguf --model-manifest tiny.manifest.json --port 0 -> listening on ${e.url}`,
  );
  const expectKeys: [string, string, string][] = [
    ['valid', valid.secret, '200'],
    ['revoked', revoked.secret, '401 unauthorized (revoked)'],
    ['wrong IP', wrongIp.secret, '403 forbidden (ip_not_allowed)'],
  ];
  for (const [name, secret, want] of expectKeys) {
    const r = await http(e.url, 'GET', `${V1}/edge/authz/edge.read`, { token: secret });
    check(verdict(r) === want, `edge, ${name} key: expected ${want}, got ${verdict(r)} ${r.text}`);
    say(`GET ${V1}/edge/authz/edge.read with the ${name} key ${short(secret)} -> ${verdict(r)}`);
  }
  const crewPath = `${T}/crews/${edgeCrewId}/runs`;
  const er = await http(e.url, 'POST', crewPath, { token: valid.secret, body: { input: 'Inspect pump 7 and report.' } });
  check(er.status === 202, `edge run: ${er.status} ${er.text}`);
  say(`POST ${crewPath} (edge) {input: "Inspect pump 7 and report."} -> ${er.status} ${er.body.run_id}`);
  const edgeRun = await poll(
    'the edge run',
    async () => {
      const s = await http(e.url, 'GET', `${crewPath}/${er.body.run_id}`, { token: valid.secret });
      return TERMINAL.includes(s.body?.state) ? s.body : undefined;
    },
    60_000,
  );
  check(edgeRun.state === 'completed', `edge run ended ${edgeRun.state}: ${JSON.stringify(edgeRun.error ?? edgeRun)}`);
  const ej = await http(e.url, 'GET', `${RUNS}/${er.body.run_id}/journal`, { token: valid.secret });
  check(ej.status === 200, `edge journal: ${ej.status}`);
  const edgeRecords = (ej.body.records ?? []) as unknown[];
  const printable = clip(
    String(typeof edgeRun.output === 'string' ? edgeRun.output : JSON.stringify(edgeRun.output)).replace(/[^\x20-\x7e]/g, '·'),
    40,
  );
  say(
    `  -> ${edgeRun.state} offline on the tiny model (its text is noise by design): "${printable}"; journal ${edgeRecords.length} records, signed by the device`,
  );
  await stopProc(e.proc);
  say('edge stopped');
  const exportFile = join(work, 'journal.export.json');
  edgeCli(['journal', 'export', er.body.run_id, '--data', dev, '--out', exportFile]);
  const exported = readFileSync(exportFile, 'utf8');
  say(`$ dist/edge journal export ${er.body.run_id} --out journal.export.json -> ${exported.length} bytes, signed by the device`);

  cell = await startCellProcess({ dataDir });
  check(cell.output().indexOf('svck_live_') === -1, 'the restarted cell printed a key');
  say(`cell restarted on the same data directory: ${cell.url} (no bootstrap key printed this time)`);
  const imp = await must('POST', `${A}/edge/journals`, { raw: exported, type: SIGNED }, [201]);
  check(imp.body.verified === true && imp.body.run_id === er.body.run_id && imp.body.outcome === 'completed', `import: ${imp.text}`);
  say(
    `POST ${A}/edge/journals (the export) -> ${imp.status}, verified ${imp.body.verified}, run ${imp.body.run_id}, ${imp.body.record_count} records, outcome ${imp.body.outcome}`,
  );
  const tampered = exported.replace('"outcome":"completed"', '"outcome":"failed"');
  check(tampered !== exported, 'could not tamper with the export');
  const bad = await must('POST', `${A}/edge/journals`, { raw: tampered, type: SIGNED }, [403]);
  say(`the same export with its outcome changed -> ${verdict(bad)}`);
  const got = await must('GET', `${A}/edge/journals/${er.body.run_id}`);
  say(
    `GET ${A}/edge/journals/${er.body.run_id} -> ${got.status}, device ${got.body.device_id ?? init.device_id}, ${(got.body.records ?? []).length || got.body.record_count} records`,
  );
}

// ---------------------------------------------------------------- run, always clean up

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    interrupted = true;
    console.error(`\n${sig}: cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}

let code = 0;
try {
  await main();
} catch (err) {
  code = 1;
  console.error(`\nDEMO FAILED at step ${stepNo}: ${err instanceof Error ? err.message : String(err)}`);
} finally {
  if (!interrupted) {
    stepNo = 5; // always step 6, also when an earlier step failed
    step('Clean up');
    const live = cell as CellProcess | null;
    const n = procs.size + (live && live.proc.exitCode === null ? 1 : 0) + (ai ? 1 : 0);
    await cleanup();
    check(!existsSync(work), `${work} is still there`);
    say(`stopped ${n} process(es) and removed ${work}`);
    console.log(`\n${code === 0 ? 'demo complete' : 'demo FAILED'} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
}
process.exit(code);
