/**
 * Control-flow signal of the run loop: a step refuses, fails, or waits. Thrown
 * by executors, caught by runGraph, which journals it and ends the drive.
 */
import type { JsonObject } from '../../journal/record.ts';
import type { WireReason } from '../../reasons.ts';
import type { RunWait } from '../types.ts';

export class Stop {
  constructor(
    readonly outcome: 'refused' | 'failed' | 'waiting' | 'cancelled',
    readonly reason: WireReason,
    readonly details: JsonObject = {},
    readonly waiting: RunWait | null = null,
    readonly cause: unknown = undefined,
  ) {}
}

export const refuse = (reason: WireReason, details: JsonObject = {}) => new Stop('refused', reason, details);
export const fail = (reason: WireReason, details: JsonObject = {}, cause?: unknown) => new Stop('failed', reason, details, null, cause);
