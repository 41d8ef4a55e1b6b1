"""The edge's fair waiting room: round robin across keys, fewest running first, per-key shares;
each step's prompt budget split fairly across keys; and the real engine refusing a bursting key at
its share while another key is admitted."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import pytest

from edge import EdgeSaturatedError, EdgeSettings, LlamaEngine
from edge._fair import (
    Demand, FairQueue, FairRunner, KeyView, Promises, active_keys, keep_slots, preempt_from, prefill_shares, share,
)
from edge._scheduler import Scheduler
from edge._sequence import Job
from models import EDGE_DEFAULT, GenerationRequest, SamplingParams, collect, default_models_dir, resolve


@dataclass
class J:
    key: str
    n: int


def test_keys_are_served_round_robin_in_their_own_fifo_order() -> None:
    q: FairQueue[J] = FairQueue()
    for job in [J("a", 1), J("a", 2), J("a", 3), J("b", 1), J("c", 1), J("b", 2)]:
        q.push(job)
    order = [q.pop({}) for _ in range(6)]
    assert [(j.key, j.n) for j in order if j] == [("a", 1), ("b", 1), ("c", 1), ("a", 2), ("b", 2), ("a", 3)]
    assert q.pop({}) is None and len(q) == 0 and not q


def test_the_key_with_the_fewest_running_goes_first() -> None:
    q: FairQueue[J] = FairQueue()
    for job in [J("a", 1), J("a", 2), J("b", 1), J("b", 2)]:
        q.push(job)
    running = {"a": 3, "b": 1}
    first = q.pop(running)
    assert first == J("b", 1)
    running["b"] = 3  # now equal: round robin, and b was just served
    assert q.pop(running) == J("a", 1)
    assert q.pop(running) == J("b", 2)


def test_ahead_counts_own_queue_and_one_turn_of_each_other_key() -> None:
    q: FairQueue[J] = FairQueue()
    for n in range(10):
        q.push(J("a", n))
    q.push(J("b", 0))
    assert q.ahead("b") == 1 + 2  # b's own one, and a's next two before b's second turn
    assert q.ahead("c") == 1 + 1  # one of a and one of b before c's first
    assert q.ahead("a") == 10 + 1


def test_shares_split_the_bound_over_keys_with_work() -> None:
    q: FairQueue[J] = FairQueue()
    q.push(J("a", 0))
    assert active_keys(q, {"c": 2, "d": 0}, "b") == 3  # a waits, c runs, b asks; d has nothing
    assert (share(32, 1), share(32, 2), share(32, 3), share(1, 5)) == (32, 16, 11, 1)


def test_retry_after_is_the_time_until_the_key_is_back_within_its_share() -> None:
    view = KeyView(running=4, ahead=20, slots=4, keys=2, waiting=16, mean_request_s=2.0)
    # one over the share of 16: one of its jobs must start; it gets half of 4 slots, each 2 s
    assert view.room_s(16) == 1.0  # 1 * 2 s * 2 keys / 4 slots, and never under a second
    assert KeyView(4, 40, 4, 2, 20, 2.0).room_s(16) == 5 * 2.0 * 2 / 4
    assert KeyView(4, 40, 4, 2, 20, None).room_s(16) == 1.0
    assert KeyView(2, 1, 4, 1, 1, 2.0).wait_s() == 0.0
    assert KeyView(4, 3, 4, 1, 3, 2.0).wait_s() == 4 * 2.0 / 4


def chat(text: str, key: str, max_tokens: int) -> GenerationRequest:
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    return GenerationRequest(params=params, messages=({"role": "user", "content": text},), fair_key=key)


@pytest.mark.slow
async def test_a_bursting_key_is_refused_at_its_share_while_another_key_is_admitted_and_served_next() -> None:
    spec = resolve(EDGE_DEFAULT, default_models_dir())
    engine = LlamaEngine(spec, EdgeSettings(n_ctx=512, slots=1, max_queue=4))
    streams = []
    pending = []
    try:
        first = engine.stream(chat("Write a very long story about a ship.", "a", 400))
        await anext(first)  # a runs in the one slot
        streams.append(first)
        for i in range(4):  # the whole queue bound: a is the only key with work
            s = engine.stream(chat(f"Write a story number {i}.", "a", 400))
            streams.append(s)
            pending.append(asyncio.ensure_future(anext(s)))
        await asyncio.sleep(0.05)
        assert engine.load().waiting == 4
        with pytest.raises(EdgeSaturatedError) as refused:
            await anext(engine.stream(chat("One more.", "a", 4)))
        assert refused.value.code == "edge_saturated" and refused.value.retry_after >= 1
        # b has no work: its share (2 of 4) is free although the queue holds 4 already
        b = engine.stream(chat("What is two plus two?", "b", 4))
        b_done = asyncio.ensure_future(collect(b))
        await asyncio.sleep(0.05)
        # its own, and up to two of a's in the turn
        assert engine.prepare(chat("Another.", "b", 4)).queue.waiting == 1 + 2
        assert engine.load().waiting == 5
        # a, now over its share of 2, is refused; b gets the slot as soon as a's first frees it
        with pytest.raises(EdgeSaturatedError):
            await anext(engine.stream(chat("Again.", "a", 4)))
        await first.aclose()  # a's running job ends: the slot goes to b (fewest running), not a's queue
        done = await asyncio.wait_for(b_done, 60)
        assert done.finish_reason in ("stop", "length")
        for _ in range(500):  # the scheduler places a's next job at its next step
            if engine.load().running == 1:
                break
            await asyncio.sleep(0.01)
        assert engine.load().waiting == 3  # a's four minus the one that took the slot after b's
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for s in streams:
            await s.aclose()
        await engine.aclose()


def test_requests_refused_together_are_told_successive_times() -> None:
    p = Promises()
    assert p.retry_after_s("a", 1.0, 0.5, 100.0) == 1.0
    assert p.retry_after_s("a", 1.0, 0.5, 100.0) == 1.5  # the slot after the previous one's
    assert p.retry_after_s("b", 1.0, 0.5, 100.0) == 1.0  # another key has its own turn
    assert p.retry_after_s("a", 1.0, 0.5, 110.0) == 1.0  # the old promises have passed


def test_free_slots_wait_for_a_recent_tenant_below_its_share_and_demand() -> None:
    # b's four clients were all in flight recently: its shortfall below its share (4 of 8) is kept
    demand = {"a": 200, "b": 4}
    assert keep_slots("a", {"a": 7}, 1, 8, demand)  # b runs none: the last slot stays for b
    assert keep_slots("a", {"a": 4, "b": 1}, 3, 8, demand)  # three free, b three short of 4
    assert not keep_slots("a", {"a": 3, "b": 1}, 4, 8, demand)  # four free: one more for a
    assert not keep_slots("b", {"a": 7}, 1, 8, demand)  # b's own request takes it
    assert not keep_slots("a", {"a": 3, "b": 4}, 1, 8, demand)  # b has its share
    assert not keep_slots("a", {"a": 7}, 1, 8, {"a": 200})  # a alone: work-conserving
    assert not keep_slots("a", {}, 1, 8, demand)  # a key running nothing always starts
    # b asked one at a time: one slot is kept for it, not its whole share
    assert keep_slots("a", {"a": 7}, 1, 8, {"b": 1})
    assert not keep_slots("a", {"a": 6}, 2, 8, {"b": 1})


def test_demand_is_the_recent_peak_in_flight() -> None:
    d = Demand()
    d.note("b", 1, 100.0)
    d.note("b", 4, 101.0)
    d.note("b", 2, 110.0)  # below the peak reached 9 s ago: the peak stays
    assert d.recent(120.0) == {"b": 4}
    assert d.recent(131.0) == {}  # the peak was last reached 30 s ago
    d.note("b", 2, 135.0)  # a new peak after the old one lapsed
    d.note("a", 7, 135.0)
    assert d.recent(136.0) == {"b": 2, "a": 7}


@pytest.mark.slow
async def test_slots_a_recent_key_is_short_of_wait_for_it_while_another_keys_burst_queues() -> None:
    spec = resolve(EDGE_DEFAULT, default_models_dir())
    engine = LlamaEngine(spec, EdgeSettings(n_ctx=1024, slots=4, max_queue=8))
    streams = []
    pending = []
    try:
        # b had two requests in flight together a moment ago: its recent demand is two
        done = await asyncio.gather(collect(engine.stream(chat("Say one.", "b", 2))),
                                    collect(engine.stream(chat("Say two.", "b", 2))))
        assert [d.finish_reason in ("stop", "length") for d in done] == [True, True]
        for i in range(4):  # a bursts with four long answers into four free slots
            s = engine.stream(chat(f"Write a long story number {i} about a ship.", "a", 300))
            streams.append(s)
            pending.append(asyncio.ensure_future(anext(s)))
        for _ in range(500):
            if engine.load().running == 2:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # several steps: a's other two still wait
        assert (engine.load().running, engine.load().waiting) == (2, 2)  # two slots kept for b
        b = await asyncio.wait_for(collect(engine.stream(chat("What is two plus two?", "b", 4))), 60)
        assert b.finish_reason in ("stop", "length")
        assert engine.load().waiting >= 1  # b was served while a's burst still queued
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for s in streams:
            await s.aclose()
        await engine.aclose()


def test_a_steps_prompt_budget_is_split_max_min_fairly_across_keys() -> None:
    assert prefill_shares({"a": 100, "b": 300}, 64) == {"a": 32, "b": 32}
    assert prefill_shares({"a": 10, "b": 300}, 64) == {"a": 10, "b": 54}  # a's rest goes to b
    assert prefill_shares({"a": 10, "b": 20}, 64) == {"a": 10, "b": 20}
    assert prefill_shares({"a": 5, "b": 5, "c": 100}, 64) == {"a": 5, "b": 5, "c": 54}
    assert prefill_shares({"a": 100, "b": 100, "c": 100}, 64) == {"a": 22, "b": 21, "c": 21}
    assert prefill_shares({"a": 1, "b": 1, "c": 1}, 2) == {"a": 1, "b": 1, "c": 0}
    assert prefill_shares({"a": 0, "b": 7}, 64) == {"b": 7}
    assert prefill_shares({}, 64) == {}


class _Batch:
    """The llama batch as the step builder sees it: (token, position, sequence, wants logits)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.rows: list[tuple[int, int, int, bool]] = []

    @property
    def n(self) -> int:
        return len(self.rows)

    def clear(self) -> None:
        self.rows = []

    def add(self, token: int, pos: int, seq: int, logits: bool) -> int:
        self.rows.append((token, pos, seq, logits))
        return len(self.rows) - 1


class _Runtime:
    def __init__(self, capacity: int) -> None:
        self.batch = _Batch(capacity)


def test_one_keys_stream_of_short_prompts_does_not_starve_another_keys_long_prompt() -> None:
    """Shortest prompt first alone gave a's three short prompts the whole step and b's long one
    nothing; split by key, b's prompt advances by half the step (the slot logic only: the llama
    batch is a stand-in)."""
    scheduler = Scheduler(_Runtime(512), EdgeSettings(slots=4, prefill_chunk=64))  # type: ignore[arg-type]
    loop = asyncio.new_event_loop()
    try:
        lengths = {0: ("a", 12), 1: ("a", 14), 2: ("a", 30), 3: ("b", 300)}
        for slot in scheduler._slots:
            key, n = lengths[slot.seq]
            slot.job = Job(list(range(n)), 4, chat("x", key, 4), 0, loop, asyncio.Queue())
            slot.pending = list(range(n))
        assert scheduler._build_batch()
        taken = {seq: sum(1 for row in scheduler._rt.batch.rows if row[2] == seq) for seq in lengths}
        # a's 32 tokens: its shortest prompts first (12, then 14, then 6 of the 30)
        assert taken == {0: 12, 1: 14, 2: 6, 3: 32}
        assert [len(s.pending) for s in scheduler._slots] == [0, 0, 24, 268]
        # the two prompts read to the end asked for their logits, at their last token only
        assert [row[1:] for row in scheduler._rt.batch.rows if row[3]] == [(11, 0, True), (13, 1, True)]
        for slot in scheduler._slots:
            slot.job = None  # nothing for the scheduler's shutdown to end
    finally:
        scheduler.stop(5)
        loop.close()


async def test_the_runner_takes_calls_in_turn_across_keys_and_skips_those_whose_caller_left() -> None:
    runner = FairRunner("test-runner")
    order: list[str] = []
    gate = threading.Event()
    try:
        first = asyncio.ensure_future(runner.run("a", lambda: (gate.wait(5), order.append("a0"))))
        await asyncio.sleep(0.05)  # a0 holds the thread; the rest queue behind it
        calls = [asyncio.ensure_future(runner.run("a", order.append, f"a{i}")) for i in range(1, 4)]
        gone = asyncio.ensure_future(runner.run("c", order.append, "c0"))
        calls.append(asyncio.ensure_future(runner.run("b", order.append, "b0")))
        await asyncio.sleep(0.05)
        gone.cancel()
        gate.set()
        await asyncio.gather(first, *calls)
        assert order == ["a0", "b0", "a1", "a2", "a3"]  # b's one call waited for one of a's, not three
        with pytest.raises(ZeroDivisionError):
            await runner.run("a", lambda: 1 / 0)
    finally:
        gate.set()
        runner.shutdown()
    with pytest.raises(RuntimeError):
        await runner.run("a", order.append, "late")


def test_a_slot_is_preempted_only_for_a_key_below_its_part_from_the_key_furthest_above_its_own() -> None:
    assert preempt_from("b", {"a": 8}, 8, 2) == "a"
    assert preempt_from("b", {"a": 5, "b": 3}, 8, 2) == "a"
    assert preempt_from("b", {"a": 4, "b": 4}, 8, 2) is None  # b holds its part
    assert preempt_from("c", {"a": 5, "b": 3}, 8, 3) == "a"  # parts of 2: a is furthest above
    assert preempt_from("c", {"a": 2, "b": 2, "c": 1}, 5, 3) is None
    assert preempt_from("b", {"a": 2, "b": 1}, 3, 2) is None  # b holds its part of 1, a the odd slot too
    assert preempt_from("a", {"a": 8}, 8, 1) is None  # alone
    assert preempt_from("b", {"a": 1}, 1, 2) is None  # one slot, two keys: no part to take


def sampled(text: str, key: str, max_tokens: int) -> GenerationRequest:
    params = SamplingParams(max_tokens=max_tokens, temperature=0.8, seed=7)
    return GenerationRequest(params=params, messages=({"role": "user", "content": text},), fair_key=key)


@pytest.mark.slow
async def test_a_key_with_no_slot_preempts_a_burst_that_took_them_all_and_the_burst_resumes_unchanged() -> None:
    spec = resolve(EDGE_DEFAULT, default_models_dir())
    engine = LlamaEngine(spec, EdgeSettings(n_ctx=512, slots=2, max_queue=8))
    try:
        # 96 tokens each: both answers are still running when b asks, even on a loaded box
        reqs = [chat("Write a long story about a ship.", "a", 96), sampled("Write a poem about a dragon.", "a", 96)]
        expected = [await collect(engine.stream(r)) for r in reqs]  # one at a time, nothing preempted
        assert engine.stats().preempted == 0
        streams = [engine.stream(r) for r in reqs]
        firsts = [await anext(s) for s in streams]  # both answering: a holds every slot
        b = await asyncio.wait_for(collect(engine.stream(chat("What is two plus two?", "b", 4))), 60)
        assert b.finish_reason in ("stop", "length") and b.text
        rest = [await collect(s) for s in streams]
        assert engine.stats().preempted == 1  # one of a's answers gave b its slot
        # ... and went on where it stopped: the same text, token for token, sampled one included
        assert [f.text + r.text for f, r in zip(firsts, rest, strict=True)] == [e.text for e in expected]
        assert [r.usage for r in rest] == [e.usage for e in expected]
        assert engine.stats().running == 0
    finally:
        await engine.aclose()
