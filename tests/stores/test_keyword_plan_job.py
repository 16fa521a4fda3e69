"""A keyword plan (the keyword map's bulk rename or removal) and the trash purge as jobs:
on real stores (SQLite and MariaDB through `db_url`, Milvus Lite): the plan's items as the job's parameters,
progress and an outcome per document, a cancel between two documents that leaves every store in agreement, roles;
the purge as a job, started at opening when the trash holds something to purge."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from support.documents import doc, write_doc
from support.stores import assert_consistent, make_settings

from kb_core import InvalidInputError, JobState, open_knowledge_base
from kb_core.access import Actor, Role
from kb_core.bootstrap import parts_of
from kb_core.console import AccessDeniedError
from kb_core.documents.trash import RECORD_NAME

VIEWER = Actor("vera@example.com", Role.VIEWER)
CURATOR = Actor("carl@example.com", Role.CURATOR)
WAIT = 120


def _docs(root, n: int) -> list[str]:
    paths = []
    for i in range(n):
        write_doc(root, f"knowledge_base/ops/doc-{i}.md", doc(f"Doc {i}", ["runbook", f"PLANKEY_{i}"]))
        paths.append(f"knowledge_base/ops/doc-{i}.md")
    return paths


@pytest.fixture
def kb(open_kb, db_url):
    return open_kb(db_url=db_url, reconcile=True)


def test_a_keyword_plan_runs_as_one_job_with_an_outcome_per_document(kb, tmp_path):
    paths = _docs(tmp_path, 4)
    kb.documents.reconcile()
    curator = kb.as_user(CURATOR)
    plan = curator.keywords.prepare_rename("runbook", "playbook")
    changed = tmp_path / paths[2]  # someone edits one document after the plan
    changed.write_text(changed.read_text(encoding="utf-8").replace("Doc 2", "Doc 2 (edited)"), encoding="utf-8")
    job = curator.jobs.start("keyword_plan", plan=plan)
    assert job.kind == "keyword_plan" and job.label == "Keyword plan" and job.total == 4
    # the parameters are plain values: the plan's items, serialisable as they are stored
    params = kb.jobs.get(job.id).params
    assert json.loads(json.dumps(params)) == params
    assert params["operation"] == "rename" and params["keyword"] == "runbook" and params["new_keyword"] == "playbook"
    assert [i["file_path"] for i in params["items"]] == paths
    assert params["items"][0]["after"] == ["playbook", "PLANKEY_0"] and params["items"][0]["ready"] is True
    ended = kb.jobs.wait(job.id, WAIT)
    assert ended.state == JobState.SUCCEEDED, ended
    assert ended.summary == "rename “runbook” to “playbook”: 3 saved, 1 skipped, 0 failed"
    assert ended.counts == {"saved": 3, "skipped": 1} and ended.done == ended.total == 4
    rows = {r["document"]: r for r in ended.result["rows"]}
    assert rows[paths[2]]["outcome"] == "skipped" and "changed on disk since the preview" in rows[paths[2]]["detail"]
    assert ended.result["plan"] == plan.describe()
    assert [kb.keywords.of(p) for p in paths] == [("playbook", f"PLANKEY_{i}") if i != 2 else
                                                        ("runbook", "PLANKEY_2") for i in range(4)]
    assert {d.changed_by for d in kb.documents.list() if d.file_path in (paths[0], paths[1],
                                                                         paths[3])} == {CURATOR.name}
    kb.documents.reconcile()  # the hand edit
    assert_consistent(kb)


def test_a_cancelled_keyword_plan_stops_between_documents_and_the_stores_agree(kb, tmp_path):
    paths = _docs(tmp_path, 6)
    kb.documents.reconcile()
    reached, release = threading.Event(), threading.Event()
    saves = []
    real = kb.documents.save_edit

    def save(edit, **kwargs):  # the job's writes go through the facade's save: hold it inside the third
        saves.append(edit.file_path)
        if len(saves) == 3:
            reached.set()
            assert release.wait(WAIT)
        return real(edit, **kwargs)

    kb.documents.save_edit = save
    job = kb.jobs.start("keyword_plan", plan=kb.keywords.prepare_removal("runbook"))
    assert reached.wait(WAIT)
    assert kb.jobs.cancel(job.id).cancel_requested
    release.set()  # the third document is saved whole; the fourth is never started
    ended = kb.jobs.wait(job.id, WAIT)
    assert ended.state == JobState.CANCELLED and ended.summary == "cancelled after 3 of 6"
    assert [r["document"] for r in ended.result["rows"]] == paths[:3]
    assert [kb.keywords.of(p) for p in paths] == [(f"PLANKEY_{i}",) if i < 3 else ("runbook", f"PLANKEY_{i}")
                                                        for i in range(6)]
    assert_consistent(kb)


def test_a_keyword_plan_job_needs_a_plan_and_a_curator(kb, tmp_path):
    _docs(tmp_path, 1)
    kb.documents.reconcile()
    plan = kb.keywords.prepare_removal("runbook")
    with pytest.raises(AccessDeniedError):
        kb.as_user(VIEWER).jobs.start("keyword_plan", plan=plan)
    with pytest.raises(InvalidInputError, match="needs the plan"):
        kb.jobs.start("keyword_plan")
    with pytest.raises(InvalidInputError, match="expected a KeywordPlan"):
        kb.jobs.start("keyword_plan", plan="runbook")
    assert kb.jobs.list(kinds=["keyword_plan"]) == []


# -- the trash purge ------------------------------------------------------------------------------------------------
def _age(kb, item, days: float) -> None:
    record_path = parts_of(kb).trash.directory / item.item_id / RECORD_NAME
    record = json.loads(record_path.read_text(encoding="utf-8"))
    record["deleted_at"] = (datetime.now(UTC) - timedelta(days=days)).isoformat()
    record_path.write_text(json.dumps(record), encoding="utf-8")


def _trashed(kb, name: str):
    record = kb.documents.upload(name, doc(name, [f"TRASH_{name}"]).encode(), "ops").document
    return kb.documents.delete(record.id).trashed


def test_the_purge_is_a_job_startable_by_a_curator(kb):
    old, new = _trashed(kb, "old.md"), _trashed(kb, "new.md")
    _age(kb, old, 31)
    with pytest.raises(AccessDeniedError):
        kb.as_user(VIEWER).jobs.start("purge_trash")
    with pytest.raises(InvalidInputError):
        kb.jobs.start("purge_trash", older_than_days=-1)
    job = kb.as_user(CURATOR).jobs.start("purge_trash")
    assert job.label == "Trash purge" and job.params == {"older_than_days": 30}
    ended = kb.jobs.wait(job.id, WAIT)
    assert ended.state == JobState.SUCCEEDED and ended.counts == {"purged": 1}
    assert ended.result == {"purged": [old.file_path]}
    assert ended.summary == "1 document(s) deleted 30 days ago or earlier purged from the trash"
    assert [i.item_id for i in kb.trash.items()] == [new.item_id]
    assert kb.jobs.wait(kb.jobs.start("purge_trash", older_than_days=0).id, WAIT).counts == {"purged": 1}
    assert kb.trash.items() == []
    assert_consistent(kb)


def test_opening_starts_a_purge_job_only_when_there_is_something_to_purge(tmp_path, db_url):
    settings = make_settings(tmp_path, db_url=db_url)
    first = open_knowledge_base(settings)
    try:
        gone = _trashed(first, "gone.md")
        kept = _trashed(first, "kept.md")
        _age(first, gone, 31)
        _age(first, kept, 2)
        assert first.jobs.list(kinds=["purge_trash"]) == []  # nothing was due when it opened
    finally:
        first.close()
    again = open_knowledge_base(settings)
    try:
        deadline = datetime.now(UTC) + timedelta(seconds=WAIT)
        while not again.jobs.list(kinds=["purge_trash"]) and datetime.now(UTC) < deadline:
            threading.Event().wait(0.05)
        [job] = again.jobs.list(kinds=["purge_trash"])
        ended = again.jobs.wait(job.id, WAIT)
        assert ended.state == JobState.SUCCEEDED and ended.result == {"purged": [gone.file_path]}
        assert [i.item_id for i in again.trash.items()] == [kept.item_id]
    finally:
        again.close()
    third = open_knowledge_base(settings)
    try:
        threading.Event().wait(0.5)
        assert len(third.jobs.list(kinds=["purge_trash"])) == 1  # nothing due: no new job
    finally:
        third.close()
