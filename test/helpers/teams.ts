/**
 * Shared setup for crew-run tests: a cell (in-process), a fake OpenAI server,
 * and helpers to author a team over the admin API.
 */
import assert from 'node:assert/strict';
import type { CellConfig } from '../../cell/config.ts';
import { startOpenAIServer, type FakeOpenAI } from '../fixtures/openai-server.ts';
import { inProcessCell, type InProcess } from './inproc.ts';

export const A = '/api/public/v1/admin';
export const T = `${A}/agent-teams`;

export interface Api {
  request(method: string, path: string, opts?: { body?: unknown; token?: string }): Promise<{ status: number; body: any; text: string }>;
  token: string;
}

/** The admin API of a cell process, as the crew helpers (test/helpers/teams.ts) use it. */
export function httpApi(url: string, token: string): Api {
  return {
    token,
    async request(method, path, opts = {}) {
      const res = await fetch(url + path, {
        method,
        headers: {
          authorization: `Bearer ${opts.token ?? token}`,
          ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
      });
      const text = await res.text();
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = undefined;
      }
      return { status: res.status, body, text };
    },
  };
}

export async function ok(api: Api, method: string, path: string, body?: unknown, expect = [200, 201, 202]): Promise<any> {
  const r = await api.request(method, path, { token: api.token, ...(body !== undefined ? { body } : {}) });
  assert.ok(expect.includes(r.status), `${method} ${path} -> ${r.status} ${r.text}`);
  return r.body;
}

/** An in-process cell, a fake OpenAI server and a provider registered on it: a crew test file's `before`. */
export async function crewFixture(config: Partial<CellConfig> = {}): Promise<{ t: InProcess; ai: FakeOpenAI; api: Api }> {
  const t = await inProcessCell({ config });
  const ai = await startOpenAIServer({ apiKey: 'sk-fake' });
  const api: Api = { request: t.request, token: t.adminKey };
  await provider(api, ai);
  return { t, ai, api };
}

/** Registers a provider on the fake server (with a stored secret) and returns its id. */
export async function provider(api: Api, ai: FakeOpenAI, apiKey = 'sk-fake', stream = false): Promise<string> {
  const s = await ok(api, 'POST', `${A}/secrets`, { name: `key-${Math.random().toString(16).slice(2, 8)}`, value: apiKey });
  const p = await ok(api, 'POST', `${A}/ai/model-providers`, {
    provider_type: 'openai-compatible',
    default_model: 'fake-model',
    base_url: `${ai.url}/v1`,
    api_key_secret_id: s.secret_id,
    max_retries: 0,
    ...(stream ? { stream: true } : {}),
  });
  return p.provider_id;
}

/** Mints a scratch agent with a role, authority and a ledger (unless ledger is null). */
export async function agent(
  api: Api,
  role: string,
  authority: Record<string, unknown> = {},
  ledger: number | null = 100_000,
): Promise<string> {
  const a = await ok(api, 'POST', `${T}/agents`, {
    source: 'scratch',
    role_label: role,
    system_prompt: `ROLE:${role}`,
    authority_template: authority,
  });
  if (ledger !== null) await ok(api, 'POST', `${T}/agents/${a.agent_id}/budget-ledger`, { budget_limit: ledger });
  return a.agent_id;
}

export interface Seat {
  role: string;
  reports_to?: string;
  cap?: Record<string, unknown>;
  authority?: Record<string, unknown>;
  ledger?: number | null;
}

/** The authority of the test crews' seats when a seat names none: principals who run them hold it. */
export const SEAT_ENVELOPE = {
  allowed_tools: ['calc', 'clock.now', 'kv.get', 'kv.put', 'http.get'],
  permission_mode: 'auto',
  clearance_level: 0,
  egress_allowlist: ['kv:*'],
  data_grant_ids: ['kv:*'],
};

/** Formation + billets + agents + crew. Returns ids by role. */
export async function team(
  api: Api,
  policy: string,
  seats: Seat[],
  extra: Record<string, unknown> = {},
): Promise<{ formation: string; crew: string; crewName: string; billets: Record<string, string>; agents: Record<string, string> }> {
  const f = await ok(api, 'POST', `${T}/formations`, { name: `${policy}-team`, coordination_policy: policy, ...extra });
  const billets: Record<string, string> = {};
  const agents: Record<string, string> = {};
  const defaultCap = SEAT_ENVELOPE;
  for (const s of seats) {
    const b = await ok(api, 'POST', `${T}/formations/${f.formation_id}/billets`, {
      role_label: s.role,
      required_skills: [],
      ...(s.reports_to ? { reports_to: billets[s.reports_to] } : {}),
      authority_cap: s.cap ?? defaultCap,
    });
    billets[s.role] = b.billet_id;
    agents[s.role] = await agent(api, s.role, s.authority ?? s.cap ?? defaultCap, s.ledger === undefined ? 100_000 : s.ledger);
  }
  const assignments = Object.fromEntries(seats.map((s) => [billets[s.role]!, agents[s.role]!]));
  const c = await ok(api, 'POST', `${T}/crews`, { formation_id: f.formation_id, assignments });
  return { formation: f.formation_id, crew: c.crew_id, crewName: c.name, billets, agents };
}

/** The role named in a request's system prompt. */
export function roleOf(req: { messages: { role: string; content: string | null }[] }): string {
  const sys = req.messages.find((m) => m.role === 'system')?.content ?? '';
  return /ROLE:(\S+)/.exec(sys)?.[1] ?? '';
}
