/**
 * The fourteen registered executors, by kind.
 */
import type { ExecutorKind } from '../types.ts';
import type { Executor } from '../internal/step.ts';
import { agent } from './agent.ts';
import { tool } from './tool.ts';
import { skill } from './skill.ts';
import { conditional } from './conditional.ts';
import { parallel } from './parallel.ts';
import { join } from './join.ts';
import { consensus } from './consensus.ts';
import { humanApproval } from './human_approval.ts';
import { gate } from './gate.ts';
import { delegate } from './delegate.ts';
import { map } from './map.ts';
import { loop } from './loop.ts';
import { transform } from './transform.ts';
import { timer } from './timer.ts';

export const EXECUTORS: Readonly<Record<ExecutorKind, Executor>> = {
  agent,
  tool,
  skill,
  conditional,
  parallel,
  join,
  consensus,
  human_approval: humanApproval,
  gate,
  delegate,
  map,
  loop,
  transform,
  timer,
};
