// The program internal/sdktest runs against `agentbox serve` for issue
// 27's calls of the official SDK (the release AGENTBOX_SDK names):
// sandbox.fork() keeps files and diverges afterwards; sandbox.pause()
// keeps a running Python process's in-memory counter across pause and
// start; sandbox.createSnapshot() of a running sandbox, then
// daytona.create({snapshot}) from it has its files; refreshActivity().
// The image AGENTBOX_BASE_IMAGE is in serve's image store. Reported as
// steps.mjs says.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { stateOf } from './lib.mjs';
import { runSteps } from './steps.mjs';

const alias = process.env.AGENTBOX_SDK;
const name = process.env.AGENTBOX_SANDBOX_NAME;
const base = process.env.AGENTBOX_BASE_IMAGE;
if (!alias || !name || !base) {
  throw new Error('AGENTBOX_SDK, AGENTBOX_SANDBOX_NAME or AGENTBOX_BASE_IMAGE is not set: run this program through internal/sdktest');
}
const require = createRequire(import.meta.url);
const version = JSON.parse(readFileSync(require.resolve(`${alias}/package.json`), 'utf8')).version;
const sdk = await import(alias);
const daytona = new sdk.Daytona();

let sb, fork, fromImage, fromSnap;
const sh = async (s, cmd) => (await s.process.executeCommand(cmd)).result.trim();
// The counter: a Python process that keeps a token and a count in memory
// and writes both to /tmp/counter every 20 ms.
const counter = 'import os,time\ntok=os.urandom(4).hex()\ni=0\nwhile True:\n  i+=1\n  open("/tmp/counter.new","w").write(f"{tok} {i}")\n  os.replace("/tmp/counter.new","/tmp/counter")\n  time.sleep(0.02)\n';
const readCounter = async () => {
  const [tok, n] = (await sh(sb, 'cat /tmp/counter')).split(' ');
  return { tok, n: Number(n) };
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

await runSteps(version, [
  ['create', async () => {
    sb = await daytona.create({ name, autoStopInterval: 0 }, { timeout: 60 });
    await sb.fs.uploadFile(Buffer.from('before'), 'f.txt');
    return stateOf(sb);
  }],
  ['fork', async () => {
    fork = await sb.fork({ name: `${name}-fork` });
    const seen = (await fork.fs.downloadFile('f.txt')).toString();
    await fork.fs.uploadFile(Buffer.from('fork'), 'f.txt');
    await fork.fs.uploadFile(Buffer.from('new'), 'g.txt');
    return { state: await stateOf(fork), seen, source: (await sb.fs.downloadFile('f.txt')).toString(), sourceG: await sh(sb, 'test -e g.txt && echo yes || echo no') };
  }],
  ['pause-keeps-memory', async () => {
    await sb.process.createSession('counter');
    await sb.fs.uploadFile(Buffer.from(counter), '/tmp/counter.py');
    await sb.process.executeSessionCommand('counter', { command: 'python3 /tmp/counter.py', runAsync: true });
    let before;
    for (let i = 0; i < 200; i++) {
      try { before = await readCounter(); if (before.n > 3) break; } catch { /* not yet written */ }
      await sleep(20);
    }
    await sb.pause();
    const paused = await stateOf(sb);
    await sb.start();
    await sleep(200);
    const after = await readCounter();
    return { paused, started: await stateOf(sb), sameProcess: after.tok === before.tok, counted: after.n > before.n };
  }],
  ['refresh-activity', async () => {
    await sb.refreshActivity();
    await sb.refreshData();
    return typeof sb.lastActivityAt === 'string' || sb.lastActivityAt === undefined ? 'ok' : sb.lastActivityAt;
  }],
  ['snapshot-running', async () => {
    fromImage = await daytona.create({ name: `${name}-img`, snapshot: base }, { timeout: 60 });
    await fromImage.fs.uploadFile(Buffer.from('in-snapshot'), '/kept.txt');
    await fromImage.createSnapshot(`${name}-snap`);
    await fromImage.refreshData();
    return fromImage.state;
  }],
  ['create-from-snapshot', async () => {
    fromSnap = await daytona.create({ name: `${name}-from-snap`, snapshot: `${name}-snap` }, { timeout: 60 });
    return (await fromSnap.fs.downloadFile('/kept.txt')).toString();
  }],
  ['delete', async () => {
    for (const s of [fromSnap, fromImage, fork, sb]) {
      if (s) await s.delete();
    }
    // The snapshot is in use until the sandboxes made of it are gone.
    for (const s of [fromSnap, fromImage]) {
      for (let i = 0; s && i < 400; i++) {
        try { await daytona.get(s.id); } catch { break; }
        await sleep(50);
      }
    }
    await daytona.snapshot.delete(await daytona.snapshot.get(`${name}-snap`));
    return 'ok';
  }],
]);
