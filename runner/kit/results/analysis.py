"""From trial records to the comparisons a report shows, in one data model.

Every report format (Markdown, CSV, JSON, HTML and its plots) renders this model,
so they cannot disagree. Trials are grouped by what was measured (image,
benchmark, model, batch size, ranks); within a group each runtime arm is
summarised by medians with intervals and compared with the reference arm
(`native` unless the report names another baseline): paired by round where both
arms finished it, else by the ratio of medians. With the baseline `all`, every other
pair of arms is compared too, since published claims are as often container vs
container (Singularity vs Docker) as container vs native. The comparisons form one
family: their intervals are Bonferroni-adjusted so that every verdict of the report
holds together at the stated confidence.
"""

import dataclasses
import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kit.core import benches
from kit.core.errors import KitError
from kit.launch import hostload
from kit.results import fingerprints, precision, record, stats, store
from kit.results.fingerprints import Fingerprints

T = TypeVar("T")

REFERENCE = "native"
TOO_FEW = "too few trials"  # the verdict of a comparison short of rounds
ALL_PAIRS = "all"
OOM_FIELDS = ("image", "bench", "model", "batch_size", "ranks", "runtime")


@dataclass(frozen=True)
class Key:
    """What trials must share to be compared: kit.results.record's key fields (a test holds them
    together)."""

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

    def order(self) -> tuple:
        """The report's order of groups (unknown step counts first)."""
        return tuple((v is not None, v if v is not None else 0) for v in vars(self).values())


@dataclass
class Arm:
    """One runtime arm within a group."""

    runtime: str
    n: int
    rate: stats.Interval  # the benchmark's metric (e.g. images/s), all ranks together
    rates: list[float]  # each trial's metric, in trial order
    startup: stats.Interval | None  # seconds from launch to the first finished step
    compile: stats.Interval | None  # torch.compile's first (compiling) step, when it ran
    peak_rss_mb: float  # median over trials of the largest rank's peak RSS
    framework: str
    mpi: str
    settings: list[str]
    ratio: stats.Interval | None = None  # rate / reference rate (family-adjusted)
    method: str = ""  # how ratio was formed: "paired (N rounds[, native xB a round])" or
    # "unpaired"
    rounds: int = 0  # the rounds its ratio paired (0: unpaired)
    baseline_launches: float = 1.0  # the baseline's launches a round in those rounds
    half_width: float | None = None  # the ratio interval's larger side, relative
    detectable: float | None = None  # smallest relative difference it could detect
    verdict: str = ""
    precision: str = ""  # with a precision target: "reached" or "not reached"
    against: str = ""  # the arm its ratio is over ("" for the baseline itself)
    disturbed: list[int] = field(default_factory=list)  # trials (index) left out: other load
    evidence: list[str] = field(default_factory=list)  # for each left out, what showed the load
    slow: list[int] = field(default_factory=list)  # trials far slower than their round with no
    # evidence of other load: kept, as this arm's own behaviour
    ratio_all: stats.Interval | None = None  # with every launch, where some were left out
    round_spread: float | None = None  # SD of the per-round log ratios (paired, kept launches)
    loss: list[float] = field(default_factory=list)  # median loss per timed step
    load: dict = field(default_factory=dict)  # what the host did during its trials
    phases: dict[str, float] = field(default_factory=dict)  # median s per launch phase

    @property
    def too_few(self) -> bool:
        """Its verdict is "too few trials": some interval it rests on (the kept launches'
        or the check with every launch) is short of rounds, whatever the other's width."""
        return self.verdict.startswith(TOO_FEW)


@dataclass
class Variance:
    """Where a group's spread comes from, as relative standard deviations of a trial's
    figure: the step-to-step noise inside a trial (as it reaches the trial's mean), the
    launch-to-launch variation, and slow drift of the host across rounds."""

    within_trial: float | None
    between_launches: float | None
    across_rounds: float | None
    rounds: int
    typical_launches: float | None = None  # the median arm's own launch-to-launch SD: what
    # an arm with no variation of its own shows, one noisy arm not counted in


@dataclass
class Group:
    key: Key
    arms: list[Arm]  # the baseline first (when the group has it); ratios are over it
    variance: Variance | None = None
    pairs: list[Arm] = field(default_factory=list)  # baseline "all": the other pairs
    fingerprints: Fingerprints | None = None  # its launches' facts, compared across arms


@dataclass
class Scaling:
    """Throughput at `ranks` over `ranks` times the same arm's one-rank throughput."""

    key: Key
    runtime: str
    efficiency: stats.Interval
    nodes: int = 1  # the hosts its ranks ran on (most trials'): over nodes, not only ranks


@dataclass
class IoOverhead:
    """(synthetic - real) / synthetic images/s: what reading real data costs one arm."""

    key: Key  # the real-data configuration
    runtime: str
    overhead: stats.Interval


@dataclass
class SweepPoint:
    """One point of a sweep's series for one arm: medians over the trials that measured it."""

    at: tuple  # the values of the series' `at` fields, the x value last
    values: dict[str, stats.Interval]  # per declared value


@dataclass
class SweepSeries:
    """One declared series of a sweep benchmark (kitschema) for one arm."""

    bench: str
    series: str  # the record's field holding the rows
    image: str
    ranks: int
    launcher: str
    runtime: str
    n: int
    version: str  # the software the benchmark declares it measures
    points: list[SweepPoint]
    transport: str = ""  # how rank 0 reached the others (kitschema), most trials' answer


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
    sweeps: list[SweepSeries]
    oom: list[dict]  # configurations that did not fit in memory: key fields, runtime, trials
    runtimes: dict[str, dict]  # arm -> version, default settings and pass-through args
    comparisons: int = 0  # the family the verdicts' intervals are adjusted for
    each_confidence: float = 0.95  # each comparison's interval: Bonferroni over the family
    precision_target: float | None = None  # the campaign's --precision, if it had one
    baseline: str = REFERENCE  # the arm every other is compared with
    preset: dict = field(default_factory=dict)  # name, title, question of a preset's report
    published: list[dict] = field(default_factory=list)  # its figures beside ours
    skipped: list[str] = field(default_factory=list)  # "file:line: why" of unusable lines
    left_out: list[str] = field(default_factory=list)  # ok trials whose figure is no number
    # above 0 (a hand edit, an older kit): which, and why
    started: list[str] = field(default_factory=list)  # the first and last trial's start
    minutes: float | None = None  # the campaigns' own: first trial's start to last one's end
    hosts: list[str] = field(default_factory=list)  # the hosts the trials ran on
    images: dict[str, str] = field(default_factory=dict)  # image -> recipe version and stack
    crowded: list[str] = field(default_factory=list)  # trials on fewer hosts than spread over
    metrics: dict[str, benches.Metric] = field(default_factory=dict)  # bench -> its metric
    projection: list[precision.Projection] = field(default_factory=list)  # what ±5/±2 % cost

    def metric(self, bench: str) -> "benches.Metric":
        """What a benchmark's arms are compared on (a user's command brings its own)."""
        return self.metrics.get(bench) or benches.metric(bench)


def _crowded(r: dict) -> str:
    """What a trial whose ranks ran on fewer hosts than it spread them over (a host list,
    a Slurm job's nodes) says ("": none such): its figures are not across nodes, whatever
    the launcher was asked."""
    hosts, asked = record.spread_over(r)
    ran = (r.get("result") or {}).get("hosts") or []
    if not hosts or len(ran) >= min(r["ranks"], hosts):
        return ""
    return (
        f"trial {r['index']} ({r['runtime']}, {r['bench']}, {r['ranks']} ranks): ranks on "
        f"{', '.join(ran) or 'no host named'}, where {asked}"
    )


def _provenance(r: dict) -> str:
    """An image's recipe version and stack, as the report names them (older records
    carry no stack)."""
    stack = r.get("stack") or ""
    parts = [
        f"recipe {r['recipe_version']}" if r.get("recipe_version") else "",
        "the user's own image" if stack == "own" else f"{stack} stack" if stack else "",
    ]
    return ", ".join(x for x in parts if x) or "no recipe recorded"


def _mode(values: list[T]) -> T:
    """The most common value (the first seen among equals)."""
    return Counter(values).most_common(1)[0][0]


def _load(rs: list[dict]) -> dict:
    """Median host activity over an arm's trials (recorded by kit run, when present)."""
    loads = [r["host_load"] for r in rs if isinstance(r.get("host_load"), dict)]
    if not loads:
        return {}
    return {
        k: statistics.median(x[k] for x in loads)
        for k in ("loadavg_1m", "other_cpu_pct", "steal_cpu_pct")
        if all(isinstance(x.get(k), int | float) for x in loads)
    }


AFTER = {  # what the launcher's wall time adds to a launch's phases (kitschema.PHASES)
    "exit": "the timed steps' end to the launcher's return (gathering, finalizing, teardown)",
    "fixed": "the launch's wall time less its timed steps",
}


def _phases(rs: list[dict]) -> dict[str, float]:
    """The median seconds of each phase all of an arm's trials measured ({} unless every
    record carries phases_s), with AFTER's where the launcher ran here: its wall time then
    starts at the launch on the same clock (a Slurm job's holds its queueing too)."""
    trials = []
    for r in rs:
        p = r["result"].get("phases_s")
        if not isinstance(p, dict):
            return {}
        p = {k: v for k, v in p.items() if isinstance(v, int | float)}
        wall = r.get("wall_s")
        here = record.launched_by(r) == "local" and isinstance(wall, int | float)
        if here and {"runtime_start", "timed"} <= p.keys():
            p |= {"exit": wall - sum(p.values()), "fixed": wall - p["timed"]}
        trials.append(p)
    every = [k for k in trials[0] if all(k in p for p in trials)]
    return {k: statistics.median(p[k] for p in trials) for k in every}


def _arm(runtime: str, rs: list[dict], conf: float) -> Arm:
    res = [r["result"] for r in rs]
    steps = min(len(x["loss"]) for x in res) if all("loss" in x for x in res) else 0
    starts = [x.get("startup_s") for x in res]  # a user's command says none
    compiles = [x.get("compile_s") for x in res]
    return Arm(
        runtime=runtime,
        n=len(rs),
        rate=stats.median_ci(rates(rs), conf),
        rates=rates(rs),
        startup=stats.median_ci(starts, conf) if None not in starts else None,
        compile=stats.median_ci(compiles, conf) if None not in compiles else None,
        peak_rss_mb=statistics.median(max(x.get("peak_rss_mb") or [0.0]) for x in res),
        framework=_mode([_framework(x) for x in res]),
        mpi=_mode([x.get("mpi_library", "-") for x in res]),
        settings=list(rs[-1].get("runtime_settings", [])),
        loss=[statistics.median(x["loss"][i] for x in res) for i in range(steps)],
        load=_load(rs),
        phases=_phases(rs),
    )


def _framework(result: dict) -> str:
    """The framework as it ran: its version, and for a compiled model the vector ISA its
    kernels were built for (arms that differ there are different software)."""
    isa = result.get("compile_isa")
    return result.get("framework_version", "-") + (f", inductor {isa}" if isa else "")


def _span(times: list[str]) -> list[str]:
    return [min(times), max(times)] if times else []


def rates(rs: list[dict]) -> list[float]:
    """Each trial's figure on its benchmark's declared metric."""
    return [r["result"][benches.metric(r["bench"], r["result"]).key] for r in rs]


def by_round(rs: list[dict]) -> dict[tuple, float]:
    """The metric per (campaign, round), the pairing key of a round-interleaved campaign:
    the geometric mean where the arm ran more than once in the round (the baseline)."""
    logs: dict[tuple, list[float]] = defaultdict(list)
    paired = [r for r in rs if isinstance(r.get("repeat"), int)]
    for r, x in zip(paired, rates(paired), strict=True):
        logs[(r["campaign"], r["repeat"])].append(math.log(x))
    return {k: math.exp(statistics.fmean(v)) for k, v in logs.items()}


@dataclass
class Screened:
    """A group's trials after the load screen: those kept, and per arm the indices left out
    (with what showed the outside load) and those kept although slow (no evidence)."""

    kept: dict[str, list[dict]]
    left: dict[str, list[int]]
    evidence: dict[str, list[str]]
    slow: dict[str, list[int]]


def screen(by_rt: dict[str, list[dict]]) -> Screened:
    """Leave a launch out only on evidence that something outside it slowed it.

    A launch is a suspect when it ran far slower than the arm + round fit predicts
    (stats.disturbed), or, with its record showing outside load, far slower than its arm's
    median (a round where half the arms were loaded moves the round's term, not the
    residuals). A suspect is left out only when its record shows the load
    (hostload.outside_load: CPU used on the machine outside the trial, or steal); a slow
    launch without that evidence stays in, whatever its arm: a runtime's intermittently
    slow launch is its cost, and is named as this arm's own."""
    cells = [
        (rt, r, math.log(x))
        for rt, rs in by_rt.items()
        for r, x in zip(rs, rates(rs), strict=True)
        if isinstance(r.get("repeat"), int)
    ]
    flagged = stats.disturbed([(rt, (r["campaign"], r["repeat"]), y) for rt, r, y in cells])
    logs: dict[str, list[float]] = defaultdict(list)
    for rt, _, y in cells:
        logs[rt].append(y)
    centre = {rt: statistics.median(ys) for rt, ys in logs.items()}
    why = {id(r): hostload.outside_load(r.get("host_load")) for _, r, _ in cells}
    suspects = {
        id(r)
        for i, (rt, r, y) in enumerate(cells)
        if i in flagged or (why[id(r)] and y - centre[rt] < -math.log(stats.DISTURBED_SLOWDOWN))
    }
    out = {i for i in suspects if why[i]}
    return Screened(
        kept={rt: [r for r in rs if id(r) not in out] for rt, rs in by_rt.items()},
        left={rt: [r["index"] for r in rs if id(r) in out] for rt, rs in by_rt.items()},
        evidence={rt: [str(why[id(r)]) for r in rs if id(r) in out] for rt, rs in by_rt.items()},
        slow={rt: [r["index"] for r in rs if id(r) in suspects - out] for rt, rs in by_rt.items()},
    )


def _same_software(arm: Arm, ref: Arm) -> bool:
    return (arm.framework, arm.mpi) == (ref.framework, ref.mpi)


def _comparable(arm: Arm, ref: Arm, allow_mismatch: bool) -> bool:
    """Same software as the reference (or --allow-mismatch); else say why in the verdict."""
    if _same_software(arm, ref) or allow_mismatch:
        return True
    arm.verdict = (
        f"not compared: software differs from {ref.runtime} "
        f"({arm.framework} / {arm.mpi} vs {ref.framework} / {ref.mpi}); "
        "--allow-mismatch compares anyway"
    )
    return False


def _ratio(
    arm: Arm,
    ref: Arm,
    rs: list[dict],
    ref_rs: list[dict],
    each: float,
    paired: Callable[[list[tuple[float, float]], float], stats.Interval] = stats.paired_ratio,
) -> None:
    """Ratio arm/ref at the family-adjusted confidence `each`: paired by round when any
    round has both (too few rounds then reads "too few trials"), else unpaired."""
    mine, theirs = by_round(rs), by_round(ref_rs)
    pairs = [(mine[k], theirs[k]) for k in sorted(mine.keys() & theirs.keys())]
    if pairs:  # a round-interleaved campaign: too few rounds is "too few", not unpaired
        launches = len(ref_rs) / max(len(theirs), 1)
        times = f", {ref.runtime} x{launches:.2g} a round" if launches > 1.05 else ""
        arm.ratio = paired(pairs, each)
        arm.method = f"paired ({len(pairs)} rounds{times})"
        arm.rounds, arm.baseline_launches = len(pairs), launches
        logs = [math.log(a / b) for a, b in pairs]
        arm.round_spread = statistics.stdev(logs) if len(logs) >= 2 else None
    else:
        arm.ratio, arm.method = stats.ratio_ci(rates(rs), rates(ref_rs), each), "unpaired"
        arm.rounds, arm.baseline_launches, arm.round_spread = 0, 1.0, None


def _compare(
    arm: Arm,
    ref: Arm,
    kept: tuple[list[dict], list[dict]],
    every: tuple[list[dict], list[dict]],
    each: float,
    target: float | None,
) -> None:
    """The ratio on the launches kept (the geometric mean of the per-round ratios: an
    intermittent cost counts in full), and where some were left out also on every launch
    (ratio_all); the verdict and the precision are those that hold under both."""
    arm.against = ref.runtime
    if len(every[0]) + len(every[1]) > len(kept[0]) + len(kept[1]):
        # the launches put back are ones the record shows another job slowed (2-7x): the
        # check asks whether the verdict survives without trusting the screen, so it takes
        # the centre those few wild rounds do not move
        _ratio(arm, ref, *every, each, stats.robust_paired_ratio)
        arm.ratio_all = arm.ratio
    _ratio(arm, ref, *kept, each)
    both = [iv for iv in (arm.ratio, arm.ratio_all) if iv is not None]
    arm.half_width = max(stats.half_width(iv) for iv in both)
    arm.detectable = stats.detectable(arm.ratio)
    if any(iv.short for iv in both):
        robust = arm.ratio_all is not None and arm.ratio_all.short
        need = stats.min_n(each) if robust or not arm.method.startswith("paired") else 0
        arm.verdict = f"{TOO_FEW} (need {max(need, stats.MIN_ROUNDS)})"
    else:
        better = benches.metric(kept[0][0]["bench"], kept[0][0]["result"]).higher_is_better
        hull = stats.Interval(
            arm.ratio.value,
            min(iv.low for iv in both),
            max(iv.high for iv in both),
            min(iv.coverage for iv in both),
            arm.ratio.wanted,
        )
        arm.verdict = stats.verdict(hull, higher_is_faster=better)
    if not _same_software(arm, ref):
        arm.verdict += " (MISMATCHED SOFTWARE)"
    if target is not None:
        reached = arm.half_width <= target and not any(iv.short for iv in both)
        arm.precision = "reached" if reached else "not reached"


def variance(key_arms: dict[str, list[dict]]) -> Variance:
    """Variance decomposition of a group's log rates over the rounds every arm finished
    (two-way: arm and round, no interaction), and the within-trial part from step times."""
    within = []
    for rs in key_arms.values():
        for r in rs:
            steps = r["result"].get("step_times_s") or []
            if len(steps) >= 2 and statistics.fmean(steps) > 0:
                within.append(statistics.stdev(steps) / statistics.fmean(steps) / len(steps) ** 0.5)
    arms = sorted(key_arms)
    per_arm = {x: by_round(key_arms[x]) for x in arms}
    complete = set.intersection(*(set(rounds) for rounds in per_arm.values()))
    full = [{x: math.log(per_arm[x][k]) for x in arms} for k in sorted(complete)]
    launches = rounds = typical = None
    a, n = len(arms), len(full)
    if n >= 2:
        grand = statistics.fmean(v for row in full for v in row.values())
        arm_mean = {x: statistics.fmean(row[x] for row in full) for x in arms}
        round_mean = [statistics.fmean(row.values()) for row in full]
        if a >= 2:
            squares = {
                x: sum(
                    (row[x] - arm_mean[x] - rm + grand) ** 2
                    for row, rm in zip(full, round_mean, strict=True)
                )
                for x in arms
            }
            resid = sum(squares.values()) / ((a - 1) * (n - 1))
            drift = statistics.variance(round_mean) - resid / a
            launches, rounds = math.sqrt(resid), math.sqrt(max(drift, 0.0))
            # each arm's share of the residual sum has expectation (a-1)(n-1)/a of its variance
            typical = math.sqrt(statistics.median(squares.values()) * a / ((a - 1) * (n - 1)))
        else:
            launches = statistics.stdev(row[arms[0]] for row in full)
    return Variance(statistics.median(within) if within else None, launches, rounds, n, typical)


def targets(out_dirs: list[Path]) -> float | None:
    """The precision target the campaigns were run to (their saved --precision)."""
    found = {store.settings(d).get("precision") for d in out_dirs}
    return min((float(x) for x in found if isinstance(x, int | float)), default=None)


def saved_baseline(out_dirs: list[Path]) -> str:
    """The baseline the campaigns were run with (kit run --baseline), when they agree;
    else native."""
    found = {store.settings(d).get("baseline", REFERENCE) for d in out_dirs}
    return found.pop() if len(found) == 1 else REFERENCE


def analyse(
    out_dirs: list[Path],
    confidence: float = 0.95,
    allow_mismatch: bool = False,
    baseline: str = REFERENCE,
) -> Analysis:
    """The analysis of one or more campaigns' results (e.g. the same matrix run locally
    and through Slurm, side by side)."""
    records, skipped, seen = [], [], set()
    for out_dir in out_dirs:
        loaded = store.load(out_dir)
        found = loaded.records
        skipped += loaded.problems
        if not found:
            raise KitError(
                f"no trial records in {out_dir / store.FILE}; "
                f"run 'kit run ... --out {out_dir}' first"
            )
        again = 0  # a trial counted twice (a copied folder, a pasted line) would narrow
        for r in found:  # every interval: each is read once
            text = json.dumps(r, sort_keys=True)
            again += text in seen
            if text not in seen:
                seen.add(text)
                records.append(r)
        if again:
            note = f"{out_dir / store.FILE}: {again} record(s) identical to ones already read"
            print(f"kit: warning: {note} (skipped)", file=sys.stderr)
            skipped.append(note)
    a = summarise(
        records,
        ", ".join(str(d) for d in out_dirs),
        confidence,
        allow_mismatch,
        targets(out_dirs),
        skipped,
        baseline,
    )
    for note in a.left_out:
        print(f"kit: warning: {note} (left out of the analysis)", file=sys.stderr)
    return a


def figured(ok: list[dict]) -> tuple[list[dict], list[str]]:
    """The ok trials whose figures can be compared, and why each other one cannot: the
    analysis takes logs, and a record kit's own reading did not check (a hand edit, an
    older kit's) may hold 0 or less."""
    kept, notes = [], []
    for r in ok:
        if why := benches.figure_problem(r["bench"], r["result"]):
            notes.append(f"trial {r['index']} of campaign {r['campaign']} ({r['runtime']}): {why}")
        else:
            kept.append(r)
    return kept, notes


def summarise(
    records: list[dict],
    label: str,
    confidence: float = 0.95,
    allow_mismatch: bool = False,
    target: float | None = None,
    skipped: list[str] | None = None,
    baseline: str = REFERENCE,
) -> Analysis:
    """The analysis of trial records (a campaign in progress uses it to decide whether its
    comparisons are precise enough), each arm compared with `baseline` (an arm's name,
    or "all": native first, then every other pair)."""
    measured = [r for r in records if not r["warmup"]]
    ok, left_out = figured([r for r in measured if r["status"] == "ok"])
    by_key: dict[Key, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    sweeps: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in ok:
        if benches.is_sweep(r["bench"]):
            where = (r["bench"], r["image"], r["ranks"], record.launched_by(r))
            sweeps[where][r["runtime"]].append(r)
            continue
        by_key[Key(**record.key_values(r))][r["runtime"]].append(r)

    ref = REFERENCE if baseline == ALL_PAIRS else baseline
    arms_seen = {rt for by_rt in by_key.values() for rt in by_rt}
    if by_key and baseline not in (ALL_PAIRS, REFERENCE) and baseline not in arms_seen:
        raise KitError(
            f"baseline '{baseline}' is not an arm of these results (arms: "
            f"{', '.join(sorted(arms_seen))}); choose one of them, or 'all' for every pair"
        )
    groups = []
    screened = {key: screen(by_rt) for key, by_rt in by_key.items()}
    for key, by_rt in sorted(by_key.items(), key=lambda kv: kv[0].order()):
        order = sorted(by_rt, key=lambda n: (n != ref, n))
        arms = [_arm(rt, by_rt[rt], confidence) for rt in order]
        sc = screened[key]
        for arm in arms:
            rt = arm.runtime
            arm.disturbed, arm.evidence, arm.slow = sc.left[rt], sc.evidence[rt], sc.slow[rt]
        launches = fingerprints.compare(by_rt, ref, key)
        groups.append(Group(key, arms, variance(sc.kept), fingerprints=launches))
    family = _family(groups, ref, baseline == ALL_PAIRS, allow_mismatch)
    each = stats.family_confidence(confidence, len(family))
    for g, arm, base in family:
        kept, every = screened[g.key].kept, by_key[g.key]
        pair = (arm.runtime, base.runtime)
        _compare(arm, base, tuple(kept[x] for x in pair), tuple(every[x] for x in pair),
                 each, target)  # fmt: skip

    oom: dict[tuple, int] = Counter(
        tuple(r[f] for f in OOM_FIELDS) for r in records if r["status"] == "oom"
    )
    return Analysis(
        out_dir=label,
        started=_span([r["started"] for r in records if isinstance(r.get("started"), str)]),
        minutes=record.campaign_minutes(records),
        hosts=sorted({str(r["host"].get("hostname", "?")) for r in records}),
        images={r["image"]: _provenance(r) for r in records},
        crowded=[c for r in ok if (c := _crowded(r))],
        trials=len(records),
        ok=len(ok),
        not_ok=[r for r in measured if r["status"] not in ("ok", "oom")],
        warmup=len(records) - len(measured),
        host=records[0]["host"],
        confidence=confidence,
        groups=groups,
        scaling=_scaling(by_key, confidence),
        io=_io_overhead(by_key, confidence),
        sweeps=[
            series
            for where, by_rt in sorted(sweeps.items())
            for rt, rs in sorted(by_rt.items(), key=lambda kv: (kv[0] != REFERENCE, kv[0]))
            for series in _sweep(*where, rt, rs, confidence)
        ],
        oom=[dict(zip(OOM_FIELDS, k, strict=True), trials=n) for k, n in sorted(oom.items())],
        runtimes=_runtimes(records),
        comparisons=len(family),
        each_confidence=each,
        precision_target=target,
        skipped=skipped or [],
        left_out=left_out,
        baseline=ref,
        metrics={r["bench"]: benches.metric(r["bench"], r["result"]) for r in ok},
        projection=[]  # a width short of rounds prices nothing
        if any(arm.too_few for _, arm, _ in family)
        else precision.project(
            [(arm.ratio, arm.rounds) for _, arm, _ in family if arm.ratio], measured
        ),
    )


def _family(
    groups: list[Group], ref: str, all_pairs: bool, allow_mismatch: bool
) -> list[tuple[Group, Arm, Arm]]:
    """The comparisons the confidence is shared among: every arm against the group's
    reference arm, and with `all_pairs` every other pair too (added to the group's
    pairs); arms of different software are left out unless mismatches are allowed."""
    family = [
        (g, arm, g.arms[0])
        for g in groups
        if g.arms[0].runtime == ref
        for arm in g.arms[1:]
        if _comparable(arm, g.arms[0], allow_mismatch)
    ]
    if all_pairs:
        for g in groups:
            others = g.arms[1:] if g.arms[0].runtime == ref else g.arms
            for i, base in enumerate(others):
                for arm in others[i + 1 :]:
                    pair = dataclasses.replace(arm, verdict="", against=base.runtime)
                    g.pairs.append(pair)
                    if _comparable(pair, base, allow_mismatch):
                        family.append((g, pair, base))
    return family


def _scaling(by_key: dict[Key, dict[str, list[dict]]], conf: float) -> list[Scaling]:
    """Each arm's efficiency at N ranks: its rate over N times its own rate at one rank
    (same configuration otherwise), with the hosts its ranks ran on."""
    out = []
    for key, by_rt in by_key.items():
        if key.ranks == 1:
            continue
        one = by_key.get(dataclasses.replace(key, ranks=1), {})
        for rt, rs in sorted(by_rt.items()):
            if rt in one:
                ideal = [x * key.ranks for x in rates(one[rt])]
                nodes = _mode([len(r["result"].get("hosts") or [0]) for r in rs])
                out.append(Scaling(key, rt, stats.ratio_ci(rates(rs), ideal, conf), nodes))
    return sorted(out, key=lambda s: (*s.key.order(), s.runtime))


def _io_overhead(by_key: dict[Key, dict[str, list[dict]]], conf: float) -> list[IoOverhead]:
    """Each arm's cost of reading real data: 1 - its real-data rate over its synthetic one."""
    out = []
    for key, by_rt in by_key.items():
        synthetic = by_key.get(dataclasses.replace(key, data="synthetic"), {})
        if key.data == "synthetic":
            continue
        for rt, rs in sorted(by_rt.items()):
            if rt in synthetic:
                ratio = stats.ratio_ci(rates(rs), rates(synthetic[rt]), conf)
                flipped = stats.Interval(
                    1 - ratio.value, 1 - ratio.high, 1 - ratio.low, ratio.coverage
                )
                out.append(IoOverhead(key, rt, flipped))
    return sorted(out, key=lambda x: (*x.key.order(), x.runtime))


def _runtimes(records: list[dict]) -> dict[str, dict]:
    """Each runtime's version, settings and extra arguments, as its first record has them."""
    out: dict[str, dict] = {}
    for r in records:
        out.setdefault(
            r["runtime"],
            {
                "version": r["runtime_version"],
                "settings": list(r["runtime_settings"]),
                "args": list(r.get("runtime_args", [])),
            },
        )
    return out


def _sweep(
    bench: str, image: str, ranks: int, launcher: str, runtime: str, rs: list[dict], conf: float
) -> list[SweepSeries]:
    """Each declared series of one arm's sweep: per point, the median over the trials that
    measured it (a series no trial has rows for, e.g. ping-pong with one rank, is left out)."""
    spec = benches.get(bench)
    res = [r["result"] for r in rs]
    version = _mode([x[spec.version] for x in res])
    transport = _mode([str(x.get("transport", "-")) for x in res])
    out = []
    for series in spec.series:
        rows: dict[tuple, list[dict]] = defaultdict(list)
        for x in res:
            for row in x[series.field]:
                rows[tuple(row[k] for k in series.at)].append(row)
        points = [
            SweepPoint(
                at,
                {
                    v.key: stats.median_ci([row[v.key] for row in rows[at]], conf)
                    for v in series.values
                },
            )
            for at in sorted(rows)
        ]
        if points:
            out.append(
                SweepSeries(
                    bench,
                    series.field,
                    image,
                    ranks,
                    launcher,
                    runtime,
                    len(rs),
                    version,
                    points,
                    transport,
                )
            )
    return out
