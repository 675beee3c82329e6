# The runner of POST /process/code-run for Python (agentbox toolbox daemon).
# argv: runner.py <charts-file> <program.py> [args...]
# It runs the program as __main__ with sys.argv = [program.py, args...] and
# records each matplotlib figure the program shows (plt.show()) as one JSON
# line in the charts file; the program's output is left alone.
import importlib.abc
import json
import math
import os
import runpy
import sys
import traceback

_charts_path = sys.argv[1]
_program = sys.argv[2]


def _num(x):
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _nums(xs):
    return [v for v in (_num(x) for x in xs) if v is not None]


def _label(artist):
    text = str(artist.get_label() or "")
    return "" if text.startswith("_") else text


def _png(fig):
    import base64
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _axes_chart(ax):
    from matplotlib.collections import PathCollection
    from matplotlib.patches import Rectangle, Wedge

    chart = {
        "title": ax.get_title(),
        "x_label": ax.get_xlabel(),
        "y_label": ax.get_ylabel(),
        "x_scale": ax.get_xscale(),
        "y_scale": ax.get_yscale(),
        "x_ticks": _nums(ax.get_xticks()),
        "x_tick_labels": [t.get_text() for t in ax.get_xticklabels()],
        "y_ticks": _nums(ax.get_yticks()),
        "y_tick_labels": [t.get_text() for t in ax.get_yticklabels()],
    }
    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    points = [c for c in ax.collections if isinstance(c, PathCollection)]
    lines = list(ax.get_lines())
    if wedges:
        chart["type"] = "pie"
        chart["elements"] = [
            {"label": _label(w), "angle": _num(w.theta2 - w.theta1), "radius": _num(w.r)} for w in wedges
        ]
    elif bars:
        chart["type"] = "bar"
        ticks = dict(zip(chart["x_ticks"], chart["x_tick_labels"]))
        elements = []
        for container in getattr(ax, "containers", []) or [bars]:
            group = _label(container) if hasattr(container, "get_label") else ""
            for bar in container:
                if not isinstance(bar, Rectangle):
                    continue
                center = _num(bar.get_x() + bar.get_width() / 2)
                elements.append({"label": ticks.get(center, "" if center is None else str(center)),
                                 "group": group, "value": str(bar.get_height())})
        chart["elements"] = elements
    elif points and not lines:
        chart["type"] = "scatter"
        chart["elements"] = [
            {"label": _label(c), "points": [_nums(p) for p in c.get_offsets()]} for c in points
        ]
    elif lines:
        chart["type"] = "line"
        chart["elements"] = [
            {"label": _label(line), "points": [_nums(p) for p in line.get_xydata()]} for line in lines
        ]
    else:
        chart["type"] = "unknown"
    return chart


def _figure_chart(fig):
    axes = list(fig.get_axes())
    if len(axes) == 1:
        chart = _axes_chart(axes[0])
    elif axes:
        title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
        chart = {"type": "composite_chart", "title": title, "elements": [_axes_chart(ax) for ax in axes]}
    else:
        chart = {"type": "unknown"}
    return chart


def _record(fig):
    try:
        chart = _figure_chart(fig)
    except Exception:  # a figure we cannot read still yields its picture
        chart = {"type": "unknown"}
    try:
        chart["png"] = _png(fig)
    except Exception:
        pass
    with open(_charts_path, "a", encoding="utf-8") as f:
        f.write(json.dumps(chart, allow_nan=False, default=str) + "\n")


def _patch(pyplot):
    def show(*args, **kwargs):
        for num in pyplot.get_fignums():
            _record(pyplot.figure(num))
        pyplot.close("all")

    pyplot.show = show


class _PyplotHook(importlib.abc.MetaPathFinder):
    """Patches matplotlib.pyplot.show once pyplot is imported."""

    def find_spec(self, name, path, target=None):
        if name != "matplotlib.pyplot":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        spec.loader = _PatchingLoader(spec.loader)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _patch(module)


def _main():
    sys.argv = sys.argv[2:]
    sys.path[0] = os.path.dirname(_program)
    sys.meta_path.insert(0, _PyplotHook())
    try:
        runpy.run_path(_program, run_name="__main__")
    except SystemExit:
        raise
    except BaseException as e:
        tb = e.__traceback__
        # Leave out the frames of this runner and of runpy.
        while tb is not None and tb.tb_frame.f_code.co_filename != _program:
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        sys.stderr.flush()
        sys.exit(1)


_main()
