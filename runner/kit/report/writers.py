"""`kit report`: a report's document rendered as Markdown, CSV, JSON or a self-contained
HTML page, and filed in the results folder."""

import csv
import dataclasses
import html
import io
import json
from pathlib import Path

from kit.analysis import summary
from kit.analysis.findings import Analysis
from kit.core.log import logger
from kit.core.paths import write_atomically
from kit.core.schema import printable
from kit.report import document, plots, published
from kit.report.model import Block, Bullets, Document, Table

FORMATS = ("md", "csv", "json", "html")

log = logger(__name__)


def _md(text: str) -> str:
    """Text for a Markdown line: one line (printable), and no tag a renderer would take
    as HTML (a record's unit or version '<script>' became markup in the heading)."""
    return printable(text).replace("<", "&lt;")


def _markdown(doc: Document) -> str:
    lines = [f"# {_md(doc.title)}", ""]
    for block in doc.lead:
        lines += [*_md_block(block), ""]
    for section in doc.sections:
        blocks = [b for b in section.blocks if not isinstance(b, plots.Figure)]
        if not blocks:
            continue  # figures only: the HTML page's
        lines += [f"## {_md(section.title)}", ""]
        for block in blocks:
            lines += [*_md_block(block), ""]
    return "\n".join(lines)


def _md_block(block: Block) -> list[str]:
    if isinstance(block, Table):
        return _md_table(block.columns, block.rows)
    if isinstance(block, Bullets):
        return [f"- {_md(x)}" for x in block.items]
    return [_md(block)]


def _md_table(columns: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(map(_md_cell, columns)) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(map(_md_cell, r)) + " |" for r in rows),
    ]


def _md_cell(text: str) -> str:
    """A table cell's text, kept in its cell: what a record carries from the command line
    (a unit, an image's path) could hold a '|' or, in a file edited by hand, a newline."""
    return _md(text).replace("|", "\\|")


def _h(text: str) -> str:
    """Text for the page: one line (printable), its markup characters escaped."""
    return html.escape(printable(text))


def _html_table(columns: list[str], rows: list[list[str]], wide: bool = False) -> str:
    """A table; a heading may break after each underscore (process_group), and a wide one
    (the launch phases': 17 columns) is set smaller, so it fits the page's width instead of
    needing a sideways scroll."""
    head = "".join(f"<th>{_h(c).replace('_', '_<wbr>')}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_h(c)}</td>" for c in r) + "</tr>" for r in rows)
    kind = ' class="wide"' if wide else ""
    return f"<table{kind}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:90%}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#eee}
table.wide{font-size:80%}table.wide td,table.wide th{padding:2px 4px}
figure{display:inline-block;margin:1em}figcaption{font-size:90%;text-align:center}"""


def _html(doc: Document) -> str:
    parts = [f"<h1>{_h(doc.title)}</h1>", *map(_html_block, doc.lead)]
    for section in doc.sections:
        parts.append(f"<h2>{_h(section.title)}</h2>")
        parts += map(_html_block, section.blocks)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_h(doc.title)}</title><style>{STYLE}</style></head>"
        f"<body>{''.join(parts)}</body></html>\n"
    )


def _html_block(block: Block | plots.Figure) -> str:
    if isinstance(block, Table) and block.fold:
        table = _html_table(block.columns, block.rows)
        return f"<details><summary>{_h(block.fold)}</summary>{table}</details>"
    if isinstance(block, Table):
        return _html_table(block.columns, block.rows, block.wide)
    if isinstance(block, Bullets):
        items = "".join(f"<li>{_h(x)}</li>" for x in block.items)
        return f"<ul{' class=' + block.kind if block.kind else ''}>{items}</ul>"
    if isinstance(block, plots.Figure):
        return (
            f'<figure id="{_h(block.slug)}">{block.svg}<figcaption>'
            f"{_h(block.caption)}</figcaption></figure>"
        )
    return f"<p>{_h(block)}</p>"


def _csv(doc: Document) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    rows = [doc.arms.columns, *doc.arms.rows]  # a record's text: one line a row
    w.writerows([printable(c) if isinstance(c, str) else c for c in row] for row in rows)
    return buf.getvalue()


def _json(doc: Document) -> str:
    return json.dumps(doc.data, indent=2) + "\n"


RENDERERS = {"md": _markdown, "csv": _csv, "json": _json, "html": _html}


def render(a: Analysis, fmt: str) -> str:
    """The report of an analysis in one format (figures are drawn for HTML only)."""
    return RENDERERS[fmt](document.build(a, figures=fmt == "html"))


def write(
    out_dirs: list[Path],
    fmt: str,
    confidence: float,
    allow_mismatch: bool,
    baseline: str | None = None,
) -> tuple[Path | None, str]:
    """Render the report of results directories, filed in the first as report.FMT
    (None: that folder is not writable, so the caller prints the text instead). A
    preset's folder brings its legs, its baseline (unless one is given) and its
    published figures."""
    dirs, preset = published.expand(out_dirs)
    chosen = baseline or (preset["baseline"] if preset else summary.saved_baseline(dirs))
    a = summary.analyse(dirs, confidence, allow_mismatch, chosen)
    if preset:
        about = {key: preset[key] for key in ("name", "title", "question")}
        figures = published.published(a, preset["published"])
        a = dataclasses.replace(a, preset=about, published=figures)
    text = render(a, fmt)
    path = out_dirs[0] / f"report.{fmt}"
    try:
        write_atomically(path, text)
    except OSError as e:
        log.warning(f"kit: warning: cannot write {path} ({e.strerror}); printing it")
        return None, text
    return path, text
