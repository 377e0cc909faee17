// The in-memory journal (the edge's) keeps each value as it was when it was hashed: the engine goes on with
// its objects after an append (a step's conversation grows after its model call).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contentHash } from '../../../core/canonical.ts';
import { memoryJournal } from '../../../core/journal/memory.ts';
import type { JournalSigner } from '../../../core/journal/record.ts';

const signer: JournalSigner = { kid: 'k', sign: async () => new Uint8Array(64) };

test('a value changed after its append still matches its hash in the journal', async () => {
  const j = memoryJournal('run_1', signer);
  const input = { messages: [{ role: 'user', content: 'hi' }] };
  const output = { content: 'hello' };
  const ih = contentHash(input);
  const oh = contentHash(output);
  await j.port.append({ step_id: 's', kind: 'step', graph_hash: 'g', input_hash: ih, output_hash: oh, at: 1 }, { input, output });
  input.messages.push({ role: 'assistant', content: 'hello' });
  output.content = 'changed';
  assert.equal(contentHash(j.blobs.get(ih)), ih);
  assert.equal(contentHash(j.blobs.get(oh)), oh);
});
