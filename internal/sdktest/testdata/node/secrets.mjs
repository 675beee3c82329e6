// The program internal/sdktest runs against `agentbox serve` to drive its
// secrets with the official SDK (the release AGENTBOX_SDK names; 0.218 has
// daytona.secret): daytona.secret.create/list/get/update/delete, the
// DaytonaConflictError of a duplicate name, a sandbox created with
// `secrets` exactly as Mastra's DaytonaSandbox 0.9 creates it (its create
// params, /work/shared/reference/mastra.md §2.2: language, labels with
// mastra-sandbox-id, ephemeral, autoStopInterval, name, secrets {ENV:
// name}; @mastra/daytona 0.9 is not on the registry reachable here, so the
// SDK sends what it would), whose command sees a placeholder, never the
// value; sandbox.updateSecrets({}) detaching it for new commands; a create
// naming an unknown secret refused. The value is AGENTBOX_SECRET_VALUE.
// Reported as steps.mjs says.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { stateOf } from './lib.mjs';
import { runSteps } from './steps.mjs';

const alias = process.env.AGENTBOX_SDK;
const value = process.env.AGENTBOX_SECRET_VALUE;
if (!alias || !value) {
  throw new Error('AGENTBOX_SDK or AGENTBOX_SECRET_VALUE is not set: run this program through internal/sdktest');
}
const require = createRequire(import.meta.url);
const version = JSON.parse(readFileSync(require.resolve(`${alias}/package.json`), 'utf8')).version;
const sdk = await import(alias);
const daytona = new sdk.Daytona();

/** Runs fn, which must throw; returns the error's class, status and whether its message names what. */
const refused = async (fn, what) => {
  try {
    await fn();
  } catch (e) {
    return { type: e.constructor.name, status: e.statusCode, names: String(e.message).includes(what) };
  }
  throw new Error('it succeeded');
};

/** What a command printing $NAME shows: a placeholder, the value, or nothing. */
const printenv = async (sb, name) => {
  const r = await sb.process.executeCommand(`printenv ${name}`);
  const out = r.result.trim();
  return { exitCode: r.exitCode, placeholder: out.startsWith('agentbox_secret_'), holdsValue: r.result.includes(value), empty: out === '' };
};

let secret;
let sb;
await runSteps(version, [
  ['secret-create', async () => {
    secret = await daytona.secret.create({ name: 'sdk-llm', value, description: 'for the agent', hosts: ['API.example.com'] });
    return { name: secret.name, hosts: secret.hosts, description: secret.description, hasValue: 'value' in secret, placeholder: secret.placeholder };
  }],
  ['secret-duplicate', async () => refused(() => daytona.secret.create({ name: 'sdk-llm', value: 'other', hosts: ['x.example.com'] }), 'sdk-llm')],
  ['secret-list', async () => {
    const page = await daytona.secret.list({ name: 'sdk', limit: 10 });
    return { total: page.total, names: page.items.map((s) => s.name), nextCursor: page.nextCursor };
  }],
  ['secret-get', async () => (await daytona.secret.get(secret.id)).name],
  ['secret-update', async () => (await daytona.secret.update(secret.id, { hosts: ['api.example.com', '*.example.org'] })).hosts],
  ['create-as-mastra', async () => {
    sb = await daytona.create({
      language: 'typescript',
      labels: { 'mastra-sandbox-id': 'mastra-secrets' },
      ephemeral: false,
      autoStopInterval: 15,
      name: 'mastra-secrets',
      secrets: { LLM_KEY: 'sdk-llm' },
    }, { timeout: 60 });
    return stateOf(sb);
  }],
  ['printenv', async () => printenv(sb, 'LLM_KEY')],
  ['delete-in-use', async () => refused(() => daytona.secret.delete(secret.id), 'mastra-secrets')],
  ['update-secrets-none', async () => {
    await sb.updateSecrets({});
    return printenv(sb, 'LLM_KEY');
  }],
  ['create-unknown-secret', async () => refused(() => daytona.create({ secrets: { X: 'no-such-secret' } }, { timeout: 60 }), 'no-such-secret')],
  ['delete-sandbox', async () => {
    await sb.delete();
    return sb.state;
  }],
  ['secret-delete', async () => {
    await daytona.secret.delete(secret.id);
    return (await daytona.secret.list()).items.map((s) => s.name);
  }],
]);
