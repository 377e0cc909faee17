/**
 * The events of one MCP session kept for resumption (SEP-1699): a client
 * whose SSE stream broke reconnects with `Last-Event-ID` and gets what it
 * missed on that stream. In memory, bounded: the oldest events go first, and
 * a stream whose events went is not resumed (the client re-sends its
 * request, or follows the run with the `run_status` tool).
 */
import type { EventStore } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

export class SessionEventStore implements EventStore {
  readonly #events: { id: string; stream: string; message: JSONRPCMessage }[] = [];
  #next = 0;
  constructor(private readonly max: number) {}

  async storeEvent(streamId: string, message: JSONRPCMessage): Promise<string> {
    const id = `${streamId}_${++this.#next}`;
    this.#events.push({ id, stream: streamId, message });
    if (this.#events.length > this.max) this.#events.splice(0, this.#events.length - this.max);
    return id;
  }

  async getStreamIdForEventId(eventId: string): Promise<string | undefined> {
    return this.#events.find((e) => e.id === eventId)?.stream;
  }

  async replayEventsAfter(
    lastEventId: string,
    { send }: { send: (eventId: string, message: JSONRPCMessage) => Promise<void> },
  ): Promise<string> {
    const at = this.#events.findIndex((e) => e.id === lastEventId);
    if (at < 0) return '';
    const stream = this.#events[at]!.stream;
    for (const e of this.#events.slice(at + 1)) if (e.stream === stream) await send(e.id, e.message);
    return stream;
  }
}
