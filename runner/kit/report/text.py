"""How a report writes an interval, a relative spread and a configuration: one form,
shared by its sentences and its tables."""

from kit.analysis import stats
from kit.results.record import Key


def interval(iv: stats.Interval | None, digits: int) -> str:
    """'9.2 [9.0, 9.5]', with † where too few trials gave the range instead."""
    if iv is None:
        return "n/a"
    mark = "†" if iv.short else ""
    # a command's own figure can be any size: past 10^5, four significant digits
    form = ".4g" if abs(iv.value) >= 1e5 else f".{digits}f"
    return f"{iv.value:{form}} [{iv.low:{form}}, {iv.high:{form}}]{mark}"


def percent(x: float | None) -> str:
    return "n/a" if x is None else f"±{100 * x:.1f}%"


def title(k: Key) -> str:
    """A configuration as its section's title and the answers name it."""
    shape = "" if k.model == "-" else f" · {k.model} · batch {k.batch_size}"  # "-": a command
    return (
        f"{k.image} · {k.bench}{shape} · {k.ranks} rank(s)"
        + ("" if k.data in ("synthetic", "-") else f" · {k.data} data")
        + ("" if k.launcher == "local" else f" · via {k.launcher}")
        + ("" if k.variant == "cpu" else f" · {k.variant}")
        + (f" · {k.bench_args}" if k.bench_args else "")
        + ("" if not k.steps else f" · {k.steps} steps after {k.warmup_steps}")
        + (f" · {k.metric}" if k.metric else "")
        + (f" · {k.command}" if k.command else "")
    )
