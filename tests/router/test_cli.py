"""The `edgeroute` command as an operator runs it."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from loadtest.servers import node_process
from loadtest.servers import run_edgeroute as run

def test_models_list_json() -> None:
    out = run("models", "list", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["alias"]: r for r in json.loads(out.stdout)}
    assert rows["smollm2-135m-instruct"]["quantization"] == "Q4_1"
    assert rows["smollm2-135m-instruct"]["present"] is True


def test_bad_config_file_exits_2(tmp_path: Path) -> None:
    out = run("serve", "--config", str(tmp_path / "missing.toml"))
    assert out.returncode == 2
    assert "config file not found" in out.stderr


def test_unknown_policy_exits_2_before_anything_loads(tmp_path: Path) -> None:
    cfg = tmp_path / "policy.toml"
    cfg.write_text("[routing]\npolicy = 'smartest'\n")
    out = run("serve", "--config", str(cfg), "--data-dir", str(tmp_path / "d"))
    assert out.returncode == 2
    assert "valid policies: complexity, hybrid, length" in out.stderr
    assert not (tmp_path / "d").exists()  # refused before the node built anything


@pytest.mark.slow
def test_serve_answers_the_openai_sdk_and_logs_one_json_line_per_request(tmp_path: Path) -> None:
    log = tmp_path / "node.log"
    with node_process("--data-dir", str(tmp_path / "d"), "--log-level", "info", "--log-format", "json",
                      "--no-local-member", log_path=log, timeout=120) as node:
        base = node.base
        client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0)
        msgs = [{"role": "user", "content": "Say hello."}]
        done = client.chat.completions.create(model="auto", messages=msgs, max_tokens=8, temperature=0)
        assert done.choices[0].message.content
        streamed = "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(model="auto", messages=msgs, max_tokens=8, temperature=0, stream=True)
            if c.choices
        )
        assert streamed == done.choices[0].message.content
    output = log.read_text()
    # Log records are JSON objects; llama.cpp's own loader may print plain text to stderr.
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert any(line["logger"].startswith("uvicorn") for line in lines)  # uvicorn's records too
    requests = [line for line in lines if line["logger"] == "edgeroute.requests"]
    # The streamed repeat of the same greedy question is answered by the cache.
    assert [(r["level"], r["route"], r["status"]) for r in requests] == [("info", "edge", "ok"), ("info", "cache-exact", "ok")]
    assert all(r["completion_tokens"] > 0 and len(r["request_id"]) == 32 for r in requests)
    assert not [line for line in lines if line["logger"].startswith("httpx")]
