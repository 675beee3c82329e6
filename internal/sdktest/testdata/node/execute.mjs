// What the toolbox server served before issue 10: the sandbox's
// directories and process.executeCommand.
export default function steps({ work }) {
  return [
    ['work-dir', async (s) => s.getWorkDir()],
    ['home-dir', async (s) => s.getUserHomeDir()],
    ['execute', async (s) => {
      const r = await s.process.executeCommand('echo out; echo err >&2; exit 3');
      return { exitCode: r.exitCode, result: r.result };
    }],
    ['execute-cwd-env', async (s) => {
      const r = await s.process.executeCommand('echo "$PWD $GREETING"', `${work}/sub`, { GREETING: 'hello' });
      return { exitCode: r.exitCode, result: r.result };
    }],
  ];
}
