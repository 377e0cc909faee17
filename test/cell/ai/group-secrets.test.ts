/**
 * The secrets key of a group of cells (cell/custody): cells on one PostgreSQL
 * database, each with its own data directory, given the same
 * `--secrets-key-file`, open each other's provider secrets (a secret stored on
 * one is sent by another to a real HTTP server speaking the OpenAI protocol).
 * A member given another key, or none, is refused at start, whether or not a
 * secret exists (the group's key check is recorded by the first start); a
 * cell whose store's check was replaced under it is refused (503, nothing
 * written) when it seals a secret, and a secret it cannot open is never sent.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { CellConfig } from '../../../cell/config.ts';
import { startCell, type RunningCell } from '../../../cell/server.ts';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { adminQuery, pgDatabase, pgUnavailable, type PgDatabase } from '../../helpers/postgres.ts';
import { sealSecret } from '../../../cell/custody/api.ts';
import { sealCheck } from '../../../cell/custody/key-check.ts';

const skip = pgUnavailable() ?? false;
const A = '/api/public/v1/admin';
const quiet = { info() {}, warn() {}, error() {} };

describe('the secrets key of a group of cells', { skip, timeout: 120_000 }, () => {
  const dirs: string[] = [];
  const running: RunningCell[] = [];
  const dbs: PgDatabase[] = [];
  let ai: FakeOpenAI;
  let keyFile: string;
  let otherKeyFile: string;

  before(async () => {
    ai = await startOpenAIServer({ apiKey: 'sk-group-secret' });
    const d = tmp();
    keyFile = join(d, 'group.key');
    writeFileSync(keyFile, randomBytes(32), { mode: 0o600 });
    otherKeyFile = join(d, 'other.key');
    writeFileSync(otherKeyFile, randomBytes(32), { mode: 0o600 });
  });
  after(async () => {
    for (const c of running) await c.stop().catch(() => undefined);
    for (const db of dbs) await db.drop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    await ai?.close();
  });

  function tmp(): string {
    const d = mkdtempSync(join(tmpdir(), 'cell-secrets-'));
    dirs.push(d);
    return d;
  }

  async function cell(db: PgDatabase, config: Partial<CellConfig>): Promise<RunningCell> {
    const c = await startCell({
      config: { dataDir: tmp(), storeUrl: db.url, posture: 'multi-cell', ...config },
      listen: false,
      log: quiet,
    });
    running.push(c);
    return c;
  }

  async function req(c: RunningCell, method: string, path: string, token: string, body?: unknown) {
    const r = await c.app.request(path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : undefined, text };
  }

  async function secretCount(c: RunningCell): Promise<number> {
    return Number((await c.core.store.get('SELECT COUNT(*) AS n FROM ai_secrets'))!['n']);
  }

  test('a secret stored on one cell is used by another given the same key file', async () => {
    const db = await pgDatabase();
    dbs.push(db);
    const a = await cell(db, { secretsKeyFile: keyFile });
    const b = await cell(db, { secretsKeyFile: keyFile });
    const owner = a.bootstrapSecret!;
    assert.ok(owner);
    const s = await req(a, 'POST', `${A}/secrets`, owner, { name: 'openai', value: 'sk-group-secret' });
    assert.equal(s.status, 201, s.text);
    const p = await req(a, 'POST', `${A}/ai/model-providers`, owner, {
      provider_type: 'openai-compatible',
      default_model: 'fake-model',
      base_url: `${ai.url}/v1`,
      api_key_secret_id: s.body.secret_id,
      max_retries: 0,
    });
    assert.equal(p.status, 201, p.text);
    const before = ai.requests.length;
    const answer = await b.modules.ai.ai.call(p.body.provider_id, { messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(answer.content, 'ok');
    assert.equal(ai.requests.length, before + 1);
    assert.equal(ai.requests.at(-1)!.authorization, 'Bearer sk-group-secret', "cell B opened cell A's secret");

    // A member given another key (or none: its data directory has no key) is refused at start, saying what to do.
    await assert.rejects(cell(db, { secretsKeyFile: otherKeyFile }), (e: Error) => {
      assert.equal(e.name, 'SetupError');
      assert.match(e.message, /does not open the store's key check/);
      assert.match(e.message, /--secrets-key-file/);
      return true;
    });
    await assert.rejects(cell(db, {}), /has no secrets key .*--secrets-key-file/);
    // A key file of the wrong size is refused before anything else.
    const short = join(tmp(), 'short.key');
    writeFileSync(short, randomBytes(16));
    await assert.rejects(cell(db, { secretsKeyFile: short }), /holds 16 bytes; it must hold exactly 32/);
  });

  test("a model call reads provider and secret through a cache that follows the group's changes", async () => {
    const db = await pgDatabase();
    dbs.push(db);
    const open = await startOpenAIServer();
    try {
      const a = await cell(db, { secretsKeyFile: keyFile });
      const b = await cell(db, { secretsKeyFile: keyFile });
      const owner = a.bootstrapSecret!;
      const s = await req(a, 'POST', `${A}/secrets`, owner, { name: 'openai', value: 'sk-first' });
      assert.equal(s.status, 201, s.text);
      const p = await req(a, 'POST', `${A}/ai/model-providers`, owner, {
        provider_type: 'openai-compatible',
        default_model: 'fake-model',
        base_url: `${open.url}/v1`,
        api_key_secret_id: s.body.secret_id,
        max_retries: 0,
      });
      assert.equal(p.status, 201, p.text);
      const keyOfCall = async (c: RunningCell) => {
        await c.modules.ai.ai.call(p.body.provider_id, { messages: [{ role: 'user', content: 'hi' }] });
        return open.requests.at(-1)!.authorization;
      };
      assert.equal(await keyOfCall(b), 'Bearer sk-first');
      assert.equal(await keyOfCall(b), 'Bearer sk-first', 'served from the cache');
      // Rotated on cell A: cell B's cache is emptied when it hears the change (well under a second).
      const rotated = await req(a, 'POST', `${A}/secrets/${s.body.secret_id}/rotate`, owner, { value: 'sk-second' });
      assert.equal(rotated.status, 200, rotated.text);
      const deadline = Date.now() + 20_000;
      while ((await keyOfCall(b)) !== 'Bearer sk-second') {
        assert.ok(Date.now() < deadline, "cell B still calls with the secret's old value");
        await new Promise((r) => setTimeout(r, 50));
      }
      // Rotated on cell B itself: its very next call uses the new value.
      const again = await req(b, 'POST', `${A}/secrets/${s.body.secret_id}/rotate`, owner, { value: 'sk-third' });
      assert.equal(again.status, 200, again.text);
      assert.equal(await keyOfCall(b), 'Bearer sk-third');
      // The secret deleted on cell A (after its provider): cell B refuses the call once it hears it.
      const gone = await req(a, 'DELETE', `${A}/ai/model-providers/${p.body.provider_id}`, owner);
      assert.ok([200, 204].includes(gone.status), gone.text);
      const until = Date.now() + 20_000;
      for (;;) {
        const r = await b.modules.ai.ai.call(p.body.provider_id, { messages: [{ role: 'user', content: 'hi' }] }).then(
          () => null,
          (e: unknown) => e as { code?: string },
        );
        if (r?.code === 'not_found') break;
        assert.ok(Date.now() < until, 'cell B still calls a provider deleted on cell A');
        await new Promise((res) => setTimeout(res, 50));
      }
    } finally {
      await open.close();
    }
  });

  test('a member started with another key before the first secret is refused at start: the first start recorded the check', async () => {
    const db = await pgDatabase();
    dbs.push(db);
    await cell(db, { secretsKeyFile: keyFile });
    assert.ok((await adminQuery(db.url, 'SELECT 1 FROM custody_key_check')).rows.length === 1, 'recorded by the first start');
    await assert.rejects(cell(db, { secretsKeyFile: otherKeyFile }), /does not open the store's key check.*--secrets-key-file/);
  });

  test("a member whose store's key check was replaced under it seals nothing the group cannot open, and sends no secret it cannot open", async () => {
    const db = await pgDatabase();
    dbs.push(db);
    const a = await cell(db, { secretsKeyFile: keyFile });
    const stray = await cell(db, { secretsKeyFile: keyFile });
    const owner = a.bootstrapSecret!;
    const s = await req(a, 'POST', `${A}/secrets`, owner, { name: 'first', value: 'sk-group-secret' });
    assert.equal(s.status, 201, s.text);
    // Someone with the database (or a store restored from another group) puts a check sealed under another key.
    const other = readFileSync(otherKeyFile);
    await adminQuery(db.url, `UPDATE custody_key_check SET sealed = '\\x${Buffer.from(sealCheck(other)).toString('hex')}'`);
    const refused = await req(stray, 'POST', `${A}/secrets`, owner, { name: 'second', value: 'sk-other' });
    assert.equal(refused.status, 503, refused.text);
    assert.equal(refused.body.error, 'service_unavailable');
    assert.equal(refused.body.details.reason, 'secrets_key_mismatch');
    assert.equal(await secretCount(a), 1, 'nothing written');
    // Nor reseal the group's secret with its own key (a rotation): refused the same way.
    const rotated = await req(stray, 'POST', `${A}/secrets/${s.body.secret_id}/rotate`, owner, { value: 'sk-other' });
    assert.equal(rotated.status, 503, rotated.text);
    assert.equal(rotated.body.details.reason, 'secrets_key_mismatch');
    // A secret it cannot open (its sealed value replaced by one under another key) is never sent: 503 secret_unreadable.
    await adminQuery(
      db.url,
      `UPDATE ai_secrets SET sealed = '\\x${Buffer.from(sealSecret(other, s.body.secret_id, 'sk-planted')).toString('hex')}' WHERE secret_id = '${s.body.secret_id}'`,
    );
    const p = await req(a, 'POST', `${A}/ai/model-providers`, owner, {
      provider_type: 'openai-compatible',
      default_model: 'fake-model',
      base_url: `${ai.url}/v1`,
      api_key_secret_id: s.body.secret_id,
      max_retries: 0,
    });
    assert.equal(p.status, 201, p.text);
    const calls = ai.requests.length;
    await assert.rejects(stray.modules.ai.ai.call(p.body.provider_id, { messages: [{ role: 'user', content: 'hi' }] }), (e: any) => {
      assert.equal(e.details?.reason, 'secret_unreadable');
      return true;
    });
    assert.equal(ai.requests.length, calls);
  });
});

describe('the secrets key file on the embedded engine (one cell)', { timeout: 60_000 }, () => {
  test('the cell seals with the file given, not its own; a file of the wrong size is refused at start', async () => {
    const root = mkdtempSync(join(tmpdir(), 'cell-secrets-emb-'));
    const ai = await startOpenAIServer({ apiKey: 'sk-embedded' });
    let c: RunningCell | null = null;
    try {
      const keyFile = join(root, 'group.key');
      writeFileSync(keyFile, randomBytes(32), { mode: 0o600 });
      const short = join(root, 'short.key');
      writeFileSync(short, randomBytes(31));
      await assert.rejects(
        startCell({ config: { dataDir: join(root, 'short'), secretsKeyFile: short }, listen: false, log: quiet }),
        /holds 31 bytes; it must hold exactly 32/,
      );
      const dataDir = join(root, 'cell');
      c = await startCell({ config: { dataDir, secretsKeyFile: keyFile }, listen: false, log: quiet });
      const owner = c.bootstrapSecret!;
      const post = (path: string, body: unknown) =>
        c!.app.request(path, {
          method: 'POST',
          headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const s = await post(`${A}/secrets`, { name: 'k', value: 'sk-embedded' });
      assert.equal(s.status, 201);
      const secretId = ((await s.json()) as { secret_id: string }).secret_id;
      const p = await post(`${A}/ai/model-providers`, {
        provider_type: 'openai-compatible',
        default_model: 'fake-model',
        base_url: `${ai.url}/v1`,
        api_key_secret_id: secretId,
        max_retries: 0,
      });
      assert.equal(p.status, 201);
      const providerId = ((await p.json()) as { provider_id: string }).provider_id;
      assert.equal((await c.modules.ai.ai.call(providerId, { messages: [{ role: 'user', content: 'hi' }] })).content, 'ok');
      assert.equal(ai.requests.at(-1)!.authorization, 'Bearer sk-embedded');
      assert.equal(existsSync(join(dataDir, 'secrets.key')), false, 'no key of its own was made');
    } finally {
      await c?.stop();
      await ai.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});
