"""Every error kb_core raises on purpose, under one root: pages catch `KnowledgeBaseError` and show it.

```
KnowledgeBaseError
├── InvalidInputError        the caller's input is wrong: fix it and try again
│   ├── SettingsError        a setting (env KB_*, kb.yaml); the message names it
│   ├── FrontmatterError     a frontmatter block that is not usable
│   ├── ToolArgumentError    tool arguments an agent got wrong (`lookup_knowledge`, `read_document`)
│   └── UnknownSourceError   `read_document` of a source that is no indexed document
├── BackendError             a backend failed: retry, or fix the backend
│   ├── MetadataStoreError   the SQL database
│   ├── VectorStoreError     Milvus
│   └── EmbeddingError       the embedding model
├── FileTooLarge             a file at a document's path is larger than KB_MAX_UPLOAD_BYTES (also an OSError,
│                            so every `except OSError` around a file read still catches it)
├── DocumentError            a document operation failed at `step`; what it changed was undone
│   └── UploadRejected       refused before anything was written (step "validate"; also an InvalidInputError)
│       └── ConversionRejected           a PDF, Word, PowerPoint, HTML or text file that cannot become a document
│           ├── UnsupportedFormatRejected    not a type kb_core converts (random bytes, a zip, an image, .doc)
│           ├── ProtectedDocumentRejected    password-protected or encrypted
│           ├── DamagedDocumentRejected      truncated or corrupt: the converter could not read it
│           ├── NoTextRejected               nothing to index (a scanned PDF: OCR is not available)
│           └── ConversionLimitRejected      past a conversion limit: a zip bomb, memory, time, output size
├── DocumentConflictError    `upload(..., if_match=…)` found another version than the one the caller based it on
│   │                        (or `create_only=True` found the name taken)
│   ├── RestoreConflictError `restore(...)` found a file at the trashed document's path again (`replace=True`)
│   └── EditConflictError    a prepared frontmatter edit whose file changed on disk since (also an UploadRejected)
├── ToolTimeout              an MCP tool call past its deadline (KB_TOOL_TIMEOUT), or refused because too many are
└── JobCancelledError        a job was cancelled: raised between two documents, so every store stays in agreement
```

Messages are written for the person who sees them: what failed, and what to do about it.
"""

from __future__ import annotations

import errno
from pathlib import Path


class KnowledgeBaseError(Exception):
    """Root of every error kb_core raises on purpose. The message is written for the person who sees it."""


class InvalidInputError(KnowledgeBaseError):
    """The input is wrong (a file, a setting, tool arguments); nothing was changed."""


class SettingsError(InvalidInputError):
    """A setting is invalid; the message names the setting."""


class FrontmatterError(InvalidInputError):
    """Why a block is not usable frontmatter; `parse_frontmatter` turns it into a WARN and `None`."""


class ToolArgumentError(InvalidInputError):
    """A tool (`lookup_knowledge`, `read_document`) was called with arguments it cannot use; the agent gets the
    message as `error`."""


class UnknownSourceError(InvalidInputError):
    """`read_document` was asked for a source that is no indexed document (unknown, outside the knowledge base,
    or its file is gone); the agent gets the message as `error`."""


class BackendError(KnowledgeBaseError):
    """A backend (database, Milvus, embedding model) failed; the message says what was being done."""


class MetadataStoreError(BackendError):
    """The database failed; the message says what was being done."""


class VectorStoreError(BackendError):
    """Milvus failed; the message says what was being done."""


class EmbeddingError(BackendError):
    """The embedding model is unavailable or failed on the given texts."""


class FileTooLarge(KnowledgeBaseError, OSError):
    """A file at a document's path is larger than the largest allowed document (`KB_MAX_UPLOAD_BYTES`). An
    `OSError` too (errno EFBIG), as it was before it joined the family: file reads catch it with the others."""

    def __init__(self, path: Path, size: int, max_bytes: int):
        super().__init__(errno.EFBIG, f"{path} is {size:,} bytes, larger than the largest allowed document "
                                      f"({max_bytes:,} bytes, KB_MAX_UPLOAD_BYTES)")


class DocumentError(KnowledgeBaseError):
    """A document operation failed at `step`; everything it had changed was undone (unless it says not)."""

    def __init__(self, step: str, message: str, *, prefix_step: bool = True):
        super().__init__(f"{step} failed: {message}" if prefix_step else message)
        self.step = step


class UploadRejected(DocumentError, InvalidInputError):
    """The upload was refused before anything was written."""

    STEP = "validate"

    def __init__(self, message: str):
        super().__init__(self.STEP, message, prefix_step=False)


class DocumentConflictError(KnowledgeBaseError):
    """A replace based on a version that is no longer the current one (`upload(..., if_match=...)`): someone
    wrote, deleted or created the document meanwhile; or a create (`upload(..., create_only=True)`, `expected`
    None) of a name that exists by now. Nothing was written; look at the current version first. `current` is
    None when no document exists at `path`."""

    def __init__(self, path: str, expected: str | None, current: str | None):
        now = f"it is now version {current[:12]}" if current else "it does not exist (any more)"
        if expected is None:
            super().__init__(f"{path} already exists (version {(current or '')[:12]}): this upload only creates "
                             "new documents; nothing was written - look at it, then replace it or choose another "
                             "name")
        else:
            super().__init__(f"{path} changed since the version you based this upload on ({expected[:12]}): "
                             f"{now}; nothing was written - look at the current version and upload again")
        self.path = path
        self.expected = expected
        self.current = current


class RestoreConflictError(DocumentConflictError):
    """`KnowledgeBase.restore` of a trashed document whose path holds a file again: nothing was restored (the
    item stays in the trash). `current` is the sha256 of the file found there; restore with `replace=True` to
    put the trashed version in its place."""

    def __init__(self, path: str, current: str | None):
        KnowledgeBaseError.__init__(
            self, f"{path} exists again (version {(current or '')[:12]}): restoring the trashed version would "
                  "replace it; nothing was restored - look at the current document, then restore with replace "
                  "(the console asks first) or leave it in the trash")
        self.path = path
        self.expected = None
        self.current = current


class EditConflictError(DocumentConflictError, UploadRejected):
    """`KnowledgeBase.save_frontmatter_edit` (or a keyword plan) of an edit prepared from a version of the file that
    is no longer the one on disk: someone saved, replaced or deleted it meanwhile. Nothing was written; prepare the
    edit again from the current file. A `DocumentConflictError` (`expected`: the version the edit was made from,
    `current`: the one on disk, None when it is gone) and an `UploadRejected` (refused before anything was
    written)."""

    def __init__(self, path: str, expected: str, current: str | None):
        now = f"it is now version {current[:12]}" if current else "it is no longer there"
        KnowledgeBaseError.__init__(
            self, f"{path} changed on disk since the preview (made from version {expected[:12]}; {now}); nothing "
                  "was written. Open the document again and redo the edit.")
        self.step = UploadRejected.STEP
        self.path = path
        self.expected = expected
        self.current = current


class AccessDeniedError(KnowledgeBaseError):
    """The acting user's role does not allow this (see `kb_core.access`); nothing was done."""


class ToolTimeout(KnowledgeBaseError):
    """A tool call past its deadline (or refused because too many are); the MCP server answers it as a tool
    error with this message."""


class JobCancelledError(KnowledgeBaseError):
    """A job (`KnowledgeBase.start_job`) was cancelled. Raised by the job's progress callback between two
    documents, never inside one: what was written stays, what was not reached is untouched."""


class ConversionRejected(UploadRejected):
    """A file in another format than Markdown (PDF, DOCX, PPTX, HTML, text) that cannot be turned into a document;
    nothing was written. The message says why and what to do; the subclasses tell the reasons apart."""


class UnsupportedFormatRejected(ConversionRejected):
    """The content is no type kb_core converts (decided by the bytes, not the name): random bytes, a zip that is
    no Word or PowerPoint file, an image, an old binary Office file."""


class ProtectedDocumentRejected(ConversionRejected):
    """The file is password-protected or encrypted, so its text cannot be read."""


class DamagedDocumentRejected(ConversionRejected):
    """The file is truncated or corrupt: its converter could not read it (or stopped on it)."""


class NoTextRejected(ConversionRejected):
    """The file holds no text to index, such as a scanned PDF whose pages are only images (OCR is not available)."""


class ConversionLimitRejected(ConversionRejected):
    """Converting the file went past one of its limits (`limit`: "zip", "memory", "time" or "output"): a zip that
    inflates past its cap, a converter that ran out of its memory or time, a rendition too large to index."""

    def __init__(self, message: str, *, limit: str):
        super().__init__(message)
        self.limit = limit
