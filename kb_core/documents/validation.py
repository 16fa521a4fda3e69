"""Validation of what a curator uploads: file name, category, bytes. Pure; raises `UploadRejected`."""

from __future__ import annotations

import re
import unicodedata

from kb_core.errors import UploadRejected

__all__ = ["UploadRejected", "decode_markdown", "suggest_category", "validate_category", "validate_file_name"]

CATEGORY_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_WINDOWS_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)),
                               *(f"LPT{i}" for i in range(10))})
_LOOK_ALIKE_SLASHES = "\u2044\u2215\u29f8\u29f9\u2571\u2572\uff0f\uff3c\u244a\u29f5\u27cb\u27cd"
MAX_NAME_BYTES = 200  # well under the 255-byte file name limit of common file systems, leaves room for temp names


MARKDOWN_SUFFIXES = (".md", ".markdown")  # what is accepted; the folder holds `.md` (sync and L0 scan only those)


def suggest_category(category: str) -> str | None:
    """A valid category close to what was typed ("Gateway Plugins" -> "gateway-plugins"), or None."""
    if not isinstance(category, str):
        return None
    folded = unicodedata.normalize("NFKC", category).strip().lower()
    slug = re.sub(r"[^a-z0-9_-]+", "-", folded)
    slug = re.sub(r"-{2,}", "-", slug).strip("-_")[:64].rstrip("-_")
    return slug if slug and CATEGORY_PATTERN.fullmatch(slug) and slug != category else None


def validate_category(category: str) -> str:
    if not isinstance(category, str) or not CATEGORY_PATTERN.fullmatch(category):
        suggestion = suggest_category(category)
        raise UploadRejected(
            f"invalid category {category!r}: use 1-64 lower-case letters, digits, '-' or '_', "
            "starting with a letter or digit (e.g. api, domain, troubleshooting)"
            + (f"; did you mean {suggestion!r}?" if suggestion else "")
        )
    return category


def validate_file_name(file_name: str) -> str:
    """The NFC-normalised plain file name it is stored under (`x.markdown` becomes `x.md`), or `UploadRejected`
    saying what is wrong with it."""
    if not isinstance(file_name, str) or not file_name:
        raise UploadRejected("the file name is empty")
    name = unicodedata.normalize("NFC", file_name)
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in name):
        raise UploadRejected(f"the file name {file_name!r} contains control characters")
    if "/" in name or "\\" in name:
        raise UploadRejected(f"the file name {file_name!r} must be a plain name, without '/' or '\\'")
    folded = unicodedata.normalize("NFKC", name)
    if any(ch in folded for ch in "/\\") or any(ch in name for ch in _LOOK_ALIKE_SLASHES):
        raise UploadRejected(f"the file name {file_name!r} contains a character that looks like a slash")
    if folded.split(".")[0].strip().upper() in _WINDOWS_RESERVED:
        raise UploadRejected(f"the file name {file_name!r} is reserved on Windows; choose another name")
    if ".." in name:
        raise UploadRejected(f"the file name {file_name!r} must not contain '..'")
    if name != name.strip():
        raise UploadRejected(f"the file name {file_name!r} starts or ends with white space")
    if name.startswith("."):
        raise UploadRejected(f"the file name {file_name!r} starts with '.' (hidden files are not indexed)")
    suffix = next((s for s in MARKDOWN_SUFFIXES if name.lower().endswith(s) and len(name) > len(s)), None)
    if suffix is None:
        raise UploadRejected(f"only Markdown files named '<name>.md' or '<name>.markdown' are accepted, "
                             f"not {file_name!r}")
    if suffix != ".md":
        name = name[: -len(suffix)] + ".md"  # stored as .md: the folder scan, sync and the watcher look for those
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise UploadRejected(f"the file name is too long ({len(name.encode('utf-8'))} bytes, at most {MAX_NAME_BYTES})")
    return name


def decode_markdown(data: bytes, *, max_bytes: int, file_name: str = "the file") -> str:
    """UTF-8 text (an optional BOM dropped), or `UploadRejected` for oversized, binary or non-UTF-8 bytes."""
    if not isinstance(data, (bytes, bytearray)):
        raise UploadRejected(f"{file_name}: expected bytes, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise UploadRejected(f"{file_name} is {len(data):,} bytes; the limit is {max_bytes:,} (KB_MAX_UPLOAD_BYTES)")
    if b"\x00" in data:
        raise UploadRejected(f"{file_name} looks binary (it contains NUL bytes), not Markdown text")
    try:
        text = bytes(data).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UploadRejected(f"{file_name} is not UTF-8 text (byte {exc.start}: {exc.reason})") from exc
    if not text.strip():
        raise UploadRejected(f"{file_name} is empty")
    return text
