"""The cache as the request path uses it: policy, exact layer, semantic layer, guards, verifier, stats."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from models import Usage

from .._fair import FairRunner
from ..config import CacheSettings
from ..embedder import Embedder
from ..errors import CacheError
from . import guards
from .feedback import Feedback, Rating, prior_of
from .keys import (
    CacheKey, SemanticParts, embedding_text, exact_key, greedy_equivalent, request_record, semantic_parts,
    skip_probability,
)
from .results import CacheHit, Candidate, Lookup, NewEntry
from .store import CacheStore
from .verifier import Verifier, calibrated_threshold

log = logging.getLogger(__name__)

TIERS = ("edge", "cloud", "warmup")
SKIPPED = "temperature-skip"  # the refusal of a lookup skipped by skip_by_temperature
_FLUSH_EVERY_S = 5.0


class EdgeCache:
    """Exact and semantic answers from one SQLite file, per tenant."""

    def __init__(
        self,
        path: Path,
        settings: CacheSettings | None = None,
        embedder: Embedder | None = None,
        verifier: Verifier | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or CacheSettings()
        self._clock = clock
        self.db = CacheStore(Path(path))
        self.embedder = embedder
        self.verifier = verifier if verifier is not None else (
            Verifier.shipped(self.settings.verifier_threads) if self.settings.verifier else None
        )
        self.threshold = calibrated_threshold(self.verifier, self.settings)
        self._rng = random.Random()
        self.feedback = Feedback(self.db, self.settings, self.threshold, prior_of(self.verifier, self.settings))
        # Reads and writes each get one thread (and one connection): WAL lets them overlap.
        # Lookups (index search, guards, verifier) one at a time, in turn across tenants.
        self._reader = FairRunner("cache-read")
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-write")
        self.counters: Counter[str] = Counter()  # this process's, since start
        self._unflushed: Counter[str] = Counter()
        self._touches: dict[int, tuple[float, int]] = {}
        self._last_flush = time.monotonic()
        self._closed = False

    # -- policy ----------------------------------------------------------------------------

    def cacheable(self, key: CacheKey, opt: bool | None = None) -> bool:
        """Whether this request may be answered from, and stored into, the cache.

        ``opt`` is the request's own switch (``cache`` field or header): False always opts out,
        True opts a sampling request in; None follows ``deterministic_only``.
        """
        if not self.settings.enabled or opt is False or key.params.logprobs is not None:
            return False  # (a stored answer keeps no log probabilities to give)
        if opt is True:
            return True
        return key.params.deterministic or greedy_equivalent(key.params) or not self.settings.deterministic_only

    # -- the request path ------------------------------------------------------------------

    async def lookup(
        self,
        key: CacheKey,
        *,
        opt: bool | None = None,
        want_embedding: bool = False,
    ) -> Lookup:
        """Ask the exact layer (one indexed read), then the semantic one (the nearest neighbours of the
        prompt's embedding, judged by the similarity floor, the guards and the verifier).

        ``want_embedding``: the caller routes on the prompt's embedding, so return one whatever
        happens: computed when not cacheable, and on an exact hit the one stored with the entry
        (a point read, not a model run; None when the entry has none).
        """
        if not self.cacheable(key, opt):
            emb = await self._embed_for_routing(key) if want_embedding else None
            return Lookup(None, emb, None)
        skip = 0.0 if opt is True else skip_probability(key.params, self.settings.skip_by_temperature)
        if skip > 0.0 and self._rng.random() < skip:  # skipped: its answer is still stored
            self._count("skipped_temperature")
            emb = await self._embed_for_routing(key) if want_embedding else None
            return Lookup(None, emb, SKIPPED)
        # Inline on the caller's thread (cheaper than a hop to the reader); with want_embedding the
        # entry's stored embedding comes along, so routing scores the prompt without a model run.
        entry = self.db.get_exact(exact_key(key), self._min_created())
        if entry is not None:
            self._count("exact_hits")
            self._touch(entry.id)
            emb = self.db.stored_embedding(entry.id) if want_embedding else None
            return Lookup(CacheHit.of("exact", entry, 1.0), emb, None)
        emb, cands = await self.candidates(key)
        accepted = next((c for c in cands if c.refusal is None), None)
        if accepted is not None:
            self._count("semantic_hits")
            self._touch(accepted.entry.id)
            hit = CacheHit.of("semantic", accepted.entry, accepted.similarity, accepted.probability)
            return Lookup(hit, emb, None)
        refusal = cands[0].refusal if cands else None  # why the nearest near-duplicate was refused
        if refusal is not None:
            self._count(f"refused_{refusal}")
        self._count("misses")
        if emb is None and want_embedding:
            emb = await self._embed_for_routing(key)
        return Lookup(None, emb, refusal)

    async def store(
        self,
        key: CacheKey,
        text: str,
        finish_reason: str,
        usage: Usage,
        tier: str,
        embedding: np.ndarray | None = None,
        *,
        opt: bool | None = None,
        stop_word: str | None = None,
    ) -> int | None:
        """Store a finished answer; returns the entry id once committed (None when not cacheable)."""
        if not self.cacheable(key, opt) or finish_reason not in ("stop", "length"):
            return None
        if tier not in TIERS:
            raise CacheError(f"tier must be one of {', '.join(TIERS)}, not {tier!r}", param="tier")
        parts = semantic_parts(key)
        vec = None
        if self._semantic_ok(parts.text):
            vec = embedding if embedding is not None else await self._embedder().embed(parts.text, key.tenant)
        new = NewEntry(
            tenant=key.tenant, exact_key=exact_key(key), scope=parts.scope,
            model=key.model, prompt_text=parts.text, request=request_record(key), answer=text,
            finish_reason=finish_reason, prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens, tier=tier,
            embedding=vec, stop_word=stop_word,
        )
        self._count("stores")
        s = self.settings
        put = functools.partial(self.db.put, [new], now=self._clock(), max_entries=s.max_entries,
                                min_created=self._min_created())
        result = await self._with_pending(put)
        self._count("evictions", result["evicted"], pending=False)
        self._count("expirations", result["expired"], pending=False)
        return int(result["ids"][0])

    # -- operations ------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """The file's totals (all processes, persisted counters) and this process's counters."""
        persisted = self.db.stats()
        live = dict(self.counters)
        lookups = live.get("exact_hits", 0) + live.get("semantic_hits", 0) + live.get("misses", 0)
        hits = live.get("exact_hits", 0) + live.get("semantic_hits", 0)
        return {
            **persisted,
            "size_bytes": persisted["file_bytes"],
            "evictions": int(persisted["counters"].get("evictions", 0)),
            "process": live,
            "hit_rate": hits / lookups if lookups else 0.0,
            "refusals": {r: live.get(f"refused_{r}", 0) for r in (*guards.REASONS, "verifier")},
            "threshold": self.threshold,
            "similarity_floor": self.settings.similarity_floor,
        }

    async def entries_per_tenant(self) -> dict[str, int]:
        return await asyncio.to_thread(self.db.entries_per_tenant)

    async def search(self, text: str, tenant: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Entries whose question or answer contains ``text`` (the dashboard's cache search)."""
        return await asyncio.to_thread(self.db.search_text, text, tenant, limit)

    async def delete(self, entry_id: int) -> bool:
        return await self._on_writer(self.db.delete, entry_id)

    async def flush(self) -> None:
        """Write pending hit recency and counters now."""
        await self._with_pending(self.db.flush)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self.flush()
        finally:
            await asyncio.to_thread(self._reader.shutdown)
            await asyncio.to_thread(self._writer.shutdown, True)
            self.db.close()

    async def candidates(self, key: CacheKey) -> tuple[np.ndarray | None, list[Candidate]]:
        """The semantic layer's judgement of ``key``, best first, without serving anything (the lookup's,
        benchmarks'); (None, []) for a text it does not take."""
        parts = semantic_parts(key)
        if not self._semantic_ok(parts.text):
            return None, []
        vec = await self._embedder().embed(parts.text, key.tenant)
        cands = await self._reader.run(key.tenant, self._judge, key.tenant, parts, vec, self._min_created())
        return vec, cands

    # -- feedback --------------------------------------------------------------------------

    def note_served(
        self, response_id: str, tenant: str, route: str, hit: CacheHit | None = None,
        key: CacheKey | None = None, embedding: np.ndarray | None = None,
    ) -> None:
        """Remember an answer the node returned, with the decision, for a rating (written in a batch)."""
        self.feedback.note_answer(response_id, tenant, route, self._clock(), hit, key, embedding)
        self._flush_soon()

    async def rate(
        self, response_id: str, tenant: str | None, rating: Rating, note: str | None = None, by: str = "tenant"
    ) -> dict[str, Any] | None:
        """Rate an answer this node returned (of ``tenant``; None: any); the stored record, None if unknown."""
        await self.flush()
        return await self._on_writer(self.feedback.rate, response_id, tenant, rating, note, by, self._clock())

    async def review_queue(self, tenant: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Recent semantic hits, newest first, for an operator to rate."""
        await self.flush()
        return await asyncio.to_thread(self.feedback.review, tenant, limit)

    async def budget_status(self, tenant: str | None = None) -> dict[str, dict[str, Any]]:
        """Per tenant with ratings: the threshold, estimate, bound and threshold history."""
        return await asyncio.to_thread(self.feedback.status, tenant)

    @property
    def max_wrong_rate(self) -> float:
        """The budget the semantic hits are held to (``cache.max_wrong_rate``)."""
        return self.settings.max_wrong_rate

    def budget_gauges(self) -> dict[str, dict[str, float | None]]:
        """Per tenant with rated semantic hits, from memory (read at every /metrics scrape)."""
        return {
            t: {"threshold": r.threshold, "estimate": r.estimate, "bound": r.bound, "rated": float(r.rated)}
            for t, r in list(self.feedback.rules.items())
        }

    # -- internals -------------------------------------------------------------------------

    def _judge(self, tenant: str, parts: SemanticParts, vec: np.ndarray, min_created: float) -> list[Candidate]:
        s = self.settings
        found = self.db.search(
            tenant, parts.scope, vec, nprobe=s.nprobe, probe_k=s.probe_k, min_created=min_created
        )
        near = [(entry, sim) for entry, _, sim in found[: s.candidates] if sim >= s.similarity_floor]
        refusals = [guards.check(parts.text, e.prompt_text) if s.guards else None for e, _ in near]
        if self.feedback.vetoes:
            for i, (e, _) in enumerate(near):
                if refusals[i] is None and self.feedback.vetoed(tenant, e.id, vec):
                    refusals[i] = "feedback"  # rated wrong for this query or a near paraphrase
        probs: list[float | None] = [None] * len(near)
        ask = [i for i, r in enumerate(refusals) if r is None]
        if ask and self.verifier is not None and s.verifier:
            # One batched model run for every candidate the guards let through.
            scored = self.verifier.probabilities(
                parts.text, [near[i][0].prompt_text for i in ask], [near[i][1] for i in ask]
            )
            threshold = self.feedback.threshold(tenant)
            for i, p in zip(ask, scored, strict=True):
                probs[i] = float(p)
                refusals[i] = "verifier" if p < threshold else None
        return [Candidate(e, sim, r, p) for (e, sim), r, p in zip(near, refusals, probs, strict=True)]

    def _embedder(self) -> Embedder:
        if self.embedder is None:
            self.embedder = Embedder.load(self.settings)
        return self.embedder

    async def _embed_for_routing(self, key: CacheKey) -> np.ndarray | None:
        text = embedding_text(key.messages, key.prompt, self.settings.semantic_max_chars)
        return await self._embedder().embed(text, key.tenant) if text else None

    def _semantic_ok(self, text: str) -> bool:
        return self.settings.semantic and bool(text) and len(text) <= self.settings.semantic_max_chars

    def _min_created(self) -> float:
        ttl = self.settings.ttl_s
        return self._clock() - ttl if ttl else float("-inf")

    def _count(self, name: str, n: int = 1, pending: bool = True) -> None:
        if n <= 0:
            return
        self.counters[name] += n
        if pending:
            self._unflushed[name] += n

    def _touch(self, entry_id: int) -> None:
        ts, n = self._touches.get(entry_id, (0.0, 0))
        self._touches[entry_id] = (self._clock(), n + 1)
        self._flush_soon()

    def _flush_soon(self) -> None:
        if time.monotonic() - self._last_flush > _FLUSH_EVERY_S and not self._closed:
            # Hit recency is not an acknowledged write: batch it instead of an fsync per hit.
            self._last_flush = time.monotonic()
            task = asyncio.get_running_loop().create_task(self.flush())
            task.add_done_callback(_log_failure)

    async def _on_writer(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on the writer thread, the only one that writes the file."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer, functools.partial(fn, *args, **kwargs))

    async def _with_pending(self, write: Callable[..., Any]) -> Any:
        """``write(touches=, counters=, served=)`` on the writer thread with what is pending (hit
        recency, counters, served answers); put back to go with a later write if it fails."""
        touches, self._touches = self._touches, {}
        counters, self._unflushed = self._unflushed, Counter()
        self._last_flush = time.monotonic()
        served = self.feedback.take()
        try:
            return await self._on_writer(write, touches=touches, counters=counters, served=served)
        except BaseException:
            for i, (ts, n) in touches.items():
                old_ts, old_n = self._touches.get(i, (0.0, 0))
                self._touches[i] = (max(ts, old_ts), n + old_n)
            self._unflushed.update(counters)
            self.feedback.restore(served)
            raise


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("flushing cache counters failed: %s", task.exception())
