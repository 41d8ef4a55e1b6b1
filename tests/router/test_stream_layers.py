"""How many of the project's own stream layers a streamed cloud answer's chunk passes (issue 46:
at most 4), counted on a real stream: a client, a node on loopback, a scripted member over HTTP.

The node's thread runs under a profiler that counts every resumption of a frame of the project's
own code that is an async generator, or the ``__anext__`` of a class that plays one (the same
layer written as a class): a layer every chunk passes is resumed at least once per chunk. Today's
four: the transport's reader, ``Member._stream``, the router's ``RoutedStream``, the writer's
events (before issue 46's reshaping, nine).
"""

from __future__ import annotations

import inspect
import sys
import threading
from collections import Counter
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest

from tests.cloud.cloud_servers import chat_chunk, sse
from tests.router import hybrid_helpers as hy

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PACKAGES = tuple(str(REPO / p) + "/" for p in ("edge", "cloud", "router", "dashboard", "models", "edgeroute"))
MAX_LAYERS = 4
PIECES = 24


def _layer(code: CodeType) -> bool:
    if not code.co_filename.startswith(PACKAGES):
        return False
    return bool(code.co_flags & inspect.CO_ASYNC_GENERATOR) or (
        code.co_name == "__anext__" and bool(code.co_flags & inspect.CO_COROUTINE)
    )


def test_a_streamed_cloud_chunk_passes_at_most_four_of_the_projects_async_generators(tmp_path: Path) -> None:
    # Each piece is its own write, a little apart: each reaches the node on its own.
    script: list[tuple[object, ...]] = []
    for i in range(PIECES):
        script += [("send", sse(chat_chunk(f" w{i}"))), ("sleep", 0.01)]
    script.append(("send", sse(chat_chunk(None, "stop"), "[DONE]")))
    member = hy.RecordingServer(script)
    resumed: Counter[CodeType] = Counter()
    armed = threading.Event()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and armed.is_set() and _layer(frame.f_code):
            resumed[frame.f_code] += 1

    threading.setprofile(profile)  # the node's server thread starts with it
    try:
        with hy.node(tmp_path, [member.settings("scripted")]) as (base, _app):
            threading.setprofile(None)  # type: ignore[arg-type]
            body = {"model": "cloud", "messages": hy.ASK, "stream": True, "max_tokens": 64}
            hy.sse_lines(base, body)  # warm: the first request's one-time work is not counted
            armed.set()
            headers, lines = hy.sse_lines(base, body)
            armed.clear()
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
        sys.setprofile(None)
        member.close()
    assert headers["x-edgeroute-route"] == "cloud"
    assert hy.text_of(lines) == "".join(f" w{i}" for i in range(PIECES))
    # Half the pieces: a layer is counted even where two pieces arrive in one read; what runs
    # once a request (opening, closing) is resumed a few times at most.
    per_chunk = sorted(
        f"{Path(c.co_filename).relative_to(REPO)}:{c.co_qualname}" for c, n in resumed.items() if n >= PIECES // 2
    )
    assert per_chunk, "no layer counted: the profiler saw nothing of the stream"
    assert len(per_chunk) <= MAX_LAYERS, "\n".join(per_chunk)
