/**
 * Job definitions (scheduled jobs): a typed `{ job_type, spec }` plus a cron
 * schedule, identified by `schedule_id` (`sch_` + 80 random bits). Every
 * definition is a schedule: the cron (5 fields, or 6 with seconds first) and
 * its IANA `timezone` are parsed by croner and refused at authoring when
 * invalid. Templates are validated at authoring:
 * - compute / sql / notebook: the run spec of that job type;
 * - agent: `{ graph_id, input? }`, graph_id = the graph hash of a compiled
 *   crew graph this cell knows (pins that exact graph); a formation_id is
 *   refused (that is a crew: schedule it as team);
 * - team: `{ crew_id, input? }` naming an existing crew; a formation_id alone
 *   is refused (a template without members).
 *
 * States: enabled / disabled, and soft-deleted (deleted_at set; never fires;
 * listed only with include_deleted). `next_fire_at` is stored: the scheduler
 * (scheduler.ts) sleeps until the earliest one.
 */
import { Cron } from 'croner';
import { ServiceError, invalid } from '../../core/errors.ts';
import type { Cell } from '../context.ts';
import type { Migration } from '../store/types.ts';
import { getCrew } from '../teams/formations.ts';
import { crewForGraph } from './agent.ts';
import { parseRunSpec } from './runner.ts';
import { AgentTemplateSchema, TeamTemplateSchema, type DefinitionJobType } from './schemas.ts';

export const DEFINITIONS_MIGRATIONS: readonly Migration[] = [
  {
    id: 'jobs-001-definitions',
    sql: `CREATE TABLE job_definitions (
      schedule_id TEXT PRIMARY KEY,
      name TEXT NOT NULL,
      job_type TEXT NOT NULL,
      workspace_id TEXT NOT NULL,
      spec TEXT NOT NULL,
      cron TEXT NOT NULL,
      timezone TEXT NOT NULL,
      catch_up TEXT NOT NULL,
      enabled INTEGER NOT NULL,
      deleted_at INTEGER,
      next_fire_at INTEGER,
      last_fire_at INTEGER,
      last_run_id TEXT,
      fire_count INTEGER NOT NULL DEFAULT 0,
      skip_count INTEGER NOT NULL DEFAULT 0,
      lease_owner TEXT,
      lease_until INTEGER,
      created_by TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL
    );
    CREATE INDEX job_definitions_due ON job_definitions (next_fire_at) WHERE enabled = 1 AND deleted_at IS NULL;
    CREATE TABLE job_fires (
      schedule_id TEXT NOT NULL,
      fire_at INTEGER NOT NULL,
      state TEXT NOT NULL,
      run_id TEXT,
      detail TEXT,
      cell_id TEXT NOT NULL,
      created_at INTEGER NOT NULL,
      PRIMARY KEY (schedule_id, fire_at)
    );
    CREATE INDEX job_fires_pending ON job_fires (state);`,
  },
];

export interface Definition {
  schedule_id: string;
  name: string;
  job_type: DefinitionJobType;
  workspace_id: string;
  spec: unknown;
  cron: string;
  timezone: string;
  catch_up: 'once' | 'skip';
  enabled: boolean;
  deleted_at: number | null;
  next_fire_at: number | null;
  last_fire_at: number | null;
  last_run_id: string | null;
  fire_count: number;
  skip_count: number;
  lease_owner: string | null;
  lease_until: number | null;
  created_by: string;
  created_at: number;
  updated_at: number;
}

type Row = Omit<Definition, 'spec' | 'enabled' | 'job_type' | 'catch_up'> & { spec: string; enabled: number; job_type: string; catch_up: string };

function fromRow(r: Row): Definition {
  return { ...r, job_type: r.job_type as DefinitionJobType, catch_up: r.catch_up as 'once' | 'skip', spec: JSON.parse(r.spec) as unknown, enabled: r.enabled === 1 };
}

export function newScheduleId(): string {
  const b = crypto.getRandomValues(new Uint8Array(10));
  return `sch_${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}

export function getDefinition(cell: Cell, id: string): Definition | undefined {
  const r = cell.store.get<Row>('SELECT * FROM job_definitions WHERE schedule_id = ?', [id]);
  return r ? fromRow(r) : undefined;
}

export function listDefinitions(cell: Cell, o: { limit: number; offset: number; includeDeleted: boolean }): { items: Definition[]; total: number } {
  const w = o.includeDeleted ? '' : 'WHERE deleted_at IS NULL';
  const total = cell.store.get<{ n: number }>(`SELECT count(*) AS n FROM job_definitions ${w}`)?.n ?? 0;
  const items = cell.store.all<Row>(`SELECT * FROM job_definitions ${w} ORDER BY created_at, schedule_id LIMIT ? OFFSET ?`, [o.limit, o.offset]).map(fromRow);
  return { items, total };
}

/** Validated cron: 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first. */
export function parseCron(expr: string, timezone: string): Cron {
  const fields = expr.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    throw invalid('cron must have 5 fields (minute hour day month weekday) or 6 with seconds first', { reason: 'invalid_cron', field: 'cron' });
  }
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    throw invalid(`timezone ${timezone} is not an IANA time zone`, { reason: 'invalid_timezone', field: 'timezone' });
  }
  let c: Cron;
  try {
    c = new Cron(expr.trim(), { timezone, paused: true });
  } catch (e) {
    throw invalid(`cron is not valid: ${e instanceof Error ? e.message.replace(/^CronPattern: /, '') : 'unparseable'}`, { reason: 'invalid_cron', field: 'cron' });
  }
  if (c.nextRun(new Date(Date.UTC(2000, 0, 1))) === null) {
    throw invalid('cron never fires', { reason: 'invalid_cron', field: 'cron' });
  }
  return c;
}

/** First fire time strictly after `afterMs`, or null. */
export function nextFireAfter(cron: string, timezone: string, afterMs: number): number | null {
  const c = new Cron(cron.trim(), { timezone, paused: true });
  const d = c.nextRun(new Date(afterMs));
  return d ? d.getTime() : null;
}

/** Validates a definition's template for its job type; returns the normalised spec. */
export function validateTemplate(cell: Cell, jobType: DefinitionJobType, spec: Record<string, unknown>): unknown {
  switch (jobType) {
    case 'compute':
    case 'sql':
    case 'notebook':
      return parseRunSpec(jobType, spec);
    case 'agent': {
      if ('formation_id' in spec) {
        throw invalid('an agent definition names a graph_id; a formation_id is a crew: schedule it as job_type team', { reason: 'formation_id_not_allowed', field: 'spec.formation_id' });
      }
      const r = AgentTemplateSchema.safeParse(spec);
      if (!r.success) throw invalid('an agent definition needs spec.graph_id (and optional input)', { reason: 'invalid_template', field: 'spec' });
      if (!crewForGraph(cell, r.data.graph_id)) {
        throw invalid(`graph ${r.data.graph_id} is not a graph this cell knows`, { reason: 'unknown_graph', field: 'spec.graph_id' });
      }
      return r.data;
    }
    case 'team': {
      if (!('crew_id' in spec) && 'formation_id' in spec) {
        throw invalid('a team definition names a crew_id; a formation_id alone has no members', { reason: 'formation_id_without_crew', field: 'spec.crew_id' });
      }
      const r = TeamTemplateSchema.safeParse(spec);
      if (!r.success) throw invalid('a team definition needs spec.crew_id (and optional input)', { reason: 'invalid_template', field: 'spec' });
      if (!getCrew(cell, r.data.crew_id)) throw invalid(`crew ${r.data.crew_id} does not exist`, { reason: 'unknown_crew', field: 'spec.crew_id' });
      return r.data;
    }
  }
}

export function definitionView(d: Definition) {
  return {
    schedule_id: d.schedule_id, name: d.name, job_type: d.job_type, workspace_id: d.workspace_id, spec: d.spec,
    cron: d.cron, timezone: d.timezone, catch_up: d.catch_up, enabled: d.enabled, deleted: d.deleted_at !== null,
    next_fire_at: d.next_fire_at, last_fire_at: d.last_fire_at, last_run_id: d.last_run_id, fire_count: d.fire_count,
    created_by: d.created_by, created_at: d.created_at, updated_at: d.updated_at, deleted_at: d.deleted_at,
  };
}

/** Refuses changes to a soft-deleted definition. */
export function assertNotDeleted(d: Definition): void {
  if (d.deleted_at !== null) throw new ServiceError('conflict', 'the definition is deleted', { details: { reason: 'definition_deleted' } });
}
