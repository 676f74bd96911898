"""`kit history IMAGE --runtime R`: one runtime's overhead, campaign by campaign, over time.

Each row is one campaign's ratio of the arm to native with its interval, as that
campaign's report gives it (paired by round, Bonferroni within the campaign), and what
changed since the row before of the same configuration: the runtime's version,
the kernel, the image's digest or the host. Those are what a centre upgrades, so they
are what a step in the ratio is read against.
"""

import contextlib
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from kit import __version__
from kit.across import compare
from kit.analysis import stats, summary
from kit.analysis.findings import REFERENCE
from kit.core import columns
from kit.core.errors import KitError
from kit.results import catalogue, selection
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


CACHED_AT = 0.95  # the confidence whose points the catalogue keeps (the default)


def _made(conf: float) -> str:
    """What a kept campaign's points were computed with: another kit's analysis, or
    another confidence, computes them again."""
    return f"kit {__version__}, confidence {conf!r}"


def _overheads(rs: list[Trial], folder: str, conf: float) -> list[dict]:
    """One campaign's ratio of each arm to native, per configuration, as JSON keeps it."""
    out = []
    for g in summary.summarise(rs, folder, conf).groups:
        for arm in g.arms:
            if arm.against == REFERENCE:
                mine = [t for t in rs if t.runtime == arm.runtime and not t.warmup]
                ratio = dataclasses.astuple(arm.ratio) if arm.ratio else None
                out.append({"arm": arm.runtime, "key": dataclasses.asdict(g.key), "ratio": ratio,
                            "verdict": arm.verdict, "facts": _facts(mine)})  # fmt: skip
    return out


def computed(path: Path, listed: list[selection.Listed], conf: float) -> dict[int, list[dict]]:
    """Each listed campaign's overheads (by row id): those the catalogue keeps for this
    kit and confidence read, the others computed from their trials (and kept, at
    CACHED_AT, where the catalogue can be written)."""
    made = _made(conf)
    with catalogue.opened(path) as db:
        kept = dict(db.execute("SELECT campaign_id, points FROM overheads WHERE made = ?", (made,)))
        todo = [c for c in listed if not isinstance(kept.get(c.id), str)]
        trials = {c.id: selection.records(db, [c.id]) for c in todo}
    fresh = {c.id: _overheads(trials[c.id], c.folder, conf) for c in todo}
    if fresh and conf == CACHED_AT:
        catalogue.remember(path, made, {i: json.dumps(v) for i, v in fresh.items()})
    return {c.id: fresh[c.id] if c.id in fresh else json.loads(kept[c.id]) for c in listed}


def warm(path: Path, folder: Path | None = None) -> None:
    """Compute and keep the overheads of every campaign the catalogue does not keep yet
    (after kit results add or rebuild; of the folder's alone, as a campaign registers),
    so that kit history reads them. Nothing is said where it cannot (a campaign's
    analysis refused, the catalogue unreadable): kit history says it when asked."""
    with contextlib.suppress(KitError):
        with catalogue.opened(path) as db:
            listed = selection.campaigns(db, selection.Selection())
        if folder is not None:
            listed = [c for c in listed if c.folder == str(folder.absolute())]
        computed(path, listed, CACHED_AT)


def points(path: Path, sel: selection.Selection, conf: float) -> list[Point]:
    """The selected campaigns' ratios of sel.runtime's arms (R and its R@LABEL arms) to
    native, oldest first."""
    with catalogue.opened(path) as db:
        listed = selection.campaigns(db, sel)
    each = computed(path, listed, conf)
    out: list[Point] = []
    last: dict[Key, dict[str, str]] = {}
    for c in listed:
        for p in each[c.id]:
            name, key, facts = p["arm"], Key(**p["key"]), p["facts"]
            if name.split("@")[0] != sel.runtime:
                continue
            before = last.get(key, facts)
            changed = [f"{k} {before[k]} -> {facts[k]}" for k in WATCHED if before[k] != facts[k]]
            last[key] = facts
            ratio = stats.Interval(*p["ratio"]) if p["ratio"] else None
            out.append(Point(c.started, c.campaign, name, key, ratio, p["verdict"], facts,
                             changed))  # fmt: skip
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
