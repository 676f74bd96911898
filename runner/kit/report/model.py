"""The document model a report is built as and every writer renders: titled sections of
tables, lists, paragraphs and figures, so Markdown, HTML, CSV and JSON cannot disagree."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[str]]
    fold: str = ""  # the HTML page shows it collapsed, under this summary
    wide: bool = False  # many narrow columns: the HTML page sets it smaller, to fit


@dataclass(frozen=True)
class Bullets:
    items: list[str]
    kind: str = ""  # a class for the HTML list ("answers")


Block = Table | Bullets | str  # a str is a paragraph; a section may hold a plots.Figure too


@dataclass(frozen=True)
class Section:
    title: str
    blocks: list


@dataclass(frozen=True)
class Document:
    """What a report says, built once from the analysis (kit.report.document.build)."""

    title: str
    lead: list[Block]  # before the first section: the preset, the answers, the header
    sections: list[Section]
    arms: Table  # one row per arm and comparison, raw numbers: the CSV file
    data: dict  # the whole analysis as plain data: the JSON file
