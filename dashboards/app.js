'use strict';
// The Sweep dashboard: a small static app over the coordinator's JSON API, no build step and
// no framework. Views: the sweep list (#/), a sweep (#/sweeps/ID, in sweep.js), the workers
// (#/workers) and a submit form (#/submit).
//
// Everything the API returns is untrusted (names, FENs, compiler output): it reaches the page
// only as text nodes and attribute values, never as HTML.

// ---------------------------------------------------------------- DOM helpers

/** An element: `attrs` keys are attributes (`class`, `data-*`, `href`, ...), except `text`
 *  (its text) and `on*` functions (listeners); children are nodes or strings (as text). */
function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element, like `h`. */
function svg(tag, attrs, ...children) {
  return build(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children);
}

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') el.textContent = String(v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const fmt = n => (n == null ? '--' : Number(n).toLocaleString('en-US'));
const short = sha => (sha || '').slice(0, 12);

/** "1h 02m", "3m 20s", "45s". */
function duration(secs) {
  secs = Math.max(0, Math.round(secs));
  const hh = Math.floor(secs / 3600), mm = Math.floor((secs % 3600) / 60), ss = secs % 60;
  if (hh) return mm ? `${hh}h ${String(mm).padStart(2, '0')}m` : `${hh}h`;
  if (mm) return `${mm}m ${String(ss).padStart(2, '0')}s`;
  return `${ss}s`;
}

/** "12 s ago", "3 min ago", or the date. */
function ago(iso) {
  const secs = (Date.now() - new Date(iso).getTime()) / 1000;
  if (secs < 90) return `${Math.max(0, Math.round(secs))} s ago`;
  if (secs < 5400) return `${Math.round(secs / 60)} min ago`;
  return new Date(iso).toLocaleString();
}

function progressBar(done, total) {
  const pct = total > 0 ? (100 * done) / total : 0;
  const fill = h('div', { class: 'fill' });
  fill.style.width = `${pct.toFixed(1)}%`;
  return h('div', { class: 'progress', title: `${pct.toFixed(1)}%` },
    h('div', { class: 'bar' }, fill),
    h('span', { class: 'count', text: `${fmt(done)} / ${fmt(total)}` }));
}

const FINAL = ['done', 'done_with_errors', 'failed', 'cancelled', 'rejected'];
const stateBadge = state => h('span', { class: `state state-${state}`, 'data-state': state, text: state });

/** One line saying where a sweep's source came from. */
function sourceText(src) {
  if (!src) return 'binary engine';
  if (src.kind === 'uploaded') return `uploaded by ${src.uploader || 'a local run'} · ${short(src.sha256)}`;
  if (src.kind === 'git') return `git ${src.git_rev || ''} → ${short(src.git_commit)}`;
  return `registered · ${short(src.sha256)}`;
}

// ---------------------------------------------------------------- API and token

const TOKEN_KEY = 'sweep_token';
const token = () => localStorage.getItem(TOKEN_KEY) || '';

/** An API error: the HTTP status and the JSON body's `error` (`code`, `field`, `message`). */
class ApiError extends Error {
  constructor(status, error) {
    super(error && error.message ? error.message : `HTTP ${status}`);
    this.status = status;
    this.field = error && error.field;
  }
}

/** Calls the API with the saved token; resolves to the parsed JSON (or text for `raw`). */
async function api(path, { method = 'GET', body, type, raw } = {}) {
  const headers = {};
  if (token()) headers.Authorization = `Bearer ${token()}`;
  if (type) headers['Content-Type'] = type;
  const r = await fetch(path, { method, headers, body });
  if (r.status === 401) showAuthNote(token() ? 'The saved token was refused.' : 'This coordinator needs a token to read.');
  if (!r.ok) {
    let error = null;
    try { error = (await r.json()).error; } catch (_) { /* not JSON */ }
    throw new ApiError(r.status, error);
  }
  return raw ? r.blob() : r.json();
}

function showAuthNote(text) {
  const note = document.getElementById('auth-note');
  note.textContent = text ? `${text} Paste a token above (sweep token create --role reader).` : '';
  note.hidden = !text;
  // A refused saved token must be replaceable: show the form again.
  if (text) document.getElementById('token-form').hidden = false;
}

function renderAuth() {
  const has = !!token();
  document.getElementById('token-form').hidden = has;
  document.getElementById('signed-in').hidden = !has;
  for (const el of document.querySelectorAll('.needs-token')) el.hidden = !has;
}

/** A link to an API document that carries the token: a plain link cannot send it. */
function apiLink(path, label, filename) {
  return h('a', {
    href: path, class: 'download', text: label,
    onclick: async ev => {
      ev.preventDefault();
      try {
        const blob = await api(path, { raw: true });
        const url = URL.createObjectURL(blob);
        const a = h('a', { href: url, download: filename });
        document.body.append(a); a.click(); a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
      } catch (e) { alert(`${path}: ${e.message}`); }
    },
  });
}

// ---------------------------------------------------------------- polling and routing

/** Calls `tick` now and then every `ms` until stopped or until it returns false. */
function poll(tick, ms) {
  let timer = null, stopped = false;
  const run = async () => {
    let again = true;
    try { again = (await tick()) !== false; } catch (e) { console.warn(e); }
    if (!stopped && again) timer = setTimeout(run, ms);
  };
  run();
  return { stop() { stopped = true; clearTimeout(timer); } };
}

/** Live view updates: every 2 s, as the issue asks (no slower). */
const POLL_MS = 2000;

let current = null;
function route() {
  if (current) current.stop();
  const view = document.getElementById('view');
  view.replaceChildren();
  const hash = location.hash || '#/';
  let m, name = 'sweeps';
  if ((m = /^#(\d+)$/.exec(hash))) { location.replace(`#/sweeps/${m[1]}`); return; } // old links
  if ((m = /^#\/sweeps\/(\d+)$/.exec(hash))) current = sweepPage(view, Number(m[1]));
  else if (hash === '#/workers') { name = 'workers'; current = workersPage(view); }
  else if (hash === '#/submit') { name = 'submit'; current = submitPage(view); }
  else current = listPage(view);
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.nav === name);
}

// ---------------------------------------------------------------- the sweep list

/** ETA from the rate observed between polls: nothing until two samples differ. */
class Rate {
  constructor() { this.samples = []; }
  add(done) {
    const now = Date.now();
    this.samples.push({ t: now, done });
    // A minute of samples: steady enough, and quick to follow a change of pace.
    while (this.samples.length > 2 && now - this.samples[0].t > 60000) this.samples.shift();
  }
  eta(total) {
    if (this.samples.length < 2) return null;
    const a = this.samples[0], b = this.samples[this.samples.length - 1];
    const rate = (b.done - a.done) / ((b.t - a.t) / 1000);
    if (!(rate > 0)) return null;
    return (total - b.done) / rate;
  }
}

/**
 * Each running or queued sweep's share of the workers as the queue weighs it: its priority
 * (low 0.5, normal 1, high 2) divided among its submitter's such sweeps, over the sum.
 */
function targetShares(sweeps) {
  const live = sweeps.filter(s => s.state === 'running' || s.state === 'queued');
  const per = new Map();
  for (const s of live) per.set(s.submitter || '', (per.get(s.submitter || '') || 0) + 1);
  const weight = s => ({ low: 0.5, high: 2 }[s.priority] || 1) / per.get(s.submitter || '');
  const total = live.reduce((t, s) => t + weight(s), 0);
  return new Map(live.map(s => [s.id, weight(s) / total]));
}

function listPage(view) {
  const tbody = h('tbody');
  const empty = h('p', { class: 'note', text: 'Loading…' });
  view.append(h('h2', { text: 'Sweeps' }), h('table', { id: 'sweeps', class: 'list' },
    h('thead', {}, h('tr', {}, ['id', 'name', 'engine', 'source', 'submitter', 'state', 'progress', 'share', 'ETA', 'submitted']
      .map(c => h('th', { text: c })))), tbody), empty);
  const rows = new Map();
  const rates = new Map();
  return poll(async () => {
    const { sweeps } = await api('/api/v1/sweeps');
    empty.textContent = sweeps.length ? '' : 'No sweeps yet.';
    const seen = new Set();
    const shares = targetShares(sweeps);
    let before = null;
    // Newest first, as the API lists them; rows are made once and then updated in place.
    for (const s of [...sweeps].reverse()) {
      seen.add(s.id);
      let row = rows.get(s.id);
      if (!row) {
        row = {
          tr: h('tr', { 'data-id': s.id }),
          state: h('td'), progress: h('td'), share: h('td', { class: 'num share' }),
          eta: h('td', { class: 'num' }),
        };
        row.tr.append(
          h('td', {}, h('a', { href: `#/sweeps/${s.id}`, text: s.id })),
          h('td', { class: 'text', text: s.name }),
          h('td', { class: 'text', text: s.engine }),
          h('td', { class: 'text', title: s.source ? s.source.sha256 : '', text: sourceText(s.source) }),
          h('td', { class: 'text', text: s.submitter || '—' }),
          row.state, row.progress, row.share, row.eta,
          h('td', { class: 'text', text: new Date(s.created_at).toLocaleString() }));
        rows.set(s.id, row);
        rates.set(s.id, new Rate());
      }
      // Rows go in reverse order before the previous one placed, so the newest ends first.
      tbody.insertBefore(row.tr, before ? before : null);
      before = row.tr;
      if (row.shown !== s.state) { row.state.replaceChildren(stateBadge(s.state)); row.shown = s.state; }
      row.progress.replaceChildren(progressBar(s.positions_done, s.positions_total));
      const rate = rates.get(s.id);
      rate.add(s.positions_done);
      const share = shares.get(s.id);
      row.share.textContent = share == null ? '—' : `${Math.round(100 * share)} %${s.priority === 'normal' ? '' : ` (${s.priority})`}`;
      // The rate observed is the rate at the share the sweep gets: so is the ETA.
      const eta = s.state === 'running' ? rate.eta(s.positions_total) : null;
      row.eta.textContent = eta == null ? '—' : duration(eta);
    }
    for (const [id, row] of rows) if (!seen.has(id)) { row.tr.remove(); rows.delete(id); }
  }, POLL_MS);
}

// ---------------------------------------------------------------- workers

function workersPage(view) {
  const tbody = h('tbody');
  const note = h('p', { class: 'note' });
  view.append(h('h2', { text: 'Workers' }), h('table', { id: 'workers', class: 'list' },
    h('thead', {}, h('tr', {}, ['id', 'name', 'host', 'cores', 'jobs held', 'results / min', 'last seen', 'registered', 'cross-checks', 'mismatches']
      .map(c => h('th', { text: c })))), tbody), note);
  return poll(async () => {
    const list = await api('/api/v1/workers');
    note.textContent = `Workers seen in the last ${duration(list.seen_within_secs)}, most recent first (at most ${list.limit}).`;
    tbody.replaceChildren(...list.workers.map(w => h('tr', { 'data-worker': w.name },
      h('td', { text: w.id }),
      h('td', { class: 'text', text: w.name }),
      h('td', { class: 'text', text: w.host }),
      h('td', { class: 'num', text: w.cores }),
      h('td', { class: 'num', text: w.jobs }),
      h('td', { class: 'num', text: fmt(w.results_last_minute) }),
      h('td', { class: 'text', title: w.last_seen_at, text: ago(w.last_seen_at) }),
      h('td', { class: 'text', text: new Date(w.registered_at).toLocaleString() }),
      // Checks it took part in (either side) and how many disagreed: a bad machine has
      // mismatches in most of its checks, a nondeterministic engine on every worker.
      h('td', { class: 'num', text: fmt(w.checks || 0) }),
      h('td', { class: 'num' + (w.mismatches ? ' error-text' : ''), text: fmt(w.mismatches || 0) }))));
    if (!list.workers.length) note.textContent = 'No worker seen in the last day.';
  }, POLL_MS);
}

// ---------------------------------------------------------------- submit

const EXAMPLE = `name = "demo: null-move skip ceiling"
engine = "minnow"
knob = "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS"
values = [300, 3000]
suites = ["ecm_confident_quick"]
depth = 6
`;

function submitPage(view) {
  const text = h('textarea', { id: 'config', rows: 16, cols: 80, spellcheck: 'false' });
  text.value = EXAMPLE;
  const error = h('div', { id: 'submit-error', class: 'error', hidden: true });
  const button = h('button', { type: 'submit', text: 'Submit sweep' });
  const form = h('form', { id: 'submit-form' },
    h('p', { class: 'note', text: 'A sweep config in TOML, as for sweep submit. It is checked against the engine\'s knobs and the loaded suites.' }),
    h('div', { class: 'submit-row' }, text, error), button);
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    error.hidden = true;
    button.disabled = true;
    try {
      const r = await api('/api/v1/sweeps', { method: 'POST', body: text.value, type: 'application/toml' });
      location.hash = `#/sweeps/${r.id}`;
    } catch (e) {
      // 422: the field the coordinator named, beside its message.
      error.replaceChildren(
        e.field ? h('span', { class: 'field', text: e.field }) : '',
        h('span', { class: 'message', text: e.message }));
      error.hidden = false;
    } finally { button.disabled = false; }
  });
  view.append(h('h2', { text: 'Submit a sweep' }), token() ? form
    : h('p', { class: 'note', text: 'Submitting needs a submitter or admin token.' }));
  return { stop() {} };
}

// ---------------------------------------------------------------- start

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('token-form').addEventListener('submit', ev => {
    ev.preventDefault();
    const value = document.getElementById('token').value.trim();
    if (!value) return;
    localStorage.setItem(TOKEN_KEY, value);
    document.getElementById('token').value = '';
    showAuthNote('');
    renderAuth();
    route();
  });
  document.getElementById('forget').addEventListener('click', ev => {
    ev.preventDefault();
    localStorage.removeItem(TOKEN_KEY);
    renderAuth();
    route();
  });
  window.addEventListener('hashchange', route);
  renderAuth();
  route();
});
