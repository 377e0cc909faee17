/**
 * Executors usable as the body of map and loop.
 */
import { agent } from './agent.ts';
import { skill } from './skill.ts';
import { tool } from './tool.ts';
import { transform } from './transform.ts';
import type { LeafSpec } from '../types.ts';
import type { Executor, StepRef } from './_step.ts';

const LEAVES: Record<LeafSpec['kind'], Executor> = { agent, tool, skill, transform };

export function leafExecutor(kind: LeafSpec['kind']): Executor {
  return LEAVES[kind];
}

export function leafStep(leaf: LeafSpec, id: string): StepRef {
  return { id, kind: leaf.kind, config: leaf.config, ...('seat' in leaf && leaf.seat !== undefined ? { seat: leaf.seat } : {}) };
}
