/**
 * The audiences a group's cells accept: the API of every member.
 *
 * A token's `aud` is the API it was issued for: the issuing cell's public URL
 * + `/api/public/v1` (cell/oauth/settings.ts audienceOf). Cells of a group
 * behind one load balancer share a public URL, so their audience is one; cells
 * reached at their own addresses each have theirs. Since the group is one
 * authorization server and one resource server (shared signing keys, shared
 * denylist, one issuer), a token issued for any member's API is accepted by
 * every member: each cell records its audience in the store when it starts
 * (`oauth_audiences`, keyed by cell id, so a cell that moves replaces its
 * entry) and follows the others' through `store.onChange` (the module wires
 * that). Audiences of edge devices (`edge:<device_id>`) are not in the set:
 * a cell never accepts a token meant for a device.
 */
import type { CellCore } from '../context.ts';
import { SerialLoad } from './internal/serial.ts';
import * as repo from './repository.ts';
import { audienceOf, MCP_PATH, mcpAudienceOf } from './settings.ts';

const API_PATH = '/api/public/v1';

export class GroupAudiences {
  #members: ReadonlySet<string> = new Set();
  readonly #load = new SerialLoad(() => this.#reload());

  constructor(private readonly core: CellCore) {}

  /** This cell's audience now (its public URL is settled once it listens). */
  own(): string {
    return audienceOf(this.core.config);
  }

  /** Whether a token for `aud` is for this group's API. */
  accepts(aud: string): boolean {
    return aud === this.own() || this.#members.has(aud);
  }

  /** This cell's MCP endpoint as an audience (`<public URL>/mcp`). */
  ownMcp(): string {
    return mcpAudienceOf(this.core.config);
  }

  /**
   * Whether a token for `aud` is for the MCP endpoint of a member (its `/mcp` beside its
   * `/api/public/v1`): each member serves /mcp at the public URL whose API it recorded.
   */
  acceptsMcp(aud: string): boolean {
    if (aud === this.ownMcp()) return true;
    return aud.endsWith(MCP_PATH) && this.accepts(`${aud.slice(0, -MCP_PATH.length)}${API_PATH}`);
  }

  /** Records this cell's audience (at start, once its public URL is known), then reads the group's. */
  async register(): Promise<void> {
    const { cellId } = this.core.config;
    const own = this.own();
    if ((await repo.audienceOfCell(this.core.store, cellId)) !== own) {
      const at = this.core.clock.now();
      await this.core.store.write((tx) => repo.upsertAudience(tx, cellId, own, at));
    }
    await this.reload();
  }

  /** Reads the group's audiences again; loads run one at a time, the latest wins. */
  reload(): Promise<void> {
    return this.#load.request();
  }

  async #reload(): Promise<void> {
    this.#members = new Set(await repo.groupAudiences(this.core.store));
  }
}
