"""The path of one streamed chat request through the node's modules, as it runs.

A real node (the INT4 edge model, the cache on) answers the official ``openai`` SDK in process;
every call the request makes is traced (``sys.setprofile``, on the request's own tasks). A
*module* is one file of the project's packages. The request's *path* is the modules between the
server and the edge engine: those on the stack whenever the engine is entered, asked or read
(the way down, and the chunks' way up). A module is *visited* from each module that calls into
it (a generator resumed for its next chunk is the same visit): on a straight path each module of
the path is entered from the one above it on the way down and from the one that reads its answer
on the way up, so at most twice, and none is called back from below it. The router asks the
engine one thing before it generates: ``prepare``.

``pytest -s tests/router/test_request_path.py`` prints every module the request entered, where
from and by which functions (``*``: on the path).
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import openai
import pytest
import pytest_asyncio

from edgeroute.app import create_app
from router import load_settings

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("models", "edge", "cloud", "router", "dashboard", "edgeroute")
OUTSIDE = "(server)"  # the ASGI server and the event loop: what starts the request and reads its stream
ENGINE = "edge/engine.py"

_traced: contextvars.ContextVar[bool] = contextvars.ContextVar("traced", default=False)
_modules: dict[str, str | None] = {}


def module_of(frame: FrameType) -> str | None:
    """The project module (a path from the repository's root) a frame runs in, None outside it."""
    filename = frame.f_code.co_filename
    if filename not in _modules:
        path = Path(filename).resolve()
        rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else None
        _modules[filename] = rel.as_posix() if rel is not None and rel.parts[0] in PACKAGES else None
    return _modules[filename]


@dataclass
class RequestTrace:
    """What the tracer saw: each new activation of a project function, with its caller."""

    entries: list[tuple[str, str, str]] = field(default_factory=list)  # (caller module, module, function)
    stacks: list[tuple[str, ...]] = field(default_factory=list)  # the project's modules on the stack
    path: set[str] = field(default_factory=set)  # the modules between the server and the engine
    _seen: set[FrameType] = field(default_factory=set)

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return") or not _traced.get():
            return
        module = module_of(frame)
        if module is None:
            return
        if module == ENGINE:  # entered, or handing a chunk up: every module above it is on the path
            self.path.update(_stack(frame))
        # A generator resumed (the next chunk pulled through it) is the same visit: only a
        # frame's first call is an entry.
        if event == "call" and frame not in self._seen:
            self._seen.add(frame)
            caller = _stack(frame.f_back)
            self.entries.append((caller[-1] if caller else OUTSIDE, module, frame.f_code.co_qualname))
            self.stacks.append(_stack(frame))

    def called_back(self) -> list[tuple[str, ...]]:
        """The stacks on which a module of the path comes back above another module."""
        return sorted({s for s in self.stacks if any(s.count(m) > 1 for m in self.path)})

    def visits(self) -> dict[str, set[str]]:
        """Each module, and the modules it was entered from."""
        out: dict[str, set[str]] = {}
        for caller, module, _ in self.entries:
            if caller != module:
                out.setdefault(module, set()).add(caller)
        return out

    def table(self) -> str:
        lines = []
        for module, callers in sorted(self.visits().items(), key=lambda kv: (-len(kv[1]), kv[0])):
            functions = sorted({f for c, m, f in self.entries if m == module and c != module})
            mark = "*" if module in self.path else " "
            where = f"from {', '.join(sorted(callers))}: {', '.join(functions)}"
            lines.append(f"{len(callers)} {mark} {module:34} {where}")
        return "\n".join(lines)


def _stack(frame: FrameType | None) -> tuple[str, ...]:
    """The project's modules on the stack down to ``frame``, outermost first (a run of frames in
    one module is one)."""
    stack: list[str] = []
    while frame is not None:
        m = module_of(frame)
        if m is not None and (not stack or stack[-1] != m):
            stack.append(m)
        frame = frame.f_back
    return tuple(reversed(stack))


def traced(app: Any) -> Any:
    """The app, with the request's own tasks marked (tasks it starts inherit the mark)."""

    async def asgi(scope: Any, receive: Any, send: Any) -> None:
        token = _traced.set(scope["type"] == "http")
        try:
            await app(scope, receive, send)
        finally:
            _traced.reset(token)

    return asgi


async def stream_chat(client: openai.AsyncOpenAI, text: str) -> str:
    stream = await client.chat.completions.create(
        model="edge", messages=[{"role": "user", "content": text}], max_tokens=8, temperature=0, stream=True
    )
    return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def path(tmp_path_factory: pytest.TempPathFactory) -> RequestTrace:
    """An edge-only node with the cache on; its second request (a cache miss) traced."""
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("path"), edge={"n_ctx": 2048}, cloud={"local_member": False}
    )
    app = create_app(settings)
    seen = RequestTrace()
    async with app.lifespan():
        transport = httpx.ASGITransport(app=traced(app))
        async with httpx.AsyncClient(transport=transport) as http:
            client = openai.AsyncOpenAI(base_url="http://node/v1", api_key="unused", http_client=http)
            # The node's first request: its lazy set-up is no part of a path.
            await stream_chat(client, "Say hello.")
            gc.collect()  # and the generators it left are closed now, not during the traced request
            for _ in range(10):
                await asyncio.sleep(0)
            previous = sys.getprofile()
            sys.setprofile(seen.profile)
            try:
                answer = await stream_chat(client, "Name a colour.")
            finally:
                sys.setprofile(previous)
    assert answer.strip() != ""
    print("\n" + seen.table())
    return seen


@pytest.mark.asyncio(loop_scope="module")
async def test_the_path_reaches_the_engine_and_the_cache(path: RequestTrace) -> None:
    entered = {(m, f) for _, m, f in path.entries}
    assert {("router/api.py", "OpenAIController.chat_completions"), ("router/respond.py", "respond"),
            ("router/pipeline.py", "run"), ("router/fallback.py", "start"), (ENGINE, "LlamaEngine.prepare"),
            (ENGINE, "LlamaEngine.stream"), ("edge/cache/service.py", "EdgeCache.lookup"),
            ("edge/cache/service.py", "EdgeCache.store")} <= entered


@pytest.mark.asyncio(loop_scope="module")
async def test_the_path_runs_from_the_controller_to_the_engine(path: RequestTrace) -> None:
    assert path.path == {
        "router/admission.py", "router/api.py", "router/respond.py", "router/choices.py",
        "router/pipeline.py", "router/offload.py", "router/fallback.py", "router/streaming.py", ENGINE,
    }


@pytest.mark.asyncio(loop_scope="module")
async def test_each_module_of_the_path_is_visited_at_most_twice(path: RequestTrace) -> None:
    visits = path.visits()
    assert {m: sorted(visits.get(m, ())) for m in path.path if len(visits.get(m, ())) > 2} == {}, path.table()


@pytest.mark.asyncio(loop_scope="module")
async def test_no_module_of_the_path_is_called_back_from_below(path: RequestTrace) -> None:
    assert path.called_back() == []


@pytest.mark.asyncio(loop_scope="module")
async def test_the_router_asks_the_engine_once_before_it_generates(path: RequestTrace) -> None:
    asked = [f for caller, m, f in path.entries if m == ENGINE and not caller.startswith("edge/")]
    assert asked[0] == "LlamaEngine.prepare"
    assert asked.count("LlamaEngine.prepare") == 1
    # Then the stream, through what prepare returned: the prompt is not tokenized again.
    assert set(asked[1:]) == {"Prepared.stream", "LlamaEngine.stream"}

