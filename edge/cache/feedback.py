"""Ratings of served answers, and what they change: each tenant's threshold and the vetoed pairs.

Every answer the node returns is noted with the cache's decision (in memory, written with the
cache's next write: no fsync of its own on the request path). The rule that ratings move (the
error budget online, with the calibration replay as a prior) is docs/cache.md's "Feedback and the
error budget online"; each move is logged in ``budget_log``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..config import CacheSettings
from .calibration import Bound, wrong_rate_upper
from .index import DIM
from .keys import CacheKey, semantic_parts
from .migrations import records
from .results import CacheHit
from .store import CacheStore, ServedRow

if TYPE_CHECKING:
    from .verifier import Verifier

log = logging.getLogger(__name__)

Rating = Literal["right", "wrong"]
_HISTORY = 50  # threshold moves shown per tenant


# A rated answer as POST /v1/feedback returns it.
_RECORD = (
    "SELECT response_id AS id, 'feedback' AS object, tenant, rating, note, rated AS rated_at, rated_by, route,"
    " entry_id, query, similarity, probability AS verifier, threshold, created AS served_at FROM served"
)


@dataclass(frozen=True, slots=True)
class Rated:
    """One rated semantic hit."""

    probability: float
    wrong: bool


@dataclass(frozen=True, slots=True)
class Prior:
    """The calibration replay's word on the wrong rate at a threshold, worth ``weight`` ratings."""

    scores: np.ndarray  # the replay's verifier probability per query (negative: refused before it)
    wrong: np.ndarray  # True where the replay's pair was judged not servable
    weight: float
    margin: float  # calibration_margin: the share of the budget the replay itself had to meet

    def at(self, threshold: float) -> tuple[float, float]:
        """(pseudo ratings, pseudo wrong ones) at ``threshold``: Laplace-smoothed, scaled by 1 / margin."""
        served = self.scores >= threshold
        n, wrong = int(served.sum()), int((served & self.wrong).sum())
        rate = min(1.0, (wrong + 1) / (n + 2) / self.margin)
        return self.weight, self.weight * rate


def prior_of(verifier: Verifier | None, s: CacheSettings) -> Prior | None:
    """The prior the settings ask for, from the verifier's calibration replay (None: ratings alone)."""
    if verifier is None or verifier.replay is None or s.budget_prior_ratings <= 0:
        return None
    replay = verifier.replay
    return Prior(replay.scores, ~replay.servable, float(s.budget_prior_ratings), s.calibration_margin)


@dataclass(frozen=True, slots=True)
class Rule:
    """The serving rule the ratings allow, and the estimate it rests on."""

    threshold: float
    rated: int  # rated hits at or above the threshold
    wrong: int
    bound: float | None  # over the ratings and the prior; None: no rated hit at or above it

    @property
    def estimate(self) -> float | None:
        return self.wrong / self.rated if self.rated else None


def choose(
    ratings: Sequence[Rated], base: float, max_wrong_rate: float, confidence: float, bound: Bound,
    prior: Prior | None = None,
) -> Rule:
    """The lowest threshold >= ``base`` at which no rated hit is wrong or the upper confidence bound of
    the wrong rate (over the ratings and the prior) is within ``max_wrong_rate``.

    The candidates are ``base`` and, for each wrong-rated hit above it, the next float above its
    probability (the served set changes only there); the highest of them has no wrong hit left,
    so one always qualifies.
    """
    wrong_ps = sorted({r.probability for r in ratings if r.wrong and r.probability >= base})
    for t in [base, *(float(np.nextafter(p, np.inf)) for p in wrong_ps)]:
        kept = [r for r in ratings if r.probability >= t]
        if not kept:
            return Rule(t, 0, 0, None)
        wrong = sum(r.wrong for r in kept)
        n, k = (0.0, 0.0) if prior is None else prior.at(t)
        upper = float(wrong_rate_upper(np.array([wrong + k]), np.array([len(kept) + n]), confidence, bound)[0])
        if wrong == 0 or upper <= max_wrong_rate:
            return Rule(t, len(kept), wrong, upper)
    raise AssertionError("unreachable: the last candidate keeps no wrong hit")


class Feedback:
    """The ratings of one cache file: the served log, each tenant's rule, the vetoes."""

    def __init__(
        self, db: CacheStore, settings: CacheSettings, base: float, prior: Prior | None = None
    ) -> None:
        self.db, self.settings, self.base, self.prior = db, settings, base, prior
        self._pending: list[ServedRow] = []
        self._lock = threading.Lock()
        self.rules: dict[str, Rule] = {}  # tenants with rated semantic hits
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
        decision = (hit.entry_id, hit.similarity, hit.probability) if hit is not None else (None, None, None)
        row = (
            response_id, tenant, route, now, *decision,
            semantic_parts(key).text if semantic and key is not None else None,
            self.threshold(tenant) if semantic else None,
            np.asarray(embedding, dtype=np.float32).tobytes() if semantic and embedding is not None else None,
        )
        with self._lock:
            self._pending.append(row)

    def take(self) -> list[ServedRow]:
        with self._lock:
            rows, self._pending = self._pending, []
        return rows

    def restore(self, rows: list[ServedRow]) -> None:
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
                    self.db.delete_ids([r[3] for r in rows if r[1] == "cache-exact" and r[3] is not None])
                tenants = {r[2] for r in rows if r[1] == "cache-semantic"}
                for t in tenants:
                    self._move(t, now)
            record = records(c.execute(f"{_RECORD} WHERE {where} ORDER BY served.id LIMIT 1", args))[0]
        for t in tenants:
            self._load_vetoes(t)
        return record

    def _move(self, tenant: str, now: float) -> None:
        """Recompute the tenant's rule from all its ratings; log it when the threshold moves."""
        s = self.settings
        rule = self._rule(tenant)
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

    def _rule(self, tenant: str) -> Rule:
        rows = self.db.write.execute(
            "SELECT probability, rating FROM served WHERE tenant = ? AND route = 'cache-semantic'"
            " AND rating IS NOT NULL AND probability IS NOT NULL",
            (tenant,),
        ).fetchall()
        ratings = [Rated(float(p), r == "wrong") for p, r in rows]
        s = self.settings
        return choose(ratings, self.base, s.max_wrong_rate, s.budget_confidence, s.budget_bound, self.prior)

    def _load(self) -> None:
        tenants = [r[0] for r in self.db.write.execute(
            "SELECT DISTINCT tenant FROM served WHERE route = 'cache-semantic' AND rating IS NOT NULL")]
        for t in tenants:
            self.rules[t] = self._rule(t)
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
        # One new dict, swapped in: the reader thread never sees the tenant's vetoes half-loaded.
        others = {k: v for k, v in self.vetoes.items() if k[0] != tenant}
        self.vetoes = others | {(tenant, entry_id): np.stack(vecs) for entry_id, vecs in found.items()}

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
                rule = self.rules.get(t) or Rule(self.base, 0, 0, None)
                out[t] = {
                    "base_threshold": self.base, "threshold": rule.threshold,
                    "rated": int(rated), "wrong": int(wrong or 0),
                    "rated_at_threshold": rule.rated, "wrong_at_threshold": rule.wrong,
                    "estimate": rule.estimate, "bound": rule.bound,
                    "max_wrong_rate": self.settings.max_wrong_rate,
                    "history": records(conn.execute(
                        "SELECT at, threshold_from, threshold_to, rated, wrong, estimate, bound, reason FROM budget_log"
                        " WHERE tenant = ? ORDER BY id DESC LIMIT ?", (t, _HISTORY),
                    )),
                }
        return out

    def review(self, tenant: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Recent semantic hits, newest first, with the entry they served and any rating."""
        where, args = ("s.route = 'cache-semantic'", [])
        if tenant is not None:
            where, args = where + " AND s.tenant = ?", [tenant]
        with self.db.reading("review queue") as conn:
            return records(conn.execute(
                "SELECT s.response_id AS id, s.tenant, s.query, e.prompt_text AS stored_question, e.answer,"
                " s.similarity, s.probability AS verifier, s.threshold, s.created AS served_at, s.rating, s.note"
                f" FROM served s LEFT JOIN entries e ON e.id = s.entry_id WHERE {where} ORDER BY s.id DESC LIMIT ?",
                [*args, limit],
            ))
