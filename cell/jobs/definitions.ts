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
 * States: enabled / disabled (`disabled_reason` says why), and soft-deleted
 * (deleted_at set; never fires; listed only with include_deleted).
 * `next_fire_at` is stored: the scheduler (scheduler.ts) sleeps until the
 * earliest one.
 *
 * A definition acts as its author (`author_id`: whoever last created,
 * changed or enabled it) within the authority recorded then
 * (definition-authority.ts). Crons that fire more often than the cell's
 * minimum interval are refused at authoring (`cron_too_frequent`).
 */
import { newId } from '../ids.ts';
import { Cron, CronPattern } from 'croner';
import { ServiceError, invalid } from '../../core/errors.ts';
import { isoTime, isoTimeOrNull } from '../../core/iso-time.ts';
import type { JobsContext } from './context.ts';
import type { Definition } from './repository.ts';
import { parseRunSpec } from './runner.ts';
import { AgentTemplateSchema, TeamTemplateSchema, type DefinitionJobType } from './shapes.ts';

export type { Definition } from './repository.ts';

export function newScheduleId(): string {
  return newId('sch');
}

/**
 * The macros a cron may be instead of fields: croner's, read in the
 * definition's time zone. `@reboot` is not one: a definition fires on a clock,
 * and a group of cells has no single boot to fire on.
 */
export const CRON_MACROS = ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'] as const;

/**
 * Validated cron: 5 fields (minute hour day-of-month month day-of-week), 6
 * with seconds first, or one of CRON_MACROS; firing at most once per
 * `minIntervalSeconds`.
 */
export function parseCron(expr: string, timezone: string, minIntervalSeconds = 0): Cron {
  const fields = expr.trim().split(/\s+/);
  if (fields[0]?.startsWith('@')) {
    if (fields.length !== 1 || !(CRON_MACROS as readonly string[]).includes(fields[0])) {
      throw invalid(`cron macro ${fields.join(' ')} is not one of ${CRON_MACROS.join(', ')}`, { reason: 'invalid_cron', field: 'cron' });
    }
  } else if (fields.length !== 5 && fields.length !== 6) {
    throw invalid(`cron must have 5 fields (minute hour day month weekday), 6 with seconds first, or be one of ${CRON_MACROS.join(', ')}`, {
      reason: 'invalid_cron',
      field: 'cron',
    });
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
    throw invalid(`cron is not valid: ${e instanceof Error ? e.message.replace(/^CronPattern: /, '') : 'unparseable'}`, {
      reason: 'invalid_cron',
      field: 'cron',
    });
  }
  if (c.nextRun(new Date(Date.UTC(2000, 0, 1))) === null) {
    throw invalid('cron never fires', { reason: 'invalid_cron', field: 'cron' });
  }
  if (minIntervalSeconds > 0) {
    const gap = cronMinGapSeconds(new CronPattern(expr.trim(), timezone));
    if (gap < minIntervalSeconds) {
      throw invalid(`cron fires every ${gap} s at times; this cell's minimum interval between fires is ${minIntervalSeconds} s`, {
        reason: 'cron_too_frequent',
        field: 'cron',
        interval_seconds: gap,
        min_interval_seconds: minIntervalSeconds,
      });
    }
  }
  return c;
}

/**
 * The shortest time between two fires of a cron pattern, seconds. Days only
 * choose which days fire; on every firing day the same times of day fire
 * (hour x minute x second), so the shortest gap is the smallest one between
 * consecutive times of day, across midnight (the last time of a day to the first
 * of the next) and, for daylight-saving time ending (an hour repeats, and croner
 * fires non-fixed times in both), across the end of an hour to its start.
 */
export function cronMinGapSeconds(p: CronPattern): number {
  const on = (a: number[], n: number) => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) if (a[i]) out.push(i);
    return out;
  };
  const hours = on(p.hour, 24);
  const minutes = on(p.minute, 60);
  const seconds = on(p.second, 60);
  if (!hours.length || !minutes.length || !seconds.length) return Infinity;
  let gap = Infinity;
  let prev: number | null = null;
  for (const h of hours)
    for (const m of minutes)
      for (const s of seconds) {
        const t = h * 3600 + m * 60 + s;
        if (prev !== null) gap = Math.min(gap, t - prev);
        prev = t;
      }
  const first = hours[0]! * 3600 + minutes[0]! * 60 + seconds[0]!;
  gap = Math.min(gap, 86_400 - prev! + first);
  const inHourFirst = minutes[0]! * 60 + seconds[0]!;
  const inHourLast = minutes.at(-1)! * 60 + seconds.at(-1)!;
  return Math.min(gap, 3_600 - inHourLast + inHourFirst);
}

/** How many upcoming fire times a definition's view lists (`next_fires`). */
export const UPCOMING_FIRES = 5;

/**
 * The definition's next fire times, `next_fire_at` first, then the cron's
 * following times in its time zone: what an operator checks a schedule by
 * (a wrong time zone or day field shows at once). None when disabled or deleted.
 */
export function upcomingFires(d: Pick<Definition, 'cron' | 'timezone' | 'next_fire_at' | 'enabled' | 'deleted_at'>): number[] {
  if (!d.enabled || d.deleted_at !== null || d.next_fire_at === null) return [];
  const out = [d.next_fire_at];
  const c = new Cron(d.cron.trim(), { timezone: d.timezone, paused: true });
  for (const next of c.nextRuns(UPCOMING_FIRES - 1, new Date(d.next_fire_at))) out.push(next.getTime());
  return out;
}

/** First fire time strictly after `afterMs`, or null. */
export function nextFireAfter(cron: string, timezone: string, afterMs: number): number | null {
  const c = new Cron(cron.trim(), { timezone, paused: true });
  const d = c.nextRun(new Date(afterMs));
  return d ? d.getTime() : null;
}

/** Validates a definition's template for its job type; returns the normalised spec. */
export async function validateTemplate(ctx: JobsContext, jobType: DefinitionJobType, spec: Record<string, unknown>): Promise<unknown> {
  switch (jobType) {
    case 'compute':
    case 'sql':
    case 'notebook':
      return parseRunSpec(ctx, jobType, spec);
    case 'agent': {
      if ('formation_id' in spec) {
        throw invalid('an agent definition names a graph_id; a formation_id is a crew: schedule it as job_type team', {
          reason: 'formation_id_not_allowed',
          field: 'spec.formation_id',
        });
      }
      const r = AgentTemplateSchema.safeParse(spec);
      if (!r.success)
        throw invalid('an agent definition needs spec.graph_id (and optional input)', { reason: 'invalid_template', field: 'spec' });
      if (!(await ctx.teams.crewByGraph(r.data.graph_id))) {
        throw invalid(`graph ${r.data.graph_id} is not a graph this cell knows`, { reason: 'unknown_graph', field: 'spec.graph_id' });
      }
      return r.data;
    }
    case 'team': {
      if (!('crew_id' in spec) && 'formation_id' in spec) {
        throw invalid('a team definition names a crew_id; a formation_id alone has no members', {
          reason: 'formation_id_without_crew',
          field: 'spec.crew_id',
        });
      }
      const r = TeamTemplateSchema.safeParse(spec);
      if (!r.success)
        throw invalid('a team definition needs spec.crew_id (and optional input)', { reason: 'invalid_template', field: 'spec' });
      if (!(await ctx.teams.crew(r.data.crew_id)))
        throw invalid(`crew ${r.data.crew_id} does not exist`, { reason: 'unknown_crew', field: 'spec.crew_id' });
      return r.data;
    }
  }
}

export function definitionView(d: Definition) {
  return {
    schedule_id: d.schedule_id,
    name: d.name,
    job_type: d.job_type,
    workspace_id: d.workspace_id,
    spec: d.spec,
    cron: d.cron,
    timezone: d.timezone,
    catch_up: d.catch_up,
    enabled: d.enabled,
    deleted: d.deleted_at !== null,
    next_fire_at: isoTimeOrNull(d.next_fire_at),
    next_fires: upcomingFires(d).map((t) => isoTime(t)),
    last_fire_at: isoTimeOrNull(d.last_fire_at),
    last_run_id: d.last_run_id,
    fire_count: d.fire_count,
    disabled_reason: d.enabled ? null : d.disabled_reason,
    created_by: d.created_by,
    author_id: d.author_id,
    author_root: d.author_root,
    created_at: isoTime(d.created_at),
    updated_at: isoTime(d.updated_at),
    deleted_at: isoTimeOrNull(d.deleted_at),
  };
}

/** Refuses changes to a soft-deleted definition. */
export function assertNotDeleted(d: Definition): void {
  if (d.deleted_at !== null) throw new ServiceError('conflict', 'the definition is deleted', { details: { reason: 'definition_deleted' } });
}
