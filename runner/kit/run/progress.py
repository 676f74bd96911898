"""The line each finished trial prints: a bar and ETA for a fixed design, else the round,
the trial's figure on its benchmark's metric, and how long it took."""

from kit.core import benches, units
from kit.core.log import logger
from kit.results.record import Trial

log = logger(__name__)


def figure(t: Trial) -> str:
    r = t.result
    if t.status != "ok" or not r:
        return t.status.upper()
    if benches.is_sweep(t.bench):  # its first declared series' first point
        series = next(s for s in benches.get(t.bench).series if r.get(s.field))
        row, value = r[series.field][0], series.values[0]
        at = " ".join(f"{k}={row[k]}" for k in series.at)
        return f"{series.field} {value.label} {row[value.key]:.1f} {value.unit} at {at}"
    m = benches.metric(t.bench, r)
    return f"{r[m.key]:.1f} {m.unit}"


def say(
    done: int, total: int | None, t: Trial, elapsed: float, r: int, left: float | None = None
) -> None:
    """A finished trial's line: a fixed design's bar and ETA; else its round, its time so
    far and, for a precision campaign once it can tell (left, plan.seconds_left), the
    end's estimate."""
    tag = " (warm-up)" if t.warmup else ""
    what = (
        t.bench
        if benches.is_sweep(t.bench) or t.model == "-"  # a sweep, a command
        else f"{t.model} bs={t.batch_size} {t.data}"
    )
    if total:
        eta = elapsed / done * (total - done)
        filled = round(20 * done / total)
        head = f"[{'#' * filled}{'.' * (20 - filled)}] {done}/{total}"
        tail = f"; ETA {eta // 60:.0f} min {eta % 60:02.0f} s"
    else:
        head, tail = f"round {r} trial {done}", f"; {elapsed // 60:.0f} min {elapsed % 60:02.0f} s"
        if left is not None:
            tail += f", about {units.minutes(left)} left at the spread so far"
    log.info(
        f"{head} {t.runtime:<12} np={t.ranks} {what}: {figure(t)}{tag} in {t.wall_s:.1f} s{tail}"
    )
