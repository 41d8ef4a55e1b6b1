"""Real servers on loopback for the cloud tests: vLLM members (the node's local member), llama.cpp's
server, and two raw TCP servers that misbehave on purpose (one never answers, one plays a scripted
stream)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from cloud import MemberSettings
from cloud.local import LocalMember, ServerProcess, free_port
from cloud.member.process import LIFELINE
from models import EDGE_DEFAULT, default_models_dir, resolve

LLAMA_ALIAS = "smollm2-llamacpp"


# The tests' members run float32 on every CPU, as `local_dtype = "auto"` runs them on a CPU without
# bf16 instructions: the same greedy texts on every machine, and no emulated bfloat16 (4-5x slower
# first tokens on an AVX2-only VM).
TEST_DTYPE = "float32"
# A tie between the two likeliest tokens: their log-probabilities within this. float32 logits
# summed in another order (tensor-parallel ranks, another sampler path) move by ~1e-5.
TIE = 1e-3


@contextmanager
def vllm_member(log_dir: Path, *, tensor_parallel: int = 1, name: str = "vllm") -> Iterator[LocalMember]:
    """vLLM's server on the edge model's twin, as the node starts its local member (its own key, too);
    always killed at the end."""
    member = LocalMember(
        name=name, tensor_parallel=tensor_parallel, dtype=TEST_DTYPE, log_path=log_dir / f"{name}.log"
    )
    try:
        member.spawn()
        member.wait_ready()
        yield member
    finally:
        member.kill()


def agree_until_tie(
    ours: Sequence[tuple[str, Mapping[str, float]]], theirs: Sequence[tuple[str, Mapping[str, float]]]
) -> int:
    """The number of leading tokens two greedy answers share, asserting that where they part the
    likeliest two tokens were tied (within ``TIE``) in the run whose alternatives are given.

    Each answer is a list of (token, {alternative: logprob}); ``theirs`` may give no alternatives.
    Greedy decoding is exact up to a tie: at a tie either token is the greedy one, so a comparison
    of whole texts would test the tie-break, not the model.
    """
    for i, ((mine, alternatives), (other, _)) in enumerate(zip(ours, theirs, strict=False)):
        if mine == other:
            continue
        assert other in alternatives, f"token {i}: {other!r} is not among {dict(alternatives)} (chose {mine!r})"
        gap = alternatives[mine] - alternatives[other]
        assert gap <= TIE, f"token {i}: {mine!r} led {other!r} by {gap:.6f}, no tie"
        return i
    assert len(ours) == len(theirs), (ours, theirs)
    return len(ours)


def _with_lifeline(module: str) -> list[str]:
    """A server module run under the member's lifeline: even a test process killed outright leaves
    no server behind."""
    return [sys.executable, "-c", LIFELINE, str(os.getpid()), module]


def llama_server(log_dir: Path, name: str = "llama") -> ServerProcess:
    """llama.cpp's OpenAI-compatible server on the edge GGUF (not started yet)."""
    port = free_port()
    gguf = resolve(EDGE_DEFAULT, default_models_dir()).path
    argv = [
        *_with_lifeline("bench.llamaref"),  # llama_cpp.server, weights as the edge lays them out
        "--model",
        str(gguf),
        "--model_alias",
        LLAMA_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        "1",
        "--n_ctx",
        "2048",
        # By default a new request cuts the running stream short; a pool member must queue instead.
        "--interrupt_requests",
        "False",
    ]
    proc = ServerProcess(
        argv, f"http://127.0.0.1:{port}/v1/models", log_path=log_dir / f"{name}.log", startup_timeout_s=120
    )
    proc.port = port  # type: ignore[attr-defined]
    return proc


@contextmanager
def running(proc: ServerProcess) -> Iterator[ServerProcess]:
    try:
        proc.spawn()
        proc.wait_ready()
        yield proc
    finally:
        proc.kill()


def llama_settings(proc: ServerProcess, name: str = "llama") -> MemberSettings:
    return MemberSettings(name=name, base_url=f"http://127.0.0.1:{proc.port}/v1", model=LLAMA_ALIAS)  # type: ignore[attr-defined]


class _TCPServer:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._conns: list[socket.socket] = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def settings(self, name: str, model: str = "scripted") -> MemberSettings:
        return MemberSettings(name=name, base_url=f"http://127.0.0.1:{self.port}/v1", model=model)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self._conns.append(conn)
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._closed.set()
        self.sock.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.close()


class HangingServer(_TCPServer):
    """Accepts connections, reads nothing back, answers never."""

    def handle(self, conn: socket.socket) -> None:
        self._closed.wait()


def sse(*payloads: str) -> bytes:
    return b"".join(f"data: {p}\n\n".encode() for p in payloads)


def chat_chunk(text: str | None = None, finish: str | None = None) -> str:
    """One chat completion chunk as vLLM sends it (``text=None``: an empty delta)."""
    delta = {} if text is None else {"content": text}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return json.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [choice]})


class ScriptedServer(_TCPServer):
    """Answers each request with a scripted HTTP/1.1 response: ('send', bytes) | ('sleep', s) |
    ('wait', threading.Event) | ('cut',).

    The response is chunked so a 'cut' ends the connection mid-body, as a dying server does.
    """

    def __init__(
        self,
        script: Sequence[tuple[object, ...]],
        status: str = "200 OK",
        content_type: str = "text/event-stream",
    ) -> None:
        self.script = list(script)
        self.status = status
        self.content_type = content_type
        self.heads: list[bytes] = []  # each request's head (request line and headers), as received
        super().__init__()

    def _read_request(self, conn: socket.socket) -> tuple[str, bytes]:
        """Read one request; return its path and body (``("", b"")`` when the peer hung up)."""
        data = b""
        while b"\r\n\r\n" not in data:
            part = conn.recv(65536)
            if not part:
                return "", b""
            data += part
        head, _, body = data.partition(b"\r\n\r\n")
        self.heads.append(head)
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(body) < length:
            body += conn.recv(65536)
        return head.split(b" ")[1].decode() if b" " in head else "", body

    def handle(self, conn: socket.socket) -> None:
        try:
            self._read_request(conn)
        except OSError:
            return
        self.respond(conn, self.script)

    def respond(
        self, conn: socket.socket, script: Sequence[tuple[object, ...]], content_type: str | None = None
    ) -> None:
        """Play ``script`` as one chunked response (unknown steps are skipped)."""
        try:
            head = (
                f"HTTP/1.1 {self.status}\r\ncontent-type: {content_type or self.content_type}\r\n"
                "transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
            )
            conn.sendall(head.encode())
            for step in script:
                if step[0] == "send":
                    payload = step[1]
                    assert isinstance(payload, bytes)
                    conn.sendall(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
                elif step[0] == "sleep":
                    time.sleep(float(step[1]))  # type: ignore[arg-type]
                elif step[0] == "wait":  # ('wait', threading.Event): until the test sets it
                    step[1].wait(10)  # type: ignore[attr-defined]
                elif step[0] == "cut":
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    conn.close()
                    return
            conn.sendall(b"0\r\n\r\n")
            conn.close()
        except OSError:
            pass
