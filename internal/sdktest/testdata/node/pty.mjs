// A PTY session through process.createPty (GET
// /process/pty/create-connect, a route the spec files lack): the
// terminal's size as the shell sees it (stty size), its env and cwd, a
// resize, the session's info, a new connection to the session after the
// first one closed (connectPty: GET /process/pty/{id}/connect) and the exit
// code of `exit 7`.
import { waitFor } from './lib.mjs';

const ptyId = 'sdk-pty';

export default function steps({ work }) {
  let handle;
  let output = '';
  const decoder = new TextDecoder();
  const onData = (data) => {
    output += decoder.decode(data, { stream: true });
  };

  // sendAndWait types a command and returns the first group of pattern in
  // the output that follows. The command must print something the typed
  // text does not contain, since the terminal echoes what is typed: quotes
  // split the marker in the typed text (SI""ZE= prints SIZE=).
  async function sendAndWait(pattern, command) {
    const from = output.length;
    let m;
    await handle.sendInput(command + '\n');
    await waitFor(`${pattern} in the PTY output`, () => (m = pattern.exec(output.slice(from))) !== null);
    return m[1];
  }
  const size = () => sendAndWait(/SIZE=(\S+)\r?\n/, 'echo "SI""ZE=$(stty size | tr " " x)"');

  return [
    ['create', async (s) => {
      handle = await s.process.createPty({
        id: ptyId,
        cols: 80,
        rows: 24,
        cwd: work,
        envs: { GREETING: 'hello' },
        onData,
      });
      return handle.sessionId;
    }],
    ['size', size],
    ['env-cwd', () => sendAndWait(/ENV=(\S+)\r?\n/, 'echo "EN""V=$GREETING:$PWD"')],
    ['resize', async () => {
      const info = await handle.resize(100, 30);
      return { cols: info.cols, rows: info.rows };
    }],
    ['size-after-resize', size],
    ['info', async (s) => {
      const info = await s.process.getPtySessionInfo(ptyId);
      return { id: info.id, active: info.active, cols: info.cols, rows: info.rows };
    }],
    ['list', async (s) => (await s.process.listPtySessions()).map((p) => p.id)],
    ['reconnect', async (s) => {
      await handle.disconnect();
      handle = await s.process.connectPty(ptyId, { onData });
      return sendAndWait(/AGAIN=(\S+)\r?\n/, 'echo "AG""AIN=$GREETING"');
    }],
    ['exit-code', async () => {
      await handle.sendInput('exit 7\n');
      const r = await handle.wait();
      return { exitCode: r.exitCode ?? null, error: r.error ?? null };
    }],
  ];
}
