"""Boilerplate out of Markdown bodies: what an agent and the chunker should never see. Pure.

Real documentation opens with licence comments (`<!-- Licensed to the Apache Software Foundation … -->`),
`<head><link rel="canonical" …></head>` blocks and MDX `import`/`export` lines. Left in, they fill the first
2,000 characters of an answer and become the first chunk of every document. Removed, outside fenced code
only: inside a code fence every line is content (a YAML sample may well contain `<!-- -->` or `import`).
"""

from __future__ import annotations

import re

from kb_core.documents.frontmatter import split_body

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_MDX_LINE = re.compile(r"^(?:import\s+[\w*{}\s,]+\s+from\s+['\"][^'\"]+['\"]|import\s+['\"][^'\"]+['\"]|export\s+"
                       r"(?:const|let|var|function|default)\b).*$")
_HEAD_OPEN = re.compile(r"^\s*<head(\s[^>]*)?>", re.IGNORECASE)
_HEAD_CLOSE = re.compile(r"</head\s*>", re.IGNORECASE)
_BLANK_RUN = re.compile(r"\n{3,}")


def clean_body(body: str) -> str:
    """The body without HTML comments, `<head>` blocks and MDX import/export statements outside code fences."""
    out: list[str] = []
    fence: str | None = None
    in_comment = in_head = False
    in_export = 0  # open braces of a multi-line `export const x = {` statement
    for line in body.splitlines():
        if fence is not None:
            out.append(line)
            match = _FENCE.match(line)
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            continue
        if in_comment:
            end = line.find("-->")
            if end < 0:
                continue
            in_comment = False
            line = line[end + 3 :]
        if in_head:
            close = _HEAD_CLOSE.search(line)
            if close is None:
                continue
            in_head = False
            line = line[close.end() :]
        if in_export:
            in_export += line.count("{") - line.count("}")
            in_export = max(in_export, 0)
            continue
        match = _FENCE.match(line)
        if match:
            fence = match.group(1)
            out.append(line)
            continue
        line, in_comment = _strip_comments(line)
        if _HEAD_OPEN.match(line):
            close = _HEAD_CLOSE.search(line)
            if close is None:
                in_head = True
                continue
            line = line[close.end() :]
        if _MDX_LINE.match(line):
            if line.startswith("export"):
                in_export = max(line.count("{") - line.count("}"), 0)
            continue
        out.append(line)
    text = "\n".join(out)
    return _BLANK_RUN.sub("\n\n", text).strip("\n") + ("\n" if text.strip() else "")


def _strip_comments(line: str) -> tuple[str, bool]:
    """The line without complete `<!-- … -->` comments; True when a comment opens and does not close."""
    while True:
        start = line.find("<!--")
        if start < 0:
            return line, False
        end = line.find("-->", start + 4)
        if end < 0:
            head = line[:start]
            return head, True
        line = line[:start] + line[end + 3 :]


def clean_document(content: str) -> str:
    """The frontmatter block as written, followed by the cleaned body (the answer an agent reads)."""
    text = content[1:] if content.startswith("\ufeff") else content
    body = split_body(text)
    head = text[: len(text) - len(body)] if body and text.endswith(body) else ("" if body == text else text)
    cleaned = clean_body(body)
    if head and cleaned:
        return head + ("" if head.endswith("\n") else "\n") + "\n" + cleaned.lstrip("\n")
    return head + cleaned
