"""What this console runs on: the versions of its parts, for the Settings page and bug reports.

Package versions come from installed metadata (nothing is imported to read them: streamlit stays out of
kb_core); the database and Milvus report their own server versions through their stores."""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata

from kb_core.errors import KnowledgeBaseError

__all__ = ["PACKAGES", "About", "Part", "about", "package_versions"]

# The distributions whose versions matter when something behaves differently on another machine.
PACKAGES = ("kb-console", "streamlit", "pymilvus", "milvus-lite", "sqlalchemy", "alembic", "pymysql",
            "FlagEmbedding", "torch", "transformers", "jieba", "mcp", "pydantic")


@dataclass(frozen=True)
class Part:
    name: str
    version: str  # "not installed", or what a server said ("unavailable: …" when it could not be asked)


@dataclass(frozen=True)
class About:
    parts: tuple[Part, ...]
    settings: tuple[tuple[str, str], ...]  # (KB_* variable, value), secrets masked (Settings.described)


def package_versions() -> tuple[Part, ...]:
    parts = [Part("python", f"{platform.python_version()} ({platform.python_implementation()})")]
    for name in PACKAGES:
        try:
            parts.append(Part(name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            parts.append(Part(name, "not installed"))
    return tuple(parts)


def about(servers: Iterable[tuple[str, Callable[[], str]]], settings: Iterable[tuple[str, str]]) -> About:
    """The packages' versions, each server's own (`ask()`; one that cannot answer says why, the rest still
    show) and the settings as described."""
    parts = []
    for name, ask in servers:
        try:
            parts.append(Part(name, ask()))
        except KnowledgeBaseError as exc:
            parts.append(Part(name, f"unavailable: {exc}"))
        except Exception as exc:  # noqa: BLE001 - a driver's own error: say it, the page still shows the rest
            parts.append(Part(name, f"unavailable: {type(exc).__name__}: {exc}"))
    return About(package_versions() + tuple(parts), tuple(settings))
