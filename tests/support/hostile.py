"""A document that tries to make the browser load something (nothing remote may come from content), and the
Markdown outside its code spans."""

from __future__ import annotations

HOSTILE_KEYWORD = "HOSTILE_KW"
HOSTILE_PATH = "knowledge_base/api/hostile.md"


def hostile_fields(beacon: str) -> dict:
    """Frontmatter whose title, keywords, summary and section names each carry an image of `beacon` (a base URL
    such as http://127.0.0.1:PORT) and a backtick or `]` that would break out of a code span or a badge."""
    return {
        "title": f"Hostile ![title]({beacon}/title.png) `tick` ]end $x$",
        "keywords": [HOSTILE_KEYWORD, f"k`![kw]({beacon}/keyword.png)`]", f"![kw2]({beacon}/keyword2.png)",
                     f"<img src=x onerror=\"fetch('{beacon}/onerror-keyword')\">"],
        "summary": f"Summary ![summary]({beacon}/summary.png) :red[red] <b>bold</b>",
        "sections": {f"![section]({beacon}/section.png) `s`]": "Setup"},
    }


def hostile_body(beacon: str) -> str:
    """A body with every way Markdown, HTML, Streamlit's directives and KaTeX could load `beacon` or run script."""
    return (
        f"# Hostile\n\n![body]({beacon}/body.png)\n\n"
        f"![reference][logo] and ![logo]\n\n[logo]: {beacon}/reference.png\n\n"
        f"<img src=\"{beacon}/html.png\" onerror=\"fetch('{beacon}/onerror-body'); window.__pwned = 1\">\n\n"
        f"<script>fetch('{beacon}/script'); window.__pwned = 1</script>\n\n"
        f":color[styled]{{background=\"red; background-image: url({beacon}/css.png)\"}}\n\n"
        f"$\\includegraphics{{{beacon}/katex.png}}$ and $\\href{{javascript:window.__pwned=1}}{{x}}$\n\n"
        f"[![badge]({beacon}/badge.svg)](https://example.invalid/)\n\n"
        f"| a | b |\n|---|---|\n| ![cell]({beacon}/cell.png) | x |\n\n"
        f"## Setup\n\nSetup text ![inline]({beacon}/setup.png) about {HOSTILE_KEYWORD}.\n\n"
        f"## ![heading]({beacon}/heading.png) Details\n\nDetails text.\n"
    )


def hostile_document(beacon: str) -> str:
    import yaml

    front = yaml.safe_dump(hostile_fields(beacon), allow_unicode=True, sort_keys=False, width=1000)
    return f"---\n{front}---\n\n{hostile_body(beacon)}"


def hostile_queries(beacon: str) -> tuple[str, str]:
    """Two `?q=` values: one that finds the hostile document by its keyword, one that no keyword answers (at most
    an L1 passage, so it is listed under "Needs attention" on the Tool calls page); both with a backtick, an
    image and a `]`."""
    return (f"{HOSTILE_KEYWORD} `![query]({beacon}/query.png)` ]",
            f"`![nothing]({beacon}/nothing.png)` ] :red[x]")


def _backtick_run(text: str, at: int) -> int:
    return len(text[at:]) - len(text[at:].lstrip("`"))


def outside_code(markdown: str) -> str:
    """`markdown` without its code spans (CommonMark: a backtick run up to the next run of the same length;
    backslash escapes outside them), where `![` is text and starts no image."""
    out, i = [], 0
    while i < len(markdown):
        char = markdown[i]
        if char == "\\":
            out.append(markdown[i:i + 2])
            i += 2
            continue
        if char != "`":
            out.append(char)
            i += 1
            continue
        run, j, close = _backtick_run(markdown, i), i + _backtick_run(markdown, i), None
        while j < len(markdown) and close is None:
            if markdown[j] == "`":
                close = j if _backtick_run(markdown, j) == run else None
                j += _backtick_run(markdown, j)
            else:
                j += 1
        if close is None:  # no closing run: literal backticks
            out.append("`" * run)
            i += run
        else:
            i = close + run
    return "".join(out)
