"""`kit history IMAGE --runtime R`: one runtime's overhead, campaign by campaign, over time.

Each row is one campaign's ratio of the arm to native with its interval, as that
campaign's report gives it (paired by round, Bonferroni within the campaign), and what
changed since the row before of the same configuration: the runtime's version,
the kernel, the image's digest or the host. Those are what a centre upgrades, so they
are what a step in the ratio is read against.
"""

from dataclasses import dataclass
from pathlib import Path

from kit.core import columns
from kit.results import analysis, catalogue, compare, selection, stats
from kit.results.findings import REFERENCE
from kit.results.record import Key, Trial

WATCHED = ("runtime", "kernel", "image", "host")  # what a row's "changed" names


@dataclass(frozen=True)
class Point:
    started: str
    campaign: str
    arm: str
    key: Key
    ratio: stats.Interval | None
    verdict: str
    facts: dict[str, str]  # WATCHED -> the value most of the arm's trials had
    changed: list[str]  # "kernel 6.1 -> 6.8", against the row before


def _facts(rs: list[Trial]) -> dict[str, str]:
    return {
        "runtime": stats.mode([t.runtime_version for t in rs]),
        "kernel": stats.mode([str(t.host.get("kernel", "?")) for t in rs]),
        "image": stats.mode([str(t.image_digest or "?")[:19] for t in rs]),
        "host": stats.mode([str(t.host.get("hostname", "?")) for t in rs]),
    }


def points(path: Path, sel: selection.Selection, conf: float) -> list[Point]:
    """The selected campaigns' ratios of sel.runtime's arms (R and its R@LABEL arms) to
    native, oldest first."""
    out: list[Point] = []
    last: dict[Key, dict[str, str]] = {}
    with catalogue.opened(path) as db:
        listed = selection.campaigns(db, sel)
        by_id = {c.id: selection.records(db, [c.id]) for c in listed}
    for c in listed:
        rs = by_id[c.id]
        a = analysis.summarise(rs, c.folder, conf)
        for g in a.groups:
            for arm in g.arms:
                name = arm.runtime
                if arm.against != REFERENCE or name.split("@")[0] != sel.runtime:
                    continue
                mine = [t for t in rs if t.runtime == name and not t.warmup]
                facts = _facts(mine)
                before = last.get(g.key, facts)
                changed = [
                    f"{k} {before[k]} -> {facts[k]}" for k in WATCHED if before[k] != facts[k]
                ]
                last[g.key] = facts
                out.append(Point(c.started, c.campaign, name, g.key, arm.ratio, arm.verdict,
                                 facts, changed))  # fmt: skip
    return out


HEAD = ("STARTED", "CAMPAIGN", "ARM", "RATIO", "INTERVAL", "VERDICT", "CHANGED")


def table(pts: list[Point]) -> dict[Key, list[tuple[str, ...]]]:
    """Per configuration, one row a campaign (columns HEAD): the text's and the page's."""
    out: dict[Key, list[tuple[str, ...]]] = {}
    for p in pts:
        out.setdefault(p.key, []).append((
            p.started or "-", p.campaign, p.arm,
            f"{p.ratio.value:.3f}" if p.ratio else "-",
            f"[{p.ratio.low:.3f}, {p.ratio.high:.3f}]" if p.ratio else "-",
            p.verdict, "; ".join(p.changed) or "-",
        ))  # fmt: skip
    return out


def text(pts: list[Point]) -> str:
    """A table a configuration: one row a campaign."""
    lines: list[str] = []
    for key, body in table(pts).items():
        lines += ["", compare.describe(key)] if lines else [compare.describe(key)]
        lines += columns.aligned([HEAD, *body], indent="  ")
    return "\n".join(lines) + "\n"
