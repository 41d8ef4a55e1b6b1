"""The request bodies a member accepts: OpenAI's (:mod:`models.openai`) with vLLM's continuation fields."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from models.openai import ChatBody, CompletionBody


class MemberChatBody(ChatBody):
    # torch's nucleus sampling needs some mass: top_p 0 is refused, as vLLM does.
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    # vLLM's extensions: continue the final assistant message instead of opening a new turn.
    add_generation_prompt: bool = True
    continue_final_message: bool = False


class MemberCompletionBody(CompletionBody):
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
