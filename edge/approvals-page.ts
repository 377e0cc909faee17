/**
 * The device's own approvals page (docs/edge.md, "The approvals page"): `GET /approvals`, a minimal page for
 * an approver at an air-gapped device, embedded in the single-file program (no external asset, no build step).
 * It is public static content; every piece of data comes from the guarded API, with the credential the
 * approver types, kept in sessionStorage only (never in a URL, never in a cookie):
 *   GET  /api/public/v1/admin/agent-teams/runs?state=waiting   agent_teams.read: what waits for a decision
 *   POST …/crews/{crew_id}/runs/{run_id}/approvals/{step_id}  agent_teams.approve: the decision and its comment
 *   GET  …/crews/{crew_id}/runs/{run_id}                      agent_teams.read: the run, until the decision's drive settles
 * Its Content-Security-Policy is the cell console's (cell/console/page.ts): this origin only, no inline script
 * or style, no framing, Trusted Types required (the script builds its DOM with textContent, never HTML strings).
 */
import type { Hono } from 'hono';
import { etagOf, NO_FRAMING_HEADERS, pageHeaders } from '../runtime/page-headers.ts';
import type { EdgeEnv } from './gateway.ts';

export const APPROVALS_PAGE_PATH = '/approvals';
const SCRIPT_PATH = `${APPROVALS_PAGE_PATH}/page.js`;
const STYLE_PATH = `${APPROVALS_PAGE_PATH}/page.css`;

/** The page's policy: the device's own origin only (connect-src included), as the cell's console. */
export const APPROVALS_PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
  "form-action 'none'",
  "require-trusted-types-for 'script'",
].join('; ');

const HEADERS = pageHeaders(APPROVALS_PAGE_CSP, { ...NO_FRAMING_HEADERS, 'Cache-Control': 'no-cache' });

const HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Approvals - agent-cell edge</title>
<link rel="stylesheet" href="${STYLE_PATH}">
<link rel="icon" href="data:,">
</head>
<body>
<header><h1>Approvals on this device</h1><p id="who" role="status"></p></header>
<main>
<form id="signin" autocomplete="off">
<label for="key">API key</label>
<input id="key" name="key" type="password" required spellcheck="false">
<button type="submit">Sign in</button>
</form>
<div id="signedin" hidden>
<p><button type="button" id="refresh">Refresh</button> <button type="button" id="signout">Sign out</button></p>
</div>
<div id="error" role="alert" hidden></div>
<p id="notice" role="status"></p>
<section id="list" aria-label="Pending approvals"></section>
</main>
<noscript>The approvals page needs JavaScript.</noscript>
<script type="module" src="${SCRIPT_PATH}"></script>
</body>
</html>
`;

const CSS = `body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1b1b1b;background:#f6f6f4}
header,main{max-width:52rem;margin:0 auto;padding:0 1rem}
h1{font-size:1.3rem;margin:1rem 0 .25rem}
form,article,#error{background:#fff;border:1px solid #ccc;border-radius:6px;padding:.75rem 1rem;margin:.75rem 0}
label{display:block;font-weight:600;margin:.25rem 0}
input,textarea{width:100%;box-sizing:border-box;font:inherit;padding:.35rem;border:1px solid #888;border-radius:4px}
button{font:inherit;padding:.3rem .9rem;margin:.4rem .4rem 0 0;border:1px solid #555;border-radius:4px;background:#eee;cursor:pointer}
button.approve{background:#1d6b35;color:#fff}button.reject{background:#9b1c1c;color:#fff}
#error{border-color:#9b1c1c;color:#7a1111}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .75rem;margin:.5rem 0}dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}
pre{background:#f0f0ee;padding:.5rem;overflow:auto;max-height:14rem;margin:0}
h2{font-size:1.05rem;margin:.2rem 0}
`;

/** The page's script: plain browser JavaScript, DOM by createElement and textContent only. */
const SCRIPT = `const KEY = 'agent-cell-edge-approvals-key';
const A = '/api/public/v1/admin/agent-teams';
const $ = (id) => document.getElementById(id);
const el = (tag, attrs, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
};
const key = () => sessionStorage.getItem(KEY);

async function api(method, path, body) {
  const r = await fetch(path, {
    method,
    credentials: 'omit',
    cache: 'no-store',
    headers: { authorization: 'Bearer ' + key(), ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  let json = null;
  try { json = await r.json(); } catch { json = null; }
  if (!r.ok) throw { status: r.status, body: json };
  return json;
}

/** The answer's error envelope, as the API gave it: status, code, reason, message, correlation id. */
function showError(e, what) {
  const box = $('error');
  box.replaceChildren();
  const b = e && e.body && typeof e.body === 'object' ? e.body : {};
  const reason = b.details && b.details.reason ? b.details.reason : null;
  box.append(el('strong', { 'data-status': String(e && e.status || '') }, what + ': ' + (e && e.status ? e.status + ' ' : '') + (b.error || 'no answer')));
  if (reason) box.append(' ', el('code', { class: 'reason' }, reason));
  box.append(el('p', {}, b.message || String(e && e.message || e)));
  if (b.correlation_id) box.append(el('p', {}, 'correlation id ' + b.correlation_id));
  box.hidden = false;
}
const clearError = () => { $('error').hidden = true; $('error').replaceChildren(); };

function show(signedIn) {
  $('signin').hidden = signedIn;
  $('signedin').hidden = !signedIn;
  if (!signedIn) { $('list').replaceChildren(); $('who').textContent = ''; }
}

function signOut() {
  sessionStorage.removeItem(KEY);
  show(false);
  $('notice').textContent = '';
}

const field = (dl, name, value) => {
  if (value === null || value === undefined || value === '') return;
  dl.append(el('dt', {}, name), el('dd', {}, typeof value === 'string' ? value : JSON.stringify(value)));
};

function card(run, p) {
  const label = run.run_id + ' / ' + p.step_id;
  const dl = el('dl');
  field(dl, 'Run', run.run_id);
  field(dl, 'Crew', run.crew_id);
  field(dl, 'Requested by', run.requester);
  field(dl, 'Kind', p.kind);
  field(dl, 'Rule', p.rule + (p.quorum ? ' (' + p.quorum + ' needed)' : ''));
  if (p.approvers && p.approvers.length) field(dl, 'Approvers', p.approvers.join(', '));
  field(dl, 'Prompt', p.prompt);
  field(dl, 'Due', p.due);
  field(dl, 'Requested at', p.requested_at);
  field(dl, 'Digest approved', p.input_hash);
  const decided = (p.decisions || []).map((d) => d.principal + ': ' + d.decision + (d.comment ? ' (' + d.comment + ')' : ''));
  field(dl, 'Decisions so far', decided.length ? decided.join('; ') : 'none');
  const input = el('pre', { class: 'input' }, JSON.stringify(run.input === undefined ? null : run.input, null, 2));
  const commentId = 'comment-' + encodeURIComponent(label).replace(/[^A-Za-z0-9_-]/g, '_');
  const comment = el('textarea', { id: commentId, rows: '2', maxlength: '2000' });
  const art = el(
    'article',
    { 'data-run': run.run_id, 'data-step': p.step_id, 'aria-label': 'Approval ' + label },
    el('h2', {}, 'Step ' + p.step_id),
    dl,
    el('p', {}, el('strong', {}, 'Input of the run')),
    input,
    el('label', { for: commentId }, 'Comment'),
    comment,
  );
  for (const decision of ['approve', 'reject']) {
    const b = el('button', { type: 'button', class: decision }, decision === 'approve' ? 'Approve' : 'Reject');
    b.addEventListener('click', () => decide(run, p.step_id, decision, comment.value));
    art.append(b);
  }
  return art;
}

async function decide(run, stepId, decision, comment) {
  clearError();
  $('notice').textContent = '';
  try {
    const path = A + '/crews/' + encodeURIComponent(run.crew_id) + '/runs/' + encodeURIComponent(run.run_id) + '/approvals/' + encodeURIComponent(stepId);
    const after = await api('POST', path, { decision, ...(comment.trim() ? { comment: comment.trim() } : {}) });
    await settled(path.slice(0, path.lastIndexOf('/approvals/')), stepId);
    await load();
    $('notice').textContent = 'Recorded: ' + decision + ' on ' + stepId + ' of ' + run.run_id + ' (run ' + after.state + ').';
  } catch (e) {
    showError(e, 'The decision was refused');
    if (e && e.status === 401) signOut();
  }
}

/**
 * A decision wakes its run, which is driven again: one that goes on waiting (for the next approver) is running
 * for that moment, and a list read then would leave it out. Waits, 2 s at most, while the run is running with
 * the step still pending; a run the decision let go on no longer has it pending, and is not waited for.
 */
async function settled(runPath, stepId) {
  try {
    for (let i = 0; i < 20; i++) {
      const now = await api('GET', runPath);
      if (now.state !== 'running' || !(now.pending_approvals || []).some((p) => p.step_id === stepId)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch {
    // The run could not be read: list as it is.
  }
}

/** Lists what waits for a decision. */
async function load() {
  try {
    const page = await api('GET', A + '/runs?state=waiting&limit=1000');
    show(true);
    const cards = [];
    for (const run of page.runs) for (const p of run.pending_approvals || []) cards.push(card(run, p));
    $('list').replaceChildren(...(cards.length ? cards : [el('p', { class: 'empty' }, 'Nothing waits for a decision.')]));
    $('who').textContent = page.total + ' waiting run' + (page.total === 1 ? '' : 's') + ', ' + cards.length + ' pending approval' + (cards.length === 1 ? '' : 's') + '.';
  } catch (e) {
    showError(e, 'The list could not be read');
    if (e && e.status === 401) signOut();
  }
}

$('signin').addEventListener('submit', (ev) => {
  ev.preventDefault();
  clearError();
  const v = $('key').value.trim();
  $('key').value = '';
  if (!v) return;
  sessionStorage.setItem(KEY, v);
  void load();
});
$('signout').addEventListener('click', signOut);
$('refresh').addEventListener('click', () => { clearError(); void load(); });
if (key()) void load();
`;

/** Mounts the page and its two assets: public, static, the same bytes for everyone. */
export function mountApprovalsPage(app: Hono<EdgeEnv>): void {
  const serve = (path: string, body: string, type: string) => {
    const tag = etagOf(body);
    app.get(path, (c) => {
      if (c.req.header('if-none-match') === tag) return c.body(null, 304, { ...HEADERS, ETag: tag });
      return c.body(body, 200, { ...HEADERS, 'Content-Type': type, ETag: tag });
    });
  };
  serve(APPROVALS_PAGE_PATH, HTML, 'text/html; charset=utf-8');
  serve(SCRIPT_PATH, SCRIPT, 'text/javascript; charset=utf-8');
  serve(STYLE_PATH, CSS, 'text/css; charset=utf-8');
}
