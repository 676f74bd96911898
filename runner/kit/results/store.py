"""The results store: one JSON line per trial in DIR/trials.jsonl, appended as each ends.

Each record is written with one O_APPEND write and fsync'd before the next
trial starts, so a campaign killed at any point keeps every finished trial. A
kill or a full disk can leave the last line cut short; the next append ends
that line first, so a new record never merges into the fragment. The reader
names every line it cannot use (`file:line: why`) and goes on with the rest. Every
value is JSON: a record holding NaN or an infinity (which Python's json writes and
reads, and other tools do not) is filed with those values null, the fields named in
its cause, and a line holding one (a hand edit) is not read. The campaign's settings
(SPEC_FILE) live beside its trials, so --resume runs exactly the trials that have not
finished. Each line is checked against the trial record's schema, campaign.json against
the campaign's (kit.results.schemas).
"""

import contextlib
import dataclasses
import json
import math
import os
import re
import stat
import sys
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from kit.core import benches, inputs
from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.paths import make_dir, write_atomically
from kit.results import schemas
from kit.results.record import CampaignSpec, Trial

FILE = "trials.jsonl"
TRIALS_LIMIT = 2 << 30  # 2 GiB: 100,000 trials (checks.MAX_TRIALS) of at most 16 KiB each
# (a launch fingerprint's libraries are folded to fit: benchmarks/fingerprint.py)
SPEC_FILE = "campaign.json"  # the campaign's settings, beside its trials (for --resume)
LOGS = "logs"  # the whole output of each trial that did not end ok, one file a trial

log = logger(__name__)


@dataclass
class Loaded:
    records: list[Trial] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # "file:line: why", one per bad line


def _kind(value: object, want: type | tuple) -> bool:
    if isinstance(value, bool) and want is not bool:
        return False
    return isinstance(value, want)


def shape_problem(record: object) -> str | None:
    """Why a parsed line is not a usable trial record, or None."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not a trial record"
    if problem := schemas.TRIAL_CHECK(record):
        return problem
    if record["status"] != "ok":
        return None
    result = record.get("result")
    if not isinstance(result, dict):
        return "an ok trial without its benchmark record"
    for name, want in benches.analysed(record["bench"], result):
        if not _kind(result.get(name), want):
            return f"result field '{name}' is missing or of the wrong type"
    for name, (want, items) in benches.ANALYSED_IF_THERE.items():
        if name not in result:
            continue
        value = result[name]
        if not _kind(value, want) or (
            items and isinstance(value, list) and not all(_kind(x, items) for x in value)
        ):
            return f"result field '{name}' is of the wrong type"
    return None


KINDS = (  # what lstat finds, as a message names it
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)


def misplaced(path: Path, want: str = "a regular file") -> str | None:
    """Why kit must not write at path in a results folder, or None: something there that
    is not `want` (nothing there yet is fine). A symbolic link is never followed: a copied
    or shared folder's trials.jsonl or log linked to a file elsewhere (~/.bashrc) had
    kit append to it, or overwrite it; and open() of a named pipe waits for ever."""
    try:
        mode = path.lstat().st_mode
        target = f" (to {os.readlink(path)})" if stat.S_ISLNK(mode) else ""
    except OSError:  # nothing there, or nothing lstat may see (open then says why)
        return None
    found = next((name for kind, name in KINDS if kind(mode)), "a device")
    return None if found == want else f"'{path}' is {found}{target}, not {want}"


def placed(path: Path, want: str = "a regular file") -> None:
    """A KitError when kit must not write at path in a results folder (misplaced)."""
    if why := misplaced(path, want):
        raise KitError(f"{why}; move it away or choose another --out")


def writable(out_dir: Path, dry_run: bool = False) -> None:
    """Raise a KitError now, before any trial runs, if records could not be written (with
    dry_run, the same error found without making the folder or the file): the trials
    file and the logs folder must be what they are named, not a link (misplaced)."""
    path = out_dir / FILE
    make_dir(out_dir, "--out", dry_run)
    placed(path)
    placed(out_dir / LOGS, "a folder")
    if dry_run:
        there = path if path.exists() else out_dir
        if out_dir.is_dir() and not os.access(there, os.W_OK, effective_ids=True):
            raise KitError(f"cannot write '{path}': Permission denied; choose another --out")
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644))
    except OSError as e:
        raise KitError(f"cannot write '{path}': {e.strerror}; choose another --out") from None


def _finite(value: object, at: str, bad: list[str]) -> object:
    """value with each float JSON has no number for (NaN, an infinity) made None, and its
    field's path (result.loss[3]) added to bad. An int past a float's range (JSON spells
    one in 400 digits) counts as an infinity: a median or a ratio of it overflows."""
    if (isinstance(value, float) and not math.isfinite(value)) or _past_float(value):
        bad.append(at)
        return None
    if isinstance(value, dict):
        return {k: _finite(v, f"{at}.{k}" if at else str(k), bad) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v, f"{at}[{i}]", bad) for i, v in enumerate(value)]
    return value


def _past_float(value: object) -> bool:
    """An int no float holds (bool is an int, and holds)."""
    return isinstance(value, int) and abs(value) > sys.float_info.max


def _fileable(record: dict) -> dict:
    """The record as it can be filed: any NaN or infinity made null, the fields named in its
    cause, and a trial that said ok filed failed (its figures are not all numbers)."""
    bad: list[str] = []
    safe = _finite(record, "", bad)
    if not bad:
        return record
    said = f"not a JSON number (filed as null): {', '.join(bad[:5])}"
    said += f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    status = "failed" if record.get("status") == "ok" else record.get("status")
    cause = "; ".join(x for x in (record.get("cause"), said) if x)
    return {**safe, "status": status, "cause": cause}


def append(out_dir: Path, record: dict) -> dict:
    """Append one record durably, or none of it (a write that fails is cut back off, and
    the record printed, as it is when the file is refused: a link put in its place since
    the run began); the record as filed (_fileable). If the file ends in a cut line, end
    it first."""
    record = _fileable(record)
    line = (json.dumps(record, sort_keys=True, allow_nan=False) + "\n").encode()
    path = out_dir / FILE
    try:
        writable(out_dir)
    except KitError:
        _unwritten(line)
        raise
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW)  # nor a link made since
    size = os.fstat(fd).st_size
    try:
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError as e:  # a full disk, a quota: take back the part written, keep the rest
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        _unwritten(line)
        raise KitError(
            f"cannot write a record to '{path}': {e.strerror}; the records before it are "
            f"kept: make room, then continue with kit run ... --out {out_dir} --resume"
        ) from None
    finally:
        os.close(fd)
    return record


def _unwritten(line: bytes) -> None:
    """A record that could not be filed, on stderr: what was measured is never lost."""
    log.error(f"kit: the unwritten record follows: {line.decode().strip()}")


def save_log(out_dir: Path, name: str, text: str) -> str:
    """Keep all a trial printed (its record holds only the last lines) as LOGS/NAME.log;
    the path relative to out_dir, or "" when it cannot be written (the record matters
    more), as when the folder or the file is a link (misplaced)."""
    path = out_dir / LOGS / f"{name}.log"
    why = misplaced(path.parent, "a folder") or misplaced(path)
    if why is None:
        try:
            path.parent.mkdir(exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
            with open(os.open(path, flags, 0o644), "w", errors="replace") as f:
                f.write(text)
            return str(path.relative_to(out_dir))
        except OSError as e:
            why = e.strerror
    log.warning(f"kit: warning: cannot keep the output in {path}: {why}")
    return ""


# What may spell a float JSON has no number for: NaN, Infinity, an exponent past 1e308,
# an int of 309 digits or more
NOT_A_NUMBER = re.compile(r"NaN|Infinity|[eE][+]?[0-9]{3}|[0-9]{309}")


def checked(text: str, cut: bool = False) -> tuple[dict, str | None]:
    """One stored line as JSON gives it, and why it is not a usable trial record (None when
    it is). cut: the line had no newline after it (a write that was cut short)."""
    try:
        record = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return {}, "cut short (an interrupted write)" if cut else "not a JSON line"
    if inputs.LONE_ESCAPE.search(text):  # only then worth a walk through the record
        record = inputs.whole(record)
    bad: list[str] = []
    if NOT_A_NUMBER.search(text):  # only then worth a walk through the record
        _finite(record, "", bad)
    if bad:
        return {}, f"field '{bad[0]}' holds NaN or an infinity, not a JSON number"
    return record, shape_problem(record)


def lines(path: Path) -> tuple[list[dict], list[str]]:
    """Every usable line of one trials file as JSON gives it (checked: shape_problem), and a
    `file:line: why` for each other line. The catalogue keeps these as they are, so that a
    trial is the same there whichever kit read it; everything else reads them typed (read)."""
    found: list[dict] = []
    problems: list[str] = []
    if not path.exists():
        return found, problems
    if not path.is_file():
        return found, [f"{path}: not a regular file (no records read)"]
    try:
        data = inputs.read_bytes(path, str(path), "no records read", TRIALS_LIMIT)
    except inputs.Unreadable as e:
        return found, [str(e)]
    split = data.split(b"\n")
    for n, raw in enumerate(split, 1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            problems.append(f"{path}:{n}: not UTF-8 text")
            continue
        record, problem = checked(text, cut=n == len(split))
        if problem:
            problems.append(f"{path}:{n}: {problem}")
        else:
            found.append(record)
    return found, problems


def read(path: Path) -> Loaded:
    """The usable records of one trials file as Trials, and a `file:line: why` a bad line."""
    found, problems = lines(path)
    return Loaded([Trial.from_json(x) for x in found], problems)


def load(out_dir: Path) -> Loaded:
    """The records of DIR/trials.jsonl; each unusable line is named on stderr and skipped."""
    loaded = read(out_dir / FILE)
    for problem in loaded.problems:
        log.warning(f"kit: warning: {problem} (skipped)")
    return loaded


FINISHED = ("ok", "failed", "oom")  # a timeout, an interrupted or a lost trial runs again


def check_campaign(out_dir: Path, spec: dict, resume: bool) -> CampaignSpec | None:
    """What open_campaign would refuse, found without writing anything (the dry run
    checks with it too): a folder holding trials without --resume, a resume with nothing
    to resume, a campaign.json that does not fit its schema, or other options. Returns the
    saved settings when resuming."""
    path = out_dir / SPEC_FILE
    if not resume:
        if (out_dir / FILE).is_file() and (out_dir / FILE).stat().st_size:
            raise KitError(
                f"{out_dir} already holds trials; pass --resume to continue that campaign "
                "or choose another --out"
            )
        return None
    if not path.is_file():
        raise KitError(f"nothing to resume in {out_dir} (no {SPEC_FILE}); drop --resume")
    saved = CampaignSpec(**_saved_json(path))
    asked = _typed(spec, saved.campaign)
    changed = sorted(
        f.name
        for f in dataclasses.fields(saved)
        if getattr(asked, f.name) != getattr(saved, f.name)
    )
    if changed:
        raise KitError(
            f"--resume must repeat the campaign's options; these differ from {path}: "
            + ", ".join(changed)
        )
    return saved


def open_campaign(out_dir: Path, spec: dict, resume: bool) -> tuple[str, set[int]]:
    """Start a campaign in out_dir (its settings saved as SPEC_FILE), or with --resume find
    the one saved there: the campaign id, and the plan indices already finished."""
    writable(out_dir)
    saved = check_campaign(out_dir, spec, resume)
    if saved is None:
        campaign = uuid.uuid4().hex[:8]
        settings = _typed(spec, campaign).to_json()
        write_atomically(out_dir / SPEC_FILE, json.dumps(settings, indent=2) + "\n")
        return campaign, set()
    campaign = saved.campaign
    done = {
        t.index for t in load(out_dir).records if t.campaign == campaign and t.status in FINISHED
    }
    return campaign, done


def _typed(spec: dict, campaign: str) -> CampaignSpec:
    """The settings kit run asks for (kit.run.checks' dict) as their type; one kit does not
    know, or of the wrong type, is kit's own error (a test runs every kind of campaign)."""
    raw = json.loads(json.dumps({**spec, "campaign": campaign}))
    if problem := schemas.CAMPAIGN_CHECK(raw):
        raise ValueError(f"the settings of a campaign do not fit {SPEC_FILE}'s schema: {problem}")
    return CampaignSpec(**raw)


def _saved_json(path: Path) -> dict:
    """What a campaign saved, checked against its schema: a KitError naming the first
    thing wrong with the file (a hand edit, another kit's) and what to do."""
    new = "start a new campaign with another --out"
    saved = inputs.read_json(path, f"{path} cannot be read as a campaign", new)
    if not isinstance(saved, dict):
        raise KitError(f"{path} holds no campaign id; {new}")
    if problem := schemas.CAMPAIGN_CHECK(saved):
        raise KitError(
            f"{path}: {problem}; correct it as docs/schemas/campaign.json says, or {new}"
        )
    return saved


def new_folder(name: str) -> Path:
    """Where a campaign (or a preset's legs) go when --out is not given: results/NAME-TIME."""
    return Path("results") / f"{name}-{datetime.now():%Y%m%d-%H%M%S}"


PRESET_FILE = "preset.json"  # a preset's results folder: its name, legs and published figures
NODES = "-nodes"  # a preset's leg run a second time across a host list: OUT/LEG-nodes


def has_trials(out_dir: Path) -> bool:
    return (out_dir / FILE).is_file()


def has_campaign(out_dir: Path) -> bool:
    """A campaign was started in out_dir (its settings are saved there)."""
    return (out_dir / SPEC_FILE).is_file()


def settings(out_dir: Path) -> dict:
    """The settings a campaign saved in out_dir, as it saved them ({} when it saved none);
    a KitError when they do not fit their schema (the report would go on without its
    precision target or baseline, or read a mistyped one)."""
    path = out_dir / SPEC_FILE
    return _saved_json(path) if path.exists() else {}


def save_preset(out_dir: Path, preset: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomically(out_dir / PRESET_FILE, json.dumps(preset, indent=2) + "\n")


def saved_preset(out_dir: Path) -> dict | None:
    """What a preset saved in its results folder (None: a plain campaign's folder)."""
    path = out_dir / PRESET_FILE
    if not path.is_file():
        return None
    raw = inputs.read_json(path, str(path), "run the preset again")
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise KitError(f"{out_dir / PRESET_FILE} names no preset; run the preset again")
    return raw
