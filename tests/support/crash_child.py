"""The child process of tests/processes/test_crash_safety.py: open a knowledge base, seed it, arm ONE kill point, then
run one write (upload of a new document, replace with fewer or more chunks, or delete). At the kill point the
process sends itself SIGKILL, so nothing after it runs: no undo, no `finally`, no atexit.

Run by hand to reproduce one case on an empty root (the test prints this command when a case fails):

    .venv/bin/python tests/support/crash_child.py '{"root": "/tmp/crash-repro", "scenario": "replace-fewer",
                                             "point": "vectors.upsert:after"}'

then open the knowledge base on the same root (that runs `recover`) and look. The test itself starts the children
through `python tests/support/crash_child.py --serve`, a fork server that has imported the heavy third-party modules
once (a fresh interpreter per case spends ~3 s importing); `KB_CRASH_CHILD=subprocess` runs this file as a plain
`python tests/support/crash_child.py '{...}'` per case instead. kb_core is imported only in the child, after the fork,
so nothing the child does carries state of the fork server (the writer id on PENDING rows is made when the
knowledge base is opened and names the child).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
import traceback
from pathlib import Path

# -- the documents (shared with the test) ---------------------------------------------------------------------
KEYWORD = "quokkaflux"  # the target document's L0 keyword; also in every chunk, so BM25 finds it too
CATEGORY = "ops"
TARGET = "quokka.md"
BYSTANDER = "wombat.md"  # another document in the same knowledge base: a crash must not touch it
BYSTANDER_KEYWORD = "wombatgrid"
SHORT, LONG = 1, 4  # body sections; the frontmatter chunk comes on top: 2 and 5 chunks

#: scenario -> (version seeded before the kill point is armed, version the operation writes); a version is
#: (tag, sections). "alpha" is the old version, "beta" the new one; None: no such document / deleted.
SCENARIOS: dict[str, tuple[tuple[str, int] | None, tuple[str, int] | None]] = {
    "upload": (None, ("beta", LONG)),
    "replace-fewer": (("alpha", LONG), ("beta", SHORT)),
    "replace-more": (("alpha", SHORT), ("beta", LONG)),
    "delete": (("alpha", LONG), None),
}

EXIT_NOT_REACHED = 3  # the operation finished without passing the kill point: the test case is wrong
EXIT_NO_SUCH_STEP = 4  # this setup has no such step (no full-text index beside Milvus)


def marker(tag: str) -> str:
    return f"{tag}marker"


def title(tag: str) -> str:
    return f"Quokka relay guide {tag}"


def version_text(tag: str, sections: int) -> bytes:
    """A small document whose every chunk (frontmatter chunk included) carries `marker(tag)`."""
    body = "".join(
        f"## {tag.capitalize()} step {i}\n\nStep {i} of the {marker(tag)} procedure restarts relay number {i} "
        f"of the {KEYWORD} cluster after {i + 2} failed heartbeats.\n\n"
        for i in range(1, sections + 1))
    return (f"---\ntitle: {title(tag)}\nkeywords: [{KEYWORD}]\nsummary: the {marker(tag)} summary\n---\n\n"
            f"# {title(tag)}\n\n{body}").encode()


def bystander_text() -> bytes:
    return (f"---\ntitle: Wombat grid notes\nkeywords: [{BYSTANDER_KEYWORD}]\nsummary: grid notes\n---\n\n"
            "# Wombat grid notes\n\n## Power\n\nThe grid takes power from two feeds.\n\n"
            "## Cooling\n\nThe grid is cooled by river water.\n").encode()


# -- kill points ------------------------------------------------------------------------------------------------
UPLOAD_STEPS = ("metadata.save_document", "write_atomic", "vectors.upsert", "vectors.delete_chunks_from",
                "metadata.finish_write", "index.add")
# A delete moves the file into the trash: the item is prepared (folder + record) before the intent record, and
# "move" is the rename of the target into it (the record is completed with the sha256 after it: move_in:after).
DELETE_STEPS = ("trash.prepare", "metadata.set_pending", "vectors.delete_document", "move", "trash.move_in",
                "metadata.delete_document")
# Embedded mode keeps BM25 in an SQLite FTS5 index beside Milvus Lite; `vectors.upsert`, `.delete_chunks_from`
# and `.delete_document` write it first, then Milvus. "fulltext.X:after" kills between the two.
FULLTEXT_STEPS = ("fulltext.upsert", "fulltext.delete_chunks_from", "fulltext.delete_document")


def _kill(where: str) -> None:
    print(f"SIGKILL at {where} ({time.time():.3f})", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def _around(function, point: str, when: str):
    def wrapper(*args, **kwargs):
        if when == "before":
            _kill(f"{point}:before")
        result = function(*args, **kwargs)
        if when == "after":
            _kill(f"{point}:after")
        return result

    return wrapper


def arm(kb, point: str, target: Path) -> None:
    """Patch ONE step (instance attribute, module function or, for the file, `os.rename`/`os.replace`
    restricted to the target document) so that the process kills itself right before/inside/after it."""
    from kb_core.bootstrap import parts_of
    from kb_core.documents import folder

    step, when = point.rsplit(":", 1)
    if step == "write_atomic" and when == "inside":
        real_replace = os.replace

        def replace(src, dst, *args, **kwargs):
            if Path(dst) == target:
                assert Path(src).is_file(), f"no temp file {src}"
                _kill(f"write_atomic:inside (temp file {Path(src).name} written, before os.replace)")
            return real_replace(src, dst, *args, **kwargs)

        os.replace = replace  # write_atomic calls os.replace through the os module
    elif step == "write_atomic":
        folder.write_atomic = _around(folder.write_atomic, step, when)
    elif step == "move":
        real_rename = os.rename

        def rename(src, dst, *args, **kwargs):
            mine = Path(src) == target
            if mine and when == "before":
                _kill("move:before")
            real_rename(src, dst, *args, **kwargs)
            if mine and when == "after":
                _kill("move:after (the file is in the trash, its record not completed)")

        os.rename = rename  # Trash.move_in calls os.rename through the os module
    elif step.startswith("fulltext."):
        fulltext = getattr(parts_of(kb).vectors, "_fulltext", None)
        if fulltext is None:
            print(f"no full-text index beside Milvus here: {point} does not exist", flush=True)
            sys.stdout.flush()
            os._exit(EXIT_NO_SUCH_STEP)
        name = step.split(".", 1)[1]
        setattr(fulltext, name, _around(getattr(fulltext, name), step, when))
    else:
        store, name = step.split(".")
        owner = getattr(parts_of(kb), store)  # the store itself (kb_core.bootstrap.parts_of)
        setattr(owner, name, _around(getattr(owner, name), step, when))


# -- the child ----------------------------------------------------------------------------------------------------
def run_case(config: dict) -> None:
    """Open, seed, arm, operate. Never returns normally: SIGKILL at the kill point, or exit 3 if the operation
    completed without reaching it, or exit 1 on an error (traceback in the log)."""
    started = time.monotonic()
    root = Path(config["root"])
    root.mkdir(parents=True, exist_ok=True)
    log_path = root / "child.log"
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, force=True,
                        format="child %(process)d %(levelname)s %(name)s: %(message)s")
    try:
        print(f"child pid {os.getpid()} at {time.time():.3f}: {json.dumps(config)}", flush=True)
        from kb_core.bootstrap import open_knowledge_base, parts_of
        from kb_core.settings import load_settings

        print(f"kb_core imported after {time.monotonic() - started:.2f} s", flush=True)
        settings = load_settings(
            app_root=root,
            database_url=config.get("db_url") or f"sqlite:///{root / 'kb.sqlite3'}",
            milvus_uri=config.get("milvus_uri") or str(root / "kb_milvus.db"),
            embedding_model=config.get("model", "no-such-org/no-such-model"),
        )
        kb = open_knowledge_base(settings)
        seed, new = SCENARIOS[config["scenario"]]
        kb.documents.upload(BYSTANDER, bystander_text(), CATEGORY)
        seeded = kb.documents.upload(TARGET, version_text(*seed), CATEGORY).document if seed else None
        print(f"opened and seeded after {time.monotonic() - started:.2f} s; armed at {config['point']}", flush=True)
        arm(kb, config["point"], parts_of(kb).folder.base_dir / CATEGORY / TARGET)
        if new is not None:
            kb.documents.upload(TARGET, version_text(*new), CATEGORY)
        else:
            assert seeded is not None
            kb.documents.delete(seeded.id)
        print(f"NOT REACHED: {config['scenario']} finished without passing {config['point']}", flush=True)
        code = EXIT_NOT_REACHED
    except BaseException:  # noqa: BLE001 - anything but the kill is a broken test case: report, exit 1
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def preload() -> None:
    """What the fork server imports once, so that each child starts warm (third-party code only: kb_core
    computes the writer's identity, pid included, when it is imported, and that must be the child's)."""
    import importlib

    for name in ("sqlalchemy", "sqlalchemy.orm", "pymysql", "alembic", "alembic.runtime.migration", "alembic.ddl",
                 "alembic.command", "pydantic", "pydantic_settings", "yaml", "numpy", "grpc", "pymilvus",
                 "milvus_lite.server_manager", "milvus_lite.adapter.grpc.server", "jieba"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    try:
        import rjieba  # noqa: F401 - the tokenizer's dictionary loads on import (~0.25 s), done once
    except ImportError:
        pass
    assert not any(name.startswith("kb_core") for name in sys.modules), "kb_core must be imported after the fork"


def serve() -> None:
    """The fork server: one JSON case per line on stdin; forks a child per case, reaps it and answers with
    one JSON line {"pid", "returncode"} (returncode -9: killed by SIGKILL, as subprocess reports it)."""
    preload()
    print(json.dumps({"ready": os.getpid()}), flush=True)
    while line := sys.stdin.readline():
        config = json.loads(line)
        pid = os.fork()
        if pid == 0:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            run_case(config)  # never returns
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"pid": pid, "returncode": code}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        run_case(json.loads(sys.argv[1]))
