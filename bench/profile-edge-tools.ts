import { CALC } from '../core/catalog/builtin.ts';
import { loadLocalSignedModel } from '../runtime/local-model.ts';
import { signedTinyModel } from '../test/fixtures/tiny-model.ts';
const f = await signedTinyModel('prof-');
const dir = f.dir;
const model = await loadLocalSignedModel({
  modelPath: f.modelPath,
  manifestPath: f.manifestPath,
  publishers: f.publishers,
  scratchDir: dir,
});
const tools = [{ name: CALC.name, description: CALC.description, parameters: CALC.parameters }];
const req = {
  messages: [
    { role: 'system' as const, content: 'You are the field recorder.' },
    { role: 'user' as const, content: 'Record pump 7.' },
  ],
  tools,
  toolChoice: { name: 'calc' },
  maxTokens: 400,
  partition: 'run',
};
await model.chat(req);
const t0 = performance.now();
for (let i = 0; i < 40; i++) await model.chat(req);
console.log('warm call ms', (performance.now() - t0) / 40);
await model.dispose();
