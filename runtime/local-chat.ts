/**
 * Tool calls by a local model: the engine's chat (core/engine/types.ts
 * ChatMessage, ToolDescriptor, ToolChoice) as node-llama-cpp's function
 * calling takes it, and its answer back as the engine's tool calls.
 *
 * node-llama-cpp generates a function call under a grammar: the function's
 * name from the offered names, its parameters from the JSON schema, so every
 * call it produces parses and fits the schema. A forced choice (`required`, or
 * one named tool) starts the answer inside a function call (the chat wrapper's
 * context state "initially engaged" in function calling, with nothing that
 * disengages it), so the model cannot answer without one; a named tool is the
 * only function offered. Decoding is greedy, so a prompt's answer is the same
 * on every run.
 *
 * The parameters' grammar is the tool's JSON schema within what the grammar
 * takes (`grammarSchema`): unknown keywords dropped, no properties beyond the
 * schema's, strings at most 256 characters and lists at most 16 items (less
 * when the schema says so), an integer one of its values (a range of fewer
 * than 256 values all of them; a wider or open one its first 16 from its
 * minimum, else from 0), a value of no known type a string, a boolean or null (a
 * number only where the schema asks for one); the tool still checks its
 * arguments when it is called. The grammar bounds a number's digits but not
 * its value: an exponent past the double's range parses to no JSON number,
 * and node-llama-cpp refuses such a call (runtime/local-model.ts fails it as
 * a malformed answer, `provider_bad_response`).
 *
 * Tool names travel to the model as their wire names (`.` spelled `__`,
 * core/engine/wire-name.ts) and come back in the catalog's spelling.
 */
import type { JsonObject } from '../core/journal/record.ts';
import type { ChatMessage, ModelDelta, ToolCall } from '../core/engine/types.ts';
import type { ToolChoice } from '../core/engine/tool-choice.ts';
import { fromWireName, toWireName } from '../core/engine/wire-name.ts';

/** A tool offered to the local model: its catalog name, what it does, the JSON schema of its arguments. */
export interface LocalTool {
  name: string;
  description: string;
  parameters: JsonObject;
}

/** One chat turn for the local model. */
export interface LocalChatRequest {
  messages: readonly ChatMessage[];
  tools: readonly LocalTool[];
  /** Absent: auto. */
  toolChoice?: Exclude<ToolChoice, 'auto'> | undefined;
  maxTokens: number;
  /** Calls of one partition (a run) reuse what the model evaluated of a shared prompt start; others never. */
  partition?: string | undefined;
}

/** The local model's answer: text, tool calls (catalog names, parsed arguments), exact token counts. */
export interface LocalChatAnswer {
  text: string;
  toolCalls: ToolCall[];
  inputTokens: number;
  outputTokens: number;
}

const MAX_STRING = 256;
const MAX_ITEMS = 16;
const MAX_DEPTH = 8;
/** An integer range of fewer values than this is offered as an enum of them. */
const MAX_ENUM = 256;
/** An integer of a wider or open range is offered as this many values. */
const MAX_OPEN_INTEGERS = 16;
const SCALARS = ['string', 'number', 'integer', 'boolean', 'null'];

type Schema = Record<string, unknown>;
const isObj = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);
const isScalar = (v: unknown) => v === null || ['string', 'number', 'boolean'].includes(typeof v);
const bounded = (given: unknown, cap: number) =>
  typeof given === 'number' && Number.isInteger(given) && given >= 0 ? Math.min(given, cap) : cap;

/**
 * What a value of no type the grammar knows may be: a bounded string, a boolean or null. Not a number: the
 * grammar bounds a number's digits but not its exponent, so only a schema that asks for a number gets one.
 */
const anyScalar = (): Schema => ({ oneOf: [{ type: 'string', maxLength: MAX_STRING }, { type: 'boolean' }, { type: 'null' }] });

/**
 * A tool's JSON schema as node-llama-cpp's grammar takes it (its GbnfJsonSchema subset), bounded so a
 * call always ends: see the module header. Pure.
 */
export function grammarSchema(s: unknown, depth = 0): Schema {
  if (depth > MAX_DEPTH || !isObj(s)) return anyScalar();
  const d = typeof s['description'] === 'string' ? { description: s['description'] } : {};
  if ('const' in s && isScalar(s['const'])) return { const: s['const'], ...d };
  const e = s['enum'];
  if (Array.isArray(e) && e.length > 0 && e.every(isScalar)) return { enum: e, ...d };
  const alts = s['oneOf'] ?? s['anyOf'];
  if (Array.isArray(alts) && alts.length > 0) return { oneOf: alts.map((a) => grammarSchema(a, depth + 1)), ...d };
  const t = s['type'];
  if (Array.isArray(t)) {
    const known = t.filter((x): x is string => typeof x === 'string' && (SCALARS.includes(x) || x === 'object' || x === 'array'));
    if (known.length === 0) return anyScalar();
    return { oneOf: known.map((x) => grammarSchema({ ...s, type: x }, depth + 1)), ...d };
  }
  switch (t) {
    case 'string': {
      const max = bounded(s['maxLength'], MAX_STRING);
      const min = typeof s['minLength'] === 'number' ? Math.min(bounded(s['minLength'], max), max) : undefined;
      return { type: 'string', ...(min !== undefined && min > 0 ? { minLength: min } : {}), maxLength: max, ...d };
    }
    case 'integer': {
      // Offered as values: node-llama-cpp's integer grammar takes an exponent (`1e-5`), which parses to no
      // integer. A range of fewer than MAX_ENUM values is all of them; a wider or open one its first
      // MAX_OPEN_INTEGERS from its minimum (down from its maximum when only that is set; from 0 when neither
      // is), few enough that the values documented to the model fit its context.
      const lo = s['minimum'];
      const hi = s['maximum'];
      const closed = Number.isSafeInteger(lo) && Number.isSafeInteger(hi) && (hi as number) - (lo as number) < MAX_ENUM;
      const n = closed ? MAX_ENUM : MAX_OPEN_INTEGERS;
      const from = Number.isSafeInteger(lo) ? (lo as number) : Number.isSafeInteger(hi) ? (hi as number) - (n - 1) : 0;
      const to = Math.min(Number.isSafeInteger(hi) ? (hi as number) : Number.MAX_SAFE_INTEGER, from + n - 1);
      if (to < from) return { enum: [from], ...d };
      return { enum: Array.from({ length: to - from + 1 }, (_, i) => from + i), ...d };
    }
    case 'number':
    case 'boolean':
    case 'null':
      return { type: t, ...d };
    case 'array': {
      const max = bounded(s['maxItems'], MAX_ITEMS);
      const min = typeof s['minItems'] === 'number' ? Math.min(bounded(s['minItems'], max), max) : undefined;
      return {
        type: 'array',
        items: grammarSchema(s['items'] ?? {}, depth + 1),
        ...(min !== undefined && min > 0 ? { minItems: min } : {}),
        maxItems: max,
        ...d,
      };
    }
    case 'object':
    case undefined: {
      const props = s['properties'];
      if (t === undefined && !isObj(props)) return anyScalar();
      const properties: Record<string, Schema> = {};
      if (isObj(props)) for (const [k, v] of Object.entries(props)) properties[k] = grammarSchema(v, depth + 1);
      const required = Array.isArray(s['required']) ? s['required'].filter((k) => typeof k === 'string' && k in properties) : [];
      return { type: 'object', properties, ...(required.length > 0 ? { required } : {}), additionalProperties: false, ...d };
    }
    default:
      return anyScalar();
  }
}

/** The functions offered, by wire name: every tool, or the named one alone; none under `none`. */
export function functionsOf(
  tools: readonly LocalTool[],
  choice: LocalChatRequest['toolChoice'],
): Record<string, { description: string; params: Schema }> {
  const out: Record<string, { description: string; params: Schema }> = {};
  if (choice === 'none') return out;
  for (const t of tools) {
    if (typeof choice === 'object' && t.name !== choice.name) continue;
    out[toWireName(t.name)] = { description: t.description, params: grammarSchema(t.parameters) };
  }
  return out;
}

/** A tool's answer as the history keeps it: the JSON it was, else the text. */
function resultOf(content: string): unknown {
  try {
    return JSON.parse(content) as unknown;
  } catch {
    return content;
  }
}

/**
 * The engine's messages as node-llama-cpp's chat history (system, user, model items; a model item holds
 * its text and its function calls, each with the result the tool message after it carried), ending with
 * an empty model item: the turn to generate.
 */
export function chatHistory(messages: readonly ChatMessage[]): unknown[] {
  const out: unknown[] = [];
  let calls: { id: string; item: { type: 'functionCall'; name: string; params: unknown; result: unknown } }[] = [];
  for (const m of messages) {
    if (m.role === 'system') out.push({ type: 'system', text: m.content });
    else if (m.role === 'user') out.push({ type: 'user', text: m.content });
    else if (m.role === 'assistant') {
      calls = (m.tool_calls ?? []).map((c) => ({
        id: c.id,
        item: { type: 'functionCall' as const, name: toWireName(c.name), params: c.arguments, result: null },
      }));
      out.push({ type: 'model', response: [...(m.content ? [m.content] : []), ...calls.map((c) => c.item)] });
    } else {
      const call = calls.find((c) => c.id === m.tool_call_id);
      if (call) call.item.result = resultOf(m.content);
    }
  }
  out.push({ type: 'model', response: [] });
  return out;
}

/** The calls node-llama-cpp answered with, as the engine's: catalog names, ids unique in the conversation. */
export function engineCalls(
  messages: readonly ChatMessage[],
  calls: readonly { functionName: string; params: unknown }[] | undefined,
): ToolCall[] {
  const before = messages.reduce((n, m) => n + (m.tool_calls?.length ?? 0), 0);
  return (calls ?? []).map((c, i) => ({
    id: `call_${before + i}`,
    name: fromWireName(c.functionName),
    arguments: (isObj(c.params) ? c.params : {}) as JsonObject,
  }));
}

/**
 * The chat wrapper of a call: node-llama-cpp's GeneralChatWrapper, whose context state, when the choice
 * forces a call, starts the answer inside a function call with nothing that disengages it.
 */
// biome-ignore lint/suspicious/noExplicitAny: node-llama-cpp is loaded at run time (runtime/local-model.ts); its API is checked by the tests that load a real model.
export function chatWrapper(llamaCpp: any, force: boolean): unknown {
  if (!force) return new llamaCpp.GeneralChatWrapper();
  class ForcedCall extends llamaCpp.GeneralChatWrapper {
    // biome-ignore lint/suspicious/noExplicitAny: as above.
    generateContextState(o: any): any {
      const s = super.generateContextState(o);
      return {
        contextText: s.contextText,
        stopGenerationTriggers: s.stopGenerationTriggers,
        functionCall: { initiallyEngaged: true, disengageInitiallyEngaged: [] },
      };
    }
  }
  return new ForcedCall();
}

/** A streamed piece of a call's parameters as the engine's delta (the call's index and catalog name). */
export function paramsDelta(chunk: { callIndex: number; functionName: string; paramsChunk: string }): ModelDelta {
  return { text: chunk.paramsChunk, tool_call: { index: chunk.callIndex, name: fromWireName(chunk.functionName) } };
}
