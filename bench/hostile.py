"""Hostile JSON Schemas and tool definitions against a real edge-only node, on every API that takes one.

    python -m bench.hostile [--cases N] [--seed S] [--json PATH]

What schemathesis does not generate (NUL and control characters, huge counts, deep and
self-referencing ``$ref``, giant enums, hostile ``pattern``s), on each of the APIS, while
``/healthz`` is polled every 20 ms and the node's RSS sampled; docs/reliability.md has the pass
criteria. The fixed cases run in ``make test`` (tests/router/test_hostile_schemas.py); ``--cases``
adds seeded random combinations for the long form.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from loadtest.loadprobe import read_rss_mb
from loadtest.servers import NodeProcess, node_process

# Every API that takes a schema: how a schema goes in, and the field its error must name.
APIS = ("chat", "chat_stream", "completions", "tools_required", "tools_auto", "responses",
        "responses_tools", "ollama_chat", "ollama_generate", "ollama_tools", "llamacpp")
FIELD = {
    "chat": "response_format", "chat_stream": "response_format", "completions": "response_format",
    "tools_required": "tools", "tools_auto": "tools", "responses": "text.format", "responses_tools": "tools",
    "ollama_chat": "format", "ollama_generate": "format", "ollama_tools": "tools", "llamacpp": "json_schema",
}
MAX_TOKENS = 8
HEALTHZ_LIMIT_MS = 100.0
RSS_LIMIT_MB = 200.0

# Strings no grammar engine likes: NUL, control characters, escapes that are themselves
# grammar syntax, lone surrogates, line separators, quotes and brackets.
HOSTILE_STRINGS = (
    "\u0000", "a\u0000b", "\u0001\u001f\u007f", "\\", "\\u0000", "\\x00", '"', "\n\r\t", "\ud800",
    "\udfff\ud800", "\u2028\u2029", "\U0001d518", "]", "[^", "{", "}", "(", "|", "::=", "root", "-", "",
)
HUGE_COUNTS = (1_000_000_000, 2**31, 2**63, 10**30, -1, 1.5, 1e308, "10", True, None, 8_193, 4_000)
HOSTILE_PATTERNS = (
    "^(a+)+$", "^(a|a)*$", "^(a{1000}){1000}$", "^" + "(" * 400 + "a" + ")" * 400 + "$", "^[", "^(", ")", "^a{99999}$",
    "^a{2,1}$", "^(a)\\1$", "^(?=a)a$", "^\\p{L}$", "^.*$", "^[^\\x00-\\x7f]$", "^[\\x00-\\x00]$", "^\\x00$",
    "^\\u0000$", "^a\u0000$", "^\ud800$", "abc", "^a{,5}$", "$^", "^$", "^\\$", "^[\\]]$", "^[]$", "^a**$",
    "^(?P<x>a)$", "^\\", "^[a-\\x00]$", "^(|)$", "^((a|b|c|d){8}){8}$", "^\\d{4}-\\d{2}-\\d{2}$",
)


def fixed_schemas() -> list[tuple[str, Any]]:
    """The fixed campaign: (label, schema) pairs."""
    cases: list[tuple[str, Any]] = []
    for i, s in enumerate(HOSTILE_STRINGS):
        cases += [
            (f"enum[{i}]", {"enum": [s]}),
            (f"const[{i}]", {"type": "object", "properties": {"k": {"const": s}}, "required": ["k"]}),
            (f"property[{i}]", {"type": "object", "properties": {s: {"type": "integer"}}, "required": [s]}),
            (f"format[{i}]", {"type": "string", "format": s}),
            (f"ref-name[{i}]", {"$defs": {s: {"type": "integer"}}, "$ref": "#/$defs/" + s}),
            (f"meta[{i}]", {"type": "integer", "title": s, "description": s, "default": s, "examples": [s]}),
            (f"items-const[{i}]", {"type": "array", "items": {"const": s}, "maxItems": 2}),
            (f"oneOf-const[{i}]", {"oneOf": [{"const": s}, {"const": [s, {s: s}]}]}),
        ]
    for key in ("minLength", "maxLength"):
        cases += [(f"string {key}={v!r}", {"type": "string", key: v}) for v in HUGE_COUNTS]
    for key in ("minItems", "maxItems"):
        cases += [(f"array {key}={v!r}", {"type": "array", "items": {"type": "integer"}, key: v}) for v in HUGE_COUNTS]
    cases += [
        ("minProperties", {"type": "object", "minProperties": 10**9}),
        ("minimum", {"type": "integer", "minimum": -(10**300), "maximum": 10**300}),
        ("ref to root", {"$ref": "#"}),
        ("ref self", {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
        ("ref mutual", {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
        ("ref chain 300", {"$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(300)} | {"d300": {"type": "integer"}},
                           "$ref": "#/$defs/d0"}),
        ("ref required self", {"type": "object", "properties": {"me": {"$ref": "#"}}, "required": ["me"]}),
        ("ref missing", {"$ref": "#/$defs/nowhere"}),
        ("ref remote", {"$ref": "https://example.invalid/schema.json"}),
        ("ref odd", {"$ref": "#/$defs/~1/%00"}),
        ("ref not a string", {"$ref": 5}),
        ("deep properties 60", _deep(60)),
        ("deep items 60", _deep(60, items=True)),
        ("anyOf 600", {"anyOf": [{"const": i} for i in range(600)]}),
        ("enum 3000", {"enum": list(range(3000))}),
        ("enum long strings", {"enum": ["x" * 1000 for _ in range(12)]}),
        ("enum nested", {"enum": [{"a": [1, {"b": None}]}, [[[]]], None, True, 1e308]}),
        ("enum empty", {"enum": []}),
        ("type list", {"type": ["string", "null", "object", "array", "number", "boolean", "integer"]}),
        ("type unknown", {"type": "quaternion"}),
        ("type number as type", {"type": 5}),
        ("not", {"not": {"type": "string"}}),
        ("allOf nested", {"allOf": [{"allOf": [{"properties": {"a": {"type": "integer"}}}]}]}),
        ("additional schema", {"type": "object", "additionalProperties": {"type": "string", "maxLength": 10**9}}),
        ("prefixItems", {"type": "array", "prefixItems": [{"const": "\u0000"}] * 50}),
        ("items list", {"type": "array", "items": [{"type": "integer"}] * 50}),
        ("properties not a dict", {"type": "object", "properties": ["a"]}),
        ("required not a list", {"type": "object", "properties": {"a": {}}, "required": "a"}),
        ("empty", {}),
    ]
    cases += [(f"pattern {p[:40]!r}", {"type": "string", "pattern": p}) for p in HOSTILE_PATTERNS]
    return cases


def _deep(levels: int, items: bool = False) -> dict[str, Any]:
    """An integer nested ``levels`` deep in required properties (or in array items)."""
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(levels):
        if items:
            schema = {"type": "array", "items": schema, "maxItems": 2}
        else:
            schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


def random_schemas(n: int, seed: int) -> list[tuple[str, Any]]:
    """Seeded random combinations of the fixed parts, nested a few levels."""
    rng = random.Random(seed)
    parts = [schema for _, schema in fixed_schemas()]

    def one(depth: int) -> Any:
        kind = rng.randrange(6 if depth < 3 else 3)
        if kind == 0:
            return rng.choice(parts)
        if kind == 1:
            return {"type": "string", rng.choice(("minLength", "maxLength", "pattern")):
                    rng.choice((*HUGE_COUNTS, *HOSTILE_PATTERNS))}
        if kind == 2:
            return {"enum": [rng.choice(HOSTILE_STRINGS) for _ in range(rng.randint(1, 6))]}
        if kind == 3:
            names = [rng.choice(HOSTILE_STRINGS) + str(i) for i in range(rng.randint(1, 4))]
            return {"type": "object", "properties": {k: one(depth + 1) for k in names}, "required": names[:1]}
        if kind == 4:
            return {"type": "array", "items": one(depth + 1), rng.choice(("minItems", "maxItems")): rng.choice(HUGE_COUNTS)}
        return {rng.choice(("anyOf", "oneOf", "allOf")): [one(depth + 1) for _ in range(rng.randint(1, 4))]}

    return [(f"random[{seed}:{i}]", one(0)) for i in range(n)]


def request_for(api: str, schema: Any) -> tuple[str, dict[str, Any]]:
    """The path and body that send ``schema`` through ``api``."""
    msgs = [{"role": "user", "content": "Answer in JSON."}]
    fn = {"name": "f", "description": "a function", "parameters": schema}
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
    chat = {"model": "edge", "max_tokens": MAX_TOKENS, "temperature": 0, "messages": msgs}
    ollama_opts = {"num_predict": MAX_TOKENS, "temperature": 0}
    return {
        "chat": ("/v1/chat/completions", {**chat, "response_format": fmt}),
        "chat_stream": ("/v1/chat/completions", {**chat, "stream": True, "response_format": fmt}),
        "completions": ("/v1/completions", {"model": "edge", "max_tokens": MAX_TOKENS, "temperature": 0,
                                            "prompt": "JSON:", "response_format": fmt}),
        "tools_required": ("/v1/chat/completions", {**chat, "tools": [{"type": "function", "function": fn}],
                                                    "tool_choice": "required"}),
        "tools_auto": ("/v1/chat/completions", {**chat, "tools": [{"type": "function", "function": fn}]}),
        "responses": ("/v1/responses", {"model": "edge", "input": "Answer in JSON.", "max_output_tokens": 16,
                                        "temperature": 0, "text": {"format": {"type": "json_schema", "name": "a", "schema": schema}}}),
        "responses_tools": ("/v1/responses", {"model": "edge", "input": "Call f.", "max_output_tokens": 16, "temperature": 0,
                                              "tools": [{"type": "function", **fn}], "tool_choice": "required"}),
        "ollama_chat": ("/api/chat", {"model": "edge", "stream": False, "messages": msgs, "format": schema, "options": ollama_opts}),
        "ollama_generate": ("/api/generate", {"model": "edge", "stream": False, "prompt": "JSON:", "format": schema,
                                              "options": ollama_opts}),
        "ollama_tools": ("/api/chat", {"model": "edge", "stream": False, "messages": msgs, "options": ollama_opts,
                                       "tools": [{"type": "function", "function": fn}]}),
        "llamacpp": ("/completion", {"prompt": "JSON:", "n_predict": MAX_TOKENS, "temperature": 0, "json_schema": schema}),
    }[api]


@dataclass
class Outcome:
    label: str
    api: str
    status: int
    ok: bool
    detail: str


@dataclass
class Watch:
    """The probes' findings."""

    healthz_max_ms: float = 0.0
    healthz_failures: int = 0
    rss_start_mb: float = 0.0
    rss_max_mb: float = 0.0
    samples: int = 0
    current: str = ""  # the case in flight
    worst_case: str = ""  # the case in flight at the worst /healthz
    stop: threading.Event = field(default_factory=threading.Event)


# 400s about the whole request that a hostile schema can rightly cause: the tools' schemas, which
# the model reads in its prompt, make the prompt too long; the body nests deeper than the node
# parses; a lone surrogate (valid JSON escape, no Unicode text) makes the body unreadable.
_WHOLE_REQUEST = ("context window is", "the JSON body is nested deeper", "the body is not valid JSON")


def judge(api: str, status: int, body: bytes) -> tuple[bool, str]:
    """A case's verdict: a 4xx naming the API's field (or the request as a whole, above), or a 200
    with an answer."""
    text = body.decode("utf-8", "replace")
    if 400 <= status < 500:
        if status == 401 or status == 429:
            return False, f"{status}: not the schema's verdict"
        name = FIELD[api]
        ok = name in text or any(reason in text for reason in _WHOLE_REQUEST)
        return ok, (text[:200] if ok else f"the error does not name {name}: {text[:200]}")
    if status != 200:
        return False, text[:200]
    if api == "chat_stream":
        return (text.rstrip().endswith("data: [DONE]") and '"error"' not in text), text[-200:]
    try:
        json.loads(text)
    except ValueError:
        return False, f"200 with a body that is not JSON: {text[:200]}"
    return True, ""


def _probe(base: str, pid: int, watch: Watch) -> None:
    with httpx.Client(base_url=base, timeout=10.0) as client:
        while not watch.stop.is_set():
            started = time.perf_counter()
            try:
                client.get("/healthz").raise_for_status()
            except httpx.HTTPError:
                watch.healthz_failures += 1
            took = (time.perf_counter() - started) * 1000
            if took > watch.healthz_max_ms:
                watch.healthz_max_ms, watch.worst_case = took, watch.current
            rss = read_rss_mb(pid)
            watch.rss_max_mb = max(watch.rss_max_mb, rss or 0.0)
            watch.healthz_failures += rss is None
            watch.samples += 1
            watch.stop.wait(0.02)


# The node under test, as its own process (a crash is seen, not suffered): cache off, no member.
NODE_ARGS = ("--no-local-member", "--log-level", "warning")
NODE_ENV = {"HF_HUB_OFFLINE": "1", "EDGEROUTE_CACHE__ENABLED": "false"}


@dataclass
class Report:
    outcomes: list[Outcome]
    watch: Watch
    alive: bool

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def rss_growth_mb(self) -> float:
        return self.watch.rss_max_mb - self.watch.rss_start_mb

    def summary(self) -> dict[str, Any]:
        return {
            "cases": len(self.outcomes), "failed": len(self.failures),
            "statuses": dict(Counter(str(o.status) for o in self.outcomes)),
            "healthz_max_ms": round(self.watch.healthz_max_ms, 1), "healthz_worst_during": self.watch.worst_case,
            "healthz_failures": self.watch.healthz_failures,
            "rss_start_mb": round(self.watch.rss_start_mb, 1), "rss_growth_mb": round(self.rss_growth_mb, 1),
            "alive": self.alive,
            "passed": not self.failures and self.alive and self.watch.healthz_failures == 0
            and self.watch.healthz_max_ms <= HEALTHZ_LIMIT_MS and self.rss_growth_mb <= RSS_LIMIT_MB,
        }


def run_campaign(node: NodeProcess, cases: list[tuple[str, Any, str]], concurrency: int = 1) -> Report:
    """Send every (label, schema, api) case to ``node``, ``concurrency`` at a time, while the probes
    watch; the outcomes come back in the cases' order."""
    base, proc = node.base, node.proc
    assert proc is not None
    watch = Watch()
    with httpx.Client(base_url=base, timeout=120.0, limits=httpx.Limits(max_connections=concurrency)) as client:
        # One plain answer first, so the start-up's lazy allocations are not counted as growth.
        path, body = request_for("chat", {"type": "integer"})
        client.post(path, json=body).raise_for_status()
        watch.rss_start_mb = watch.rss_max_mb = read_rss_mb(proc.pid) or 0.0
        probe = threading.Thread(target=_probe, args=(base, proc.pid, watch), daemon=True)
        probe.start()
        died = threading.Event()

        def send(case: tuple[str, Any, str]) -> Outcome | None:
            label, schema, api = case
            if died.is_set():
                return None
            path, body = request_for(api, schema)
            watch.current = f"{api} {label}"
            try:
                content = json.dumps(body).encode("utf-8", "surrogatepass")
                response = client.post(path, content=content, headers={"content-type": "application/json"})
                ok, detail = judge(api, response.status_code, response.content)
                outcome = Outcome(label, api, response.status_code, ok, detail)
            except httpx.HTTPError as exc:
                outcome = Outcome(label, api, 0, False, f"{type(exc).__name__}: {exc}")
            if proc.poll() is not None:
                died.set()
                return Outcome(label, api, 0, False, f"the node died ({proc.returncode}); {outcome.detail}")
            return outcome

        try:
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                outcomes = [o for o in pool.map(send, cases) if o is not None]
        finally:
            watch.stop.set()
            probe.join(15)
    return Report(outcomes, watch, proc.poll() is None)


def spread(schemas: list[tuple[str, Any]], apis: tuple[str, ...] = APIS, every_api: bool = False) -> list[tuple[str, Any, str]]:
    """Cases: each schema on one API in turn (or on every API)."""
    if every_api:
        return [(label, schema, api) for label, schema in schemas for api in apis]
    return [(label, schema, apis[i % len(apis)]) for i, (label, schema) in enumerate(schemas)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=300, help="seeded random schemas added to the fixed ones")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the summary and failures here")
    parser.add_argument("--one-api-each", action="store_true", help="each fixed schema on one API (make test's set)")
    parser.add_argument("--concurrency", type=int, default=1, help="cases in flight at once (healthz is measured under them)")
    args = parser.parse_args()
    schemas = fixed_schemas()
    cases = spread(schemas, every_api=not args.one_api_each) + spread(random_schemas(args.cases, args.seed))
    with (
        tempfile.TemporaryDirectory(prefix="edgeroute-hostile-") as tmp,
        node_process(*NODE_ARGS, "--data-dir", tmp, log_path=Path(tmp) / "node.log", env=NODE_ENV) as node,
    ):
        started = time.perf_counter()
        report = run_campaign(node, cases, args.concurrency)
        elapsed = time.perf_counter() - started
    summary = {**report.summary(), "seconds": round(elapsed, 1), "seed": args.seed}
    print(f"{'cases':>8} {'failed':>7} {'healthz max ms':>15} {'RSS growth MB':>14} {'alive':>6} {'passed':>7}")
    print(f"{summary['cases']:>8} {summary['failed']:>7} {summary['healthz_max_ms']:>15} {summary['rss_growth_mb']:>14} "
          f"{summary['alive']!s:>6} {summary['passed']!s:>7}")
    print("statuses:", summary["statuses"])
    for o in report.failures[:20]:
        print(f"FAILED {o.api} {o.label!r}: {o.status} {o.detail}")
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps({**summary, "failures": [o.__dict__ for o in report.failures]}, indent=1))
    raise SystemExit(0 if summary["passed"] else 1)


if __name__ == "__main__":
    main()
