// The Mastra half of internal/sdktest's BenchmarkMastraCommands: a
// DaytonaSandbox (@mastra/daytona) of a snapshot (AGENTBOX_BASE_IMAGE) on
// agentbox serve runs AGENTBOX_BENCH_ROUNDS rounds of
// AGENTBOX_BENCH_COMMANDS sequential commands (`echo N`, as the Go half
// runs them through agentbox's daytona engine), once started; prints one
// JSON line {"sdk": VERSION, "roundsMs": [...]}: each round's wall time.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { DaytonaSandbox } from '@mastra/daytona';

const name = process.env.AGENTBOX_SANDBOX_NAME;
const base = process.env.AGENTBOX_BASE_IMAGE;
const rounds = Number(process.env.AGENTBOX_BENCH_ROUNDS ?? '3');
const commands = Number(process.env.AGENTBOX_BENCH_COMMANDS ?? '20');
if (!name || !base) {
  throw new Error('AGENTBOX_SANDBOX_NAME or AGENTBOX_BASE_IMAGE is not set: run this program through internal/sdktest');
}
const require = createRequire(import.meta.url);
const version = JSON.parse(readFileSync(require.resolve('@mastra/daytona/package.json'), 'utf8')).version;

const sb = new DaytonaSandbox({ id: name, snapshot: base, autoStopInterval: 0 });
const roundsMs = [];
try {
  await sb.start();
  // One command before the clock, as the Go half warms up too.
  await sb.executeCommand('echo', ['warm']);
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    for (let i = 0; i < commands; i++) {
      const res = await sb.executeCommand('echo', [String(i)]);
      if (res.exitCode !== 0 || res.stdout !== `${i}\n`) {
        throw new Error(`echo ${i}: ${JSON.stringify(res)}`);
      }
    }
    roundsMs.push(performance.now() - t0);
  }
} finally {
  await sb._destroy();
}
process.stdout.write(JSON.stringify({ sdk: version, roundsMs }) + '\n');
