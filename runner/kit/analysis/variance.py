"""Where a group's spread comes from: noise within a trial, launch-to-launch variation
and the host's drift across rounds. The report states them, and holds each paired
interval to the width the median arm's launch spread allows (precision.allowance).
"""

import math
import statistics

from kit.analysis.findings import Variance
from kit.analysis.values import by_round
from kit.results.record import Trial


def decompose(key_arms: dict[str, list[Trial]]) -> Variance:
    """Variance decomposition of a group's log rates over the rounds every arm finished
    (two-way: arm and round, no interaction), and the within-trial part from step times."""
    within = []
    for rs in key_arms.values():
        for t in rs:
            steps = t.result.get("step_times_s") or []
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
