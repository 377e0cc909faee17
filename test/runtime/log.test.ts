/**
 * runtime/log.ts, the real pino pipeline into real files (and, for the
 * process exits, into the pipes of a child process): JSON lines with the
 * documented fields, levels split between stdout and stderr, `--log-level`,
 * the pretty line, redaction of secret-named fields and key secrets anywhere
 * in a line, the access line's fast path (the same bytes as pino's), and
 * every line written on a clean stop and on a fatal error.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it, mock } from 'node:test';
import { accessLine, AccessLineEncoder, ENCODE_ROOM, mayHoldKeySecret, millis } from '../../runtime/internal/access-line.ts';
import { CENSOR, redactFields, redactLine } from '../../runtime/internal/redact.ts';
import { ServiceError } from '../../core/errors.ts';
import { type AccessFields, createLogger, isoTime, type LogFormat, type LogLevel } from '../../runtime/log.ts';

const dir = mkdtempSync(join(tmpdir(), 'log-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** A logger writing to two files; `lines()` after close. */
function fileLogger(level: LogLevel, format: LogFormat) {
  const out = join(dir, `out-${++n}.log`);
  const err = join(dir, `err-${n}.log`);
  const log = createLogger({ level, format, out, err });
  const read = (f: string) => readFileSync(f, 'utf8').split('\n').filter(Boolean);
  return { log, out: () => read(out), err: () => read(err) };
}

const KEY = `svck_live_${'A1b2_-'.repeat(7)}x`;
const ACCESS: AccessFields = {
  request_id: '6f1c2f4e-3a53-4ad4-9a43-1c9f0e5d2b7a',
  route: '/api/public/v1/admin/ai/tool-registry',
  method: 'GET',
  status: 200,
  duration_ms: 1.983,
  principal_id: 'p_1',
  credential_kind: 'api_key',
  key_id: 'k_1',
};
const SECRETS = ['Bearer tok-auth-1', 'sid=cookie-2', 'plain-secret-3', 'client-secret-4', 'subject-token-5', 'Basic cHJveHk6Ng==', KEY];

/** Logs every kind of secret the redaction names, at the top level and nested, in values, keys and the message. */
function logSecrets(log: ReturnType<typeof createLogger>) {
  log.warn(`presented ${KEY} then`, {
    authorization: SECRETS[0],
    headers: { Cookie: SECRETS[1], 'Proxy-Authorization': SECRETS[5], accept: 'application/json' },
    secret: SECRETS[2],
    body: { grant_type: 'token-exchange', client_secret: SECRETS[3], exchange: [{ subject_token: SECRETS[4] }] },
    note: `the key was ${KEY}.`,
    [`field_${KEY}`]: 1,
    error: new Error(`refused ${KEY}`),
    kept: 'visible',
  });
}

describe('runtime/log: JSON lines', () => {
  it('info on stdout, warn and error on stderr; the documented fields; nulls kept, undefined left out', async () => {
    const f = fileLogger('info', 'json');
    f.log.info('request', {
      request_id: 'r1',
      route: '/healthz',
      method: 'GET',
      status: 200,
      duration_ms: 1.5,
      principal_id: null,
      trace_id: undefined,
    });
    f.log.warn('careful', { n: 1 });
    f.log.error('broken', { error: 'x' });
    await f.log.close();
    assert.equal(f.out().length, 1);
    const line = JSON.parse(f.out()[0]!) as Record<string, unknown>;
    assert.deepEqual(Object.keys(line).sort(), [
      'duration_ms',
      'level',
      'method',
      'msg',
      'principal_id',
      'request_id',
      'route',
      'status',
      'time',
    ]);
    assert.equal(line['level'], 30, "pino's numeric level");
    assert.equal(line['msg'], 'request');
    assert.equal(line['principal_id'], null);
    assert.ok(!Number.isNaN(Date.parse(String(line['time']))) && String(line['time']).endsWith('Z'), String(line['time']));
    assert.deepEqual(
      f
        .err()
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .map((l) => [l['level'], l['msg']]),
      [
        [40, 'careful'],
        [50, 'broken'],
      ],
    );
  });

  it("pino's numeric levels: pino-pretty -L and jq 'select(.level>=40)' keep warn and error, and read the access line", async () => {
    const one = join(dir, `mixed-${++n}.log`);
    const log = createLogger({ level: 'info', format: 'json', out: one, err: one });
    log.info('plain info', { n: 1 });
    log.request(ACCESS);
    log.warn('a warning', { n: 2 });
    log.error('an error', { error: new Error('boom') });
    await log.close();
    const pino = spawnSync(
      process.execPath,
      [resolve(import.meta.dirname, '../../node_modules/pino-pretty/bin.js'), '-L', 'warn', '-c', 'false'],
      {
        input: readFileSync(one),
        encoding: 'utf8',
      },
    );
    assert.equal(pino.status, 0, pino.stderr);
    assert.match(pino.stdout, /WARN.*a warning/);
    assert.match(pino.stdout, /ERROR.*an error/);
    assert.doesNotMatch(pino.stdout, /plain info|request/, 'pino-pretty -L warn drops info and the access line');
    const all = spawnSync(process.execPath, [resolve(import.meta.dirname, '../../node_modules/pino-pretty/bin.js'), '-c', 'false'], {
      input: readFileSync(one),
      encoding: 'utf8',
    });
    assert.match(all.stdout, /INFO.*request/, 'pino-pretty reads the fast access line as its own');
    if (existsSync('/usr/bin/jq')) {
      const jq = spawnSync('/usr/bin/jq', ['-c', 'select(.level>=40) | .msg'], { input: readFileSync(one), encoding: 'utf8' });
      assert.equal(jq.status, 0, jq.stderr);
      assert.deepEqual(jq.stdout.trim().split('\n'), ['"a warning"', '"an error"']);
    }
  });

  it('an error in a field is written as {type, message, code, stack}', async () => {
    const f = fileLogger('info', 'json');
    f.log.error('failed', { error: new ServiceError('not_found', 'no such thing') });
    const enoent = Object.assign(new Error('ENOENT: no such file'), { code: 'ENOENT' });
    f.log.warn('not read', { error: enoent });
    await f.log.close();
    const [a, b] = f.err().map((l) => JSON.parse(l) as { error: Record<string, string> });
    assert.deepEqual(Object.keys(a!.error), ['type', 'message', 'code', 'stack']);
    assert.deepEqual([a!.error['type'], a!.error['message'], a!.error['code']], ['ServiceError', 'no such thing', 'not_found']);
    assert.match(a!.error['stack']!, /\n\s+at /);
    assert.deepEqual([b!.error['type'], b!.error['code']], ['Error', 'ENOENT']);
  });

  it('--log-level drops the lines below it, and says so to callers', async () => {
    const f = fileLogger('warn', 'json');
    assert.equal(f.log.enabled('info'), false);
    assert.equal(f.log.enabled('warn'), true);
    f.log.info('request', { request_id: 'dropped' });
    f.log.request(ACCESS);
    f.log.warn('kept');
    await f.log.close();
    assert.deepEqual(f.out(), []);
    assert.equal(f.err().length, 1);
    const e = fileLogger('error', 'json');
    e.log.warn('dropped');
    e.log.error('kept');
    await e.log.close();
    assert.deepEqual(
      e.err().map((l) => (JSON.parse(l) as { msg: string }).msg),
      ['kept'],
    );
  });

  it('the banner: JSON lines with their fields, in order with the lines before it, whatever the level', async () => {
    const f = fileLogger('info', 'json');
    f.log.info('first');
    f.log.banner([
      { msg: 'cell c1 listening on http://127.0.0.1:1', fields: { cell_id: 'c1', url: 'http://127.0.0.1:1' } },
      { msg: 'metrics on http://127.0.0.1:2/metrics' },
    ]);
    f.log.info('second');
    await f.log.close();
    const out = f.out().map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      out.map((l) => l['msg']),
      ['first', 'cell c1 listening on http://127.0.0.1:1', 'metrics on http://127.0.0.1:2/metrics', 'second'],
    );
    assert.deepEqual(Object.keys(out[1]!), ['level', 'time', 'cell_id', 'url', 'msg'], "pino's shape");
    assert.equal(out[1]!['level'], 30);
    assert.equal(out[1]!['url'], 'http://127.0.0.1:1');
    const quiet = fileLogger('error', 'json');
    quiet.log.banner([{ msg: 'listening' }]);
    await quiet.log.close();
    assert.equal((JSON.parse(quiet.out()[0]!) as { msg: string }).msg, 'listening', '--log-level error keeps the banner');
    const pretty = fileLogger('info', 'pretty');
    pretty.log.banner([{ msg: 'cell c1 listening on http://127.0.0.1:1', fields: { url: 'http://127.0.0.1:1' } }]);
    await pretty.log.close();
    assert.deepEqual(pretty.out(), ['cell c1 listening on http://127.0.0.1:1'], 'pretty: the message alone');
  });

  it('access lines keep their place among the other lines (they are serialised a few at a time)', async () => {
    const f = fileLogger('info', 'json');
    const expected: string[] = [];
    const request = (id: string) => {
      f.log.request({ ...ACCESS, request_id: id });
      expected.push(`request ${id}`);
    };
    request('a');
    f.log.info('one');
    expected.push('one');
    for (let i = 0; i < 100; i++) request(`b${i}`); // more than a queue's worth in a row
    f.log.banner([{ msg: 'banner' }]);
    expected.push('banner');
    request('c');
    await new Promise((r) => setTimeout(r, 50)); // past the gathering time: a queue handed by its timer
    request('d');
    f.log.info('two');
    expected.push('two');
    request('e');
    await f.log.close();
    const seen = f.out().map((l) => {
      if (!l.startsWith('{')) return l;
      const o = JSON.parse(l) as { msg: string; request_id?: string };
      return o.msg === 'request' ? `request ${o.request_id}` : o.msg;
    });
    assert.deepEqual(seen, expected);
  });

  it('lines past maxBufferBytes are dropped, counted and reported in one warn line', async () => {
    const out = join(dir, `out-${++n}.log`);
    const err = join(dir, `err-${n}.log`);
    const log = createLogger({ level: 'info', format: 'json', out, err, maxBufferBytes: 200 * 1024 });
    const total = 20_000;
    // All in one turn: the first chunk is being written while the next ones come, and do not fit.
    for (let i = 0; i < total; i++) log.request({ ...ACCESS, request_id: String(i) });
    // The report comes once the output has caught up.
    let report: { level: number; dropped: number } | undefined;
    for (let t = 0; t < 500 && !report; t++) {
      await new Promise((r) => setTimeout(r, 10));
      const line = readFileSync(err, 'utf8')
        .split('\n')
        .find((l) => l.includes('log lines dropped'));
      if (line) report = JSON.parse(line) as { level: number; dropped: number };
    }
    await log.close();
    const written = readFileSync(out, 'utf8').split('\n').filter(Boolean);
    assert.ok(report, 'a warn line reports the drops');
    assert.equal(report.level, 40);
    assert.ok(report.dropped > 0 && written.length < total, `${written.length} written`);
    assert.equal(written.length + report.dropped, total, 'every line written or counted');
    const ids = written.map((l) => Number((JSON.parse(l) as { request_id: string }).request_id));
    assert.ok(
      ids.every((v, i) => i === 0 || v > ids[i - 1]!),
      'the written ones in order',
    );
  });

  it('close() writes every line: 20,000 lines of a burst, none lost', async () => {
    const f = fileLogger('info', 'json');
    for (let i = 0; i < 20_000; i++) f.log.info('request', { i, route: '/x'.repeat(20) });
    await f.log.close();
    const seen = f.out().map((l) => (JSON.parse(l) as { i: number }).i);
    assert.equal(seen.length, 20_000);
    assert.ok(
      seen.every((v, i) => v === i),
      'in order',
    );
  });
});

describe('runtime/log: the access line, serialised by a fixed shape', () => {
  const cases: AccessFields[] = [
    ACCESS,
    { ...ACCESS, principal_id: null, credential_kind: null, key_id: null, trace_id: '4bf92f3577b34da6a3ce929d0e0e4736' },
    { ...ACCESS, request_id: null, route: '(unmatched)', method: 'PATCH', status: 404, duration_ms: 0 },
    // What JSON escapes (quotes, backslashes, control characters, a lone surrogate) and what it does not (non-ASCII).
    { ...ACCESS, request_id: 'a"b\\c\n\u0001\ud800', route: '/é/ü', duration_ms: 1234.5 },
    { ...ACCESS, status: Number.NaN, duration_ms: Number.POSITIVE_INFINITY },
  ];
  const noTime = (l: string) => l.replace(/"time":"[^"]+"/, '"time":"T"');

  it("request() writes the bytes pino writes for info('request', fields), in the documented order", async () => {
    const f = fileLogger('info', 'json');
    for (const c of cases) {
      f.log.info('request', c);
      f.log.request(c);
    }
    await f.log.close();
    const out = f.out();
    assert.equal(out.length, cases.length * 2);
    for (let i = 0; i < cases.length; i++) assert.equal(noTime(out[2 * i + 1]!), noTime(out[2 * i]!), `case ${i}`);
    const keys = (l: string) => Object.keys(JSON.parse(l) as object);
    const documented = [
      'level',
      'time',
      'request_id',
      'route',
      'method',
      'status',
      'duration_ms',
      'principal_id',
      'credential_kind',
      'key_id',
    ];
    assert.deepEqual(keys(out[1]!), [...documented, 'msg']);
    assert.deepEqual(keys(out[3]!), [...documented, 'trace_id', 'msg']);
    const line = JSON.parse(out[7]!) as Record<string, unknown>;
    assert.equal(line['request_id'], cases[3]!.request_id, 'escaped, and read back as it was');
    assert.equal(line['route'], '/é/ü');
  });

  it('duration_ms: written from its integers, the text String gives (and String itself for other numbers)', () => {
    const samples = [0, -0, 1, 1.5, 0.001, 0.01, 0.1, 0.02, 0.002, 0.12, 0.012, 10.3, 999.999, 1000, 123456789.001];
    for (let i = 0; i < 20_000; i++) samples.push(Math.round(Math.random() * 10 ** (i % 10)) / 1000);
    for (const n of [...samples, 1.2345, -1.5, 1e-7, 1e300, 2 ** 60 / 1000]) assert.equal(millis(n), String(n), String(n));
    assert.equal(millis(Number.NaN), 'null');
    assert.equal(millis(Number.NEGATIVE_INFINITY), 'null');
  });

  it('the encoder writes the bytes of accessLine, and leaves every line it cannot write the same to it', () => {
    // Values of every kind: plain, to be escaped, non-ASCII, key secrets and near misses, long, null.
    const values = [
      'p_1',
      '/api/public/v1/admin/ai/tool-registry',
      '',
      ' ~!#$%&()*+,-./09:;<=>?@AZ[]^_`az{|}',
      'a"b',
      'a\\b',
      'tab\there',
      '\u007f',
      '/é/ü',
      '\ud800',
      KEY,
      `x${KEY}`,
      'svck_live',
      'ssvck_live_',
      'svck_lisvck_live_x',
      'svck_livesvck_live_',
      'svck_liv_e_',
      'x'.repeat(2100),
    ];
    const plain = values.slice(0, 4);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;
    // Mostly plain values, so that most lines are the encoder's; any of them now and then.
    const value = () => pick(Math.random() < 0.9 ? plain : values);
    const statuses = [200, 200, 200, 200, 200, 404, 0, 599, 1e14, 1e15, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY];
    const durations = [0, -0, 1.983, 0.001, 0.05, 12.5, 1000, 999.999, 1e12, 1.2345, -1.5, 1e-7, 2e12 + 0.001, Number.NaN];
    const time = isoTime();
    const encoder = new AccessLineEncoder();
    const buf = Buffer.alloc(ENCODE_ROOM + 16);
    let encoded = 0;
    for (let i = 0; i < 20_000; i++) {
      const nullable = () => (Math.random() < 0.2 ? null : value());
      const f: AccessFields = {
        request_id: Math.random() < 0.5 ? crypto.randomUUID() : nullable(),
        route: value(),
        method: Math.random() < 0.9 ? pick(['GET', 'POST']) : value(),
        status: pick(statuses),
        duration_ms: Math.random() < 0.8 ? Math.round(Math.random() * 10 ** (i % 9)) / 1000 : pick(durations),
        principal_id: nullable(),
        credential_kind: nullable(),
        key_id: nullable(),
        ...(Math.random() < 0.3 ? { trace_id: Math.random() < 0.5 ? '4bf92f3577b34da6a3ce929d0e0e4736' : value() } : {}),
      };
      const t = time(1764128834000 + i);
      const end = encoder.encode(buf.fill(0), 8, t, f);
      const line = accessLine(t, f);
      const strings = [f.request_id, f.route, f.method, f.principal_id, f.credential_kind, f.key_id, f.trace_id];
      const writable =
        strings.every((v) => v == null || (/^[\x20-\x7e]*$/.test(v) && !v.includes('"') && !v.includes('\\'))) &&
        !mayHoldKeySecret(f) &&
        Number.isInteger(f.status) &&
        f.status >= 0 &&
        f.status < 1e15 &&
        Math.round(f.duration_ms * 1000) / 1000 === f.duration_ms &&
        f.duration_ms >= 0 &&
        f.duration_ms <= 1e12 &&
        strings.reduce((n, v) => n + (v?.length ?? 0), t.length) <= 2048;
      assert.equal(end >= 0, writable, `${JSON.stringify(f)}: encoded ${end >= 0}`);
      if (end < 0) continue;
      encoded++;
      assert.ok(end - 8 <= ENCODE_ROOM, 'within the room it asks for');
      assert.equal(buf.subarray(8, end).toString('latin1'), line, JSON.stringify(f));
      assert.ok(
        buf.subarray(end).every((b) => b === 0),
        'nothing written past the line',
      );
    }
    assert.ok(encoded > 1000, `encoded ${encoded}`);
  });

  it("the encoder's first line may name the empty principal, credential kind and key (its cache starts empty)", () => {
    // Its last-lookup cache once started as the keys ('', '', '') with no bytes, so such a first line was refused.
    const f: AccessFields = {
      request_id: null,
      route: '',
      method: 'GET',
      status: 200,
      duration_ms: 0.005,
      principal_id: '',
      credential_kind: '',
      key_id: '',
    };
    const t = isoTime()(1764128834000);
    const buf = Buffer.alloc(ENCODE_ROOM + 16);
    const end = new AccessLineEncoder().encode(buf, 0, t, f);
    assert.ok(end > 0, 'written by the encoder');
    assert.equal(buf.subarray(0, end).toString('latin1'), accessLine(t, f));
  });

  it('time: the ISO instant of Date#toISOString, to the millisecond, across seconds', () => {
    const time = isoTime();
    const instants = [Date.UTC(2026, 10, 26, 3, 47, 14, 7), 1764128834000, 1764128834050, 1764128834999, 1764128835000, 1764128835123, 0];
    mock.timers.enable({ apis: ['Date'] });
    try {
      for (const t of instants) {
        mock.timers.setTime(t);
        assert.equal(time(), `,"time":"${new Date(t).toISOString()}"`);
        assert.equal(time(), `,"time":"${new Date(t).toISOString()}"`, 'the same millisecond again');
      }
    } finally {
      mock.timers.reset();
    }
  });

  it('a key secret in any of its fields is redacted, as in every line', async () => {
    const f = fileLogger('info', 'json');
    f.log.request({ ...ACCESS, request_id: KEY, key_id: `x${KEY}` });
    f.log.request({ ...ACCESS, trace_id: `${KEY}"` });
    f.log.request({ ...ACCESS, route: `/${KEY}` });
    await f.log.close();
    const text = f.out().join('\n');
    assert.ok(!text.includes('svck_live_'), text);
    const lines = f.out().map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(lines[0]!['request_id'], CENSOR);
    assert.equal(lines[0]!['key_id'], `x${CENSOR}`);
    assert.equal(lines[1]!['trace_id'], `${CENSOR}"`);
    assert.equal(lines[2]!['route'], `/${CENSOR}`);
  });
});

describe('runtime/log: redaction, configured once for every line', () => {
  for (const format of ['json', 'pretty'] as const) {
    it(`${format}: secret-named fields at any depth and key secrets anywhere are gone; the rest stays`, async () => {
      const f = fileLogger('info', format);
      logSecrets(f.log);
      await f.log.close();
      const text = f.err().join('\n');
      assert.ok(text.length > 0);
      for (const s of SECRETS) assert.ok(!text.includes(s), `${format} line carries ${s}: ${text}`);
      assert.ok(!text.includes('svck_live_'), text);
      assert.ok(!/tok-auth|cookie-2|secret-3|secret-4|token-5/.test(text), text);
      assert.match(text, /visible/);
      assert.match(text, /application\/json/);
      assert.match(text, /token-exchange/);
      assert.ok(text.includes(CENSOR));
      if (format === 'json') {
        const line = JSON.parse(text) as Record<string, any>;
        assert.equal(line['authorization'], CENSOR);
        assert.equal(line['headers']['Cookie'], CENSOR);
        assert.equal(line['headers']['Proxy-Authorization'], CENSOR);
        assert.equal(line['body']['exchange'][0]['subject_token'], CENSOR);
        assert.equal(line['msg'], `presented ${CENSOR} then`);
        assert.equal(line['error']['type'], 'Error');
        assert.equal(line['error']['message'], `refused ${CENSOR}`);
      }
    });
  }

  it('copies only what it changes', () => {
    const clean = { a: 1, b: { c: 'x' }, d: [1, 2] };
    assert.equal(redactFields(clean), clean);
    const dirty = { a: 1, b: { secret: 's' } };
    const out = redactFields(dirty);
    assert.notEqual(out, dirty);
    assert.deepEqual(dirty, { a: 1, b: { secret: 's' } }, 'the caller’s object is untouched');
    assert.deepEqual(out, { a: 1, b: { secret: CENSOR } });
    const line = '{"msg":"no key here"}';
    assert.equal(redactLine(line), line);
  });
});

describe('runtime/log: pretty', () => {
  it('one line per event, access-log fields first, the rest as key=value', async () => {
    const f = fileLogger('info', 'pretty');
    f.log.info('request', { request_id: 'r1', route: '/healthz', method: 'GET', status: 200, duration_ms: 1.5, principal_id: null });
    f.log.warn('heartbeat failed', { error: 'timeout', tries: 2 });
    f.log.request({ ...ACCESS, request_id: 'r2', principal_id: null, credential_kind: null, key_id: null });
    await f.log.close();
    assert.match(f.out()[0]!, /^\d{4}-\d\d-\d\dT[\d:.]+Z INFO {2}request GET \/healthz 200 1\.5ms request_id=r1$/);
    assert.match(f.out()[1]!, /^\d{4}-\S+ INFO {2}request GET \/api\/public\/v1\/admin\/ai\/tool-registry 200 1\.983ms request_id=r2$/);
    assert.match(f.err()[0]!, /^\d{4}-\S+ WARN {2}heartbeat failed error=timeout tries=2$/);
  });
});

describe('runtime/log: every line written before the process exits', () => {
  const child = resolve(import.meta.dirname, '_log-child.ts');
  const run = (how: string) =>
    spawnSync(process.execPath, ['--import', 'tsx', child, how], {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      cwd: resolve(import.meta.dirname, '../..'),
    });
  /** The info lines on stdout (checked to be in the order they were logged: 0, 1, 2, …). */
  const counted = (stdout: string) => {
    const lines = stdout.split('\n').filter((l) => l.startsWith('{"level":30'));
    const numbers = lines.map((l) => {
      const o = JSON.parse(l) as { i?: number; request_id?: string };
      return o.i ?? Number(o.request_id);
    });
    assert.ok(
      numbers.every((v, i) => v === i),
      'in order',
    );
    return lines.length;
  };

  it('a clean stop (SIGTERM, as the programs handle it): 50,000 lines, all written', () => {
    const r = run('sigterm');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(counted(r.stdout), 50_000);
  });

  it('an uncaught exception: the lines before it, then the error with its stack on stderr, exit status 1', () => {
    const r = run('throw');
    assert.equal(r.status, 1, r.stderr);
    assert.equal(counted(r.stdout), 50_000);
    const fatal = r.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(fatal.length, 1, r.stderr);
    assert.equal(fatal[0]!['level'], 50);
    assert.equal(fatal[0]!['msg'], 'uncaught exception');
    const error = fatal[0]!['error'] as unknown as { type: string; message: string; stack: string };
    assert.deepEqual([error.type, error.message], ['Error', 'boom [redacted]'], 'an error as {type, message, stack}');
    assert.match(error.stack, /Error: boom \[redacted\]\n\s+at /);
  });

  it('an unhandled rejection: logged as one, the lines before it written, exit status 1', () => {
    const r = run('reject');
    assert.equal(r.status, 1, r.stderr);
    assert.equal(counted(r.stdout), 50_000);
    assert.match(r.stderr, /"msg":"unhandled rejection"/);
  });

  it('process.exit without close (a start-up failure): pino writes what is buffered', () => {
    const r = run('exit');
    assert.equal(r.status, 3, r.stderr);
    assert.equal(counted(r.stdout), 50_000);
  });
});
