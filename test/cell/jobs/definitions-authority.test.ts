// Security review, finding 6: schedules kept firing after their author's key was
// revoked and the author deleted (runs carried a deleted requester), and an
// every-second cron was accepted. A definition now acts only while its author is
// an active principal holding, within the authority recorded at authoring, what
// the job type needs; crons firing more often than the minimum interval are
// refused, and each principal has a quota of live definitions.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { CellConfig } from '../../../cell/config.ts';
import { inProcessCell, type InProcess } from '../../helpers/inproc.ts';

const A = '/api/public/v1/admin';
const DEFS = `${A}/jobs/definitions`;
const MIN = 60_000;
const compute = (name: string, cron = '*/5 * * * *') => ({
  name,
  job_type: 'compute',
  workspace_id: 'w',
  spec: { code: 'return 1' },
  cron,
});

async function cell(config: Partial<CellConfig> = {}): Promise<InProcess> {
  return inProcessCell({ config });
}

async function call(t: InProcess, token: string, method: string, path: string, body?: unknown) {
  return t.request(method, path, { token, ...(body !== undefined ? { body } : {}) });
}

/** A service principal with `roles` and a key of it (scoped when `scopes` is given). */
async function principal(
  t: InProcess,
  name: string,
  roles: string[],
  scopes?: string[],
): Promise<{ id: string; key: string; keyId: string }> {
  const p = await call(t, t.adminKey, 'POST', `${A}/principals`, { kind: 'service', name, roles });
  assert.equal(p.status, 201, p.text);
  const k = await call(t, t.adminKey, 'POST', `${A}/api-keys`, { name: `${name}-key`, owner_id: p.body.id, ...(scopes ? { scopes } : {}) });
  assert.equal(k.status, 201, k.text);
  return { id: p.body.id, key: k.body.secret, keyId: k.body.key_id };
}

const count = async (t: InProcess, sql: string, params: string[] = []) => Number((await t.row(sql, params))!['n']);
const runsBy = (t: InProcess, requester: string) => count(t, 'SELECT COUNT(*) AS n FROM runs WHERE requester = ?', [requester]);
const definitionRows = (t: InProcess) => count(t, 'SELECT COUNT(*) AS n FROM job_definitions');
const auditOf = async (t: InProcess, target: string, action: string) =>
  (await t.rows('SELECT actor, details FROM audit WHERE target = ? AND action = ? ORDER BY seq', [target, action])).map((r) => ({
    actor: r['actor'],
    details: typeof r['details'] === 'string' ? (JSON.parse(r['details']) as Record<string, unknown>) : null,
  }));

test("the attack: the author's key is revoked and the author deleted; its schedule stops at once, on the audit trail", async () => {
  const t = await cell();
  try {
    const p = await principal(t, 'scheduler-bot', ['jobs']);
    const d = await call(t, p.key, 'POST', DEFS, compute('every five'));
    assert.equal(d.status, 201, d.text);
    assert.equal(d.body.author_id, p.id);
    assert.equal(d.body.created_by, p.id);
    t.clock.advance(5 * MIN);
    assert.equal(await t.modules.jobs.scheduler.tick(), 1);
    assert.equal(await runsBy(t, p.id), 1, 'it fires while its author is active');

    assert.equal((await call(t, t.adminKey, 'POST', `${A}/api-keys/${p.keyId}/revoke`)).status, 200);
    const del = await call(t, t.adminKey, 'DELETE', `${A}/principals/${p.id}`);
    assert.equal(del.status, 200, del.text);

    const after = (await call(t, t.adminKey, 'GET', `${DEFS}/${d.body.schedule_id}`)).body;
    assert.equal(after.enabled, false);
    assert.equal(after.disabled_reason, 'author_deleted');
    assert.equal(after.next_fire_at, null);
    const audit = await auditOf(t, d.body.schedule_id, 'jobs.definition.disable');
    assert.equal(audit.length, 1);
    assert.equal(audit[0]!.details!['reason'], 'author_deleted');
    assert.equal(audit[0]!.details!['author'], p.id);

    for (let i = 0; i < 12; i++) {
      t.clock.advance(5 * MIN);
      await t.modules.jobs.scheduler.tick();
    }
    assert.equal(await runsBy(t, p.id), 1, 'no run carries the deleted requester');
    assert.equal((await call(t, p.key, 'POST', `${DEFS}/${d.body.schedule_id}/enable`)).status, 401, 'the revoked key cannot re-enable it');

    // Restoring the principal does not bring its schedules back: enabling is a deliberate act.
    assert.equal((await call(t, t.adminKey, 'POST', `${A}/principals/${p.id}/restore`)).status, 200);
    assert.equal((await call(t, t.adminKey, 'GET', `${DEFS}/${d.body.schedule_id}`)).body.enabled, false);
  } finally {
    await t.close();
  }
});

test("archive and purge disable too; other principals' definitions keep firing", async () => {
  const t = await cell();
  try {
    const a = await principal(t, 'archived-bot', ['jobs']);
    const b = await principal(t, 'purged-bot', ['jobs']);
    const c = await principal(t, 'bystander', ['jobs']);
    const da = (await call(t, a.key, 'POST', DEFS, compute('a'))).body.schedule_id as string;
    const db = (await call(t, b.key, 'POST', DEFS, compute('b'))).body.schedule_id as string;
    const dc = (await call(t, c.key, 'POST', DEFS, compute('c'))).body.schedule_id as string;
    assert.equal((await call(t, t.adminKey, 'POST', `${A}/principals/${a.id}/archive`)).status, 200);
    assert.equal((await call(t, t.adminKey, 'POST', `${A}/principals/${b.id}/purge`)).status, 200);
    const reason = async (id: string) => (await call(t, t.adminKey, 'GET', `${DEFS}/${id}`)).body.disabled_reason;
    assert.equal(await reason(da), 'author_archived');
    assert.equal(await reason(db), 'author_purged');
    assert.equal(await reason(dc), null);
    t.clock.advance(5 * MIN);
    assert.equal(await t.modules.jobs.scheduler.tick(), 1);
    assert.deepEqual([await runsBy(t, a.id), await runsBy(t, b.id), await runsBy(t, c.id)], [0, 0, 1]);
  } finally {
    await t.close();
  }
});

test('at fire time the author is judged again: inactive, no longer holding the permission, or authority never recorded', async () => {
  const t = await cell();
  try {
    const narrowed = await principal(t, 'narrowed', ['jobs']);
    const silent = await principal(t, 'silently-archived', ['jobs']);
    const d1 = (await call(t, narrowed.key, 'POST', DEFS, compute('n'))).body.schedule_id as string;
    const d2 = (await call(t, silent.key, 'POST', DEFS, compute('s'))).body.schedule_id as string;
    const d3 = (await call(t, t.adminKey, 'POST', DEFS, compute('legacy'))).body.schedule_id as string;
    // No route changes a principal's roles or skips the lifecycle hook: change the store as a
    // migration or an out-of-band edit would, so only the fire-time check stands in the way.
    await t.core.store.write(async (tx) => {
      await tx.run('UPDATE principals SET roles = \'["viewer"]\' WHERE id = ?', [narrowed.id]);
      await tx.run("UPDATE principals SET status = 'archived' WHERE id = ?", [silent.id]);
      await tx.run('UPDATE job_definitions SET author_authority = NULL WHERE schedule_id = ?', [d3]);
    });
    t.clock.advance(5 * MIN);
    assert.equal(await t.modules.jobs.scheduler.tick(), 0, 'nothing fires');
    assert.equal(await count(t, 'SELECT COUNT(*) AS n FROM runs'), 0, 'no run was created');
    for (const [id, reason] of [
      [d1, 'author_lacks_permission'],
      [d2, 'author_inactive'],
      [d3, 'author_authority_unknown'],
    ] as const) {
      const d = (await call(t, t.adminKey, 'GET', `${DEFS}/${id}`)).body;
      assert.equal(d.enabled, false, id);
      assert.equal(d.disabled_reason, reason);
      const fire = await t.row('SELECT state, detail FROM job_fires WHERE schedule_id = ?', [id]);
      assert.deepEqual(fire, { state: 'refused', detail: reason });
      const audit = await auditOf(t, id, 'jobs.definition.disable');
      assert.equal(audit.length, 1);
      assert.equal(audit[0]!.actor, 'system:scheduler');
      assert.equal(audit[0]!.details!['reason'], reason);
    }
    // Re-enabling records the enabler's authority: the legacy definition fires again.
    assert.equal((await call(t, t.adminKey, 'POST', `${DEFS}/${d3}/enable`)).status, 200);
    t.clock.advance(5 * MIN);
    assert.equal(await t.modules.jobs.scheduler.tick(), 1);
  } finally {
    await t.close();
  }
});

test('the recorded authority bounds the definition: a narrow key cannot schedule crews, and a wider role later does not widen it', async () => {
  const t = await cell();
  try {
    const op = await principal(t, 'operator-bot', ['operator'], ['system.orchestration.admin.write']);
    const before = await definitionRows(t);
    const team = await call(t, op.key, 'POST', DEFS, {
      name: 't',
      job_type: 'team',
      spec: { crew_id: 'crw_00000000000000000000' },
      cron: '0 * * * *',
    });
    assert.equal(team.status, 403, team.text);
    assert.equal(team.body.details.reason, 'missing_permission');
    assert.equal(team.body.details.required_permission, 'agent_teams.write');
    assert.equal(await definitionRows(t), before, 'nothing written');
    // The operator role holds agent_teams.write, the key that authored did not: the intersection rules.
    assert.equal(
      await t.modules.jobs.authorityLapse({
        job_type: 'team',
        author_id: op.id,
        author_authority: JSON.stringify(['system.orchestration.admin.write']),
      }),
      'author_lacks_permission',
    );
    assert.equal(
      await t.modules.jobs.authorityLapse({ job_type: 'team', author_id: op.id, author_authority: JSON.stringify(['*']) }),
      null,
    );
    assert.equal(
      await t.modules.jobs.authorityLapse({
        job_type: 'compute',
        author_id: op.id,
        author_authority: JSON.stringify(['system.orchestration.admin.write']),
      }),
      null,
    );
  } finally {
    await t.close();
  }
});

test("changing or enabling a definition makes the caller its author; a narrower principal cannot take the owner's over", async () => {
  const t = await cell();
  try {
    const owners = (await call(t, t.adminKey, 'POST', DEFS, compute('owner job'))).body;
    // A jobs-only principal cannot re-author (nor disable, nor delete) what acts as the owner: the shared-things rule.
    const q = await principal(t, 'jobs-only', ['jobs']);
    const refused = await call(t, q.key, 'PATCH', `${DEFS}/${owners.schedule_id}`, { spec: { code: 'return "mine"' } });
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.details.reason, 'shared_change_exceeds_caller');
    // A principal who manages the author (holds all it holds) re-authors it: the definition acts as it from then on.
    const m = await principal(t, 'jobs-operator', ['jobs', 'operator']);
    const mine = (await call(t, q.key, 'POST', DEFS, compute('q job'))).body;
    const p = await call(t, m.key, 'PATCH', `${DEFS}/${mine.schedule_id}`, { spec: { code: 'return "mine"' } });
    assert.equal(p.status, 200, p.text);
    assert.equal(p.body.author_id, m.id);
    assert.equal(p.body.created_by, q.id);
    await call(t, t.adminKey, 'POST', `${DEFS}/${owners.schedule_id}/disable`);
    t.clock.advance(5 * MIN);
    assert.equal(await t.modules.jobs.scheduler.tick(), 1);
    assert.equal(await runsBy(t, m.id), 1, 'the run acts as the principal who changed it');
    assert.equal(await runsBy(t, q.id), 0, 'not as the one who created it');
    const audit = await auditOf(t, mine.schedule_id, 'jobs.definition.update');
    assert.equal(audit[0]!.details!['previous_author'], q.id);
  } finally {
    await t.close();
  }
});

test('minimum interval: every-second and sub-minute crons are 400 cron_too_frequent, nothing written; configurable; the scheduler spaces fires', async () => {
  const t = await cell();
  try {
    const before = await definitionRows(t);
    for (const [cron, gap] of [
      ['* * * * * *', 1],
      ['*/30 * * * * *', 30],
      ['0,59 * * * * *', 1],
      ['0 0,59 23 * * *', 3540],
      ['10,40 * * * * *', 30],
    ] as const) {
      const r = await call(t, t.adminKey, 'POST', DEFS, compute('fast', cron));
      if (gap >= 60) {
        assert.equal(r.status, 201, `${cron}: ${r.text}`);
        continue;
      }
      assert.equal(r.status, 400, `${cron}: ${r.text}`);
      assert.equal(r.body.error, 'invalid_request');
      assert.equal(r.body.details.reason, 'cron_too_frequent');
      assert.equal(r.body.details.interval_seconds, gap);
      assert.equal(r.body.details.min_interval_seconds, 60);
    }
    assert.equal(await definitionRows(t), before + 1, 'only the hourly-ish one was written');
    for (const ok of ['* * * * *', '0 * * * * *', '0 0,59 * * * *', '59 23 * * *', '0 0 29 2 *']) {
      assert.equal((await call(t, t.adminKey, 'POST', DEFS, compute('ok', ok))).status, 201, ok);
    }
    const id = (await call(t, t.adminKey, 'POST', DEFS, compute('patched'))).body.schedule_id as string;
    const p = await call(t, t.adminKey, 'PATCH', `${DEFS}/${id}`, { cron: '*/10 * * * * *' });
    assert.equal(p.status, 400);
    assert.equal(p.body.details.reason, 'cron_too_frequent');
    assert.equal((await call(t, t.adminKey, 'GET', `${DEFS}/${id}`)).body.cron, '*/5 * * * *', 'the PATCH changed nothing');

    // A definition stored before the minimum existed (every second) still fires at most once a minute.
    await t.core.store.write((tx) =>
      tx.run("UPDATE job_definitions SET cron = '* * * * * *', next_fire_at = ? WHERE schedule_id = ?", [t.clock.now() + 1000, id]),
    );
    await t.modules.jobs.scheduler.rearm();
    for (let s = 0; s < 120; s++) {
      t.clock.advance(1000);
      await t.modules.jobs.scheduler.tick();
    }
    const fired = await count(t, 'SELECT COUNT(*) AS n FROM runs WHERE source = ?', [`schedule:${id}`]);
    assert.equal(fired, 2, 'two fires in two minutes, not 120');
  } finally {
    await t.close();
  }
  const slow = await cell({ scheduleMinIntervalSeconds: 300 });
  try {
    const r = await call(slow, slow.adminKey, 'POST', DEFS, compute('two', '*/2 * * * *'));
    assert.equal(r.status, 400);
    assert.equal(r.body.details.min_interval_seconds, 300);
    assert.equal((await call(slow, slow.adminKey, 'POST', DEFS, compute('five', '*/5 * * * *'))).status, 201);
  } finally {
    await slow.close();
  }
});

test('per-principal quota: 409 definition_quota_reached past it, nothing written; deleting frees a slot; taking over counts', async () => {
  const t = await cell({ definitionQuota: 2 });
  try {
    const p = await principal(t, 'prolific', ['jobs']);
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) ids.push((await call(t, p.key, 'POST', DEFS, compute(`d${i}`))).body.schedule_id);
    const before = await definitionRows(t);
    const over = await call(t, p.key, 'POST', DEFS, compute('one too many'));
    assert.equal(over.status, 409, over.text);
    assert.equal(over.body.error, 'conflict');
    assert.equal(over.body.details.reason, 'definition_quota_reached');
    assert.equal(over.body.details.quota, 2);
    assert.equal(await definitionRows(t), before, 'nothing written');
    assert.equal((await call(t, t.adminKey, 'POST', DEFS, compute('owner'))).status, 201, 'the quota is per principal');
    assert.equal((await call(t, p.key, 'DELETE', `${DEFS}/${ids[0]}`)).status, 200);
    assert.equal((await call(t, p.key, 'POST', DEFS, compute('again'))).status, 201, 'a deleted definition frees its slot');
    // The owner authors two now: taking over another of p's would make three.
    assert.equal((await call(t, t.adminKey, 'POST', DEFS, compute('owner 2'))).status, 201);
    const take = await call(t, t.adminKey, 'PATCH', `${DEFS}/${ids[1]}`, { name: 'mine now' });
    assert.equal(take.status, 409);
    assert.equal(take.body.details.reason, 'definition_quota_reached');
    assert.equal((await call(t, t.adminKey, 'GET', `${DEFS}/${ids[1]}`)).body.author_id, p.id, 'unchanged');
  } finally {
    await t.close();
  }
});

test('a definition made through a narrow API key dies with the key; one made through a key-less session keeps firing', async () => {
  const t = await cell();
  try {
    const { basic, form, registerClient } = await import('../../helpers/oauth.ts');
    const p = await principal(t, 'key-author', ['jobs'], ['system.orchestration.admin.write']);
    const viaKey = await call(t, p.key, 'POST', DEFS, compute('via key'));
    assert.equal(viaKey.status, 201, viaKey.text);
    const root = await t.row('SELECT author_root FROM job_definitions WHERE schedule_id = ?', [viaKey.body.schedule_id]);
    assert.equal(root!['author_root'], `api_key:${p.keyId}`, 'the key is recorded as the root');
    assert.equal(viaKey.body.author_root, `api_key:${p.keyId}`);

    // The owner's own key-less token (a client the admin registered for it): no root is recorded.
    const client = await registerClient(t, { name: 'owner-session', scope: ['system.orchestration.admin.write'], subject_id: p.id });
    const tok = await form(t, '/oauth/token', { grant_type: 'client_credentials' }, basic(client.client_id, client.client_secret!));
    assert.equal(tok.status, 200, tok.text);
    const viaSession = await call(t, tok.body.access_token, 'POST', DEFS, compute('via session'));
    assert.equal(viaSession.status, 201, viaSession.text);
    const noRoot = await t.row('SELECT author_root FROM job_definitions WHERE schedule_id = ?', [viaSession.body.schedule_id]);
    assert.equal(noRoot!['author_root'], null);
    assert.equal(viaSession.body.author_root, null);

    t.clock.advance(5 * MIN);
    assert.equal(await t.modules.jobs.scheduler.tick(), 2);
    assert.equal(await runsBy(t, p.id), 2, 'both fire while the key is active');

    assert.equal((await call(t, t.adminKey, 'POST', `${A}/api-keys/${p.keyId}/revoke`)).status, 200);
    t.clock.advance(5 * MIN);
    await t.modules.jobs.scheduler.tick();
    assert.equal(await runsBy(t, p.id), 3, 'only the session-made definition ran');

    const dead = (await call(t, t.adminKey, 'GET', `${DEFS}/${viaKey.body.schedule_id}`)).body;
    assert.equal(dead.enabled, false);
    assert.equal(dead.disabled_reason, 'root_revoked');
    const audit = await auditOf(t, viaKey.body.schedule_id, 'jobs.definition.disable');
    assert.equal(audit.length, 1);
    assert.equal(audit[0]!.actor, 'system:scheduler');
    assert.equal(audit[0]!.details!['reason'], 'root_revoked');
    assert.equal(audit[0]!.details!['author'], p.id);
    const alive = (await call(t, t.adminKey, 'GET', `${DEFS}/${viaSession.body.schedule_id}`)).body;
    assert.equal(alive.enabled, true);

    t.clock.advance(5 * MIN);
    await t.modules.jobs.scheduler.tick();
    assert.equal(await runsBy(t, p.id), 4, 'the session-made definition keeps firing; the key-made one stays off');
  } finally {
    await t.close();
  }
});
