"""What the program tells the engine about where each resource was created.

Pulumi's Python SDK (3.259, requirements.txt) sends with every registration the program's
call stack down to the resource's constructor, and the engine keeps it in the state: one
file URI and line per frame, six or seven frames for an entry's objects, a third of the
state of a large stack (11 of 37 MB at 1,000 entries, docs/benchmarks.md section 13). The
engine reads, copies and writes that state in every run, targeted or not, whatever it
changes. Only the innermost frame says anything a reader needs (the line of the program
that made the resource, which the engine also keeps as the source position), so only it
is sent.
"""

from __future__ import annotations

from pulumi.runtime import resource as _runtime


def innermost_frame_only() -> None:
    """Every later registration sends its stack trace's first frame only (the source
    position the engine shows is that frame; it stays as it was)."""
    full = getattr(_runtime, "_get_stack_trace", None)
    if full is None or getattr(full, "innermost_only", False):
        return

    def first_frame():
        trace = full()
        del trace.frames[1:]
        return trace

    first_frame.innermost_only = True  # type: ignore[attr-defined]
    _runtime._get_stack_trace = first_frame
