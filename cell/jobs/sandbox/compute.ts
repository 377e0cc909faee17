/**
 * Untrusted JavaScript in QuickJS compiled to WebAssembly (quickjs-emscripten,
 * release-sync variant). Runs inside the sandbox worker (worker.ts).
 *
 * The code is the body of a function `(input) => output`: it sees only its
 * declared `input` (a JSON value, also `globalThis.input`) and a `console.log`
 * that collects up to 100 lines of up to 1000 characters, at most
 * LOGS_MAX_BYTES in all (past that, a last line `[logs truncated: ...]` says
 * how many were not kept); whatever it returns, serialised as JSON, is the
 * output. There is no host access: no require, import, process, fetch,
 * timers, file system or network exist in the QuickJS context.
 *
 * Caps: memory (QuickJS runtime memory limit), stack, time (the interrupt
 * handler stops the code at the deadline) and output size. A cancel flag in a
 * SharedArrayBuffer, set by the host, also interrupts the code.
 */
import type { QuickJSContext, QuickJSRuntime, QuickJSSyncVariant, QuickJSWASMModule } from 'quickjs-emscripten-core';

export interface ComputeTask {
  code: string;
  input: unknown;
  timeLimitMs: number;
  memoryLimitBytes: number;
  outputLimitBytes: number;
}

export type SandboxFailureReason =
  | 'time_limit'
  | 'memory_limit'
  | 'output_limit'
  | 'cancelled'
  | 'script_error'
  | 'row_limit'
  | 'sql_error'
  | 'sandbox_crashed';

export type ComputeOutcome =
  | { ok: true; output: unknown; logs: string[]; duration_ms: number }
  | { ok: false; reason: SandboxFailureReason; message: string; logs: string[]; duration_ms: number; crashed?: boolean };

/** Bytes of log lines kept per compute step (as stored: JSON strings); the rest is replaced by one marker line. */
export const LOGS_MAX_BYTES = 64 * 1024;
const LOG_LINES_MAX = 100;

/**
 * The log lines a step keeps: in order, while they fit in LOGS_MAX_BYTES, then
 * a marker line naming how many lines (`dropped` were never collected) were not kept.
 */
export function capLogs(lines: readonly string[], dropped: number): string[] {
  const enc = new TextEncoder();
  const room = LOGS_MAX_BYTES - 200; // the marker line's room
  const kept: string[] = [];
  let used = 2;
  for (const line of lines) {
    const size = enc.encode(JSON.stringify(line)).length + 1;
    if (used + size > room) break;
    kept.push(line);
    used += size;
  }
  const lost = lines.length - kept.length + dropped;
  if (lost > 0)
    kept.push(
      `[logs truncated: ${lost} of ${lines.length + dropped} lines not kept (at most ${LOG_LINES_MAX} lines, ${LOGS_MAX_BYTES} bytes)]`,
    );
  return kept;
}

/** QuickJS's own stack cap: small enough that QuickJS refuses deep recursion before the host stack overflows. */
const STACK_LIMIT_BYTES = 192 * 1024;

let loading: Promise<QuickJSWASMModule> | undefined;

async function wasmBytes(): Promise<ArrayBuffer> {
  let bytes: Uint8Array | undefined;
  // In the esbuild bundle this `require` is resolved at build time to the embedded bytes (binary
  // loader). Not `import()`: esbuild's ESM interop copies the Uint8Array property by property, which
  // cost each new sandbox worker ~3 s of CPU and as much again in garbage collection (a compute step
  // waited minutes for its worker on a loaded machine). Under tsx or plain Node there is no bundled
  // module: fall through to reading the file.
  try {
    const m: unknown = typeof require === 'function' ? require('@jitl/quickjs-wasmfile-release-sync/wasm') : undefined;
    if (m instanceof Uint8Array) bytes = m;
  } catch {
    // Not bundled: Node cannot require a .wasm file; read it below.
  }
  if (!bytes) {
    const { createRequire } = await import('node:module');
    const { readFileSync } = await import('node:fs');
    const require = createRequire(import.meta.url);
    bytes = new Uint8Array(readFileSync(require.resolve('@jitl/quickjs-wasmfile-release-sync/wasm')));
  }
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}

/** The QuickJS WebAssembly module, loaded once per thread. */
export function loadQuickJs(): Promise<QuickJSWASMModule> {
  loading ??= (async () => {
    const [{ newQuickJSWASMModuleFromVariant, newVariant }, variantMod, wasmBinary] = await Promise.all([
      import('quickjs-emscripten-core'),
      import('@jitl/quickjs-wasmfile-release-sync'),
      wasmBytes(),
    ]);
    const base = ((variantMod as { default?: unknown }).default ?? variantMod) as QuickJSSyncVariant;
    return newQuickJSWASMModuleFromVariant(newVariant(base, { wasmBinary }));
  })();
  return loading;
}

const PRELUDE = `
const __logs = [];
let __dropped = 0;
globalThis.console = Object.freeze({ log: (...a) => { if (__logs.length < ${LOG_LINES_MAX}) __logs.push(a.map((x) => typeof x === 'string' ? x : JSON.stringify(x)).join(' ').slice(0, 1000)); else __dropped++; } });
`;

/** Runs one compute task to completion in a fresh QuickJS runtime. */
export async function runCompute(task: ComputeTask, cancelFlag: Int32Array): Promise<ComputeOutcome> {
  // The time cap covers the code, not loading the WebAssembly module (once per worker).
  const QuickJS = await loadQuickJs();
  const started = Date.now();
  const { rt, stop } = cappedRuntime(QuickJS, task, cancelFlag, started + task.timeLimitMs);
  const vm = rt.newContext();
  const dur = () => Date.now() - started;
  let logs: string[] = [];
  let crashed = false;
  try {
    const res = vm.evalCode(jobSource(task), 'job.js');
    if (res.error) {
      const e = vm.dump(res.error) as { name?: string; message?: string } | string;
      res.error.dispose();
      logs = logsSoFar(vm);
      return { ok: false, ...failureOf(e, stop.reason, task), logs, duration_ms: dur() };
    }
    const text = vm.getString(res.value);
    res.value.dispose();
    const parsed = JSON.parse(text) as { o: string; l: string[]; d: number };
    logs = capLogs(parsed.l, parsed.d);
    if (new TextEncoder().encode(parsed.o).length > task.outputLimitBytes) {
      return {
        ok: false,
        reason: 'output_limit',
        message: `the output is larger than its cap of ${task.outputLimitBytes} bytes`,
        logs,
        duration_ms: dur(),
      };
    }
    return { ok: true, output: JSON.parse(parsed.o) as unknown, logs, duration_ms: dur() };
  } catch (err) {
    // The WebAssembly instance itself ran out of memory, overflowed the host stack, or aborted:
    // the caller (worker.ts) discards this thread's QuickJS module after such a failure.
    crashed = true;
    if (globalThis.process?.env?.['CELL_SANDBOX_DEBUG']) console.error('sandbox error', err);
    return { ok: false, ...crashOf(err, task), logs, duration_ms: dur(), crashed: true };
  } finally {
    // A crashed instance is not touched again.
    if (!crashed) disposeQuietly(vm, rt);
  }
}

/** Why the interrupt handler stopped the code, once it has. */
type Stop = { reason: 'time_limit' | 'cancelled' | null };

/** A QuickJS runtime with the task's memory and stack caps, interrupted at `deadline` or when the host sets the cancel flag. */
function cappedRuntime(
  QuickJS: QuickJSWASMModule,
  task: ComputeTask,
  cancelFlag: Int32Array,
  deadline: number,
): { rt: QuickJSRuntime; stop: Stop } {
  const rt = QuickJS.newRuntime();
  const stop: Stop = { reason: null };
  rt.setMemoryLimit(task.memoryLimitBytes);
  rt.setMaxStackSize(STACK_LIMIT_BYTES);
  rt.setInterruptHandler(() => {
    if (Atomics.load(cancelFlag, 0) !== 0) {
      stop.reason = 'cancelled';
      return true;
    }
    if (Date.now() > deadline) {
      stop.reason = 'time_limit';
      return true;
    }
    return false;
  });
  return { rt, stop };
}

/** The script QuickJS evaluates: the prelude, the input, then the task's code as a function body; it answers `{ o, l, d }` as JSON. */
function jobSource(task: ComputeTask): string {
  return `${PRELUDE}
globalThis.input = JSON.parse(${JSON.stringify(JSON.stringify(task.input ?? null))});
(() => {
  const __f = new Function('input', ${JSON.stringify(task.code)});
  const __out = __f(globalThis.input);
  if (__out !== null && typeof __out === 'object' && typeof __out.then === 'function') throw new TypeError('the code returned a promise: return a plain JSON value (async code is not supported)');
  const __json = __out === undefined ? 'null' : JSON.stringify(__out);
  return JSON.stringify({ o: __json === undefined ? 'null' : __json, l: __logs, d: __dropped });
})()`;
}

/** The log lines the code wrote before it failed (capped), or none when they cannot be read back. */
function logsSoFar(vm: QuickJSContext): string[] {
  const logsHandle = vm.evalCode('JSON.stringify({ l: __logs, d: __dropped })');
  if (logsHandle.error) {
    logsHandle.error.dispose();
    return [];
  }
  let logs: string[];
  try {
    const got = JSON.parse(vm.getString(logsHandle.value)) as { l: string[]; d: number };
    logs = capLogs(got.l, got.d);
  } catch {
    logs = [];
  }
  logsHandle.value.dispose();
  return logs;
}

/** Why the code failed, from the error QuickJS threw and whether the interrupt handler had stopped it. */
function failureOf(
  e: { name?: string; message?: string } | string,
  stopped: Stop['reason'],
  task: ComputeTask,
): { reason: SandboxFailureReason; message: string } {
  const name = typeof e === 'object' && e ? String(e.name ?? 'Error') : 'Error';
  const message = typeof e === 'object' && e ? String(e.message ?? '') : String(e);
  if (stopped === 'cancelled') return { reason: 'cancelled', message: 'the run was cancelled while the code ran' };
  if (stopped === 'time_limit')
    return { reason: 'time_limit', message: `the code ran longer than its time cap of ${task.timeLimitMs} ms and was stopped` };
  if (/out of memory|string too long/i.test(message) || (name === 'InternalError' && /memory/i.test(message)))
    return { reason: 'memory_limit', message: `the code exceeded its memory cap of ${task.memoryLimitBytes} bytes` };
  if (/stack overflow|call stack/i.test(message)) return { reason: 'memory_limit', message: 'the code exceeded its stack cap' };
  return { reason: 'script_error', message: `${name}: ${message}`.slice(0, 2000) };
}

/** Why the WebAssembly instance itself failed (memory, host stack, abort). */
function crashOf(err: unknown, task: ComputeTask): { reason: SandboxFailureReason; message: string } {
  const message = err instanceof Error ? err.message : String(err);
  if (/memory|call stack/i.test(message))
    return { reason: 'memory_limit', message: `the code exceeded its memory or stack cap (${task.memoryLimitBytes} bytes)` };
  return { reason: 'sandbox_crashed', message: 'the sandbox failed while running the code' };
}

/** Frees the context and the runtime; one that hit its memory cap may refuse to free cleanly. */
function disposeQuietly(vm: QuickJSContext, rt: QuickJSRuntime): void {
  try {
    vm.dispose();
  } catch {
    /* a runtime that hit its memory cap may refuse to free cleanly */
  }
  try {
    rt.dispose();
  } catch {
    /* idem */
  }
}
