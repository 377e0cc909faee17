/**
 * What a host (the cell, an edge device) gives the MCP endpoint both serve
 * (runtime/mcp/endpoint.ts): its tools for a caller and how a call runs. The
 * protocol (sessions, the SDK's Streamable HTTP transport, progress,
 * elicitation, cancellation, errors) is the endpoint's, the same in both.
 */
import type { CallToolResult, ElicitResult, LoggingLevel, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../log.ts';

export type { CallToolResult, ElicitResult, Tool };

/** A form elicitation (MCP `elicitation/create`, mode form): a message and a flat object schema of primitives. */
export interface ElicitForm {
  message: string;
  requestedSchema: {
    type: 'object';
    properties: Record<string, Record<string, unknown>>;
    required?: string[];
  };
}

/** What a running tool call may do besides answering. */
export interface ToolCallContext {
  /** Aborts when the client cancels the call (`notifications/cancelled`) or the session ends. */
  readonly signal: AbortSignal;
  /** True when the client sent a progressToken: progress() then reaches it. */
  readonly wantsProgress: boolean;
  /** A progress notification (each one's `progress` greater than the last); a no-op without a progressToken. */
  progress(message: string): Promise<void>;
  /** True when the client declared the elicitation capability (form mode). */
  readonly canElicit: boolean;
  /**
   * Asks the client's user (`elicitation/create` on this call's stream); rejects on timeout, when the
   * client fails it, or when the call or `signal` is aborted (the client is told it was cancelled).
   */
  elicit(form: ElicitForm, timeoutMs: number, signal?: AbortSignal): Promise<ElicitResult>;
  /** A log notification (MCP logging), filtered by the level the client set. */
  log(level: LoggingLevel, data: unknown): Promise<void>;
}

/** The host's side of the endpoint, for an authenticated caller `A`. */
export interface McpHost<A> {
  readonly serverInfo: { name: string; title?: string; version: string };
  readonly instructions?: string;
  /** Who a session belongs to: a session is only ever used again by the caller it was opened by. */
  binding(auth: A): string;
  /** The tools this caller may call now: never one it could not. */
  listTools(auth: A): Promise<Tool[]>;
  /**
   * Runs a tool for the caller. Unknown tools throw `unknownTool(name)`; a
   * refusal or failure of the call is a result with `isError: true`.
   */
  callTool(auth: A, name: string, args: Record<string, unknown>, ctx: ToolCallContext): Promise<CallToolResult>;
  readonly log: Logger;
}
