/**
 * A run's attestation checked by verifiers this project did not write (issue 41): Debian's
 * securesystemslib (and in-toto) verify the DSSE envelope with the key the cell publishes at
 * /.well-known/cell-keys.json (test/attestation/verify_dsse.py, which imports nothing of ours), and
 * Debian's ruby-cose verifies the SCITT signed statement (test/attestation/verify_cose.rb: ruby-cose
 * parses it and builds the Sig_structure; EdDSA, which ruby-cose 1.2 lacks, is registered there over
 * OpenSSL's Ed25519). A change to any field of either is refused by them. `make test` installs the
 * Debian packages (make attest-deps).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { FakeOpenAI } from '../../fixtures/openai-server.ts';
import type { InProcess } from '../../helpers/inproc.ts';
import { A, T, ok, roleOf, team, type Api, crewFixture } from '../../helpers/teams.ts';

const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const SCRIPT = join(import.meta.dirname, '..', '..', 'attestation', 'verify_dsse.py');
const RUBY_SCRIPT = join(import.meta.dirname, '..', '..', 'attestation', 'verify_cose.rb');

let t: InProcess;
let ai: FakeOpenAI;
let api: Api;
let dir: string;
let runId: string;
let crew: string;
before(async () => {
  const probe = spawnSync(PYTHON, ['-c', 'import securesystemslib, in_toto; print(securesystemslib.__version__, in_toto.__version__)'], {
    encoding: 'utf8',
  });
  assert.equal(probe.status, 0, `Debian's python3-securesystemslib and in-toto are needed (make attest-deps): ${probe.stderr}`);
  const ruby = spawnSync('ruby', ['-e', 'require "cose"; puts COSE::VERSION'], { encoding: 'utf8' });
  assert.equal(ruby.status, 0, `Debian's ruby-cose is needed (make attest-deps): ${ruby.stderr}`);
  ({ t, ai, api } = await crewFixture());
  ai.setResponder((req) => ({ content: `answer of ${roleOf(req)}` }));
  dir = mkdtempSync(join(tmpdir(), 'attest-'));
  const tm = await team(api, 'sequential', [{ role: 'a' }, { role: 'b' }]);
  crew = tm.crew;
  runId = (await ok(api, 'POST', `${T}/crews/${crew}/runs`, { input: 'task' })).run_id;
  for (let i = 0; i < 3000 && (await t.modules.runs.runs.getRun(runId))?.state !== 'completed'; i++)
    await new Promise((r) => setTimeout(r, 10));
  assert.equal((await t.modules.runs.runs.getRun(runId))?.state, 'completed');
  writeFileSync(join(dir, 'keys.json'), (await t.request('GET', '/.well-known/cell-keys.json')).text);
});
after(async () => {
  await t?.close();
  await ai?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function rubyVerify(bytes: Uint8Array): { ok: boolean; out: string } {
  const file = join(dir, `st-${Math.random().toString(36).slice(2)}.cose`);
  writeFileSync(file, bytes);
  const r = spawnSync('ruby', [RUBY_SCRIPT, file, join(dir, 'keys.json')], { encoding: 'utf8' });
  assert.ok(r.status === 0 || r.status === 1, `verify_cose.rb crashed: ${r.stderr}`);
  return { ok: r.status === 0, out: r.stdout + r.stderr };
}

function pyVerify(doc: unknown): { ok: boolean; out: string } {
  const file = join(dir, `att-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(doc));
  const r = spawnSync(PYTHON, [SCRIPT, file, join(dir, 'keys.json')], { encoding: 'utf8' });
  assert.ok(r.status === 0 || r.status === 1, `verify_dsse.py crashed: ${r.stderr}`);
  return { ok: r.status === 0, out: r.stdout + r.stderr };
}

const b64 = (s: string) => Buffer.from(s, 'base64');

/** Every leaf of a JSON value, as a path. */
function leaves(v: unknown, path: (string | number)[] = []): (string | number)[][] {
  if (Array.isArray(v)) return v.flatMap((x, i) => leaves(x, [...path, i]));
  if (typeof v === 'object' && v !== null) return Object.entries(v).flatMap(([k, x]) => leaves(x, [...path, k]));
  return [path];
}

function changed(v: unknown, path: (string | number)[]): unknown {
  const copy = structuredClone(v) as Record<string | number, unknown>;
  let at: Record<string | number, unknown> = copy;
  for (const p of path.slice(0, -1)) at = at[p] as Record<string | number, unknown>;
  const last = path.at(-1)!;
  const x = at[last];
  at[last] = typeof x === 'string' ? `${x}x` : typeof x === 'number' ? x + 1 : typeof x === 'boolean' ? !x : 'changed';
  return copy;
}

test("Debian's securesystemslib verifies the DSSE envelope with the published key; any changed field is refused", async () => {
  const r = await t.request('GET', `${A}/jobs/runs/${runId}/attestation`, { token: t.adminKey });
  assert.equal(r.status, 200, r.text);
  const good = pyVerify(r.body);
  assert.equal(good.ok, true, good.out);
  assert.match(good.out, new RegExp(`VERIFIED ${runId}`));
  const env = r.body.dsse_envelope;
  const statement = JSON.parse(b64(env.payload).toString('utf8'));
  // Every leaf of the statement changed in turn (the subjects, the predicate type, the run, a step's hashes, the outcome...).
  const paths = leaves(statement);
  const sample = paths.filter((_, i) => i % Math.max(1, Math.floor(paths.length / 24)) === 0);
  for (const p of ['_type', 'predicateType', 'subject.0.digest.sha256', 'predicate.outcome.state', 'predicate.journal.head'])
    sample.push(p.split('.').map((x) => (/^\d+$/.test(x) ? Number(x) : x)));
  for (const p of sample) {
    const payload = Buffer.from(JSON.stringify(changed(statement, p))).toString('base64');
    const v = pyVerify({ ...env, payload });
    assert.equal(v.ok, false, `a change at ${p.join('.')} was accepted: ${v.out}`);
    assert.match(v.out, /REFUSED: signature .* does not verify/);
  }
  // The envelope's own fields: the payload type, the signature, the key id.
  assert.equal(pyVerify({ ...env, payloadType: 'application/json' }).ok, false);
  const sig = b64(env.signatures[0].sig);
  sig[10]! ^= 1;
  assert.equal(pyVerify({ ...env, signatures: [{ ...env.signatures[0], sig: sig.toString('base64') }] }).ok, false);
  const unknown = pyVerify({ ...env, signatures: [{ ...env.signatures[0], keyid: 'not-a-published-kid' }] });
  assert.equal(unknown.ok, false);
  assert.match(unknown.out, /no signature by a published key/);
});

test("Debian's ruby-cose verifies the SCITT signed statement (COSE_Sign1) with the published key; any changed byte is refused", async () => {
  const res = await t.app.request(
    `${T}/crews/${crew}/runs/${runId}/attestation?format=scitt`,
    { headers: { authorization: `Bearer ${t.adminKey}` } },
    {
      incoming: { socket: { remoteAddress: '127.0.0.1' } },
    } as never,
  );
  assert.equal(res.status, 200);
  const bytes = new Uint8Array(await res.arrayBuffer());
  const good = rubyVerify(bytes);
  assert.equal(good.ok, true, good.out);
  // The draft's registered headers as ruby-cose reads them: CWT sub the run, iss the log origin, the content type.
  assert.match(
    good.out,
    new RegExp(
      `VERIFIED ${runId} issued by agent-cell/${t.core.config.groupId} \\(application/vnd.in-toto\\+json, urn:agent-cell:predicate:run:v1\\)`,
    ),
  );
  let refused = 0;
  for (let i = 1; i < bytes.length; i += Math.max(1, Math.floor(bytes.length / 40))) {
    const tampered = Uint8Array.from(bytes);
    tampered[i]! ^= 0x04;
    const v = rubyVerify(tampered);
    assert.equal(v.ok, false, `byte ${i} changed was accepted: ${v.out}`);
    refused++;
  }
  assert.ok(refused > 30);
});
