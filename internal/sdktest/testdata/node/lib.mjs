// Helpers of the feature modules (see driver.mjs).

/** Bytes, base64-encoded: how binary values go into the report. */
export const b64 = (buf) => Buffer.from(buf).toString('base64');

/**
 * Resolves when cond() (which may be async) is true, polling every 20 ms;
 * rejects after ms milliseconds saying what it waited for.
 */
export async function waitFor(what, cond, ms = 10000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
