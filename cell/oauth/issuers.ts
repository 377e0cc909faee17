/**
 * The issuers a group's cells accept: `service://<group id>` (the spec's, always) and every issuer URL
 * a member declared with `--oauth-issuer` (for RFC 8414 clients, which require the metadata's issuer to
 * be the URL it was fetched from).
 *
 * The group is one authorization server with shared signing keys, so a token signed under either name
 * is the group's: each cell records its declared URL in the store when it starts (`oauth_issuers`, keyed
 * by cell id; a cell that starts without the flag removes its row, so an operator retires a URL by
 * restarting the cell without it) and follows the others' through `store.onChange` (the module wires
 * that). Any other `iss` is refused (`bad_issuer`). The edge gets the same set in its key bundle
 * (cell/edge/export.ts tokenTrustForEdge).
 */
import type { CellCore } from '../context.ts';
import { SerialLoad } from './internal/serial.ts';
import * as repo from './repository.ts';
import { groupIssuerOf, issuerOf } from './settings.ts';

export class GroupIssuers {
  #members: readonly string[] = [];
  readonly #load = new SerialLoad(() => this.#reload());

  constructor(private readonly core: CellCore) {}

  /** Every issuer accepted now: the group's `service://` issuer, this cell's own, the members' declared URLs. */
  accepted(): string[] {
    return [...new Set([groupIssuerOf(this.core.config), issuerOf(this.core.config), ...this.#members])];
  }

  /** Records (or removes) this cell's declared issuer URL, then reads the group's. */
  async register(): Promise<void> {
    const { cellId, oauthIssuer } = this.core.config;
    const kept = await repo.issuerOfCell(this.core.store, cellId);
    if (oauthIssuer !== null && kept !== oauthIssuer) {
      const at = this.core.clock.now();
      await this.core.store.write((tx) => repo.upsertIssuer(tx, cellId, oauthIssuer, at));
    } else if (oauthIssuer === null && kept !== undefined) {
      await this.core.store.write((tx) => repo.deleteIssuer(tx, cellId));
    }
    await this.reload();
  }

  /** Reads the group's declared issuers again; loads run one at a time, the latest wins. */
  reload(): Promise<void> {
    return this.#load.request();
  }

  async #reload(): Promise<void> {
    this.#members = await repo.groupIssuers(this.core.store);
  }
}
