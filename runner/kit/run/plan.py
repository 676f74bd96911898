"""A campaign's design: the configurations, the rounds (every arm once, the baseline about
sqrt(k) times, in a seeded order, so drift falls on every arm alike), the options every
trial runs with, its length chosen from the warm-up round, and the rule that stops a
precision-targeted campaign (it reads the intervals' widths, never their verdicts)."""

import dataclasses
import math
import random
import statistics
from dataclasses import dataclass

from kit.analysis import precision, stats, summary
from kit.analysis.findings import ALL_PAIRS, REFERENCE, Analysis, Arm
from kit.core import benches, columns, units
from kit.core.command import Command
from kit.launch import slurm
from kit.results.record import Trial


@dataclass(frozen=True)
class Config:
    bench: str
    model: str
    batch_size: int
    ranks: int
    data: str = "synthetic"


def configs(
    names: list[str], models: list[str], batch_sizes: list[int], ranks: list[int], data: list[str]
) -> list[Config]:
    """The product of the campaign's dimensions; a sweep benchmark takes ranks only."""
    out = []
    for b in names:
        if benches.is_sweep(b):
            out += [Config(b, "-", 0, n) for n in ranks]
        else:
            out += [
                Config(b, m, bs, n, d)
                for m in models
                for bs in batch_sizes
                for n in ranks
                for d in data
            ]
    return out


@dataclass(frozen=True)
class Planned:
    runtime: str
    config: Config
    repeat: int  # -1 .. -W for warm-up rounds
    warmup: bool


@dataclass(frozen=True)
class Options:
    steps: int = 100
    warmup_steps: int = 5
    timeout: float = 600.0
    mpirun: str | None = None
    runtime_args: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    bench_args: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # by bench
    data_dir: str | None = None  # host folder of the real-data set, bound into containers
    site: slurm.Site | None = None  # None: launch locally (mpirun); else one Slurm job a trial
    auto_min_time: bool = False  # --min-time auto: chosen from the warm-up round
    command: Command | None = None  # a user's own command instead of kit's benchmarks
    torchrun: bool = False  # ranks started by torchrun inside the runtime, not by mpirun
    hosts: tuple[str, ...] = ()  # --hosts: ranks over ssh on these hosts, one a host in turn


def auto_min_time(opts: Options, warmups: list[Trial]) -> tuple[Options, str]:
    """opts with the training benchmarks' --min-time chosen from the warm-up trials
    (stats.trial_seconds), and a line saying what was chosen and from what. Derived from
    the records alone, so --resume chooses the same."""
    ok = [
        t
        for t in warmups
        if t.status == "ok" and t.result.get("step_times_s") and t.wall_s is not None
    ]
    if not ok:
        return dataclasses.replace(opts, auto_min_time=False), (
            "--min-time auto: no warm-up trial finished; trials time --steps steps only"
        )
    steps = [t.result["step_times_s"] for t in ok]
    step_s = statistics.median(x for s in steps for x in s)
    settled = [s[1:] if len(s) > 2 else s for s in steps]  # a warm-up trial's first timed
    # step is still warming: its step noise would ask for longer trials than needed
    cv = statistics.median(
        statistics.pstdev(s) / statistics.fmean(s) if len(s) > 1 else 0.0 for s in settled
    )
    fixed = statistics.median(t.wall_s - sum(s) for t, s in zip(ok, steps, strict=True))
    spread, whence = launch_spread(ok)
    chosen = max(0.5, round(2 * stats.trial_seconds(fixed, step_s, cv, spread)) / 2)
    args = {
        b: a if benches.is_sweep(b) else [*a, "--min-time", f"{chosen:g}"]
        for b, a in opts.bench_args.items()
    }
    return dataclasses.replace(opts, bench_args=args, auto_min_time=False), (
        f"--min-time auto: {chosen:g} s (a launch's fixed cost {fixed:.1f} s, steps "
        f"{step_s:.2f} s ±{cv:.0%}, launch spread {spread:.0%} {whence})"
    )


def launch_spread(trials: list[Trial]) -> tuple[float, str]:
    """How far apart launches run here, from the warm-up trials' own figures: the pooled SD
    of their log rates about each round's mean (every arm launched once a round; arms that
    truly differ only make it larger, which asks for shorter trials and more launches).
    With fewer than two degrees of freedom, stats.LAUNCH_SD, said to be assumed."""
    by_round: dict[object, list[float]] = {}
    for t in trials:
        x = t.result.get(benches.metric(t.bench, t.result).key)
        if isinstance(x, int | float) and math.isfinite(x) and x > 0:
            by_round.setdefault(t.repeat, []).append(math.log(x))
    squares = sum((y - statistics.fmean(ys)) ** 2 for ys in by_round.values() for y in ys)
    df = sum(len(ys) - 1 for ys in by_round.values())
    if df < 2:
        return stats.LAUNCH_SD, "assumed"
    sd = min(max(math.sqrt(squares / df), 0.01), 0.5)
    return sd, f"measured over {df + len(by_round)} warm-up launches"


BASELINE = REFERENCE  # the arm every other is compared with, launched more often


def baseline_launches(runtimes: list[str]) -> int:
    """Launches of the baseline a round, about sqrt(k) for k arms compared with it.

    All k comparisons share the baseline's noise: with b of its launches a round, a
    per-round log ratio has variance (1 + 1/b) s^2 and a round costs k + b launches, so
    the interval width a minute goes as sqrt((1 + 1/b)(k + b)), least near b = sqrt(k)
    (k = 4: b = 2 is 5 % narrower a minute than b = 1)."""
    k = len(runtimes) - 1
    return max(1, round(math.sqrt(k))) if BASELINE in runtimes and k >= 2 else 1


def plan_round(
    runtimes: list[str], configs: list[Config], r: int, warmups: int, seed: int, launches: int = 1
):
    """Round r: every runtime arm x configuration once (the baseline `launches` times), in
    an order seeded by (seed, r)."""
    round_ = [
        (rt, c)
        for c in configs
        for rt in runtimes
        for _ in range(launches if rt == BASELINE else 1)
    ]
    random.Random(f"{seed}:{r}").shuffle(round_)
    return [Planned(rt, c, r - warmups, r < warmups) for rt, c in round_]


@dataclass(frozen=True)
class Target:
    """A precision-targeted campaign: rounds are added until every comparison's interval
    (family-adjusted, at `confidence`) is within ±precision, or the budget is spent."""

    precision: float  # relative half-width, e.g. 0.02
    budget_s: float
    confidence: float = 0.95
    baseline: str = REFERENCE  # the report's family: an arm, or ALL_PAIRS


@dataclass(frozen=True)
class Design:
    runtimes: list[str]
    configs: list[Config]
    repeats: int  # measured rounds; with a Target, the fewest before the first check
    warmups: int
    seed: int
    target: Target | None = None
    baseline_launches: int = 1  # launches of BASELINE a round

    def round(self, r: int) -> list[Planned]:
        return plan_round(
            self.runtimes, self.configs, r, self.warmups, self.seed, self.baseline_launches
        )

    @property
    def per_round(self) -> int:
        return len(self.round(0))

    def trials(self) -> list[Planned]:
        """The fixed rounds: warm-up, then `repeats` measured (a Target adds rounds)."""
        return [p for r in range(self.warmups + self.repeats) for p in self.round(r)]


def stop_reason(
    design: Design, records: list[Trial], rounds_done: int, spent_s: float
) -> str | None:
    """Why a campaign stops after this round, or None to go on. A fixed design stops after
    its rounds. A precision-targeted one stops when every interval is within the target
    (stats.precise: widths only, never verdicts) once its first rounds are done, and, before
    anything else, when another round would not fit in its budget (`spent_s`: the
    campaign's wall time so far, set-up included): the budget is a promise, kept even
    where the first rounds are not all done."""
    t = design.target
    if t is not None and rounds_done > 0:
        per_round = spent_s / rounds_done
        if spent_s + per_round > t.budget_s:
            return _spent(t, records, f"after {rounds_done} rounds")
    if rounds_done < design.warmups + design.repeats:
        return None
    if t is None:
        return ""
    a = summary.summarise(records, "", t.confidence, baseline=t.baseline)
    ratios = [arm.ratio for _, arm in _compared(a)]
    if ratios and stats.precise(ratios, t.precision):
        return f"precision ±{t.precision:.1%} reached after {rounds_done} rounds ({_widths(a)})"
    return None


def seconds_left(
    design: Design, records: list[Trial], rounds_done: int, spent_s: float
) -> float | None:
    """A precision-targeted campaign's time left, from what it measured: the rounds its
    widest comparison needs at the spread so far (precision.rounds_for), at the rate its
    rounds ran, never past its budget; None for a fixed design or before its first rounds
    (warm-up and stats.MIN_ROUNDS measured) give a spread."""
    t = design.target
    measured = rounds_done - design.warmups
    if t is None or measured < stats.MIN_ROUNDS:
        return None
    budget_left = max(0.0, t.budget_s - spent_s)
    a = summary.summarise(records, "", t.confidence, baseline=t.baseline)
    paired = [arm for _, arm in _compared(a) if arm.rounds and not arm.too_few]
    if not paired:
        return budget_left
    needs = max(precision.rounds_for(arm.ratio, arm.rounds, t.precision) for arm in paired)
    return min(budget_left, max(0, needs - measured) * spent_s / rounds_done)


def _spent(t: Target, records: list[Trial], when: str) -> str:
    a = summary.summarise(records, "", t.confidence, baseline=t.baseline)
    return (
        f"budget {units.minutes(t.budget_s)} spent {when}, precision ±{t.precision:.1%} not "
        f"reached ({_widths(a) or 'no comparison yet'})"
    )


RECENT = 3  # an arm's last trials, whose longest says how long its next one takes


def next_trial(
    design: Design, records: list[Trial], rounds_done: int, spent_s: float, arm: str
) -> tuple[str | None, float | None]:
    """Before each trial of a campaign with a budget: why not to start it (it would end
    past the budget, by the longest of its arm's last RECENT measured trials, else of any
    arm's), else the seconds left, which cap its own timeout. A round's check alone let a
    slow round run on past the budget: a 40 s budget took 106 s, and after a trial that
    timed out at 600 s of a 10-minute budget the next trial of the round started.
    (None, None) without a budget."""
    t = design.target
    if t is None:
        return None, None
    left = t.budget_s - spent_s
    walls = [(r.runtime, r.wall_s) for r in records if r.wall_s is not None and r.wall_s > 0]
    mine = [w for rt, w in walls if rt == arm][-RECENT:]
    expect = max(mine or [w for _, w in walls[-RECENT:]] or [0.0])
    if left <= 0 or expect > left:
        at = f"after {rounds_done} rounds" if not expect else (
            f"after {rounds_done} rounds (the next trial, {arm}, takes about {expect:.0f} s; "
            f"{max(left, 0):.0f} s were left)"
        )  # fmt: skip
        return _spent(t, records, at), None
    return None, left


def comparisons(design: Design) -> int:
    """How many comparisons a report of this design holds together (its family)."""
    arms = len(design.runtimes)
    all_pairs = design.target is not None and design.target.baseline == ALL_PAIRS
    per_config = arms * (arms - 1) // 2 if all_pairs else arms - 1
    return max(1, per_config * len(design.configs))


def short_budget(design: Design, spent_s: float, rounds_done: int) -> str:
    """After the first round(s), before the first measured trial: whether the budget buys
    the rounds a comparison's interval needs (stats.MIN_ROUNDS), and if not, the budget
    that would ("" when it does, or with no budget)."""
    t = design.target
    if t is None or rounds_done <= 0:
        return ""
    per_round = spent_s / rounds_done
    need = stats.MIN_ROUNDS
    buys = int((t.budget_s - spent_s) // per_round) if per_round > 0 else need
    if buys >= need:
        return ""
    enough = spent_s + (need + 1) * per_round
    return (
        f"the budget {units.minutes(t.budget_s)} buys about {max(buys, 0)} rounds at "
        f"{per_round:.0f} s a round; an interval at {t.confidence:.0%} for all "
        f"{comparisons(design)} comparisons needs at least {need}: --budget "
        f"{math.ceil(enough / 60)}m would buy them (shorter intervals are marked †)"
    )


def _compared(a: Analysis) -> list[tuple[str, Arm]]:
    """Every comparison of the analysis that has a ratio, by name."""
    compared = [(arm.runtime, arm) for g in a.groups for arm in g.arms]
    compared += [(f"{arm.runtime}/{arm.against}", arm) for g in a.groups for arm in g.pairs]
    return [(name, arm) for name, arm in compared if arm.ratio is not None]


def _widths(a: Analysis) -> str:
    """Each comparison's half-width, or that it has too few rounds for one (a range over
    one or two rounds is no interval, however narrow)."""
    return ", ".join(
        f"{name} {arm.verdict}" if arm.too_few else
        f"{name} ±{arm.half_width:.1%}"
        for name, arm in _compared(a)
    )  # fmt: skip


def _what(c: Config) -> str:
    if c.model == "-":  # a sweep, or a user's command
        return c.bench
    return f"{c.bench} {c.model} bs={c.batch_size} {c.data}"


def describe(design: Design, opts: Options) -> str:
    """The dry run's plan: every trial of the fixed rounds, then what the campaign decides
    as it goes (the trial length, the baseline's launches, more rounds to a target)."""
    lines = columns.aligned(
        [
            (str(i), t.runtime, _what(t.config), f"np={t.config.ranks}")
            + (("warm-up",) if t.warmup else ())
            for i, t in enumerate(design.trials())
        ],
        right={0},
    )
    if cmd := opts.command:
        lines.append(
            f"{cmd.name}: {' '.join(cmd.argv)} in the image"
            + (f"; natively: {' '.join(cmd.native_argv)}" if cmd.native_argv else "")
        )
        lines.append(f"its figure: --metric '{cmd.pattern}' ({cmd.reduce} of the matches)")
    if opts.auto_min_time:
        lines.append("--min-time auto: chosen after the warm-up round, from its trials")
    if design.baseline_launches > 1:
        lines.append(
            f"{BASELINE} runs {design.baseline_launches} times a round (every comparison "
            "shares its noise)"
        )
    if design.target:
        family = " (every pair)" if design.target.baseline == ALL_PAIRS else ""
        lines.append(
            f"then a round at a time until every comparison{family} is within "
            f"±{design.target.precision:.1%} or {units.minutes(design.target.budget_s)} "
            "are spent"
        )
    return "\n".join(lines)


def as_data(design: Design, opts: Options) -> dict:
    """The dry run's plan as kit run --dry-run --json prints it: the same trials and rules
    as describe's lines (docs/schemas/output/run.json)."""
    cmd, t = opts.command, design.target
    trials = [
        dataclasses.asdict(p.config) | {"index": i, "runtime": p.runtime, "round": p.repeat,
                                        "warmup": p.warmup}
        for i, p in enumerate(design.trials())
    ]  # fmt: skip
    return {
        "trials": trials,
        "command": None if cmd is None else {
            "name": cmd.name, "argv": list(cmd.argv), "native_argv": list(cmd.native_argv),
            "metric": cmd.pattern, "reduce": cmd.reduce,
        },
        "min_time_auto": opts.auto_min_time,
        "baseline_launches": design.baseline_launches,
        "target": None if t is None else {
            "precision": t.precision, "budget_s": t.budget_s, "confidence": t.confidence,
            "baseline": t.baseline,
        },
    }  # fmt: skip
