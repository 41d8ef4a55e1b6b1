"""A node in front of two vLLM members: one is SIGKILLed mid-stream (its engine with it) and the
client still sees one unbroken stream with one [DONE], continued on the other member."""

from __future__ import annotations

from pathlib import Path

import pytest
from cloud_servers import vllm_member

from cloud.local import LocalMember
from tests.router import hybrid_helpers as hy

pytestmark = pytest.mark.slow


def test_a_vllm_member_killed_mid_stream_is_continued_on_the_other(
    member: LocalMember, logs: Path, tmp_path: Path
) -> None:
    with vllm_member(logs, name="victim") as victim:
        # On a tie the pool takes the first member listed: the victim.
        members = [victim.settings, member.settings]
        with hy.node(tmp_path, members, cloud={"stall_timeout_s": 30.0, "first_token_timeout_s": 120.0}) as (base, app):
            lines = hy.stream_through_a_kill(base, victim)
            text = hy.text_of(lines)
            assert text and not any(symbol in text for symbol in ("Ġ", "Ċ"))
            row = hy.decisions_once(app)[0]
            assert (row.route, row.fallback, row.status, row.member) == ("cloud", "cloud->cloud", "ok", "vllm")
        assert not victim.alive()
