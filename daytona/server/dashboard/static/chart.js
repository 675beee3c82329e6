// Line charts drawn as SVG from metrics samples.
import { h, svg } from './dom.js';

const W = 600;
const H = 160;
const PAD = 30;

// lineChart draws the values (y) over the times (x, ms) of points, y from
// 0 to max, with a title and a text summary for screen readers.
export function lineChart(id, title, points, max, fmt) {
  const fig = h('figure', { class: 'chart', id });
  fig.append(h('figcaption', {}, title));
  const s = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title, class: 'chart-svg' });
  s.append(svg('line', { x1: PAD, y1: H - PAD, x2: W - 5, y2: H - PAD, class: 'axis' }));
  s.append(svg('line', { x1: PAD, y1: 5, x2: PAD, y2: H - PAD, class: 'axis' }));
  s.append(svg('text', { x: 2, y: 12, class: 'tick' }, fmt(max)));
  s.append(svg('text', { x: 2, y: H - PAD, class: 'tick' }, '0'));
  if (points.length) {
    const t0 = points[0].t;
    const span = Math.max(1, points[points.length - 1].t - t0);
    const d = points.map((p, i) => {
      const x = PAD + ((p.t - t0) / span) * (W - PAD - 5);
      const y = H - PAD - (Math.min(p.v, max) / (max || 1)) * (H - PAD - 5);
      return `${i ? 'L' : 'M'}${x.toFixed(1)},${y.toFixed(1)}`;
    }).join(' ');
    s.append(svg('path', { d, class: 'line' }));
    s.append(svg('text', { x: PAD + 4, y: H - 8, class: 'tick' }, new Date(t0).toLocaleTimeString()));
    s.append(svg('text', { x: W - 90, y: H - 8, class: 'tick' }, new Date(points[points.length - 1].t).toLocaleTimeString()));
  }
  fig.append(s);
  const last = points[points.length - 1];
  fig.append(h('p', { class: 'summary' }, last ? `latest ${fmt(last.v)} of ${fmt(max)}, ${points.length} samples` : 'no samples yet'));
  return fig;
}
