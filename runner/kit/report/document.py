"""The report as one document (kit.report.model), built once from an analysis: its
opening, then the sections SECTIONS declares in their order, plus the per-arm numbers.
A new table is its row function and one Tabled entry in SECTIONS, both here; the
writers render whatever the document holds."""

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from kit.analysis import fingerprints, summary
from kit.analysis.findings import OOM_FIELDS, Analysis, Group
from kit.core import benches
from kit.report import arms, plots, sentences
from kit.report.model import Bullets, Document, Section, Table
from kit.report.text import interval, title
from kit.results.record import Key

Part = Callable[[Analysis], list[Section]]  # an entry of SECTIONS: its sections, maybe none


@dataclass(frozen=True)
class Tabled:
    """A section that is one table (and a note under it), left out where it has no rows."""

    title: str
    columns: list[str]
    rows: Callable[[Analysis], list[list[str]]]
    note: str = ""

    def __call__(self, a: Analysis) -> list[Section]:
        rows = self.rows(a)
        if not rows:
            return []
        note = [self.note] if self.note else []
        return [Section(self.title, [Table(self.columns, rows), *note])]


@dataclass(frozen=True)
class Listed:
    """A section that is one list, left out where it is empty."""

    title: str
    items: Callable[[Analysis], list[str]]

    def __call__(self, a: Analysis) -> list[Section]:
        items = self.items(a)
        return [Section(self.title, [Bullets(items)])] if items else []


PUBLISHED_COLUMNS = ["claim", "published", "their setting", "source", "measured here", "finding"]
PUBLISHED_NOTE = (
    "Like is compared with like: ratios, efficiencies and overheads, never absolute "
    "images/s across different hardware. A finding reads the measured interval (at the "
    "confidence above) against the published figure on the same scale."
)


def _published_rows(a: Analysis) -> list[list[str]]:
    return [
        [p[c] for c in ("claim", "published", "setting", "source", "measured", "finding")]
        for p in a.published
    ]


def _configurations(a: Analysis) -> list[Section]:
    """Each configuration's arms, with what was left out, what was slow and where the
    spread lies under them; after it, what differs between its launches."""
    out = []
    for g in a.groups:
        said = [x for x in (sentences.disturbed(g), sentences.slow(g), sentences.spread(g)) if x]
        out += [Section(title(g.key), [*arms.tables(a, g), *said]), *_fingerprints(g)]
    return out


def _fingerprints(g: Group) -> list[Section]:
    """Beside a group's verdicts: what differs between each arm's launches and the
    baseline's, and the arm that would test each difference (kit.analysis.fingerprints);
    none where no launch carries a fingerprint."""
    fp = g.fingerprints
    if fp is None:
        return []
    blocks: list = list(fingerprints.sentences(fp, {x.runtime: x.verdict for x in g.arms}))
    if rows := fingerprints.rows(fp):
        fold = f"Differences from {fp.baseline}'s launches ({len(rows)})"
        blocks.append(Table(fingerprints.columns(fp), rows, fold))
    if rows := fingerprints.varies_rows(fp):
        fold = f"What varies between an arm's own launches ({len(rows)})"
        blocks.append(Table(fingerprints.VARIES_COLUMNS, rows, fold))
    return [Section(f"What differs between launches · {title(g.key)}", blocks)]


def _key_cells(k: Key, *fields: str) -> list[str]:
    return [str(getattr(k, f)) for f in fields]


LAUNCH_KEY = ("image", "bench", "model", "data", "batch_size", "ranks")


def _launch_cost(a: Analysis) -> list[Section]:
    """Each arm's launch by phase, so that a runtime's start-up cost is seen where it lies
    (its own start, imports from its image, ...), what each phase holds, and the launches a
    minute precision is bought with; none where no record carries phases."""
    phased = [(g.key, arm) for g in a.groups for arm in g.arms if arm.phases]
    if not phased:
        return []
    meaning = {**benches.PHASES, **summary.AFTER}
    names = [p for p in meaning if any(p in arm.phases for _, arm in phased)]
    rows = [
        [
            *_key_cells(k, *LAUNCH_KEY),
            arm.runtime,
            str(arm.n),
            *(f"{arm.phases[p]:.2f}" if p in arm.phases else "n/a" for p in names),
        ]
        for k, arm in phased
    ]
    columns = ["image", "bench", "model", "data", "batch", "ranks", "runtime", "n", *names]
    said = "; ".join(f"{p}: {meaning[p]}" for p in names) + "."
    blocks: list = [Table(columns, rows, wide=True), said]
    if a.minutes:
        blocks.append(
            f"Launches per minute: {a.ok / a.minutes:.2f} ({a.ok} ok launches in "
            f"{a.minutes:.1f} min, from the first trial's start to the last one's end, "
            "warm-up and failed trials' time included)."
        )
    return [Section("Launch cost by phase (median s)", blocks)]


SCALING_COLUMNS = [
    "image",
    "bench",
    "model",
    "data",
    "batch",
    "ranks",
    "nodes",
    "runtime",
    "efficiency [CI]",
]


def _scaling_rows(a: Analysis) -> list[list[str]]:
    fields = ("image", "bench", "model", "data", "batch_size", "ranks")
    return [
        [*_key_cells(s.key, *fields), str(s.nodes), s.runtime, interval(s.efficiency, 3)]
        for s in a.scaling
    ]


IO_COLUMNS = ["image", "bench", "model", "batch", "ranks", "runtime", "I/O overhead [CI]"]


def _io_rows(a: Analysis) -> list[list[str]]:
    fields = ("image", "bench", "model", "batch_size", "ranks")
    return [[*_key_cells(x.key, *fields), x.runtime, interval(x.overhead, 3)] for x in a.io]


def _sweeps(a: Analysis) -> list[Section]:
    """A table per declared series of each sweep benchmark measured, its columns from the
    declaration (kitschema): what identifies a point, then each value's interval."""
    out = []
    for name in sorted({s.bench for s in a.sweeps}):
        spec = benches.get(name)
        for series in spec.series:
            mine = [s for s in a.sweeps if (s.bench, s.series) == (name, series.field)]
            columns = [
                *("image", "ranks", "launcher", "transport", "runtime", "n", *series.at),
                *(f"{v.label} {v.unit} [CI]" for v in series.values),
                spec.version_label,
            ]
            rows = [
                [
                    *(s.image, str(s.ranks), s.launcher, s.transport, s.runtime, str(s.n)),
                    *map(str, p.at),
                    *(interval(p.values[v.key], v.digits) for v in series.values),
                    s.version,
                ]
                for s in mine
                for p in s.points
            ]
            if rows:
                out.append(Section(f"{spec.title}: {series.title}", [Table(columns, rows)]))
    return out


OOM_COLUMNS = ["image", "bench", "model", "batch", "ranks", "runtime", "trials"]


def _oom_rows(a: Analysis) -> list[list[str]]:
    return [[str(o[f]) for f in (*OOM_FIELDS, "trials")] for o in a.oom]


def _failed(a: Analysis) -> list[str]:
    return [
        f"#{t.index} {t.runtime} np={t.ranks} {t.model} bs={t.batch_size}: "
        f"{t.status} (exit {t.exit_code}" + (f"; {t.cause}" if t.cause else "") + ")"
        for t in a.not_ok
    ]


def _figures(a: Analysis) -> list[Section]:
    return [Section("Figures", list(plots.figures(a)))]


def _runtimes(a: Analysis) -> list[Section]:
    """Each runtime as it ran, then how the report's numbers were made: always last."""
    said = [
        f"{rt} ({v['version']}): {'; '.join(v['settings']) or 'defaults'}"
        + (f"; passed through: {' '.join(v['args'])}" if v["args"] else "")
        for rt, v in a.runtimes.items()
    ]
    images = [Section("Images", [Bullets(a.verified)])] if a.verified else []
    return [*images, Section("Runtimes", [Bullets(said), sentences.NOTES])]


# What the report holds after its opening, in this order.
SECTIONS: tuple[Part, ...] = (
    Tabled("Published beside measured", PUBLISHED_COLUMNS, _published_rows, PUBLISHED_NOTE),
    _configurations,
    _launch_cost,
    Tabled("Scaling efficiency", SCALING_COLUMNS, _scaling_rows),
    Tabled("I/O overhead", IO_COLUMNS, _io_rows),
    _sweeps,
    Tabled("Did not fit in memory (out of memory is a result)", OOM_COLUMNS, _oom_rows),
    Listed("Ranks on fewer hosts than asked", lambda a: a.crowded),
    Listed("Trials that did not finish", _failed),
    Listed("Trials left out of the analysis", lambda a: a.left_out),
    _figures,
    _runtimes,
)


def build(a: Analysis, figures: bool) -> Document:
    """The report of an analysis (figures: draw them, for the HTML page alone, as drawing
    takes matplotlib seconds that the other formats would throw away)."""
    parts = [part for part in SECTIONS if figures or part is not _figures]
    sections = [section for part in parts for section in part(a)]
    return Document(
        sentences.report_title(a),
        sentences.lead(a),
        sections,
        arms.raw(a),
        dataclasses.asdict(a),
    )
