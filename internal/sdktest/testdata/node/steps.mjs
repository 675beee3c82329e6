// Runs the steps of a program of internal/sdktest that drives agentbox
// serve (image.mjs, mastra.mjs) and prints its report, as serve.mjs does:
// one JSON line {"sdk": VERSION, "steps": [{"name", "ok", "value" | "error", "ms"}, …]}.
// A step that throws is reported with its error and the program goes on;
// the Go test asserts on every step.

/** Runs steps ([name, async fn] pairs) in turn and prints the report. */
export async function runSteps(version, steps) {
  process.on('unhandledRejection', (e) => console.error('unhandled rejection:', e));
  const report = { sdk: version, steps: [] };
  for (const [name, fn] of steps) {
    const t0 = performance.now();
    let out;
    try {
      out = { name, ok: true, value: (await fn()) ?? null };
    } catch (e) {
      out = { name, ok: false, error: String(e?.stack ?? e?.message ?? e), status: e?.statusCode, type: e?.name };
    }
    out.ms = Math.round(performance.now() - t0);
    report.steps.push(out);
  }
  process.stdout.write(JSON.stringify(report) + '\n');
  process.exit(0);
}

/** GETs path of the control plane (DAYTONA_API_URL) with the API key; returns {status, body}. */
export async function apiGet(path) {
  const res = await fetch(process.env.DAYTONA_API_URL + path, {
    headers: { Authorization: `Bearer ${process.env.DAYTONA_API_KEY}` },
  });
  return { status: res.status, body: await res.text() };
}
