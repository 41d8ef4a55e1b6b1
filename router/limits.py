"""What one request may ask of the node: size caps checked before any tokenizing, and per-tenant
requests/tokens per minute.

The caps are checked on the parsed body (the JSON depth, before parsing, by
:mod:`router.admission`): counting messages and characters is microseconds, tokenizing 20,000
messages was seconds. The rate limits are token buckets, one per tenant and kind, refilled
continuously; the node runs one event loop and no ``await`` sits between a bucket's check and its
debit, so admission is atomic without a lock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from .errors import InvalidRequestError, RequestsRateLimitError, TokensRateLimitError


class TenantLimits(BaseModel):
    """One tenant's overrides of the defaults (None: the default; 0: no limit)."""

    requests_per_minute: int | None = Field(None, ge=0)
    tokens_per_minute: int | None = Field(None, ge=0)


class LimitSettings(BaseModel):
    """``[limits]``: per-tenant rates (0 = none) and the caps of one request.

    The caps are far above what any client of these models sends (OpenAI's own message limit is
    2,048); they exist so that one request cannot make the node tokenize megabytes.
    """

    requests_per_minute: int = Field(0, ge=0)
    tokens_per_minute: int = Field(0, ge=0)
    tenants: dict[str, TenantLimits] = Field(default_factory=dict)
    max_messages: int = Field(2048, ge=1)
    max_content_parts: int = Field(256, ge=1)  # per message
    max_message_chars: int = Field(1_000_000, ge=1)
    max_total_chars: int = Field(2_000_000, ge=1)
    max_json_depth: int = Field(64, ge=4)
    # 10 s, not a whole minute: a tenant with hundreds of clients cannot take the node's every
    # worker in the first seconds (docs/limits.md), as OpenAI quantizes its per-minute limits.
    request_burst_s: float = Field(
        10.0, gt=0, le=60, description="seconds of requests_per_minute one burst may spend at once"
    )

    def rates(self, tenant: str) -> tuple[int, int]:
        """(requests, tokens) per minute for ``tenant``; 0 is no limit."""
        own = self.tenants.get(tenant, _NO_OVERRIDES)
        rpm, tpm = own.requests_per_minute, own.tokens_per_minute
        return (
            self.requests_per_minute if rpm is None else rpm,
            self.tokens_per_minute if tpm is None else tpm,
        )


_NO_OVERRIDES = TenantLimits()


# -- the caps ----------------------------------------------------------------------------------

# The caps of the request being handled, set by the admission middleware: the body's validator
# reads them to refuse 20,000 messages before validating each one (that alone took ~70 ms).
ACTIVE: ContextVar[LimitSettings | None] = ContextVar("edgeroute_limits", default=None)


def precheck(data: Any, field: str = "messages") -> None:
    """The message count (``messages``, or a Responses request's ``input`` items), on the decoded
    JSON before any model is built from it."""
    limits = ACTIVE.get()
    if limits is None or not isinstance(data, dict):
        return
    messages = data.get(field)
    if isinstance(messages, list) and len(messages) > limits.max_messages:
        _too_many(len(messages), limits, field)


def _too_many(count: int, limits: LimitSettings, param: str = "messages") -> None:
    raise InvalidRequestError(
        f"too many {'messages' if param == 'messages' else 'input items'}: {count} (at most {limits.max_messages})",
        param=param,
        code="array_above_max_length",
    )


def check_messages(messages: list[object], limits: LimitSettings) -> None:
    """Refuse a chat body over the caps (400, as OpenAI answers an array or string above its maximum)."""
    if len(messages) > limits.max_messages:
        _too_many(len(messages), limits)
    total = 0
    for i, message in enumerate(messages):
        content = getattr(message, "content", None)
        if isinstance(content, list):
            if len(content) > limits.max_content_parts:
                raise InvalidRequestError(
                    f"too many content parts in messages[{i}]: {len(content)} "
                    f"(at most {limits.max_content_parts})",
                    param=f"messages.{i}.content",
                    code="array_above_max_length",
                )
            chars = sum(len(part.text) for part in content)
        else:
            chars = len(content or "")
        _check_chars(chars, limits.max_message_chars, f"messages.{i}.content")
        total += chars
    _check_total(total, limits)


def check_texts(texts: Sequence[str], limits: LimitSettings, param: str) -> None:
    """A text completion's prompts or an embeddings request's inputs: each as a message, all of
    them as a request."""
    for i, text in enumerate(texts):
        _check_chars(len(text), limits.max_message_chars, f"{param}.{i}" if len(texts) > 1 else param)
    _check_total(sum(len(text) for text in texts), limits, param)


def _check_chars(chars: int, cap: int, param: str) -> None:
    if chars > cap:
        raise InvalidRequestError(
            f"{param} is too long: {chars} characters (at most {cap})",
            param=param,
            code="string_above_max_length",
        )


def _check_total(total: int, limits: LimitSettings, param: str = "messages") -> None:
    if total > limits.max_total_chars:
        raise InvalidRequestError(
            f"the request's text is too long: {total} characters (at most {limits.max_total_chars})",
            param=param,
            code="string_above_max_length",
        )


# -- the rates ---------------------------------------------------------------------------------


class _Bucket:
    """A token bucket holding up to ``burst_s`` seconds of the allowance (at least one request),
    refilled continuously."""

    __slots__ = ("capacity", "level", "limit", "promised", "rate", "stamp")

    def __init__(self, per_minute: int, now: float, burst_s: float = 60.0) -> None:
        self.limit = per_minute
        self.capacity = max(1.0, float(per_minute) * burst_s / 60.0)
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self.stamp = now
        self.promised = -math.inf  # when the last refused request was told to come back

    def promise(self, cost: float, now: float) -> float:
        """Seconds a refused request should wait: until its ``cost`` fits, and after the requests
        refused before it (each promised the allowance that frees after the previous one's), so
        refused clients do not all come back in the same instant."""
        due = max(now + self.wait_s(cost), self.promised + cost / self.rate)
        self.promised = due
        return due - now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_s(self, cost: float) -> float:
        """Seconds until ``cost`` fits (after a refill); 0 when it fits now."""
        return 0.0 if self.level >= cost else (cost - self.level) / self.rate

    def headers(self, kind: str) -> dict[str, str]:
        """OpenAI's ``x-ratelimit-*-<kind>`` headers: the limit, what is left now, and the time
        until the bucket is full again (its "reset")."""
        return {
            f"x-ratelimit-limit-{kind}": str(self.limit),
            f"x-ratelimit-remaining-{kind}": str(max(0, math.floor(self.level))),
            f"x-ratelimit-reset-{kind}": duration((self.capacity - self.level) / self.rate),
        }


def duration(seconds: float) -> str:
    """A duration as OpenAI's headers write it (Go's style): ``20ms``, ``1s``, ``8.64s``, ``6m0s``."""
    seconds = max(0.0, seconds)
    if seconds < 1.0:
        return f"{round(seconds * 1000)}ms"
    minutes, rest = divmod(round(seconds, 3), 60)
    secs = f"{rest:.3f}".rstrip("0").rstrip(".")
    return f"{int(minutes)}m{secs}s" if minutes else f"{secs}s"


# Without keys a tenant is any x-edgeroute-tenant header: buckets that have refilled (they hold
# nothing a new bucket would not) are forgotten beyond this many, so memory stays bounded.
_MAX_BUCKETS = 10_000


@dataclass(slots=True)
class Reservation:
    """Tokens taken at admission; :meth:`RateLimiter.settle` gives back what the answer did not use."""

    tenant: str
    tokens: int
    headers: dict[str, str]  # the x-ratelimit-*-tokens state right after the reservation


class RateLimiter:
    """Per-tenant requests and tokens per minute (``[limits]``, with per-tenant overrides).

    Requests are counted when a request is admitted (cache hits included: they are requests,
    even though they generate nothing). Tokens are reserved before a generation starts, as
    prompt tokens + ``max_tokens``, and settled with the real usage when it ends.
    """

    def __init__(self, settings: LimitSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._clock = clock
        self._requests: dict[str, _Bucket] = {}
        self._tokens: dict[str, _Bucket] = {}

    @property
    def enabled(self) -> bool:
        s = self._settings
        return bool(s.requests_per_minute or s.tokens_per_minute or s.tenants)

    def admit_request(self, tenant: str) -> dict[str, str]:
        """Count one request for ``tenant`` and return the ``x-ratelimit-*-requests`` headers
        (none without a limit), or raise :class:`RequestsRateLimitError` (429)."""
        rpm, _ = self._settings.rates(tenant)
        if not rpm:
            return {}
        bucket = self._bucket(self._requests, tenant, rpm, self._settings.request_burst_s)
        self._take(bucket, 1, "requests", f"limit {rpm} / min for tenant {tenant!r}")
        return bucket.headers("requests")

    def reserve_tokens(self, tenant: str, tokens: int) -> Reservation | None:
        """Take ``tokens`` from the tenant's allowance, or raise :class:`TokensRateLimitError` (429)."""
        _, tpm = self._settings.rates(tenant)
        if not tpm:
            return None
        if tokens > tpm:
            raise TokensRateLimitError(
                f"request too large: it may use {tokens} tokens (prompt + max_tokens) and tenant "
                f"{tenant!r} is limited to {tpm} tokens / min; lower max_tokens or shorten the prompt",
                retry_after=60,
                headers=self._bucket(self._tokens, tenant, tpm).headers("tokens"),
            )
        bucket = self._bucket(self._tokens, tenant, tpm)
        self._take(bucket, tokens, "tokens", f"limit {tpm} / min for tenant {tenant!r}, requested {tokens}")
        return Reservation(tenant, tokens, bucket.headers("tokens"))

    def token_headers(self, tenant: str) -> dict[str, str]:
        """The ``x-ratelimit-*-tokens`` headers as they stand (an answer that reserved nothing)."""
        _, tpm = self._settings.rates(tenant)
        return self._bucket(self._tokens, tenant, tpm).headers("tokens") if tpm else {}

    def settle(self, reservation: Reservation, used: int) -> None:
        """Give back what was reserved and not used (a debt stays when more was used)."""
        bucket = self._tokens.get(reservation.tenant)
        if bucket is None:
            return
        bucket.refill(self._clock())
        bucket.level = min(bucket.capacity, bucket.level + reservation.tokens - used)
        reservation.tokens = used  # settling twice gives back nothing more

    def _take(self, bucket: _Bucket, cost: int, kind: str, terms: str) -> None:
        """Debit ``cost`` from ``bucket``, or refuse (429) with the wait it is promised."""
        if bucket.wait_s(cost) > 0:
            wait = bucket.promise(cost, self._clock())
            error = RequestsRateLimitError if kind == "requests" else TokensRateLimitError
            raise error(
                f"rate limit reached for {kind}: {terms}; try again in {wait:.1f}s",
                retry_after=max(1, math.ceil(wait)),
                headers=bucket.headers(kind),
            )
        bucket.level -= cost

    def _bucket(self, table: dict[str, _Bucket], tenant: str, per_minute: int, burst_s: float = 60.0) -> _Bucket:
        now = self._clock()
        bucket = table.get(tenant)
        if bucket is None or bucket.limit != per_minute:
            if len(table) >= _MAX_BUCKETS:
                for name, full in list(table.items()):
                    full.refill(now)
                    if full.level >= full.capacity:
                        del table[name]
            bucket = table[tenant] = _Bucket(per_minute, now, burst_s)
        bucket.refill(now)
        return bucket
