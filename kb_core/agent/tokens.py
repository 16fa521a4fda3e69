"""The MCP server's bearer tokens, each a named caller with what it may read.

`KB_MCP_TOKENS_FILE` is either YAML, a list of tokens:

    - name: support-bot            # the caller the call log and the metrics name
      token: 3f9c…                 # at least 16 characters (`openssl rand -hex 32`)
      audiences: [support]         # pages it may read: public ones and those for these groups (absent: all)
      categories: [gateway, faq]   # optional: only these folders (with their sub-folders)

or the older form, one bare token per line (`#` comments), each able to read everything and named by a digest
of itself. `KB_MCP_TOKEN` is one more token that reads everything, named `default`. The file is read again when
it changes (checked at most once a second), so a token removed from it is refused from the next request on,
without a restart; a file that no longer parses refuses every token it held (and says why in the log) rather
than keep serving a list someone meant to change.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from kb_core.documents.scope import ALL, AudienceRule, Scope, check_categories
from kb_core.errors import InvalidInputError, SettingsError

log = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 16
_NAME = re.compile(r"^[\w.@+-]{1,64}$")
RECHECK_SECONDS = 1.0


def token_label(token: str) -> str:
    """A token's name in logs and session ownership when it has no other: a short digest, never the token."""
    return "token-" + hashlib.sha256(token.encode()).hexdigest()[:8]


@dataclass(frozen=True)
class NamedToken:
    name: str
    secret: str
    audiences: frozenset[str] | None = None  # None: every page
    categories: tuple[str, ...] = ()  # empty: every folder

    @property
    def label(self) -> str:
        """Who owns a session: the digest of the secret (a renamed token keeps its sessions)."""
        return token_label(self.secret)

    def scope(self, rule: AudienceRule) -> Scope:
        """What this caller may read, with the knowledge base's folder defaults."""
        if self.audiences is None and not self.categories:
            return ALL
        return Scope(audiences=self.audiences, allowed_categories=self.categories, rule=rule)


def parse_tokens(text: str, source: str = "KB_MCP_TOKENS_FILE") -> list[NamedToken]:
    """The tokens of a tokens file's text (YAML list, or one token per line); `SettingsError` says what is
    wrong and where."""
    meaningful = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if meaningful and meaningful[0].startswith("-"):
        return _parse_yaml(text, source)
    tokens = [NamedToken(token_label(line), line) for line in meaningful]
    _check(tokens, source)
    return tokens


def _parse_yaml(text: str, source: str) -> list[NamedToken]:
    try:
        items = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SettingsError(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(items, list):
        raise SettingsError(f"{source}: expected a list of tokens (name, token, audiences, categories)")
    tokens = []
    for number, item in enumerate(items, 1):
        where = f"{source}: token {number}"
        if not isinstance(item, dict) or set(item) - {"name", "token", "audiences", "categories"}:
            raise SettingsError(f"{where}: expected name, token and optional audiences and categories")
        name, secret = item.get("name"), item.get("token")
        if not isinstance(name, str) or not _NAME.match(name.strip()):
            raise SettingsError(f"{where}: a name of 1-64 letters, digits, . @ + - or _ is needed")
        if not isinstance(secret, str):
            raise SettingsError(f"{where} ({name}): its token must be a string")
        audiences = item.get("audiences")
        if audiences is not None and (not isinstance(audiences, list) or not all(
                isinstance(a, str) and a.strip() for a in audiences)):
            raise SettingsError(f"{where} ({name}): audiences must be a list of group names")
        try:
            categories = check_categories(item.get("categories") or [], "categories")
        except InvalidInputError as exc:
            raise SettingsError(f"{where} ({name}): {exc}") from exc
        tokens.append(NamedToken(name.strip(), secret.strip(),
                                 None if audiences is None else frozenset(a.strip() for a in audiences), categories))
    _check(tokens, source)
    return tokens


def _check(tokens: Sequence[NamedToken], source: str) -> None:
    if any(len(t.secret) < MIN_TOKEN_CHARS for t in tokens):
        raise SettingsError(f"{source}: an MCP token must be at least {MIN_TOKEN_CHARS} characters (use e.g. "
                            "`openssl rand -hex 32`)")
    names = [t.name for t in tokens]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SettingsError(f"{source}: the name {twice[0]!r} is given to two tokens")


class TokenTable:
    """The tokens accepted now: the variable's and the file's, the file read again when it changes."""

    def __init__(self, token: str | None = None, tokens_file: str | os.PathLike[str] | None = None):
        self._fixed: list[NamedToken] = []
        if token and token.strip():
            self._fixed.append(NamedToken("default", token.strip()))
            _check(self._fixed, "KB_MCP_TOKEN")
        self._path = Path(tokens_file) if tokens_file else None
        self._lock = threading.Lock()
        self._version: tuple[int, int, int] | None = None
        self._checked = 0.0
        self._from_file: list[NamedToken] = []
        if self._path is not None:
            self._from_file = self._read(strict=True)

    @classmethod
    def of_secrets(cls, secrets: Sequence[str]) -> TokenTable:
        """Bare tokens given in code (tests, embedding): each reads everything, named by its digest."""
        table = cls()
        table._fixed = [NamedToken(token_label(t), t) for t in secrets]
        _check(table._fixed, "MCP tokens")
        return table

    def _read(self, *, strict: bool) -> list[NamedToken]:
        assert self._path is not None
        try:
            info = os.stat(self._path)
            self._version = (info.st_mtime_ns, info.st_size, info.st_ino)
            return parse_tokens(self._path.read_text(encoding="utf-8-sig"), f"KB_MCP_TOKENS_FILE {self._path}")
        except (OSError, UnicodeDecodeError) as exc:
            problem: Exception = SettingsError(f"KB_MCP_TOKENS_FILE: cannot read {self._path}: {exc}")
        except SettingsError as exc:
            problem = exc
        if strict:
            raise problem
        log.error("%s: its tokens are refused until it is fixed", problem)
        return []

    def tokens(self) -> list[NamedToken]:
        """Every accepted token now (the file re-read if it changed since the last look, a second ago at most)."""
        if self._path is not None:
            now = time.monotonic()
            if now - self._checked >= RECHECK_SECONDS:
                with self._lock:
                    if now - self._checked >= RECHECK_SECONDS:
                        self._checked = now
                        self._refresh()
        return [*self._fixed, *self._from_file]

    def _refresh(self) -> None:
        try:
            info = os.stat(self._path)  # type: ignore[arg-type]
            version = (info.st_mtime_ns, info.st_size, info.st_ino)
        except OSError:
            version = None
        if version != self._version:
            before = {t.name for t in self._from_file}
            self._from_file = self._read(strict=False) if version is not None else []
            if version is None:
                self._version = None
                log.error("KB_MCP_TOKENS_FILE %s is gone: its tokens are refused", self._path)
            after = {t.name for t in self._from_file}
            log.warning("MCP tokens file %s changed: %d token(s); removed %s, added %s", self._path, len(after),
                        sorted(before - after) or "none", sorted(after - before) or "none")

    def which(self, offered: bytes) -> NamedToken | None:
        """The token `offered` is, compared with every token in constant time (how long it takes says nothing
        about which one nearly matched)."""
        found = None
        for token in self.tokens():
            if hmac.compare_digest(offered, token.secret.encode()) and found is None:
                found = token
        return found

    def __bool__(self) -> bool:
        return bool(self.tokens())

    def __len__(self) -> int:
        return len(self.tokens())
