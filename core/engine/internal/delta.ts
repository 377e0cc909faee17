/**
 * Live tokens of one model call: turns the model port's fragments into the
 * step's deltas (`ports.delta`), each placed by its offset in the answer so
 * far, and, when the port streamed nothing, gives the whole answer as one
 * delta at the end (a provider that cannot stream). Deltas are not journal
 * records: they change nothing the engine decides or records.
 */
import type { ModelCallOptions, ModelDelta, ModelResponse, StepDelta } from '../types.ts';
import type { RunContext } from './context.ts';

export interface DeltaSink {
  /** What to pass to ModelPort.complete. */
  opts: ModelCallOptions;
  /** After the call answered: the whole answer as one delta per part when nothing streamed. */
  end(resp: ModelResponse): void;
}

/** A sink for one call of `stepId` by `seatId` (one per call: a new call starts its answer at index 0), or undefined without a delta port. */
export function deltaSink(ctx: RunContext, seatId: string, stepId: string): DeltaSink | undefined {
  const port = ctx.ports.delta;
  if (port === undefined) return undefined;
  const roleLabel = ctx.seat(seatId).role_label;
  // Length of the answer's text (key -1) and of each tool call's arguments, so far.
  const length = new Map<number, number>();
  const calls = new Map<number, { id?: string; name?: string }>();
  let streamed = false;
  const emit = (text: string, call: ModelDelta['tool_call']) => {
    const key = call === undefined ? -1 : call.index;
    const index = length.get(key) ?? 0;
    length.set(key, index + text.length);
    const d: StepDelta = { step_id: stepId, seat: seatId, role_label: roleLabel, index, text };
    if (call !== undefined) {
      const known = calls.get(call.index) ?? {};
      if (call.id !== undefined) known.id = call.id;
      if (call.name !== undefined) known.name = call.name;
      calls.set(call.index, known);
      d.tool_call = { index: call.index, ...known };
    }
    try {
      port(d);
    } catch {
      // A subscriber's failure is not the run's: the answer is journaled whole either way.
    }
  };
  return {
    opts: {
      onDelta(d) {
        if (typeof d?.text !== 'string') return;
        if (d.restart === true) {
          length.clear();
          calls.clear();
        }
        if (d.text === '' && d.tool_call === undefined) return;
        streamed = true;
        emit(d.text, d.tool_call);
      },
    },
    end(resp) {
      if (streamed) return;
      if (resp.content !== '') emit(resp.content, undefined);
      const calls = resp.tool_calls ?? [];
      for (let i = 0; i < calls.length; i++)
        emit(JSON.stringify(calls[i]!.arguments), { index: i, id: calls[i]!.id, name: calls[i]!.name });
    },
  };
}
