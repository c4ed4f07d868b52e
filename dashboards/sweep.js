'use strict';
// The sweep page (#/sweeps/ID): state and progress, knob plots, delta tables with their
// statistics and the variants' speed, build failures with compiler output, positions gained
// and lost and the largest node changes, position errors, provenance, and the actions a token
// allows.
//
// Live updates: the small detail document is polled every 2 s while the sweep runs; the table
// is fetched again only when the progress changed, at most every TABLE_MS, and once more when
// the sweep has finished (the paired statistics appear then); polling stops at the end.

const TABLE_MS = 6000;

const limitText = l => (l.depth != null ? `depth ${l.depth}` : `nodes ${fmt(l.nodes)}`);
const signed = (v, digits) => (v > 0 ? '+' : '') + (digits == null ? String(v) : v.toFixed(digits));

function sweepPage(view, id) {
  const part = name => h('section', { id: name });
  const p = {
    head: part('sweep-head'), notice: h('p', { id: 'notice', class: 'action-result' }),
    progress: part('progress'), plots: part('plots'),
    tables: part('tables'), failures: part('build-failures'), positions: part('positions'),
    errors: part('position-errors'), checks: part('cross-checks'), builds: part('build-records'),
    provenance: part('provenance'),
  };
  view.append(...Object.values(p));
  const rate = new Rate();
  const state = { lastDone: -1, tableAt: 0, finalTable: false, positionsFor: null, finalPositions: false };
  let stopped = false;

  async function refresh() {
    let d;
    try { d = await api(`/api/v1/sweeps/${id}`); } catch (e) {
      p.head.replaceChildren(h('h2', { text: `Sweep ${id}` }), h('p', { class: 'error', text: e.message }));
      return e.status !== 404;
    }
    if (stopped) return false;
    const final = FINAL.includes(d.state);
    rate.add(d.positions_done);
    renderHead(p.head, d, final ? null : rate.eta(d.positions_total), act);
    renderProgress(p.progress, d);
    renderFailures(p.failures, d, act);
    renderErrors(p.errors, d.errors);
    renderChecks(p.checks, d.cross_checks);
    renderBuildRecords(p.builds, d);
    if (!p.provenance.firstChild) renderProvenance(p.provenance, d);
    const done = d.progress.reduce((a, x) => a + x.done, 0);
    const due = Date.now() - state.tableAt >= TABLE_MS;
    if (state.lastDone < 0 || (final && !state.finalTable) || (done !== state.lastDone && due)) {
      const table = await api(`/api/v1/sweeps/${id}/table?format=json`);
      if (stopped) return false;
      state.tableAt = Date.now();
      state.lastDone = done;
      state.finalTable = final;
      state.table = table;
      renderPlots(p.plots, table);
      renderTables(p.tables, table);
    }
    // Positions read every result of two builds: loaded once, and again at the end.
    if (state.positionsFor === null || (final && !state.finalPositions)) {
      state.finalPositions = final;
      renderPositions(p.positions, id, d, state);
    }
    return !final;
  }

  let poller = poll(refresh, POLL_MS);
  /** Runs an action, says how it went, and polls again: a retried build makes a finished
   *  sweep run again. */
  async function act(action) {
    p.notice.textContent = '';
    try { p.notice.textContent = await action(); } catch (e) { p.notice.textContent = e.message; }
    if (stopped) return;
    poller.stop();
    state.finalTable = false;
    state.finalPositions = false;
    poller = poll(refresh, POLL_MS);
  }
  return { stop() { stopped = true; poller.stop(); } };
}

function renderHead(box, d, eta, act) {
  const workers = d.active_workers.map(w => `${w.name} (${w.jobs} job${w.jobs === 1 ? '' : 's'})`).join(', ');
  const actions = h('div', { class: 'actions' },
    apiLink(`/api/v1/sweeps/${d.id}/table?format=md`, 'Markdown', `sweep-${d.id}.md`),
    apiLink(`/api/v1/sweeps/${d.id}/table?format=csv`, 'CSV', `sweep-${d.id}.csv`),
    apiLink(`/api/v1/sweeps/${d.id}/table?format=json`, 'JSON', `sweep-${d.id}.json`));
  if (token() && d.state === 'pending_approval') {
    actions.append(h('button', {
      id: 'approve', text: 'Approve',
      onclick: () => act(async () => { await api(`/api/v1/sweeps/${d.id}/approve`, { method: 'POST' }); return `Sweep ${d.id} approved: it is queued.`; }),
    }), h('button', {
      id: 'reject', class: 'danger', text: 'Reject',
      onclick: () => {
        const why = prompt(`Reject sweep ${d.id} (${d.name})? Say why, for its submitter:`);
        if (!why) return;
        act(async () => {
          await api(`/api/v1/sweeps/${d.id}/reject`, { method: 'POST', type: 'application/json', body: JSON.stringify({ why }) });
          return `Sweep ${d.id} rejected.`;
        });
      },
    }));
  }
  if (token() && !FINAL.includes(d.state)) {
    actions.append(h('button', {
      id: 'cancel', class: 'danger', text: 'Cancel sweep',
      onclick: () => {
        if (!confirm(`Cancel sweep ${d.id} (${d.name})? Its open jobs are closed.`)) return;
        act(async () => { await api(`/api/v1/sweeps/${d.id}/cancel`, { method: 'POST' }); return `Sweep ${d.id} cancelled.`; });
      },
    }));
  }
  box.replaceChildren(
    h('h2', {}, `Sweep ${d.id}: `, h('span', { class: 'name', text: d.name }), ' ', stateBadge(d.state)),
    h('div', { class: 'meta' },
      h('span', {}, 'engine ', h('b', { text: d.engine })),
      h('span', {}, 'submitter ', h('b', { text: d.submitter || '—' })),
      h('span', { text: `submitted ${new Date(d.created_at).toLocaleString()}` }),
      h('span', { title: d.source ? d.source.sha256 : '', text: `source ${sourceText(d.source)}` })),
    h('div', { class: 'meta' }, progressBar(d.positions_done, d.positions_total),
      d.stage ? h('span', { class: 'stage', text: `stage ${d.stage.current} of ${d.stage.total}` }) : [],
      h('span', { text: `ETA ${eta == null ? '—' : duration(eta)}` }),
      h('span', { text: workers ? `workers: ${workers}` : 'no worker holds a job' })),
    d.approval_note ? h('p', { class: 'note approval', text: `${d.state === 'rejected' ? 'Rejected' : 'Waits for an admin\'s approval'}: ${d.approval_note}` }) : [],
    actions);
}

function renderProgress(box, d) {
  if (FINAL.includes(d.state)) { box.replaceChildren(); return; }
  box.replaceChildren(h('h3', { text: 'Progress' }), h('table', { class: 'compact' },
    h('tr', {}, ['build', 'suite', 'limit', 'done', 'errors'].map(c => h('th', { text: c }))),
    d.progress.map(x => h('tr', {},
      h('td', { class: 'text', text: x.build }), h('td', { class: 'text', text: x.suite }),
      h('td', { class: 'text', text: limitText(x.limit) }), h('td', {}, progressBar(x.done, x.total)),
      h('td', { class: 'num', text: x.errors })))));
}

function renderPlots(box, table) {
  box.replaceChildren(h('h3', { text: 'Knob values against the baseline' }));
  if (!table.knobs.length) { box.append(h('p', { class: 'note', text: 'A baseline-only sweep has no knob to plot.' })); return; }
  const series = table.suite_order;
  for (const lt of table.tables) {
    const anchor = plotAnchor(table, lt);
    if (anchor) box.append(h('p', { class: 'note plot-anchor', text: `Each knob's plot holds the other knobs at ${anchor.build}${table.search ? ' (the search\'s choice)' : ' (the fewest nodes)'}.` }));
    for (const knob of table.knobs) {
      const nodes = [], solved = [];
      for (const row of lt.rows) {
        const x = row.defines[knob];
        if (row.build === table.baseline || row.state === 'build_failed' || x == null) continue;
        // Several knobs: only the line through the anchor, so a plot is one knob's effect.
        if (anchor && table.knobs.some(k => k !== knob && row.defines[k] !== anchor.defines[k])) continue;
        for (const s of series) {
          const c = row.suites[s];
          if (!c) continue;
          if (c.nodes_delta_pct != null) nodes.push({ knob: x, series: s, y: c.nodes_delta_pct, label: `${signed(c.nodes_delta_pct, 2)}% nodes (over ${c.compared})` });
          if (c.solved_delta != null) solved.push({ knob: x, series: s, y: c.solved_delta, label: `${signed(c.solved_delta)} solved (over ${c.compared})` });
        }
      }
      if (!nodes.length && !solved.length) { box.append(h('p', { class: 'note', text: `${limitText(lt.limit)}: nothing to compare yet.` })); continue; }
      box.append(h('div', { class: 'plots', 'data-limit': limitText(lt.limit) },
        nodes.length ? knobPlot({ kind: 'nodes', title: `nodes Δ% · ${limitText(lt.limit)}`, knob, yLabel: 'nodes Δ %', points: nodes, series }) : null,
        solved.length ? knobPlot({ kind: 'solved', title: `solved Δ · ${limitText(lt.limit)}`, knob, yLabel: 'solved Δ', points: solved, series }) : null));
    }
  }
  box.append(legend(series));
}

/**
 * With several knobs, the row whose other knobs each plot holds fixed: the search's choice,
 * else the row with the fewest nodes against the baseline; none with one knob.
 */
function plotAnchor(table, lt) {
  if (table.knobs.length < 2) return null;
  const rows = lt.rows.filter(r => r.build !== table.baseline && r.state !== 'build_failed');
  const chosen = table.search && rows.find(r => r.build === table.search.chosen);
  if (chosen) return chosen;
  const delta = r => (r.combined.nodes_delta_pct == null ? Infinity : r.combined.nodes_delta_pct);
  return rows.reduce((best, r) => (best == null || delta(r) < delta(best) ? r : best), null);
}

/** The delta cell's text and class: never a number where nothing is comparable. */
function deltaCell(row, c, baseline) {
  if (row.state === 'build_failed') return h('td', { class: 'failed', text: 'build failed' });
  if (row.build === baseline) return h('td', { text: '--' });
  if (c.nodes_delta_pct == null) return h('td', { text: c.compared === 0 ? 'pending' : '--' });
  const text = `${signed(c.nodes_delta_pct, 2)}%` + (c.compared < c.positions ? ` (over ${c.compared})` : '');
  return h('td', { class: c.nodes_delta_pct < 0 ? 'neg' : c.nodes_delta_pct > 0 ? 'pos' : '', text });
}

/** The paired statistics' cells, with flags where the numbers are unlikely to be noise. */
function statsCells(st) {
  if (!st) return [h('td', { text: '' }), h('td', {}), h('td', {}), h('td', {}), h('td', {})];
  const ratio = st.geomean_ratio == null ? '--'
    : st.geomean_ratio.toFixed(4) + (st.ci95 ? ` [${st.ci95[0].toFixed(4)}, ${st.ci95[1].toFixed(4)}]` : '');
  const flags = [];
  if (st.ci95 && st.ci95[1] < 1) flags.push(h('span', { class: 'flag good', text: 'fewer nodes' }));
  if (st.ci95 && st.ci95[0] > 1) flags.push(h('span', { class: 'flag bad', text: 'more nodes' }));
  if (st.mcnemar_p < 0.05) flags.push(h('span', { class: 'flag', text: 'solve rate changed' }));
  return [
    h('td', {}, ratio, ...flags),
    h('td', { text: st.median_ratio == null ? '--' : st.median_ratio.toFixed(4) }),
    h('td', { text: `${st.faster}/${st.slower}/${st.equal}` }),
    h('td', { text: `+${st.gained}/-${st.lost}` }),
    h('td', { text: st.mcnemar_p.toPrecision(3) }),
  ];
}

function renderTables(box, table) {
  box.replaceChildren(h('h3', { text: 'Delta tables' }));
  const stages = table.stages || [];
  const all = stages.length ? stages.flatMap(s => s.tables) : table.tables;
  const hasStats = all.some(lt => lt.rows.some(r => r.combined.stats));
  const hasBench = all.some(lt => lt.rows.some(r => r.bench));
  const hasSpeed = all.some(lt => lt.rows.some(r => r.speed));
  const shown = { hasStats, hasBench, hasSpeed };
  if (table.search) appendSearch(box, table.search);
  if (!stages.length) appendLimitTables(box, table, table.tables, table.suite_order, shown);
  for (const st of stages) {
    const who = st.promote == null ? (table.search ? 'the cells the search measured' : 'every variant')
      : `the baseline and the best ${st.promote} of stage ${st.stage - 1} (solved loss at most ${st.max_solved_loss})`;
    box.append(h('h4', { class: 'stage', 'data-stage': st.stage, text: `Stage ${st.stage} of ${stages.length}: ${st.suites.join(', ')} at ${st.limits.map(limitText).join(', ')}; ${who} — ${st.state}` }));
    if (st.state === 'waiting') {
      box.append(h('p', { class: 'note', text: `Waiting for stage ${st.stage - 1} to finish.` }));
      continue;
    }
    appendLimitTables(box, table, st.tables, st.suites, shown);
    if (st.failed) box.append(h('p', { class: 'note promotion failed', text: `Promoted nobody: ${st.failed}; the sweep ended here.` }));
    else if (st.promoted.length) {
      const ranked = (st.standings || []).filter(s => s.eligible)
        .map(s => `${s.build} ${s.geomean_ratio == null ? '--' : s.geomean_ratio.toFixed(4)} (${signed(s.solved_delta)} solved)`);
      box.append(h('p', { class: 'note promotion', 'data-promoted': st.promoted.join(','), text: `Promoted to stage ${st.stage + 1}: ${st.promoted.join(', ')} (of ${st.eligible.length} eligible, by geometric-mean node ratio against ${table.baseline}: ${ranked.join('; ')}).` }));
      for (const s of (st.standings || []).filter(s => !s.eligible && s.why_not)) {
        box.append(h('p', { class: 'note', text: `Not eligible: ${s.build}: ${s.why_not}.` }));
      }
    }
  }
  for (const f of table.curve_flags || []) {
    const points = f.points.map(([v, d]) => `${signed(d, 2)}% at ${v}`).join(', ');
    box.append(h('p', { class: 'note curve-flag', text: `Not monotonic: nodes delta vs ${f.knob} on ${f.suite} (${limitText(f.limit)}): ${points}.` }));
  }
  // Variants built from other code (a patch): which row ran on which, as the Markdown says.
  const first = all.length ? all[0].rows : [];
  if (new Set(first.map(r => r.source).filter(Boolean)).size > 1) {
    box.append(h('p', { class: 'note row-sources', text: `Rows differ in source: ${first.map(r => `${r.build} on ${r.source || '?'}`).join(', ')}.` }));
  }
  const versions = Object.entries(table.suite_sha256 || {}).map(([n, sha]) => `${n} ${sha.slice(0, 12)}`);
  if (table.sweep || versions.length) {
    const made = table.sweep ? `Submitted ${table.sweep.submitted_at.replace('T', ' ').slice(0, 16)} UTC; table by Sweep ${table.sweep.sweep_version}` : '';
    box.append(h('p', { class: 'note made-by', text: [made, versions.length ? `suite versions ${versions.join(', ')}` : ''].filter(Boolean).join('; ') + '.' }));
  }
  const cells = all.flatMap(lt => lt.rows.map(r => r.combined));
  const reused = cells.reduce((n, c) => n + (c.reused || 0), 0);
  if (reused) {
    const done = cells.reduce((n, c) => n + c.done, 0);
    box.append(h('p', { class: 'note reused', text: `${reused} of ${done} results were reused from earlier sweeps${stages.length ? ' or earlier stages' : ''} of the same builds (same source, defines, recipe and options), not searched again.` }));
  }
  if (hasSpeed) appendSpeedNotes(box, all);
  if (!hasStats) box.append(h('p', { class: 'note', text: 'Paired statistics (node ratio with its 95% interval, McNemar p) and counter sums appear once the sweep has finished.' }));
}

/** A search over the grid: its steps, its choice, and its cost against the whole grid's. */
function appendSearch(box, s) {
  box.append(h('h4', { class: 'search', text: `${s.strategy[0].toUpperCase()}${s.strategy.slice(1)} search over ${s.grid_cells} cells (at most ${s.max_rounds} rounds, solved loss at most ${s.max_solved_loss}); started at ${s.start}` }));
  if (s.path.length) {
    const head = h('tr', {}, ['round', 'knob', 'cells', 'new', 'kept', 'node ratio', 'solved'].map(t => h('th', { text: t })));
    const rows = s.path.map(p => h('tr', {}, [String(p.round), p.knob, String(p.cells.length), String(p.measured), p.chosen,
      p.ratio == null ? '--' : p.ratio.toFixed(4), signed(p.solved_delta)].map(t => h('td', { text: t }))));
    box.append(h('table', { class: 'search-path' }, [h('thead', {}, [head]), h('tbody', {}, rows)]));
  }
  const measured = `${s.planned.length} of ${s.grid_cells} cells measured`;
  const cost = s.engine_seconds != null && s.grid_engine_seconds
    ? `; ${s.engine_seconds.toFixed(1)} engine-seconds against an estimated ${s.grid_engine_seconds.toFixed(1)} for the whole grid (${Math.round(100 * s.engine_seconds / s.grid_engine_seconds)} %)` : '';
  const text = s.failed ? `The search failed: ${s.failed} (${measured}).`
    : s.chosen ? `Chosen: ${s.chosen}${s.runner_up ? `; runner-up ${s.runner_up}` : ''} (${measured}${cost}).`
      : `Searching: measuring ${s.next.join(', ')} (${measured}${cost}).`;
  box.append(h('p', { class: 'note search-result', 'data-chosen': s.chosen || '', text }));
}

/** One table per limit and cell group (combined, then each suite) of `tables`. */
function appendLimitTables(box, table, tables, suiteOrder, { hasStats, hasBench, hasSpeed }) {
  const groups = [['combined', r => r.combined], ...suiteOrder.map(s => [s, r => r.suites[s]])];
  for (const lt of tables) {
    for (const [title, cellOf] of groups) {
      const counters = table.counters || [];
      const head = ['build', ...table.knobs, 'nodes', 'delta', 'solved', 'done', ...counters];
      if (hasBench) head.push('bench');
      if (hasSpeed) head.push('time × [95% CI]', 'nps ×');
      if (hasStats) head.push('node ratio [95% CI]', 'median', 'faster/slower/equal', 'solved +/-', 'p');
      const t = h('table', { class: 'delta', 'data-group': title },
        h('tr', {}, head.map((c, i) => h('th', { class: i === 0 ? 'text' : i <= table.knobs.length ? 'text knob' : '', text: c }))));
      for (const row of lt.rows) {
        const c = cellOf(row);
        if (!c) continue;
        const failed = row.state === 'build_failed';
        t.append(h('tr', { 'data-build': row.build, class: failed ? 'row-failed' : '' },
          h('td', { class: 'text build', title: row.build, text: row.build }),
          table.knobs.map(k => h('td', { class: 'text knob', text: row.defines[k] ?? 'default' })),
          h('td', { text: failed || c.done === c.errors ? '--' : fmt(c.nodes) }),
          deltaCell(row, c, table.baseline),
          h('td', { text: failed ? '--' : `${c.solved}/${c.positions}` + (c.solved_delta == null ? '' : ` (${signed(c.solved_delta)})`) }),
          h('td', { text: `${c.done}/${c.positions}` + (c.errors ? ` (${c.errors} errors)` : '') }),
          counters.map(k => h('td', { class: 'counter', text: counterText(row, c, k) })),
          hasBench ? benchCell(row.bench) : [],
          hasSpeed ? speedCells(row, table.baseline) : [],
          hasStats ? statsCells(c.stats) : []));
      }
      box.append(h('h4', { text: `${title} — ${limitText(lt.limit)}` }), h('div', { class: 'scroll' }, t));
    }
  }
}

/** The engine's own bench on the build's binary: equal to the baseline's means the variant
 *  probably searches exactly as the baseline does; a worker whose bench disagreed is named. */
function benchCell(bench) {
  if (!bench) return h('td', { class: 'bench note', text: 'not reported' });
  const flags = [];
  if (bench.same_as_baseline) flags.push(h('span', { class: 'flag same-bench', title: 'The same bench as the baseline: probably no functional change.', text: 'same bench' }));
  if (bench.mismatches && bench.mismatches.length) {
    flags.push(h('span', { class: 'flag bad bench-mismatch', title: bench.mismatches.join('\n'), text: `bench mismatch (${bench.mismatches.length})` }));
  }
  return h('td', { class: 'bench' }, bench.nodes == null ? '--' : fmt(bench.nodes), ...flags);
}

/** A row's speed against the baseline from its speed job: its CPU time ratio with the 95%
 *  interval (coloured when the interval lies on one side of 1) and its nodes per second,
 *  flagged when it searched fewer nodes yet is slower, or when the job failed. */
function speedCells(row, baseline) {
  const s = row.speed;
  if (!s) return [h('td', { class: 'speed note', text: row.build === baseline ? '--' : '' }), h('td', { class: 'speed' })];
  const r = x => (x == null ? '--' : x.toFixed(4));
  const time = s.time_ratio == null ? '--' : r(s.time_ratio) + (s.ci95 ? ` [${r(s.ci95[0])}, ${r(s.ci95[1])}]` : '');
  const side = !s.ci95 ? '' : s.ci95[0] > 1 ? ' pos' : s.ci95[1] < 1 ? ' neg' : '';
  const title = `${s.repeats} pair${s.repeats === 1 ? '' : 's'} of fresh engine processes; CPU time; nodes × ${r(s.node_ratio)}; wall time × ${r(s.wall_ratio)}`;
  const flags = [];
  if (s.fewer_nodes_but_slower) {
    flags.push(h('span', { class: 'flag bad fewer-nodes-slower', title: 'Fewer nodes than the baseline, yet its CPU time interval lies wholly above 1: each node costs more than the nodes it saves.', text: 'fewer nodes but slower' }));
  }
  if (s.error) flags.push(h('span', { class: 'flag bad speed-error', title: s.error, text: 'speed job failed' }));
  return [
    h('td', { class: `speed${side}`, title, 'data-repeats': s.repeats }, time, ...flags),
    h('td', { class: 'speed', text: r(s.nps_ratio) }),
  ];
}

/** Under the tables: what the speed columns measure, and each failed speed job's error. */
function appendSpeedNotes(box, tables) {
  const speeds = new Map();
  for (const row of tables.flatMap(lt => lt.rows)) if (row.speed) speeds.set(row.build, row.speed);
  const counts = [...new Set([...speeds.values()].map(s => s.repeats).filter(n => n > 0))];
  const per = counts.length ? ` (${counts.join(' or ')} per variant)` : '';
  box.append(h('p', { class: 'note speed-note', text: `Speed: the variant's CPU time (user + system of the engine processes) and nodes per CPU second over the baseline's, geometric means over pairs of fresh processes${per}, the baseline and the variant each first in turn, on the same positions; time above 1 is slower.` }));
  for (const [build, s] of speeds) {
    if (!s.error) continue;
    const after = s.repeats ? ` after ${s.repeats} pair${s.repeats === 1 ? '' : 's'}` : '';
    box.append(h('p', { class: 'error-text speed-failed', 'data-build': build, text: `Speed job of ${build} failed${after}: ${s.error}` }));
  }
}

/** A counter's sum: `pending` until the sweep has finished, `--` where there is none. */
function counterText(row, c, name) {
  if (row.state === 'build_failed') return '--';
  if (!c.counters) return c.done > c.errors ? 'pending' : '--';
  return c.counters[name] == null ? '--' : fmt(c.counters[name]);
}

/** How each build's binary was made, as its workers reported it; flags builds whose workers
 * ran different binaries. */
function renderBuildRecords(box, d) {
  const builds = d.builds.filter(b => b.records && b.records.length);
  const key = builds.map(b => `${b.name}:${b.records_total}`).join('\n');
  if (box.dataset.shown === key) return;
  box.dataset.shown = key;
  if (!builds.length) { box.replaceChildren(); return; }
  const t = h('table', { class: 'compact' },
    h('tr', {}, ['build', 'workers', 'binary sha256', 'bench', 'sandbox', 'compiler', 'hosts', 'build command'].map(c => h('th', { class: 'text', text: c }))));
  for (const b of builds) {
    const shas = [...new Set(b.records.map(r => r.binary_sha256))];
    const uniq = xs => [...new Set(xs)].join(', ');
    t.append(h('tr', { 'data-build': b.name },
      h('td', { class: 'text', text: b.name }),
      h('td', { text: String(b.records_total) }),
      h('td', { class: 'text mono' }, shas.map(x => x.slice(0, 12)).join(', '),
        shas.length > 1 ? h('span', { class: 'flag bad', text: `${shas.length} different binaries` }) : null),
      h('td', { class: 'text', text: uniq(b.records.map(r => (r.bench_nodes == null ? '—' : fmt(r.bench_nodes)))) }),
      h('td', { class: 'text' }, uniq(b.records.map(r => r.sandbox || 'unknown')),
        b.records.some(r => r.sandbox === 'off') ? h('span', { class: 'flag bad', text: 'unsandboxed' }) : null),
      h('td', { class: 'text', text: uniq(b.records.map(r => r.compiler || '—')) }),
      h('td', { class: 'text', text: uniq(b.records.map(r => `${r.host} (${r.cpu_model || 'cpu unknown'})`)) }),
      h('td', { class: 'text mono', text: b.records[0].argv.join(' ') })));
  }
  box.replaceChildren(h('h3', { text: 'Builds' }), h('div', { class: 'scroll' }, t));
}

function renderFailures(box, d, act) {
  const failed = d.builds.filter(b => b.build_error != null);
  if (!failed.length) { box.replaceChildren(); box.dataset.shown = ''; return; }
  if (box.dataset.shown === failed.map(b => b.name).join('\n')) return; // keep scroll positions
  box.dataset.shown = failed.map(b => b.name).join('\n');
  box.replaceChildren(h('h3', { text: 'Build failures' }), ...failed.map(b => {
    const retry = token() && d.state !== 'cancelled' ? h('button', {
      class: 'retry', text: 'Retry build',
      onclick: () => act(async () => {
        const ack = await api(`/api/v1/sweeps/${d.id}/builds/${encodeURIComponent(b.name)}/retry`, { method: 'POST' });
        box.dataset.shown = '';
        return `Build ${b.name} queued again (${ack.jobs} jobs).`;
      }),
    }) : null;
    return h('article', { class: 'build-failure', 'data-build': b.name },
      h('h4', { text: b.name }),
      h('pre', { class: 'compiler-output', text: b.build_error }), retry);
  }));
  // Compilers print the reason last: show the end of the output.
  for (const pre of box.querySelectorAll('pre')) pre.scrollTop = pre.scrollHeight;
}

function renderErrors(box, errors) {
  if (!errors.length) { box.replaceChildren(); return; }
  box.replaceChildren(h('h3', { text: `Position errors (${errors.length}${errors.length >= 100 ? '+' : ''})` }),
    h('table', { class: 'compact' }, h('tr', {}, ['build', 'suite', 'position', 'error'].map(c => h('th', { text: c }))),
      errors.map(e => h('tr', {}, h('td', { class: 'text', text: e.build }), h('td', { class: 'text', text: e.suite }),
        h('td', { class: 'text', text: e.position }), h('td', { class: 'text error-text', text: e.error })))));
}

// Cross-checks: sampled positions measured again on another worker in a fresh process; a
// mismatch means the table's numbers for that build do not reproduce.
function renderChecks(box, c) {
  if (!c || !c.planned) { box.replaceChildren(); return; }
  const side = s => `${fmt(s.nodes)} ${s.bestmove} (${s.worker})`;
  const summary = `${c.done}/${c.planned} done, ${c.mismatches} mismatches, ${c.errors} errors`;
  const parts = [h('h3', { text: 'Cross-checks' }),
    h('p', { class: c.mismatches ? 'error-text' : 'note', text: c.mismatches
      ? `${summary}: these numbers do not reproduce (on one worker: that machine; on every worker: the engine).`
      : summary })];
  // Only when there are mismatches: replaceChildren would print a `false` as text.
  if (c.positions.length) parts.push(h('table', { class: 'compact' },
      h('tr', {}, ['build', 'suite', 'limit', 'position', 'result', 'check'].map(x => h('th', { text: x }))),
      c.positions.map(m => h('tr', {},
        h('td', { class: 'text', text: m.build }), h('td', { class: 'text', text: m.suite }),
        h('td', { class: 'text', text: limitText(m.limit) }),
        h('td', { class: 'text', text: `#${m.index} ${m.position}` }),
        h('td', { class: 'text', text: side(m.original) }), h('td', { class: 'text', text: side(m.check) })))));
  box.replaceChildren(...parts);
}

function renderProvenance(box, d) {
  const s = d.source;
  const rows = [['engine', d.engine]];
  if (s) {
    rows.push(['source', s.kind], ['sha256', s.sha256]);
    if (s.uploader) rows.push(['uploaded by', s.uploader]);
    if (s.git_url) rows.push(['git', `${s.git_url} ${s.git_rev || ''}`], ['commit', s.git_commit || '']);
  } else rows.push(['source', 'binary engine (no source snapshot)']);
  rows.push(['knobs', d.spec.knobs.join(', ') || '—'], ['suites', d.spec.suites.join(', ')],
    ['limits', d.spec.limits.map(limitText).join(', ')], ['chunk size', d.spec.chunk_size],
    ['baseline', d.spec.baseline.name]);
  if (d.spec.description) rows.push(['description', d.spec.description]);
  const from = d.imported_from;
  if (from) rows.push(['imported', `sweep ${from.sweep_id} of ${from.from}, exported ${from.exported_at} by Sweep ${from.sweep_version}`]);
  box.replaceChildren(h('h3', { text: 'Provenance' }),
    h('dl', {}, rows.map(([k, v]) => [h('dt', { text: k }), h('dd', { text: v })])),
    h('details', {}, h('summary', { text: 'spec (JSON)' }), h('pre', { text: JSON.stringify(d.spec, null, 2) })));
}

// ---------------------------------------------------------------- positions

function renderPositions(box, id, d, state) {
  const builds = d.builds.filter(b => !b.is_baseline && b.build_error == null).map(b => b.name);
  if (!builds.length) { box.replaceChildren(); state.positionsFor = ''; return; }
  const chosen = builds.includes(state.positionsFor) ? state.positionsFor : mostChanged(builds, state.table);
  state.positionsFor = chosen;
  const select = h('select', { id: 'positions-build' }, builds.map(b => h('option', { value: b, text: b })));
  select.value = chosen;
  const body = h('div');
  select.addEventListener('change', () => { state.positionsFor = select.value; loadPositions(body, id, select.value); });
  box.replaceChildren(h('h3', {}, 'Positions of ', select, ' against the baseline'), body);
  loadPositions(body, id, chosen);
}

/** The variant whose positions are most worth a look: most flips, then most nodes changed. */
function mostChanged(builds, table) {
  const rows = table && table.tables.length ? table.tables[0].rows : [];
  const score = b => {
    const c = (rows.find(r => r.build === b) || {}).combined;
    if (!c) return [0, 0];
    const flips = c.stats ? c.stats.gained + c.stats.lost : Math.abs(c.solved_delta || 0);
    return [flips, Math.abs(c.nodes_delta_pct || 0)];
  };
  let best = builds[0], bestScore = score(best);
  for (const b of builds.slice(1)) {
    const sc = score(b);
    if (sc[0] > bestScore[0] || (sc[0] === bestScore[0] && sc[1] > bestScore[1])) { best = b; bestScore = sc; }
  }
  return best;
}

async function loadPositions(body, id, build) {
  const q = `/api/v1/sweeps/${id}/positions?build=${encodeURIComponent(build)}`;
  body.replaceChildren(h('p', { class: 'note', text: 'Loading…' }));
  try {
    const [flips, biggest] = await Promise.all([api(`${q}&view=flips&page_size=24`), api(`${q}&view=node_change&page_size=8`)]);
    const more = flips.total > flips.rows.length ? ` (first ${flips.rows.length} shown)` : '';
    body.replaceChildren(
      h('h4', { text: `Gained ${flips.gained.length}, lost ${flips.lost.length}${more}` }),
      flips.rows.length ? h('div', { class: 'cards', id: 'flips' }, flips.rows.map(r => positionCard(r, flips)))
        : h('p', { class: 'note', text: 'No position changed its verdict.' }),
      h('h4', { text: 'Largest node changes' }),
      biggest.rows.length ? h('div', { class: 'cards', id: 'node-changes' }, biggest.rows.map(r => positionCard(r, biggest)))
        : h('p', { class: 'note', text: 'No position searched by both builds changed its node count.' }));
  } catch (e) { body.replaceChildren(h('p', { class: 'error', text: e.message })); }
}

function positionCard(r, report) {
  const side = (label, res) => h('tr', {}, h('th', { class: 'text', text: label }),
    h('td', { class: 'text move', text: res ? (res.error ? 'error' : res.bestmove) : '…' }),
    h('td', { class: res && !res.error ? (res.solved ? 'good' : 'bad') : '', text: res && !res.error ? (res.solved ? '✓' : '✗') : '' }),
    h('td', { class: 'num', text: res && !res.error ? fmt(res.nodes) : '' }));
  const b = r.build, base = r.baseline;
  const pct = b && base && !b.error && !base.error && base.nodes > 0 ? (100 * (b.nodes - base.nodes)) / base.nodes : null;
  return h('article', { class: `card change-${r.change}`, 'data-position': r.id },
    board(r.fen) || h('div', { class: 'board-missing', text: 'no board' }),
    h('div', { class: 'card-body' },
      h('div', {}, h('b', { text: r.id }), ' ', h('span', { class: 'note', text: `${r.suite} #${r.index}` }), ' ',
        h('span', { class: `change ${r.change}`, text: r.change })),
      h('code', { class: 'fen', text: r.fen }),
      h('div', { class: 'moves' }, r.bm.length ? `bm ${r.bm.join(' ')}` : '', r.am.length ? ` am ${r.am.join(' ')}` : ''),
      h('table', { class: 'sides', title: `baseline: ${report.baseline}\nvariant: ${report.build}` },
        side('baseline', base), side('variant', b)),
      pct == null ? '' : h('div', { class: pct < 0 ? 'neg' : pct > 0 ? 'pos' : '', text: `nodes ${signed(pct, 1)}%` })));
}
