// The program internal/sdktest runs against `agentbox serve` to create
// sandboxes from images with the official SDK (the release AGENTBOX_SDK
// names): a declarative image built with its build logs streamed
// (onSnapshotCreateLogs), and a snapshot made from an image name, then
// used and deleted. The image AGENTBOX_BASE_IMAGE is in serve's image
// store. Reported as steps.mjs says.

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
const snapName = `${name}-snap`;

let sb;
const exec = async (s, cmd) => {
  const r = await s.process.executeCommand(cmd);
  return { exitCode: r.exitCode, result: r.result };
};

await runSteps(version, [
  ['create-by-image', async () => {
    const logs = [];
    const image = sdk.Image.base(base).runCommands('echo built-by-sdk > /built && echo run-step-output');
    sb = await daytona.create({ name, image }, { timeout: 120, onSnapshotCreateLogs: (line) => logs.push(line) });
    const text = logs.join('\n');
    return {
      state: await stateOf(sb),
      dockerfile: sb.buildInfo?.dockerfileContent,
      logsFrom: text.includes(`FROM ${base}`),
      logsRun: text.includes('run-step-output'),
    };
  }],
  ['exec-built', async () => exec(sb, 'cat /built')],
  ['delete-built', async () => {
    await sb.delete();
    return sb.state;
  }],
  ['snapshot-create', async () => {
    const logs = [];
    const s = await daytona.snapshot.create({ name: snapName, image: base }, { onLogs: (line) => logs.push(line) });
    return { name: s.name, state: s.state, imageName: s.imageName, logged: logs.includes(`Created snapshot ${snapName} (active)`) };
  }],
  ['snapshot-get', async () => {
    const s = await daytona.snapshot.get(snapName);
    return { name: s.name, state: s.state };
  }],
  ['snapshot-list', async () => {
    const page = await daytona.snapshot.list();
    return page.items.map((s) => s.name).filter((n) => n === snapName || n === 'agentbox-host').sort();
  }],
  ['create-from-snapshot', async () => {
    const s = await daytona.create({ name: `${name}-of-snap`, snapshot: snapName }, { timeout: 60 });
    const out = await exec(s, 'cat /etc/os-release');
    await s.delete();
    return { snapshot: s.snapshot, os: out.result };
  }],
  ['snapshot-delete', async () => {
    await daytona.snapshot.delete(await daytona.snapshot.get(snapName));
    try {
      await daytona.snapshot.get(snapName);
      return 'still there';
    } catch (e) {
      return { type: e?.name, status: e?.statusCode };
    }
  }],
]);
