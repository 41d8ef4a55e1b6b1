"""The node's settings: explicit argument > config file (TOML) > EDGEROUTE_* environment > defaults."""

from __future__ import annotations

import ipaddress
import json
import re
import socket
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from cloud import PoolSettings
from edge import CacheSettings, EdgeSettings
from models import default_data_dir, default_models_dir
from models.keys import KeyTable, as_digest

from .errors import ConfigError
from .limits import LimitSettings
from .policy.config import RoutingSettings
from .policy.policies import build_policy
from .responses_store import ResponsesSettings
from .telemetry.config import TelemetrySettings


class ServerSettings(BaseModel):
    """How the node listens and who may use it.

    Keys are held as ``sha256:<hex>`` digests from the moment they load (a file may hold the
    digests itself): the settings never keep, print or log a key. No key at all: nothing is
    checked, and `edgeroute serve` refuses a non-loopback address unless told otherwise.
    """

    # A misspelt field here (``apikeys``) must not leave a node open without a word.
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    # The node's name in /metrics (``edgeroute_node_info{node=...}``): a fleet dashboard lists
    # nodes by it. Default: the machine's host name.
    node_name: str = Field(default_factory=socket.gethostname, min_length=1, max_length=128)
    # Tenant key (or its sha256:<hex> digest) -> tenant: the key reaches that tenant's data only.
    # No keys at all: no key is required and the tenant comes from x-edgeroute-tenant.
    api_keys: dict[str, str] = Field(default_factory=dict)
    # Operator keys (or digests): every tenant's data, the dashboard and /metrics. A list, or
    # in the environment a comma-separated string (EDGEROUTE_SERVER__OPERATOR_KEYS=k1,k2).
    operator_keys: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Dashboard login attempts per client address per minute; 0: no limit.
    login_attempts_per_minute: int = Field(10, ge=0)
    # Requests with a wrong (or no) API key per client address per minute on /v1, past which
    # the address gets 429 without its key being looked at; 0: no limit.
    bad_key_attempts_per_minute: int = Field(30, ge=0)
    # Reverse proxies (addresses or CIDR networks) whose X-Forwarded-For / X-Forwarded-Proto are
    # believed: a request from one of them is the client's the header names. Empty: the headers
    # are ignored and a request's address is its connection's peer (the per-address limits
    # above count that). A list, or in the environment comma-separated.
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    # A client must send its whole body within this (slowloris); 408 after it.
    body_timeout_s: float = Field(30.0, gt=0)
    # Headers of a new connection's first request must arrive within this; idle keep-alive
    # connections are closed after keep_alive_s (uvicorn's timeout_keep_alive).
    header_timeout_s: float = Field(10.0, gt=0)
    keep_alive_s: float = Field(5.0, gt=0)
    # On SIGTERM: in-flight requests may finish within this; the rest end with an error event.
    drain_s: float = Field(30.0, ge=0)
    # Freeze the heap once the node has started: the garbage collector then skips the ~95,000
    # objects of the models, libraries and settings (a full collection walked them in 56-103 ms).
    gc_freeze: bool = True

    @field_validator("api_keys")
    @classmethod
    def _hash_api_keys(cls, value: dict[str, str]) -> dict[str, str]:
        if any(not key for key in value):
            raise ValueError("an API key may not be empty")
        if any(not tenant.strip() for tenant in value.values()):
            raise ValueError("every API key needs a tenant name")
        return {as_digest(key): tenant for key, tenant in value.items()}

    @field_validator("trusted_proxies", "operator_keys", mode="before")
    @classmethod
    def _split(cls, value: Any, info: ValidationInfo) -> Any:
        # The environment's form: a JSON list, or comma-separated items.
        if isinstance(value, str):
            if value.lstrip().startswith("["):
                try:
                    return json.loads(value)
                except ValueError:
                    raise ValueError(f"{info.field_name} is neither a JSON list nor comma-separated items") from None
            return [k.strip() for k in value.split(",") if k.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _parse_proxies(cls, value: list[str]) -> list[str]:
        # uvicorn takes a malformed entry as a literal that never matches: say so here instead.
        out = []
        for item in value:
            try:
                text = item.strip()
                parsed = ipaddress.ip_network(text, strict=False) if "/" in text else ipaddress.ip_address(text)
                out.append(str(parsed))
            except ValueError:
                raise ValueError(
                    f"{item!r} is not an IP address or network (e.g. 10.0.0.5, 10.0.0.0/8)"
                ) from None
        return out

    @field_validator("operator_keys")
    @classmethod
    def _hash_operator_keys(cls, value: list[str]) -> list[str]:
        if any(not key for key in value):
            raise ValueError("an operator key may not be empty")
        return sorted({as_digest(key) for key in value})

    @model_validator(mode="after")
    def _roles_apart(self) -> ServerSettings:
        if set(self.api_keys) & set(self.operator_keys):
            raise ValueError("a key is both a tenant key (api_keys) and an operator key (operator_keys)")
        return self

    @property
    def auth_enabled(self) -> bool:
        return bool(self.api_keys or self.operator_keys)

    def key_table(self) -> KeyTable:
        return KeyTable.of(self.api_keys, self.operator_keys)


class Settings(BaseSettings):
    """Everything a node needs; every field has a default that works with no file at all."""

    model_config = SettingsConfigDict(
        env_prefix="EDGEROUTE_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    data_dir: Path = Field(default_factory=default_data_dir)
    models_dir: Path = Field(default_factory=default_models_dir)
    server: ServerSettings = Field(default_factory=ServerSettings)
    edge: EdgeSettings = Field(default_factory=EdgeSettings)
    cloud: PoolSettings = Field(default_factory=PoolSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    routing: RoutingSettings = Field(default_factory=RoutingSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    responses: ResponsesSettings = Field(default_factory=ResponsesSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file is the model_config's toml_file (set by load_settings); without one it reads nothing.
        return init_settings, TomlConfigSettingsSource(settings_cls), env_settings


# Fields whose names (dict keys) or items are keys: never shown in an error.
_KEY_FIELDS = frozenset({"api_keys", "operator_keys"})
# An unknown name is shown when it looks like a setting (snake_case words), else it may be a key.
_SETTING_NAME = re.compile(r"[a-z]+(_[a-z0-9]+)*")


def describe_errors(exc: ValidationError) -> str:
    """One line per error, ``where: what``, without the values (a key must never be printed)."""
    lines = []
    for err in exc.errors(include_url=False, include_context=False, include_input=False):
        where: list[str] = []
        last = len(err["loc"]) - 1
        for i, part in enumerate(err["loc"]):
            text = str(part)
            if where and where[-1] in _KEY_FIELDS and not isinstance(part, int):
                text = "<key>"
            elif err["type"] == "extra_forbidden" and i == last:
                text = text if len(text) <= 40 and _SETTING_NAME.fullmatch(text) else "<a name not shown>"
            where.append(text)
        lines.append(f"  {'.'.join(where) or 'settings'}: {err['msg']}")
    return "\n".join(lines)


def is_loopback(host: str) -> bool:
    """Whether ``host`` only reaches this machine (127.0.0.0/8, ::1, or a name resolving only there)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    if not host:
        return False  # the empty host is every interface
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def load_settings(config_file: Path | str | None = None, **overrides: Any) -> Settings:
    """Build settings; ``overrides`` win over the file, which wins over the environment."""
    cls: type[Settings] = Settings
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")

        class _FromFile(Settings):
            model_config = SettingsConfigDict(**{**Settings.model_config, "toml_file": path})

        cls = _FromFile
    clean = {k: v for k, v in overrides.items() if v is not None}
    try:
        settings = cls(**clean)
    except ValidationError as exc:
        # Not str(exc): pydantic prints each wrong value, and a key is a value (or a name).
        raise ConfigError(f"invalid settings:\n{describe_errors(exc)}") from None
    except ValueError as exc:  # tomllib.TOMLDecodeError, and pydantic-settings' SettingsError
        # Neither quotes the value it could not read (a line and column, or a field's name).
        where = f"config file {config_file}" if config_file is not None else "settings"
        raise ConfigError(f"invalid {where}: {exc}") from None
    # The policy registry is the one place that knows the valid names: fail here, before a model loads.
    build_policy(settings.routing)
    return settings
