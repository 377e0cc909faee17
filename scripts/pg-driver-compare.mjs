// Compares the two well-kept PostgreSQL drivers for Node on the store's access patterns:
// sequential point selects, 32 concurrent point selects (pool of 10; and one connection,
// where postgres.js pipelines), 32 concurrent SERIALIZABLE write transactions. Five rounds,
// medians. The figures behind the choice of `pg` (docs/storage.md, "Driver").
//
// postgres.js is not a dependency of the project: run this from a scratch directory that has both.
//   mkdir /tmp/drivers && cd /tmp/drivers && npm init -y && npm i -E pg@8.23.1 postgres@3.4.9
//   eval "$(/path/to/agent-cell/scripts/pg-test-server.sh start)"
//   node /path/to/agent-cell/scripts/pg-driver-compare.mjs "$CELL_TEST_PG_URL"
//   /path/to/agent-cell/scripts/pg-test-server.sh stop "$CELL_TEST_PG_DIR"
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(join(process.cwd(), 'noop.js'));
const pg = require('pg');
const postgres = require('postgres');
const url = process.argv[2];
if (!url) {
  console.error('usage: node pg-driver-compare.mjs postgres://…');
  process.exit(2);
}

const setup = new pg.Client({ connectionString: url });
await setup.connect();
await setup.query(
  'DROP TABLE IF EXISTS kv; CREATE TABLE kv (id BIGINT PRIMARY KEY, v TEXT NOT NULL); DROP TABLE IF EXISTS w; CREATE TABLE w (id BIGSERIAL PRIMARY KEY, v TEXT)',
);
await setup.query("INSERT INTO kv SELECT g, repeat('x', 100) FROM generate_series(1, 10000) g");
await setup.end();

async function conc(n, c, one) {
  let i = 0;
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (i < n) await one(i++);
    }),
  );
}
const pool = new pg.Pool({ connectionString: url, max: 10 });
const pool1 = new pg.Pool({ connectionString: url, max: 1 });
const sql = postgres(url, { max: 10, onnotice: () => {} });
const sql1 = postgres(url, { max: 1, onnotice: () => {} });
const SELECT = 'SELECT id, v FROM kv WHERE id = $1';
const pgSel = (p) => (k) => p.query(SELECT, [(k % 10000) + 1]);
const pjsSel = (s) => (k) => s.unsafe(SELECT, [(k % 10000) + 1], { prepare: true });
const cases = {
  'pg: sequential point selects': [2000, (n) => conc(n, 1, pgSel(pool))],
  'postgres.js: sequential point selects': [2000, (n) => conc(n, 1, pjsSel(sql))],
  'pg: 32 concurrent selects, pool 10': [6000, (n) => conc(n, 32, pgSel(pool))],
  'postgres.js: 32 concurrent selects, max 10': [6000, (n) => conc(n, 32, pjsSel(sql))],
  'pg: 32 concurrent selects, 1 connection': [4000, (n) => conc(n, 32, pgSel(pool1))],
  'postgres.js: 32 concurrent selects, 1 connection (pipelined)': [4000, (n) => conc(n, 32, pjsSel(sql1))],
  'pg: 32 concurrent SERIALIZABLE write transactions': [
    2000,
    (n) =>
      conc(n, 32, async (k) => {
        const c = await pool.connect();
        try {
          await c.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
          await c.query('INSERT INTO w (v) VALUES ($1)', [`v${k}`]);
          await c.query('COMMIT');
        } finally {
          c.release();
        }
      }),
  ],
  'postgres.js: 32 concurrent SERIALIZABLE write transactions': [
    2000,
    (n) =>
      conc(n, 32, (k) =>
        sql.begin('ISOLATION LEVEL SERIALIZABLE', (t) => t.unsafe('INSERT INTO w (v) VALUES ($1)', [`v${k}`], { prepare: true })),
      ),
  ],
};
const res = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
for (let round = 0; round < 5; round++) {
  for (const [name, [n, fn]] of Object.entries(cases)) {
    await fn(100);
    const t0 = performance.now();
    await fn(n);
    res[name].push((n / (performance.now() - t0)) * 1000);
  }
}
for (const [k, v] of Object.entries(res)) {
  v.sort((a, b) => a - b);
  console.log(`${k.padEnd(62)} median ${v[2].toFixed(0).padStart(6)}/s   [${v.map((x) => x.toFixed(0)).join(', ')}]`);
}
await Promise.all([pool.end(), pool1.end(), sql.end(), sql1.end()]);
