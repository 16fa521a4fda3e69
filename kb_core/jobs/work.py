"""What each kind of job does, through the starter's `kb.documents` (`Writer`: so every write checks the
starter's role, records who made it and moves the summaries' version like any other), reporting through its
`JobControl`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from kb_core.errors import DocumentConflictError, DocumentError, KnowledgeBaseError
from kb_core.jobs.model import MAX_LISTED, MAX_ROWS, JobFile, UploadRow
from kb_core.jobs.runner import JobControl, Work
from kb_core.jobs.staging import StagingArea
from kb_core.progress import Progress

# the stages at which reconcile and re-index all are between two documents (kb_core/progress.py)
RECONCILE_BETWEEN = ("checking vectors", "syncing")
REINDEX_BETWEEN = ("reindexing",)


class Writer(Protocol):
    """The writes jobs call: `kb.documents` acting for the job's starter."""

    def reconcile(self, paths: Any = None, *, delete_missing: bool = False, progress: Progress | None = None) -> Any:
        ...

    def reindex_all(self, *, progress: Progress | None = None) -> Any: ...

    def upload(self, file_name: str, data: bytes, category: str, *, progress: Progress | None = None,
               if_match: str | None = None, create_only: bool = False) -> Any: ...


def _listed(items: Iterable[Any]) -> list[Any]:
    return [list(i) if isinstance(i, tuple) else i for i in list(items)[:MAX_LISTED]]


def reconcile_work(kb: Writer, paths: Sequence[str] | None, delete_missing: bool) -> Work:
    def work(control: JobControl) -> str:
        report = kb.reconcile(paths, delete_missing=delete_missing,
                              progress=control.between_documents(*RECONCILE_BETWEEN))
        for name in ("added", "updated", "unchanged", "removed", "missing_files", "finished", "undone",
                     "reindexed", "orphan_documents", "trimmed", "aliases", "refused", "failed"):
            if n := len(getattr(report, name)):
                control.count(name, n)
        for path, why in report.failed:
            control.error(f"{path}: {why}")
        control.result = {"removed": _listed(report.removed), "missing_files": _listed(report.missing_files),
                          "failed": _listed(report.failed), "refused": _listed(report.refused)}
        return report.summary() + f"; {len(report.unchanged)} unchanged"
    return work


def reindex_work(kb: Writer) -> Work:
    def work(control: JobControl) -> str:
        report = kb.reindex_all(progress=control.between_documents(*REINDEX_BETWEEN))
        control.count("reindexed", len(report.reindexed))
        if report.failed:
            control.count("failed", len(report.failed))
        for path, why in report.failed:
            control.error(f"{path}: {why}")
        control.result = {"failed": _listed(report.failed)}
        return f"{len(report.reindexed)} re-indexed" + (f", {len(report.failed)} failed" if report.failed else "")
    return work


def model_pull_work(model_id: str) -> Work:
    """Download the configured model, file by file (a cancel takes effect between two files)."""
    def work(control: JobControl) -> str:
        from kb_core.storage.model_pull import pull_model

        folder = pull_model(model_id, progress=control.between_documents("downloading"))
        control.result = {"model": model_id, "folder": str(folder)}
        return (f"{model_id} is in {folder}: open the knowledge base again (restart the console) to use it; its "
                "documents are then re-embedded as a job while lookups go on")
    return work


def keyword_plan_work(items: Sequence[Any], apply_one: Callable[[Any], tuple[str, str]], describe: str,
                      what: str) -> Work:
    """Apply a keyword plan's items one by one (`apply_one(item)` -> (outcome, detail): saved, skipped or
    failed); a cancel takes effect between two documents, so each document is edited whole or not at all. The
    result holds a row per document reached."""
    def work(control: JobControl) -> str:
        rows: list[dict[str, Any]] = []
        control.result = {"plan": describe, "rows": rows}
        total = len(items)
        try:
            for done, item in enumerate(items):
                control.progress(item.file_path, done, total)
                control.checkpoint()
                outcome, detail = apply_one(item)
                rows.append({"document": item.file_path, "outcome": outcome, "detail": detail})
                control.count(outcome)
                if outcome == "failed":
                    control.error(f"{item.file_path}: {detail}")
            control.progress("done", total, total)
        finally:
            control.result = {"plan": describe, "rows": rows[:MAX_ROWS]}
        return f"{what}: " + ", ".join(f"{control.counts.get(o, 0)} {o}"
                                                            for o in ("saved", "skipped", "failed"))
    return work


def purge_trash_work(purge: Callable[..., Sequence[Any]], days: float) -> Work:
    """Remove the trashed documents deleted at least `days` days ago (`purge(progress=)` returns the items
    removed; its progress counts them, so a killed purge's row says how many went)."""
    def work(control: JobControl) -> str:
        control.progress("purging", 0, 0)
        removed = purge(progress=control.progress)
        control.count("purged", len(removed))
        control.result = {"purged": _listed(item.file_path for item in removed)}
        control.progress("done", len(removed), len(removed))
        return f"{len(removed)} document(s) deleted {days:g} days ago or earlier purged from the trash"
    return work


def file_params(files: Sequence[JobFile]) -> list[dict[str, Any]]:
    """What the job row says about each file (the bytes are staged, not stored in the row)."""
    return [{"name": f.name, "category": f.category, "upload_name": f.upload_name or f.name, "if_match": f.if_match,
             "create_only": f.create_only, "file_path": f.file_path, "size": len(f.data)} for f in files]


def upload_work(kb: Writer, files: Sequence[Mapping[str, Any]], staging: StagingArea, token: str,
                notes: Sequence[UploadRow] = ()) -> Work:
    """Upload each staged file through `kb.documents.upload` (the normal path: preview's version checks, undo on
    failure); a cancel takes effect between two files. The result holds a row per file, as the Upload page shows them,
    then `notes` (rows the page decided without uploading: not replaced, refused)."""
    def work(control: JobControl) -> str:
        rows: list[dict[str, Any]] = []
        control.result = {"rows": rows}
        total = len(files)
        try:
            for i, f in enumerate(files):
                control.progress(f"{f['upload_name']}: waiting", i, total)
                control.checkpoint()
                row = _upload_one(kb, f, staging, token, i, control, total)
                rows.append(row.as_row())
                control.count(row.result)
                if len(rows) > MAX_ROWS:
                    rows.pop()
            control.progress("done", total, total)
        finally:
            control.result = {"rows": rows + [n.as_row() for n in notes][:MAX_ROWS]}
        counts = ", ".join(f"{n} {outcome}" for outcome, n in control.counts.items())
        return f"{total} file(s): {counts}" if counts else f"{total} file(s)"
    return work


def _upload_one(kb: Writer, f: Mapping[str, Any], staging: StagingArea, token: str, i: int, control: JobControl,
                total: int) -> UploadRow:
    name = f["name"]

    def progress(stage: str, done: int, n: int) -> None:
        control.progress(f"{f['upload_name']}: {stage}" + (f" {done} of {n}" if stage == "embedding" and n else ""),
                         i, total)

    row = UploadRow(f["upload_name"], "failed", f.get("file_path") or "")
    try:
        data = staging.read(token, i)
        outcome = kb.upload(name, data, f["category"], progress=progress, if_match=f.get("if_match"),
                            create_only=bool(f.get("create_only")))
        row = UploadRow(row.file, outcome.action, outcome.document.file_path, outcome.document.chunk_count,
                        "; ".join(outcome.warnings))
    except DocumentConflictError as exc:
        row = dataclasses.replace(row, result="conflict", detail=str(exc))
    except DocumentError as exc:
        row = dataclasses.replace(row, detail=f"{exc} (step: {exc.step})")
    except (KnowledgeBaseError, OSError) as exc:
        row = dataclasses.replace(row, detail=str(exc))
    if row.result in ("failed", "conflict"):
        control.error(f"{row.file}: {row.detail}")
    return row
