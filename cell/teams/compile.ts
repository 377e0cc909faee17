/**
 * From stored resources to the pure compiler (core/compiler): the formation,
 * its billets in order, and (for a crew) the agent bound to each billet with
 * its authority, model and system prompt. Compile errors become
 * invalid_request with `details.reason` = the compiler's code.
 */
import { compileFormation } from '../../core/compiler/compile.ts';
import type { BilletInput, FormationInput, SeatBinding } from '../../core/compiler/types.ts';
import type { Graph } from '../../core/engine/types.ts';
import { ServiceError } from '../../core/errors.ts';
import type { Cell } from '../context.ts';
import { getAgent } from './agents.ts';
import { listBillets, type Crew, type Formation } from './formations.ts';

export interface CompilerInput { formation: FormationInput; billets: BilletInput[]; bindings: Record<string, SeatBinding> | undefined }

export function compilerInput(cell: Cell, f: Formation, crew?: Crew): CompilerInput {
  const formation: FormationInput = JSON.parse(JSON.stringify({
    name: f.name, coordination_policy: f.coordination_policy, consensus_mode: f.consensus_mode, limits: f.limits,
    topology: f.topology, pre: f.pre, post: f.post, prompt: f.prompt,
  })) as FormationInput;
  const billets: BilletInput[] = listBillets(cell, f.formation_id).map((b) => ({
    id: b.billet_id, role_label: b.role_label, required_skills: b.required_skills, reports_to: b.reports_to,
    authority_cap: b.authority_cap as BilletInput['authority_cap'], position: b.position,
  }));
  let bindings: Record<string, SeatBinding> | undefined;
  if (crew) {
    bindings = {};
    for (const [billetId, agentId] of Object.entries(crew.assignments)) {
      const a = getAgent(cell, agentId);
      const binding: SeatBinding = { agent_id: agentId };
      if (a) {
        binding.authority = a.authority as NonNullable<SeatBinding['authority']>;
        binding.model = a.model_preference;
        binding.system_prompt = a.system_prompt;
      }
      bindings[billetId] = binding;
    }
  }
  return { formation, billets, bindings };
}

/** Compiles a formation (bound to a crew when given); throws invalid_request on a compile error. */
export function compileFor(cell: Cell, f: Formation, crew?: Crew): { graph: Graph; graphHash: string; formationHash: string } {
  const i = compilerInput(cell, f, crew);
  const r = compileFormation(i.formation, i.billets, i.bindings);
  if (!r.ok) {
    throw new ServiceError('invalid_request', `the formation does not compile: ${r.message}`, { details: { reason: r.code, ...r.details } });
  }
  return { graph: r.graph, graphHash: r.graphHash, formationHash: r.formationHash };
}
