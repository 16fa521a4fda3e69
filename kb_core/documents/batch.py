"""The preview of a whole upload batch: each file's checks plus what only shows across the batch. Pure reads.

A batch can lose a document in ways no single-file check sees: two files aimed at one path (the English and
the Chinese `route.md`: the second silently replaces the first), keywords that files of the same batch share
(L0 ambiguity the index cannot predict yet), content that is already indexed under another path. So the
batch is judged as a whole: same-target files are refused until renamed, and every verdict carries what
the upload needs (`if_match` for a replace). A folder (a directory upload) is a batch like any other: each
of its files is judged at its own category, `<category>/<its folder>`, under the one path rule.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from kb_core.documents.lint import (
    AMBIGUOUS_PREFIX,
    ERROR,
    INFO,
    WARNING,
    Finding,
    UploadPreview,
    ambiguity_warning,
    inspect_upload,
    page_of,
)
from kb_core.documents.path_rule import MARKDOWN_SUFFIXES, suggest_category, validate_category
from kb_core.errors import KnowledgeBaseError
from kb_core.keywords.entry import IndexedDocuments, split_keywords
from kb_core.terms import normalize_term

log = logging.getLogger(__name__)

class BatchAction(StrEnum):
    """What uploading a file of a batch would do."""

    NEW = "new"
    REPLACE = "replace"
    SAME = "same"
    INDEX = "index"
    CLASH = "clash"
    REFUSED = "refused"
    DUPLICATE = "duplicate"  # skipped: its bytes are indexed elsewhere already, or earlier in the batch


NEW, REPLACE, SAME, INDEX, CLASH, REFUSED, DUPLICATE = BatchAction


@dataclass(frozen=True)
class BatchFile:
    """A file of an upload batch. A single file goes to `<category>/<name>`; a file of a folder (directory
    upload) carries its `folder` under the batch's category and goes to `<category>/<folder>/<name>`."""

    upload_name: str  # the name the file arrived with; for a file of a folder, its path in it (`docs/en/route.md`)
    data: bytes
    rename: str | None = None  # the file name the curator gave it instead (to resolve a clash); the folder stays
    folder: str | None = None  # a folder's file: its folder under the category ("" = the category itself)

    @classmethod
    def in_folder(cls, path: str, data: bytes, rename: str | None = None, *, keep_top: bool = True) -> BatchFile:
        """A file of a directory upload, named by its path in the uploaded folder the way the browser sends it
        (`docs/en/route.md`: the chosen folder's own name first). `keep_top=False` drops that first folder, so
        the folder's content goes straight into the category."""
        folder = path.replace("\\", "/").rpartition("/")[0].strip("/")
        if not keep_top:
            folder = folder.partition("/")[2]
        return cls(path, data, rename, folder)

    @property
    def name(self) -> str:
        """The file name it is stored under (before the path rule turns `.markdown` into `.md`)."""
        if (self.rename or "").strip():
            return (self.rename or "").strip()
        return self.upload_name.replace("\\", "/").rpartition("/")[2] if self.folder is not None else self.upload_name

    @property
    def skipped(self) -> str | None:
        """Why a folder's file is not part of the upload at all (None: it is): files that are not Markdown
        (images, configs) and hidden ones (`.github/…`, `.DS_Store`), which the folder scan skips too. A single
        file is never skipped: the path rule tells why it is refused."""
        if self.folder is None:
            return None
        parts = self.upload_name.replace("\\", "/").split("/")
        if any(part.startswith(".") for part in parts):
            return "hidden"
        return None if parts[-1].lower().endswith(MARKDOWN_SUFFIXES) else "not Markdown"

    def category_in(self, category: str) -> str:
        """The category it goes to when the batch goes to `category`."""
        return f"{category}/{self.folder}" if self.folder else category


@dataclass(frozen=True)
class FileVerdict:
    upload_name: str
    preview: UploadPreview  # findings include the batch's own
    same_target_as: tuple[str, ...] = ()  # upload names of the other files aimed at the same path
    duplicate_of: tuple[str, ...] = ()  # indexed paths (or batch files) with byte-identical content
    indexed: bool = True  # False: the file on disk has no row with its content (placed by hand, not synced)
    duplicates_anyway: bool = False  # the curator asked to upload duplicates too (`preview_batch(...)`)
    ambiguous: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (keyword, the other documents L0 will find for it)

    @property
    def file_path(self) -> str | None:
        return self.preview.file_path

    @property
    def category(self) -> str:
        """The category to upload it into (`kb.documents.upload(verdict.preview.file_name, data,
        verdict.category)`): the batch's, or for a folder's file the folder under it."""
        return self.preview.category

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.preview.findings

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(f.message for f in self.preview.findings if f.severity == ERROR)

    @property
    def own_findings(self) -> tuple[Finding, ...]:
        """The findings without the "L0 will be ambiguous for" lines (`BatchPreview.ambiguous` groups those)."""
        return tuple(f for f in self.preview.findings if not f.message.startswith(AMBIGUOUS_PREFIX))

    @property
    def action(self) -> str:
        """new | replace (needs the curator's explicit consent) | same (identical to what is indexed: nothing to
        do) | index (identical to the file on disk, which is not indexed yet) | clash (another file of the batch
        is aimed at the same path: rename one) | refused (the file itself is unusable) | duplicate (skipped: the
        same bytes are indexed under another path, or come earlier in the batch; unless `duplicates_anyway`)."""
        if self.same_target_as:
            return CLASH
        if self.errors:
            return REFUSED
        if self.preview.current_sha256 is not None and self.preview.current_sha256 == self.preview.sha256:
            return SAME if self.indexed else INDEX
        if self.duplicate_of and not self.duplicates_anyway:
            return DUPLICATE
        return REPLACE if self.preview.replaces_existing else NEW

    @property
    def skip_reason(self) -> str | None:
        """Why uploading the batch leaves this file out, for a file that is fine in itself (None: it goes in,
        or it is refused or clashes, which `errors` and `same_target_as` say)."""
        if self.action == SAME:
            return f"identical to the indexed version of {self.file_path}: nothing to do"
        if self.action == DUPLICATE:
            return (f"duplicate of {', '.join(self.duplicate_of)}: the same content would make every keyword "
                    "ambiguous (tick “upload duplicates anyway” to upload it)")
        return None

    @property
    def if_match(self) -> str | None:
        """What `upload(..., if_match=...)` needs: the version this preview saw (None for a new file)."""
        return self.preview.current_sha256


@dataclass(frozen=True)
class BatchPreview:
    category: str
    category_problem: str | None  # one message for the whole batch, not one per file
    suggested_category: str | None
    files: tuple[FileVerdict, ...]

    @property
    def refused(self) -> tuple[FileVerdict, ...]:
        return tuple(f for f in self.files if f.action == REFUSED)

    @property
    def skipped(self) -> tuple[FileVerdict, ...]:
        """Files left out although they are fine: identical to their indexed version, or duplicates (each with
        its `skip_reason`)."""
        return tuple(f for f in self.files if f.skip_reason)

    @property
    def duplicates(self) -> tuple[FileVerdict, ...]:
        """Files whose content is indexed elsewhere or earlier in the batch (skipped or, when asked, uploaded)."""
        return tuple(f for f in self.files if f.duplicate_of and f.action in (DUPLICATE, NEW, REPLACE))

    def ambiguous(self) -> list[AmbiguousKeyword]:
        """The keywords L0 will be ambiguous for after the batch, one per keyword (normalised) however many files
        of the batch list it: the batch's files that list it and every document that will claim it, most
        claimed first. (Each file's findings still carry its own "L0 will be ambiguous for" line.)"""
        grouped: dict[str, tuple[str, list[str], list[str]]] = {}
        for verdict in self.files:
            if verdict.action in (REFUSED, CLASH, SAME, DUPLICATE):
                continue
            own = verdict.file_path or f"{verdict.upload_name} (this batch)"
            for keyword, others in verdict.ambiguous:
                _label, files, documents = grouped.setdefault(normalize_term(keyword), (keyword, [], []))
                files.append(verdict.upload_name)
                for path in (own, *others):
                    if path not in documents:
                        documents.append(path)
        found = [AmbiguousKeyword(label, tuple(files), tuple(documents))
                 for label, files, documents in grouped.values()]
        return sorted(found, key=lambda a: (-len(a.documents), a.keyword.casefold()))

    @property
    def uploadable(self) -> tuple[FileVerdict, ...]:
        """Files an upload would change something for (replacements still need the curator's tick)."""
        return () if self.blocked else tuple(f for f in self.files if f.action in (NEW, INDEX, REPLACE))

    @property
    def clashes(self) -> tuple[FileVerdict, ...]:
        return tuple(f for f in self.files if f.same_target_as)

    @property
    def blocked(self) -> str | None:
        """Why nothing of this batch may be written yet, or None."""
        if self.category_problem:
            return self.category_problem
        if self.clashes:
            return (f"{len(self.clashes)} files are aimed at the same path as another file of this batch: "
                    "rename or remove them first; nothing is written until then")
        return None


@dataclass(frozen=True)
class AmbiguousKeyword:
    """A keyword several documents will claim after the batch: the batch's files listing it, and all of them."""

    keyword: str
    files: tuple[str, ...]  # upload names of the batch's files that list it
    documents: tuple[str, ...]  # every document that will claim it (the batch's own paths first)


def _target_key(name: str) -> str:
    # case-folded: on a case-insensitive file system (macOS, Windows shares) Route.md and route.md are one file
    return unicodedata.normalize("NFC", name).casefold()


def preview_batch(index: IndexedDocuments, files: Sequence[BatchFile], category: str, *,
                  paths_with_content: Callable[[list[str]], dict[str, list[str]]] | None = None,
                  duplicates_anyway: bool = False) -> BatchPreview:
    """Per-file verdicts for uploading `files` into `category`; reads only (the index, the disk, the database).
    A file whose content is indexed under another path, or comes earlier in the batch, is a `DUPLICATE` (skipped,
    with its reason) unless `duplicates_anyway`; one identical to the indexed version at its own path is `SAME`."""
    problem, suggestion = _category_problem(category)
    # Each file is judged at its own category (a folder's file below the chosen one); the chosen category's own
    # problem is reported once for the batch, a folder's problem once per file under it.
    previews = [inspect_upload(index, f.name, f.data, f.category_in(category), check_category=problem is None)
                for f in files]
    across = _across(files, previews, paths_with_content, duplicates_anyway)
    verdicts = [_verdict(index, i, upload, preview, across)
                for i, (upload, preview) in enumerate(zip(files, previews, strict=True))]
    return BatchPreview(category, problem, suggestion, tuple(verdicts))


@dataclass(frozen=True)
class _Across:
    """What only shows across a batch, by the files' positions in it."""

    same_target: dict[int, tuple[str, ...]]  # upload names of the other files aimed at the same path
    duplicates: dict[int, list[str]]  # where the same bytes are indexed already, or come earlier in the batch
    left_out: set[int]  # duplicates that are skipped: neither their keywords nor their paths count
    in_batch: set[str]  # the paths the batch will write
    batch_terms: dict[str, list[str]]  # normalised keyword -> the files of the batch that list it
    stored: dict[str, list[str]]  # content hash -> the indexed paths with that content
    looked_up: bool  # `paths_with_content` was given (`stored` is empty when it failed)
    duplicates_anyway: bool


def _category_problem(category: str) -> tuple[str | None, str | None]:
    """What is wrong with the batch's category, and a category to suggest instead."""
    if not (category or "").strip():
        return "choose a category (or create one) for these files", None
    try:
        validate_category(category)
    except KnowledgeBaseError as exc:
        return str(exc), suggest_category(category)
    return None, None


def _across(files: Sequence[BatchFile], previews: list[UploadPreview],
            paths_with_content: Callable[[list[str]], dict[str, list[str]]] | None,
            duplicates_anyway: bool) -> _Across:
    same_target = _same_targets(files, previews)
    stored: dict[str, list[str]] = {}
    if paths_with_content is not None:
        try:
            stored = paths_with_content([p.sha256 for p in previews if p.sha256])
        except KnowledgeBaseError as exc:  # the preview still helps without it
            log.warning("cannot look up duplicate content: %s", exc)
    duplicates = _duplicates(files, previews, stored, same_target)
    left_out = {i for i, p in enumerate(previews) if i in duplicates and not duplicates_anyway
                and p.current_sha256 != p.sha256}  # skipped: neither their keywords nor their paths count
    in_batch = {p.file_path for i, p in enumerate(previews) if p.file_path and i not in left_out}
    return _Across(same_target, duplicates, left_out, in_batch, _batch_terms(files, previews, same_target, left_out),
                   stored, paths_with_content is not None, duplicates_anyway)


def _same_targets(files: Sequence[BatchFile], previews: list[UploadPreview]) -> dict[int, tuple[str, ...]]:
    """The files aimed at the same path as another file of the batch, with the others' upload names."""
    by_target: dict[str, list[int]] = {}
    for i, preview in enumerate(previews):
        if not any(f.severity == ERROR for f in preview.findings):
            by_target.setdefault(_target_key(f"{preview.category}/{preview.file_name}"), []).append(i)
    same_target: dict[int, tuple[str, ...]] = {}
    for group in by_target.values():
        if len(group) > 1:
            for i in group:
                same_target[i] = tuple(files[j].upload_name for j in group if j != i)
    return same_target


def _duplicates(files: Sequence[BatchFile], previews: list[UploadPreview], stored: dict[str, list[str]],
                same_target: dict[int, tuple[str, ...]]) -> dict[int, list[str]]:
    """Content already indexed under another path, or earlier in the batch (the first of identical files goes
    in)."""
    duplicates: dict[int, list[str]] = {}
    first_with: dict[str, int] = {}
    for i, preview in enumerate(previews):
        if not preview.sha256 or any(f.severity == ERROR for f in preview.findings):
            continue
        found = [p for p in stored.get(preview.sha256, []) if p != preview.file_path]
        if i in same_target:  # neither a duplicate nor the first of its content until it has a path of its own
            continue
        if preview.sha256 in first_with:
            found.append(f"{files[first_with[preview.sha256]].upload_name} (this batch)")
        first_with.setdefault(preview.sha256, i)
        if found:
            duplicates[i] = found
    return duplicates


def _batch_terms(files: Sequence[BatchFile], previews: list[UploadPreview], same_target: dict[int, tuple[str, ...]],
                 left_out: set[int]) -> dict[str, list[str]]:
    """The keywords of every file of the batch that will go in: with the index less the documents the batch
    replaces, they are the keywords as L0 will see them after the batch."""
    batch_terms: dict[str, list[str]] = {}
    for i, preview in enumerate(previews):
        if preview.frontmatter is None or i in same_target or i in left_out:
            continue
        for keyword in split_keywords(preview.frontmatter.keywords)[0]:
            label = preview.file_path or f"{files[i].upload_name} (this batch)"
            paths = batch_terms.setdefault(normalize_term(keyword), [])
            if label not in paths:
                paths.append(label)
    return batch_terms


def _verdict(index: IndexedDocuments, i: int, upload: BatchFile, preview: UploadPreview,
             across: _Across) -> FileVerdict:
    """One file's verdict: its own findings plus what the batch adds to them."""
    extra: list[Finding] = []
    if i in across.same_target:
        extra.append(Finding(ERROR, f"aimed at the same path as {', '.join(across.same_target[i])} in this batch "
                                    f"({preview.file_path or preview.file_name}): give one a new name"))
    if i in across.duplicates and preview.current_sha256 != preview.sha256:
        extra.append(Finding(WARNING, f"duplicate of {', '.join(across.duplicates[i])}: the same content is "
                                      "indexed there already; uploading it again makes every keyword "
                                      "ambiguous" + ("" if across.duplicates_anyway else " (skipped)")))
    own = preview.file_path or f"{upload.upload_name} (this batch)"
    ambiguous = [] if preview.frontmatter is None or i in across.left_out else \
        _ambiguous(index, preview, own, across)
    extra += [ambiguity_warning(keyword, others) for keyword, others in ambiguous]
    if upload.rename and upload.name != upload.upload_name:
        extra.insert(0, Finding(INFO, f"renamed from {upload.upload_name}"))
    indexed = not across.looked_up or preview.file_path in across.stored.get(preview.sha256, ())
    if preview.current_sha256 == preview.sha256 and not indexed:
        extra.append(Finding(INFO, f"{preview.file_path} is on disk but not indexed: uploading indexes it"))
    preview = replace(preview, findings=preview.findings + tuple(extra))
    return FileVerdict(upload.upload_name, preview, across.same_target.get(i, ()), tuple(across.duplicates.get(i, ())),
                       indexed, across.duplicates_anyway, tuple(ambiguous))


def _ambiguous(index: IndexedDocuments, preview: UploadPreview, own: str,
               across: _Across) -> list[tuple[str, tuple[str, ...]]]:
    """The file's keywords that other documents will claim after the batch, each with those documents."""
    assert preview.frontmatter is not None  # only a file with frontmatter has keywords
    page = page_of(preview)
    found = []
    for keyword in split_keywords(preview.frontmatter.keywords)[0]:
        indexed = [p for p in index.claimants(keyword, page=page) if p != own and p not in across.in_batch]
        if others := indexed + [p for p in across.batch_terms.get(normalize_term(keyword), []) if p != own]:
            found.append((keyword, tuple(others)))
    return found
