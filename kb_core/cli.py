"""`kb`: the one command of the knowledge base (`python -m kb_core` is the same).

    kb lookup QUERY [--section TITLE] [--category FOLDER] [--language TAG]
                                             the agent JSON for QUERY, exactly what `lookup_knowledge` returns
    kb reconcile [PATH ...] [--delete-missing]
                                             make disk, database, Milvus and L0 agree (all files, or PATHs)
    kb reindex                               re-embed every document from its file (e.g. after a model change)
    kb jobs [--limit N] [--json]             the jobs of every process: running, queued, how they ended
    kb evaluate QUERIES.jsonl [--json OUT]   answer quality on labelled queries
    kb mcp [--http [--port N]]               the MCP server for agents (`python -m kb_core.mcp`)
    kb migrate [REVISION] [--current]        bring the database to REVISION
    kb bench ARGS                            the benchmarks, from a source checkout (`python -m benchmarks`)

Every command reads the same settings as the console: env `KB_*` > `kb.yaml` at the application root >
defaults. `kb COMMAND --help` explains each command.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kb_core.ops.logs import configure_log_file, log_file_path, log_to_stderr

PROG = "kb"

# Commands whose arguments are parsed by another module's `main(argv)`; `kb NAME ARGS` hands ARGS over as is.
_DELEGATED: dict[str, tuple[str, str]] = {
    "evaluate": ("answer quality on labelled queries",
                 "Runs every labelled query of a JSONL file through lookup on the configured knowledge base and "
                 "reports, per kind of query, how often an expected document is answered, the right primary, "
                 "'high but wrong' and latency. Options: QUERIES.jsonl [--json OUT] [--failures N] [--sync]."),
    "mcp": ("serve lookup_knowledge and read_document to agents over MCP",
            "Serves the lookup_knowledge and read_document tools over stdio (or with --http [--port 8765] over "
            "streamable HTTP on 127.0.0.1), on the same settings as the console. Options: [--http] [--port N] "
            "[--log-level LEVEL]. Same as `python -m kb_core.mcp`."),
    "migrate": ("bring the database schema up to date",
                "Migrates the configured database to REVISION (default head); --downgrade goes down to an older "
                "REVISION, before running an older version on the database (what newer revisions added is "
                "dropped); --current only prints the current revision. Opening the knowledge base migrates too."),
    "bench": ("run the benchmarks (source checkout only)",
              "Runs the benchmarks with ARGS (for example --quick). They live in the top-level `benchmarks/` "
              "package of the source checkout, not in the installed kb_core: run `kb bench` (or "
              "`python -m benchmarks`) from a clone of the repository."),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    lookup = commands.add_parser(
        "lookup", help="look a query up and print the agent JSON",
        description="Runs lookup_knowledge(QUERY, section_title) on the configured knowledge base, exactly as an "
                    "agent calls it (logged with caller \"cli\"), and prints the JSON answer: found, primary (L0, "
                    "or the best L1 passage) and supplement (L1). Waits for the embedding model first, when one is "
                    "configured and found, so that L1 searches as an agent process's would. Exit status: 0 when "
                    "answered (found or not), 2 when the arguments were refused (the JSON holds `error`), 1 when "
                    "the knowledge base could not be opened.")
    lookup.add_argument("query", metavar="QUERY", help="what an agent would ask: an error code, API name, term or "
                                                       "short question")
    lookup.add_argument("--section", metavar="TITLE", dest="section_title",
                        help="serve this section of the primary document (a name from primary.availableSections)")
    lookup.add_argument("--category", metavar="FOLDER",
                        help="only documents of this folder and its sub-folders (lookup_knowledge's category)")
    lookup.add_argument("--language", metavar="TAG", help="only documents in this language (en, zh, ...)")

    reconcile = commands.add_parser(
        "reconcile", help="make disk, database, Milvus and L0 agree",
        description="Reconciles the configured knowledge base in one pass (the console's Documents -> Maintenance "
                    "-> Reconcile; kb.documents.reconcile() in Python): files added or changed on disk are indexed, "
                    "interrupted writes are completed, stray vectors deleted, documents with missing vectors "
                    "re-indexed. Rows whose file has gone are reported, and deleted with their vectors with "
                    "--delete-missing (nothing on disk is touched). Waits for the embedding model first, so "
                    "that dense vectors are written. Exit status 1 when a document could not be reconciled.")
    reconcile.add_argument("paths", nargs="*", metavar="PATH",
                           help="only these files or folders: absolute, relative to the current directory, or as "
                                "the knowledge base names them (knowledge_base/api); default: the whole "
                                "knowledge base")
    reconcile.add_argument("--delete-missing", action="store_true",
                           help="delete rows (and their vectors) whose file is gone from disk")

    commands.add_parser(
        "reindex", help="re-embed every document from its file",
        description="Re-parses, re-chunks and re-embeds every document from its saved file (the console's "
                    "Documents -> Maintenance -> Re-index all; kb.documents.reindex_all() in Python), e.g. after a "
                    "model change. Waits for the embedding model first. Exit status 1 when a document failed.")

    model = commands.add_parser(
        "model", help="pull the configured embedding model",
        description="`kb model pull` downloads KB_EMBEDDING_MODEL (default BAAI/bge-m3) into the local Hugging Face "
                    "cache where a network exists, file by file with progress, as a job (the console's Settings "
                    "page has the same button). The next opening uses it and re-embeds the documents as a job "
                    "while lookups go on; until then the built-in model embeds (docs/model.md). Exit status 1 "
                    "when the download failed (no network: copy the model's folder and set KB_EMBEDDING_MODEL).")
    model.add_argument("action", choices=["pull"], help="pull: download the configured model")

    jobs = commands.add_parser(
        "jobs", help="list the jobs of every process",
        description="Lists the newest jobs (reconcile, re-index all, batch uploads, folder imports) of every process "
                    "of the knowledge base, newest first: state, progress, who started it, when, and how it ended. "
                    "`kb reconcile` and `kb reindex` run synchronously but are recorded as jobs too, and wait "
                    "their turn behind a heavy job of another process.")
    jobs.add_argument("--limit", type=int, default=20, metavar="N", help="how many jobs (default 20)")
    jobs.add_argument("--json", action="store_true", help="one JSON object per job instead of a table")

    for name, (short, description) in _DELEGATED.items():
        sub = commands.add_parser(name, help=short, description=description)
        sub.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                         help=f"the arguments of the {name} command, handed over as they are")
    return parser


def command_names(parser: argparse.ArgumentParser | None = None) -> list[str]:
    """The subcommands, read from the parser (the docs test checks each is documented)."""
    for action in (parser or build_parser())._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `kb` command; returns the exit status (argparse's exits included, so it never exits itself)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in _DELEGATED:
            return _DELEGATES[args[0]](args[1:])
        parser = build_parser()
        options = parser.parse_args(args)
        if options.command is None:
            parser.print_help(sys.stderr)
            return 2
        if options.command == "lookup":
            return _lookup(options.query, options.section_title,
                           {k: v for k, v in (("category", options.category), ("language", options.language)) if v})
        if options.command == "jobs":
            return _jobs(options.limit, as_json=options.json)
        if options.command == "reindex":
            return _maintain("reindex_all")
        if options.command == "model":
            return _maintain("model_pull")
        return _maintain("reconcile", options.paths, delete_missing=options.delete_missing)
    except SystemExit as exc:  # argparse (--help, a bad option) and the delegated commands
        return _exit_status(exc.code)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


# -- commands of their own ------------------------------------------------------------------------------
def _lookup(query: str, section_title: str | None, filters: dict[str, str] | None = None) -> int:
    log_to_stderr(logging.WARNING)  # KB_LOG_FILE, if set, gets INFO and above whatever this shows
    from kb_core.agent.quick import answer_from_l0
    from kb_core.errors import KnowledgeBaseError
    from kb_core.settings import load_settings

    try:
        settings = load_settings()
        if settings.log_file:
            configure_log_file(log_file_path(settings.log_file, settings.app_root))
        answer = answer_from_l0(settings, query, section_title, caller="cli", filters=filters or {})
    except KnowledgeBaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if answer is None:  # L1 is needed, or the files changed since the last clean close: the whole knowledge base
        return _lookup_opened(settings, query, section_title, filters or {})
    print(json.dumps(answer, ensure_ascii=False, indent=2))
    return 2 if answer.get("error") else 0


def _lookup_opened(settings: Any, query: str, section_title: str | None, filters: dict[str, str]) -> int:
    from kb_core.bootstrap import open_knowledge_base
    from kb_core.errors import KnowledgeBaseError

    try:
        kb = open_knowledge_base(settings, one_question=True)
    except KnowledgeBaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        kb.wait_for_model()  # a model still loading would leave L1 on full text only
        answer = kb.lookup_knowledge(query, section_title, caller="cli", **filters)
    finally:
        kb.close()  # also flushes the call log
    print(json.dumps(answer, ensure_ascii=False, indent=2))
    return 2 if answer.get("error") else 0


def _maintain(kind: str, paths: Sequence[str] = (), *, delete_missing: bool = False) -> int:
    """`kb reconcile`, `kb reindex` and `kb model pull`: run in this process (in the heavy job's turn), recorded
    as a job."""
    log_to_stderr(logging.INFO)  # KB_LOG_FILE, if set, gets INFO and above whatever this shows
    from kb_core.access import service_actor
    from kb_core.bootstrap import open_knowledge_base
    from kb_core.errors import KnowledgeBaseError

    pulling = kind == "model_pull"  # needs no model loaded, and changes no document
    try:
        kb = open_knowledge_base(load_model=not pulling)
    except KnowledgeBaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        if not pulling:
            kb.wait_for_model()
        job = kb.as_user(service_actor("cli")).jobs.run(kind, paths=_paths(paths) or None,
                                                       delete_missing=delete_missing, progress=_progress_printer())
        print(f"job {job.id} ({job.label}) {job.state.value}: {job.summary}")
        if pulling:
            return 0 if job.state.value == "succeeded" else 1
        result = job.result or {}
        for path in result.get("missing_files", ()):  # rows kept because their file has gone
            print(f"  file missing: {path} (run with --delete-missing to remove its row and vectors)")
        _more(job.counts.get("missing_files", 0), result.get("missing_files", ()))
        for path, why in result.get("failed", ()):
            print(f"  failed: {path}: {why}")
        _more(job.counts.get("failed", 0), result.get("failed", ()))
        counts = kb.status().counts
        print(f"now: {counts.files} files, L0 {counts.l0}, database {counts.database}, Milvus {counts.milvus} "
              f"documents ({'consistent' if counts.consistent else 'NOT consistent'})")
        return 1 if job.state.value != "succeeded" or job.counts.get("failed") else 0
    except KnowledgeBaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        kb.close()


def _more(count: int, listed: Sequence[object]) -> None:
    if count > len(listed):
        print(f"  ... and {count - len(listed)} more")


def _jobs(limit: int, *, as_json: bool) -> int:
    log_to_stderr(logging.WARNING)
    from kb_core.bootstrap import open_knowledge_base
    from kb_core.errors import KnowledgeBaseError
    from kb_core.jobs.model import describe_seconds

    try:
        kb = open_knowledge_base(load_model=False)
    except KnowledgeBaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        jobs = kb.jobs.list(max(1, limit))
    except KnowledgeBaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        kb.close()
    if as_json:
        for job in jobs:
            print(json.dumps({"id": job.id, "kind": job.kind, "state": job.state.value, "actor": job.actor,
                              "done": job.done, "total": job.total, "stage": job.stage, "counts": job.counts,
                              "errors": list(job.errors), "error_count": job.error_count, "summary": job.summary,
                              "process": str(job.owner), "created": job.created_at.isoformat(),
                              "started": job.started_at.isoformat() if job.started_at else None,
                              "ended": job.ended_at.isoformat() if job.ended_at else None}, ensure_ascii=False))
        return 0
    if not jobs:
        print("no jobs yet")
        return 0
    print(f"{'id':>5}  {'kind':<13} {'state':<10} {'progress':<11} {'took':<12} {'started (UTC)':<19}  "
          "who / how it ended")
    for job in jobs:
        progress = f"{job.done}/{job.total}" if job.total else "—"
        started = job.started_at.strftime("%Y-%m-%d %H:%M:%S") if job.started_at else "—"
        how = job.summary or (f"{job.stage}" if job.active else "")
        print(f"{job.id:>5}  {job.label:<13} {job.state.value:<10} {progress:<11} "
              f"{describe_seconds(job.elapsed()):<12} {started:<19}  {job.actor}: {how}")
    return 0


def _paths(paths: Sequence[str]) -> list[str]:
    """A path that exists from the current directory is made absolute (as a shell user means it); any other
    is passed on as given, so a display path (`knowledge_base/api/gone.md`, a deleted file) still works."""
    return [str(Path(p).absolute()) if Path(p).exists() else p for p in paths]


def _progress_printer() -> Callable[[str, int, int], None]:
    """progress(stage, done, total) on stderr: one updated line on a terminal, a line per stage and per 100
    otherwise (a log file stays short)."""
    last_stage = [""]

    def show(stage: str, done: int, total: int) -> None:
        of = f"/{total}" if total else ""
        if sys.stderr.isatty():
            print(f"\r{stage} {done}{of}\033[K", end="\n" if stage == "done" else "", file=sys.stderr, flush=True)
        elif stage != last_stage[0] or done == total or done % 100 == 0:
            print(f"{stage} {done}{of}", file=sys.stderr)
        last_stage[0] = stage
    return show


# -- commands handed to other modules -------------------------------------------------------------------
def _evaluate(args: list[str]) -> int:
    from kb_core.bootstrap import open_knowledge_base
    from kb_core.evaluation.command import main as evaluate_main

    return evaluate_main(args, open_kb=open_knowledge_base, prog=f"{PROG} evaluate")


def _mcp(args: list[str]) -> int:
    from kb_core.mcp import main as mcp_main

    return mcp_main(args, prog=f"{PROG} mcp")


def _migrate(args: list[str]) -> int:
    from kb_core.storage.migrate import main as migrate_main

    return migrate_main(args, prog=f"{PROG} migrate")


def _bench(args: list[str]) -> int:
    """The benchmarks are not part of the installed library: import them lazily from the source checkout."""
    failures = []
    for module_name in ("benchmarks.bench", "benchmarks.__main__"):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name not in ("benchmarks", module_name):
                raise  # the benchmarks are there but something they import is not
            failures.append(str(exc))
            continue
        if callable(getattr(module, "main", None)):
            return module.main(args)
        failures.append(f"{module_name} has no main()")
    if args and args[0] in ("-h", "--help"):
        build_parser().parse_args(["bench", "--help"])  # prints the description above and exits 0
    why = "; ".join(dict.fromkeys(failures))
    print(f"{PROG} bench: the benchmarks are not importable here ({why}). They live in the "
          "top-level benchmarks/ package of the source checkout and are not installed with kb_core: run "
          "`python -m benchmarks ...` (or `kb bench ...`) from a clone of the repository.", file=sys.stderr)
    return 2


_DELEGATES: dict[str, Callable[[list[str]], int]] = {
    "evaluate": _evaluate, "mcp": _mcp, "migrate": _migrate, "bench": _bench}


if __name__ == "__main__":
    sys.exit(main())
