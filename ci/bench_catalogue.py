#!/usr/bin/env python3
"""How long the catalogue's commands take at the sizes issue 57 names (a benchmark, not a
timed test): `kit results ls`, `kit compare` of two halves of the catalogue (selections
until and since a day) and `kit history` over 10,000 generated campaigns of 5 trials each
(50,000 trials: native and four runtimes, one round), and `kit compare` of two 50-round
campaigns; each run as the user runs it (a new process: Python's start and kit's imports
included), best and median of --repeats. kit results add (which computes what kit
history reads) is timed once.

    ci/bench_catalogue.py [--campaigns 10000] [--rounds 50] [--repeats 5]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "runner"), str(REPO)]

from kit.across import history  # noqa: E402
from kit.results import catalogue  # noqa: E402
from tests.unit.records import campaign_folder  # noqa: E402

ARMS = {"native": 1.0, "docker": 0.97, "singularity": 0.99, "podman": 0.98, "charliecloud": 0.96}


def timed(args: list[str], repeats: int) -> tuple[float, float]:
    """Best and median wall seconds of `kit ARGS` in a new process."""
    env = {"PYTHONPATH": f"{REPO / 'runner'}", "PATH": "/usr/bin:/bin"}
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "kit.cli", *args], env=env, check=True,
                       capture_output=True)  # fmt: skip
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--campaigns", type=int, default=10_000, help="campaigns in the catalogue")
    p.add_argument("--rounds", type=int, default=50, help="rounds of each compared campaign")
    p.add_argument("--repeats", type=int, default=5, help="runs of each command")
    a = p.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (figures under load are slower)")
    with tempfile.TemporaryDirectory() as tmp:
        root, db = Path(tmp), Path(tmp) / "results.db"
        t = time.perf_counter()
        folders = [
            campaign_folder(root / f"c{i}", f"{i:08x}", 1, ARMS, seed=i, host=f"node{i % 8}",
                            started=f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T10:00:00+00:00")
            for i in range(a.campaigns)
        ]  # fmt: skip
        made = time.perf_counter() - t
        t = time.perf_counter()
        catalogue.add(db, folders)
        added = time.perf_counter() - t
        t = time.perf_counter()
        history.warm(db)  # what kit results add does after adding
        warmed = time.perf_counter() - t
        size = db.stat().st_size / 1e6
        print(f"{a.campaigns} campaigns of 1 round x {len(ARMS)} arms: folders made in "
              f"{made:.1f} s, added in {added:.1f} s, their overheads for kit history "
              f"computed in {warmed:.1f} s; catalogue {size:.1f} MB")  # fmt: skip
        for what, args in (
            ("kit results ls", ["results", "ls", "--catalogue", str(db)]),
            ("kit results ls --host node3", ["results", "ls", "--host", "node3",
                                             "--catalogue", str(db)]),
            ("kit compare until=2026-06-30 since=2026-07-01",
             ["compare", "until=2026-06-30", "since=2026-07-01", "--catalogue", str(db)]),
            ("kit history pytorch-mpich --runtime docker",
             ["history", "pytorch-mpich", "--runtime", "docker", "--catalogue", str(db)]),
        ):  # fmt: skip
            best, median = timed(args, a.repeats)
            print(f"{what}: best {best:.3f} s, median {median:.3f} s")
        big = [campaign_folder(root / f"big{i}", f"b{i}", a.rounds, ARMS, seed=10_000 + i)
               for i in range(2)]  # fmt: skip
        catalogue.add(db, big)
        for what, args in (
            (f"kit compare (two {a.rounds}-round folders)", ["compare", *map(str, big)]),
            (f"kit compare (two {a.rounds}-round selections)",
             ["compare", "campaign=b0", "campaign=b1", "--catalogue", str(db)]),
        ):  # fmt: skip
            best, median = timed(args, a.repeats)
            print(f"{what}: best {best:.3f} s, median {median:.3f} s")
        best, median = timed(["--version"], a.repeats)
        print(f"(kit --version, Python's start and kit's imports alone: best {best:.3f} s)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
