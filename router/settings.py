"""The node's settings: explicit argument > config file (TOML) > EDGEROUTE_* environment > defaults."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from cloud import PoolSettings
from edge import CacheSettings, EdgeSettings
from models import default_models_dir

from .errors import ConfigError
from .limits import LimitSettings
from .policy.config import RoutingSettings
from .policy.policies import build_policy
from .telemetry.config import TelemetrySettings


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "edgeroute"


class ServerSettings(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    # API key -> tenant. Empty: no key is required and the tenant comes from x-edgeroute-tenant.
    api_keys: dict[str, str] = Field(default_factory=dict)
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    # A client must send its whole body within this (slowloris); 408 after it.
    body_timeout_s: float = Field(30.0, gt=0)
    # Headers of a new connection's first request must arrive within this; idle keep-alive
    # connections are closed after keep_alive_s (uvicorn's timeout_keep_alive).
    header_timeout_s: float = Field(10.0, gt=0)
    keep_alive_s: float = Field(5.0, gt=0)
    # On SIGTERM: in-flight requests may finish within this; the rest end with an error event.
    drain_s: float = Field(30.0, ge=0)


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

    _config_file: Path | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = settings_cls.model_config.get("toml_file")
        sources: list[PydanticBaseSettingsSource] = [init_settings]
        if toml_file:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        sources.append(env_settings)
        return tuple(sources)


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
        raise ConfigError(f"invalid settings: {exc}") from exc
    except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise ConfigError(f"invalid config file {config_file}: {exc}") from exc
    # The policy registry is the one place that knows the valid names: fail here, before a model loads.
    build_policy(settings.routing)
    return settings
