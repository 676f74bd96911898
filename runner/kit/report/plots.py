"""The report's figures (matplotlib, rendered to inline SVG so the HTML is one file)."""

import io
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kit.analysis.findings import REFERENCE, Analysis, Arm, Group, SweepSeries
from kit.core import benches

Plot = Callable[[object], None]  # draws on a matplotlib Axes


@dataclass(frozen=True)
class Figure:
    slug: str  # unique within a report; the HTML element id
    caption: str
    svg: str


def svg(slug: str, title: str, xlabel: str, ylabel: str, draw: Plot) -> str:
    """One figure as SVG text, draw filling its axes: every figure of the report (and the
    history's) is made here, so all look alike and all are reproducible."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    # Text as paths (no fonts needed to view it); ids salted per figure, so several
    # figures inline in one page never share an id, and output is reproducible.
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": slug}):
        fig, ax = plt.subplots(figsize=(6, 3.6))
        try:
            draw(ax)
            ax.set_title(title, fontsize=10)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
            fig.tight_layout()
            buf = io.StringIO()
            fig.savefig(buf, format="svg", metadata={"Date": None})
        finally:
            plt.close(fig)
    return re.sub(r"^.*?(<svg)", r"\1", buf.getvalue(), count=1, flags=re.S)


def _errorbar(ax, xs: list, arms: list[Arm], value: Callable[[Arm], tuple], label: str) -> None:
    ys = [value(a) for a in arms]
    ax.errorbar(
        xs,
        [y[0] for y in ys],
        yerr=[[y[0] - y[1] for y in ys], [y[2] - y[0] for y in ys]],
        marker="o",
        capsize=3,
        label=label,
    )


def _by(groups: list[Group], fields: tuple[str, ...]) -> dict[tuple, list[Group]]:
    out: dict[tuple, list[Group]] = defaultdict(list)
    for g in groups:
        out[tuple(getattr(g.key, f) for f in fields)].append(g)
    return out


def _series(groups: list[Group], x: str) -> dict[str, tuple[list, list[Arm]]]:
    """Per runtime: the x values (a key field) and its arm at each."""
    out: dict[str, tuple[list, list[Arm]]] = defaultdict(lambda: ([], []))
    for g in sorted(groups, key=lambda g: getattr(g.key, x)):
        for arm in g.arms:
            out[arm.runtime][0].append(getattr(g.key, x))
            out[arm.runtime][1].append(arm)
    return out


def _rate(a: Arm) -> tuple:
    return a.rate.value, a.rate.low, a.rate.high


def _per_batch(a: Analysis) -> Iterator[Figure]:
    for (image, bench, model, ranks, data), gs in _by(
        a.groups, ("image", "bench", "model", "ranks", "data")
    ).items():
        if len(gs) < 2:  # one batch size: nothing to plot against it
            continue
        series = _series(gs, "batch_size")
        name = f"{image} {bench} {model} {data}, {ranks} rank(s)"

        def rate(ax, series=series) -> None:
            for rt, (xs, arms) in series.items():
                _errorbar(ax, xs, arms, _rate, rt)

        def memory(ax, series=series) -> None:
            for rt, (xs, arms) in series.items():
                ax.plot(xs, [x.peak_rss_mb for x in arms], marker="o", label=rt)

        slug = f"{image}-{bench}-{model}-{data}-np{ranks}"
        yield Figure(
            f"rate-{slug}",
            f"Throughput vs batch size: {name}",
            svg(f"rate-{slug}", name, "batch size per rank", a.metric(bench).unit, rate),
        )
        yield Figure(
            f"mem-{slug}",
            f"Peak memory vs batch size: {name}",
            svg(f"mem-{slug}", name, "batch size per rank", "peak RSS per rank (MB)", memory),
        )


def _scaling(a: Analysis) -> Iterator[Figure]:
    for (image, bench, model, bs, data), gs in _by(
        a.groups, ("image", "bench", "model", "batch_size", "data")
    ).items():
        if len(gs) < 2:
            continue
        series = _series(gs, "ranks")
        ideal_rt = REFERENCE if REFERENCE in series else next(iter(series))

        def draw(ax, series=series, ideal_rt=ideal_rt) -> None:
            for rt, (xs, arms) in series.items():
                _errorbar(ax, xs, arms, _rate, rt)
            xs, arms = series[ideal_rt]
            if xs[0] == 1:
                ax.plot(
                    xs,
                    [arms[0].rate.value * x for x in xs],
                    "k--",
                    label=f"ideal (from {ideal_rt}, 1 rank)",
                )
            ax.set_xticks(xs)

        slug = f"scaling-{image}-{bench}-{model}-{data}-bs{bs}"
        name = f"{image} {bench} {model} {data}, batch {bs} per rank"
        unit = a.metric(bench).unit
        yield Figure(slug, f"Scaling vs ranks: {name}", svg(slug, name, "ranks", unit, draw))


def _overhead(a: Analysis) -> Iterator[Figure]:
    for (image, bench, model), gs in _by(a.groups, ("image", "bench", "model")).items():
        points = [
            (f"{arm.runtime} bs={g.key.batch_size} np={g.key.ranks} {g.key.data}", arm.ratio)
            for g in gs
            for arm in g.arms
            if arm.ratio is not None
        ]
        if not points:
            continue

        def draw(ax, points=points) -> None:
            ys = list(range(len(points)))
            ax.errorbar(
                [r.value for _, r in points],
                ys,
                xerr=[[r.value - r.low for _, r in points], [r.high - r.value for _, r in points]],
                fmt="o",
                capsize=3,
            )
            ax.axvline(1.0, color="k", linestyle="--", linewidth=1)
            ax.set_yticks(ys, [label for label, _ in points], fontsize=7)

        slug = f"overhead-{image}-{bench}-{model}"
        name = f"{image} {bench} {model}"
        yield Figure(
            slug,
            f"Throughput relative to {a.baseline}, {a.confidence:.0%} intervals: {name}",
            svg(slug, name, f"{a.metric(bench).unit} relative to {a.baseline}", "", draw),
        )


STYLES = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-"), ("x", "--")]


def _loss(a: Analysis) -> Iterator[Figure]:
    """Median loss per timed step, each point over every trial of the arm (only the steps
    every trial reached). Runtimes that ran the same seeded training draw the same
    curve: each has its own marker and dash, and lines drawn first are wider, so a line
    covered by a later one still shows around it."""
    for g in a.groups:
        drawn = [arm for arm in g.arms if arm.loss]
        if not drawn:
            continue
        k = g.key
        reached = min(len(arm.loss) for arm in drawn)  # by every trial of every arm

        def draw(ax, drawn=drawn, reached=reached) -> None:
            for i, arm in enumerate(drawn):
                marker, dash = STYLES[i % len(STYLES)]
                width = 1.0 + 2.5 * (len(drawn) - 1 - i) / max(len(drawn) - 1, 1)
                steps = range(1, reached + 1)
                ax.plot(
                    steps,
                    arm.loss[:reached],
                    dash,
                    marker=marker,
                    linewidth=width,
                    markersize=3 + width,
                    markerfacecolor="none",
                    label=arm.runtime,
                )

        slug = f"loss-{k.image}-{k.bench}-{k.model}-{k.data}-bs{k.batch_size}-np{k.ranks}"
        name = f"{k.image} {k.bench} {k.model}, batch {k.batch_size}, {k.ranks} rank(s)"
        held = ", ".join(f"{arm.runtime} {arm.n}" for arm in drawn)
        yield Figure(
            slug,
            f"Loss per timed step, median over trials; every point holds all of an arm's "
            f"trials ({held}): only the {reached} steps every trial reached are drawn: {name}",
            svg(slug, name, "timed step", "loss", draw),
        )


def _sweeps(a: Analysis) -> Iterator[Figure]:
    """A figure per declared value of each sweep series (log scales): one line per runtime
    where a point is its x alone; else a figure per runtime, a line per the point's other
    fields (gRPC's payload shape and mode)."""
    by: dict[tuple, list[SweepSeries]] = defaultdict(list)
    for s in a.sweeps:
        by[(s.bench, s.series, s.image, s.ranks, s.launcher)].append(s)
    for (bench, field, image, ranks, launcher), arms in by.items():
        spec = benches.get(bench)
        series = next(x for x in spec.series if x.field == field)
        alone = len(series.at) == 1  # a line per runtime, all in one figure
        panels = [arms] if alone else [[s] for s in arms]
        for value in series.values:
            for drawn in panels:

                def draw(ax, drawn=drawn, key=value.key, alone=alone) -> None:
                    for s in drawn:
                        lines: dict[tuple, list] = defaultdict(list)
                        for p in s.points:
                            lines[p.at[:-1]].append((p.at[-1], p.values[key]))
                        for group, pts in lines.items():
                            ax.errorbar(
                                [x for x, _ in pts],
                                [iv.value for _, iv in pts],
                                yerr=[
                                    [iv.value - iv.low for _, iv in pts],
                                    [iv.high - iv.value for _, iv in pts],
                                ],
                                marker="o",
                                capsize=3,
                                label=s.runtime if alone else ", ".join(map(str, group)),
                            )
                    ax.set_xscale("log", base=2)
                    ax.set_yscale("log")

                who = "" if alone else f"-{drawn[0].runtime}"
                via = "" if launcher == "local" else f"-{launcher}"
                slug = f"{bench}-{field}-{value.key}-{image}-np{ranks}{who}{via}"
                name = f"{image} {spec.title}, {ranks} rank(s)" + (
                    f", {drawn[0].runtime}" if who else ""
                )
                name += f" via {launcher}" if via else ""
                ylabel = f"{value.label} ({value.unit})"
                yield Figure(
                    slug,
                    f"{series.title}: {ylabel} vs {series.at[-1]}: {name}",
                    svg(slug, name, series.at[-1], ylabel, draw),
                )


def figures(a: Analysis) -> list[Figure]:
    return [*_per_batch(a), *_scaling(a), *_overhead(a), *_loss(a), *_sweeps(a)]
