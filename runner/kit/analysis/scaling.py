"""Each arm against its own rate in a neighbouring configuration: at one rank (the
scaling efficiency) and on synthetic data (what reading real data costs it).
"""

import dataclasses

from kit.analysis import stats
from kit.analysis.findings import IoOverhead, Scaling
from kit.analysis.values import rates
from kit.results.record import Key, Trial


def efficiencies(by_key: dict[Key, dict[str, list[Trial]]], conf: float) -> list[Scaling]:
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
                nodes = stats.mode([len(t.result.get("hosts") or [0]) for t in rs])
                out.append(Scaling(key, rt, stats.ratio_ci(rates(rs), ideal, conf), nodes))
    return sorted(out, key=lambda s: (*s.key.order(), s.runtime))


def io_overheads(by_key: dict[Key, dict[str, list[Trial]]], conf: float) -> list[IoOverhead]:
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
