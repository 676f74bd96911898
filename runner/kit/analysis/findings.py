"""What an analysis found, as data: the one set of types every report format renders
(Markdown, CSV, JSON, HTML and its plots), so that they cannot disagree.
"""

from dataclasses import dataclass, field

from kit.analysis import precision, stats
from kit.analysis.fingerprints import Fingerprints
from kit.core import benches
from kit.results.record import Key, Trial

REFERENCE = "native"
TOO_FEW = "too few trials"  # the verdict of a comparison short of rounds
ALL_PAIRS = "all"
OOM_FIELDS = ("image", "bench", "model", "batch_size", "ranks", "runtime")


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
    loaded_kept: list[int] = field(default_factory=list)  # trials whose record shows outside
    # load, kept: every launch of the arm showed it (screen)
    kept_evidence: list[str] = field(default_factory=list)  # for each of those, what showed it
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
    not_ok: list[Trial]
    warmup: int
    host: dict
    confidence: float
    groups: list[Group]
    scaling: list[Scaling]
    io: list[IoOverhead]
    sweeps: list[SweepSeries]
    oom: list[dict]  # configurations that did not fit in memory: key fields, runtime, trials
    runtimes: dict[str, dict]  # arm -> version, default settings and pass-through args
    verified: list[str] = field(default_factory=list)  # each image run: kit verify's word
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
