"""Documents: what a document is and how it gets in.

Owns the frontmatter parser (`frontmatter`) and its in-place rewriting (`frontmatter_edit`, `document_edit`),
the path rule (`path_rule`: which categories and file names are allowed), the knowledge-base folder (`folder`:
display and disk paths, the scan, reading and writing a document's file), the body's cleaning, headings and
chunks (`cleaning`, `sections`, `chunking`), languages and translations (`language`), who may read a page and
what a question is narrowed to (`scope`), the upload preview of a file (`lint`) and of a whole batch
(`batch`), the curators' synonyms and their file, `_synonyms.yaml` (`synonyms`), the document service
(`service`) that writes a document to disk, database, Milvus and L0 together and undoes the earlier steps when
a later one fails, reconcile (`reconcile`), the folder watcher (`folder_watcher`) and the trash deleted
documents wait in (`trash`), and the conversion of PDF, Word, PowerPoint, HTML and text files into Markdown
renditions (`formats`: bytes in, a rendition out, run in a limited child process; it touches no store).

May import: kb_core's base modules (`errors`, `terms`, `progress`, `settings`, `access`) and `kb_core.storage`
(its ports, and the record types and constants of the stores) and `kb_core.keywords` (what L0 knows of a
document, the index a write updates); never `kb_core.retrieval`, the agents, the jobs
or the facade (`tests/unit/test_architecture.py`, `IMPORT_RULES`). The pure parsers (`frontmatter`, `path_rule`,
`cleaning`, `sections`, `chunking`, `language`) import nothing but each other and the base modules.
"""
