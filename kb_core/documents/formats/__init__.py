"""Formats: PDF, Word (DOCX), PowerPoint (PPTX), HTML and plain text turned into a Markdown rendition.

The original is the truth; the rendition is derived from it and made again when the original or the converter
changes (`Rendition.converter_version`). This package is the conversion alone, bytes in and a rendition out, so
that the write path, the upload preview, reconcile and the folder watcher can all call it:

- `kinds`: `sniff(data, file_name)`, the type decided by the content (magic bytes, the zip's member names, a
  leading doctype), the name only a hint; unknown binary refused;
- `convert`: `convert(data, file_name)` -> `Rendition`, run in a child process with a memory and a time limit
  (`sandbox`; Markdown and plain text pass through here), the suggestions (title, summary, keyword
  candidates: `suggest`) made in the caller's process from the rendition's Markdown;
- the converters, each run inside the child: `from_pdf` (pypdfium2; `pdf_layout` for headings, lists and
  paragraphs, `pdf_tables` for ruled tables), `from_docx` (mammoth's HTML), `from_pptx` (python-pptx),
  `from_html` (lxml), dispatched by `converters`; `html_markdown` writes Markdown from an HTML tree (HTML and
  Word both), `markdown_out` the Markdown pieces every converter shares; `zip_guard` checks a Word or
  PowerPoint zip before any library opens it.

May import: kb_core's base modules (`errors`, `progress`, `terms`) and the identifier rule of
`kb_core.keywords.suggestions`; nothing of the stores, the folder or the write path (`IMPORT_RULES`): a conversion
touches nothing but its bytes.
"""
