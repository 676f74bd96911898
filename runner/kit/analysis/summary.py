"""From trial records to the analysis a report renders (kit.analysis.findings): the records
read, grouped and each arm summarised here, the parts computed by their own modules.

Trials are grouped by what was measured (image, benchmark, model, batch size, ranks);
within a group each runtime arm is summarised by medians with intervals and compared
with the reference arm (`native` unless the report names another baseline): paired by
round where both arms finished it, else by the ratio of medians. With the baseline
`all`, every other pair of arms is compared too, since published claims are as often
container vs container (Singularity vs Docker) as container vs native. The comparisons
form one family: their intervals are Bonferroni-adjusted so that every verdict of the
report holds together at the stated confidence.
"""

import statistics
from collections import Counter, defaultdict
from pathlib import Path

from kit.analysis import fingerprints, pairing, precision, scaling, stats
from kit.analysis.findings import ALL_PAIRS, OOM_FIELDS, REFERENCE, Analysis, Arm, Group
from kit.analysis.screen import screen
from kit.analysis.sweeps import arm_series
from kit.analysis.values import figured, rates
from kit.analysis.variance import decompose
from kit.core import benches
from kit.core.errors import KitError
from kit.core.log import logger
from kit.core.schema import printable
from kit.results import record, store
from kit.results.record import Key, Trial

log = logger(__name__)


def _crowded(t: Trial) -> str:
    """What a trial whose ranks ran on fewer hosts than it spread them over (a host list,
    a Slurm job's nodes) says ("": none such): its figures are not across nodes, whatever
    the launcher was asked."""
    hosts, asked = record.spread_over(t)
    ran = (t.result or {}).get("hosts") or []
    if not hosts or len(ran) >= min(t.ranks, hosts):
        return ""
    return (
        f"trial {t.index} ({t.runtime}, {t.bench}, {t.ranks} ranks): ranks on "
        f"{', '.join(ran) or 'no host named'}, where {asked}"
    )


def _provenance(t: Trial) -> str:
    """An image's recipe version and stack, as the report names them (older records
    carry no stack)."""
    stack = t.stack or ""
    parts = [
        f"recipe {t.recipe_version}" if t.recipe_version else "",
        "the user's own image" if stack == "own" else f"{stack} stack" if stack else "",
    ]
    return ", ".join(x for x in parts if x) or "no recipe recorded"


def _load(rs: list[Trial]) -> dict:
    """Median host activity over an arm's trials (recorded by kit run, when present)."""
    loads = [t.host_load for t in rs if t.host_load is not None]
    if not loads:
        return {}
    return {
        k: statistics.median(x[k] for x in loads)
        for k in ("loadavg_1m", "other_cpu_pct", "helper_cpu_pct", "steal_cpu_pct")
        if all(isinstance(x.get(k), int | float) for x in loads)
    }


AFTER = {  # what the launcher's wall time adds to a launch's phases (kitschema.PHASES)
    "exit": "the timed steps' end to the launcher's return (gathering, finalizing, teardown)",
    "fixed": "the launch's wall time less its timed steps",
}


def _phases(rs: list[Trial]) -> dict[str, float]:
    """The median seconds of each phase all of an arm's trials measured ({} unless every
    record carries phases_s), with AFTER's where the launcher ran here: its wall time then
    starts at the launch on the same clock (a Slurm job's holds its queueing too)."""
    trials = []
    for t in rs:
        p = t.result.get("phases_s")
        if not isinstance(p, dict):
            return {}
        p = {k: v for k, v in p.items() if isinstance(v, int | float)}
        wall = t.wall_s
        here = record.launched_by(t) == "local" and wall is not None
        if here and {"runtime_start", "timed"} <= p.keys():
            p |= {"exit": wall - sum(p.values()), "fixed": wall - p["timed"]}
        trials.append(p)
    every = [k for k in trials[0] if all(k in p for p in trials)]
    return {k: statistics.median(p[k] for p in trials) for k in every}


def _arm(runtime: str, rs: list[Trial], conf: float) -> Arm:
    res = [t.result for t in rs]
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
        framework=stats.mode([_framework(x) for x in res]),
        mpi=stats.mode([x.get("mpi_library", "-") for x in res]),
        settings=list(rs[-1].runtime_settings),
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
        fresh, again = record.distinct(found, seen)
        records += fresh
        if again:
            note = f"{out_dir / store.FILE}: {again} record(s) identical to ones already read"
            log.warning(f"kit: warning: {note} (skipped)")
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
        log.warning(f"kit: warning: {note} (left out of the analysis)")
    return a


def summarise(
    records: list[Trial],
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
    measured = [t for t in records if not t.warmup]
    ok, left_out = figured([t for t in measured if t.status == "ok"])
    by_key: dict[Key, dict[str, list[Trial]]] = defaultdict(lambda: defaultdict(list))
    sweeps: dict[tuple, dict[str, list[Trial]]] = defaultdict(lambda: defaultdict(list))
    for t in ok:
        if benches.is_sweep(t.bench):
            where = (t.bench, t.image, t.ranks, record.launched_by(t))
            sweeps[where][t.runtime].append(t)
            continue
        by_key[Key(**record.key_values(t))][t.runtime].append(t)

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
            arm.loaded_kept, arm.kept_evidence = sc.loaded_kept[rt], sc.kept_evidence[rt]
        launches = fingerprints.compare(by_rt, ref, key)
        groups.append(Group(key, arms, decompose(sc.kept), fingerprints=launches))
    family = pairing.family(groups, ref, baseline == ALL_PAIRS, allow_mismatch)
    each = stats.family_confidence(confidence, len(family))
    for g, arm, base in family:
        kept, every = screened[g.key].kept, by_key[g.key]
        pair = (arm.runtime, base.runtime)
        pairing.compare(arm, base, tuple(kept[x] for x in pair), tuple(every[x] for x in pair),
                        each, target)  # fmt: skip

    oom: dict[tuple, int] = Counter(
        tuple(getattr(t, f) for f in OOM_FIELDS) for t in records if t.status == "oom"
    )
    return Analysis(
        out_dir=label,
        started=_span([t.started for t in records if t.started is not None]),
        minutes=record.campaign_minutes(records),
        hosts=sorted({str(t.host.get("hostname", "?")) for t in records}),
        images={t.image: _provenance(t) for t in records},
        crowded=[c for t in ok if (c := _crowded(t))],
        trials=len(records),
        ok=len(ok),
        not_ok=[t for t in measured if t.status not in ("ok", "oom")],
        warmup=len(records) - len(measured),
        host=records[0].host,
        confidence=confidence,
        groups=groups,
        scaling=scaling.efficiencies(by_key, confidence),
        io=scaling.io_overheads(by_key, confidence),
        sweeps=[
            series
            for where, by_rt in sorted(sweeps.items())
            for rt, rs in sorted(by_rt.items(), key=lambda kv: (kv[0] != REFERENCE, kv[0]))
            for series in arm_series(*where, rt, rs, confidence)
        ],
        oom=[dict(zip(OOM_FIELDS, k, strict=True), trials=n) for k, n in sorted(oom.items())],
        runtimes=_runtimes(records),
        verified=_verified(records),
        comparisons=len(family),
        each_confidence=each,
        precision_target=target,
        skipped=skipped or [],
        left_out=left_out,
        baseline=ref,
        metrics=_metrics(ok),
        projection=[]  # a width short of rounds prices nothing
        if any(arm.too_few for _, arm, _ in family)
        else precision.project(
            [(arm.ratio, arm.rounds) for _, arm, _ in family if arm.ratio], measured
        ),
    )


def _metrics(ok: list[Trial]) -> dict[str, benches.Metric]:
    """Each benchmark's metric; a KitError where one name was measured two ways (two
    user's commands both named 'command', one reading a rate, one a time): every heading
    and verdict reads the metric by the benchmark's name."""
    out: dict[str, benches.Metric] = {}
    for t in ok:
        m = out.setdefault(t.bench, benches.metric(t.bench, t.result))
        if (other := benches.metric(t.bench, t.result)) != m:
            said = [f"{x.unit} ({'higher' if x.higher_is_better else 'lower'} is better)"
                    for x in (m, other)]  # fmt: skip
            raise KitError(
                f"'{printable(t.bench)}' is measured as {printable(said[0])} in some trials and "
                f"as {printable(said[1])} in others (campaign {printable(t.campaign)}): report "
                "them apart, or give each its own --name"
            )
    return out


def _verified(records: list[Trial]) -> list[str]:
    """Each image the containers ran, by digest, and whether kit verify rebuilt it to that
    digest on the machine that ran it (its trials' records say), as the report names it."""
    said: dict[tuple[str, str], str] = {}
    for t in records:
        native = (t.runtime_kind or t.runtime.split("@")[0]) == "native"  # its environment's
        if native or not t.image_digest or (t.image, t.image_digest) in said:
            continue
        v = t.image_verified
        where = f"{t.image} ({_provenance(t)}) {t.image_digest[:19]}"
        if not isinstance(v, dict):
            line = f"{where}: not verified where it ran (kit verify {t.image})"
        else:
            verdict = "reproduced" if v.get("reproduced") else "NOT reproduced"
            lock = f"lock {str(v['lock'])[:12]}" if v.get("lock") else "no lock"
            how = f"at {v.get('at')} against {v.get('against')}, {lock}"
            line = f"{where}: {verdict} by kit verify {how}"
        said[(t.image, t.image_digest)] = line
    return list(said.values())


def _runtimes(records: list[Trial]) -> dict[str, dict]:
    """Each runtime's version, settings and extra arguments, as its first record has them."""
    out: dict[str, dict] = {}
    for t in records:
        out.setdefault(
            t.runtime,
            {
                "version": t.runtime_version,
                "settings": list(t.runtime_settings),
                "args": list(t.runtime_args),
            },
        )
    return out
