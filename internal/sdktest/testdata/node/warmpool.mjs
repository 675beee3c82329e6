// The program internal/sdktest runs against `agentbox serve` to drive its
// warm pools with the official SDK's daytona.warmPool (the release
// AGENTBOX_SDK names; 0.218 has it): a pool of the snapshot
// AGENTBOX_BASE_IMAGE (in serve's image store) created, waited for until
// its spare is ready, a sandbox created of the snapshot (which takes the
// spare), its files read, the pool refilled, drained, deleted. Reported as
// steps.mjs says.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { stateOf, waitFor } from './lib.mjs';
import { runSteps } from './steps.mjs';

const alias = process.env.AGENTBOX_SDK;
const base = process.env.AGENTBOX_BASE_IMAGE;
if (!alias || !base) {
  throw new Error('AGENTBOX_SDK or AGENTBOX_BASE_IMAGE is not set: run this program through internal/sdktest');
}
const require = createRequire(import.meta.url);
const version = JSON.parse(readFileSync(require.resolve(`${alias}/package.json`), 'utf8')).version;
const sdk = await import(alias);
const daytona = new sdk.Daytona();

let pool;
let sb;
const ready = async (n) => {
  await waitFor(`warm pool ${pool.id} with ${n} ready`, async () => {
    const p = (await daytona.warmPool.list()).find((x) => x.id === pool.id);
    return p?.currentSize === n;
  }, 60000);
  return n;
};

await runSteps(version, [
  ['pool-create', async () => {
    pool = await daytona.warmPool.create({ snapshot: base, pool: 1 });
    return { snapshot: pool.snapshot, pool: pool.pool, osUser: pool.osUser };
  }],
  ['pool-ready', async () => ready(1)],
  ['create-from-pool', async () => {
    sb = await daytona.create({ snapshot: base }, { timeout: 60 });
    const r = await sb.process.executeCommand('cat /etc/os-release');
    return { state: await stateOf(sb), snapshot: sb.snapshot, os: r.result };
  }],
  ['pool-refilled', async () => ready(1)],
  ['pool-drain', async () => {
    const p = await daytona.warmPool.update(pool.id, { pool: 0 });
    await ready(0);
    return p.pool;
  }],
  ['pool-delete', async () => {
    await daytona.warmPool.delete(pool.id);
    return (await daytona.warmPool.list()).map((p) => p.id);
  }],
  ['delete', async () => {
    await sb.delete();
    return sb.state;
  }],
]);
