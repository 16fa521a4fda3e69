"""One settings object: constructor arguments > env `KB_*` > YAML config > defaults.

The YAML file is `kb.yaml` at the application root, or the file env `KB_CONFIG` names. It uses the spec's
keys, e.g. `knowledge: {base-path: /data/knowledge_base/}`. Relative paths resolve against the application
root (`KB_APP_ROOT`, default the current directory). Invalid settings fail at construction and the error
names the setting.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from kb_core.access import RoleMap
from kb_core.errors import SettingsError

CONFIG_FILE_NAME = "kb.yaml"

# YAML path -> field name. The YAML side uses the spec's dashed keys.
_YAML_KEYS: dict[tuple[str, ...], str] = {
    ("knowledge", "base-path"): "base_path",
    ("database", "url"): "database_url",
    ("milvus", "uri"): "milvus_uri",
    ("milvus", "token"): "milvus_token",
    ("embedding", "model"): "embedding_model",
    ("embedding", "device"): "embedding_device",
    ("embedding", "precision"): "embedding_precision",
    ("embedding", "fallback"): "embedding_fallback",
    ("upload", "max-bytes"): "max_upload_bytes",
    ("l1", "min-dense-score"): "min_dense_score",
    ("l0", "matching"): "l0_matching",
    ("backend", "timeout"): "backend_timeout",
    ("mcp", "call-timeout"): "tool_timeout",
    ("l1", "fulltext"): "fulltext",
    ("l0", "refresh-interval"): "refresh_interval",
    ("knowledge", "watch"): "watch",
    ("l0", "default-language"): "default_language",
    ("l0", "generic-docs"): "l0_generic_docs",
    ("l0", "synonyms"): "l0_synonyms",
    ("l0", "snapshot"): "l0_snapshot",
    ("auth", "roles"): "roles",
    ("auth", "audiences"): "audiences",
    ("auth", "group-audiences"): "group_audiences",
    ("auth", "service-audiences"): "service_audiences",
    ("auth", "service-identity"): "service_identity",
    ("trash", "days"): "trash_days",
    ("jobs", "share"): "job_share",
}
_ENV_PREFIX = "KB_"


def _app_root_from(init: dict[str, Any]) -> Path:
    return Path(init.get("app_root") or os.environ.get("KB_APP_ROOT") or Path.cwd())


def _config_file_from(init: dict[str, Any], root: Path) -> tuple[Path, bool]:
    """The YAML file to read and whether the user named it (a named file must exist)."""
    named = init.get("config_file") or os.environ.get("KB_CONFIG")
    if named:
        path = Path(named)
        return (path if path.is_absolute() else root / path), True
    return root / CONFIG_FILE_NAME, False


class _YamlSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], init_kwargs: dict[str, Any]):
        super().__init__(settings_cls)
        self._init = init_kwargs

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover
        return None, field_name, False  # unused: __call__ supplies everything

    def __call__(self) -> dict[str, Any]:
        root = _app_root_from(self._init)
        path, named = _config_file_from(self._init, root)
        if not path.is_file():
            if named:
                raise SettingsError(f"KB_CONFIG: config file {path} does not exist")
            return {}
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8-sig")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise SettingsError(f"KB_CONFIG: cannot read config file {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise SettingsError(f"KB_CONFIG: config file {path} must hold a YAML mapping")
        values: dict[str, Any] = {}
        for keys, name in _YAML_KEYS.items():
            node: Any = data
            for key in keys:
                node = node.get(key) if isinstance(node, dict) else None
            if node is not None:
                values[name] = node
        return values


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=_ENV_PREFIX, extra="ignore", frozen=True)

    app_root: Path = Field(default_factory=Path.cwd, description="KB_APP_ROOT: relative paths resolve here")
    config_file: Path | None = Field(default=None, description="KB_CONFIG: the YAML config file")
    base_path: str = Field(default="knowledge_base/", description="KB_BASE_PATH / knowledge.base-path")
    database_url: str | None = Field(default=None, description="KB_DATABASE_URL; default a SQLite file")
    milvus_uri: str | None = Field(default=None, description="KB_MILVUS_URI; default a Milvus Lite directory")
    milvus_token: str | None = Field(default=None, description="KB_MILVUS_TOKEN for a Milvus server")
    embedding_model: str = Field(default="BAAI/bge-m3", description="KB_EMBEDDING_MODEL: hub id or folder")
    embedding_device: str | None = Field(default=None, description="KB_EMBEDDING_DEVICE: cpu, cuda, ...")
    embedding_precision: Literal["auto", "fp32", "bf16", "fp16", "int8"] = Field(
        default="auto", description="KB_EMBEDDING_PRECISION: auto = fp16 on GPU, bf16 on CPUs with bf16, else fp32")
    embedding_fallback: Literal["use-multilingual-v3", "none"] = Field(
        default="use-multilingual-v3",
        description="KB_EMBEDDING_FALLBACK: the dense model used while KB_EMBEDDING_MODEL is not on this machine "
                    "(use-multilingual-v3: built in, 512-d, English and Chinese; none: BM25 only until it is)")
    max_upload_bytes: int = Field(default=5 * 1024 * 1024, description="KB_MAX_UPLOAD_BYTES")
    l0_matching: Literal["words", "substring"] = Field(
        default="words",
        description="KB_L0_MATCHING: words (word-aligned, ranked) or substring (the spec's literal rule)")
    roles: dict[str, str] | str | None = Field(
        default=None,
        description="KB_ROLES: who may use the console once sign-in is configured: e-mail addresses, domains "
                    "(@example.com) or groups (group:ops) -> viewer, curator or admin (JSON or who=role,who=role)")
    service_identity: str = Field(
        default="agent", min_length=1, max_length=64,
        description="KB_SERVICE_IDENTITY: who in-process calls without a user act as (an admin), as recorded on "
                    "their writes")
    l0_snapshot: str = Field(
        default="kb_l0_snapshot.bin",
        description="KB_L0_SNAPSHOT: where L0 saves its entries so the next open parses only changed files "
                    "(relative to the app root); off: always scan in full")
    audiences: dict[str, list[str]] = Field(
        default_factory=dict,
        description="KB_AUDIENCES: default audiences of folders (JSON: folder -> groups) for pages without "
                    "frontmatter `audience`; a page with neither is for everyone")
    group_audiences: dict[str, list[str]] = Field(
        default_factory=dict,
        description="KB_GROUP_AUDIENCES: the audiences a signed-in user's sign-in groups give (JSON: group -> "
                    "audiences); users with no mapped group read only pages for everyone, admins every page")
    service_audiences: list[str] | None = Field(
        default=None,
        description="KB_SERVICE_AUDIENCES: the audiences in-process agents (the service identity) read (JSON "
                    "list); default every page")
    l0_synonyms: list[list[str]] = Field(
        default_factory=list,
        description="KB_L0_SYNONYMS: synonym groups (JSON list of lists) added to the knowledge base's "
                    "_synonyms.yaml: any word of a group stands for the group's keywords in L0")
    l0_generic_docs: int | None = Field(
        default=None, ge=1,
        description="KB_L0_GENERIC_DOCS: a keyword claimed by more pages than this is generic and does not decide an "
                    "answer alone (L1 does); default the larger of 5 and 1 % of the pages")
    default_language: str = Field(
        default="en", pattern=r"^[a-z]{2}$",
        description="KB_DEFAULT_LANGUAGE: the language of a query without CJK characters; a page with translations "
                    "is served in the query's language")
    fulltext: Literal["auto", "sqlite", "milvus"] = Field(
        default="auto", description="KB_FULLTEXT: BM25 engine; auto = SQLite FTS5 beside Milvus Lite, Milvus BM25 "
                                    "on a server")
    refresh_interval: float = Field(
        default=1.0, ge=0, le=3600,
        description="KB_REFRESH_INTERVAL: seconds between checks of the change feed (other processes' writes); 0 = off")
    watch: bool = Field(
        default=False,
        description="KB_WATCH: watch the knowledge base folder and sync changed files (one watcher per knowledge "
                    "base across processes); the console turns it on, agent processes leave it off")
    backend_timeout: float = Field(
        default=10.0, gt=0, le=600,
        description="KB_BACKEND_TIMEOUT: seconds any database or Milvus call may take before it fails")
    tool_timeout: float = Field(
        default=10.0, gt=0, le=600,
        description="KB_TOOL_TIMEOUT: seconds an MCP tool call may take; a longer one returns an error result and "
                    "frees its place")
    job_share: float = Field(
        default=0.25, gt=0, le=1,
        description="KB_JOB_SHARE: while agents look things up (any lookup in the last 10 s, from the call log), a "
                    "job (reconcile, re-index all, an upload) works at most this share of its time, resting after "
                    "each document; 1 = never rests")
    min_dense_score: float | None = Field(
        default=None, ge=-1.0, le=1.0,
        description="KB_MIN_DENSE_SCORE: cosine a dense-only L1 hit needs (default: the model's own, 0.4 for BGE-M3)")
    trash_days: int = Field(
        default=30, ge=0, le=36500,
        description="KB_TRASH_DAYS: days a deleted document is kept in the trash (kb_trash/ at the app root, outside "
                    "the knowledge base) before the purge removes it; 0 = at the next purge")
    log_file: str | None = Field(
        default=None,
        description="KB_LOG_FILE: a rotating JSON-lines log of this process (INFO and above; `{pid}` becomes the "
                    "process id); unset = none")
    metrics_port: int | None = Field(
        default=None, ge=0, le=65535,
        description="KB_METRICS_PORT: serve Prometheus metrics on this port (0 or unset = off)")
    metrics_host: str = Field(
        default="127.0.0.1", min_length=1,
        description="KB_METRICS_HOST: the address KB_METRICS_PORT listens on (loopback by default)")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        init_kwargs = dict(getattr(init_settings, "init_kwargs", {}) or {})
        return init_settings, env_settings, _YamlSource(settings_cls, init_kwargs)

    @field_validator("app_root")
    @classmethod
    def _app_root_is_a_directory(cls, value: Path) -> Path:
        root = value.expanduser().absolute()
        if not root.is_dir():
            raise ValueError(f"KB_APP_ROOT: {root} is not a directory")
        return root

    @field_validator("base_path")
    @classmethod
    def _base_path_not_blank(cls, value: str) -> str:
        if not str(value).strip():
            raise ValueError("KB_BASE_PATH / knowledge.base-path must not be empty")
        if "\x00" in value:
            raise ValueError("KB_BASE_PATH / knowledge.base-path contains a NUL character")
        return str(value).strip()

    @field_validator("max_upload_bytes")
    @classmethod
    def _positive_upload_limit(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("KB_MAX_UPLOAD_BYTES must be a positive number of bytes")
        return value

    @field_validator("milvus_uri")
    @classmethod
    def _milvus_lite_path_ends_with_db(cls, value: str | None) -> str | None:
        if value and "://" not in value and not value.rstrip("/").endswith(".db"):
            raise ValueError("KB_MILVUS_URI: a Milvus Lite path must end with '.db' (it is created as a directory); "
                             "a server is reached as http://host:19530")
        return value.rstrip("/") if value else value

    @field_validator("roles")
    @classmethod
    def _roles_parse(cls, value: dict[str, str] | str | None) -> dict[str, str] | str | None:
        try:
            RoleMap.parse(value)
        except SettingsError as exc:
            raise ValueError(str(exc)) from exc
        return value

    def described(self) -> list[tuple[str, str]]:
        """Every setting as (environment variable, value) for an admin to read; the Milvus token is hidden and
        a database URL's password masked."""
        rows = []
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            variable = re.match(r"(KB_[A-Z0-9_]+)", field.description or "")
            if name == "milvus_token" and value:
                shown = "*** (set)"
            elif name == "database_url" and value:
                shown = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", str(value))
            else:
                shown = "" if value is None else str(value)
            rows.append((variable.group(1) if variable else f"{_ENV_PREFIX}{name.upper()}", shown))
        return rows

    @property
    def role_map(self) -> RoleMap:
        return RoleMap.parse(self.roles)

    @field_validator("embedding_model")
    @classmethod
    def _model_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("KB_EMBEDDING_MODEL must not be empty")
        return value.strip()

    # -- derived paths ---------------------------------------------------------------------------------
    def resolve_path(self, value: str | Path) -> Path:
        return resolve_path(value, self.app_root)

    @property
    def base_dir(self) -> Path:
        """The knowledge base directory on disk."""
        return self.resolve_path(self.base_path)

    @property
    def l0_snapshot_path(self) -> Path | None:
        value = self.l0_snapshot.strip()
        return None if value.lower() in ("", "off", "none", "0") else self.resolve_path(value)

    @property
    def trash_dir(self) -> Path:
        """Where deleted documents wait: `kb_trash/` at the app root. Never a folder the scan reads: when the
        knowledge base holds the app root (`KB_BASE_PATH=.`), it is the hidden `.kb_trash/` (the scan skips
        hidden folders), so reconcile and the watcher never index a trashed file."""
        trash = self.app_root / "kb_trash"
        try:
            inside = trash.resolve().is_relative_to(self.base_dir.resolve())
        except (OSError, RuntimeError):
            inside = False
        return self.app_root / ".kb_trash" if inside else trash

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.app_root / 'kb.sqlite3').as_posix()}"

    @property
    def resolved_milvus_uri(self) -> str:
        if self.milvus_uri and "://" in self.milvus_uri:
            return self.milvus_uri
        return str(self.resolve_path(self.milvus_uri or "kb_milvus.db"))


def resolve_path(value: str | os.PathLike[str], app_root: str | os.PathLike[str]) -> Path:
    """The one path resolver: `~` expanded, relative paths taken against the application root. Settings and
    the L0 index both use it, so they never disagree about where `base_path` is."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(app_root) / path


def load_settings(**overrides: Any) -> Settings:
    """Build `Settings`, turning pydantic's report into a `SettingsError` that names the setting."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = "; ".join(
            f"{_ENV_PREFIX}{'.'.join(str(p) for p in err['loc']).upper()}: {err['msg']}" for err in exc.errors()
        )
        raise SettingsError(f"invalid settings: {problems}") from exc
