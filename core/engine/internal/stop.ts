/**
 * Control-flow signal of the run loop: a step refuses, fails, or waits. Thrown
 * by executors, caught by runGraph, which journals it and ends the drive.
 */
import type { JsonObject } from '../../journal/record.ts';

export class Stop {
  constructor(
    readonly outcome: 'refused' | 'failed' | 'waiting' | 'cancelled',
    readonly reason: string,
    readonly details: JsonObject = {},
    readonly waiting: { step_id: string; for: 'approval' | 'timer'; wake_at: number | null } | null = null,
    readonly cause: unknown = undefined,
  ) {}
}

export const refuse = (reason: string, details: JsonObject = {}) => new Stop('refused', reason, details);
export const fail = (reason: string, details: JsonObject = {}, cause?: unknown) => new Stop('failed', reason, details, null, cause);
