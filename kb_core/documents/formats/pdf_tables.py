"""Ruled tables on a PDF page, found from the lines drawn on it (pypdfium2's path objects).

A table here is a grid: horizontal and vertical rules that cross each other, at least two rows and two columns
of cells. Each cell's text is what pdfium finds inside its box; a cell whose right-hand rule is missing spans
into the next (its text is read across both). Tables drawn without rules (columns aligned by spaces alone) are
not found: their rows stay lines of text. Pages drawing thousands of rules (a vector figure) are not searched.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import pypdfium2.raw as pdfium_c

from kb_core.documents.formats import markdown_out as md

TOLERANCE = 2.0  # points: rules this close are one, and touch
MIN_CELL = 4.0  # points: rules closer than this are one border drawn twice (double rules, cell padding)
MIN_RULE = 5.0  # points: shorter strokes are no rules (tick marks, bullets)
MAX_RULES = 2000  # more on one page is a drawing, not a table
MAX_CELLS = 5000


@dataclass(frozen=True)
class Rule:
    at: float  # y of a horizontal rule, x of a vertical one
    start: float
    end: float


@dataclass(frozen=True)
class Table:
    left: float
    bottom: float
    right: float
    top: float
    markdown: str

    def holds(self, x: float, y: float) -> bool:
        return self.left - 1 <= x <= self.right + 1 and self.bottom - 1 <= y <= self.top + 1


def _segments(obj) -> list[tuple[float, float, float, float]]:
    """The straight segments of one path object, in page coordinates."""
    matrix = pdfium_c.FS_MATRIX()
    if not pdfium_c.FPDFPageObj_GetMatrix(obj, matrix):
        return []
    count = pdfium_c.FPDFPath_CountSegments(obj)
    x, y = ctypes.c_float(), ctypes.c_float()
    points: list[tuple[float, float]] = []
    found = []
    start: tuple[float, float] | None = None
    for i in range(max(count, 0)):
        segment = pdfium_c.FPDFPath_GetPathSegment(obj, i)
        if not pdfium_c.FPDFPathSegment_GetPoint(segment, x, y):
            continue
        point = (matrix.a * x.value + matrix.c * y.value + matrix.e, matrix.b * x.value + matrix.d * y.value + matrix.f)
        kind = pdfium_c.FPDFPathSegment_GetType(segment)
        if kind == pdfium_c.FPDF_SEGMENT_MOVETO or not points:
            start = point
        elif kind == pdfium_c.FPDF_SEGMENT_LINETO:
            found.append((*points[-1], *point))
        if pdfium_c.FPDFPathSegment_GetClose(segment) and start is not None:
            found.append((*point, *start))
        points.append(point)
    return found


def rules_of(page) -> tuple[list[Rule], list[Rule]]:
    """(horizontal, vertical) rules drawn on the page, collinear pieces merged."""
    horizontal: list[Rule] = []
    vertical: list[Rule] = []
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_PATH], max_depth=1):
        for x0, y0, x1, y1 in _segments(obj.raw):
            if abs(y1 - y0) <= 1.0 and abs(x1 - x0) >= MIN_RULE:
                horizontal.append(Rule((y0 + y1) / 2, min(x0, x1), max(x0, x1)))
            elif abs(x1 - x0) <= 1.0 and abs(y1 - y0) >= MIN_RULE:
                vertical.append(Rule((x0 + x1) / 2, min(y0, y1), max(y0, y1)))
        if len(horizontal) + len(vertical) > MAX_RULES:
            return [], []
    return _merged(horizontal), _merged(vertical)


def _merged(rules: list[Rule]) -> list[Rule]:
    merged: list[Rule] = []
    for rule in sorted(rules, key=lambda r: (round(r.at / TOLERANCE), r.start)):
        last = merged[-1] if merged else None
        if last and abs(last.at - rule.at) <= TOLERANCE and rule.start <= last.end + TOLERANCE:
            merged[-1] = Rule(last.at, last.start, max(last.end, rule.end))
        else:
            merged.append(rule)
    return merged


def _crosses(h: Rule, v: Rule) -> bool:
    return h.start - TOLERANCE <= v.at <= h.end + TOLERANCE and v.start - TOLERANCE <= h.at <= v.end + TOLERANCE


def _groups(horizontal: list[Rule], vertical: list[Rule]) -> list[tuple[list[Rule], list[Rule]]]:
    """Rules that touch, as connected groups (each a candidate grid)."""
    parent = list(range(len(horizontal) + len(vertical)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, h in enumerate(horizontal):
        for j, v in enumerate(vertical):
            if _crosses(h, v):
                parent[root(i)] = root(len(horizontal) + j)
    groups: dict[int, tuple[list[Rule], list[Rule]]] = {}
    for i, h in enumerate(horizontal):
        groups.setdefault(root(i), ([], []))[0].append(h)
    for j, v in enumerate(vertical):
        groups.setdefault(root(len(horizontal) + j), ([], []))[1].append(v)
    return list(groups.values())


def _positions(values: list[float]) -> list[float]:
    found: list[float] = []
    for value in sorted(values):
        if not found or value - found[-1] > MIN_CELL:
            found.append(value)
    return found


def _grid_table(textpage, horizontal: list[Rule], vertical: list[Rule]) -> Table | None:
    ys = sorted(_positions([h.at for h in horizontal]), reverse=True)
    xs = _positions([v.at for v in vertical])
    if len(ys) < 3 or len(xs) < 3 or (len(ys) - 1) * (len(xs) - 1) > MAX_CELLS:
        return None
    rows = []
    for top, bottom in zip(ys, ys[1:], strict=False):
        middle = (top + bottom) / 2
        row: list[str] = []
        start = 0
        for c in range(1, len(xs)):
            closed = c == len(xs) - 1 or any(abs(v.at - xs[c]) <= MIN_CELL and v.start - TOLERANCE <= middle
                                             <= v.end + TOLERANCE for v in vertical)
            if closed:
                text = textpage.get_text_bounded(xs[start] + 0.5, bottom + 0.5, xs[c] - 0.5, top - 0.5)
                row += [text] + [""] * (c - start - 1)
                start = c
        rows.append(row)
    if sum(1 for row in rows for cell in row if cell.strip()) < 2:
        return None
    used = [c for c in range(len(xs) - 1) if any(row[c].strip() for row in rows)]  # spans leave empty columns
    return Table(xs[0], ys[-1], xs[-1], ys[0], md.table([[row[c] for c in used] for row in rows]))


def tables_of(page, textpage) -> list[Table]:
    """The ruled tables of a page, top first."""
    horizontal, vertical = rules_of(page)
    if len(horizontal) < 3 or len(vertical) < 3:
        return []
    found = [table for hs, vs in _groups(horizontal, vertical)
             if (table := _grid_table(textpage, hs, vs)) is not None]
    return sorted(found, key=lambda t: -t.top)
