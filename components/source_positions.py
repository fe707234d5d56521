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

import pathlib
import sys

from pulumi.runtime import resource as _runtime
from pulumi.runtime.proto import source_pb2


def innermost_frame() -> source_pb2.StackTrace:
    """The SDK's stack trace cut to its first frame (`_get_stack_trace`: the caller of the
    third `__init__` out from here, i.e. of the concrete resource's constructor), found by
    walking the frames: no source line is read and no frame beyond it is converted, which
    was a third of the program's time at 300 entries (docs/benchmarks.md)."""
    frame = sys._getframe(1)
    seen = 0
    while frame is not None:
        if frame.f_code.co_name == "__init__":
            seen += 1
            if seen == 3:
                break
        frame = frame.f_back
    caller = frame.f_back if frame is not None else None
    if caller is None:
        return source_pb2.StackTrace()
    if not caller.f_code.co_filename:
        return source_pb2.StackTrace(frames=[source_pb2.StackFrame()])
    try:
        uri = pathlib.Path(caller.f_code.co_filename).as_uri()
    except ValueError:  # not an absolute path: the SDK sends no position either
        return source_pb2.StackTrace(frames=[source_pb2.StackFrame()])
    position = source_pb2.SourcePosition(uri=uri, line=caller.f_lineno)
    return source_pb2.StackTrace(frames=[source_pb2.StackFrame(pc=position)])


# The SDK's own function, kept when it is replaced (tests compare against it).
sdk_stack_trace = None


def innermost_frame_only() -> None:
    """Every later registration sends its stack trace's first frame only (the source
    position the engine shows is that frame; it stays as it was)."""
    global sdk_stack_trace
    full = getattr(_runtime, "_get_stack_trace", None)
    if full is None or getattr(full, "innermost_only", False):
        return
    sdk_stack_trace = full
    innermost_frame.innermost_only = True  # type: ignore[attr-defined]
    _runtime._get_stack_trace = innermost_frame
