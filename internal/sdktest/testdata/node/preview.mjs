// The program internal/sdktest runs against `agentbox serve` (its default
// preview URLs) with the official SDK (the release AGENTBOX_SDK names):
// a server in a sandbox fetched with Node's own fetch through
// getPreviewLink (token header; none: refused) and getSignedPreviewUrl,
// then 200 downloads of an 8 MiB file through serve's toolbox proxy
// (downloadFile, downloadFileStream, downloadFiles; one at a time and
// four at a time), each compared with the file's sha256 in the sandbox.
// Reported as steps.mjs says. Nothing here talks to anything but
// DAYTONA_API_URL and the URLs it gives (loopback).

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { stateOf } from './lib.mjs';
import { runSteps } from './steps.mjs';

const alias = process.env.AGENTBOX_SDK;
const name = process.env.AGENTBOX_SANDBOX_NAME;
if (!alias || !name) {
  throw new Error('AGENTBOX_SDK or AGENTBOX_SANDBOX_NAME is not set: run this program through internal/sdktest');
}
const require = createRequire(import.meta.url);
const version = JSON.parse(readFileSync(require.resolve(`${alias}/package.json`), 'utf8')).version;
const sdk = await import(alias);
const daytona = new sdk.Daytona();
const size = 8 << 20;

let sb;
let want;
const sha = (buf) => createHash('sha256').update(buf).digest('hex');

// fetchUntil fetches url (with headers) until it answers 200 or 20 s
// pass: the sandbox's server takes a moment to listen.
const fetchUntil = async (url, headers) => {
  const deadline = Date.now() + 20000;
  for (;;) {
    const res = await fetch(url, { headers });
    const body = await res.text();
    if (res.status === 200 || Date.now() > deadline) {
      return { status: res.status, body };
    }
    await new Promise((r) => setTimeout(r, 50));
  }
};

// whole downloads n times with get (returning the bytes), `parallel` at
// a time, and counts the downloads that are the file, byte for byte.
const whole = async (n, parallel, get) => {
  let ok = 0;
  let firstError = null;
  const one = async () => {
    try {
      const buf = await get();
      if (buf.length === size && sha(buf) === want) {
        ok++;
      } else if (!firstError) {
        firstError = `${buf.length} bytes, sha256 ${sha(buf)}`;
      }
    } catch (e) {
      firstError ??= String(e?.message ?? e);
    }
  };
  for (let i = 0; i < n; i += parallel) {
    await Promise.all(Array.from({ length: Math.min(parallel, n - i) }, one));
  }
  return { whole: ok, of: n, firstError };
};

const streamed = async () => {
  const stream = await sb.fs.downloadFileStream('/tmp/big');
  const chunks = [];
  for await (const c of stream) {
    chunks.push(c);
  }
  return Buffer.concat(chunks);
};

const bulk = async () => {
  const res = await sb.fs.downloadFiles([{ source: '/tmp/big' }]);
  if (res.length !== 1 || res[0].error) {
    throw new Error(`downloadFiles: ${JSON.stringify(res.map((r) => r.error))}`);
  }
  return Buffer.from(res[0].result);
};

await runSteps(version, [
  ['create', async () => {
    sb = await daytona.create({ name, autoStopInterval: 0 }, { timeout: 60 });
    await sb.process.createSession('web');
    await sb.process.executeSessionCommand('web', {
      command: 'mkdir -p /tmp/site && echo previewed > /tmp/site/index.html && exec python3 -m http.server 8080 --bind 0.0.0.0 --directory /tmp/site',
      runAsync: true,
    });
    return stateOf(sb);
  }],
  ['preview-token', async () => {
    const link = await sb.getPreviewLink(8080);
    const res = await fetchUntil(link.url + '/index.html', { 'X-Daytona-Preview-Token': link.token });
    return { ...res, loopback: /^127\.\d+\.\d+\.\d+$|^\[::1\]$/.test(new URL(link.url).hostname) };
  }],
  ['preview-no-token', async () => {
    const link = await sb.getPreviewLink(8080);
    return (await fetch(link.url + '/index.html')).status;
  }],
  ['preview-signed', async () => {
    const signed = await sb.getSignedPreviewUrl(8080, 60);
    return fetchUntil(signed.url + '/index.html', {});
  }],
  ['make-file', async () => {
    const r = await sb.process.executeCommand(`head -c ${size} /dev/urandom > /tmp/big && sha256sum /tmp/big`);
    want = r.result.split(' ')[0];
    return { exitCode: r.exitCode, hex: /^[0-9a-f]{64}$/.test(want) };
  }],
  ['download', async () => whole(50, 1, () => sb.fs.downloadFile('/tmp/big'))],
  ['download-stream', async () => whole(50, 1, streamed)],
  ['download-bulk', async () => whole(40, 1, bulk)],
  ['download-concurrent', async () => whole(60, 4, (() => {
    let i = 0;
    return () => [() => sb.fs.downloadFile('/tmp/big'), streamed, bulk][i++ % 3]();
  })())],
  ['delete', async () => {
    await sb.delete();
    return sb.state;
  }],
]);
