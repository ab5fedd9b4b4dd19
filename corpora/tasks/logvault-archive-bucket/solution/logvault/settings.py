"""Where archives go. Each value can be overridden from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_BUCKET = "acme-cold-store-eu"
DEFAULT_PREFIX = "hosts"


@dataclass(frozen=True)
class Settings:
    bucket: str
    prefix: str

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        env = dict(os.environ if env is None else env)
        return cls(bucket=env.get("LOGVAULT_BUCKET", DEFAULT_BUCKET), prefix=env.get("LOGVAULT_PREFIX", DEFAULT_PREFIX))
