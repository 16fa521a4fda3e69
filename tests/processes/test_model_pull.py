"""`kb model pull`: the configured model downloads into the Hugging Face cache as a job, from a hub
that answers the way huggingface.co does (a local stand-in serving real all-MiniLM-L6-v2 weights); the next
opening embeds with it and re-embeds what the built-in model had embedded. No hub: a clear error, a failed job."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kb_core.testing import minilm_path

REPO = "acme/minilm-test"
SHA = "0123456789abcdef0123456789abcdef01234567"


class _Hub(http.server.BaseHTTPRequestHandler):
    """GET /api/models/<repo> (the file list with sizes), HEAD/GET /<repo>/resolve/<sha>/<file>: what
    huggingface_hub's model_info and hf_hub_download ask."""

    folder: Path
    served: list[str]

    def log_message(self, *args):  # quiet
        pass

    def _files(self) -> dict[str, Path]:
        return {p.relative_to(self.folder).as_posix(): p for p in self.folder.rglob("*") if p.is_file()}

    def _file(self) -> tuple[str, Path] | None:
        prefix = f"/{REPO}/resolve/"
        if not self.path.startswith(prefix) or "/" not in self.path[len(prefix):]:
            return None
        name = self.path[len(prefix):].split("/", 1)[1]  # after the revision (main, or the commit)
        path = self._files().get(name)
        return (name, path) if path else None

    def _file_headers(self, path: Path) -> None:
        data = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
        self.send_header("X-Repo-Commit", SHA)
        self.end_headers()

    def do_HEAD(self):  # noqa: N802 - http.server's naming
        found = self._file()
        if found is None:
            self.send_response(404)
            self.end_headers()
            return
        self._file_headers(found[1])

    def do_GET(self):  # noqa: N802
        if self.path.split("?")[0] == f"/api/models/{REPO}":
            body = json.dumps({"id": REPO, "modelId": REPO, "sha": SHA, "siblings": [
                {"rfilename": name, "size": path.stat().st_size} for name, path in sorted(self._files().items())]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())
            return
        found = self._file()
        if found is None:
            self.send_response(404)
            self.end_headers()
            return
        self.served.append(found[0])
        self._file_headers(found[1])
        self.wfile.write(found[1].read_bytes())


@pytest.fixture
def hub():
    handler = type("Hub", (_Hub,), {"folder": minilm_path(), "served": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", handler.served
    server.shutdown()


def _env(tmp_path: Path, endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_", "HF_", "TRANSFORMERS_"))}
    env.update(KB_APP_ROOT=str(tmp_path), KB_EMBEDDING_MODEL=REPO, KB_EMBEDDING_FALLBACK="use-multilingual-v3",
               HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT=endpoint, KB_WATCH="0")
    return env


def _kb(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kb_core", *argv], env=env, cwd=env["KB_APP_ROOT"],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.processes
def test_pull_downloads_the_model_and_the_next_opening_re_embeds_with_it(tmp_path, hub):
    endpoint, served = hub
    env = _env(tmp_path, endpoint)
    docs = tmp_path / "knowledge_base" / "ops"
    docs.mkdir(parents=True)
    (docs / "backup.md").write_text("---\ntitle: Backups\nkeywords: [backup]\nsummary: Nightly snapshots\n---\n"
                                    "# Backups\n\nSnapshots are copied to object storage every night.\n")
    synced = _kb(env, "reconcile")  # the configured model is not here yet: the built-in one embeds
    assert synced.returncode == 0, synced.stderr
    pulled = _kb(env, "model", "pull")
    assert pulled.returncode == 0, pulled.stderr + pulled.stdout
    assert "Model pull) succeeded" in pulled.stdout and "re-embedded as a job" in pulled.stdout
    assert "downloading" in pulled.stderr  # progress, file by file
    assert "model.safetensors" in served and "README.md" not in served  # only what FlagEmbedding needs
    again = _kb(env, "model", "pull")  # already there: succeeds; the hub is asked for the list only
    assert again.returncode == 0 and served.count("model.safetensors") == 1, again.stderr

    # The next opening loads the pulled model (real FlagEmbedding loading code) and re-embeds the document.
    script = ("from kb_core import open_knowledge_base\n"
              "import json, time\n"
              "kb = open_knowledge_base(); kb.wait_for_model(120)\n"
              "deadline = time.monotonic() + 120\n"
              "while {d.embedding_model for d in kb.documents.list()} != {kb.status().model.model_id} "
              "and time.monotonic() < deadline: time.sleep(0.1)\n"
              "print(json.dumps([kb.status().model.model_id, kb.status().model.state, "
              "sorted({d.embedding_model for d in kb.documents.list()}), "
              "[j.kind for j in kb.jobs.list()]]))\n"
              "kb.close()\n")
    result = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    model, state, embedded_by, kinds = json.loads(result.stdout.strip().splitlines()[-1])
    assert (model, state) == (REPO, "ready") and embedded_by == [REPO], result.stdout
    assert "reconcile" in kinds and "model_pull" in kinds


def test_without_a_hub_the_pull_fails_as_a_job_saying_what_to_do(tmp_path):
    env = _env(tmp_path, "http://127.0.0.1:9")  # the discard port: nothing answers
    (tmp_path / "knowledge_base").mkdir()
    pulled = _kb(env, "model", "pull")
    assert pulled.returncode == 1
    assert "Model pull) failed" in pulled.stdout, pulled.stdout
    assert "cannot download acme/minilm-test from http://127.0.0.1:9" in pulled.stdout
    assert "copy the model's folder to this machine and set KB_EMBEDDING_MODEL" in pulled.stdout
