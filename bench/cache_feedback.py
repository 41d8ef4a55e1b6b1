"""The error budget learning from ratings: a judged stream replayed over HTTP against a real node.

    python -m bench.cache --feedback [--pairs ../shared/data/qqp_pairs.jsonl] [--judged DIR]

The judged replay's stored set (with ``--unseen``, ``bench.cache_holdout``'s unseen QQP sample) is
warmed into a fresh node's cache and the test part's queries asked in order, twice on fresh nodes:
without feedback, and with every semantic hit of the first half rated through ``POST
/v1/feedback`` by its judged verdict. A hit on an entry no pair judged is not rated and counts as
wrong, as in ``bench.cache``'s replay.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.cache import bulk_cache, judged_labels
from bench.harness import md_table
from edge import Embedder
from edge.cache import Judged
from edge.cache.keys import normalize_text
from loadtest.servers import node_process
from models import SamplingParams

TENANT = "bench"
PARAMS = SamplingParams(temperature=0.0, max_tokens=1)  # what each asked request sends
_ENTRY = re.compile(r"entry-(\d+)")


def _replay(
    base: str, queries: list[str], stored: list[str], verdict: Callable[[str, str], bool | None], feedback: bool
) -> list[dict[str, Any]]:
    """Ask every query in order; rate the first half's semantic hits when ``feedback``. One row per query."""
    half = len(queries) // 2
    rows: list[dict[str, Any]] = []
    with httpx.Client(base_url=base, timeout=120, headers={"x-edgeroute-tenant": TENANT}) as client:
        for n, q in enumerate(queries):
            body = {"model": "auto", "messages": [{"role": "user", "content": q}], "temperature": 0, "max_tokens": 1}
            resp = client.post("/v1/chat/completions", json=body)
            resp.raise_for_status()
            route = resp.headers["x-edgeroute-route"]
            answer = resp.json()["choices"][0]["message"]["content"] or ""
            right: bool | None = None
            m = _ENTRY.fullmatch(answer.strip()) if route.startswith("cache-") else None
            if m is not None:
                right = verdict(normalize_text(q), normalize_text(stored[int(m.group(1))]))
            rated = False
            if feedback and n < half and route == "cache-semantic" and right is not None:
                r = client.post("/v1/feedback", json={"id": resp.json()["id"], "rating": "right" if right else "wrong"})
                r.raise_for_status()
                rated = True
            rows.append({"query": q, "route": route, "verdict": right, "rated": rated})
    return rows


def _score(rows: list[dict[str, Any]], answerable: set[str]) -> dict[str, Any]:
    served = [r for r in rows if r["route"].startswith("cache-")]
    right = sum(1 for r in served if r["verdict"] is True)
    n_answerable = sum(1 for r in rows if normalize_text(r["query"]) in answerable)
    return {
        "queries": len(rows), "answerable": n_answerable, "served": len(served),
        "semantic": sum(1 for r in served if r["route"] == "cache-semantic"),
        "right": right, "unjudged": sum(1 for r in served if r["verdict"] is None),
        "precision": right / len(served) if served else None,
        "recall_of_answerable": right / n_answerable if n_answerable else 0.0,
        "rated": sum(1 for r in rows if r["rated"]),
    }


def run(
    test: list[Judged], stored: list[str], stored_vecs: np.ndarray, embedder: Embedder, work: Path,
    exact: list[str] | None = None,
) -> dict[str, Any]:
    """``exact``: the stream in order with the questions that are a stored question's own text
    among the judged ones (each an exact hit, answerable); None: the judged queries alone."""
    verdict, queries, answerable = judged_labels(test)
    if exact is not None:
        own = {s.lower() for s in stored}
        judged = set(queries)
        queries = [q for q in exact if q in judged or q.lower() in own]
        answerable |= {q for q in queries if q.lower() in own}
    half = len(queries) // 2
    out: dict[str, Any] = {"queries": len(queries), "entries": len(stored), "exact_included": exact is not None,
                           "load_before": os.getloadavg()}
    for name, feedback in (("without feedback", False), ("with feedback", True)):
        data = work / name.replace(" ", "-")
        data.mkdir(parents=True)
        # The stored set in the node's cache file, keyed as the asked requests are; entry i answers "entry-i".
        asyncio.run(bulk_cache(stored, embedder, data / "cache.db", TENANT, stored_vecs, params=PARAMS,
                               answer="entry-{}").aclose())
        print(f"{name}: a node, {len(queries)} queries ...", flush=True)
        with node_process("--data-dir", str(data), "--log-level", "warning", "--no-local-member", timeout=180) as node:
            started = time.perf_counter()
            rows = _replay(node.base, queries, stored, verdict, feedback)
            took = time.perf_counter() - started
            status = httpx.get(node.base + "/metrics", timeout=30).text
        threshold = next((float(line.split()[-1]) for line in status.splitlines()
                          if line.startswith(f'edgeroute_cache_verifier_threshold{{tenant="{TENANT}"}}')), None)
        out[name] = {
            "first_half": _score(rows[:half], answerable), "second_half": _score(rows[half:], answerable),
            "seconds": round(took, 1), "threshold_after": threshold,
        }
    out["load_after"] = os.getloadavg()
    return out


def report(result: dict[str, Any]) -> None:
    exact = " (exact hits included)" if result.get("exact_included") else ""
    print(f"feedback replay: {result['queries']} judged queries{exact} in order, {result['entries']} stored; "
          f"load average before {result['load_before'][0]:.2f}, after {result['load_after'][0]:.2f}")
    rows = []
    for name in ("without feedback", "with feedback"):
        r = result[name]
        threshold = "calibrated" if r["threshold_after"] is None else f"{r['threshold_after']:.4f}"
        for half in ("first_half", "second_half"):
            s = r[half]
            precision = "n/a" if s["precision"] is None else s["precision"]
            rows.append((name, half.split("_")[0], s["served"], s["rated"], precision, s["recall_of_answerable"],
                         threshold))
    print(md_table(("run", "half", "served", "rated", "precision", "recall of answerable", "threshold after"), rows))
