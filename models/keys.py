"""API keys held as SHA-256 digests: who a bearer key is, checked in constant time.

The node never keeps a key itself once its settings are loaded: ``server.api_keys`` (key ->
tenant) and ``server.operator_keys`` become digests at load (:func:`key_digest`), and a config
file may hold digests in the first place (``sha256:<64 hex>``), so the plaintext need not be on
disk either. A presented key is hashed and compared with every known digest by
``hmac.compare_digest``, with no early exit: the time taken says neither how much of a key
matched nor which key it was.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

DIGEST_PREFIX = "sha256:"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def key_digest(key: str) -> str:
    """``sha256:<hex>`` of a key, the form settings hold it in."""
    return DIGEST_PREFIX + hashlib.sha256(key.encode()).hexdigest()


def as_digest(value: str) -> str:
    """A key from the settings as its digest; a value that already is one is kept."""
    return value if _DIGEST.fullmatch(value) else key_digest(value)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who presented a key: a tenant (its own data only) or an operator (every tenant).

    ``digest`` is the matched key's digest, which a dashboard session keeps (on the node, never
    in the cookie), so removing a key ends the sessions made with it.
    """

    tenant: str | None
    operator: bool
    digest: bytes

    def __repr__(self) -> str:  # the digest stands for the key: keep it out of reprs
        return f"Principal(tenant={self.tenant!r}, operator={self.operator})"


class KeyTable:
    """The node's keys by digest: tenant keys (key -> tenant) and operator keys.

    ``KeyTable.of({"sk-a": "team-a"}, ["sk-ops"])`` takes plaintext keys or ``sha256:`` digests.
    Empty: the node requires no key.
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[tuple[bytes, Principal]] = ()) -> None:
        self._entries = tuple(entries)

    @classmethod
    def of(cls, tenants: Mapping[str, str] | None = None, operators: Iterable[str] = ()) -> KeyTable:
        entries: dict[bytes, Principal] = {}
        # Operator keys last (tenant None): a key listed as both is an operator's.
        for key, tenant in [*(tenants or {}).items(), *((key, None) for key in operators)]:
            raw = bytes.fromhex(as_digest(key).removeprefix(DIGEST_PREFIX))
            entries[raw] = Principal(tenant=tenant, operator=tenant is None, digest=raw)
        return cls(entries.items())

    @property
    def enabled(self) -> bool:
        """Any key configured: every request must carry one."""
        return bool(self._entries)

    @property
    def operators(self) -> tuple[Principal, ...]:
        return tuple(p for _, p in self._entries if p.operator)

    def lookup(self, key: str) -> Principal | None:
        """The principal of ``key``, or None; the same work whichever key (if any) matches."""
        candidate = hashlib.sha256(key.encode()).digest()
        found: Principal | None = None
        for known, principal in self._entries:
            if hmac.compare_digest(candidate, known):
                found = principal
        return found

    def __repr__(self) -> str:
        return f"KeyTable({len(self._entries)} keys, {len(self.operators)} operator)"
