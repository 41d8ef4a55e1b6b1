"""The hard rules, applied once around whichever policy scores a request.

A policy only scores and proposes (:meth:`Policy.decide`); :func:`decide` applies, in order,
the rules no policy may override, so a new policy cannot forget them: privacy, the client's hint,
the edge's context, then cloud health (a ``cloud-unhealthy`` answer is marked degraded by the
request path; ``edge-only`` on a node with no cloud, where nothing is unhealthy). Each decision
keeps the policy's score.
"""

from __future__ import annotations

from .features import Decision, Features, Policy


def decide(policy: Policy, f: Features) -> Decision:
    proposed = policy.decide(f)
    decision = _hard_rule(f, proposed.score) or proposed
    if decision.target == "cloud" and f.cloud_healthy <= 0:
        return Decision("edge", "cloud-unhealthy" if f.cloud_configured else "edge-only", decision.score)
    return decision


def _hard_rule(f: Features, score: float) -> Decision | None:
    if f.private:
        return Decision("edge", "private", score)
    if f.hint == "edge":
        return Decision("edge", "hint-edge", score)
    if f.hint == "cloud":
        return Decision("cloud", "hint-cloud", score)
    if not f.fits_edge_context:
        return Decision("cloud", "edge-context", score)
    return None
