"""Selections of the results catalogue: which campaigns a filter picks, their trials, and
the listing `kit results ls` prints.

A selection picks campaigns, never single trials: a comparison needs a campaign's
native launches with its others, round by round. A campaign matches a runtime, a
runtime version or a host when any of its trials does; its time is its first trial's
start, in UTC.
"""

import contextlib
import gc
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from pathlib import Path

from kit.core import columns, inputs
from kit.core.errors import KitError
from kit.core.inputs import LONE_ESCAPE as LONE
from kit.results import store
from kit.results.catalogue import digest, left_out, opened, utc_text
from kit.results.record import Trial

FILTERS = ("image", "runtime", "runtime_version", "host", "since", "until", "preset", "campaign")


@dataclass(frozen=True)
class Selection:
    """Which campaigns: each filter given must hold (a campaign holds runtime, version and
    host when any of its trials does; times are its first trial's start, UTC)."""

    image: str | None = None
    runtime: str | None = None  # an arm, or a runtime with all its NAME@LABEL arms
    runtime_version: str | None = None  # a part of the version text, e.g. 1.3.4
    host: str | None = None
    since: str | None = None
    until: str | None = None
    preset: str | None = None
    campaign: str | None = None  # a campaign id, or its first characters

    def where(self) -> tuple[str, list[str]]:
        """The SQL condition on campaigns (as c) and its parameters."""
        clauses, args = ["1"], []
        for column in ("image", "preset"):
            if (value := getattr(self, column)) is not None:
                clauses.append(f"c.{column} = ?")
                args.append(value)
        if self.campaign is not None:
            clauses.append("substr(c.campaign, 1, length(?)) = ?")
            args += [self.campaign, self.campaign]
        if self.since is not None:
            clauses.append("c.started >= ?")
            args.append(self.since)
        if self.until is not None:
            clauses.append("c.started < ?")
            args.append(self.until)
        trial = []
        if self.runtime is not None:
            trial.append("(t.runtime = ? OR substr(t.runtime, 1, length(?) + 1) = ? || '@')")
            args += [self.runtime] * 3
        if self.runtime_version is not None:
            trial.append("instr(t.runtime_version, ?) > 0")
            args.append(self.runtime_version)
        if self.host is not None:
            trial.append("t.host = ?")
            args.append(self.host)
        if trial:
            clauses.append(
                "EXISTS (SELECT 1 FROM trials t WHERE t.campaign_id = c.id AND "
                + " AND ".join(trial)
                + ")"
            )
        return " AND ".join(clauses), args

    def said(self) -> str:
        return ",".join(f"{k}={v}" for k in FILTERS if (v := getattr(self, k)) is not None)


def moment(flag: str, text: str, end: bool = False) -> str:
    """A date or time the user typed (ISO 8601; without a zone, UTC) as catalogue time;
    with end, a bare date means the end of that day."""
    try:
        when = datetime.fromisoformat(text.strip())
        if end and len(text.strip()) == 10:
            when += timedelta(days=1)
        return utc_text(when)
    except ValueError:
        raise KitError(
            f"{flag} '{text}' is not a date or time; give e.g. 2026-11-01 or 2026-11-01T14:00"
        ) from None
    except OverflowError:  # the day after 9999-12-31, or year 1 moved to UTC
        raise KitError(
            f"{flag} '{text}' is out of the calendar's range (years 1 to 9999, in UTC); "
            "give a date inside it, e.g. 2026-11-01"
        ) from None


def selection(**given: str | None) -> Selection:
    """A Selection from filter values as typed (times checked and made UTC)."""
    for name in ("since", "until"):
        if given.get(name) is not None:
            given[name] = moment(f"--{name}", given[name], end=name == "until")
    return Selection(**given)


def chosen(options: dict) -> Selection:
    """The Selection a parsed command line's filter options give (those it has)."""
    return selection(**{k: options.get(k) for k in FILTERS})


def parse(text: str) -> Selection:
    """'host=nodeA,since=2026-11-01' as a Selection; a KitError naming what is wrong."""
    given: dict[str, str] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in FILTERS or not value.strip():
            raise KitError(
                f"'{text}' is neither a results folder nor a selection KEY=VALUE[,KEY=VALUE] "
                f"(keys: {', '.join(k.replace('_', '-') for k in FILTERS)}), e.g. "
                "host=nodeA,since=2026-11-01"
            )
        if name in given:  # host=a,host=b: one would silently win
            raise KitError(
                f"'{text}' gives {name.replace('_', '-')} twice; a selection takes each key "
                "once (compare the two as A and B)"
            )
        given[name] = value.strip()
    return selection(**given)


@dataclass(frozen=True)
class Listed:
    id: int
    campaign: str
    started: str
    image: str
    preset: str
    hosts: str
    arms: str
    trials: int
    ok: int
    folder: str


def campaigns(db: sqlite3.Connection, sel: Selection) -> list[Listed]:
    """The selected campaigns, oldest first; a row edited since it was added to hold a
    value of another type (SQLite keeps a blob in a text column) is named on stderr and
    left out, as an edited trial row is (records)."""
    where, args = sel.where()
    rows = db.execute(
        "SELECT c.id, c.campaign, c.started, c.image, c.preset, c.hosts, c.arms, c.trials,"
        f" c.ok, c.folder FROM campaigns c WHERE {where} ORDER BY c.started, c.id",
        args,
    )
    out = []
    shape = fields(Listed)  # once: 10,000 campaigns asked dataclasses 10,000 times
    for row in rows:
        typed = zip(shape, row, strict=True)
        if bad := next((f for f, value in typed if not isinstance(value, f.type)), None):
            kind = "text" if bad.type is str else "a whole number"
            left_out(f"campaign {row[0]}", f"its {bad.name} is not {kind}")
        else:
            out.append(Listed(*row))
    return out


@contextlib.contextmanager
def _acyclic() -> Iterator[None]:
    """Python's cycle collector paused while records are read: they hold no cycle, and
    50,000 of them (each a dict of dicts and lists) had it walk every one again and again,
    for most of the read's time."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


SET_ASIDE = 10_000  # records past which a read sets what is in memory aside (gc.freeze)


def records(db: sqlite3.Connection, ids: list[int]) -> list[Trial]:
    """Every stored trial record of these campaigns (_acyclic); one whose text no longer
    hashes to its key (a row edited since it was added, checked when it was) is checked
    again, and named on stderr and left out where it is no usable record (50,000 checks
    took seconds). Past SET_ASIDE records, what is in memory is left out of the cycle
    collector's later passes (a third of kit compare's analysis time, over 50,000); a
    command reads that much once, and its objects are freed by their counts as ever."""
    with _acyclic():
        out = _records(db, ids)
    if len(out) > SET_ASIDE:
        gc.freeze()
    return out


def _records(db: sqlite3.Connection, ids: list[int]) -> list[Trial]:
    out: list[Trial] = []
    for i in range(0, len(ids), 500):  # SQLite's limit on parameters in one statement
        chunk = ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        rows = db.execute(
            f"SELECT id, key, record FROM trials WHERE campaign_id IN ({marks}) ORDER BY id",
            chunk,
        )
        for row, key, text in rows:
            if isinstance(text, str) and key == digest(text):  # as added, and checked then
                line = json.loads(text)  # (an older kit kept a lone surrogate: made whole)
                out.append(Trial.from_json(inputs.whole(line) if LONE.search(text) else line))
                continue
            record, problem = store.checked(text) if isinstance(text, str) else ({}, "not text")
            if problem:
                left_out(f"trial {row}", problem)
            else:
                out.append(Trial.from_json(record))
    return out


def select(path: Path, sel: Selection) -> tuple[list[Listed], list[Trial]]:
    """The selected campaigns and their trial records, read from the catalogue at path."""
    with opened(path) as db:
        listed = campaigns(db, sel)
        return listed, records(db, [c.id for c in listed])


def table(listed: list[Listed]) -> str:
    """`kit results ls`: one line a campaign, oldest first."""
    head = ("CAMPAIGN", "STARTED", "IMAGE", "PRESET", "HOSTS", "OK/TRIALS", "ARMS", "FOLDER")
    rows = [head] + [
        (c.campaign, c.started or "-", c.image, c.preset or "-", c.hosts, f"{c.ok}/{c.trials}",
         c.arms, c.folder)
        for c in listed
    ]  # fmt: skip
    return "\n".join(columns.aligned(rows))
