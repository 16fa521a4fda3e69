"""The path rule: where a document may live. A document lives at `<category>/<file>.md`; this module says
which categories (folder paths) and file names are allowed, why one is not (`category_problem`,
`validate_category`, `validate_file_name`, with a suggestion where one helps), and the folder trees of a set
of categories (`category_folders`, `categories_below`). Pure: no file is touched; `folder.KnowledgeFolder`
applies the rule to the knowledge-base folder."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

from kb_core.errors import UploadRejected

__all__ = ["CATEGORY_RULE", "MARKDOWN_SUFFIXES", "MAX_CATEGORY_CHARS", "MAX_DEPTH", "MAX_NAME_BYTES", "MAX_PATH_CHARS",
           "categories_below", "category_folders", "category_problem", "suggest_category", "validate_category",
           "validate_file_name"]

# -- the path rule ---------------------------------------------------------------------------------------
# A document lives at <category>/<file>.md, and its category is its folder path under the knowledge base, at
# any depth (`api`, `apisix/docs/en/latest/plugins`). Each folder name: 1-64 letters, digits, '-', '_' or
# '.', not starting with '.' (hidden) or '-', not ending with '.' (Windows drops it), and not a device name Windows
# reserves (`con`, `nul`, `com1`, ... in any case, with or without an extension); at most MAX_DEPTH folders and
# MAX_CATEGORY_CHARS characters in all; the display path (`knowledge_base/<category>/<file>.md`) fits the
# database's MAX_PATH_CHARS.
SEGMENT_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$")
MAX_DEPTH = 16
MAX_CATEGORY_CHARS = 255  # api_document.category
MAX_PATH_CHARS = 512  # api_document.file_path
_WINDOWS_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$",
                               *(f"{port}{i}" for port in ("COM", "LPT") for i in range(10))})  # COM¹ folds to COM1
# what Windows does not allow in a file name (besides '/', '\\' and control characters, refused anyway): a
# checkout of the folder there would fail
_WINDOWS_FORBIDDEN = '<>:"|?*'
_LOOK_ALIKE_SLASHES = "\u2044\u2215\u29f8\u29f9\u2571\u2572\uff0f\uff3c\u244a\u29f5\u27cb\u27cd"
MAX_NAME_BYTES = 200  # well under the 255-byte file name limit of common file systems, leaves room for temp names
MARKDOWN_SUFFIXES = (".md", ".markdown")  # what is accepted; the folder holds `.md` (sync and L0 scan only those)
CATEGORY_RULE = (f"folder names of 1-64 letters, digits, '-', '_' or '.' (not starting with '.' or '-'), "
                 f"separated by '/', at most {MAX_DEPTH} levels and {MAX_CATEGORY_CHARS} characters "
                 "(e.g. api, or apisix/docs/en/latest/plugins)")


def suggest_category(category: str) -> str | None:
    """A valid category close to what was typed ("Gateway Plugins" -> "gateway-plugins"), or None."""
    if not isinstance(category, str):
        return None
    segments = []
    for part in unicodedata.normalize("NFKC", category).strip().lower().split("/"):
        slug = re.sub(r"[^a-z0-9_.-]+", "-", part.strip())
        slug = re.sub(r"-{2,}", "-", slug).strip("-_.")[:64].rstrip("-_.")
        if slug:
            segments.append(slug)
    suggestion = "/".join(segments)
    return suggestion if segments and _category_problem(suggestion) is None and suggestion != category else None


def _segment_problem(segment: str) -> str | None:
    if not SEGMENT_PATTERN.fullmatch(segment):
        return f"the folder name {segment!r} is not allowed"
    if _reserved(segment):
        return f"the folder name {segment!r} is reserved on Windows (a device name)"
    if segment.endswith("."):
        return f"the folder name {segment!r} ends with '.' (Windows drops it)"
    return None


def _reserved(name: str) -> bool:
    """Whether Windows reserves `name` for a device: `con`, `NUL.md`, `com1.notes.md`, `lpt9 .md` (any case)."""
    folded = name if name.isascii() else unicodedata.normalize("NFKC", name)  # NFKC leaves ASCII as it is
    return folded.split(".")[0].strip().upper() in _WINDOWS_RESERVED


def _category_problem(category: object) -> str | None:
    if not isinstance(category, str) or not category:
        return "no category"
    return _category_string_problem(category)


@functools.lru_cache(maxsize=8192)
def _category_string_problem(category: str) -> str | None:
    """Pure, and a scan asks it once per file for a few distinct folders: remembered."""
    segments = category.split("/")
    if len(segments) > MAX_DEPTH or len(category) > MAX_CATEGORY_CHARS:
        return f"the category is deeper than {MAX_DEPTH} folders or longer than {MAX_CATEGORY_CHARS} characters"
    return next((problem for problem in map(_segment_problem, segments) if problem), None)


def category_problem(category: object) -> str | None:
    """What is wrong with `category` under the path rule, or `None` when it is a valid category."""
    return _category_problem(category)


def validate_category(category: str) -> str:
    problem = _category_problem(category)
    if problem is not None:
        suggestion = suggest_category(category)
        raise UploadRejected(f"invalid category {category!r} ({problem}): use {CATEGORY_RULE}"
                             + (f"; did you mean {suggestion!r}?" if suggestion else ""))
    return category


def category_folders(categories: Iterable[str]) -> list[str]:
    """Every category and every folder above one (`apisix`, `apisix/docs`, `apisix/docs/en`), in tree order
    (a folder right before what lies below it): the choices of a filter in which a folder stands for its
    whole subtree. Work per distinct category, not per document."""
    folders: set[str] = set()
    for category in set(categories):
        parts = category.split("/") if category else []
        folders.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
    return sorted(folders, key=lambda folder: folder.split("/"))


def categories_below(categories: Iterable[str], folders: Iterable[str]) -> set[str]:
    """The categories among `categories` that are one of `folders` or lie below one (`apisix/docs` takes
    `apisix/docs/en/latest`, not `apisix/docs-old`)."""
    chosen = set(folders)
    below = set()
    for category in set(categories):
        parts = category.split("/") if category else []
        if any("/".join(parts[:depth]) in chosen for depth in range(1, len(parts) + 1)):
            below.add(category)
    return below


# A name every check below passes unchanged (ASCII letters, digits, `_`, `-`, single dots, lower-case `.md`):
# the scan meets nearly only these, and the full checks cost ~17 us a name (0.5 s at 30,000 files).
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*\.md")


def validate_file_name(file_name: str) -> str:
    """The NFC-normalised plain file name it is stored under (`x.markdown` becomes `x.md`), or `UploadRejected`
    saying what is wrong with it."""
    if isinstance(file_name, str) and len(file_name) <= MAX_NAME_BYTES and _PLAIN_NAME.fullmatch(file_name) \
            and not _reserved(file_name):
        return file_name
    return _validate_file_name_fully(file_name)


def _validate_file_name_fully(file_name: str) -> str:
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
    if _reserved(name):
        raise UploadRejected(f"the file name {file_name!r} is reserved on Windows (a device name: con, prn, aux, "
                             "nul, com1-9, lpt1-9); choose another name")
    if any(ch in _WINDOWS_FORBIDDEN for ch in name):
        raise UploadRejected(f"the file name {file_name!r} contains a character other systems do not allow in "
                             f"file names ({' '.join(_WINDOWS_FORBIDDEN)}); choose another name")
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
