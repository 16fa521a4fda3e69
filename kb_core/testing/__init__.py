"""What a user's own tests (and the benchmarks) need beside `open_knowledge_base(Settings(...))` on a temporary
folder: `milvus_server.milvus_lite_server`, a `milvus-lite server` on a free port for tests with several
processes; and the conversion of other formats, to check what a file becomes before it is uploaded: `sniff`,
`convert` (a `Rendition`), `measure_conversion` (with its seconds and the converter's peak memory),
`ConversionLimits`, `Kind`. Each name loads its module on first use, like `kb_core` itself."""

from __future__ import annotations

from typing import Any

from kb_core import lazy_attribute

_EXPORTS: dict[str, str] = {
    "convert": "kb_core.documents.formats.convert",
    "converter_version": "kb_core.documents.formats.convert",
    "Rendition": "kb_core.documents.formats.convert",
    "Kind": "kb_core.documents.formats.kinds",
    "sniff": "kb_core.documents.formats.kinds",
}
# public names that are another name in their module
_RENAMED: dict[str, tuple[str, str]] = {
    "ConversionLimits": ("kb_core.documents.formats.convert", "Limits"),
    "measure_conversion": ("kb_core.documents.formats.convert", "measure"),
}

__all__ = sorted([*_EXPORTS, *_RENAMED])


def __getattr__(name: str) -> Any:
    return lazy_attribute(globals(), _EXPORTS, _RENAMED, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
