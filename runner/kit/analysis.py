"""From trial records to the comparisons a report shows, in one data model.

Every report format (Markdown, CSV, JSON, HTML and its plots) renders this model,
so they cannot disagree. Trials are grouped by what was measured (image,
benchmark, model, batch size, ranks); within a group each runtime arm is
summarised by medians with intervals and compared with the reference arm
(`native`) by the ratio of medians.
"""

import dataclasses
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from . import results, stats
from .errors import KitError

MIN_N = 6  # fewest trials for a 95% order-statistic interval of a median
REFERENCE = "native"
OOM_FIELDS = ("image", "bench", "model", "batch_size", "ranks", "runtime")


@dataclass(frozen=True)
class Key:
    image: str
    bench: str
    model: str
    batch_size: int
    ranks: int
    data: str = "synthetic"  # or "real": read through the framework's input pipeline
    launcher: str = "local"  # or "slurm": each trial a batch job


@dataclass
class Arm:
    """One runtime arm within a group."""

    runtime: str
    n: int
    rate: stats.Interval  # images/s, all ranks together
    startup: stats.Interval  # seconds from launch to the first finished step
    peak_rss_mb: float  # median over trials of the largest rank's peak RSS
    framework: str
    mpi: str
    settings: list[str]
    ratio: stats.Interval | None = None  # rate / reference rate
    detectable: float | None = None  # smallest relative difference it could detect
    verdict: str = ""
    loss: list[float] = field(default_factory=list)  # median loss per timed step


@dataclass
class Group:
    key: Key
    arms: list[Arm]


@dataclass
class Scaling:
    """Throughput at `ranks` over `ranks` times the same arm's one-rank throughput."""

    key: Key
    runtime: str
    efficiency: stats.Interval


@dataclass
class IoOverhead:
    """(synthetic - real) / synthetic images/s: what reading real data costs one arm."""

    key: Key  # the real-data configuration
    runtime: str
    overhead: stats.Interval


@dataclass
class MpiPoint:
    """One message size of an MPI sweep for one arm: medians over trials, with intervals."""

    bytes: int
    p2p_latency_us: stats.Interval | None  # None with one rank (no ping-pong)
    bandwidth_mb_s: stats.Interval | None
    allreduce_us: stats.Interval


@dataclass
class MpiSweep:
    image: str
    ranks: int
    launcher: str
    runtime: str
    n: int
    mpi: str
    points: list[MpiPoint]


@dataclass
class Analysis:
    out_dir: str
    trials: int
    ok: int
    not_ok: list[dict]
    warmup: int
    host: dict
    confidence: float
    groups: list[Group]
    scaling: list[Scaling]
    io: list[IoOverhead]
    mpi: list[MpiSweep]
    oom: list[dict]  # configurations that did not fit in memory: key fields, runtime, trials
    runtimes: dict[str, dict]  # arm -> version, default settings and pass-through args


def _mode(values: list[str]) -> str:
    return Counter(values).most_common(1)[0][0]


def _arm(runtime: str, rs: list[dict], conf: float) -> Arm:
    res = [r["result"] for r in rs]
    steps = min(len(x["loss"]) for x in res) if all("loss" in x for x in res) else 0
    return Arm(
        runtime=runtime,
        n=len(rs),
        rate=stats.median_ci([x["images_per_sec"] for x in res], conf),
        startup=stats.median_ci([x["startup_s"] for x in res], conf),
        peak_rss_mb=statistics.median(max(x.get("peak_rss_mb") or [0.0]) for x in res),
        framework=_mode([x["framework_version"] for x in res]),
        mpi=_mode([x["mpi_library"] for x in res]),
        settings=list(rs[-1].get("runtime_settings", [])),
        loss=[statistics.median(x["loss"][i] for x in res) for i in range(steps)],
    )


def _compare(
    arm: Arm,
    ref: Arm,
    rates: list[float],
    ref_rates: list[float],
    conf: float,
    allow_mismatch: bool,
) -> None:
    differs = (arm.framework, arm.mpi) != (ref.framework, ref.mpi)
    if differs and not allow_mismatch:
        arm.verdict = (
            f"not compared: software differs from {REFERENCE} "
            f"({arm.framework} / {arm.mpi} vs {ref.framework} / {ref.mpi}); "
            "--allow-mismatch compares anyway"
        )
        return
    arm.ratio = stats.ratio_ci(rates, ref_rates, conf)
    arm.detectable = stats.detectable(arm.ratio)
    if min(arm.n, ref.n) < MIN_N:
        arm.verdict = f"too few trials (need {MIN_N})"
    else:
        arm.verdict = stats.verdict(arm.ratio)
    if differs:
        arm.verdict += " (MISMATCHED SOFTWARE)"


def analyse(
    out_dirs: list[Path], confidence: float = 0.95, allow_mismatch: bool = False
) -> Analysis:
    """The analysis of one or more campaigns' results (e.g. the same matrix run locally
    and through Slurm, side by side)."""
    records = []
    for out_dir in out_dirs:
        found = results.load(out_dir)
        if not found:
            raise KitError(
                f"no trial records in {out_dir / results.FILE}; "
                f"run 'kit run ... --out {out_dir}' first"
            )
        records += found
    measured = [r for r in records if not r["warmup"]]
    ok = [r for r in measured if r["status"] == "ok"]
    by_key: dict[Key, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    sweeps: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in ok:
        launcher = "slurm" if r.get("launcher") == "slurm" else "local"
        if "allreduce" in r["result"]:
            sweeps[(r["image"], r["ranks"], launcher)][r["runtime"]].append(r)
            continue
        data = r.get("data") or r["result"].get("data", "synthetic")
        key = Key(r["image"], r["bench"], r["model"], r["batch_size"], r["ranks"], data, launcher)
        by_key[key][r["runtime"]].append(r)

    def rates(rs: list[dict]) -> list[float]:
        return [r["result"]["images_per_sec"] for r in rs]

    groups = []
    for key, by_rt in sorted(by_key.items(), key=lambda kv: tuple(vars(kv[0]).values())):
        order = sorted(by_rt, key=lambda n: (n != REFERENCE, n))
        arms = [_arm(rt, by_rt[rt], confidence) for rt in order]
        if order[0] == REFERENCE:
            for arm in arms[1:]:
                _compare(
                    arm,
                    arms[0],
                    rates(by_rt[arm.runtime]),
                    rates(by_rt[REFERENCE]),
                    confidence,
                    allow_mismatch,
                )
        groups.append(Group(key, arms))

    scaling = []
    for key, by_rt in by_key.items():
        if key.ranks == 1:
            continue
        one = by_key.get(dataclasses.replace(key, ranks=1), {})
        for rt, rs in sorted(by_rt.items()):
            if rt in one:
                ideal = [x * key.ranks for x in rates(one[rt])]
                scaling.append(Scaling(key, rt, stats.ratio_ci(rates(rs), ideal, confidence)))
    scaling.sort(key=lambda s: (*vars(s.key).values(), s.runtime))

    io = []
    for key, by_rt in by_key.items():
        synthetic = by_key.get(dataclasses.replace(key, data="synthetic"), {})
        if key.data == "synthetic":
            continue
        for rt, rs in sorted(by_rt.items()):
            if rt in synthetic:
                ratio = stats.ratio_ci(rates(rs), rates(synthetic[rt]), confidence)
                flipped = stats.Interval(
                    1 - ratio.value, 1 - ratio.high, 1 - ratio.low, ratio.coverage
                )
                io.append(IoOverhead(key, rt, flipped))
    io.sort(key=lambda x: (*vars(x.key).values(), x.runtime))

    oom: dict[tuple, int] = Counter(
        tuple(r[f] for f in OOM_FIELDS) for r in records if r["status"] == "oom"
    )
    runtimes: dict[str, dict] = {}
    for r in records:
        runtimes.setdefault(
            r["runtime"],
            {
                "version": r["runtime_version"],
                "settings": list(r["runtime_settings"]),
                "args": list(r.get("runtime_args", [])),
            },
        )
    return Analysis(
        out_dir=", ".join(str(d) for d in out_dirs),
        trials=len(records),
        ok=len(ok),
        not_ok=[r for r in measured if r["status"] not in ("ok", "oom")],
        warmup=len(records) - len(measured),
        host=records[0]["host"],
        confidence=confidence,
        groups=groups,
        scaling=scaling,
        io=io,
        mpi=[
            _sweep(image, ranks, launcher, rt, rs, confidence)
            for (image, ranks, launcher), by_rt in sorted(sweeps.items())
            for rt, rs in sorted(by_rt.items(), key=lambda kv: (kv[0] != REFERENCE, kv[0]))
        ],
        oom=[dict(zip(OOM_FIELDS, k, strict=True), trials=n) for k, n in sorted(oom.items())],
        runtimes=runtimes,
    )


def _sweep(
    image: str, ranks: int, launcher: str, runtime: str, rs: list[dict], conf: float
) -> MpiSweep:
    """Per message size, medians over the trials that measured it."""

    def ci(rows: list[dict], field: str) -> stats.Interval:
        return stats.median_ci([row[field] for row in rows], conf)

    res = [r["result"] for r in rs]
    p2p: dict[int, list[dict]] = defaultdict(list)
    red: dict[int, list[dict]] = defaultdict(list)
    for x in res:
        for row in x["p2p"]:
            p2p[row["bytes"]].append(row)
        for row in x["allreduce"]:
            red[row["bytes"]].append(row)
    points = [
        MpiPoint(
            size,
            ci(p2p[size], "latency_us") if p2p.get(size) else None,
            ci(p2p[size], "bandwidth_mb_s") if p2p.get(size) else None,
            ci(red[size], "latency_us"),
        )
        for size in sorted(red)
    ]
    mpi = _mode([x["mpi_library"] for x in res])
    return MpiSweep(image, ranks, launcher, runtime, len(rs), mpi, points)
