/**
 * Live tokens (#24) against the real cell process (dist/cell.mjs) and a real
 * HTTP server speaking Chat Completions that streams: a model step's answer
 * arrives on the run's SSE stream as `delta` frames without `id:`, in order,
 * before the step record that carries the same answer whole; Last-Event-ID
 * resumption gets records only and misses none; a client joining mid-step
 * first gets the answer so far as one delta; a provider that does not stream
 * gives one delta at the end. Needs `node scripts/build.mjs` first.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startCellProcess, type CellProcess } from '../../helpers/cell-process.ts';
import { startOpenAIServer, type FakeOpenAI } from '../../fixtures/openai-server.ts';
import { A, T, httpApi, ok, provider, team, type Api } from '../../helpers/teams.ts';

let ai: FakeOpenAI;
let cell: CellProcess;
let api: Api;
let providerId: string;
before(async () => {
  ai = await startOpenAIServer({ apiKey: 'sk-fake' });
  cell = await startCellProcess();
  api = httpApi(cell.url, cell.adminKey);
  providerId = await provider(api, ai, 'sk-fake', true);
});

/** Every agent calls the one provider: whether it asks to stream. */
async function streaming(on: boolean): Promise<void> {
  await ok(api, 'PATCH', `${A}/ai/model-providers/${providerId}`, { stream: on });
}
after(async () => {
  await cell?.stop();
  cell?.cleanup();
  await ai?.close();
});

interface Frame {
  id: string | undefined;
  event: string;
  data: any;
}

/** Reads a run's SSE stream over HTTP, frame by frame, until run_finished (or `stop`). */
function follow(runId: string, headers: Record<string, string> = {}) {
  const frames: Frame[] = [];
  const ac = new AbortController();
  let wake = () => {};
  const done = (async () => {
    const res = await fetch(`${cell.url}${A}/jobs/runs/${runId}/events/sse`, {
      headers: { authorization: `Bearer ${cell.adminKey}`, ...headers },
      signal: ac.signal,
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    let buf = '';
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += dec.decode(value, { stream: true });
        let end = buf.indexOf('\n\n');
        while (end >= 0) {
          const raw = buf.slice(0, end);
          buf = buf.slice(end + 2);
          end = buf.indexOf('\n\n');
          const f: Frame = { id: undefined, event: 'message', data: undefined };
          let data = '';
          for (const line of raw.split('\n')) {
            if (line.startsWith('id: ')) f.id = line.slice(4);
            else if (line.startsWith('event: ')) f.event = line.slice(7);
            else if (line.startsWith('data: ')) data += line.slice(6);
          }
          if (data === '') continue; // retry: and heartbeat comments
          f.data = JSON.parse(data);
          frames.push(f);
          wake();
          if (f.event === 'run_finished') return;
        }
      }
    } catch (e) {
      if (!ac.signal.aborted) throw e;
    }
  })();
  return {
    frames,
    done,
    stop: () => ac.abort(),
    /** Resolves when `cond` holds on the frames so far. */
    async until(cond: (fs: Frame[]) => boolean, what: string, ms = 30_000): Promise<void> {
      const end = Date.now() + ms;
      while (!cond(frames)) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, 100);
        });
      }
    },
  };
}

/** The answer text the deltas of `stepId` build (answer = answer.slice(0, index) + text), and the tool calls' arguments. */
function assemble(frames: Frame[], stepId: string): { text: string; calls: Map<number, { name?: string; text: string }> } {
  let text = '';
  const calls = new Map<number, { name?: string; text: string }>();
  for (const f of frames) {
    if (f.event !== 'delta' || f.data.step_id !== stepId) continue;
    const d = f.data;
    if (d.tool_call) {
      const c = calls.get(d.tool_call.index) ?? { text: '' };
      assert.ok(d.index <= c.text.length, 'a tool-call delta continues what came before');
      c.text = c.text.slice(0, d.index) + d.text;
      if (d.tool_call.name) c.name = d.tool_call.name;
      calls.set(d.tool_call.index, c);
    } else {
      assert.ok(d.index <= text.length, 'a delta continues what came before');
      text = text.slice(0, d.index) + d.text;
    }
  }
  return { text, calls };
}

async function value(runId: string, hash: string): Promise<any> {
  return (await ok(api, 'GET', `${A}/jobs/runs/${runId}/values/${hash}`)).value;
}

test('deltas arrive in order without ids, before the step record that holds the same answer; tool-call arguments stream too', {
  timeout: 120_000,
}, async () => {
  await streaming(true);
  const pieces = ['The ', 'answer ', 'is ', 'forty', '-two', '.'];
  // The first answer waits until the stream follows the run: deltas are live, a late subscriber gets none.
  let open = () => {};
  const following = new Promise<void>((r) => {
    open = r;
  });
  ai.setResponder(async (req) => {
    await following;
    // Round 0 asks for a tool; round 1 (after the tool's answer) streams the text in pieces.
    if (!req.messages.some((m) => m.role === 'tool')) return { tool_calls: [{ name: 'calc', arguments: { expression: '6*7' } }] };
    return { content: pieces.join(''), pieces };
  });
  const tm = await team(api, 'sequential', [{ role: 'writer' }]);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'what is six times seven?' });
  const s = follow(run.run_id);
  await s.until((fs) => fs.length > 0, 'the stream to follow the run');
  open();
  await s.done;

  const deltas = s.frames.filter((f) => f.event === 'delta');
  assert.ok(deltas.length >= pieces.length, `deltas: ${deltas.length}`);
  for (const d of deltas) {
    assert.equal(d.id, undefined, 'a delta carries no id: line');
    assert.equal(d.data.seat, tm.billets['writer']);
    assert.equal(d.data.role_label, 'writer');
  }
  const records = s.frames.filter((f) => f.event !== 'delta');
  assert.deepEqual(
    records.map((f) => Number(f.id)),
    records.map((_, i) => i + 1),
    'every record, with its seq as id',
  );

  // The text round: one delta per streamed piece, in order, contiguous, then the step record with the same text.
  const textStep = deltas.find((d) => d.data.tool_call === undefined)!.data.step_id as string;
  const textDeltas = deltas.filter((d) => d.data.step_id === textStep && d.data.tool_call === undefined);
  assert.deepEqual(
    textDeltas.map((d) => d.data.text),
    pieces,
  );
  let at = 0;
  for (const d of textDeltas) {
    assert.equal(d.data.index, at, 'indexes follow the answer');
    at += d.data.text.length;
  }
  const stepAt = s.frames.findIndex((f) => f.event === 'step' && f.data.step_id === textStep);
  assert.ok(stepAt > s.frames.indexOf(textDeltas.at(-1)!), 'the deltas come before the step record');
  const recorded = await value(run.run_id, s.frames[stepAt]!.data.output_hash);
  assert.equal(recorded.content, pieces.join(''), 'the journal holds the same text');
  assert.equal(assemble(s.frames, textStep).text, recorded.content);

  // The tool round: the call's arguments streamed, named by the catalog's tool name, the same as recorded.
  const toolDelta = deltas.find((d) => d.data.tool_call !== undefined);
  assert.ok(toolDelta, 'tool-call argument deltas');
  const toolStep = toolDelta.data.step_id as string;
  const call = assemble(s.frames, toolStep).calls.get(0)!;
  assert.equal(call.name, 'calc');
  const toolRec = s.frames.find((f) => f.event === 'step' && f.data.step_id === toolStep)!;
  const toolOut = await value(run.run_id, toolRec.data.output_hash);
  assert.deepEqual(JSON.parse(call.text), toolOut.tool_calls[0].arguments);

  // Resumption with Last-Event-ID: the records after it, every one, and no delta.
  const r = follow(run.run_id, { 'last-event-id': '2' });
  await r.done;
  assert.equal(
    r.frames.some((f) => f.event === 'delta'),
    false,
    'resumption skips deltas',
  );
  assert.deepEqual(
    r.frames.map((f) => Number(f.id)),
    records.slice(2).map((f) => Number(f.id)),
    'and misses no record',
  );
});

test('a client joining mid-step first gets the answer so far in one delta, then the rest', { timeout: 120_000 }, async () => {
  await streaming(true);
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const pieces = ['alpha ', 'beta ', 'gamma ', 'delta'];
  ai.setResponder(() => ({ content: pieces.join(''), pieces, beforePiece: (i) => (i === 2 ? gate : undefined) }));
  const tm = await team(api, 'sequential', [{ role: 'slow' }]);
  const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
  const first = follow(run.run_id);
  // Two pieces streamed (the model waits before the third): in two deltas, or in one "so far" delta
  // when this first subscriber joined after the second piece (the call leaves as soon as the run starts).
  const upTo = (fs: typeof first.frames) =>
    Math.max(0, ...fs.filter((f) => f.event === 'delta').map((f) => f.data.index + f.data.text.length));
  await first.until((fs) => upTo(fs) === 'alpha beta '.length, 'two pieces');
  const joiner = follow(run.run_id);
  await joiner.until((fs) => fs.some((f) => f.event === 'delta'), 'the joiner to get the answer so far');
  const firstDelta = joiner.frames.find((f) => f.event === 'delta')!;
  assert.equal(firstDelta.id, undefined);
  assert.equal(firstDelta.data.index, 0);
  assert.equal(firstDelta.data.text, 'alpha beta ', 'the answer so far, in one delta');
  const started = joiner.frames.findIndex((f) => f.event === 'run_started');
  assert.ok(started >= 0 && joiner.frames.indexOf(firstDelta) > started, 'after the records so far');
  release();
  await Promise.all([first.done, joiner.done]);
  const step = firstDelta.data.step_id as string;
  assert.equal(assemble(joiner.frames, step).text, pieces.join(''));
  assert.equal(assemble(first.frames, step).text, pieces.join(''));
  assert.deepEqual(
    joiner.frames.filter((f) => f.event === 'delta').map((f) => f.data.text),
    ['alpha beta ', 'gamma ', 'delta'],
  );
  const rec = joiner.frames.find((f) => f.event === 'step' && f.data.step_id === step)!;
  assert.equal((await value(run.run_id, rec.data.output_hash)).content, pieces.join(''));
});

test('a provider that does not stream gives one delta with the whole answer at the end', { timeout: 120_000 }, async () => {
  // A provider registered without stream, and one that asks to stream from a server that answers one JSON body.
  for (const streamFlag of [false, true]) {
    await streaming(streamFlag);
    const before = ai.requests.length;
    // The answer waits until the stream follows the run: deltas are live, a late subscriber gets none.
    let open = () => {};
    const following = new Promise<void>((r) => {
      open = r;
    });
    ai.setResponder(async () => {
      await following;
      return { content: 'all at once', noStream: true };
    });
    const tm = await team(api, 'sequential', [{ role: `whole${streamFlag ? 's' : ''}` }]);
    const run = await ok(api, 'POST', `${T}/crews/${tm.crew}/runs`, { input: 'go' });
    const s = follow(run.run_id);
    await s.until((fs) => fs.length > 0, 'the stream to follow the run');
    open();
    await s.done;
    assert.equal(ai.requests.length - before, 1, 'one model call');
    assert.equal(ai.requests.at(-1)!.body['stream'] === true, streamFlag);
    const deltas = s.frames.filter((f) => f.event === 'delta');
    assert.equal(deltas.length, 1, JSON.stringify(deltas));
    assert.deepEqual({ index: deltas[0]!.data.index, text: deltas[0]!.data.text }, { index: 0, text: 'all at once' });
    const step = s.frames.findIndex((f) => f.event === 'step' && f.data.step_id === deltas[0]!.data.step_id);
    assert.ok(step > s.frames.indexOf(deltas[0]!), 'before the step record');
  }
});
