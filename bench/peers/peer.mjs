/**
 * One peer system in a process of its own, driven by bench/peers.bench.ts
 * over stdin/stdout (one line each way): the process sets up, prints
 * `ready`, then for each line `run <runs> [memory|postgres]` starts that many
 * runs at once, waits for all of them and prints `done <ms>`; `quit` stops it.
 *
 *   node bench/peers/peer.mjs dbos <model-url> <steps> <postgres-url> [<ask.json>]
 *   node bench/peers/peer.mjs langgraph <model-url> <steps> <postgres-url> [<ask.json>]
 *
 * <ask.json>: fields every model request carries besides model and messages
 * (peers.bench.ts writes the cell's: the seats' tools and max_tokens), so
 * that the model server parses the same request from each side.
 *
 * dbos: a workflow of <steps> steps, each one model call (DBOS.runStep,
 * checkpointed in DBOS's system database on PostgreSQL). langgraph: a
 * sequential StateGraph of <steps> nodes, each one model call, with a
 * MemorySaver or a PostgresSaver checkpointer (one checkpoint per
 * super-step). Plain JavaScript, so the project's type check does not need
 * these packages (they are installed by `make bench` only).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const [kind, modelUrl, stepsArg, pgUrl, askFile] = process.argv.slice(2);
const STEPS = Number(stepsArg);
/** What the cell's seats ask besides their messages (the tools they may call, max_tokens), from askFile: the same request. */
const ask = askFile ? JSON.parse(readFileSync(askFile, 'utf8')) : {};

/** One chat completion on the fake model server (the same server the cell calls, asked the same: `ask`). */
async function callModel(i) {
  const r = await fetch(`${modelUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-fake' },
    body: JSON.stringify({
      model: 'fake',
      messages: [
        { role: 'system', content: `ROLE:peer${i}` },
        { role: 'user', content: 'go' },
      ],
      ...ask,
      stream: false,
    }),
  });
  if (!r.ok) throw new Error(`model answered ${r.status}`);
  const body = await r.json();
  return body.choices[0].message.content;
}

async function dbos() {
  const { DBOS } = await import('@dbos-inc/dbos-sdk');
  DBOS.setConfig({ name: 'bench-peers', systemDatabaseUrl: pgUrl, logLevel: 'error', runAdminServer: false });
  const workflow = DBOS.registerWorkflow(
    async () => {
      let last = '';
      for (let i = 0; i < STEPS; i++) last = await DBOS.runStep(() => callModel(i), { name: `step-${i}` });
      return last;
    },
    { name: 'twentySteps' },
  );
  await DBOS.launch();
  return {
    async run(n) {
      const handles = await Promise.all(Array.from({ length: n }, () => DBOS.startWorkflow(workflow, { workflowID: randomUUID() })()));
      await Promise.all(handles.map((h) => h.getResult()));
    },
    stop: () => DBOS.shutdown(),
  };
}

async function langgraph() {
  const { Annotation, END, MemorySaver, START, StateGraph } = await import('@langchain/langgraph');
  const { PostgresSaver } = await import('@langchain/langgraph-checkpoint-postgres');
  const State = Annotation.Root({ last: Annotation(), count: Annotation() });
  const builder = new StateGraph(State);
  for (let i = 0; i < STEPS; i++) builder.addNode(`n${i}`, async (s) => ({ last: await callModel(i), count: (s.count ?? 0) + 1 }));
  builder.addEdge(START, 'n0');
  for (let i = 1; i < STEPS; i++) builder.addEdge(`n${i - 1}`, `n${i}`);
  builder.addEdge(`n${STEPS - 1}`, END);
  const postgres = PostgresSaver.fromConnString(pgUrl);
  await postgres.setup();
  const graphs = { memory: builder.compile({ checkpointer: new MemorySaver() }), postgres: builder.compile({ checkpointer: postgres }) };
  return {
    async run(n, saver) {
      const g = graphs[saver];
      if (!g) throw new Error(`no saver ${saver}`);
      await Promise.all(
        Array.from({ length: n }, () => g.invoke({ count: 0 }, { configurable: { thread_id: randomUUID() }, recursionLimit: STEPS + 5 })),
      );
    },
    stop: () => postgres.end(),
  };
}

const peer = kind === 'dbos' ? await dbos() : kind === 'langgraph' ? await langgraph() : null;
if (!peer) throw new Error(`unknown peer ${kind}`);
process.stdout.write('ready\n');
for await (const line of createInterface({ input: process.stdin })) {
  const [cmd, n, saver] = line.trim().split(/\s+/);
  if (cmd === 'quit') break;
  if (cmd !== 'run') continue;
  const t0 = performance.now();
  try {
    await peer.run(Number(n), saver ?? 'postgres');
    process.stdout.write(`done ${(performance.now() - t0).toFixed(1)}\n`);
  } catch (err) {
    process.stdout.write(`error ${String(err?.message ?? err).replace(/\n/g, ' ')}\n`);
  }
}
await peer.stop();
process.exit(0);
