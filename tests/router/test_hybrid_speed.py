"""Speed-aware routing on a real node: it learns each side's first-token time from its own
streamed answers, and a prompt the complexity score sends to a slow cloud goes to the edge."""

from __future__ import annotations

from pathlib import Path

import openai

from dashboard.panels import shared_snapshot
from tests.router.hybrid_helpers import ASK, RecordingServer, decisions, good_stream, node

SLOW_FIRST_TOKEN_S = 1.0


def test_a_cloud_slower_than_the_objective_passes_complex_prompts_to_a_fast_edge(tmp_path: Path) -> None:
    member = RecordingServer([("sleep", SLOW_FIRST_TOKEN_S), *good_stream("cloud ", "answer")])
    try:
        with node(tmp_path, [member.settings("slow")], routing={"ttft_slo_s": 0.5}) as (base, app):
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=120)

            def stream(model: str, content: str) -> str:
                raw = client.chat.completions.with_raw_response.create(
                    model=model, messages=[{"role": "user", "content": content}], max_tokens=4, stream=True
                )
                for _ in raw.parse():
                    pass
                return raw.headers["x-edgeroute-reason"]

            # Idle and untimed, the complexity score decides as it always did.
            assert stream("auto", ASK[0]["content"]) == "complex"
            for i in range(12):
                stream("cloud", f"{ASK[0]['content']} ({i})")
                stream("edge", f"Say hi to guest {i}.")
            reason = stream("auto", ASK[0]["content"] + " Please.")
            assert reason == "cloud-slow"
            newest = decisions(app)[0]
            assert (newest.route, newest.reason) == ("edge", "cloud-slow")
            assert newest.features["cloud_ttft_s"] >= SLOW_FIRST_TOKEN_S
            # Met by the edge on an idle box; on a busy one the edge is at least the sooner side.
            assert 0 < newest.features["edge_ttft_s"] < newest.features["cloud_ttft_s"]
            # Each side's pace was learnt too: the answer's end (4 tokens) is predicted after its first token.
            assert newest.features["edge_done_s"] > newest.features["edge_ttft_s"]
            assert newest.features["cloud_done_s"] >= newest.features["cloud_ttft_s"]
            # A whole (non-streamed) answer's first chunk is its end: it teaches no model.
            assert len(member.access_log) == 13
            snap = shared_snapshot(app.state.node.telemetry)
            error = snap.ttft_prediction_error
            # Checked from each side's 13th answer on: the cloud's last hinted one and this edge answer.
            assert error is not None and error.count == 2
    finally:
        member.close()


def test_an_edge_that_yields_its_cores_sends_easy_prompts_to_the_cloud_while_anything_runs(tmp_path: Path) -> None:
    import dataclasses

    member = RecordingServer(good_stream("cloud ", "answer"))
    try:
        with node(tmp_path, [member.settings("m")]) as (base, app):
            # As a local member computing bfloat16 natively on the edge's cores makes it (router.node.member_first).
            app.state.node = dataclasses.replace(app.state.node, edge_yields=True)
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=120)

            def reason() -> str:
                raw = client.chat.completions.with_raw_response.create(
                    model="auto", messages=[{"role": "user", "content": "Say hi."}], max_tokens=4
                )
                return raw.headers["x-edgeroute-reason"]

            assert reason() == "simple"  # idle: the complexity score decides
            busy = client.chat.completions.create(
                model="edge", messages=[{"role": "user", "content": "Write a long story about a lighthouse."}],
                max_tokens=400, stream=True,
            )
            assert next(iter(busy)).choices  # the edge is decoding an answer now
            assert reason() == "edge-yields"
            assert len(member.access_log) == 1  # that easy prompt, and only it, reached the member
            busy.close()
    finally:
        member.close()


def test_an_edge_answer_moves_to_the_member_as_soon_as_the_member_has_work(tmp_path: Path) -> None:
    import dataclasses
    import threading

    # Two members (a scripted one answers one request at a time): one busy, the other continues.
    members = [RecordingServer([("sleep", 1.0), *good_stream(" cloud", " end")]) for _ in range(2)]
    try:
        with node(tmp_path, [m.settings(f"m{i}") for i, m in enumerate(members)]) as (base, app):
            app.state.node = dataclasses.replace(app.state.node, edge_yields=True)
            client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=120)
            raw = client.chat.completions.with_raw_response.create(
                model="auto", messages=[{"role": "user", "content": "Say hi."}], max_tokens=300, stream=True,
                extra_body={"ignore_eos": True},
            )
            assert raw.headers["x-edgeroute-reason"] == "simple"  # idle: the edge, by the complexity score
            chunks = iter(raw.parse())
            edge_text = "".join(c.choices[0].delta.content or "" for c in [next(chunks), next(chunks)] if c.choices)
            other = threading.Thread(target=lambda: client.chat.completions.create(
                model="cloud", messages=[{"role": "user", "content": "Explain entropy."}], max_tokens=4,
            ))
            other.start()  # the member has work now
            rest = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            other.join()
            text = edge_text + rest
            assert text.endswith(" cloud end")  # the member finished it
            log = [body for m in members for body in m.access_log]
            continued = [body for body in log if body["messages"][0]["content"] == "Say hi."]
            assert len(continued) == 1
            # The member continued from every token the edge had sent: the answer is one text.
            assert continued[0]["messages"][-1]["role"] == "assistant"
            assert text.startswith(continued[0]["messages"][-1]["content"])
            assert len(continued[0]["messages"][-1]["content"]) > len(edge_text) - 1
            newest = next(d for d in decisions(app) if d.reason == "simple")
            assert (newest.route, newest.fallback) == ("edge", "edge->cloud")
    finally:
        for m in members:
            m.close()
