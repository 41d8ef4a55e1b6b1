"""Ratings of served answers, and what they change: each tenant's threshold and the vetoed pairs.

Every answer the node returns is noted with the cache's decision (in memory, written with the
cache's next write: no fsync of its own on the request path). A rating (``POST /v1/feedback``)
is stored on that decision. A semantic hit rated wrong vetoes its entry for that query and the
query's near paraphrases (cosine >= ``feedback_veto_similarity``); an exact hit rated wrong
deletes its entry (it is the stored answer to that very question). Ratings of semantic hits move
the tenant's threshold (:mod:`edge.cache.budget`); each move is logged in ``budget_log``, which keeps
each tenant's newest ``budget_log_rows``. Rating an answer again as it is already rated runs no
rule and logs nothing (another note or rater is stored; the very same rating writes nothing).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..config import CacheSettings
from . import budget
from .index import DIM
from .keys import CacheKey, semantic_parts
from .served import Served
from .store import CacheStore

if TYPE_CHECKING:
    from .results import CacheHit

log = logging.getLogger(__name__)

Rating = Literal["right", "wrong"]
_HISTORY = 50  # threshold moves shown per tenant


_RECORD_COLS = "response_id, tenant, route, entry_id, query, similarity, probability, threshold, created, rating, note, rated, rated_by"


def _record(row: tuple[Any, ...]) -> dict[str, Any]:
    rid, tenant, route, entry_id, query, sim, prob, thr, created, rating, note, rated, by = row
    return {
        "id": rid, "object": "feedback", "tenant": tenant, "rating": rating, "note": note, "rated_at": rated,
        "rated_by": by, "route": route, "entry_id": entry_id, "query": query, "similarity": sim,
        "verifier": prob, "threshold": thr, "served_at": created,
    }


class Feedback:
    """The ratings of one cache file: the served log, each tenant's rule, the vetoes."""

    def __init__(
        self, db: CacheStore, settings: CacheSettings, base: float, prior: budget.Prior | None = None
    ) -> None:
        self.db, self.settings, self.base, self.prior = db, settings, base, prior
        self._pending: list[Served] = []
        self._lock = threading.Lock()
        self.rules: dict[str, budget.Rule] = {}  # tenants with rated semantic hits
        # (tenant, entry id) -> the query embeddings it was rated wrong for, one per row
        self.vetoes: dict[tuple[str, int], np.ndarray] = {}
        self._load()

    # -- the request path ------------------------------------------------------------------

    def threshold(self, tenant: str) -> float:
        rule = self.rules.get(tenant)
        return self.base if rule is None else rule.threshold

    def vetoed(self, tenant: str, entry_id: int, vec: np.ndarray) -> bool:
        vecs = self.vetoes.get((tenant, entry_id))
        return vecs is not None and float(np.max(vecs @ vec)) >= self.settings.feedback_veto_similarity

    def note_answer(
        self, response_id: str, tenant: str, route: str, now: float, hit: CacheHit | None = None,
        key: CacheKey | None = None, embedding: np.ndarray | None = None,
    ) -> None:
        """An answer returned, with the cache's decision (the query and its embedding on a semantic hit)."""
        semantic = hit is not None and hit.kind == "semantic"
        self.note(Served(
            response_id, tenant, route, now,
            entry_id=hit.entry_id if hit is not None else None,
            query=semantic_parts(key).text if semantic and key is not None else None,
            similarity=hit.similarity if hit is not None else None,
            probability=hit.probability if hit is not None else None,
            threshold=self.threshold(tenant) if semantic else None,
            embedding=embedding if semantic else None,
        ))

    def note(self, served: Served) -> None:
        with self._lock:
            self._pending.append(served)

    def take(self) -> list[Served]:
        with self._lock:
            rows, self._pending = self._pending, []
        return rows

    def restore(self, rows: list[Served]) -> None:
        with self._lock:
            self._pending[:0] = rows

    # -- the writer thread -----------------------------------------------------------------

    def rate(
        self, response_id: str, tenant: str | None, rating: Rating, note: str | None, by: str, now: float
    ) -> dict[str, Any] | None:
        """Store a rating on every choice of ``response_id`` (of ``tenant``; None: any); its record, or None."""
        where, args = ("response_id = ?", [response_id])
        if tenant is not None:
            where, args = where + " AND tenant = ?", args + [tenant]
        with self.db.transaction("feedback"):
            c = self.db.write
            rows = c.execute(
                f"SELECT id, route, tenant, entry_id, rating, note, rated_by FROM served"
                f" WHERE {where} ORDER BY id", args,
            ).fetchall()
            if not rows:
                return None
            tenants: set[str] = set()
            if all(r[4] == rating for r in rows):
                # The same rating again (a repeated click, a client's retry, a loop) decides nothing
                # new: the rule, the vetoes, the budget log and the log stay as they are. Another
                # note or rater replaces the record's; the very same rating writes nothing at all.
                if any((r[5], r[6]) != (note, by) for r in rows):
                    c.execute(f"UPDATE served SET note = ?, rated = ?, rated_by = ? WHERE {where}",
                              [note, now, by, *args])
            else:
                c.execute(f"UPDATE served SET rating = ?, note = ?, rated = ?, rated_by = ? WHERE {where}",
                          [rating, note, now, by, *args])
                if rating == "wrong":
                    exact = [r[3] for r in rows if r[1] == "cache-exact" and r[3] is not None]
                    if exact:
                        self.db.delete_ids(exact)
                tenants = {r[2] for r in rows if r[1] == "cache-semantic"}
                for t in tenants:
                    self._move(t, now)
            record = c.execute(f"SELECT {_RECORD_COLS} FROM served WHERE {where} ORDER BY id LIMIT 1", args).fetchone()
        for t in tenants:
            self._load_vetoes(t)
        return _record(record)

    def _move(self, tenant: str, now: float) -> None:
        """Recompute the tenant's rule from all its ratings; log it when the threshold moves."""
        s = self.settings
        rule = budget.choose(self._ratings(tenant), self.base, s.max_wrong_rate, s.budget_confidence, s.budget_bound,
                             self.prior)
        before = self.threshold(tenant)
        self.rules[tenant] = rule
        if rule.threshold != before:
            reason = "stricter: wrong ratings" if rule.threshold > before else "looser: right ratings"
            self.db.write.execute(
                "INSERT INTO budget_log (tenant, at, threshold_from, threshold_to, rated, wrong, estimate, bound, reason)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                (tenant, now, before, rule.threshold, rule.rated, rule.wrong, rule.estimate, rule.bound, reason),
            )
            # Only the tenant's newest moves stay (with no more rows than that, the subquery is NULL:
            # nothing is deleted).
            self.db.write.execute(
                "DELETE FROM budget_log WHERE tenant = ? AND id <= "
                "(SELECT id FROM budget_log WHERE tenant = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (tenant, tenant, s.budget_log_rows),
            )
            log.info(
                "semantic cache: tenant %s threshold %.4f -> %.4f (%s; %d rated at it, %d wrong, bound %s, budget %.3f)",
                tenant, before, rule.threshold, reason, rule.rated, rule.wrong,
                "n/a" if rule.bound is None else f"{rule.bound:.3f}", s.max_wrong_rate,
            )

    def _ratings(self, tenant: str) -> list[budget.Rated]:
        rows = self.db.write.execute(
            "SELECT probability, rating FROM served WHERE tenant = ? AND route = 'cache-semantic'"
            " AND rating IS NOT NULL AND probability IS NOT NULL",
            (tenant,),
        ).fetchall()
        return [budget.Rated(float(p), r == "wrong") for p, r in rows]

    def _load(self) -> None:
        s = self.settings
        tenants = [r[0] for r in self.db.write.execute(
            "SELECT DISTINCT tenant FROM served WHERE route = 'cache-semantic' AND rating IS NOT NULL")]
        for t in tenants:
            self.rules[t] = budget.choose(self._ratings(t), self.base, s.max_wrong_rate, s.budget_confidence, s.budget_bound,
                                         self.prior)
            self._load_vetoes(t)

    def _load_vetoes(self, tenant: str) -> None:
        rows = self.db.write.execute(
            "SELECT entry_id, embedding FROM served WHERE tenant = ? AND route = 'cache-semantic' AND rating = 'wrong'"
            " AND entry_id IS NOT NULL AND embedding IS NOT NULL",
            (tenant,),
        ).fetchall()
        found: dict[int, list[np.ndarray]] = {}
        for entry_id, blob in rows:
            found.setdefault(int(entry_id), []).append(np.frombuffer(blob, dtype=np.float32).reshape(DIM))
        for key in [k for k in self.vetoes if k[0] == tenant]:
            if key[1] not in found:
                del self.vetoes[key]
        for entry_id, vecs in found.items():
            self.vetoes[(tenant, entry_id)] = np.stack(vecs)

    # -- reads (dashboard, metrics) -------------------------------------------------------

    def status(self, tenant: str | None = None) -> dict[str, dict[str, Any]]:
        """Per tenant with ratings: the rule, its estimate and bound, the rating counts, the moves."""
        out: dict[str, dict[str, Any]] = {}
        with self.db.reading("budget status") as conn:
            counts = conn.execute(
                "SELECT tenant, count(*), sum(rating = 'wrong') FROM served WHERE route = 'cache-semantic'"
                " AND rating IS NOT NULL GROUP BY tenant"
            ).fetchall()
            for t, rated, wrong in counts:
                if tenant is not None and t != tenant:
                    continue
                rule = self.rules.get(t)
                history = conn.execute(
                    "SELECT at, threshold_from, threshold_to, rated, wrong, estimate, bound, reason FROM budget_log"
                    " WHERE tenant = ? ORDER BY id DESC LIMIT ?", (t, _HISTORY),
                ).fetchall()
                out[t] = {
                    "base_threshold": self.base, "threshold": self.threshold(t),
                    "rated": int(rated), "wrong": int(wrong or 0),
                    "rated_at_threshold": rule.rated if rule else 0, "wrong_at_threshold": rule.wrong if rule else 0,
                    "estimate": rule.estimate if rule else None, "bound": rule.bound if rule else None,
                    "max_wrong_rate": self.settings.max_wrong_rate,
                    "history": [dict(zip(("at", "threshold_from", "threshold_to", "rated", "wrong", "estimate", "bound",
                                          "reason"), h, strict=True)) for h in history],
                }
        return out

    def review(self, tenant: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Recent semantic hits, newest first, with the entry they served and any rating."""
        where, args = ("s.route = 'cache-semantic'", [])
        if tenant is not None:
            where, args = where + " AND s.tenant = ?", [tenant]
        with self.db.reading("review queue") as conn:
            rows = conn.execute(
                f"SELECT s.response_id, s.tenant, s.query, e.prompt_text, e.answer, s.similarity, s.probability,"
                f" s.threshold, s.created, s.rating, s.note FROM served s LEFT JOIN entries e ON e.id = s.entry_id"
                f" WHERE {where} ORDER BY s.id DESC LIMIT ?", [*args, limit],
            ).fetchall()
        names = ("id", "tenant", "query", "stored_question", "answer", "similarity", "verifier", "threshold",
                 "served_at", "rating", "note")
        return [dict(zip(names, r, strict=True)) for r in rows]
