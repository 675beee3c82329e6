// The program internal/sdktest runs, once per SDK release: it loads the
// release named by AGENTBOX_SDK (an npm alias of package.json) and runs
// the features listed in AGENTBOX_FEATURES, a JSON array of
//
//	{"name": "files", "module": "files.mjs", "sandboxId": "…", "work": "/tmp/…", "args": {…}}
//
// one after the other. Each feature has its own sandbox, which the SDK gets
// from the test's control-plane stub (DAYTONA_API_URL, DAYTONA_API_KEY).
// A feature module's default export takes {work, args} and returns its
// steps, a list of [name, fn] where fn(sandbox, sdk, internal) returns the
// step's value (JSON-encodable); internal(path) imports a module of the
// SDK's package that its exports do not name (e.g. esm/utils/Multipart.js),
// for steps that exercise code the SDK runs only in other runtimes. The driver prints one JSON report on stdout:
//
//	{"sdk": "0.205.1", "importMs": 700, "features": {"files": [
//	  {"name": "upload", "ok": true, "value": …, "ms": 12},
//	  {"name": "find", "ok": false, "error": "…", "status": 404, "code": "NOT_FOUND", "ms": 5}]}}
//
// A step that throws is reported with the error's message, HTTP status and
// daemon error code, and the feature goes on with its next step; the Go
// test asserts on every step. Nothing here talks to anything but the
// addresses the test passes in the environment (loopback).

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

const stepTimeoutMs = 30000;

const alias = process.env.AGENTBOX_SDK;
const features = JSON.parse(process.env.AGENTBOX_FEATURES || 'null');
if (!alias || !features) {
  throw new Error('AGENTBOX_SDK or AGENTBOX_FEATURES is not set: run this program through internal/sdktest');
}

// An SDK's event handlers may throw or reject outside any step (a
// WebSocket message after a step gave up): say so and go on, so that the
// other steps and features still report.
process.on('unhandledRejection', (e) => console.error('unhandled rejection:', e));
process.on('uncaughtException', (e) => console.error('uncaught exception:', e));

const started = performance.now();
const require = createRequire(import.meta.url);
const pkgJSON = require.resolve(`${alias}/package.json`);
const version = JSON.parse(readFileSync(pkgJSON, 'utf8')).version;
const sdk = await import(alias);
const internal = (path) => import(pathToFileURL(join(dirname(pkgJSON), path)).href);
const report = { sdk: version, importMs: Math.round(performance.now() - started), features: {} };

const daytona = new sdk.Daytona();
for (const f of features) {
  report.features[f.name] = await runFeature(f);
}
try {
  await daytona[Symbol.asyncDispose]?.();
} catch {
  // Nothing to release: the test ends its servers itself.
}
process.stdout.write(JSON.stringify(report) + '\n');
process.exit(0);

async function runFeature(f) {
  const results = [];
  let sandbox;
  let steps;
  try {
    steps = (await import(`./${f.module}`)).default({ work: f.work, args: f.args ?? {} });
    sandbox = await daytona.get(f.sandboxId);
  } catch (e) {
    return [failure('get-sandbox', e)];
  }
  for (const [name, fn] of steps) {
    const t0 = performance.now();
    try {
      const value = await withTimeout(name, fn(sandbox, sdk, internal), stepTimeoutMs);
      results.push({ name, ok: true, value: value ?? null });
    } catch (e) {
      results.push(failure(name, e));
    }
    results.at(-1).ms = Math.round(performance.now() - t0);
  }
  return results;
}

function withTimeout(name, promise, ms) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`step ${name} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function failure(name, e) {
  let message = e?.message ?? e;
  if (typeof message !== 'string') {
    message = JSON.stringify(message) ?? String(message);
  }
  const out = { name, ok: false, error: message };
  const status = e?.statusCode ?? e?.response?.status ?? e?.status;
  if (typeof status === 'number') {
    out.status = status;
  }
  if (typeof e?.code === 'string') {
    out.code = e.code;
  }
  if (e?.name) {
    out.type = e.name;
  }
  return out;
}
