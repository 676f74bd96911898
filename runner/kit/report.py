"""`kit report`: the overhead table from a results directory (Markdown)."""

from collections import defaultdict
from pathlib import Path

from . import results, stats
from .errors import KitError

MIN_N = 6  # fewest trials for a 95% order-statistic interval of a median
REFERENCE = "native"


def _fmt(iv: stats.Interval, digits: int) -> str:
    mark = "" if iv.coverage >= 0.95 else "†"
    return f"{iv.value:.{digits}f} [{iv.low:.{digits}f}, {iv.high:.{digits}f}]{mark}"


def markdown(out_dir: Path) -> str:
    records = results.load(out_dir)
    if not records:
        raise KitError(
            f"no trial records in {out_dir / results.FILE}; run 'kit run ... --out {out_dir}' first"
        )
    measured = [r for r in records if not r["warmup"]]
    ok = [r for r in measured if r["status"] == "ok"]
    lines = [
        f"# kit report: {out_dir}",
        "",
        f"{len(records)} trials: {len(ok)} ok, {len(measured) - len(ok)} not ok, "
        f"{len(records) - len(measured)} warm-up (discarded). "
        f"Host: {records[0]['host']['cpu_model']}, {records[0]['host']['cores']} cores, "
        f"kernel {records[0]['host']['kernel']}.",
        "",
    ]
    groups: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in ok:
        key = (r["image"], r["bench"], r["model"], r["batch_size"], r["ranks"])
        groups[key][r["runtime"]].append(r)
    for (image, bench, model, bs, ranks), by_rt in sorted(groups.items()):
        lines += [
            f"## {image} · {bench} · {model} · batch {bs} · {ranks} rank(s)",
            "",
            "| runtime | n | images/s median [95% CI] | vs native [95% CI] | verdict "
            "| start-up s median [95% CI] | framework | MPI library |",
            "|---|---|---|---|---|---|---|---|",
        ]
        ref = [r["result"]["images_per_sec"] for r in by_rt.get(REFERENCE, [])]
        versions = {
            (r["result"]["framework_version"], r["result"]["mpi_library"])
            for rs in by_rt.values()
            for r in rs
        }
        for rt in sorted(by_rt, key=lambda n: (n != REFERENCE, n)):
            rs = by_rt[rt]
            rate = [r["result"]["images_per_sec"] for r in rs]
            start = [r["result"]["startup_s"] for r in rs]
            if rt == REFERENCE:
                ratio, verdict = "1 (reference)", ""
            elif ref:
                iv = stats.ratio_ci(rate, ref)
                ratio = f"{iv.value:.3f} [{iv.low:.3f}, {iv.high:.3f}]"
                verdict = (
                    stats.verdict(iv)
                    if min(len(rate), len(ref)) >= MIN_N
                    else f"too few trials (need {MIN_N})"
                )
            else:
                ratio, verdict = "no native trials", ""
            fw, mpi = rs[-1]["result"]["framework_version"], rs[-1]["result"]["mpi_library"]
            lines.append(
                f"| {rt} | {len(rs)} | {_fmt(stats.median_ci(rate), 1)} | {ratio} | "
                f"{verdict} | {_fmt(stats.median_ci(start), 2)} | {fw} | {mpi} |"
            )
        if len(versions) > 1:
            lines += [
                "",
                "**Software differs between runtimes in this group; the ratios "
                "compare different software:** "
                + "; ".join(f"{fw} / {mpi}" for fw, mpi in sorted(versions)),
            ]
        lines.append("")
    failed = [r for r in measured if r["status"] != "ok"]
    if failed:
        lines += ["## Trials that did not finish", ""]
        lines += [
            f"- #{r['index']} {r['runtime']} np={r['ranks']} {r['model']} "
            f"bs={r['batch_size']}: {r['status']} (exit {r['exit_code']})"
            for r in failed
        ]
        lines.append("")
    lines += ["## Runtimes", ""]
    seen: dict[str, dict] = {}
    for r in records:
        seen.setdefault(r["runtime"], r)
    for rt, r in seen.items():
        settings = "; ".join(r["runtime_settings"]) or "defaults"
        lines.append(f"- **{rt}** ({r['runtime_version']}): {settings}")
    lines += [
        "",
        "Intervals: order statistics for medians; seeded percentile bootstrap for "
        "the ratio of medians. † fewer trials than a 95% interval needs: the range "
        "shown is min to max. Start-up is launch to first finished step, reported apart "
        "from throughput.",
        "",
    ]
    return "\n".join(lines)
