'use strict';
// Drawings for the sweep page: the knob plot (SVG) and the board diagram (a CSS grid).
// Uses `h` and `svg` from app.js; everything from the API goes in as text or attributes.

const SERIES_COLORS = ['#1f6fc5', '#d9730d', '#2e9e44', '#b5179e', '#6b4fbb', '#8c564b'];

/** About five round tick values covering [lo, hi]. */
function ticks(lo, hi) {
  if (lo === hi) { lo -= 1; hi += 1; }
  const raw = (hi - lo) / 5;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map(m => m * mag).find(s => s >= raw) || raw;
  const out = [];
  // Multiples of the step (not a running sum, which drifts: 0 came out as -1.04e-18).
  for (let k = Math.ceil(lo / step); k * step <= hi + step * 1e-9; k++) {
    const v = k * step;
    out.push(Math.abs(v) < step * 1e-9 ? 0 : Number(v.toPrecision(12)));
  }
  return out;
}

/**
 * One plot: x = knob value, y = `value(cell)` for every series (suite), one point per knob
 * value, and a dashed baseline at 0. `points` is [{ knob, series, y, label }].
 * Each point carries `data-knob`, `data-series` and its value in a <title>.
 */
function knobPlot({ kind, title, knob, yLabel, points, series }) {
  const W = 440, H = 250, m = { l: 56, r: 14, t: 26, b: 40 };
  const xs = points.map(p => p.knob), ys = points.map(p => p.y).concat([0]);
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  const xpad = (x1 - x0) * 0.06;
  x0 -= xpad; x1 += xpad;
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (y0 === y1) { y0 -= 1; y1 += 1; }
  const ypad = (y1 - y0) * 0.1;
  y0 -= ypad; y1 += ypad;
  const X = v => m.l + ((v - x0) / (x1 - x0)) * (W - m.l - m.r);
  const Y = v => H - m.b - ((v - y0) / (y1 - y0)) * (H - m.t - m.b);

  const root = svg('svg', {
    class: 'plot', 'data-plot': kind, viewBox: `0 0 ${W} ${H}`, width: W, height: H,
    role: 'img', 'aria-label': title,
  });
  root.append(svg('text', { x: m.l, y: 16, class: 'plot-title', text: title }));
  // Axes, grid and ticks.
  for (const v of ticks(y0, y1)) {
    if (v < y0 || v > y1) continue;
    root.append(svg('line', { x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v), class: 'grid' }),
      svg('text', { x: m.l - 6, y: Y(v) + 4, class: 'tick', 'text-anchor': 'end', text: v }));
  }
  const knobValues = [...new Set(xs)].sort((a, b) => a - b);
  const xticks = knobValues.length <= 8 ? knobValues : ticks(x0, x1).filter(v => v >= x0 && v <= x1);
  // Every value gets its mark; a label only where it clears the last one drawn (uneven
  // values such as 0, 100, 300, 10000 would print on top of each other).
  let lastLabel = -Infinity;
  for (const v of xticks) {
    root.append(svg('line', { x1: X(v), x2: X(v), y1: H - m.b, y2: H - m.b + 4, class: 'axis' }));
    const width = 7 * String(v).length;
    if (X(v) - width / 2 < lastLabel + 4) continue;
    root.append(svg('text', { x: X(v), y: H - m.b + 16, class: 'tick', 'text-anchor': 'middle', text: v }));
    lastLabel = X(v) + width / 2;
  }
  root.append(
    svg('line', { x1: m.l, x2: m.l, y1: m.t, y2: H - m.b, class: 'axis' }),
    svg('line', { x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b, class: 'axis' }),
    svg('line', { x1: m.l, x2: W - m.r, y1: Y(0), y2: Y(0), class: 'baseline' }),
    svg('text', { x: (m.l + W - m.r) / 2, y: H - 6, class: 'axis-label', 'text-anchor': 'middle', text: knob }),
    svg('text', { x: 14, y: (m.t + H - m.b) / 2, class: 'axis-label', 'text-anchor': 'middle',
      transform: `rotate(-90 14 ${(m.t + H - m.b) / 2})`, text: yLabel }));
  // One line and its points per series.
  series.forEach((name, i) => {
    const color = SERIES_COLORS[i % SERIES_COLORS.length];
    const mine = points.filter(p => p.series === name).sort((a, b) => a.knob - b.knob);
    if (mine.length > 1) {
      root.append(svg('polyline', {
        class: 'series', stroke: color, fill: 'none',
        points: mine.map(p => `${X(p.knob).toFixed(1)},${Y(p.y).toFixed(1)}`).join(' '),
      }));
    }
    for (const p of mine) {
      root.append(svg('circle', {
        class: 'point', cx: X(p.knob).toFixed(1), cy: Y(p.y).toFixed(1), r: 4, fill: color,
        'data-knob': p.knob, 'data-series': name, 'data-value': p.y,
      }, svg('title', { text: `${name}: ${knob}=${p.knob}: ${p.label}` })));
    }
  });
  return root;
}

/** The legend of a set of plots: one swatch per series. */
function legend(series) {
  return h('div', { class: 'legend' }, series.map((name, i) => {
    const sw = h('span', { class: 'swatch' });
    sw.style.background = SERIES_COLORS[i % SERIES_COLORS.length];
    return h('span', {}, sw, name);
  }));
}

const PIECES = { K: '♔', Q: '♕', R: '♖', B: '♗', N: '♘', P: '♙', k: '♚', q: '♛', r: '♜', b: '♝', n: '♞', p: '♟' };

/** The board of a FEN as an 8x8 grid (white at the bottom); null for a malformed FEN. */
function board(fen) {
  const ranks = String(fen || '').split(' ')[0].split('/');
  if (ranks.length !== 8) return null;
  const grid = h('div', { class: 'board', 'aria-label': fen });
  for (let r = 0; r < 8; r++) {
    const squares = [];
    for (const ch of ranks[r]) {
      if (/[1-8]/.test(ch)) for (let i = 0; i < Number(ch); i++) squares.push('');
      else if (PIECES[ch]) squares.push(ch);
      else return null;
    }
    if (squares.length !== 8) return null;
    squares.forEach((p, f) => grid.append(h('div', {
      class: `sq ${(r + f) % 2 ? 'dark' : 'light'} ${p && p === p.toUpperCase() ? 'white' : 'black'}`,
      text: p ? PIECES[p] : '',
    })));
  }
  return grid;
}
