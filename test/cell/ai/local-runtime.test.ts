// The cell's local-signed provider runs on the edge's verified runtime (models/ in the data directory).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inProcessCell } from '../../helpers/inproc.ts';
import { makeTinyGguf } from '../../../scripts/make-tiny-gguf.ts';
import { buildModelManifest } from '../../../bundles/model-manifest.ts';
import { generateEd25519, sha256Hex, signerFromJwk } from '../../../bundles/codec.ts';
import { findRuntime } from '../../../runtime/local-model.ts';

let skip: string | false = false;
try {
  findRuntime();
} catch {
  skip = 'edge-runtime/ is not installed (make edge)';
}

test('a local-signed provider answers from a verified model; a tampered one is refused', { skip, timeout: 60_000 }, async () => {
  const t = await inProcessCell();
  try {
    const models = join(t.dir, 'models');
    mkdirSync(models, { recursive: true });
    const bytes = makeTinyGguf(42);
    writeFileSync(join(models, 'tiny.gguf'), bytes);
    writeFileSync(join(models, 'bad.gguf'), makeTinyGguf(43));
    const pub = await generateEd25519();
    const sign = async (size: number, sha256: string) =>
      buildModelManifest({
        publisher: 'p',
        signer: signerFromJwk(pub.kid, pub.privateJwk),
        issuedAt: 0,
        model: { name: 'tiny', format: 'gguf', size, sha256 },
      });
    writeFileSync(join(models, 'tiny.manifest'), await sign(bytes.length, await sha256Hex(bytes)));
    writeFileSync(join(models, 'bad.manifest'), await sign(bytes.length, await sha256Hex(bytes)));
    writeFileSync(join(models, 'publishers.json'), JSON.stringify([{ kid: pub.kid, jwk: pub.publicJwk }]));

    const reg = await t.request('POST', '/api/public/v1/admin/ai/model-providers', {
      token: t.adminKey,
      body: { provider_type: 'local-signed', default_model: 'tiny' },
    });
    assert.equal(reg.status, 201, reg.text);
    const rts = await t.request('GET', '/api/public/v1/admin/ai/agent-runtimes', { token: t.adminKey });
    assert.ok(JSON.stringify(rts.body).includes('"local-signed"'));
    const req = { messages: [{ role: 'user' as const, content: 'Status of pump 7?' }], max_tokens: 12 };
    const a = await t.modules.ai.ai.call(reg.body.provider_id, req);
    const b = await t.modules.ai.ai.call(reg.body.provider_id, req);
    assert.equal(a.content, b.content);
    assert.ok(a.usage.completion_tokens > 0 && a.usage.completion_tokens <= 12);
    assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + a.usage.completion_tokens);
    // Live tokens: node-llama-cpp's tokens reach onDelta as they are generated; together they are the answer.
    const pieces: string[] = [];
    const streamed = await t.modules.ai.ai.call(reg.body.provider_id, req, { onDelta: (d) => pieces.push(d.text) });
    assert.equal(streamed.content, a.content, 'the same answer, streamed');
    assert.equal(pieces.join(''), streamed.content);
    assert.ok(pieces.length > 1, `the answer came in pieces: ${JSON.stringify(pieces)}`);
    // With tools: node-llama-cpp's function calling, as at the edge; a named tool_choice is honoured, on the wire's shape.
    const tools = [
      {
        type: 'function' as const,
        function: { name: 'clock__now', description: 'The time', parameters: { type: 'object', properties: {} } },
      },
      {
        type: 'function' as const,
        function: {
          name: 'kv__get',
          description: 'Read',
          parameters: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
        },
      },
    ];
    const withTools = { ...req, max_tokens: 200, tools, tool_choice: { type: 'function' as const, function: { name: 'kv__get' } } };
    const c = await t.modules.ai.ai.call(reg.body.provider_id, withTools);
    assert.deepEqual(await t.modules.ai.ai.call(reg.body.provider_id, withTools), c, 'the same call every time');
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.tool_calls.length, 1);
    assert.equal(c.tool_calls[0]!.function.name, 'kv__get');
    assert.equal(typeof JSON.parse(c.tool_calls[0]!.function.arguments).key, 'string');
    const rts2 = (rts.body as { runtimes: { runtime: string; tool_calls: boolean }[] }).runtimes;
    assert.equal(rts2.find((r) => r.runtime === 'local-signed')!.tool_calls, true);
    await assert.rejects(
      t.modules.ai.ai.call(reg.body.provider_id, { ...req, model: 'bad' }),
      (e) => (e as { details?: { reason?: string } }).details?.reason === 'model_tampered',
    );
    await assert.rejects(
      t.modules.ai.ai.call(reg.body.provider_id, { ...req, model: 'absent' }),
      (e) => (e as { details?: { reason?: string } }).details?.reason === 'model_missing',
    );
  } finally {
    await t.close();
  }
});
