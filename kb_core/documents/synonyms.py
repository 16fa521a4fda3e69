"""Curator synonyms: groups of words that mean one thing (`[限流, rate limiting, limit-req]`), kept with the
documents in `<knowledge base>/_synonyms.yaml` (one list per group) and/or in settings (`l0.synonyms`).

L0 lets any spelling of a group stand for the group's keywords: a query saying "rate limiting" matches the
documents whose keyword is `limit-req` as `limit-req` itself would (the same word-aligned rule), and the "why"
panel says "via synonym". The file is the source of truth for the console's editor; the settings' groups are
added to it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import yaml

from kb_core.documents.folder import write_atomic
from kb_core.errors import InvalidInputError
from kb_core.terms import normalize_term

SYNONYMS_FILE = "_synonyms.yaml"
MAX_GROUPS = 10_000
MAX_GROUP_SIZE = 32
MAX_WORD_CHARS = 100
MAX_FILE_BYTES = 1024 * 1024

Groups = tuple[tuple[str, ...], ...]


def clean_groups(raw: object, where: str = SYNONYMS_FILE) -> Groups:
    """Validated groups: a list of lists of strings, each group 2+ distinct words (normalised alike words
    count once). Raises `InvalidInputError` naming what is wrong."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidInputError(f"{where}: expected a list of synonym groups such as [[限流, rate limiting]]")
    if len(raw) > MAX_GROUPS:
        raise InvalidInputError(f"{where}: {len(raw)} groups; at most {MAX_GROUPS}")
    groups: list[tuple[str, ...]] = []
    for number, group in enumerate(raw, 1):
        if not isinstance(group, list) or not all(isinstance(w, (str, int, float)) for w in group):
            raise InvalidInputError(f"{where}: group {number} is not a list of words")
        words: dict[str, str] = {}
        for word in (str(w).strip() for w in group):
            if len(word) > MAX_WORD_CHARS:
                raise InvalidInputError(f"{where}: group {number}: a word longer than {MAX_WORD_CHARS} characters")
            if normalize_term(word):
                words.setdefault(normalize_term(word), word)
        if len(words) > MAX_GROUP_SIZE:
            raise InvalidInputError(f"{where}: group {number} has {len(words)} words; at most {MAX_GROUP_SIZE}")
        if len(words) >= 2:
            groups.append(tuple(words.values()))
    return tuple(groups)


def parse_lines(text: str) -> Groups:
    """The console editor's form: one group per line, words separated by commas."""
    return clean_groups([[w for w in line.split(",")] for line in text.splitlines() if line.strip()], "synonyms")


def as_lines(groups: Groups) -> str:
    return "\n".join(", ".join(group) for group in groups)


Signature = tuple[int, int]


class SynonymsFile:
    """`_synonyms.yaml` of one knowledge base, read and written only here: L0 (`KnowledgeIndex`) is handed the
    groups, it never opens the file itself."""

    def __init__(self, base_dir: str | os.PathLike[str]):
        self.path = Path(base_dir) / SYNONYMS_FILE
        self._seen: Signature | None = None  # the version `changed_groups` last read

    def signature(self) -> Signature | None:
        """(mtime ns, size) of the file, or None when there is none: cheap to poll for changes."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def load(self) -> Groups:
        try:
            if not self.path.is_file() or self.path.is_symlink():
                return ()
            data = self.path.read_bytes()[: MAX_FILE_BYTES + 1]
        except OSError as exc:
            raise InvalidInputError(f"cannot read {SYNONYMS_FILE}: {exc}") from exc
        if len(data) > MAX_FILE_BYTES:
            raise InvalidInputError(f"{SYNONYMS_FILE} is larger than {MAX_FILE_BYTES // 1024} KiB")
        try:
            return clean_groups(yaml.safe_load(data.decode("utf-8")))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"{SYNONYMS_FILE} is not valid YAML: {exc}") from exc

    def changed_groups(self, *, force: bool = False) -> Groups | None:
        """The file's groups when it changed (size or time) since this last read it, else None; with `force`,
        read it anyway. A broken file raises `InvalidInputError` once: the next poll waits for a new version."""
        signature = self.signature()
        if not force and signature == self._seen:
            return None
        self._seen = signature
        return self.load()

    def save(self, groups: Groups) -> None:
        """Write the file atomically. What was read last is not moved on: the next poll reads the saved groups
        back, so a save by another process in the same instant is not mistaken for this one."""
        header = ("# Synonym groups for L0: any word of a group stands for the group's keywords.\n"
                  "# Edited in the console (Documents -> Keyword map) or by hand; one list per group.\n")
        body = yaml.safe_dump([list(g) for g in groups], allow_unicode=True, default_flow_style=None,
                              sort_keys=False)
        write_atomic(self.path, (header + body).encode("utf-8"))


def merged(*sources: Iterable[Sequence[str]]) -> Groups:
    """Groups from several sources, in order, without repeating a group."""
    seen: dict[tuple[str, ...], tuple[str, ...]] = {}
    for source in sources:
        for group in source:
            key = tuple(sorted(normalize_term(w) for w in group))
            seen.setdefault(key, tuple(group))
    return tuple(seen.values())
