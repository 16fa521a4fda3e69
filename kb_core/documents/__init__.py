"""Documents: what a document is and how it gets in.

Owns the frontmatter parser (`frontmatter`), upload validation (`validation`), Markdown chunking
(`chunking`), the upload preview of a file (`lint`) and of a whole batch (`batch`), and the document
service (`service`) that writes a document to disk, database, Milvus and L0 together and undoes the
earlier steps when a later one fails, and the trash deleted documents wait in (`trash`).

May import: kb_core's base modules (`errors`, `terms`, `progress`, `settings`, `access`). The pure parsers
(`frontmatter`, `validation`, `chunking`) import nothing else; `service`, `lint` and `batch` orchestrate and may
also use `kb_core.storage` (through its ports) and `kb_core.retrieval.keyword_index` (to keep L0 current).
"""
