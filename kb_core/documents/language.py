"""The language of a document and of a query, and which documents are translations of one page.

A document's language: frontmatter `lang`, `language` or `locale` when present; else a folder named for a
language (`docs/zh/...`, `zh-cn`, `zh_CN`, `cn`) or a suffix (`limit-req.zh.md`); else the script of its
text (CJK -> `zh`, Latin -> `en`, otherwise `und`).

Translations: documents whose paths differ only in that language folder or suffix, or that share a
frontmatter `translationKey`, are one page in several languages (one translation group).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["DEFAULT_LANGUAGE", "document_language", "normalize_language", "query_language", "translation_key"]

DEFAULT_LANGUAGE = "en"
# language tags seen as folder names or suffixes in documentation trees -> the language they mean
_ALIASES = {"cn": "zh", "zh-hans": "zh", "zh-hant": "zh", "zh-tw": "zh", "zh-hk": "zh", "jp": "ja", "kr": "ko"}
_KNOWN = frozenset({"en", "zh", "ja", "ko", "fr", "de", "es", "pt", "ru"})
_TAG = re.compile(r"^([a-z]{2})(?:[-_]([a-z]{2,4}))?$")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")
_SUFFIX = re.compile(r"^(?P<stem>.+)\.(?P<tag>[A-Za-z]{2}(?:[-_][A-Za-z]{2,4})?)\.md$")


def normalize_language(tag: object) -> str | None:
    """`zh` for `zh`, `zh-CN`, `zh_cn`, `cn`; `en` for `en-US`; `None` for what is not a language tag."""
    if not isinstance(tag, str):
        return None
    return _normalized(tag) if len(tag) <= 64 else _normalize(tag)


@functools.lru_cache(maxsize=4096)
def _normalized(tag: str) -> str | None:
    """`_normalize`, remembered: a scan asks it for every folder of every path, of a few distinct names."""
    return _normalize(tag)


def _normalize(tag: str) -> str | None:
    lowered = tag.strip().lower()
    if lowered in _ALIASES:
        return _ALIASES[lowered]
    match = _TAG.fullmatch(lowered.replace("_", "-"))
    if match is None or match.group(1) not in _KNOWN:
        return None
    return _ALIASES.get(lowered.replace("_", "-"), match.group(1))


_SEGMENT_SUFFIX = re.compile(r"^(?P<stem>.+)[-_.](?P<tag>[A-Za-z]{2}(?:[-_][A-Za-z]{2,4})?)$")


def _path_language(relative: str) -> tuple[str | None, str]:
    """(the language a path names, the path with that marker taken out). A marker is a folder named for a
    language (`docs/zh/...`), a folder with a language suffix (`gateway-zh/` beside `gateway/`) or a file
    suffix (`limit-req.zh.md`)."""
    folders, _, name = relative.rpartition("/")
    parts = folders.split("/") if folders else []
    for i in range(len(parts) - 1, -1, -1):  # the deepest language folder (`docs/en/...`)
        language = normalize_language(parts[i])
        if language is not None:
            return language, "/".join([*parts[:i], "{lang}", *parts[i + 1:], name])
    for i in range(len(parts) - 1, -1, -1):
        suffix = _SEGMENT_SUFFIX.match(parts[i])
        language = normalize_language(suffix.group("tag")) if suffix else None
        if suffix is not None and language is not None:
            return language, "/".join([*parts[:i], suffix.group("stem"), *parts[i + 1:], name])
    suffix = _SUFFIX.match(name)
    if suffix is not None:
        language = normalize_language(suffix.group("tag"))
        if language is not None:
            return language, "/".join([*parts, f"{suffix.group('stem')}.md"])
    return None, relative


# What `_CJK` and `_LATIN` match, by code point (1: Latin, 2: CJK): the script of every
# document is counted at start-up, and two regex `findall`s over 4,000 characters cost about 0.4 ms a document
# (40 s of a 100,000-page scan); a table look-up and a count in numpy do the same in a fraction of it.
_SCRIPT = np.zeros(0x10000, dtype=np.uint8)
_SCRIPT[[ord(c) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"]] = 1
for _low, _high in ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF)):
    _SCRIPT[_low:_high + 1] = 2
_ASCII_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _script_counts(sample: str) -> tuple[int, int]:
    """(CJK characters, Latin letters) of `sample`: `len(_CJK.findall(sample)), len(_LATIN.findall(sample))`."""
    if sample.isascii():
        data = sample.encode("ascii")
        return 0, len(data) - len(data.translate(None, _ASCII_LETTERS))
    # UTF-16 code units: a character above U+FFFF is two surrogates, which count as neither (as it does)
    codes = np.frombuffer(sample.encode("utf-16-le", "surrogatepass"), dtype=np.uint16)
    counts = np.bincount(_SCRIPT.take(codes), minlength=3)
    return int(counts[2]), int(counts[1])


def _script_language(text: str) -> str:
    sample = text[:4000]
    cjk, latin = _script_counts(sample)
    if cjk and cjk * 4 >= latin:  # one CJK character carries about a word: weigh them up
        return "zh"
    return "en" if latin else "und"


def document_language(relative: str, extra: Mapping[str, Any] | None, text: str) -> str:
    for key in ("lang", "language", "locale"):
        language = normalize_language((extra or {}).get(key))
        if language is not None:
            return language
    language, _ = _path_language(relative)
    return language or _script_language(text)


def translation_key(relative: str, extra: Mapping[str, Any] | None) -> str:
    """The key a document shares with its translations: its path with the language marker taken out (so
    `gateway-zh/x.md` pairs with `gateway/x.md`, `docs/zh/x.md` with `docs/en/x.md`), or `translationKey`."""
    key = (extra or {}).get("translationKey")
    if isinstance(key, str | int) and str(key).strip():
        return f"key:{str(key).strip()}"
    return f"path:{_path_language(relative)[1]}"


def query_language(query: str, default: str = DEFAULT_LANGUAGE) -> str:
    """A query with any CJK character is asked in `zh`; anything else in `default`."""
    return "zh" if isinstance(query, str) and _CJK.search(query) else default
