"""What ``response_format`` costs on the edge: decode speed of JSON answers against plain ones,
alone and beside another stream, with the grammar checked on the picked token (shipped) and with
the whole vocabulary masked every step (llama.cpp's plain grammar sampler in the chain). One run.

    python -m bench.structured [--rounds 5] [--max-tokens 96] [--json out.json]

Prints a table and writes JSON. Rounds alternate the cases so drift hits all alike; figures are
medians of ms per generated token over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import edge._scheduler as scheduler
from bench.harness import write_json
from edge import EdgeSettings, LlamaEngine, _grammar
from models import EDGE_DEFAULT, GenerationRequest, SamplingParams, collect, default_models_dir, resolve

SCHEMA = json.dumps({"type": "object", "properties": {"story": {"type": "string"}}, "required": ["story"]}, separators=(",", ":"))
ASK = ({"role": "user", "content": "Write a long story about a dragon, as JSON."},)


class _MaskEveryStep(_grammar.Constrained):
    """The baseline: the grammar masks all tokens before every pick (no check of the pick first)."""

    def sample(self, logits: Any, candidates: _grammar.Candidates) -> int:
        import llama_cpp

        llama_cpp.llama_sampler_apply(self.grammar, candidates.fill(logits).ref)
        if self.chain is None:
            token = candidates.best()
        else:
            llama_cpp.llama_sampler_apply(self.chain, candidates.ref)
            token = candidates.selected()
        llama_cpp.llama_sampler_accept(self.grammar, token)
        if self.chain is not None:
            llama_cpp.llama_sampler_accept(self.chain, token)
        return token


def _request(schema: str | None, temperature: float, max_tokens: int, seed: int) -> GenerationRequest:
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=seed, json_schema=schema)
    return GenerationRequest(params=params, messages=ASK)


async def _ms_per_token(engine: LlamaEngine, *requests: GenerationRequest) -> list[float]:
    async def one(request: GenerationRequest) -> float:
        start = time.perf_counter()
        done = await collect(engine.stream(request))
        return (time.perf_counter() - start) * 1000 / max(1, done.usage.completion_tokens)

    return list(await asyncio.gather(*(one(r) for r in requests)))


async def run(rounds: int, max_tokens: int) -> dict[str, Any]:
    engine = LlamaEngine(resolve(EDGE_DEFAULT, default_models_dir()), EdgeSettings(n_ctx=2048, slots=4))
    shipped = _grammar.Constrained
    results: dict[str, list[float]] = {}

    def note(name: str, value: float) -> None:
        results.setdefault(name, []).append(value)

    try:
        await _ms_per_token(engine, _request(None, 0.0, 8, 0))  # warm-up
        for r in range(rounds):
            for mode, cls in (("check the pick", shipped), ("mask every step", _MaskEveryStep)):
                # The scheduler builds its samplers through this name: swap it for the baseline.
                scheduler.Constrained = cls  # type: ignore[misc]
                for temperature in (0.0, 1.0):
                    tag = f"t={temperature:g}"
                    note(f"plain alone, {tag}", (await _ms_per_token(engine, _request(None, temperature, max_tokens, r)))[0])
                    note(f"JSON alone, {tag}, {mode}", (await _ms_per_token(engine, _request(SCHEMA, temperature, max_tokens, r)))[0])
                    plain, _ = await _ms_per_token(
                        engine, _request(None, temperature, max_tokens, r), _request(SCHEMA, temperature, max_tokens, r)
                    )
                    note(f"plain beside JSON, {tag}, {mode}", plain)
                    plain, _ = await _ms_per_token(
                        engine, _request(None, temperature, max_tokens, r), _request(None, temperature, max_tokens, r + 1)
                    )
                    note(f"plain beside plain, {tag}", plain)
            scheduler.Constrained = shipped  # type: ignore[misc]
    finally:
        await engine.aclose()
    return {
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "rounds": rounds,
        "max_tokens": max_tokens,
        "ms_per_token_median": {k: round(statistics.median(v), 2) for k, v in results.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--json", type=Path, default=Path("artifacts/bench_structured.json"))
    args = parser.parse_args()
    report = asyncio.run(run(args.rounds, args.max_tokens))
    print("| case | ms per token (median) |")
    print("|---|---:|")
    for name, value in sorted(report["ms_per_token_median"].items()):
        print(f"| {name} | {value} |")
    write_json(args.json, report)


if __name__ == "__main__":
    main()
