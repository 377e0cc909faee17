/** Measuring a model file: size and SHA-256, streamed (models are large). */
import { createHash } from 'node:crypto';
import { createReadStream, statSync } from 'node:fs';

export async function measureFile(path: string): Promise<{ size: number; sha256: string }> {
  const size = statSync(path).size;
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) h.update(chunk as Buffer);
  return { size, sha256: h.digest('hex') };
}
