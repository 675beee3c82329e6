// The program internal/sdktest runs against `agentbox serve` with
// Mastra's DaytonaSandbox (@mastra/daytona, on the Daytona SDK release it
// depends on): a sandbox of a snapshot (AGENTBOX_BASE_IMAGE, in serve's
// image store) through commands, streamed output, background processes,
// stop and start (files kept) and destroy; then one of the same image as
// an image, built by serve, with its build logs. Reported as steps.mjs
// says, "sdk" being @mastra/daytona's version.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { DaytonaSandbox } from '@mastra/daytona';
import { waitFor } from './lib.mjs';
import { apiGet, runSteps } from './steps.mjs';

const name = process.env.AGENTBOX_SANDBOX_NAME;
const base = process.env.AGENTBOX_BASE_IMAGE;
if (!name || !base) {
  throw new Error('AGENTBOX_SANDBOX_NAME or AGENTBOX_BASE_IMAGE is not set: run this program through internal/sdktest');
}
const require = createRequire(import.meta.url);
const version = JSON.parse(readFileSync(require.resolve('@mastra/daytona/package.json'), 'utf8')).version;

// Stop and destroy go through _stop and _destroy, as Mastra's Workspace
// calls them (they keep the status; the providers' stop and destroy are
// their halves). start is already the lifecycle's _start.

// result keeps what the test compares of a CommandResult.
const result = (r) => ({ success: r.success, exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr });
// stateOf returns the state serve reports for sandbox id ("gone" once 404).
const stateOf = async (id) => {
  const r = await apiGet(`/sandbox/${id}`);
  return r.status === 404 ? 'gone' : JSON.parse(r.body).state;
};
// destroyed destroys sb and waits until serve no longer has it.
const destroyed = async (sb) => {
  const id = sb.daytona.id;
  await sb._destroy();
  await waitFor(`sandbox ${id} gone`, async () => (await stateOf(id)) === 'gone', 20000);
  return { status: sb.status, state: await stateOf(id) };
};

let sb;
let img;
await runSteps(version, [
  ['start-by-snapshot', async () => {
    sb = new DaytonaSandbox({ id: `${name}-snap`, snapshot: base, language: 'python', autoStopInterval: 0 });
    await sb.start();
    const info = await sb.getInfo();
    return { status: sb.status, snapshot: info.metadata.snapshot, state: sb.daytona.state };
  }],
  ['exec', async () => result(await sb.executeCommand('echo', ['hello world']))],
  ['exec-failing', async () => result(await sb.executeCommand('sh', ['-c', 'echo out; echo err >&2; exit 3']))],
  ['streaming', async () => {
    // "three" comes only once the program has seen "one" (it then makes
    // the file the command waits for): two chunks, whatever the timing.
    const out = [];
    const err = [];
    let released;
    const r = await sb.executeCommand('sh', ['-c', 'echo one; echo two >&2; while [ ! -e streamed ]; do sleep 0.05; done; echo three'], {
      onStdout: (c) => {
        out.push(c);
        if (!released && out.join('').includes('one')) {
          released = sb.executeCommand('touch', ['streamed']);
        }
      },
      onStderr: (c) => err.push(c),
    });
    await released;
    return { exitCode: r.exitCode, stdout: out.join(''), stderr: err.join(''), chunked: out.length >= 2 };
  }],
  ['background', async () => {
    const h = await sb.processes.spawn('echo started; sleep 30');
    await waitFor('the background process to start', () => h.stdout.includes('started'), 20000);
    const listed = (await sb.processes.list()).some((p) => p.pid === h.pid && p.running);
    const killed = await h.kill();
    const r = await h.wait();
    return { listed, killed, exitCode: r.exitCode, stdout: r.stdout };
  }],
  ['background-exit', async () => {
    const h = await sb.processes.spawn('echo bg; exit 42');
    const r = await h.wait();
    return { exitCode: r.exitCode, stdout: r.stdout };
  }],
  ['stop', async () => {
    await sb.executeCommand('sh', ['-c', 'echo kept > kept.txt']);
    const id = sb.daytona.id;
    await sb._stop();
    return { status: sb.status, state: await stateOf(id) };
  }],
  ['start-again', async () => {
    await sb.start();
    return { status: sb.status, state: sb.daytona.state, file: (await sb.executeCommand('cat', ['kept.txt'])).stdout };
  }],
  ['destroy', async () => destroyed(sb)],
  ['start-by-image', async () => {
    img = new DaytonaSandbox({ id: `${name}-image`, image: base, resources: { cpu: 1, memory: 1 }, autoStopInterval: 0 });
    await img.start();
    const d = img.daytona;
    const { url } = JSON.parse((await apiGet(`/sandbox/${d.id}/build-logs-url`)).body);
    const res = await fetch(`${url}?follow=true`, { headers: { Authorization: `Bearer ${process.env.DAYTONA_API_KEY}` } });
    const logs = await res.text();
    return {
      status: img.status,
      state: d.state,
      dockerfile: d.buildInfo?.dockerfileContent,
      cpu: d.cpu,
      memory: d.memory,
      logs: logs.includes(`FROM ${base}`),
    };
  }],
  ['exec-image', async () => result(await img.executeCommand('cat', ['/etc/os-release']))],
  ['destroy-image', async () => destroyed(img)],
]);
