/**
 * Executors usable as the body of map and loop.
 */
import { agent } from '../executors/agent.ts';
import { skill } from '../executors/skill.ts';
import { tool } from '../executors/tool.ts';
import { transform } from '../executors/transform.ts';
import type { LeafSpec } from '../types.ts';
import type { Executor, StepRef } from './step.ts';

const LEAVES: Record<LeafSpec['kind'], Executor> = { agent, tool, skill, transform };

export function leafExecutor(kind: LeafSpec['kind']): Executor {
  return LEAVES[kind];
}

export function leafStep(leaf: LeafSpec, id: string): StepRef {
  return { id, kind: leaf.kind, config: leaf.config, ...('seat' in leaf && leaf.seat !== undefined ? { seat: leaf.seat } : {}) };
}
