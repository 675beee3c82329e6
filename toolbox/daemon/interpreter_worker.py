# The worker of one interpreter context (agentbox toolbox daemon): a Python
# namespace kept between executions.
#
# fd 3 (from the daemon): JSON lines. The first is {"sentinel": s}; each
#   next one an execution {"code": c, "envs": {k: v}}.
# fd 4 (to the daemon): JSON lines, per execution zero or more
#   {"type": "result", "text": repr} and {"type": "error", "name", "value",
#   "traceback"}, then {"type": "done"}, written after the sentinel went to
#   fd 1 and fd 2, so the daemon knows where the execution's output ends.
# fd 0 is /dev/null, fd 1 and fd 2 are pipes read by the daemon as raw
# bytes. SIGINT raises KeyboardInterrupt in the running code only.
import ast
import json
import linecache
import os
import signal
import sys
import traceback
import types

_requests = os.fdopen(3, "rb")
_events = 4
os.set_inheritable(3, False)
os.set_inheritable(4, False)
_sentinel = json.loads(_requests.readline())["sentinel"].encode()
_this_file = __file__
_running = False
_cells = 0

_main = types.ModuleType("__main__")
_main.__dict__["__builtins__"] = __builtins__
_namespace = _main.__dict__
sys.modules["__main__"] = _main
sys.path[0] = ""


def _on_sigint(signum, frame):
    if _running:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, _on_sigint)


def _emit(event):
    data = (json.dumps(event) + "\n").encode()
    while data:
        data = data[os.write(_events, data):]


def _error(e):
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == _this_file:
        tb = tb.tb_next
    _emit({
        "type": "error",
        "name": type(e).__name__,
        "value": str(e),
        "traceback": "".join(traceback.format_exception(type(e), e, tb)),
    })


def _execute(code):
    global _running, _cells
    _cells += 1
    name = "<cell-%d>" % _cells
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    tree = ast.parse(code, name, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    body = compile(tree, name, "exec")
    tail = compile(last, name, "eval") if last is not None else None
    value = None
    _running = True
    try:
        exec(body, _namespace)
        if tail is not None:
            value = eval(tail, _namespace)
    finally:
        _running = False
    if value is not None:
        _emit({"type": "result", "text": repr(value)})


def _serve(request):
    global _running
    saved = {k: os.environ.get(k) for k in request.get("envs") or {}}
    try:
        try:
            os.environ.update(request.get("envs") or {})
            _execute(request["code"])
        except BaseException as e:
            _running = False
            _error(e)
        finally:
            _running = False
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    except KeyboardInterrupt:  # arrived after the code ended: nothing to stop
        pass
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        try:
            stream.flush()
        except Exception:
            pass
        try:
            os.write(fd, _sentinel)
        except OSError:
            pass
    _emit({"type": "done"})


def _loop():
    while True:
        try:
            line = _requests.readline()
        except KeyboardInterrupt:
            continue
        if not line:
            return
        _serve(json.loads(line))


_loop()
