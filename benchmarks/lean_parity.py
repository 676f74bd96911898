#!/usr/bin/env python3
"""Entry point vs the leanest loop of its framework, in the same image: a parity check.

Runs on the host (it needs kit and a Docker engine): for each round, in a seeded
random order, one launch of the entry point and one of benchmarks/lean.py, each
`docker run` with the settings kit's Docker runtime uses, same model, batch and
steps, one rank; then the median per-round ratio entry / lean with its exact
Wilcoxon signed-rank interval (kit.results.stats.paired_ratio). Within 2 % is parity.

  python3 benchmarks/lean_parity.py kit/horovod-mpich:1.2.0-cpu tf-cnn --model resnet50 \
      --batch-size 8 --steps 6 --rounds 10
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys

from kit.image import engine
from kit.results import stats

ENTRY = {  # entry point -> (its script and fixed options, the lean loop's framework)
    "torch-cnn": (["torch_cnn.py"], "torch"),
    "torch-hvd": (["torch_cnn.py", "--dist", "horovod"], "torch-hvd"),
    "tf-cnn": (["tf_cnn.py"], "tf"),
    "caffe2-cnn": (["caffe2_cnn.py"], "caffe2"),
}
PYTHON, BENCH = "/opt/kit/venv/bin/python", "/opt/kit/benchmarks"


def launch(image: str, argv: list[str]) -> float:
    """One launch in the image; its images/s."""
    docker = [engine.docker(), "run", "--rm", "--user", f"{os.getuid()}:{os.getgid()}"]
    docker += ["--ipc=host", "--network=host", "-e", "HOME=/tmp", image, PYTHON, *argv]
    p = subprocess.run(docker, capture_output=True, text=True, timeout=1800)
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not lines:
        sys.exit(f"lean_parity: {' '.join(argv[:2])} failed: {p.stderr.strip()[-500:]}")
    return float(json.loads(lines[-1])["images_per_sec"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("image")
    p.add_argument("entry", choices=list(ENTRY))
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    script, framework = ENTRY[a.entry]
    shape = ["--model", a.model, "--batch-size", str(a.batch_size), "--steps", str(a.steps)]
    argv = {
        "entry": [f"{BENCH}/{script[0]}", *script[1:], *shape, "--warmup", str(a.warmup)],
        "lean": [f"{BENCH}/lean.py", "--framework", framework, *shape, "--warmup", str(a.warmup)],
    }
    pairs = []
    for r in range(a.rounds):
        order = ["entry", "lean"]
        random.Random(f"{a.seed}:{r}").shuffle(order)
        got = {arm: launch(a.image, argv[arm]) for arm in order}
        pairs.append((got["entry"], got["lean"]))
        print(f"round {r}: entry {got['entry']:.2f}, lean {got['lean']:.2f} images/s", flush=True)
    iv = stats.paired_ratio(pairs)
    print(
        f"{a.entry} {a.model} bs={a.batch_size}: entry {statistics.median(e for e, _ in pairs):.2f}"
        f", lean {statistics.median(x for _, x in pairs):.2f} images/s; entry/lean "
        f"{iv.value:.3f} [{iv.low:.3f}, {iv.high:.3f}] ({iv.coverage:.1%}, {len(pairs)} rounds)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
