// Helpers of the feature modules (see driver.mjs).

/**
 * The state serve reports for sandbox s now. Read it after an SDK call
 * that waits for a state: the SDK's own field can go back to an older
 * state after the wait ended, when its safety-net poll, sent before the
 * event that ended the wait, is answered after it (the SDK applies that
 * answer anyway).
 */
export const stateOf = async (s) => { await s.refreshData(); return s.state; };

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
