/**
 * Writes a tiny llama-architecture GGUF (v3) model for tests: F32, 2 layers,
 * width 64, 4 heads, FFN 128, a byte-level SPM vocabulary of 260 tokens
 * (<unk>, <s>, </s>, <pad>, then <0x00>..<0xFF>), and weights from a seeded
 * PRNG, about 470 KB. llama.cpp (node-llama-cpp 3.22) loads it on CPU; its
 * output is noise, but greedy decoding is identical across runs, which is all
 * the tests need (determinism, token accounting, the signed-model path).
 *
 * Usage: node --import tsx scripts/make-tiny-gguf.ts --out FILE [--seed N]
 * GGUF format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const N_EMBD = 64,
  N_LAYER = 2,
  N_HEAD = 4,
  N_FF = 128,
  N_CTX = 4096,
  ALIGN = 32;
const T = { U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9 } as const;

/** mulberry32: a small seeded PRNG, deterministic across platforms. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Writer {
  chunks: Uint8Array[] = [];
  size = 0;
  push(b: Uint8Array) {
    this.chunks.push(b);
    this.size += b.length;
  }
  u32(v: number) {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setUint32(0, v, true);
    this.push(b);
  }
  i32(v: number) {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setInt32(0, v, true);
    this.push(b);
  }
  u64(v: number) {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, BigInt(v), true);
    this.push(b);
  }
  f32(v: number) {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.push(b);
  }
  str(s: string) {
    const b = new TextEncoder().encode(s);
    this.u64(b.length);
    this.push(b);
  }
  pad(to: number) {
    const n = (to - (this.size % to)) % to;
    if (n) this.push(new Uint8Array(n));
  }
  bytes(): Uint8Array {
    const out = new Uint8Array(this.size);
    let o = 0;
    for (const c of this.chunks) {
      out.set(c, o);
      o += c.length;
    }
    return out;
  }
}

type Kv =
  | [string, 'bool', boolean]
  | [string, 'u32', number]
  | [string, 'f32', number]
  | [string, 'str', string]
  | [string, 'strs', string[]]
  | [string, 'f32s', number[]]
  | [string, 'i32s', number[]];

export function makeTinyGguf(seed = 42): Uint8Array {
  const tokens = ['<unk>', '<s>', '</s>', '<pad>'];
  const types = [2, 3, 3, 3];
  for (let i = 0; i < 256; i++) {
    tokens.push(`<0x${i.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(6);
  }
  const kvs: Kv[] = [
    ['general.architecture', 'str', 'llama'],
    ['general.name', 'str', 'tiny-test-model'],
    ['general.alignment', 'u32', ALIGN],
    ['llama.context_length', 'u32', N_CTX],
    ['llama.embedding_length', 'u32', N_EMBD],
    ['llama.block_count', 'u32', N_LAYER],
    ['llama.feed_forward_length', 'u32', N_FF],
    ['llama.attention.head_count', 'u32', N_HEAD],
    ['llama.attention.head_count_kv', 'u32', N_HEAD],
    ['llama.rope.dimension_count', 'u32', N_EMBD / N_HEAD],
    ['llama.attention.layer_norm_rms_epsilon', 'f32', 1e-5],
    ['llama.vocab_size', 'u32', tokens.length],
    ['tokenizer.ggml.model', 'str', 'llama'],
    ['tokenizer.ggml.tokens', 'strs', tokens],
    ['tokenizer.ggml.scores', 'f32s', tokens.map(() => 0)],
    ['tokenizer.ggml.token_type', 'i32s', types],
    ['tokenizer.ggml.unknown_token_id', 'u32', 0],
    ['tokenizer.ggml.bos_token_id', 'u32', 1],
    ['tokenizer.ggml.eos_token_id', 'u32', 2],
    ['tokenizer.ggml.padding_token_id', 'u32', 3],
    ['tokenizer.ggml.add_bos_token', 'bool', true],
    ['tokenizer.ggml.add_eos_token', 'bool', false],
  ];
  const V = tokens.length;
  const tensors: [string, number[]][] = [
    ['token_embd.weight', [N_EMBD, V]],
    ['output_norm.weight', [N_EMBD]],
    ['output.weight', [N_EMBD, V]],
  ];
  for (let l = 0; l < N_LAYER; l++) {
    tensors.push(
      [`blk.${l}.attn_norm.weight`, [N_EMBD]],
      [`blk.${l}.attn_q.weight`, [N_EMBD, N_EMBD]],
      [`blk.${l}.attn_k.weight`, [N_EMBD, N_EMBD]],
      [`blk.${l}.attn_v.weight`, [N_EMBD, N_EMBD]],
      [`blk.${l}.attn_output.weight`, [N_EMBD, N_EMBD]],
      [`blk.${l}.ffn_norm.weight`, [N_EMBD]],
      [`blk.${l}.ffn_gate.weight`, [N_EMBD, N_FF]],
      [`blk.${l}.ffn_down.weight`, [N_FF, N_EMBD]],
      [`blk.${l}.ffn_up.weight`, [N_EMBD, N_FF]],
    );
  }
  const w = new Writer();
  w.push(new TextEncoder().encode('GGUF'));
  w.u32(3);
  w.u64(tensors.length);
  w.u64(kvs.length);
  for (const [key, kind, value] of kvs) {
    w.str(key);
    if (kind === 'bool') {
      w.u32(T.BOOL);
      w.push(new Uint8Array([value ? 1 : 0]));
    } else if (kind === 'u32') {
      w.u32(T.U32);
      w.u32(value as number);
    } else if (kind === 'f32') {
      w.u32(T.F32);
      w.f32(value as number);
    } else if (kind === 'str') {
      w.u32(T.STRING);
      w.str(value as string);
    } else if (kind === 'strs') {
      w.u32(T.ARRAY);
      w.u32(T.STRING);
      w.u64((value as string[]).length);
      for (const s of value as string[]) w.str(s);
    } else if (kind === 'f32s') {
      w.u32(T.ARRAY);
      w.u32(T.F32);
      w.u64((value as number[]).length);
      for (const v of value as number[]) w.f32(v);
    } else {
      w.u32(T.ARRAY);
      w.u32(T.I32);
      w.u64((value as number[]).length);
      for (const v of value as number[]) w.i32(v);
    }
  }
  let offset = 0;
  const sizes: number[] = [];
  for (const [name, dims] of tensors) {
    w.str(name);
    w.u32(dims.length);
    for (const d of dims) w.u64(d);
    w.u32(0); // GGML_TYPE_F32
    w.u64(offset);
    const bytes = dims.reduce((a, b) => a * b, 1) * 4;
    sizes.push(bytes);
    offset += Math.ceil(bytes / ALIGN) * ALIGN;
  }
  w.pad(ALIGN);
  const rand = prng(seed);
  tensors.forEach(([name, dims], i) => {
    const n = dims.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    const isNorm = name.endsWith('norm.weight');
    const scale = 1 / Math.sqrt(dims[0]!);
    for (let j = 0; j < n; j++) data[j] = isNorm ? 1 : (rand() * 2 - 1) * scale;
    w.push(new Uint8Array(data.buffer));
    const padBytes = Math.ceil(sizes[i]! / ALIGN) * ALIGN - sizes[i]!;
    if (padBytes) w.push(new Uint8Array(padBytes));
  });
  return w.bytes();
}

if (process.argv[1] && /make-tiny-gguf\.ts$/.test(process.argv[1])) {
  const { values } = parseArgs({ options: { out: { type: 'string' }, seed: { type: 'string' } }, strict: true });
  if (!values.out) {
    process.stderr.write('usage: make-tiny-gguf.ts --out FILE [--seed N]\n');
    process.exit(2);
  }
  const bytes = makeTinyGguf(Number(values.seed ?? 42));
  writeFileSync(values.out, bytes);
  process.stdout.write(`wrote ${values.out} (${bytes.length} bytes)\n`);
}
