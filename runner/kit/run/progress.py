"""The line each finished trial prints: a bar and ETA for a fixed design, else the round,
the trial's figure on its benchmark's metric, and how long it took."""

import sys

from kit.core import benches


def figure(record: dict) -> str:
    r = record["result"]
    if record["status"] != "ok" or not r:
        return record["status"].upper()
    if benches.is_sweep(record["bench"]):
        first = (r.get("allreduce") or r["p2p"])[0]
        what = "allreduce" if r.get("allreduce") else "p2p"
        return f"{what} {first['latency_us']:.1f} us at {first['bytes']} B"
    m = benches.metric(record["bench"])
    return f"{r[m.key]:.1f} {m.unit}"


def say(done: int, total: int | None, record: dict, elapsed: float, r: int) -> None:
    tag = " (warm-up)" if record["warmup"] else ""
    what = (
        record["bench"]
        if benches.is_sweep(record["bench"])
        else (f"{record['model']} bs={record['batch_size']} {record['data']}")
    )
    if total:
        eta = elapsed / done * (total - done)
        filled = round(20 * done / total)
        head = f"[{'#' * filled}{'.' * (20 - filled)}] {done}/{total}"
        tail = f"; ETA {eta // 60:.0f} min {eta % 60:02.0f} s"
    else:
        head, tail = f"round {r} trial {done}", f"; {elapsed // 60:.0f} min {elapsed % 60:02.0f} s"
    print(
        f"{head} {record['runtime']:<12} np={record['ranks']} {what}: {figure(record)}{tag} "
        f"in {record['wall_s']:.1f} s{tail}",
        file=sys.stderr,
        flush=True,
    )
