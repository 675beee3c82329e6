// process.codeRun: the sandbox's language label is python (see the
// control-plane stub of the Go test).
const result = (r) => ({ exitCode: r.exitCode, result: r.result });

export default function steps() {
  return [
    ['print', async (s) => result(await s.process.codeRun('print(6 * 7)'))],
    ['argv-env', async (s) => result(await s.process.codeRun('import os, sys\nprint(sys.argv[1:], os.environ["GREETING"])', {
      argv: ['a', 'b'],
      env: { GREETING: 'hi' },
    }))],
    ['exit-code', async (s) => result(await s.process.codeRun('import sys\nprint("bye")\nsys.exit(3)'))],
  ];
}
