/**
 * The closed set of refusal and failure reasons (issue 27), like jose's error
 * classes with their codes: each reason once, with the envelope code(s) it
 * travels with and one sentence for operators.
 *
 * A reason is the stable machine sub-code under an error's code: in an error
 * envelope it is `details.reason` (core/errors.ts), in a run it is
 * `error.reason` (and the `reason` of its `refusal` journal record). Callers,
 * tests, metrics and logs switch on it; the sentence and the message may
 * change, the name does not.
 *
 * - `codes`: the envelope codes the reason is sent with (HTTP status from
 *   ERROR_STATUS); empty for a reason only a run or the audit trail carries.
 * - `runs`: the run error codes (`error.code` of a run) the reason ends a run
 *   with, when it can end one (a tool refusal refuses a crew run and fails a
 *   job step).
 *
 * `Reason` is derived from the keys, and the helpers that build refusals take
 * it (ServiceError details, EngineRefusal, the engine's refuse/fail, run
 * errors), so a reason not declared here fails to type-check;
 * test/core/reasons.test.ts scans the sources for reason literals and for
 * entries no source uses. A refusal relayed from a dependency that named no
 * reason carries that dependency's error code instead (`WireReason`).
 */
import { ERROR_STATUS, type ErrorCode, type ErrorStatus } from './errors.ts';

/** What a run's `error.code` says when a reason ends it. */
export type RunErrorCode = 'refused' | 'failed' | 'cancelled' | 'internal_error';

export interface ReasonEntry {
  /** Envelope codes this reason is sent with; empty when only a run or the audit trail carries it. */
  readonly codes: readonly ErrorCode[];
  /** The run error codes it ends a run with (`error.code` of the run), when it can end one. */
  readonly runs?: readonly RunErrorCode[];
  /** One sentence for operators: what happened and, where it helps, what to do. */
  readonly sentence: string;
}

const U = ['unauthorized'] as const;
const F = ['forbidden'] as const;
const I = ['invalid_request'] as const;
const C = ['conflict'] as const;
const S = ['service_unavailable'] as const;

/** Every reason, alphabetically. */
export const REASONS = {
  agent_inactive: {
    codes: C,
    runs: ['refused'],
    sentence: 'An agent of the crew is not an active principal; the run is refused before it starts.',
  },
  agent_principal: { codes: C, sentence: 'An agent principal is managed through agent-teams, not the principal routes.' },
  agent_quota_reached: { codes: C, sentence: 'The cell already runs its quota of active standing agents.' },
  agent_unknown: { codes: [], runs: ['refused'], sentence: 'A seat of the run names an agent the cell does not know.' },
  already_decided: {
    codes: C,
    sentence: "The caller (or a principal of its token's delegation chain) already approved or rejected this approval step.",
  },
  already_resolved: { codes: C, sentence: 'The lost outcome of this call was already resolved by an operator.' },
  approval_input_changed: {
    codes: C,
    sentence: 'The decision approved another input than the step has now; it does not count and the step asks again.',
  },
  approval_not_entitled: {
    codes: F,
    sentence:
      'A journal carried back from a device records an approval the device was not entitled to take (an approver its key bundle did not carry with the permission, another digest, or decisions that do not meet the rule); the record is named.',
  },
  approval_pending: { codes: [], sentence: 'Not a refusal: the run waits for a human approval (the reason of a waiting run).' },
  approval_rejected: { codes: [], runs: ['refused'], sentence: 'A named approver rejected the step.' },
  approval_timeout: { codes: [], runs: ['refused'], sentence: 'The approval step timed out before its quorum approved it.' },
  approval_unavailable: { codes: [], runs: ['refused'], sentence: 'The step needs a human approval and this host has no approvals.' },
  artifact_too_large: { codes: I, sentence: 'A bundle or manifest file is larger than the program reads (edge: --max-bundle-bytes).' },
  bad_alg: { codes: U, sentence: 'The access token is signed with an algorithm that is not accepted.' },
  bad_audience: { codes: U, sentence: 'The access token is for another audience.' },
  bad_device_key: { codes: I, sentence: 'The device public key is not an Ed25519 public JWK.' },
  bad_host: { codes: I, sentence: "The request's Host is not one the edge serves." },
  bad_issuer: { codes: U, sentence: 'The access token is from an issuer that is not trusted.' },
  bad_model_name: { codes: I, sentence: 'The model name is not a valid local model file name.' },
  bad_signature: {
    codes: ['unauthorized', 'forbidden'],
    sentence: 'A token (401) or a signed artifact (403) carries a signature that does not verify.',
  },
  bad_typ: { codes: U, sentence: 'The access token has the wrong JOSE `typ`.' },
  billet_has_reports: { codes: C, sentence: 'The billet still has billets reporting to it.' },
  billet_seats_stage: { codes: C, sentence: 'A stage of the formation names the billet as its seat.' },
  body_too_large: { codes: I, sentence: 'The request body is larger than the limit.' },
  budget_ceiling_exceeded: { codes: [], runs: ['refused'], sentence: "A model call would pass the run's token ceiling." },
  budget_exceeded: { codes: [], runs: ['refused'], sentence: "The agent's budget ledger has too few tokens left for the call." },
  builtin_client: { codes: C, sentence: 'A built-in OAuth client cannot be changed or deleted.' },
  builtin_client_name: { codes: C, sentence: 'The client name is reserved for a built-in OAuth client.' },
  builtin_role: { codes: C, sentence: 'A built-in role cannot be changed or deleted.' },
  bundle_expired: { codes: U, sentence: "The edge's key bundle has expired; carry a fresh one to the device." },
  bundle_live: {
    codes: C,
    sentence:
      'A crew bundle issued to the device has not expired: it may still spend the budget it holds, so the hold is not released until then.',
  },
  calc_invalid: { codes: I, sentence: 'The calc tool was given an expression it cannot evaluate.' },
  call_interrupted: {
    codes: [],
    runs: ['failed'],
    sentence: 'A model or tool call was interrupted too many times by restarts; it is not issued again.',
  },
  cancelled: { codes: S, runs: ['cancelled'], sentence: 'The run or the call was cancelled.' },
  cannot_create_principal: { codes: F, sentence: 'The caller may not create principals, which minting an agent does.' },
  cannot_manage_agent: { codes: F, sentence: 'The caller does not manage the agent.' },
  cell_storage_quota: { codes: C, runs: ['failed'], sentence: "Storing the run's data would pass the cell's storage quota for runs." },
  cert_mismatch: { codes: U, sentence: 'The client certificate is not the one the token is bound to.' },
  cert_required: { codes: U, sentence: 'The token is bound to a client certificate and none was presented.' },
  classification_unresolved: { codes: [], runs: ['refused'], sentence: 'A skill could not resolve the classification of what it reads.' },
  clearance_insufficient: { codes: F, runs: ['refused', 'failed'], sentence: "The entry is classified above the agent's clearance." },
  clock_behind: { codes: F, sentence: "The artifact was issued after the device's current time: the clock is in doubt." },
  clock_rollback: { codes: F, sentence: 'The device clock is earlier than the last accepted artifact: the clock is in doubt.' },
  commit_unknown: { codes: S, sentence: 'The store lost the connection during a commit; whether it committed is unknown.' },
  compartment_not_granted: {
    codes: F,
    runs: ['refused', 'failed'],
    sentence: 'The entry is labelled with compartments the agent does not hold.',
  },
  concurrent_rotation: { codes: C, sentence: 'The key was rotated by another request at the same time.' },
  concurrent_update: { codes: C, sentence: 'Another request changed the same thing at the same time; retry.' },
  connection_lost: { codes: S, sentence: 'The connection to the PostgreSQL store was lost.' },
  consensus_tie: { codes: [], runs: ['refused'], sentence: 'A majority consensus step ended in a tie.' },
  console_unavailable: { codes: S, sentence: 'The operator console is not built into this cell.' },
  contract_error: { codes: [], runs: ['failed'], sentence: 'Loading a governing contract failed.' },
  contract_unavailable: { codes: [], runs: ['refused'], sentence: 'A step names a governing contract this host does not have.' },
  crew_changed: { codes: C, sentence: 'The crew changed since the version the request names.' },
  crew_tools_unpinned: {
    codes: C,
    sentence:
      "Some of the crew's MCP tools have no pin its graph carries (none in the catalog, or re-pinned since): a crew bundle carries none; review the source, and compile the crew again.",
  },
  cron_too_frequent: { codes: I, sentence: 'The schedule fires more often than the cell allows.' },
  data_not_granted: { codes: F, runs: ['refused', 'failed'], sentence: 'No data grant covers the workspace storage the tool touches.' },
  definition_deleted: { codes: C, sentence: 'The job definition was deleted.' },
  definition_moved: {
    codes: C,
    sentence: 'The live definition is no longer the one reviewed: the server changed it again; review it and re-pin.',
  },
  definition_quota_reached: { codes: C, sentence: 'The principal already authors its quota of live job definitions.' },
  delegated_credential: {
    codes: F,
    sentence:
      'A delegated token (one naming actors) makes nothing that outlives it: no key, client, SAT, schedule, endpoint, device, bundle, principal or role.',
  },
  delegation_too_deep: { codes: U, sentence: 'The delegation chain has more actors than allowed.' },
  delegation_unresolved: { codes: [], runs: ['refused'], sentence: 'A delegate step could not resolve which seat to delegate to.' },
  device_deleted: { codes: C, sentence: 'The edge device was deleted: it gets no bundle, token or journal import.' },
  device_disabled: { codes: C, sentence: 'The edge device is disabled: it gets no bundle, token or journal import until it is enabled.' },
  device_exists: { codes: C, sentence: 'A device with this id is already registered.' },
  device_log_invalid: {
    codes: F,
    sentence: "The device's run log in the journal export does not hold the journal (checkpoint or inclusion).",
  },
  device_tools_unavailable: {
    codes: C,
    sentence:
      "The device cannot honour some of the crew's tools (not in its catalog, kv with no workspace, an MCP source it does not configure or whose server's definition is not the bundle's pin); the run was not started.",
  },
  disk_full: { codes: S, sentence: "The store's disk is full; it accepts no writes until there is room." },
  dpop_ath_mismatch: { codes: U, sentence: 'The DPoP proof `ath` is not the hash of the access token.' },
  dpop_bad_alg: { codes: U, sentence: 'The DPoP proof uses an algorithm that is not accepted.' },
  dpop_bad_key: { codes: U, sentence: 'The DPoP proof key is not a usable public key.' },
  dpop_htm_mismatch: { codes: U, sentence: 'The DPoP proof is for another HTTP method.' },
  dpop_htu_mismatch: { codes: U, sentence: 'The DPoP proof is for another URL.' },
  dpop_invalid: { codes: U, sentence: 'The DPoP proof is malformed or does not verify.' },
  dpop_key_mismatch: { codes: U, sentence: 'The DPoP proof key is not the key the token is bound to.' },
  dpop_replay: { codes: U, sentence: 'The DPoP proof was used before.' },
  dpop_required: { codes: U, sentence: 'The token is DPoP-bound and no DPoP proof came with it.' },
  dpop_stale: { codes: U, sentence: 'The DPoP proof is too old or from the future.' },
  duplicate_billet: { codes: I, sentence: 'The formation names the same billet twice.' },
  duplicate_key: { codes: I, sentence: 'The JSON body names the same key twice in one object.' },
  duplicate_rule: { codes: I, sentence: 'The contract names the same rule twice.' },
  effect_record_invalid: {
    codes: [],
    runs: ['failed'],
    sentence: "The record of a SQL step's earlier commit does not verify; the step is not run again (it may have applied).",
  },
  egress_denied: { codes: F, runs: ['refused', 'failed'], sentence: 'The destination is not on the egress allowlist.' },
  egress_private_address: {
    codes: F,
    runs: ['refused', 'failed'],
    sentence: 'Egress to a loopback, private or link-local address is refused.',
  },
  empty_formation: { codes: I, sentence: 'The formation has no billets.' },
  engine_error: { codes: [], runs: ['internal_error'], sentence: 'The run failed unexpectedly; the log has the cause under the run id.' },
  expired: { codes: ['unauthorized', 'forbidden'], sentence: 'The key or token (401), or the signed artifact (403), has expired.' },
  expression_failed: { codes: [], runs: ['refused'], sentence: 'An expression of the formation failed to evaluate.' },
  field_not_allowed: { codes: I, sentence: 'The body sets a field this kind of resource does not take.' },
  formation_changed: { codes: C, sentence: 'The formation changed since the version the request names.' },
  formation_id_not_allowed: { codes: I, sentence: 'A job template names a graph, not a formation.' },
  formation_id_without_crew: { codes: I, sentence: 'A formation id needs the crew that binds it.' },
  formation_superseded: {
    codes: C,
    sentence: "The formation version is older than the crew's current one; fork with the current version or a newer one.",
  },
  gate_declined: { codes: [], runs: ['refused'], sentence: 'A contract rule of a gate evaluated false.' },
  grace_elapsed: { codes: U, sentence: "A rotated key's previous secret is past its grace window." },
  graph_changed: { codes: C, runs: ['refused'], sentence: "The formation's graph changed since the run started; the run is not resumed." },
  graph_hash_mismatch: { codes: F, sentence: 'The crew bundle graph does not match its graph hash.' },
  graph_not_kept: { codes: ['not_found'], sentence: "The run's graph is no longer kept." },
  graph_unknown: {
    codes: [],
    runs: ['refused'],
    sentence: 'The job names a graph this cell does not know (its formation or crew changed).',
  },
  header_not_allowed: {
    codes: F,
    runs: ['refused', 'failed'],
    sentence: 'A tool call set a request header an agent may not set (credentials, hop-by-hop, framing, Idempotency-Key).',
  },
  immutable_field: { codes: I, sentence: 'The body changes a field that cannot be changed after creation.' },
  in_use: { codes: C, sentence: 'The resource is still used; `details.used_by` names the users.' },
  internal_error: {
    codes: [],
    runs: ['failed'],
    sentence: 'A step of the run failed unexpectedly in the engine; the log has the cause under the run id.',
  },
  invalid: { codes: [], sentence: 'Audit only: an imported journal was refused for a reason its verifier did not name.' },
  invalid_cron: { codes: I, sentence: 'The cron expression is not valid.' },
  invalid_expression: { codes: I, sentence: 'A contract rule is not a valid expression.' },
  invalid_formation: { codes: I, sentence: 'The formation is not well formed.' },
  invalid_graph: { codes: [], runs: ['refused'], sentence: 'The graph the run was given does not validate.' },
  invalid_input: { codes: I, sentence: "The input does not match the endpoint's input schema." },
  invalid_input_schema: { codes: I, sentence: 'The input schema is not one the cell accepts.' },
  invalid_prompt_ref: { codes: I, sentence: 'The prompt reference is not valid.' },
  invalid_skill: { codes: I, sentence: 'The skill definition is not valid.' },
  invalid_skill_ref: { codes: I, sentence: 'The skill reference is not valid.' },
  invalid_spec: { codes: I, runs: ['failed'], sentence: 'The job spec is not valid.' },
  invalid_step_policy: { codes: I, sentence: 'The step policy (timeout, retry) is not valid.' },
  invalid_target: { codes: I, sentence: 'The target is not valid.' },
  invalid_template: { codes: I, sentence: 'The job template is not valid.' },
  invalid_timezone: { codes: I, sentence: 'The time zone is not an IANA time zone name.' },
  invalid_transition: { codes: C, sentence: "The principal's lifecycle state does not allow this transition." },
  ip_not_allowed: { codes: F, sentence: "The caller's IP address is not in the key's allowed ranges." },
  journal_act_not_entitled: {
    codes: F,
    sentence:
      "An imported journal records a tool call the device was not entitled to under the bundle it held (the seat's grant, mode, egress, data grants, clearance or compartments).",
  },
  journal_error: { codes: [], runs: ['failed'], sentence: "Writing the run's journal failed." },
  journal_exists: { codes: C, sentence: 'A journal for this run was already imported.' },
  journal_invalid: { codes: F, runs: ['failed'], sentence: 'The journal does not verify.' },
  journal_tool_unpinned: {
    codes: F,
    sentence:
      "A record of the device's journal calls an MCP tool the crew bundle did not carry, or under another pin than the bundle's; the journal is not imported.",
  },
  key_expired: { codes: C, sentence: 'The key has expired and cannot be rotated.' },
  key_not_active: { codes: C, sentence: 'The key is not active.' },
  last_owner: { codes: C, sentence: 'The last active owner cannot be removed.' },
  log_size_unknown: {
    codes: I,
    sentence: 'The run log has no tree of the size asked for (yet): sizes run from 0 to the current checkpoint.',
  },
  loop_limit_exceeded: { codes: [], runs: ['refused'], sentence: 'A loop step reached its iteration limit.' },
  malformed: { codes: I, sentence: 'The signed artifact or the uploaded file is malformed.' },
  malformed_request: { codes: I, sentence: 'The request is not valid JSON or not the shape the route takes (the cell and the edge).' },
  malformed_token: { codes: U, sentence: 'The access token is not a well-formed JWT.' },
  map_too_large: { codes: [], runs: ['refused'], sentence: 'A map step got more items than its limit.' },
  may_act: { codes: [], sentence: 'Audit only: a token exchange refused because the subject does not let the actor act for it.' },
  memory_limit: { codes: [], runs: ['failed'], sentence: 'The task passed its memory cap and was stopped.' },
  method_not_allowed: { codes: ['method_not_allowed'], sentence: 'The path does not serve this method; `Allow` names those it does.' },
  missing_claim: { codes: U, sentence: 'The access token lacks a required claim.' },
  missing_field: { codes: I, sentence: 'A required field is missing.' },
  missing_permission: { codes: F, sentence: 'The caller lacks a permission the operation needs.' },
  missing_scope: { codes: F, sentence: 'The credential lacks the scope the endpoint needs.' },
  model_error: { codes: [], runs: ['failed'], sentence: 'The model call failed; `details.upstream` says why when the provider said.' },
  model_mismatch: { codes: F, sentence: 'The model file does not match its manifest.' },
  model_missing: { codes: S, sentence: 'The local model file is missing.' },
  model_tampered: { codes: F, sentence: 'The model file does not match its signed manifest; it is not loaded.' },
  model_unavailable: { codes: [], runs: ['refused'], sentence: 'No model is available to the seat.' },
  mtls_unavailable: { codes: I, sentence: 'Certificate-bound tokens need mTLS, which this cell does not terminate.' },
  name_taken: { codes: C, sentence: 'The name is already taken.' },
  no_answers: { codes: [], runs: ['refused'], sentence: 'A consensus step got no answers.' },
  no_budget_ledger: { codes: C, runs: ['refused'], sentence: 'No budget ledger is registered for an agent of the run.' },
  no_client_secret: { codes: C, sentence: 'The OAuth client has no secret (it is a public client).' },
  no_key_bundle: { codes: U, sentence: 'The edge has no key bundle loaded.' },
  no_local_model: { codes: F, sentence: 'The edge has no local model loaded.' },
  no_majority: { codes: [], runs: ['refused'], sentence: 'A majority consensus step reached no majority.' },
  no_provider: { codes: [], runs: ['refused'], sentence: 'No model provider is registered.' },
  no_token_keys: { codes: U, sentence: 'The key bundle carries no token verification keys.' },
  no_unanimity: { codes: [], runs: ['refused'], sentence: 'A unanimity consensus step was not unanimous.' },
  no_unknown_outcome: { codes: C, sentence: 'The run is not waiting on the lost outcome of this call.' },
  not_a_node: { codes: I, sentence: "The step named is not a node of the run's graph." },
  not_a_step: { codes: I, sentence: 'The sequence number named is not a finished step of the run.' },
  not_an_approver: { codes: F, sentence: 'The caller is not a named approver of this step.' },
  not_ready: { codes: S, sentence: 'The cell is not ready; `details.checks` names the failing checks.' },
  not_yet_valid: { codes: U, sentence: 'The access token is not valid yet.' },
  outcome_mismatch: {
    codes: F,
    sentence: 'A journal carried back says an outcome its records do not end with (a run that has not ended, or one cut short).',
  },
  outcome_unknown: {
    codes: [],
    runs: ['failed'],
    sentence:
      'A side-effecting call not declared idempotent was in flight when its driver stopped: the run waits for an operator to retry it, record its result or fail it (and fails when told to).',
  },
  output_limit: { codes: [], runs: ['failed'], sentence: 'The task output passed its size cap.' },
  over_authority: { codes: I, sentence: "A billet's authority exceeds what it may hold (its manager's cap or the caller's authority)." },
  owner_inactive: { codes: ['unauthorized', 'invalid_request'], sentence: "The key's owner is not an active principal." },
  parent_unknown: { codes: C, sentence: 'The run a journal says it was forked from has not been imported: import that journal first.' },
  pkce_mismatch: { codes: U, sentence: 'The PKCE verifier does not match the challenge.' },
  placement_unmet: { codes: C, runs: ['refused'], sentence: "This cell does not meet the run's placement constraints." },
  posture_forbidden: { codes: F, runs: ['refused'], sentence: 'The deployment posture forbids this model provider or catalog source.' },
  principal_inactive: { codes: C, sentence: 'The principal is not active.' },
  private_key_sent: { codes: I, sentence: 'The device key sent carries private key material; send only the public key.' },
  provider_bad_response: { codes: S, sentence: 'The model provider answered with a body that cannot be read.' },
  provider_error: { codes: S, sentence: 'The model provider failed (5xx).' },
  provider_rate_limited: { codes: S, sentence: 'The model provider is rate limiting.' },
  provider_rejected: { codes: S, sentence: 'The model provider rejected the request (4xx).' },
  provider_timeout: { codes: S, sentence: 'The model provider timed out.' },
  provider_unreachable: { codes: S, sentence: 'The model provider is unreachable.' },
  publisher_inactive: { codes: F, sentence: "The endpoint's publisher is no longer an active principal." },
  region_not_allowed: { codes: F, sentence: "The serving region is not in the key's allowed regions." },
  registration_limit: {
    codes: F,
    sentence: 'The cell holds as many self-registered OAuth clients as it allows; an operator deletes stale ones.',
  },
  replay_cache_unavailable: { codes: S, sentence: "The edge's DPoP replay cache cannot be written." },
  reports_to_cycle: { codes: I, sentence: 'The reports_to links form a cycle.' },
  requester_cannot_approve: {
    codes: F,
    sentence:
      "Under the two-person rule no principal of the requester's chain (the requester and the actors of its token) approves, through any token.",
  },
  requester_from_session: { codes: I, sentence: 'The requester comes from the session, never from the body.' },
  requester_inactive: { codes: F, runs: ['failed'], sentence: "The run's requester is no longer an active principal." },
  rerun_unsupported: { codes: C, sentence: 'This kind of run cannot be re-run.' },
  resolution_not_entitled: {
    codes: F,
    sentence:
      'A journal carried back from a device records a resolution of a lost outcome the device was not entitled to take (an operator its key bundle did not carry with agent_teams.write, or a resolved call with no resolution record); the record is named.',
  },
  retention_elapsed: { codes: C, sentence: 'The retention window has passed; the principal can only be purged.' },
  retry_backoff: {
    codes: [],
    sentence: 'Not a refusal: the run waits out the backoff before a retried call (the reason of a waiting run).',
  },
  revoked: { codes: U, sentence: 'The key or token is revoked.' },
  role_assigned: { codes: C, sentence: 'The role is still assigned to principals.' },
  root_count: { codes: I, sentence: 'The formation must have exactly one root billet.' },
  row_limit: { codes: [], sentence: 'The SQL result passed its row cap.' },
  run_in_progress: { codes: C, sentence: 'A cell is driving the run now.' },
  run_not_failed: { codes: C, sentence: 'Only a failed run can be re-run.' },
  run_not_finished: { codes: C, sentence: 'The run has not finished: its attestation and its place in the run log exist once it ends.' },
  run_not_of_device: { codes: F, sentence: 'The run id is not one the signing device derives: another device ran it.' },
  run_storage_cap: { codes: I, runs: ['failed'], sentence: "The run's data would pass its storage cap." },
  run_terminal: { codes: C, sentence: 'The run has ended.' },
  run_unbound: { codes: F, sentence: 'A format 1 journal export does not bind its run id to the device that ran it.' },
  runtime_unavailable: { codes: S, sentence: 'The local model runtime is not available on this cell.' },
  sandbox_crashed: { codes: [], runs: ['failed'], sentence: 'The sandbox failed while running the task.' },
  scope_exceeds_subject: { codes: I, sentence: 'The requested scope exceeds what the subject holds.' },
  script_error: { codes: [], runs: ['failed'], sentence: 'The script threw.' },
  seat_unbound: { codes: [], runs: ['refused'], sentence: 'A seat of the graph has no agent bound.' },
  secret_in_use: { codes: C, sentence: 'The secret is still used by a model provider or a catalog source.' },
  secret_missing: { codes: S, sentence: 'A stored secret the operation needs is missing.' },
  secret_not_usable: { codes: F, sentence: 'The caller (or the registrant) may not use the secret.' },
  secret_unreadable: { codes: S, runs: ['failed'], sentence: 'A stored secret cannot be opened with the sealing key.' },
  secrets_key_mismatch: { codes: S, sentence: 'The secrets sealing key is not the one the store was sealed with.' },
  self: { codes: C, sentence: 'The caller cannot do this to itself.' },
  share_agent_unbudgeted: { codes: I, sentence: 'A budget share names an agent that is not in the crew or has no budget ledger.' },
  share_exceeds_budget: {
    codes: C,
    sentence: "The budget share asked for a device is more than the agent's ledger has left; nothing was held.",
  },
  shared_change_exceeds_caller: { codes: F, sentence: "The change reaches seats or agents with authority beyond the caller's." },
  source_config_managed: {
    codes: C,
    sentence: "The catalog source comes from the cell's configuration (stdio): change it there, not through the API.",
  },
  source_not_configured: {
    codes: S,
    sentence: "The stdio catalog source is not in this cell's configuration (`--tool-sources`), so its server cannot start here.",
  },
  source_not_protected: {
    codes: I,
    sentence:
      'The MCP server does not trust this cell: its protected-resource metadata does not name the cell, and it is no `--protected-resource`.',
  },
  source_token_failed: { codes: S, sentence: "The catalog source's own authorization server did not issue a client-credentials token." },
  source_unreachable: {
    codes: S,
    sentence: 'The MCP server of the catalog source could not be reached, or did not answer as an MCP server.',
  },
  source_url_invalid: {
    codes: I,
    sentence: 'The URL is not one a source may have: https (http only on loopback or a private address), no credentials, no fragment.',
  },
  sql_error: { codes: [], runs: ['failed'], sentence: 'The SQL statement failed.' },
  statement_refused: { codes: [], runs: ['failed'], sentence: 'The SQL statement is not one the workspace runs.' },
  step_limit_exceeded: { codes: [], runs: ['refused'], sentence: 'The run or a seat reached its step limit.' },
  step_timeout: { codes: [], runs: ['failed'], sentence: 'A step ran longer than its timeout.' },
  store_closed: { codes: S, sentence: 'The store is closing or closed.' },
  store_failed: { codes: S, sentence: 'The store cannot accept writes.' },
  time_limit: { codes: [], runs: ['failed'], sentence: 'The task ran longer than its time cap and was stopped.' },
  timer_pending: { codes: [], sentence: 'Not a refusal: the run waits for a timer step to be due (the reason of a waiting run).' },
  too_deep: { codes: I, sentence: 'The JSON body nests deeper than the limit.' },
  too_many_billets: { codes: I, sentence: 'The formation has more billets than the limit.' },
  tool_bad_arguments: { codes: I, sentence: 'The tool was called with arguments it does not take.' },
  tool_choice_unavailable: {
    codes: [],
    runs: ['refused'],
    sentence: "The seat's tool_choice makes its model call a tool the seat cannot offer it (none granted here, or not the named one).",
  },
  tool_definition_changed: {
    codes: F,
    runs: ['refused', 'failed'],
    sentence: "The MCP server's live definition of an imported tool is not the one pinned; an operator reviews the source and re-pins.",
  },
  tool_definition_invalid: {
    codes: [],
    sentence: 'A tool the MCP server listed has no name or no object input schema; it is not imported.',
  },
  tool_error: { codes: S, runs: ['failed'], sentence: 'The tool failed.' },
  tool_forbidden_by_mode: { codes: [], runs: ['refused'], sentence: "The seat's mode (plan) forbids calling tools." },
  tool_name_unmappable: {
    codes: [],
    sentence: 'The MCP tool name cannot travel to a model and back as itself (docs/tools.md, Names); it is not imported.',
  },
  tool_not_granted: { codes: [], runs: ['refused', 'failed'], sentence: 'The authority does not include the tool.' },
  tool_refused: { codes: [], runs: ['refused'], sentence: 'The tool refused the call without naming a reason.' },
  tool_result_too_large: { codes: S, sentence: 'The MCP server answered a call with more than the cell takes (1 MiB).' },
  tool_rounds_exceeded: { codes: [], runs: ['refused'], sentence: 'The agent asked for tools more rounds than allowed.' },
  tool_unknown: { codes: I, runs: ['refused', 'failed'], sentence: 'There is no tool by that name.' },
  tool_unreachable: { codes: S, sentence: 'A tool could not reach what it calls.' },
  ttl_too_long: { codes: I, sentence: "The bundle lifetime asked for is longer than the cell's configured maximum." },
  unbound_seat: { codes: I, sentence: 'A billet has no agent bound.' },
  unknown_actor: { codes: I, sentence: 'may_act names no active principal of this cell.' },
  unknown_agent: { codes: I, sentence: 'The agent named is not known.' },
  unknown_billet: { codes: I, sentence: 'The billet named is not in the formation.' },
  unknown_blueprint: { codes: I, sentence: 'The blueprint named is not known.' },
  unknown_contract: { codes: I, sentence: 'The contract named is not known.' },
  unknown_crew: { codes: I, sentence: 'The crew named is not known.' },
  unknown_graph: { codes: I, sentence: 'The graph named is not known.' },
  unknown_key: { codes: U, sentence: 'No key matches the presented secret.' },
  unknown_provider: { codes: I, sentence: 'The model provider named is not registered.' },
  unknown_query_parameter: { codes: I, sentence: 'The query names a parameter the route does not take.' },
  unknown_reports_to: { codes: I, sentence: 'reports_to names a billet that is not in the formation.' },
  unknown_role: { codes: I, sentence: 'The role named is not known.' },
  unknown_secret: { codes: I, sentence: 'The secret id names no stored secret.' },
  unknown_skill: { codes: I, sentence: 'The skill named is not known.' },
  unknown_subject: { codes: I, sentence: 'The subject named is not known.' },
  unknown_tool: { codes: I, sentence: 'The tool named is not in the catalog.' },
  unsupported_format: { codes: I, sentence: 'The artifact format or format version is not supported.' },
  unsupported_media_type: { codes: I, sentence: 'The request body has a media type the route does not take.' },
  untrusted_issuer: { codes: F, sentence: 'The artifact is signed by a key this verifier does not trust.' },
  usage_beyond_allotment: {
    codes: F,
    sentence: "A device's journal records more model spending for an agent than the device was ever handed of its budget.",
  },
  values_not_readable: {
    codes: F,
    sentence: "Step values in an attestation need system.orchestration.admin.read (the run values' read permission); ask without values.",
  },
  version_conflict: { codes: C, sentence: 'The artifact version was seen before with different content.' },
  version_not_newer: { codes: C, sentence: 'The version is not newer than the current one.' },
  version_rollback: { codes: C, sentence: 'The artifact version is lower than one already seen.' },
  wider_than_caller: { codes: F, sentence: 'The operation would carry more authority than the calling credential holds.' },
  wildcard_scope: { codes: I, sentence: 'A wildcard scope is not allowed here.' },
  workspace_not_migrated: {
    codes: [],
    runs: ['failed'],
    sentence:
      "The workspace's SQL database, a schema of the cells' database made by an earlier version, could not be moved into its own database (pg_dump and pg_restore, --pg-bin-dir); nothing ran.",
  },
  workspace_quota: { codes: C, runs: ['failed'], sentence: "The workspace's storage quota would be passed." },
  write_conflict: { codes: S, sentence: 'A concurrent write conflicted in the store; retry.' },
  wrong_audience: { codes: F, sentence: 'The artifact was issued to another device or cell.' },
  wrong_issuer: { codes: F, sentence: 'The artifact was issued by another cell.' },
  wrong_type: { codes: I, sentence: 'The artifact is of another type than expected.' },
} satisfies Record<string, ReasonEntry>;

/** A declared reason: a literal outside this set fails to type-check where a refusal is built. */
export type Reason = keyof typeof REASONS;

/**
 * What `details.reason` or a run's `error.reason` may hold: a declared reason,
 * or, where a refusal is relayed from a dependency that named none, that
 * dependency's error code.
 */
export type WireReason = Reason | ErrorCode;

/** True for a declared reason. */
export function isReason(v: unknown): v is Reason {
  return typeof v === 'string' && Object.hasOwn(REASONS, v);
}

/** The reason a relayed refusal carries: its own `details.reason`, else `fallback` (its error code unless given). */
export function relayedReason(
  err: { code: ErrorCode; details?: { reason?: unknown } | undefined },
  fallback: WireReason = err.code,
): WireReason {
  // Declared where it was raised (a ServiceError's details are typed); String() as before for one from another bundle.
  return String(err.details?.reason ?? fallback) as WireReason;
}

/** The HTTP statuses a reason is sent with, in the order of its codes. */
export function reasonStatuses(reason: Reason): ErrorStatus[] {
  return REASONS[reason].codes.map((c) => ERROR_STATUS[c]);
}
