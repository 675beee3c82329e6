// A sandbox's page: its lifecycle, and tabs for its processes and live
// logs, files, terminal, network, charts and activity trail.
import { json, request, toolbox, wsURL } from './api.js';
import { h, age, bytes, table } from './dom.js';
import { page, run, flash, every, onLeave, actionButtons } from './app.js';
import { LogView, follow } from './logs.js';
import { Screen, keyBytes } from './term.js';
import { lineChart } from './chart.js';

const tabs = ['processes', 'files', 'terminal', 'network', 'charts', 'activity'];

// sandboxPage shows sandbox id with tab open.
export async function sandboxPage(id, tab) {
  const sb = await json('GET', `/api/sandbox/${encodeURIComponent(id)}`);
  const info = h('p', { id: 'sandbox-info' });
  const actions = h('div', { class: 'actions', id: 'sandbox-actions' });
  async function refresh() {
    const cur = await json('GET', `/api/sandbox/${encodeURIComponent(id)}`);
    info.replaceChildren(h('span', { class: `state state-${cur.state}`, id: 'sandbox-state' }, cur.state), ' · ',
      cur.snapshot || 'default snapshot', ' · ', `${cur.cpu} CPU, ${cur.memory} GiB, ${cur.disk} GiB`,
      ' · created ', age(cur.createdAt), ' · last activity ', age(cur.lastActivityAt));
    actions.replaceChildren(...actionButtons(cur, refresh));
  }
  const nav = h('div', { role: 'tablist', 'aria-label': 'Sandbox views' }, tabs.map((t) => h('a', {
    role: 'tab', href: `#/sandbox/${encodeURIComponent(id)}/${t}`, 'aria-selected': String(t === tab), id: `tab-${t}`,
  }, t)));
  const panel = h('section', { role: 'tabpanel', 'aria-labelledby': `tab-${tab}`, id: 'panel' });
  page(`Sandbox ${sb.name}`, info, actions, nav, panel);
  every(3000, () => refresh().catch((e) => flash(e.message, true)));
  const views = { processes, files, terminal, network, charts, activity };
  await (views[tab] || processes)(sb, panel);
}

// processes lists the toolbox's sessions and their commands, runs
// commands and follows their logs live.
async function processes(sb, panel) {
  const list = h('div', { id: 'sessions' });
  const cmd = h('input', { id: 'command', name: 'command', size: 60, required: true });
  const out = h('pre', { class: 'log', id: 'log', tabindex: '0', 'aria-label': 'Command output' });
  const note = h('p', { class: 'note', id: 'log-note', 'aria-live': 'polite' });
  const status = h('p', { id: 'log-status', role: 'status' });
  let ws = null;
  onLeave(() => ws && ws.close());
  const sid = 'dashboard';

  function watch(session, cmdID, command) {
    if (ws) ws.close();
    out.replaceChildren();
    note.textContent = '';
    status.textContent = `following: ${command}`;
    const view = new LogView(out, note);
    ws = follow(wsURL(toolbox(sb.id, `/process/session/${encodeURIComponent(session)}/command/${encodeURIComponent(cmdID)}/logs?follow=true`)), view, (ev) => {
      status.textContent = `ended: ${command}${ev.reason ? ` (${ev.reason})` : ''}`;
      refresh().catch(() => {});
    });
  }

  async function refresh() {
    const sessions = await json('GET', toolbox(sb.id, '/process/session'));
    const rows = [];
    for (const s of sessions) {
      for (const c of s.commands || []) {
        rows.push(h('tr', {},
          h('td', {}, s.sessionId), h('th', { scope: 'row' }, h('code', {}, c.command)),
          h('td', {}, c.exitCode === undefined || c.exitCode === null ? 'running' : String(c.exitCode)),
          h('td', {}, h('button', { type: 'button', 'aria-label': `follow ${c.command}`, onclick: () => watch(s.sessionId, c.id, c.command) }, 'follow'))));
      }
    }
    list.replaceChildren(table(`${sessions.length} sessions`, ['Session', 'Command', 'Exit code', 'Log'], rows, 'No commands yet.'));
  }

  const form = h('form', { class: 'row', onsubmit: (e) => {
    e.preventDefault();
    run('run', async () => {
      const sessions = await json('GET', toolbox(sb.id, '/process/session'));
      if (!sessions.some((s) => s.sessionId === sid)) await json('POST', toolbox(sb.id, '/process/session'), { sessionId: sid });
      const res = await json('POST', toolbox(sb.id, `/process/session/${sid}/exec`), { command: cmd.value, runAsync: true });
      watch(sid, res.cmdId, cmd.value);
      await refresh();
    });
  } }, h('label', { for: 'command' }, 'Command'), cmd, h('button', { type: 'submit', id: 'run-button' }, 'Run'));
  panel.replaceChildren(h('h2', {}, 'Processes and sessions'), form, list, h('h2', {}, 'Live log'), status, note, out);
  if (sb.state === 'started') await refresh();
  else list.textContent = 'Start the sandbox to see its processes.';
}

// files browses the sandbox's files: list, view text, download, upload.
async function files(sb, panel) {
  const pathInput = h('input', { id: 'path', name: 'path', size: 50 });
  const list = h('div', { id: 'file-list' });
  const viewer = h('pre', { class: 'log', id: 'file-view', tabindex: '0', 'aria-label': 'File content' });
  const upload = h('input', { type: 'file', id: 'upload-file' });
  const join = (dir, name) => `${dir.replace(/\/+$/, '')}/${name}`;

  async function download(p, name) {
    const r = await request('GET', toolbox(sb.id, `/files/download?path=${encodeURIComponent(p)}`));
    const url = URL.createObjectURL(await r.blob());
    const a = h('a', { href: url, download: name, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  async function view(p) {
    const r = await request('GET', toolbox(sb.id, `/files/download?path=${encodeURIComponent(p)}`));
    const text = await r.text();
    viewer.textContent = text.length > 262144 ? `${text.slice(0, 262144)}\n… (cut at 256 KiB: download it for the rest)` : text;
  }

  async function ls(dir) {
    pathInput.value = dir;
    const entries = await json('GET', toolbox(sb.id, `/files?path=${encodeURIComponent(dir)}`));
    entries.sort((a, b) => (b.isDir - a.isDir) || a.name.localeCompare(b.name));
    const parent = dir.replace(/\/[^/]*\/?$/, '') || '/';
    const rows = entries.map((f) => {
      const p = join(dir, f.name);
      return h('tr', { dataset: { name: f.name } },
        h('th', { scope: 'row' }, f.isDir
          ? h('button', { type: 'button', class: 'link', onclick: () => run('list', () => ls(p)) }, `${f.name}/`)
          : f.name),
        h('td', {}, f.isDir ? '—' : bytes(f.size)), h('td', {}, f.permissions || f.mode), h('td', {}, f.modTime || f.modifiedAt || ''),
        h('td', {}, f.isDir ? null : [
          h('button', { type: 'button', 'aria-label': `view ${f.name}`, onclick: () => run('view', () => view(p)) }, 'view'),
          h('button', { type: 'button', class: 'download', 'aria-label': `download ${f.name}`, dataset: { path: p }, onclick: () => run('download', () => download(p, f.name)) }, 'download'),
        ]));
    });
    list.replaceChildren(h('button', { type: 'button', onclick: () => run('list', () => ls(parent)) }, 'Up'),
      table(dir, ['Name', 'Size', 'Mode', 'Modified', 'Actions'], rows, 'Empty folder.'));
  }

  const go = h('form', { class: 'row', onsubmit: (e) => { e.preventDefault(); run('list', () => ls(pathInput.value)); } },
    h('label', { for: 'path' }, 'Folder'), pathInput, h('button', { type: 'submit' }, 'List'));
  const up = h('form', { class: 'row', onsubmit: (e) => {
    e.preventDefault();
    run('upload', async () => {
      const f = upload.files[0];
      if (!f) throw new Error('choose a file first');
      const fd = new FormData();
      fd.append('file', f, f.name);
      await request('POST', toolbox(sb.id, `/files/upload?path=${encodeURIComponent(join(pathInput.value, f.name))}`), fd);
      await ls(pathInput.value);
    });
  } }, h('label', { for: 'upload-file' }, 'Upload a file here'), upload, h('button', { type: 'submit', id: 'upload-button' }, 'Upload'));
  panel.replaceChildren(h('h2', {}, 'Files'), go, up, list, h('h2', {}, 'Viewer'), viewer);
  if (sb.state !== 'started') { list.textContent = 'Start the sandbox to browse its files.'; return; }
  const home = await json('GET', toolbox(sb.id, '/user-home-dir'));
  await ls(home.dir || '/');
}

// terminal opens a PTY session over the toolbox's WebSocket.
async function terminal(sb, panel) {
  const screenEl = h('div', { class: 'term', id: 'term', tabindex: '0', role: 'textbox', 'aria-label': 'Terminal: type here', 'aria-multiline': 'true' });
  const status = h('p', { id: 'term-status', role: 'status' });
  const colsIn = h('input', { id: 'cols', type: 'number', min: 20, max: 300, value: 100 });
  const rowsIn = h('input', { id: 'rows', type: 'number', min: 5, max: 100, value: 24 });
  let ws = null;
  let ptyID = '';
  const screen = new Screen(100, 24);
  let drawn = false;
  const draw = () => { if (!drawn) { drawn = true; requestAnimationFrame(() => { drawn = false; screen.render(screenEl); }); } };
  onLeave(() => { if (ws) ws.close(); if (ptyID) request('DELETE', toolbox(sb.id, `/process/pty/${ptyID}`)).catch(() => {}); });
  const send = (s) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(new TextEncoder().encode(s)); };

  async function open() {
    const cols = Number(colsIn.value);
    const rows = Number(rowsIn.value);
    screen.resize(cols, rows);
    ptyID = `dash-${Date.now().toString(36)}`;
    await json('POST', toolbox(sb.id, '/process/pty'), { id: ptyID, cols, rows });
    ws = new WebSocket(wsURL(toolbox(sb.id, `/process/pty/${ptyID}/connect`)));
    ws.binaryType = 'arraybuffer';
    const dec = new TextDecoder();
    ws.onopen = () => { status.textContent = 'connected'; screenEl.focus(); };
    ws.onmessage = (ev) => {
      if (typeof ev.data === 'string') {
        if (ev.data.startsWith('{"type":"control"')) return;
        screen.write(ev.data);
      } else {
        screen.write(dec.decode(ev.data, { stream: true }));
      }
      draw();
    };
    ws.onclose = (ev) => {
      let code = ev.code === 1000 ? 0 : '?';
      try { code = JSON.parse(ev.reason).exitCode ?? code; } catch { /* not JSON */ }
      status.textContent = `exited (code ${code})`;
      ws = null;
    };
    draw();
  }

  screenEl.addEventListener('keydown', (ev) => {
    const b = keyBytes(ev);
    if (!b || !ws) return;
    ev.preventDefault();
    send(b);
  });
  screenEl.addEventListener('paste', (ev) => { ev.preventDefault(); send(ev.clipboardData.getData('text')); });

  const resize = h('button', { type: 'button', id: 'term-resize', onclick: () => run('resize', async () => {
    const cols = Number(colsIn.value);
    const rows = Number(rowsIn.value);
    screen.resize(cols, rows);
    draw();
    if (ptyID) await json('POST', toolbox(sb.id, `/process/pty/${ptyID}/resize`), { cols, rows });
  }) }, 'Resize');
  panel.replaceChildren(h('h2', {}, 'Terminal'),
    h('div', { class: 'row' }, h('button', { type: 'button', id: 'term-open', onclick: () => run('terminal', open) }, 'Open terminal'),
      h('label', { for: 'cols' }, 'Columns'), colsIn, h('label', { for: 'rows' }, 'Rows'), rowsIn, resize),
    status, screenEl);
  screen.render(screenEl);
}

// network shows the policy, the refusal counters and the policy log.
async function network(sb, panel) {
  const box = h('div', { id: 'network' });
  async function refresh() {
    const v = await json('GET', `/api/sandbox/${encodeURIComponent(sb.id)}/network`);
    const info = v.info || {};
    const log = info.policyLog || [];
    box.replaceChildren(
      h('dl', {},
        h('dt', {}, 'Block all'), h('dd', {}, String(v.networkBlockAll)),
        h('dt', {}, 'Allowed address ranges'), h('dd', {}, v.networkAllowList || '—'),
        h('dt', {}, 'Allowed domains'), h('dd', {}, v.domainAllowList || '—'),
        h('dt', {}, 'Mode'), h('dd', {}, info.mode || '(not started)'),
        h('dt', {}, 'Refused'), h('dd', {}, `${info.refusedConnections || 0} connections, ${info.refusedPackets || 0} packets`)),
      info.note ? h('p', { class: 'note' }, info.note) : '',
      table('Policy log (oldest first)', ['Time', 'Protocol', 'Destination', 'Reason'], log.map((e) => h('tr', { class: 'refusal' },
        h('td', {}, new Date(e.time).toLocaleTimeString()), h('td', {}, e.protocol),
        h('th', { scope: 'row' }, e.port ? `${e.host}:${e.port}` : e.host || '—'), h('td', {}, e.reason))), 'Nothing refused.'));
  }
  const block = h('input', { type: 'checkbox', id: 'net-block', checked: sb.networkBlockAll });
  const allow = h('input', { id: 'net-allow', value: sb.networkAllowList || '', placeholder: '10.0.0.0/8, …' });
  const form = h('form', { class: 'row', onsubmit: (e) => {
    e.preventDefault();
    run('network policy', async () => {
      await json('POST', `/api/sandbox/${encodeURIComponent(sb.id)}/network-settings`, { networkBlockAll: block.checked, networkAllowList: allow.value });
      await refresh();
    });
  } }, block, h('label', { for: 'net-block' }, 'Block all'), h('label', { for: 'net-allow' }, 'Allow list'), allow,
  h('button', { type: 'submit' }, 'Apply'));
  panel.replaceChildren(h('h2', {}, 'Network policy'), form, box);
  every(2000, () => refresh().catch((e) => flash(e.message, true)));
}

// charts draws CPU, memory and disk over the last hour.
async function charts(sb, panel) {
  const box = h('div', { id: 'charts', class: 'charts' });
  async function refresh() {
    const m = await json('GET', `/api/sandbox/${encodeURIComponent(sb.id)}/metrics/history?minutes=60`);
    const s = m.samples || [];
    const pts = (f) => s.map((x) => ({ t: Date.parse(x.time), v: f(x) }));
    const last = s[s.length - 1] || {};
    box.replaceChildren(
      lineChart('chart-cpu', 'CPU (%)', pts((x) => x.cpuUsedPct), 100, (v) => `${v.toFixed(1)} %`),
      lineChart('chart-mem', 'Memory', pts((x) => x.memUsed), last.memTotal || Math.max(1, ...s.map((x) => x.memUsed)), bytes),
      lineChart('chart-disk', 'Disk', pts((x) => x.diskUsed), last.diskTotal || Math.max(1, ...s.map((x) => x.diskUsed)), bytes));
  }
  panel.replaceChildren(h('h2', {}, 'The last hour'), box);
  every(10000, () => refresh().catch((e) => flash(e.message, true)));
}

// activity shows the sandbox's activity trail, newest first.
async function activity(sb, panel) {
  const kind = h('select', { id: 'activity-kind' }, ['', 'command', 'file', 'network', 'lifecycle'].map((k) => h('option', { value: k }, k || 'all')));
  const box = h('div', { id: 'activity' });
  let pageNo = 1;
  async function refresh() {
    const q = new URLSearchParams({ page: String(pageNo), limit: '50' });
    if (kind.value) q.set('kind', kind.value);
    const res = await json('GET', `/api/sandbox/${encodeURIComponent(sb.id)}/activity?${q}`);
    const what = (e) => e.command || (e.path ? `${e.path} (${bytes(e.bytes)})` : '') || e.destination || e.action || '';
    box.replaceChildren(
      table(`${res.total} entries, page ${res.page} of ${Math.max(1, res.totalPages)}`, ['Time', 'Kind', 'Who', 'What', 'Exit code', 'Duration', 'Reason'],
        res.items.map((e) => h('tr', { class: `activity-${e.kind}` },
          h('td', {}, new Date(e.time).toLocaleString()), h('td', {}, e.kind), h('td', {}, e.actor || '—'),
          h('th', { scope: 'row' }, what(e)), h('td', {}, e.exitCode ?? ''), h('td', {}, e.durationMs ? `${e.durationMs} ms` : ''),
          h('td', {}, e.reason || ''))), 'No activity yet.'),
      h('div', { class: 'row' },
        h('button', { type: 'button', disabled: pageNo <= 1, onclick: () => { pageNo--; refresh(); } }, 'Newer'),
        h('button', { type: 'button', disabled: pageNo >= res.totalPages, onclick: () => { pageNo++; refresh(); } }, 'Older')));
  }
  kind.addEventListener('change', () => { pageNo = 1; refresh().catch((e) => flash(e.message, true)); });
  panel.replaceChildren(h('h2', {}, 'Activity'), h('div', { class: 'row' }, h('label', { for: 'activity-kind' }, 'Kind'), kind), box);
  every(5000, () => refresh().catch((e) => flash(e.message, true)));
}

