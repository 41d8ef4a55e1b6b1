"""Errors of the cloud pool (the client) and of the member server."""

from __future__ import annotations

from models.errors import EdgerouteError, EngineError, EngineUnavailableError

# A member's stream that breaks after its first token raises the one the router catches.
from models.errors import StreamBrokenError as StreamBrokenError


class CloudError(EdgerouteError):
    """Base of the cloud pool's errors."""


# -- the client ------------------------------------------------------------------------------


class PoolUnavailableError(CloudError, EngineUnavailableError):
    """No member can serve the request now (all down, ejected, or every attempt failed)."""

    def __init__(self, message: str, *, retry_after: int = 1, code: str | None = "cloud_unavailable") -> None:
        super().__init__(message, retry_after=retry_after, code=code)


class CloudRequestError(CloudError, EngineError):
    """A member refused the request itself (e.g. the prompt does not fit): another member won't help,
    the edge (another model, other limits) may."""

    status = 400
    error_type = "invalid_request_error"


class MemberError(CloudError, EngineError):
    """One member failed before the first token; ``retryable`` says whether another try may succeed."""

    retryable = True

    def __init__(self, message: str, *, member: str, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.member = member


class MemberConnectError(MemberError):
    """The member could not be reached (refused, reset, DNS)."""


class MemberTimeoutError(MemberError):
    """The member accepted the request but produced no first token in time."""


class MemberHTTPError(MemberError):
    """The member answered with an error status (429 or 5xx are retryable)."""

    def __init__(self, message: str, *, member: str, status: int, code: str | None = None) -> None:
        super().__init__(message, member=member, code=code)
        self.status = status
        self.retryable = status == 429 or status >= 500


class MemberProtocolError(MemberError):
    """The member's answer is not a valid OpenAI stream."""


class LocalMemberError(CloudError):
    """A local member process could not be started or died."""


# -- a fault of one stream (internal: the client turns it into MemberError / StreamBrokenError;
#    malformed and error events are models.errors.WireFormatError, raised by models.openai) --


class TruncatedStreamError(CloudError):
    """The stream ended (EOF or ``[DONE]``) before a finish_reason."""


# -- the member (vLLM, launched and supervised here) -------------------------------------------


class WeightsError(CloudError):
    """The full-precision twin could not be prepared."""


class VllmUnavailableError(CloudError):
    """vLLM cannot run here: its environment is missing, or the CPU lacks what its build needs."""
