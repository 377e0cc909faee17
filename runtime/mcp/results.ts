/**
 * Tool results as both hosts answer them: a structured result (the tool's
 * `outputSchema`) repeated as JSON text for clients that read text only, and
 * refusals as results with `isError: true` carrying the service's error
 * envelope (code, message, details), never internal text.
 */
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { isServiceError, type ErrorEnvelope } from '../../core/errors.ts';
import type { CallToolResult } from './types.ts';

/** A structured result, also as text. */
export function structuredResult(structured: Record<string, unknown>, isError = false): CallToolResult {
  return {
    content: [{ type: 'text', text: JSON.stringify(structured) }],
    structuredContent: structured,
    ...(isError ? { isError: true } : {}),
  };
}

/** The service's error envelope of a refusal, as the HTTP API would answer it (ServiceErrors only). */
export function envelopeOf(e: { code: string; message: string; details?: Record<string, unknown> | undefined }): ErrorEnvelope {
  return {
    error: e.code as ErrorEnvelope['error'],
    message: e.message,
    ...(e.details !== undefined ? { details: e.details } : {}),
  };
}

/** A refusal as a tool result (isError), or rethrows what is not a refusal. */
export function refusalResult(e: unknown): CallToolResult {
  if (!isServiceError(e)) throw e;
  const env = envelopeOf(e);
  return { content: [{ type: 'text', text: JSON.stringify(env) }], isError: true };
}

/** The JSON-RPC error of a tool name the caller has no tool by (-32602, as the MCP spec asks). */
export function unknownTool(name: string): McpError {
  return new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name}`);
}

/** Arguments that do not fit a tool's input schema (-32602). */
export function invalidArguments(message: string, problems: string[]): McpError {
  return new McpError(ErrorCode.InvalidParams, message, { problems });
}

/** The output schema of every tool that answers a run: its id, state, output or error, and the receipt. */
export const RUN_RESULT_SCHEMA = {
  type: 'object',
  properties: {
    run_id: { type: 'string' },
    state: { type: 'string', description: 'queued, running, waiting, completed, failed, refused or cancelled' },
    output: { description: "The run's output (any JSON); null until it completes" },
    error: { type: ['object', 'null'], description: "The run's error envelope when it did not complete" },
    pending_approvals: { type: 'array', description: 'Steps waiting for a human approval (state waiting)' },
    note: { type: 'string' },
    receipt: {
      type: 'object',
      description: 'The signed receipt (docs/mcp.md): run_id, graph_hash, journal head, state, output_hash, issuer, kid, sig',
    },
  },
  required: ['run_id', 'state'],
} as const;
