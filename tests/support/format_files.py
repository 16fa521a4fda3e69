"""Files in other formats than Markdown, made at test time from our own words (python-docx, python-pptx,
reportlab), shaped like real product documentation: a runbook, an incident review deck, a web page with its
chrome, a PDF manual with an outline and a table, a Chinese manual; and the bad inputs (encrypted, scanned,
truncated, zip bombs). `SAMPLES` names the golden cases (tests/golden/formats/, tests/support/golden_gen.py)."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Callable

ERROR_CODES = [
    ("ERR_GATEWAY_TIMEOUT", "504", "The card network did not answer within 30 s"),
    ("ERR_CARD_DECLINED", "402", "The issuer declined the charge"),
    ("ERR_RATE_LIMITED", "429", "Too many requests | back off and retry"),
]


def png(width: int = 64, height: int = 48) -> bytes:
    """A small grey PNG, written by hand (no image library needed)."""
    raw = b"".join(b"\x00" + bytes([128, 128, 128]) * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def runbook_docx() -> bytes:
    """A runbook: Title, headings, a numbered and a bulleted list, a table of error codes, an image with its
    description, a code block in a Code style."""
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.shared import Inches, Pt

    document = docx.Document()
    document.core_properties.title = "Payment gateway runbook"
    code = document.styles.add_style("Code", WD_STYLE_TYPE.PARAGRAPH)
    code.font.name = "Courier New"
    code.font.size = Pt(9)
    document.add_heading("Payment gateway runbook", 0)
    document.add_paragraph("This runbook tells the on-call engineer how to recover the payment gateway when "
                           "checkout requests start to fail or time out.")
    document.add_heading("Symptoms", 1)
    for text in ("Checkout returns HTTP 504 to the shop", "The gateway_latency_p99 alert fires",
                 "Merchants report duplicate charges"):
        document.add_paragraph(text, style="List Bullet")
    document.add_heading("Recovery steps", 1)
    for text in ("Check the health endpoint of payment-gateway", "Restart the deployment",
                 "Confirm that the error rate falls below 1 %"):
        document.add_paragraph(text, style="List Number")
    document.add_paragraph("curl -s https://pay.example.com/healthz", style="Code")
    document.add_paragraph("kubectl rollout restart deploy/payment-gateway", style="Code")
    document.add_heading("Error codes", 2)
    table = document.add_table(rows=1, cols=3)
    for cell, text in zip(table.rows[0].cells, ("Code", "HTTP status", "Meaning"), strict=True):
        cell.text = text
    for row in ERROR_CODES:
        for cell, text in zip(table.add_row().cells, row, strict=True):
            cell.text = text
    document.add_heading("Dashboards", 2)
    document.add_picture(io.BytesIO(png()), width=Inches(2))
    document.inline_shapes[-1]._inline.docPr.set("descr", "Gateway latency dashboard with the p99 line in red")
    document.add_paragraph("Escalate to the payments team when ERR_GATEWAY_TIMEOUT lasts longer than 10 minutes.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def chinese_docx() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("支付网关错误码", 1)
    document.add_paragraph("当支付网关返回 ERR_GATEWAY_TIMEOUT 时，请先检查上游银行通道的健康状态，"
                           "再决定是否切换通道。")
    document.add_heading("排查步骤", 2)
    for text in ("查看网关日志中的 trace_id", "确认银行通道 bank-channel-03 是否可用"):
        document.add_paragraph(text, style="List Number")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def review_pptx() -> bytes:
    """An incident review deck: a title slide, bullets on two levels, a table, a picture, speaker notes."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    deck.core_properties.title = "Checkout outage review"
    first = deck.slides.add_slide(deck.slide_layouts[0])
    first.shapes.title.text = "Checkout outage review"
    first.placeholders[1].text = "Incident INC-2041, 14 March"
    timeline = deck.slides.add_slide(deck.slide_layouts[1])
    timeline.shapes.title.text = "Timeline"
    frame = timeline.placeholders[1].text_frame
    frame.text = "09:12 the gateway_latency_p99 alert fired"
    for text, level in (("Checkout returned ERR_GATEWAY_TIMEOUT", 1), ("09:40 traffic moved to bank-channel-03", 0)):
        paragraph = frame.add_paragraph()
        paragraph.text, paragraph.level = text, level
    timeline.notes_slide.notes_text_frame.text = "Mention that the alert threshold was too high."
    codes = deck.slides.add_slide(deck.slide_layouts[5])
    codes.shapes.title.text = "Error codes seen"
    shape = codes.shapes.add_table(len(ERROR_CODES) + 1, 2, Inches(1), Inches(2), Inches(8), Inches(2))
    for row, (code, status) in enumerate([("Code", "Count"), *[(c, s) for c, s, _ in ERROR_CODES]]):
        shape.table.cell(row, 0).text, shape.table.cell(row, 1).text = code, status
    picture_slide = deck.slides.add_slide(deck.slide_layouts[5])
    picture_slide.shapes.title.text = "Latency during the outage"
    picture = picture_slide.shapes.add_picture(io.BytesIO(png()), Inches(2), Inches(2))
    picture._element.nvPicPr.cNvPr.set("descr", "Latency graph peaking at 31 seconds")
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


ARTICLE_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Rate limits - Example Pay Docs</title>
<style>body { font-family: sans-serif }</style><script>window.analytics = {track: function () {}};</script>
</head><body>
<header class="site"><a href="/">Example Pay</a><form><input name="q" placeholder="Search docs"></form></header>
<nav><ul><li><a href="/docs/">Docs home</a></li><li><a href="/docs/errors/">Errors</a></li></ul></nav>
<aside>Was this page helpful? <button>Yes</button></aside>
<main><article>
<h1>Rate limits<a class="headerlink" href="#rate-limits">¶</a></h1>
<p>Every API key may send <strong>100 requests per second</strong>. Past that the API answers
<code>ERR_RATE_LIMITED</code> with HTTP 429 and a <code>Retry-After</code> header.</p>
<h2 id="headers">Response headers</h2>
<table><thead><tr><th>Header</th><th>Meaning</th></tr></thead>
<tbody><tr><td><code>X-RateLimit-Limit</code></td><td>requests allowed per second</td></tr>
<tr><td><code>X-RateLimit-Remaining</code></td><td>requests left | in this second</td></tr></tbody></table>
<h2>Handling the limit</h2>
<ol><li>Read <code>Retry-After</code></li><li>Wait that many seconds<ul><li>never less than one</li></ul></li>
<li>Retry the request</li></ol>
<pre><code class="language-python">if response.status_code == 429:
    time.sleep(int(response.headers["Retry-After"]))</code></pre>
<figure><img src="data:image/png;base64,iVBORw0KGgo=" alt="Requests per second against the limit">
<figcaption>Traffic of one key over a day</figcaption></figure>
<p>See the <a href="../errors/">error reference</a> or the <a href="https://status.example.com/">status page</a>.</p>
<img src="/pixel.gif" alt="">
</article></main>
<footer>© 2026 Example Pay · <a href="/privacy">Privacy</a></footer>
<script src="/bundle.js"></script>
</body></html>
"""


def article_html() -> bytes:
    return ARTICLE_PAGE.encode("utf-8")


def _pdf_styles():
    from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet

    sheet = getSampleStyleSheet()
    return sheet, ParagraphStyle("code", parent=sheet["Code"], fontName="Courier", fontSize=9)


def manual_pdf(*, pages_of_filler: int = 0) -> bytes:
    """A manual with an outline (bookmarks), a ruled table of error codes, a bulleted list and code."""
    from reportlab.lib import colors
    from reportlab.platypus import Paragraph, Preformatted, SimpleDocTemplate, Spacer, Table, TableStyle

    sheet, code = _pdf_styles()
    out = io.BytesIO()

    class Manual(SimpleDocTemplate):
        def afterFlowable(self, flowable):  # noqa: N802 - reportlab's hook
            if isinstance(flowable, Paragraph) and flowable.style.name in ("Heading1", "Heading2"):
                key = f"h{id(flowable)}"
                self.canv.bookmarkPage(key)
                self.canv.addOutlineEntry(flowable.getPlainText(), key,
                                          level=0 if flowable.style.name == "Heading1" else 1)

    story = [Paragraph("Gateway operations manual", sheet["Title"]),
             Paragraph("Installing the gateway", sheet["Heading1"]),
             Paragraph("The gateway runs as the payment-gateway service. Install it with the package manager and "
                       "set max_body_size in gateway.yaml before the first start.", sheet["BodyText"]),
             Preformatted("apt install payment-gateway\nsystemctl enable --now payment-gateway", code),
             Paragraph("Error codes", sheet["Heading2"]),
             Table([["Code", "Status", "Meaning"], *[[c, s, m] for c, s, m in ERROR_CODES]],
                   style=TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black)])),
             Spacer(1, 12),
             Paragraph("Before a release", sheet["Heading1"])]
    story += [Paragraph(f"• {text}", sheet["BodyText"]) for text in
              ("Run the smoke tests against staging", "Check that KST-5003 is closed")]
    for number in range(pages_of_filler):
        story.append(Paragraph(f"Appendix section {number + 1}", sheet["Heading2"]))
        story += [Paragraph(f"Filler paragraph {i} of section {number + 1} names the setting "
                            f"retry_budget_{number}_{i} so that every page has text of its own, "
                            "as a long reference manual does.", sheet["BodyText"]) for i in range(8)]
    Manual(out, title="Gateway operations manual").build(story)
    return out.getvalue()


def chinese_pdf() -> bytes:
    """A Chinese manual without an outline: headings only by their font size."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    out = io.BytesIO()
    page = canvas.Canvas(out)
    page.setFont("STSong-Light", 20)
    page.drawString(72, 760, "支付网关运维手册")
    page.setFont("STSong-Light", 11)
    page.drawString(72, 720, "当网关返回 ERR_GATEWAY_TIMEOUT 时，先检查银行通道的健康状态。")
    page.drawString(72, 704, "如果通道 bank-channel-03 不可用，请切换到备用通道并通知值班人员。")
    page.setFont("STSong-Light", 15)
    page.drawString(72, 670, "常见问题")
    page.setFont("STSong-Light", 11)
    page.drawString(72, 640, "重复扣款时，请根据 trace_id 在日志中查找原始请求。")
    page.save()
    return out.getvalue()


def encrypted_pdf() -> bytes:
    from reportlab.lib.pdfencrypt import StandardEncryption
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    page = canvas.Canvas(out, encrypt=StandardEncryption("user-secret", "owner-secret", strength=128))
    page.drawString(72, 720, "Confidential: the ERR_GATEWAY_TIMEOUT playbook")
    page.save()
    return out.getvalue()


def scanned_pdf(pages: int = 2) -> bytes:
    """Pages that are only an image, as a scanner makes them."""
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    page = canvas.Canvas(out)
    for _ in range(pages):
        page.drawImage(ImageReader(io.BytesIO(png(200, 260))), 36, 36, width=520, height=760)
        page.showPage()
    page.save()
    return out.getvalue()


def long_pdf(pages: int = 300) -> bytes:
    """`pages` pages of a reference manual: a heading and paragraphs on each (no outline)."""
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    page = canvas.Canvas(out)
    for number in range(1, pages + 1):
        page.setFont("Helvetica-Bold", 16)
        page.drawString(72, 760, f"Setting group {number}")
        page.setFont("Helvetica", 10)
        for line in range(40):
            page.drawString(72, 730 - line * 16, f"The setting retry_budget_{number}_{line} bounds how often "
                                                 "a request is retried before it fails.")
        page.drawString(300, 30, str(number))
        page.showPage()
    page.save()
    return out.getvalue()


def _minimal_docx(extra: Callable[[zipfile.ZipFile], None], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        archive.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.'
                                                'openxmlformats.org/package/2006/content-types"/>')
        archive.writestr("word/document.xml", "<w:document/>")
        extra(archive)
    return out.getvalue()


def zip_bomb_docx(inflated_mb: int = 150) -> bytes:
    """A small DOCX whose one member inflates to `inflated_mb` MB of zeros (written in pieces: the test
    process never holds it)."""
    def add(archive: zipfile.ZipFile) -> None:
        with archive.open("word/media/image1.bin", "w") as member:
            zeros = bytes(1024 * 1024)
            for _ in range(inflated_mb):
                member.write(zeros)

    return _minimal_docx(add)


def many_members_docx(members: int = 10_001) -> bytes:
    return _minimal_docx(lambda archive: [archive.writestr(f"word/part{i}.xml", "") for i in range(members)],
                         zipfile.ZIP_STORED)


def lying_zip_docx() -> bytes:
    """A DOCX whose member's headers say it inflates to 1 KB while it holds 4 MB of zeros."""
    data = _minimal_docx(lambda archive: archive.writestr("word/media/blob.bin", bytes(4 * 1024 * 1024)))
    real = struct.pack("<I", 4 * 1024 * 1024)
    return data.replace(real, struct.pack("<I", 1024))  # in the local header and the central directory alike


SAMPLES: dict[str, tuple[str, Callable[[], bytes]]] = {
    "runbook-docx": ("payment-runbook.docx", runbook_docx),
    "chinese-docx": ("支付网关.docx", chinese_docx),
    "review-pptx": ("checkout-outage.pptx", review_pptx),
    "article-html": ("rate-limits.html", article_html),
    "manual-pdf": ("gateway-manual.pdf", manual_pdf),
    "chinese-pdf": ("支付网关运维手册.pdf", chinese_pdf),
}
