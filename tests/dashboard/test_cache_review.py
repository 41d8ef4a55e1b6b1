"""The cache page's review queue and error budget, against a real cache (real embedder, verifier,
SQLite) on the dashboard's app: an operator rates a semantic hit with one click."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from dashfakes import FakeNode, fake_app, make_telemetry
from litestar.testing import TestClient

from edge import CacheKey, CacheSettings, EdgeCache, Embedder
from models import SamplingParams, Usage


def _key(text: str) -> CacheKey:
    return CacheKey("acme", "auto", ({"role": "user", "content": text},), None, SamplingParams(), {})


def test_an_operator_rates_a_semantic_hit_from_the_review_queue(tmp_path: Path) -> None:
    embedder = Embedder.load()
    cache = EdgeCache(tmp_path / "cache.db", CacheSettings(), embedder=embedder)

    async def serve() -> float:
        await cache.store(_key("How do I turn on dark mode?"), "Settings > Display.", "stop", Usage(3, 3), "edge")
        look = await cache.lookup(_key("How can I turn on dark mode?"))
        assert look.hit is not None and look.hit.kind == "semantic" and look.hit.probability is not None
        cache.note_served("chatcmpl-abc", "acme", "cache-semantic", look.hit, _key("How can I turn on dark mode?"),
                          look.embedding)
        return look.hit.probability

    probability = asyncio.run(serve())
    node = FakeNode(make_telemetry(tmp_path / "data"), cache=cache)  # type: ignore[arg-type]
    try:
        with TestClient(fake_app(node, api_keys={"tk": "acme"}, operator_keys=["op"])) as client:
            auth = {"authorization": "Bearer op"}
            page = client.get("/dashboard/cache", headers=auth).text
            row = re.search(r'<tr id="review-chatcmpl-abc".*?</tr>', page, re.DOTALL)
            assert row is not None and 'data-rating=""' in row.group(0)
            assert "How can I turn on dark mode?" in row.group(0) and "How do I turn on dark mode?" in row.group(0)
            assert "No semantic hit rated yet" in page
            # Actions come from htmx only.
            assert client.post("/dashboard/cache/review/chatcmpl-abc/wrong", headers=auth).status_code == 403
            hx = {**auth, "hx-request": "true"}
            assert client.post("/dashboard/cache/review/chatcmpl-abc/meh", headers=hx).status_code == 400
            assert client.post("/dashboard/cache/review/chatcmpl-zzz/wrong", headers=hx).status_code == 404
            done = client.post("/dashboard/cache/review/chatcmpl-abc/wrong", headers=hx)
            assert done.status_code == 200 and 'data-rating="wrong"' in done.text
            page = client.get("/dashboard/cache", headers=auth).text
            budget = re.search(r'<tr data-tenant="acme">.*?</tr>', page, re.DOTALL)
            assert budget is not None
            assert f'class="num threshold">{probability:.4f}<' in budget.group(0)  # just above the wrong hit
            assert "stricter: wrong ratings" in page
            # Operators only: a browser without the login is sent to it; a rating without a key is refused.
            assert client.get("/dashboard/cache", follow_redirects=False).status_code == 303
            no_key = client.post("/dashboard/cache/review/chatcmpl-abc/right", headers={"hx-request": "true"})
            assert no_key.status_code == 401
            tenant = client.post("/dashboard/cache/review/chatcmpl-abc/right", headers={"hx-request": "true", "authorization": "Bearer tk"})
            assert tenant.status_code == 403
    finally:
        asyncio.run(cache.aclose())
        embedder.close()
