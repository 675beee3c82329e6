// The program internal/sdktest runs against `agentbox serve` (a real
// control plane over real local sandboxes), once per SDK release: it loads
// the release named by AGENTBOX_SDK and drives one sandbox through its
// life with the SDK's own calls, create to delete (archive and restore
// included). Each step is reported
// as driver.mjs reports them, on one JSON line:
//
//	{"sdk": "0.205.1", "steps": [{"name": "create", "ok": true, "value": …, "ms": 812}, …]}
//
// A step that throws is reported with the error and the program goes on;
// the Go test asserts on every step. Nothing here talks to anything but
// DAYTONA_API_URL (loopback).

import { readFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { stateOf } from './lib.mjs';

const alias = process.env.AGENTBOX_SDK;
const name = process.env.AGENTBOX_SANDBOX_NAME;
if (!alias || !name) {
  throw new Error('AGENTBOX_SDK or AGENTBOX_SANDBOX_NAME is not set: run this program through internal/sdktest');
}
process.on('unhandledRejection', (e) => console.error('unhandled rejection:', e));

const require = createRequire(import.meta.url);
const version = JSON.parse(readFileSync(require.resolve(`${alias}/package.json`), 'utf8')).version;
const sdk = await import(alias);
const daytona = new sdk.Daytona();
const report = { sdk: version, steps: [] };

let sb;
const exec = async (cmd) => {
  const r = await sb.process.executeCommand(cmd);
  return { exitCode: r.exitCode, result: r.result };
};
// viaLoopback GETs url from 127.0.0.1 at url's port, with url's host as
// the Host header: what a browser does for a name under localhost.
const viaLoopback = (url, headers) => new Promise((resolve, reject) => {
  const u = new URL(url);
  const req = http.get({ host: '127.0.0.1', port: u.port, path: u.pathname, headers: { ...headers, Host: u.host } }, (res) => {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (c) => { body += c; });
    res.on('end', () => resolve({ status: res.statusCode, body }));
  });
  req.on('error', reject);
});

const steps = [
  ['create', async () => {
    sb = await daytona.create(
      { name, language: 'python', envVars: { GREETING: 'hello' }, labels: { suite: name }, autoStopInterval: 0 },
      { timeout: 60 },
    );
    return { state: await stateOf(sb), user: sb.user, name: sb.name, labels: sb.labels };
  }],
  ['work-dir', async () => sb.getWorkDir()],
  ['home-dir', async () => sb.getUserHomeDir()],
  ['exec', async () => exec('echo "$USER $HOME $PWD $GREETING"; exit 3')],
  ['session', async () => {
    await sb.process.createSession('s1');
    const r = await sb.process.executeSessionCommand('s1', { command: 'echo one; echo two >&2' });
    await sb.process.deleteSession('s1');
    return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr };
  }],
  ['upload', async () => {
    await sb.fs.uploadFile(Buffer.from('kept across a stop\n'), 'kept.txt');
    return (await sb.fs.getFileDetails('kept.txt')).size;
  }],
  ['preview', async () => {
    // A server in the sandbox, reached through its preview link, as a
    // browser would: *.localhost is loopback.
    const port = 8080;
    await sb.process.createSession('web');
    await sb.process.executeSessionCommand('web', {
      command: `mkdir -p /tmp/site && echo previewed > /tmp/site/index.html && exec python3 -m http.server ${port} --bind 0.0.0.0 --directory /tmp/site`,
      runAsync: true,
    });
    const link = await sb.getPreviewLink(port);
    const deadline = Date.now() + 20000;
    for (;;) {
      const res = await viaLoopback(link.url, { 'X-Daytona-Preview-Token': link.token });
      if (res.status === 200 || Date.now() > deadline) {
        return { status: res.status, body: res.body, host: new URL(link.url).hostname.endsWith('.localhost') };
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }],
  ['get-by-name', async () => {
    const again = await daytona.get(name);
    return { id: again.id === sb.id, state: again.state };
  }],
  ['list-by-label', async () => {
    const found = [];
    for await (const s of daytona.list({ labels: { suite: name } })) {
      found.push(s.name);
    }
    return found;
  }],
  ['set-labels', async () => sb.setLabels({ suite: name, step: 'labels' })],
  ['stop', async () => {
    await sb.stop();
    return sb.state;
  }],
  ['archive', async () => {
    await sb.archive();
    const deadline = Date.now() + 20000;
    while (sb.state === 'archiving' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      await sb.refreshData();
    }
    return sb.state;
  }],
  ['start', async () => {
    await sb.start();
    return sb.state;
  }],
  ['download-after-restart', async () => (await sb.fs.downloadFile('kept.txt')).toString()],
  ['env-after-restart', async () => exec('echo "$GREETING"')],
  ['delete', async () => {
    await sb.delete();
    return sb.state;
  }],
  ['get-after-delete', async () => {
    const deadline = Date.now() + 20000;
    for (;;) {
      try {
        const s = await daytona.get(sb.id);
        if (Date.now() > deadline) {
          return `still there: ${s.state}`;
        }
        await new Promise((r) => setTimeout(r, 100));
      } catch (e) {
        return { type: e?.name, status: e?.statusCode };
      }
    }
  }],
];

for (const [stepName, fn] of steps) {
  const t0 = performance.now();
  let out;
  try {
    out = { name: stepName, ok: true, value: (await fn()) ?? null };
  } catch (e) {
    out = { name: stepName, ok: false, error: String(e?.message ?? e), status: e?.statusCode, type: e?.name };
  }
  out.ms = Math.round(performance.now() - t0);
  report.steps.push(out);
}
process.stdout.write(JSON.stringify(report) + '\n');
process.exit(0);
