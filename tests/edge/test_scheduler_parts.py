"""The scheduler's cheap per-step parts: the greedy argmax gives llama.cpp's greedy tokens, and the
outbox delivers a step's output to every request's event loop in order."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from edge import EdgeSettings
from edge._grammar import free
from edge._runtime import Runtime, sampler_chain
from edge._sequence import Job, Outbox
from models import EDGE_DEFAULT, GenerationRequest, SamplingParams, default_models_dir, resolve

PROMPTS = [
    b"The capital of France is",
    b"1, 2, 3, 4,",
    b"Once upon a time, in a land far away, there lived a",
    b"def fibonacci(n):",
]


@pytest.fixture(scope="module")
def runtime() -> Iterator[Runtime]:
    rt = Runtime(resolve(EDGE_DEFAULT, default_models_dir()).path, EdgeSettings(slots=4, n_ctx=256))
    yield rt
    rt.close()


@pytest.mark.slow
def test_the_greedy_argmax_is_llama_cpps_greedy_sampler_step_after_step(runtime: Runtime) -> None:
    rt = runtime
    for seq in range(len(PROMPTS)):
        rt.seq_rm(seq, 0)
    prompts = [rt.vocab.tokenize(p, add_bos=True, special=False) for p in PROMPTS]
    chains = [sampler_chain(0.0, 1.0, 0, 40, 0.05) for _ in PROMPTS]
    rt.batch.clear()
    outputs = []
    for seq, tokens in enumerate(prompts):
        for pos, token in enumerate(tokens):
            index = rt.batch.add(token, pos, seq, pos == len(tokens) - 1)
        outputs.append(index)
    positions = [len(t) for t in prompts]
    seen: list[list[int]] = [[] for _ in PROMPTS]
    try:
        for _ in range(12):
            rt.decode()
            expected = [rt.sample(chain, index) for chain, index in zip(chains, outputs, strict=True)]
            assert rt.argmax(outputs) == expected
            # Rows asked for in another order or alone: the same tokens for the same rows.
            assert rt.argmax(outputs[::-1]) == expected[::-1]
            assert rt.argmax(outputs[2:3]) == expected[2:3]
            rt.batch.clear()
            outputs = []
            for seq, token in enumerate(expected):
                seen[seq].append(token)
                outputs.append(rt.batch.add(token, positions[seq], seq, True))
                positions[seq] += 1
    finally:
        for chain in chains:
            free(chain)
    # Four different continuations, not one row read four times.
    assert len({tuple(s) for s in seen}) == len(PROMPTS)
    assert b"Paris" in rt.vocab.detokenize(seen[0])


def _job(loop: asyncio.AbstractEventLoop) -> Job:
    request = GenerationRequest(params=SamplingParams(), prompt="x")
    return Job([1], 1, request, 0, loop, asyncio.Queue())


def test_the_outbox_delivers_each_loops_items_in_order_and_cancels_jobs_of_a_closed_loop() -> None:
    loops = [asyncio.new_event_loop() for _ in range(2)]
    threads = [threading.Thread(target=loop.run_forever) for loop in loops]
    for thread in threads:
        thread.start()
    try:
        jobs = [_job(loops[0]), _job(loops[1]), _job(loops[0])]
        outbox = Outbox()
        for step in range(3):
            for n, job in enumerate(jobs):
                outbox.put(job, (step, n))
            outbox.flush()
        outbox.flush()  # nothing left: a no-op

        async def take(job: Job) -> list[object]:
            return [job.out.get_nowait() for _ in range(job.out.qsize())]

        got = [asyncio.run_coroutine_threadsafe(take(job), job.loop).result(10) for job in jobs]
        assert got == [[(s, n) for s in range(3)] for n in range(3)]
    finally:
        for loop in loops:
            loop.call_soon_threadsafe(loop.stop)
        for thread in threads:
            thread.join(10)
    loops[1].close()
    orphan, alive = _job(loops[1]), _job(loops[0])
    outbox = Outbox()
    outbox.put(orphan, "lost")
    outbox.put(alive, "kept")
    outbox.flush()
    assert orphan.cancelled.is_set()
    assert not alive.cancelled.is_set()
    loops[0].run_until_complete(asyncio.sleep(0))
    assert alive.out.get_nowait() == "kept"
    loops[0].close()


def test_quantized_kv_settings() -> None:
    from pydantic import ValidationError

    assert (EdgeSettings().kv_type_k, EdgeSettings().kv_type_v) == ("q8_0", "f16")
    assert EdgeSettings(kv_type_k="q8_0", flash_attn=False).flash_attn is False  # keys need no flash attention
    with pytest.raises(ValidationError, match="kv_type_v 'q8_0' needs flash_attn"):
        EdgeSettings(kv_type_v="q8_0", flash_attn=False)
    with pytest.raises(ValidationError):
        EdgeSettings(kv_type_k="q4_0")  # type: ignore[arg-type]
