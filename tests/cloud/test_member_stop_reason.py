"""A stop sequence that ends a member's answer comes back as vLLM's ``stop_reason`` and reaches
the pool's last chunk as ``stop_word``, streamed and whole, against the real member on loopback."""

from __future__ import annotations

import httpx

from cloud import CloudPool, PoolSettings
from cloud.local import LocalMember
from models import Chunk, GenerationRequest, SamplingParams

QUESTION = ({"role": "user", "content": "Name three colours of the rainbow."},)


def greedy(stop: tuple[str, ...] = ()) -> GenerationRequest:
    return GenerationRequest(SamplingParams(max_tokens=24, temperature=0.0, stop=stop), messages=QUESTION)


def settings() -> PoolSettings:
    return PoolSettings(health_interval_s=0, first_token_timeout_s=120, stall_timeout_s=60)


async def test_the_stop_word_that_ended_the_answer_reaches_the_last_chunk(member: LocalMember) -> None:
    async with CloudPool(settings(), members=[member.settings]) as pool:
        free = "".join([c.text async for c in pool.stream(greedy())])
        words = free.split()
        assert len(words) >= 3, free
        stop = words[2]  # a word from the answer itself, so the stop is reached
        streamed: list[Chunk] = [c async for c in pool.stream(greedy((stop, "never-in-an-answer")))]
        whole: list[Chunk] = [c async for c in pool.stream(greedy((stop, "never-in-an-answer")), whole=True)]
        unstopped: list[Chunk] = [c async for c in pool.stream(greedy(("never-in-an-answer",)))]
    expected = free[: free.find(stop)]
    assert "".join(c.text for c in streamed) == expected == whole[0].text
    assert (streamed[-1].finish_reason, streamed[-1].stop_word) == ("stop", stop)
    assert (whole[-1].finish_reason, whole[-1].stop_word) == ("stop", stop)
    assert unstopped[-1].stop_word is None


def test_the_member_sends_stop_reason_only_for_a_stop_sequence(member: LocalMember) -> None:
    body = {"model": member.model, "prompt": "1, 2, 3, 4,", "max_tokens": 12, "temperature": 0}
    with httpx.Client(base_url=f"http://127.0.0.1:{member.port}", timeout=120) as http:
        free = http.post("/v1/completions", json=body).json()["choices"][0]
        stopped = http.post("/v1/completions", json={**body, "stop": [" 7"]}).json()["choices"][0]
    assert free["finish_reason"] == "length" and "stop_reason" not in free
    assert (stopped["finish_reason"], stopped["stop_reason"]) == ("stop", " 7")
    assert free["text"].startswith(stopped["text"]) and " 7" in free["text"]
