"""Upload: drag several Markdown files (or a whole folder) in, preview the batch as a whole, then hand it to a job
on the server that indexes the files one by one (closing the tab does not stop it)."""

from __future__ import annotations

import math

import streamlit as st

from kb_core import KnowledgeBaseError, Role
from kb_core.console import BatchAction, BatchFile, JobFile, UploadRow
from pages.shell.jobs_panel import render_jobs_panel
from pages.shell.safe import escape_markdown
from pages.shell.views import render_frontmatter
from pages.shell.wiring import end_page, knowledge_base

kb = knowledge_base()
st.title("⬆️ Upload documents")
if not kb.actor.may(Role.CURATOR):  # not offered in the navigation either; kb_core refuses the upload anyway
    st.info(f"Uploading needs the curator role; you are signed in as a {kb.actor.role.label}.")
    end_page()
state = st.session_state
# What the curator saw on the previous run: a click reruns the script, and the upload must use the versions
# the preview showed then (`if_match`; for a file shown as new, `create_only`), not whatever is on disk by now.
shown_before: dict[str, str | None] = state.get("upload_shown", {})

NEW, REPLACE, SAME, INDEX, CLASH, REFUSED, DUPLICATE = BatchAction
_ICONS = {NEW: "✅", INDEX: "✅", REPLACE: "♻️", SAME: "⏸️", CLASH: "⛔", REFUSED: "❌", DUPLICATE: "⏭️"}
_SAYS = {NEW: "new", INDEX: "to index", REPLACE: "replace an existing document", SAME: "identical: nothing to do",
         CLASH: "need a new name", REFUSED: "refused", DUPLICATE: "duplicate: skipped"}
_ORDER = {CLASH: 0, REPLACE: 1, NEW: 2, INDEX: 2, DUPLICATE: 3, SAME: 4, REFUSED: 5}  # the panels: problems first
# a job's per-file results, in three counts (the summary on top of the result)
_COUNTED = {"indexed": ("indexed", "replaced"), "skipped": ("skipped", "not replaced", "unchanged"),
            "failed": ("failed", "conflict", "refused")}
MAX_KEYWORDS = 50  # ambiguous keywords listed, most claimed first; the count covers all
MIB = 1024 * 1024
limit = kb.settings.max_upload_bytes

NEW_CATEGORY = "➕ New category…"
categories = kb.documents.categories() or ["api", "domain", "troubleshooting"]
col_pick, col_new = st.columns(2)
choice = col_pick.selectbox("Category", [*categories, NEW_CATEGORY], index=None, key="category",
                            placeholder="Choose a category")
category = choice or ""
if choice == NEW_CATEGORY:
    category = col_new.text_input("New category", key="new_category", placeholder="e.g. runbooks or apisix/docs",
                                  help="Folder names of letters, digits, '-', '_' and '.' (starting with a letter, "
                                       "digit or '_'), separated by '/' for sub-folders.")
# The uploader states (and the browser enforces) the setting; the server refuses any request above its own
# server.maxUploadSize (.streamlit/config.toml), which therefore has to be at least as large.
wanted_mb, server_mb = max(1, math.ceil(limit / MIB)), int(st.get_option("server.maxUploadSize"))
FILES, FOLDER = "Markdown files", "A folder"
kind = st.segmented_control("What to upload", [FILES, FOLDER], default=FILES, required=True, key="upload_kind",
                            help="A folder keeps its sub-folders: each Markdown file in it goes to "
                                 "<category>/<its folder>/<name>.md; its other files are skipped.")
keep_top = True
if kind == FOLDER:
    # No `type`: the browser would drop the folder's other files unseen; they are counted and skipped here.
    uploads = st.file_uploader("A folder with Markdown files (sub-folders are kept)", accept_multiple_files="directory",
                               key="folder", max_upload_size=min(wanted_mb, server_mb))
    # A category that already ends with the folder's name (an "apisix" folder into apisix/) would get it twice
    # (apisix/apisix/docs/...): then the box starts unticked. It starts again whenever either changes.
    top = (uploads[0].name.replace("\\", "/").split("/")[0] if uploads else "")
    if state.get("keep_top_for") != (category, top):
        state["keep_top_for"] = (category, top)
        state["keep_top"] = not (top and category.rstrip("/").rpartition("/")[2] == top)
    keep_top = st.checkbox("Keep the folder's own name in the paths", key="keep_top",
                           help="Ticked: docs/en/route.md goes to <category>/docs/en/route.md. Unticked: the "
                                "folder's content goes straight into the category (<category>/en/route.md).")
    candidates = [BatchFile.in_folder(f.name, f.getvalue(), state.get(f"rename-{f.file_id}"), keep_top=keep_top)
                  for f in uploads or []]
else:
    uploads = st.file_uploader("Markdown files (.md, .markdown)", type=["md", "markdown"],
                               accept_multiple_files=True, key="files", max_upload_size=min(wanted_mb, server_mb))
    candidates = [BatchFile(f.name, f.getvalue(), state.get(f"rename-{f.file_id}")) for f in uploads or []]
st.caption(f"At most {limit / MIB:g} MiB ({limit:,} bytes) per file, set by KB_MAX_UPLOAD_BYTES.")
if wanted_mb > server_mb:
    st.warning(f"KB_MAX_UPLOAD_BYTES allows {limit / MIB:g} MiB, but this server accepts at most {server_mb} MB "
               "per file: raise server.maxUploadSize in .streamlit/config.toml")

left_out: dict[str, list[str]] = {}  # a folder's files that are not documents: why -> their paths in the folder
for candidate in candidates:
    if candidate.skipped:
        left_out.setdefault(candidate.skipped, []).append(candidate.upload_name)
files = [f for f, candidate in zip(uploads or [], candidates, strict=True) if not candidate.skipped]
# the box below the problems; its value from the last run decides the preview (a tick reruns the script)
anyway = bool(state.get("upload_duplicates", False))
checked = kb.documents.preview_batch([c for c in candidates if not c.skipped], category, duplicates_anyway=anyway)
batch = checked if files else None
batch_key = (category, keep_top, tuple(f.file_id for f in files))
if left_out:
    def _some(paths: list[str]) -> str:
        return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")

    st.caption("Skipped " + "; ".join(f"{len(paths)} {'hidden' if why == 'hidden' else 'non-Markdown'} file(s): "
                                      f"{escape_markdown(_some(paths))}" for why, paths in left_out.items()))
if checked.category_problem and (category or files):  # checked as soon as typed; "choose one" once files come
    where = col_new if choice == NEW_CATEGORY else col_pick
    where.error(escape_markdown(checked.category_problem))
    if checked.suggested_category and choice == NEW_CATEGORY:
        where.button(f"Use “{escape_markdown(checked.suggested_category)}”", key="use-suggestion",
                     on_click=lambda: state.update(new_category=checked.suggested_category))


def _result(job) -> None:
    """How this batch's upload job ended: three counts, then per result, then the per-file table."""
    rows = job.result["rows"]
    st.subheader("Result")
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["result"]] = counts.get(row["result"], 0) + 1
    for column, (label, results) in zip(st.columns(3), _COUNTED.items(), strict=True):
        column.metric(label.capitalize(), sum(counts.get(r, 0) for r in results))
    st.success(", ".join(f"{n} {result}" for result, n in counts.items()))
    for row in rows:
        if row["result"] in ("failed", "conflict"):
            st.error(escape_markdown(f"{row['file']}: {row['detail']}"))
    st.dataframe(rows, hide_index=True)


mine = state.get("upload_job")
if mine is not None and batch is not None and mine["for"] == batch_key:
    try:
        shown = kb.jobs.get(mine["id"])
    except KnowledgeBaseError as exc:
        st.error(escape_markdown(exc))
        shown = None
    if shown is not None and not shown.active and shown.result:
        _result(shown)  # on top: what the upload did comes before what a next one would do

if batch is not None:
    pairs = list(zip(files, batch.files, strict=True))
    # the Replace ticks are in the panels below the button: their values from the last run
    ticked = {f.file_id for f, v in pairs if v.action == REPLACE and state.get(f"replace-{f.file_id}")}
    st.subheader("Preview")
    tally: dict[str, int] = {}
    for verdict in batch.files:
        tally[verdict.action] = tally.get(verdict.action, 0) + 1
    st.caption(" · ".join(f"{n} {_SAYS[action]}" for action, n in tally.items()))

    # problems first: what cannot go in, and what holds the whole batch back
    if batch.refused:
        st.markdown(f"**Refused ({len(batch.refused)})** — fix these files and drop them in again:")
        for verdict in batch.refused:
            st.error(escape_markdown(f"{verdict.upload_name}: {'; '.join(verdict.errors)}"))
    if batch.blocked and not batch.category_problem:
        st.warning(escape_markdown(batch.blocked))
    if batch.duplicates or anyway:
        st.checkbox("Upload duplicates anyway", key="upload_duplicates",
                    help="A file whose content is already indexed under another path, or comes earlier in this "
                         "batch, is skipped: the same content twice makes each of its keywords ambiguous.")

    todo = [(f, v) for f, v in pairs if v.action in (NEW, INDEX) or (v.action == REPLACE and f.file_id in ticked)]
    untouched = [v for f, v in pairs if v.action == REPLACE and f.file_id not in ticked]
    if not any(v.action in (NEW, INDEX, REPLACE, CLASH) for v in batch.files):
        st.button("Nothing to upload", disabled=True)
    else:
        running = None
        if mine is not None:
            try:
                running = kb.jobs.get(mine["id"])
            except KnowledgeBaseError:
                running = None
            running = running if running is not None and running.active else None
        if running is not None:
            st.button(f"Uploading… (job {running.id})", type="primary", disabled=True)
        elif st.button("Upload" if batch.blocked else f"Upload {len(todo)} file(s)", type="primary",
                       disabled=bool(batch.blocked) or not todo):
            # The files go to a job on the server, with the versions the preview showed (`if_match`; a file shown
            # as new must still be new: create-only), so the upload needs nothing of this tab any more.
            handed = []
            for f, v in todo:
                base_version = shown_before[f.file_id] if f.file_id in shown_before else v.if_match
                handed.append(JobFile(v.preview.file_name, f.getvalue(), v.category, upload_name=v.upload_name,
                                      if_match=base_version, create_only=base_version is None,
                                      file_path=v.file_path))
            notes = [UploadRow(v.upload_name, "not replaced", v.file_path, detail="“Replace” was not ticked")
                     for v in untouched]
            notes += [UploadRow(v.upload_name, "skipped", v.file_path or "", detail=v.skip_reason)
                      for v in batch.skipped]
            notes += [UploadRow(v.upload_name, "refused", detail="; ".join(v.errors)) for v in batch.refused]
            try:
                job = kb.jobs.start("import" if kind == FOLDER else "upload", files=handed, notes=notes)
            except KnowledgeBaseError as exc:
                st.error(escape_markdown(exc))
            else:
                state.upload_job = {"id": job.id, "for": batch_key}
                st.rerun()  # the panel below follows the job
    if untouched:
        st.caption(f"{len(untouched)} existing document(s) stay as they are unless you tick “Replace”.")

    if batch.skipped:
        with st.expander(f"Skipped ({len(batch.skipped)}): duplicates and files identical to their indexed version",
                         expanded=len(batch.skipped) <= 5):
            for verdict in batch.skipped:
                st.markdown(f"{_ICONS[verdict.action]} {escape_markdown(verdict.upload_name)} — "
                            f"{escape_markdown(verdict.skip_reason)}")
    ambiguous = batch.ambiguous()
    if ambiguous:
        st.markdown(f"**L0 will be ambiguous for {len(ambiguous)} keyword(s)** — a query of just one of them gets "
                    "several documents (confidence low):")
        for group in ambiguous[:MAX_KEYWORDS]:
            with st.expander(f"⚠️ {escape_markdown(group.keyword)} — {len(group.documents)} documents "
                             f"({len(group.files)} of this batch)"):
                st.markdown("  \n".join(escape_markdown(path) for path in group.documents))
        if len(ambiguous) > MAX_KEYWORDS:
            st.caption(f"… and {len(ambiguous) - MAX_KEYWORDS} more keywords (the most claimed are listed first).")

    st.markdown(f"**Files ({len(batch.files) - len(batch.refused)})**")
    for uploaded, verdict in sorted(pairs, key=lambda p: _ORDER[p[1].action]):
        if verdict.action == REFUSED:
            continue  # listed once, with the reason, under "Refused"
        fid = uploaded.file_id
        act = bool(verdict.same_target_as or verdict.errors or verdict.action == REPLACE)
        label = (f"{_ICONS[verdict.action]} {escape_markdown(verdict.upload_name)} → "
                 f"{escape_markdown(verdict.file_path or 'not accepted')}")
        with st.expander(label, expanded=act):
            if verdict.same_target_as or state.get(f"rename-{fid}"):
                st.text_input("New file name", key=f"rename-{fid}", placeholder=verdict.preview.file_name,
                              help="Stored under this name instead; two files of a batch cannot share a path.")
            render_frontmatter(verdict.preview.frontmatter)
            for finding in verdict.own_findings:  # the ambiguous keywords are grouped above
                {"error": st.error, "warning": st.warning, "info": st.info}[finding.severity](
                    escape_markdown(finding.message))
            if verdict.ambiguous:
                st.caption("L0 will be ambiguous for: " + escape_markdown(", ".join(k for k, _o in verdict.ambiguous))
                           + " (see the keywords above)")
            if verdict.action == REPLACE:
                st.checkbox(f"Replace {escape_markdown(verdict.file_path)} (version {verdict.if_match[:12]})",
                            key=f"replace-{fid}")
state.upload_shown = {f.file_id: v.if_match for f, v in zip(files or [], batch.files if batch else (), strict=True)}


def _upload_details(job) -> None:
    """The per-file outcomes of the latest upload job (any tab's, any session's)."""
    rows = (job.result or {}).get("rows", ())
    if rows:
        with st.expander(f"Per-file results of job {job.id} ({len(rows)} files)"):
            st.dataframe(rows, hide_index=True, key=f"upload-job-rows-{job.id}")


st.subheader("Upload jobs")
render_jobs_panel(kb, ("upload", "import"), key="upload", details=_upload_details)
