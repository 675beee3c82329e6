// Sessions: a variable kept between commands, an async command whose logs
// stream to callbacks (getSessionCommandLogs with onStdout/onStderr), the
// command's exit code, its logs fetched whole, and input sent to a running
// command. No command runs a bare `exit`: in Daytona's daemon that ends the
// session's shell (a subshell gives the exit code instead).
import { waitFor } from './lib.mjs';

const sid = 'sdk-session';

export default function steps() {
  let cmdId;
  const ids = async (s) => (await s.process.listSessions()).map((x) => x.sessionId);
  return [
    ['create', async (s) => {
      await s.process.createSession(sid);
    }],
    ['sync-exec', async (s) => {
      await s.process.executeSessionCommand(sid, { command: 'export GREETING=hello' });
      const r = await s.process.executeSessionCommand(sid, { command: 'echo "$GREETING"; echo e >&2' });
      return { exitCode: r.exitCode ?? null, stdout: r.stdout ?? null, stderr: r.stderr ?? null };
    }],
    ['async-exec', async (s) => {
      const r = await s.process.executeSessionCommand(sid, {
        command: 'for i in 1 2 3; do echo "out$i"; echo "err$i" >&2; sleep 0.05; done; (exit 4)',
        runAsync: true,
      });
      cmdId = r.cmdId;
      return { hasId: Boolean(r.cmdId) };
    }],
    ['stream-logs', async (s) => {
      let stdout = '';
      let stderr = '';
      await s.process.getSessionCommandLogs(sid, cmdId, (c) => { stdout += c; }, (c) => { stderr += c; });
      return { stdout, stderr };
    }],
    ['command', async (s) => {
      const c = await s.process.getSessionCommand(sid, cmdId);
      return { exitCode: c.exitCode ?? null };
    }],
    ['get-session', async (s) => {
      const session = await s.process.getSession(sid);
      const c = session.commands?.find((x) => x.id === cmdId);
      return { sessionId: session.sessionId, exitCode: c?.exitCode ?? null };
    }],
    ['logs', async (s) => {
      const l = await s.process.getSessionCommandLogs(sid, cmdId);
      return { stdout: l.stdout ?? null, stderr: l.stderr ?? null };
    }],
    ['input', async (s) => {
      const r = await s.process.executeSessionCommand(sid, { command: 'read line; echo "got:$line"', runAsync: true });
      // Daytona's daemon answers 500 "failed to open input pipe" until the
      // command's stdin pipe exists; the SDK does not retry, its users do.
      await waitFor('the command to take input', async () => {
        try {
          await s.process.sendSessionCommandInput(sid, r.cmdId, 'typed\n');
          return true;
        } catch (e) {
          if (String(e?.message).includes('failed to open input pipe')) {
            return false;
          }
          throw e;
        }
      }, 5000);
      let c;
      await waitFor('the command reading input to exit', async () => {
        c = await s.process.getSessionCommand(sid, r.cmdId);
        return c.exitCode !== undefined && c.exitCode !== null;
      });
      const l = await s.process.getSessionCommandLogs(sid, r.cmdId);
      return { exitCode: c.exitCode, stdout: l.stdout ?? null };
    }],
    ['list', ids],
    ['delete', async (s) => {
      await s.process.deleteSession(sid);
      return ids(s);
    }],
  ];
}
