"""The records a campaign writes: the trial record, kit.trial/2 (Trial, one JSON line a
trial), and the campaign's settings (CampaignSpec, its campaign.json). A trial is filed
from a Trial and read back as one (Trial.from_json), so every reader names its fields
as attributes the type declares, the helpers below among them.

The fields marked `key` are everything that can change a trial's result; the
analysis groups trials by exactly those (Key below has them, a unit test holds the
two together), so a report over several campaigns never pools a cpu
build with a cuda one, fp32 with bf16, 3 timed steps with 100, or a local launch
with a Slurm job. kit.trial/1 files (written before the steps were recorded) are
read with those fields unknown: such trials group only with each other. The fields
marked `read` are what every record must hold for --resume and the analysis to use
it. kit.results.schemas makes a JSON Schema of each type, which the results store checks
every line and campaign.json it reads against, and docs/schemas/ ships.
"""

import dataclasses
import json
import typing
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kit.launch.hosts import HOSTS_LABEL

SCHEMA = "kit.trial/2"
READABLE = ("kit.trial/1", SCHEMA)
KEY = {"key": True}
READ = {"read": True}  # every record must hold it for --resume and the analysis to use it
KEY_READ = {**KEY, **READ}


@dataclass(frozen=True)
class Trial:
    """One trial as kit files it, a line of trials.jsonl. Only the fields marked `read`
    (required) are in every record: an older kit's may lack any other, and kit reads a
    field a record lacks as unknown: null (None), or an empty list for a list field, which
    every reader takes as none (Trial.from_json). A null there reads the same."""

    schema: str = field(metadata={**READ, "enum": READABLE})  # the ones kit reads
    campaign: str = field(metadata=READ)
    index: int = field(metadata=READ)  # position in the campaign's plan (what --resume counts)
    warmup: bool = field(metadata=READ)  # a warm-up round's trial: recorded, not reported
    repeat: int | None  # the round: -W..-1 warm-up, 0.. measured (the analysis pairs by it)
    # what ran: every field that can change the result is part of the analysis key
    image: str = field(metadata=KEY_READ)
    variant: str | None = field(metadata=KEY)
    bench: str = field(metadata=KEY_READ)
    model: str = field(metadata=KEY_READ)
    batch_size: int = field(metadata=KEY_READ)
    ranks: int = field(metadata=KEY_READ)
    data: str | None = field(metadata=KEY)
    bench_args: list[str] = field(metadata=KEY)  # pass-through options, --min-time among them
    steps: int | None = field(metadata=KEY)  # timed steps asked for (at least; --min-time adds)
    warmup_steps: int | None = field(metadata=KEY)
    launcher: str | None = field(metadata=KEY)  # plain, mpirun, mpirun in container,
    # torchrun, slurm, or mpirun over ssh (--hosts)
    host_list: list[str]  # --hosts: the hosts its ranks were to be placed on, one a host in turn
    # the runtime arm
    runtime: str = field(metadata=READ)  # the arm: the runtime's name, or NAME@LABEL
    runtime_kind: str | None
    runtime_version: str = field(metadata=READ)
    runtime_settings: list[str] = field(metadata=READ)  # fair defaults, what preparing added
    runtime_args: list[str]  # the user's pass-through options for this arm
    # provenance
    recipe_version: str | None
    stack: str | None  # the recipe's: current (today's frameworks), historical, or own (--image)
    image_digest: str | None  # the image's id, or the native environment's fingerprint
    image_ref: str | None
    # what kit verify filed for this image on the machine that ran it: at, against,
    # reproduced, digest, lock (the lock file's SHA-256); None: not verified there
    image_verified: dict | None
    mpirun: str | None  # the host launcher's version, for more than one rank
    slurm: dict | None  # job id, nodes, script
    argv: list[str]
    host: dict = field(metadata=READ)
    # kit.launch.hostload.during: loadavg_1m, busy/helper/other/steal_cpu_pct (None: not
    # measured; helper: the runtime's helpers', absent before kit recorded it), window_s
    # (how long they were measured over)
    host_load: dict | None
    started: str | None
    # outcome
    wall_s: float | None  # None: not a JSON number, filed as null (results.store)
    # ok, oom, failed, lost (its runtime's service went away), timeout, interrupted
    status: str = field(metadata=READ)
    cause: str | None  # what ended a failed or lost trial, when known (a signal, a lost service)
    exit_code: int | None
    result: dict | None  # the benchmark's own record (kit.bench/2)
    output_tail: str | None
    log: str | None  # a trial that did not end ok: its whole output, a file in the results folder
    stuck: list[dict]  # on timeout: the processes still running

    def to_json(self) -> dict:
        """Its fields as a dict, shallow: written at once as JSON (asdict's deep copy of
        every host fact and argv cost as much as the fsync, trial after trial)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, line: dict) -> "Trial":
        """A record as kit reads it, shallow (the store checks the line against the schema
        first; a test builds one from a partial dict): a field the line lacks is unknown,
        as the class says. A key this kit does not know (a newer kit's) is left out:
        nothing here could read it (the catalogue keeps the line itself)."""
        made = object.__new__(cls)  # its fields set at once: a frozen dataclass's __init__
        known = {**BLANK, **line}  # sets each of 40 with object.__setattr__, and a catalogue
        if len(known) > len(FIELDS):  # reads 50,000 records
            known = {n: known[n] for n in FIELDS}
        for name in LISTS.difference(line):  # each its own empty list
            known[name] = []
        made.__dict__.update(known)
        return made


FIELDS = tuple(f.name for f in dataclasses.fields(Trial))
LISTS = frozenset(f.name for f in dataclasses.fields(Trial) if typing.get_origin(f.type) is list)
KEY_FIELDS = tuple(f.name for f in dataclasses.fields(Trial) if f.metadata.get("key"))
BLANK: dict = dict.fromkeys(FIELDS)  # a field a record lacks: unknown (a list: empty)


@dataclass(frozen=True)
class CampaignSpec:
    """A campaign's settings (campaign.json): what --resume must find unchanged, and the
    precision target and baseline a report reads back. A field left unset (None, null) is
    not saved: it does not apply to the campaign (an own image's has no recipe), or the
    campaign was saved before kit saved it (one without `baseline` compares with native)."""

    campaign: str = field(metadata=READ)  # the id its trial records hold
    # every campaign's (kit.run.checks.resume_spec)
    runtimes: list[str] | None = None  # the arms
    configs: list[dict] | None = None  # each: bench, model, batch_size, ranks, data
    repeats: int | None = None
    baseline_launches: int | None = None
    warmup_trials: int | None = None
    seed: int | None = None
    precision: float | None = None  # --precision as a fraction (0.02: ±2%); None: fixed rounds
    budget_s: float | None = None  # --budget, with --precision
    confidence: float | None = None
    runtime_args: dict[str, list[str]] | None = None  # each arm's --runtime-arg options
    launcher: str | None = None
    baseline: str | None = None  # --baseline: an arm, or all (every pair); None: native
    hosts: list[str] | None = None  # --hosts
    image: str | None = None  # kit's image, or the user's own (its source)
    # a campaign of kit's images
    recipe_version: str | None = None
    variant: str | None = None
    steps: int | None = None
    warmup_steps: int | None = None
    min_time: str | float | None = None  # auto, or seconds
    bench_args: dict[str, list[str]] | None = None  # each benchmark's pass-through options
    data_dir: str | None = None  # with --data real
    slurm: dict | None = None  # the --slurm-config site
    # a campaign of the user's own image (kit run --image)
    image_digest: str | None = None
    image_mpi: str | None = None
    command: dict | None = None  # --command and what reads its figure

    def to_json(self) -> dict:
        """The fields that are set, as campaign.json holds them."""
        values = ((f.name, getattr(self, f.name)) for f in dataclasses.fields(self))
        return {name: value for name, value in values if value is not None}


def distinct(trials: Iterable[Trial], seen: set[str]) -> tuple[list[Trial], int]:
    """The trials not in seen (each then added to it), and how many were: a trial read twice
    (a copied folder, a pasted line) would narrow every interval, so each counts once."""
    fresh, again = [], 0
    for t in trials:
        text = json.dumps(t.to_json(), sort_keys=True)
        if text in seen:
            again += 1
        else:
            seen.add(text)
            fresh.append(t)
    return fresh, again


def launched_by(t: Trial) -> str:
    """Launches on this host are one launcher ("local") whatever started the ranks; a
    host list over ssh ("hosts") and Slurm are others: their ranks may be on other nodes."""
    return {"slurm": "slurm", HOSTS_LABEL: "hosts"}.get(t.launcher or "", "local")


def node_count(nodes: str) -> int:
    """How many hosts a Slurm node list names, compressed or not (n[01-03,7],gpu1: 5)."""
    count, depth, piece = 0, 0, ""
    for ch in f"{nodes},":
        depth += (ch == "[") - (ch == "]")
        if ch != "," or depth:
            piece += ch
            continue
        if "[" in piece:
            for part in piece[piece.index("[") + 1 : piece.rindex("]")].split(","):
                first, _, last = part.partition("-")
                count += int(last) - int(first) + 1 if last else 1
        elif piece.strip():
            count += 1
        piece = ""
    return count


def spread_over(t: Trial) -> tuple[int, str]:
    """How many hosts a trial's ranks were to be spread over (one rank a host in turn), and
    the words that name them ((0, "") for a launch on this host)."""
    how = launched_by(t)
    if how == "hosts":
        return len(t.host_list), f"{', '.join(t.host_list)} were asked for"
    if how == "slurm" and (nodes := (t.slurm or {}).get("nodes")):
        return node_count(nodes), f"the job was given nodes {nodes}"
    return 0, ""


def started(t: Trial) -> datetime | None:
    """When the trial started (its `started` label, in UTC where it names a zone), or None
    where it does not say: a hand-edited time past the calendar in UTC (year 1 east of it)
    was an OverflowError as the catalogue added it."""
    try:
        when = datetime.fromisoformat(t.started)
        return when if when.tzinfo is None else when.astimezone(UTC)
    except (TypeError, ValueError, OverflowError):
        return None


def campaign_minutes(records: list[Trial]) -> float | None:
    """The minutes the campaigns took: each one's first trial start to its last trial's end
    (started plus wall_s; warm-up and failed trials take their time too), summed over the
    campaigns, so that the time between campaigns reported together is not counted. None
    where no record says when it ran."""
    spans: dict[str, list[float]] = defaultdict(list)
    for t in records:
        if t.wall_s is None or (when := started(t)) is None:
            continue
        start = when.timestamp()
        spans[t.campaign] += [start, start + t.wall_s]
    return sum(max(s) - min(s) for s in spans.values()) / 60 or None


@dataclass(frozen=True)
class Key:
    """What trials must share to be compared: Trial's key fields as key_values reads them
    (a test holds the two together). It lives beside them, below the findings and the
    fingerprints, which both name it."""

    image: str
    bench: str
    model: str
    batch_size: int
    ranks: int
    data: str = "synthetic"  # or "real": read through the framework's input pipeline
    launcher: str = "local"  # or "slurm": each trial a batch job; or "hosts": over ssh
    variant: str = "cpu"  # cpu and cuda builds of a recipe are different software
    bench_args: str = ""  # pass-through benchmark options (e.g. --precision bf16)
    steps: int | None = None  # timed steps asked for (None: a kit.trial/1 record)
    warmup_steps: int | None = None
    # read from the benchmark's record, not a field of the trial's (DERIVED)
    metric: str = ""  # a user's command: its figure's name, unit and direction
    command: str = ""  # a user's command: what ran in the image, and natively

    def order(self) -> tuple:
        """The report's order of groups (unknown step counts first)."""
        return tuple((v is not None, v if v is not None else 0) for v in vars(self).values())


DERIVED = ("metric", "command")  # Key's fields read from the result, after KEY_FIELDS


def measured_as(result: dict | None) -> dict[str, str]:
    """What a user's command's figure is (its name, unit and direction) and the command
    lines that printed it, as text ("" for kit's benchmarks, whose name says both): two
    commands, or one figure read two ways, are never one configuration."""
    declared = (result or {}).get("metric")
    ran = (result or {}).get("command")
    metric = ""
    if isinstance(declared, dict):
        way = "higher" if declared.get("higher_is_better") is True else "lower"
        metric = f"{declared.get('name')} in {declared.get('unit') or '-'}, {way} is better"
    command = ""
    if isinstance(ran, dict):
        command = " | native: ".join(
            " ".join(str(x) for x in ran.get(side) or []) for side in ("argv", "native_argv")
        )
    return {"metric": metric, "command": command}


def key_values(t: Trial) -> dict:
    """A record's key fields (KEY_FIELDS, then DERIVED) as the analysis compares them,
    either schema's: a kit.trial/1 record's unknown steps are None, its variant and data
    what they were then; option lists are compared as text, launchers as launched_by tells
    them apart."""
    return (
        {name: getattr(t, name) for name in KEY_FIELDS}
        | {
            "variant": t.variant or "cpu",
            "data": t.data or (t.result or {}).get("data", "synthetic"),
            "bench_args": " ".join(t.bench_args),
            "launcher": launched_by(t),
        }
        | measured_as(t.result)
    )
