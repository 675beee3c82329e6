// The dashboard's shell: the session, the navigation and the pages
// (routes in the URL's fragment: #/sandboxes, #/sandbox/ID/TAB, #/images,
// #/volumes, #/keys).
import { loadSession, json, logout } from './api.js';
import { h, age, table } from './dom.js';
import { sandboxPage } from './sandbox.js';

const main = document.getElementById('main');
let cleanup = () => {};

// flash shows a message (an error, a done action) in the live region.
export function flash(msg, isError = false) {
  const el = document.getElementById('flash');
  el.textContent = msg;
  el.className = isError ? 'flash error' : 'flash';
}

// run runs an action, flashing its error.
export async function run(what, fn) {
  try {
    await fn();
    flash(`${what}: done`);
  } catch (e) {
    flash(`${what}: ${e.message}`, true);
  }
}

// page replaces the page's content with a heading and children, and
// moves the focus to the heading (screen readers hear the new page).
export function page(title, ...children) {
  document.title = `${title} · agentbox dashboard`;
  const h1 = h('h1', { tabindex: '-1' }, title);
  main.replaceChildren(h1, ...children);
  h1.focus();
}

// every calls fn now and every ms until the page changes.
export function every(ms, fn) {
  fn();
  const t = setInterval(() => { if (!document.hidden) fn(); }, ms);
  const prev = cleanup;
  cleanup = () => { clearInterval(t); prev(); };
}

// onLeave runs fn when the page changes.
export function onLeave(fn) {
  const prev = cleanup;
  cleanup = () => { fn(); prev(); };
}

async function route() {
  cleanup();
  cleanup = () => {};
  flash('');
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  for (const a of document.querySelectorAll('nav a')) {
    a.toggleAttribute('aria-current', a.getAttribute('href') === `#/${parts[0] || 'sandboxes'}`);
  }
  try {
    switch (parts[0]) {
      case 'sandbox': return await sandboxPage(parts[1], parts[2] || 'processes');
      case 'images': return await imagesPage();
      case 'volumes': return await volumesPage();
      case 'keys': return await keysPage();
      default: return await sandboxesPage();
    }
  } catch (e) {
    page('Error', h('p', { class: 'error' }, e.message));
  }
}

// stateActions are the lifecycle actions offered in each state.
const stateActions = {
  started: ['stop', 'pause', 'fork', 'delete'],
  stopped: ['start', 'archive', 'fork', 'delete'],
  paused: ['start', 'stop', 'delete'],
  archived: ['start', 'delete'],
  error: ['delete'],
  build_failed: ['delete'],
};

// lifecycle runs action on sandbox sb.
export async function lifecycle(sb, action) {
  const id = encodeURIComponent(sb.id);
  switch (action) {
    case 'delete':
      if (!window.confirm(`Delete sandbox ${sb.name}? Its files are lost.`)) return;
      return json('DELETE', `/api/sandbox/${id}`);
    case 'fork':
      return json('POST', `/api/sandbox/${id}/fork`, { name: `${sb.name}-fork-${Date.now() % 100000}` });
    default:
      return json('POST', `/api/sandbox/${id}/${action}`);
  }
}

// actionButtons are the buttons of sb's lifecycle actions; done runs
// after each.
export function actionButtons(sb, done) {
  return (stateActions[sb.state] || []).map((a) => h('button', {
    type: 'button', class: `action ${a}`, dataset: { action: a, sandbox: sb.id },
    'aria-label': `${a} ${sb.name}`,
    onclick: () => run(`${a} ${sb.name}`, async () => { await lifecycle(sb, a); await done(); }),
  }, a));
}

function resources(sb) {
  return `${sb.cpu} CPU · ${sb.memory} GiB · ${sb.disk} GiB`;
}

function labelsText(labels) {
  return Object.entries(labels || {}).map(([k, v]) => `${k}=${v}`).join(', ');
}

async function sandboxesPage() {
  const labelInput = h('input', { id: 'filter-label', name: 'label', placeholder: 'key=value' });
  const stateSelect = h('select', { id: 'filter-state', name: 'state' },
    h('option', { value: '' }, 'any'),
    ['started', 'stopped', 'paused', 'archived', 'creating', 'starting', 'stopping', 'error'].map((s) => h('option', { value: s }, s)));
  const list = h('div', { id: 'sandbox-list' });
  const filter = h('form', { class: 'row', role: 'search', onsubmit: (e) => { e.preventDefault(); refresh(); } },
    h('label', { for: 'filter-label' }, 'Label'), labelInput,
    h('label', { for: 'filter-state' }, 'State'), stateSelect,
    h('button', { type: 'submit' }, 'Filter'));
  const name = h('input', { id: 'create-name', name: 'name' });
  const snapshot = h('input', { id: 'create-snapshot', name: 'snapshot', placeholder: 'default' });
  const labels = h('input', { id: 'create-labels', name: 'labels', placeholder: 'key=value, …' });
  const create = h('form', { class: 'row', onsubmit: (e) => {
    e.preventDefault();
    run('create', async () => {
      const body = { labels: {} };
      if (name.value) body.name = name.value;
      if (snapshot.value) body.snapshot = snapshot.value;
      for (const kv of labels.value.split(',').map((s) => s.trim()).filter(Boolean)) {
        const [k, ...v] = kv.split('=');
        body.labels[k] = v.join('=');
      }
      await json('POST', '/api/sandbox', body);
      name.value = '';
      await refresh();
    });
  } },
  h('label', { for: 'create-name' }, 'Name'), name,
  h('label', { for: 'create-snapshot' }, 'Snapshot'), snapshot,
  h('label', { for: 'create-labels' }, 'Labels'), labels,
  h('button', { type: 'submit', id: 'create-button' }, 'Create sandbox'));

  async function refresh() {
    const q = new URLSearchParams({ limit: '200' });
    const lv = labelInput.value.trim();
    if (lv) {
      const [k, ...v] = lv.split('=');
      q.set('labels', JSON.stringify({ [k]: v.join('=') }));
    }
    if (stateSelect.value) q.set('states', stateSelect.value);
    const res = await json('GET', `/api/sandbox?${q}`);
    const rows = res.items.map((sb) => h('tr', { dataset: { id: sb.id, state: sb.state } },
      h('th', { scope: 'row' }, h('a', { href: `#/sandbox/${encodeURIComponent(sb.id)}` }, sb.name)),
      h('td', { class: `state state-${sb.state}` }, sb.state),
      h('td', {}, labelsText(sb.labels)),
      h('td', {}, sb.snapshot || '—'),
      h('td', {}, resources(sb)),
      h('td', {}, age(sb.createdAt)),
      h('td', {}, age(sb.lastActivityAt)),
      h('td', { class: 'actions' }, actionButtons(sb, refresh))));
    list.replaceChildren(table(`${res.items.length} sandboxes`,
      ['Name', 'State', 'Labels', 'Snapshot', 'Resources', 'Age', 'Last activity', 'Actions'], rows, 'No sandboxes.'));
  }
  page('Sandboxes', h('h2', {}, 'Filter'), filter, list, h('h2', {}, 'New sandbox'), create);
  every(2000, () => refresh().catch((e) => flash(e.message, true)));
}

async function imagesPage() {
  const res = await json('GET', '/api/snapshots?limit=200');
  const rows = res.items.map((s) => h('tr', {},
    h('th', { scope: 'row' }, s.name), h('td', {}, s.imageName || '—'), h('td', {}, s.state),
    h('td', {}, s.size ? `${s.size.toFixed(2)} GB` : '—'), h('td', {}, s.general ? 'published' : 'organization'),
    h('td', {}, age(s.createdAt))));
  page('Images & snapshots',
    h('p', {}, 'The snapshots sandboxes can be created from: the images the operator published and the organization\'s own.'),
    table(`${res.total} snapshots`, ['Name', 'Image', 'State', 'Size', 'Kind', 'Created'], rows));
}

async function volumesPage() {
  const list = h('div', {});
  async function refresh() {
    const vols = await json('GET', '/api/volumes');
    list.replaceChildren(table(`${vols.length} volumes`, ['Name', 'State', 'Created', 'Actions'], vols.map((v) => h('tr', {},
      h('th', { scope: 'row' }, v.name), h('td', {}, v.state), h('td', {}, age(v.createdAt)),
      h('td', {}, h('button', { type: 'button', 'aria-label': `delete volume ${v.name}`, onclick: () => run(`delete ${v.name}`, async () => {
        if (!window.confirm(`Delete volume ${v.name}?`)) return;
        await json('DELETE', `/api/volumes/${encodeURIComponent(v.id)}`);
        await refresh();
      }) }, 'delete'))))));
  }
  const name = h('input', { id: 'volume-name', required: true });
  page('Volumes', list, h('h2', {}, 'New volume'), h('form', { class: 'row', onsubmit: (e) => {
    e.preventDefault();
    run('create volume', async () => { await json('POST', '/api/volumes', { name: name.value }); name.value = ''; await refresh(); });
  } }, h('label', { for: 'volume-name' }, 'Name'), name, h('button', { type: 'submit' }, 'Create volume')));
  await refresh();
}

async function keysPage() {
  const res = await json('GET', '/dashboard/keys');
  page('API keys',
    h('p', {}, 'The API keys of this organization (never the keys themselves). Create and remove them on the server: ',
      h('code', {}, 'agentbox serve keys create|ls|rm'), '.'),
    res.operatorKeys ? h('p', {}, `${res.operatorKeys} key(s) given to the server when it started (--key).`) : null,
    table(`${res.keys.length} keys`, ['Name', 'ID', 'Created'], res.keys.map((k) => h('tr', {},
      h('th', { scope: 'row' }, k.name), h('td', {}, h('code', {}, k.id)), h('td', {}, age(k.createdAt))))));
}

async function start() {
  const sess = await loadSession();
  document.getElementById('who').textContent = sess.csrfToken
    ? `${sess.organizationId}${sess.keyName ? ` · ${sess.keyName}` : ''}` : `${sess.organizationId} (no keys: loopback only)`;
  const out = document.getElementById('logout');
  out.hidden = !sess.csrfToken;
  out.addEventListener('click', () => logout());
  window.addEventListener('hashchange', route);
  await route();
}

start().catch((e) => flash(e.message, true));

