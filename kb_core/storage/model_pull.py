"""`kb model pull`: download the configured embedding model into the local Hugging Face cache, where a network
exists. File by file, so a job can show how far it is (bytes when the hub says the sizes); at run time nothing
else ever reaches for the network (docs/model.md)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from kb_core.errors import EmbeddingError
from kb_core.progress import Progress, no_progress
from kb_core.storage.embedding import resolve_model_folder

log = logging.getLogger(__name__)

# What FlagEmbedding needs of a model repository; the rest (ONNX exports, other frameworks' weights, images)
# would double or triple the download.
WANTED = ("*.json", "*.safetensors", "*.model", "*.txt", "*.py", "colbert_linear.pt", "sparse_linear.pt",
          "1_Pooling/*")
SKIPPED_WHEN_SAFETENSORS = ("pytorch_model.bin",)


def pull_model(model_id: str, *, progress: Progress = no_progress, endpoint: str | None = None) -> Path:
    """Download `model_id` (a hub id) into the Hugging Face cache; its folder. Already there: nothing is fetched.
    A folder path, an offline setting or an unreachable hub: an `EmbeddingError` that says what to do instead."""
    if Path(model_id).expanduser().is_dir():
        return Path(model_id).expanduser()
    if model_id.count("/") != 1 or model_id.startswith((".", "/", "~")):
        raise EmbeddingError(f"{model_id!r} is neither a folder on this machine nor a hub id (owner/name)")
    offline = [name for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")  # huggingface_hub reads either
               if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")]
    if offline:
        raise EmbeddingError(f"{offline[0]} is set in this process: unset it to pull a model, or copy the model's "
                             "folder here and set KB_EMBEDDING_MODEL to its path")
    from fnmatch import fnmatch

    from huggingface_hub import HfApi, hf_hub_download

    api = HfApi(endpoint=endpoint)
    progress("asking the hub", 0, 0)
    try:
        info = api.model_info(model_id, files_metadata=True)
    except Exception as exc:  # noqa: BLE001 - network, 404 and auth errors all end the pull the same way
        raise _unreachable(model_id, endpoint, exc) from exc
    files = [s for s in info.siblings or [] if any(fnmatch(s.rfilename, p) for p in WANTED)]
    if any(s.rfilename.endswith(".safetensors") for s in files):
        files = [s for s in files if s.rfilename not in SKIPPED_WHEN_SAFETENSORS]
    else:  # older repositories: the PyTorch weights are the only weights
        files += [s for s in info.siblings or [] if s.rfilename in SKIPPED_WHEN_SAFETENSORS]
    if not any(s.rfilename == "config.json" for s in files):
        raise EmbeddingError(f"{model_id} on the hub has no config.json: not a model FlagEmbedding can load")
    sizes = [s.size or 0 for s in files]
    total, done = sum(sizes), 0
    log.info("pulling %s: %d files, %.1f MB", model_id, len(files), total / 1e6)
    for sibling, size in zip(files, sizes, strict=True):
        progress("downloading", done, total)
        try:
            # by branch, not by commit: the cache then records `main` -> commit, which is how a run-time
            # lookup of the hub id (resolve_model_folder) finds it offline
            hf_hub_download(model_id, sibling.rfilename, endpoint=endpoint)
        except Exception as exc:  # noqa: BLE001
            raise _unreachable(model_id, endpoint, exc, sibling.rfilename) from exc
        done += size
    progress("downloading", total, total)
    folder = resolve_model_folder(model_id)
    if folder is None:
        raise EmbeddingError(f"{model_id} was downloaded but is not found in the Hugging Face cache afterwards "
                             "(HF_HOME or HF_HUB_CACHE changed?)")
    log.info("pulled %s into %s", model_id, folder)
    return folder


def _unreachable(model_id: str, endpoint: str | None, exc: Exception, file: str | None = None) -> EmbeddingError:
    where = endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    what = f"{file} of {model_id}" if file else model_id
    return EmbeddingError(f"cannot download {what} from {where}: {type(exc).__name__}: {str(exc)[:300]}. "
                          "Without a network, copy the model's folder to this machine and set KB_EMBEDDING_MODEL to "
                          "its path; until then the built-in model embeds")
