"""Cold start as a user sees it: fresh processes, imports included.

    python -m benchmarks.bench_cold [--docs 10000] [--l1-docs 1000] [--repeat 5] [--against HEAD~1]

Builds two knowledge bases of generated pages with realistic frontmatter (benchmarks.common.generate_corpus):
`--docs` pages whose L0 snapshot a clean close wrote (nothing indexed: L0 answers from the files), and
`--l1-docs` pages indexed by `kb.documents.reconcile()` (BM25 only) for the questions L1 answers. Then times, each in a
fresh Python process started the way `kb` starts (the function the code's own pyproject.toml declares as the
`kb` command), alternating the code versions run after run:

- `import kb_core` (the `kb_core` line of `python -X importtime`, and the process's wall time);
- `kb lookup <an error code>` at `--docs` pages: one keyword, one page — L0's answer;
- `kb lookup <a sentence>` at `--l1-docs` pages: a question L1 answers (the database, Milvus Lite and the
  full-text index opened in that process).

With `--against REV`, the same processes run that commit's code too (a `git worktree` of it, imported in place
of this checkout's), so each figure stands beside the previous one and their ratio in one run. Medians of
`--repeat` processes per cell.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.common import NO_MODEL, bench_settings, generate_corpus, machine, publish

REPO = Path(__file__).resolve().parents[1]
GOALS = {"import": 0.3, "l0": 1.0, "l1": 3.0, "mcp": 1.0}  # seconds, our goals (quiet 2-core machine)

# Import the code under `root` instead of the installed (editable) checkout: the editable finder comes first on
# sys.meta_path and would win over sys.path.
_PREAMBLE = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in "
             "getattr(f, '__module__', '') and 'editable' not in repr(f)]; sys.path.insert(0, {root!r}); ")


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update(KB_APP_ROOT=str(root), KB_DATABASE_URL=f"sqlite:///{root}/kb.sqlite3",
               KB_MILVUS_URI=str(root / "kb_milvus.db"), KB_EMBEDDING_MODEL=NO_MODEL, KB_EMBEDDING_FALLBACK="none",
               KB_WATCH="false")
    return env


def _run(code: Path, kb_root: Path, script: str, *args: str, importtime: bool = False,
         ok: tuple[int, ...] = (0, 2)) -> tuple[float, str, str]:
    command = [sys.executable, *(["-X", "importtime"] if importtime else []), "-c",
               _PREAMBLE.format(root=str(code)) + script, *args]
    started = time.perf_counter()
    done = subprocess.run(command, env=_env(kb_root), cwd=kb_root, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - started
    if done.returncode not in ok:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, done.stdout, done.stderr


def _kb(code: Path) -> str:
    """The script a fresh process runs to be `kb` as the checkout at `code` installs it: what the console script
    pip writes for its `[project.scripts] kb` entry point does (import the function it names, call it)."""
    try:
        entry = tomllib.loads((code / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]["kb"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        # the first versions with a `kb` command did not declare it yet: this is the function they ran
        entry = "kb_core.cli:main"
    module, function = entry.split(":")
    return f"from {module} import {function}; raise SystemExit({function}(sys.argv[1:]))"


def _import_seconds(code: Path, kb_root: Path) -> tuple[float, float]:
    wall, _, err = _run(code, kb_root, "import kb_core", importtime=True)
    found = re.findall(r"import time:\s+\d+ \|\s+(\d+) \| kb_core$", err, re.M)
    return wall, int(found[-1]) / 1e6 if found else float("nan")


_MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _mcp_post(port: int, body: dict, session: str | None = None) -> tuple[dict, str]:
    import json
    import urllib.request

    headers = {**_MCP_HEADERS, **({"Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-06-18"}
                                  if session else {})}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        return dict(response.headers), response.read().decode()


def _mcp_first_call(code: Path, kb_root: Path, keyword: str) -> tuple[float, float, str]:
    """`kb mcp --http` started fresh: (seconds until it listens, seconds from listening to the answer of its
    first `lookup_knowledge` call - initialize, initialized, the call - and that answer)."""
    import socket
    import urllib.error
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _PREAMBLE.format(root=str(code)) + _kb(code), "mcp", "--http",
                             "--port", str(port)], env=_env(kb_root), cwd=kb_root, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the MCP server exited with {proc.returncode}")
            if time.perf_counter() - started > 120:
                raise RuntimeError("the MCP server did not listen within 120 s")
            try:  # a path outside /mcp: the probe opens no session
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).close()
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.02)
        listening = time.perf_counter()
        headers, _ = _mcp_post(port, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                      "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                                 "clientInfo": {"name": "bench", "version": "1"}}})
        session = headers.get("mcp-session-id") or headers.get("Mcp-Session-Id")
        _mcp_post(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        _, body = _mcp_post(port, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                   "params": {"name": "lookup_knowledge", "arguments": {"query": keyword}}}, session)
        answered = time.perf_counter()
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    found = re.search(r'\\?"source\\?":\s*\\?"([^"\\]+)', body)
    return listening - started, answered - listening, found.group(1) if found else body[-200:]


def _build(root: Path, docs: int, *, index: bool) -> list[list[str]]:
    from kb_core import open_knowledge_base

    corpus = generate_corpus(root, docs)
    kb = open_knowledge_base(bench_settings(root, embedding_fallback="none", watch=False), load_model=False)
    try:
        if index:
            report = kb.documents.reconcile()
            if report.failed:
                raise RuntimeError(f"{len(report.failed)} documents failed to index")
    finally:
        kb.close()  # writes the L0 snapshot
    return corpus.keywords


@contextlib.contextmanager
def _worktree(rev: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kb-bench-cold-rev-") as tmp:
        path = Path(tmp) / "code"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), rev], check=True,
                       capture_output=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)], check=False,
                           capture_output=True)


def _roots_for(code: Path, workdir: Path, name: str, l0_root: Path, l1_root: Path, keyword: str) -> tuple[Path, Path]:
    """Copies of the trees for another version: their database brought down to that version's newest
    migration (this checkout's may be newer: an older version refuses it), and its own L0 snapshot written
    once before anything is timed (a snapshot of another format or folder is not read: each version would
    rescan every time on a shared tree)."""
    versions = code / "kb_core" / "storage" / "migrations" / "versions"
    head = max(p.name.split("_")[0] for p in versions.glob("[0-9]*_*.py"))
    copies = []
    for root in (l0_root, l1_root):
        copy = workdir / f"{root.name}-{name.replace('/', '_')}"
        shutil.copytree(root, copy)
        (copy / "kb_l0_snapshot.bin").unlink(missing_ok=True)
        # this checkout's `kb migrate` knows the way down from each of its revisions (nothing to do at `head`)
        _run(REPO, copy, _kb(REPO), "migrate", head, "--downgrade", ok=(0,))
        copies.append(copy)
    _run(code, copies[0], _kb(code), "lookup", keyword)  # writes that version's snapshot of the L0 tree
    return copies[0], copies[1]


def bench_cold(workdir: Path, *, docs: int, l1_docs: int, repeat: int, against: str | None) -> dict[str, Any]:
    l0_root, l1_root = workdir / "l0", workdir / "l1"
    started = time.perf_counter()
    keywords = _build(l0_root, docs, index=False)
    build_l0 = time.perf_counter() - started
    started = time.perf_counter()
    _build(l1_root, l1_docs, index=True)
    build_l1 = time.perf_counter() - started
    code = next(k[0] for i, k in enumerate(keywords) if i % 10 not in (8, 9))  # one page's own error code
    question = "当支付超时持续超过五分钟，应该先检查哪些监控指标？"
    versions: dict[str, Path] = {"this commit": REPO}
    roots: dict[str, tuple[Path, Path]] = {"this commit": (l0_root, l1_root)}
    with contextlib.ExitStack() as stack:
        if against:
            versions[f"{against}"] = stack.enter_context(_worktree(against))
            roots[against] = _roots_for(versions[against], workdir, against, l0_root, l1_root, code)
        cells: dict[tuple[str, str], list[float]] = {(v, c): [] for v in versions for c in
                                                     ("import", "import_wall", "l0", "l1", "mcp_listen", "mcp")}
        answers: dict[tuple[str, str], str] = {}
        for turn in range(repeat):
            order = list(versions) if turn % 2 == 0 else list(versions)[::-1]
            for name in order:
                l0_root, l1_root = roots[name]
                wall, own = _import_seconds(versions[name], l0_root)
                cells[(name, "import")].append(own)
                cells[(name, "import_wall")].append(wall)
                wall, out, _ = _run(versions[name], l0_root, _kb(versions[name]), "lookup", code)
                cells[(name, "l0")].append(wall)
                answers[(name, "l0")] = out
                wall, out, _ = _run(versions[name], l1_root, _kb(versions[name]), "lookup", question)
                cells[(name, "l1")].append(wall)
                answers[(name, "l1")] = out
                listen, first, source = _mcp_first_call(versions[name], l0_root, code)
                cells[(name, "mcp_listen")].append(listen)
                cells[(name, "mcp")].append(first)
                answers[(name, "mcp")] = source
    first = list(versions)[0]
    same = {kind: all(answers[(v, kind)] == answers[(first, kind)] for v in versions)
            for kind in ("l0", "l1", "mcp")}
    return {"docs": docs, "l1_docs": l1_docs, "repeat": repeat, "build_s": {"l0": round(build_l0, 1),
                                                                            "l1": round(build_l1, 1)},
            "code": code, "question": question, "versions": list(versions), "same_answer": same,
            "medians_s": {f"{v}|{c}": round(statistics.median(s), 3) for (v, c), s in cells.items()},
            "samples_s": {f"{v}|{c}": [round(x, 3) for x in s] for (v, c), s in cells.items()},
            "load_average": round(os.getloadavg()[0], 2), "goals_s": GOALS}


def render_cold(r: dict[str, Any]) -> list[str]:
    versions = r["versions"]
    rows = [("`import kb_core` (importtime)", "import", "import"), ("`import kb_core` (process wall)", "import_wall",
                                                                     None),
            (f"`kb lookup {r['code']}` at {r['docs']:,} pages (L0)", "l0", "l0"),
            (f"`kb lookup` of a question at {r['l1_docs']:,} indexed pages (L1)", "l1", "l1")]
    if f"{versions[0]}|mcp" in r["medians_s"]:
        rows += [(f"`kb mcp --http` at {r['docs']:,} pages: start until it listens", "mcp_listen", None),
                 ("… then its first `lookup_knowledge` (L0) answered", "mcp", "mcp")]
    head = " | ".join(versions)
    lines = [f"Fresh processes, imports included; median of {r['repeat']} runs per cell (s)", "",
             f"| step | {head} |" + (" speed-up |" if len(versions) > 1 else "") + " goal |",
             "|---|" + "---|" * len(versions) + ("---|" if len(versions) > 1 else "") + "---|"]
    for label, cell, goal in rows:
        values = [r["medians_s"][f"{v}|{cell}"] for v in versions]
        ratio = f" {values[1] / values[0]:.1f}x |" if len(values) > 1 and values[0] else (" |" if len(values) > 1
                                                                                          else "")
        lines.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in values) + " |" + ratio
                     + (f" ≤ {GOALS[goal]:g} |" if goal else " |"))
    lines.append("")
    lines.append(f"same answers in every version: L0 {r['same_answer']['l0']}, L1 {r['same_answer']['l1']}"
                 + (f", MCP {r['same_answer']['mcp']}" if "mcp" in r["same_answer"] else "") + "; "
                 f"built in {r['build_s']['l0']:.0f} s (L0 tree) and {r['build_s']['l1']:.0f} s (indexed tree); "
                 f"load average {r['load_average']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_cold", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--l1-docs", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--against", default=None, help="a commit to run side by side (e.g. HEAD~1)")
    parser.add_argument("--json", type=Path, default=Path("bench-cold.json"))
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    report: dict[str, Any] = {"machine": machine(), "command": " ".join(["python -m benchmarks.bench_cold", *given])}
    with tempfile.TemporaryDirectory(prefix="kb-bench-cold-") as workdir:
        report["cold"] = bench_cold(Path(workdir), docs=args.docs, l1_docs=args.l1_docs, repeat=args.repeat,
                                    against=args.against)
    return publish(args.json, report, "\n".join(render_cold(report["cold"])))


if __name__ == "__main__":
    sys.exit(main())
