// sandbox.codeInterpreter: a context keeps a variable between calls; an
// exception comes back as an error message; the context is listed and
// deleted.
export default function steps() {
  let ctx;
  const listed = async (s) => (await s.codeInterpreter.listContexts()).map((c) => c.id).includes(ctx.id);
  return [
    ['default-context', async (s) => {
      const r = await s.codeInterpreter.runCode('print("hello")');
      return { stdout: r.stdout, stderr: r.stderr, error: r.error ?? null };
    }],
    ['create-context', async (s) => {
      ctx = await s.codeInterpreter.createContext();
      return { hasId: Boolean(ctx.id) };
    }],
    ['keep-variable', async (s) => {
      const first = await s.codeInterpreter.runCode('x = 41', { context: ctx });
      const second = await s.codeInterpreter.runCode('x += 1\nprint(x)', { context: ctx });
      return { first: first.stdout, second: second.stdout, error: second.error ?? null };
    }],
    ['error', async (s) => {
      const r = await s.codeInterpreter.runCode('1 / 0', { context: ctx });
      return { name: r.error?.name ?? null, value: r.error?.value ?? null };
    }],
    ['stderr', async (s) => {
      const r = await s.codeInterpreter.runCode('import sys\nprint("oops", file=sys.stderr)', { context: ctx });
      return { stdout: r.stdout, stderr: r.stderr };
    }],
    ['list-contexts', listed],
    ['delete-context', async (s) => {
      await s.codeInterpreter.deleteContext(ctx);
      return listed(s);
    }],
  ];
}
