/**
 * The answers so far of a run's model steps in flight, kept from their live
 * deltas (StepDelta), so a reader joining mid-step can be given the text so
 * far in one delta per part (the answer's text, each tool call's arguments),
 * each at index 0. The cell's event stream and the edge's keep one per run;
 * the rule a reader applies to a delta (`answer.slice(0, index) + text`) is
 * the one applied here.
 */
import type { StepDelta } from './types.ts';

interface LiveStep {
  seat: string;
  role_label: string;
  text: string;
  calls: Map<number, { id?: string; name?: string; text: string }>;
}

/** `text` with `piece` placed at `index`. */
function place(text: string, index: number, piece: string): string {
  return index === text.length ? text + piece : text.slice(0, index) + piece;
}

export class LiveAnswers {
  private readonly steps = new Map<string, LiveStep>();

  /** Takes a delta into the answer of its step. */
  apply(d: StepDelta): void {
    let step = this.steps.get(d.step_id);
    if (step === undefined) {
      step = { seat: d.seat, role_label: d.role_label, text: '', calls: new Map() };
      this.steps.set(d.step_id, step);
    }
    if (d.tool_call === undefined) {
      step.text = place(step.text, d.index, d.text);
      return;
    }
    const call = step.calls.get(d.tool_call.index) ?? { text: '' };
    if (d.tool_call.id !== undefined) call.id = d.tool_call.id;
    if (d.tool_call.name !== undefined) call.name = d.tool_call.name;
    call.text = place(call.text, d.index, d.text);
    step.calls.set(d.tool_call.index, call);
  }

  /** Forgets a step (its record, which carries the whole answer, was written). */
  end(stepId: string): void {
    this.steps.delete(stepId);
  }

  /** Steps in flight. */
  get size(): number {
    return this.steps.size;
  }

  /** The answer so far of each step in flight, one delta per part, each from index 0. */
  catchUp(): StepDelta[] {
    const out: StepDelta[] = [];
    for (const [stepId, st] of this.steps) {
      const base = { step_id: stepId, seat: st.seat, role_label: st.role_label, index: 0 };
      if (st.text !== '') out.push({ ...base, text: st.text });
      for (const [i, c] of [...st.calls].sort(([a], [b]) => a - b)) {
        const call: { index: number; id?: string; name?: string } = { index: i };
        if (c.id !== undefined) call.id = c.id;
        if (c.name !== undefined) call.name = c.name;
        out.push({ ...base, text: c.text, tool_call: call });
      }
    }
    return out;
  }
}
