"""What the cloud pool adds over calling a member directly: latency per request and TTFT
(docs/cloud.md).

Two members on loopback: ``echo``, a minimal OpenAI SSE server answering at once (the pool's own
overhead and nothing else), and ``vllm``, the node's default local member. "Direct" is the same
streaming request read with httpx + httpx-sse; direct and pooled requests alternate.

    python -m bench.pool [--requests 300] [--vllm-requests 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from cloud import CloudPool, LocalMember, MemberSettings, PoolSettings
from bench.harness import md_table, percentile, write_json
from loadtest.servers import NodeProcess, free_port
from models.openai.client import request_body
from models import GenerationRequest, SamplingParams

ECHO_CHUNKS = 8


def echo_app() -> Any:
    """A raw ASGI app: the least work an OpenAI-compatible member can do."""

    def chunk(text: str | None, finish: str | None = None) -> bytes:
        delta = {} if text is None else {"content": text}
        body = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "echo",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    counts = {"prompt_tokens": 5, "completion_tokens": ECHO_CHUNKS, "total_tokens": 5 + ECHO_CHUNKS}
    usage = b"data: " + json.dumps({"id": "x", "choices": [], "usage": counts}).encode() + b"\n\n"
    text = "".join(f"tok{i} " for i in range(ECHO_CHUNKS))
    tokens = b"".join(chunk(f"tok{i} ") for i in range(ECHO_CHUNKS))
    stream = chunk("") + tokens + chunk(None, "stop") + usage + b"data: [DONE]\n\n"
    whole = json.dumps({
        "id": "x", "object": "chat.completion", "created": 0, "model": "echo",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": counts,
    }).encode()
    models = json.dumps({"object": "list", "data": [{"id": "echo", "object": "model"}]}).encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path, status, kind, answer = scope["path"], 200, b"application/json", b""
        if path == "/v1/chat/completions" and json.loads(body or b"{}").get("stream"):
            kind, answer = b"text/event-stream", stream
        elif path == "/v1/chat/completions":
            answer = whole
        elif path == "/v1/models":
            answer = models
        elif path != "/health":
            status = 404
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", kind)]})
        await send({"type": "http.response.body", "body": answer})

    return app


async def direct(client: httpx.AsyncClient, request: GenerationRequest, model: str) -> tuple[float, float]:
    """(total ms, ttft ms) of one streaming request read straight off the member."""
    path, body = request_body(request, model)
    started = time.perf_counter()
    ttft = None
    async with aconnect_sse(client, "POST", path, json=body) as source:
        async for event in source.aiter_sse():
            if event.data == "[DONE]":
                break
            data = json.loads(event.data)
            if ttft is None and data["choices"] and data["choices"][0]["delta"].get("content"):
                ttft = time.perf_counter()
    done = time.perf_counter()
    return (done - started) * 1000, ((ttft or done) - started) * 1000


async def pooled(pool: CloudPool, request: GenerationRequest) -> tuple[float, float]:
    started = time.perf_counter()
    ttft = None
    async for chunk in pool.stream(request):
        if ttft is None and chunk.text:
            ttft = time.perf_counter()
    done = time.perf_counter()
    return (done - started) * 1000, ((ttft or done) - started) * 1000


async def measure(member: MemberSettings, request: GenerationRequest, n: int, warmup: int) -> dict[str, Any]:
    settings = PoolSettings(members=[member])
    client = httpx.AsyncClient(base_url=member.base_url, timeout=300)
    async with CloudPool(settings) as pool, client:
        for _ in range(warmup):
            await direct(client, request, member.model)
            await pooled(pool, request)
        samples = []
        for i in range(n):
            if i % 2 == 0:  # alternate the order so neither side always runs on a warmer cache
                (dt, df), (pt, pf) = await direct(client, request, member.model), await pooled(pool, request)
            else:
                (pt, pf), (dt, df) = await pooled(pool, request), await direct(client, request, member.model)
            samples.append((dt, df, pt, pf))
    d_total, d_ttft, p_total, p_ttft = (list(column) for column in zip(*samples, strict=True))
    diffs = [p - d for p, d in zip(p_total, d_total, strict=True)]
    return {
        "member": member.name,
        "requests": n,
        "direct_p50_ms": statistics.median(d_total),
        "pool_p50_ms": statistics.median(p_total),
        "added_p50_ms": statistics.median(p_total) - statistics.median(d_total),
        "added_paired_p50_ms": statistics.median(diffs),
        "pool_p99_ms": percentile(p_total, 99),
        "direct_ttft_p50_ms": statistics.median(d_ttft),
        "pool_ttft_p50_ms": statistics.median(p_ttft),
    }


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "bench.pool", "--serve-echo", str(port)]
    with NodeProcess(argv, base, ready_path="/health", timeout=60, what="the echo member").running():
        echo_member = MemberSettings(name="echo", base_url=base + "/v1", model="echo")
        req = GenerationRequest(SamplingParams(max_tokens=ECHO_CHUNKS, temperature=0.0),
                                messages=({"role": "user", "content": "hi"},))
        rows.append(await measure(echo_member, req, args.requests, warmup=20))
    if args.vllm_requests:
        vllm_member = LocalMember(name="vllm")
        try:
            await vllm_member.start()
            req = GenerationRequest(SamplingParams(max_tokens=4, temperature=0.0),
                                    messages=({"role": "user", "content": "What is the capital of France?"},))
            rows.append(await measure(vllm_member.settings, req, args.vllm_requests, warmup=2))
        finally:
            await vllm_member.aclose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300, help="requests per side against the echo member")
    parser.add_argument("--vllm-requests", type=int, default=20,
                        help="requests per side against the vLLM member")
    parser.add_argument("--json", type=Path, default=None, help="also write the JSON here")
    parser.add_argument("--serve-echo", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_echo is not None:
        import uvicorn

        uvicorn.run(echo_app(), host="127.0.0.1", port=args.serve_echo, log_level="warning")
        return
    rows = asyncio.run(main_async(args))
    print(md_table(list(rows[0]), [list(r.values()) for r in rows]))
    target = rows[0]["added_paired_p50_ms"] <= 2.0
    result = {"rows": rows, "target_added_p50_ms": 2.0, "target_met": target}
    print(json.dumps(result, indent=2))
    if args.json is not None:
        write_json(args.json, result)


if __name__ == "__main__":
    main()
