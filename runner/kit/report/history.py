"""The figure of `kit history`: one runtime's ratio to native, campaign by campaign, with
a dashed line where the runtime's version, the kernel, the image or the host changed."""

from kit.across import compare, history
from kit.report import plots, writers
from kit.report.model import Document, Section, Table


def figure(pts: list[history.Point], title: str) -> str:
    """The ratios with their intervals, campaign by campaign, as SVG; a dashed line and its
    label where something watched changed."""

    def draw(ax: object) -> None:
        for arm_key in dict.fromkeys((p.arm, p.key) for p in pts):
            mine = [(i, p) for i, p in enumerate(pts) if (p.arm, p.key) == arm_key and p.ratio]
            xs = [i for i, _ in mine]
            ys = [p.ratio.value for _, p in mine]
            err = [[p.ratio.value - p.ratio.low for _, p in mine],
                   [p.ratio.high - p.ratio.value for _, p in mine]]  # fmt: skip
            label = f"{arm_key[0]}, {arm_key[1].model} bs {arm_key[1].batch_size}"
            ax.errorbar(xs, ys, yerr=err, fmt="o-", capsize=3, label=label)
        for i, p in enumerate(pts):
            if p.changed:
                ax.axvline(i - 0.5, linestyle="--", color="grey", alpha=0.6)
                said = ", ".join(c.split(" ")[0] for c in p.changed)
                where = ax.get_xaxis_transform()  # x in data, y in the axes' height
                ax.annotate(said, (i - 0.45, 0.03), xycoords=where, fontsize=7, rotation=90)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(pts)), [p.started[:10] for p in pts], rotation=45, fontsize=7)

    return plots.svg("history", title, "campaign (first trial's start)", "ratio to native", draw)


def page(pts: list[history.Point], title: str) -> str:
    """The history as a self-contained HTML page, through the report's own document model
    and writer: a table a configuration, then the figure."""
    sections = [
        Section(compare.describe(key), [Table(list(history.HEAD), [list(r) for r in rows])])
        for key, rows in history.table(pts).items()
    ]
    drawn = plots.Figure("history", title, figure(pts, title))
    sections.append(Section("Figure", [drawn]))
    return writers.RENDERERS["html"](Document(title, [], sections, Table([], []), {}))
