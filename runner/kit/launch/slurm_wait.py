"""Submit one trial's batch script and wait for its job, checking often enough for short jobs.

`sbatch --wait` sleeps 2 s, then 8 s, then up to 32 s between its checks of the job (the
growth depends on the cluster's MinJobAge), which added 5 to 30 s to every trial of a
few seconds. This submits with `sbatch --parsable`, asks `scontrol` for the job's state
every tenth of the time waited so far (at least every POLL_MIN, at most every POLL_MAX
seconds: one light query per job, never a tight loop), and exits with the job's exit
code, as `sbatch --wait` does. kit runs it as the trial's process: a timeout or Ctrl-C
stops it, and kit cancels the job by name.

    python -m kit.launch.slurm_wait SCRIPT
"""

import subprocess
import sys
import time

POLL_MIN, POLL_MAX = 0.5, 5.0
# States after which the job will not run again (Slurm's job_state_string names).
DONE = frozenset(
    [
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    ]
)


def interval(waited: float) -> float:
    """Seconds until the next check: late by at most a tenth of the wait, or POLL_MIN."""
    return min(POLL_MAX, max(POLL_MIN, waited / 10))


def fields(line: str) -> dict[str, str]:
    """`scontrol show job -o` prints one line of Key=Value pairs."""
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


def exit_code(job: dict[str, str]) -> int:
    """The job's exit status the way a shell reports it: 128+N for signal N; a job that
    ended in another state than COMPLETED is never 0."""
    code, _, sig = job.get("ExitCode", "0:0").partition(":")
    status = 128 + int(sig) if sig not in ("", "0") else int(code)
    return status if job.get("JobState") == "COMPLETED" or status else 1


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m kit.launch.slurm_wait SCRIPT", file=sys.stderr)
        return 2
    sub = subprocess.run(["sbatch", "--parsable", argv[0]], capture_output=True, text=True)
    if sub.returncode != 0:
        print(sub.stderr.strip() or f"sbatch exited {sub.returncode}", file=sys.stderr)
        return sub.returncode
    job_id = sub.stdout.strip().split(";")[0]
    print(f"Submitted batch job {job_id}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    while True:
        time.sleep(interval(time.monotonic() - t0))
        ask = ["scontrol", "show", "job", "-o", job_id]
        q = subprocess.run(ask, capture_output=True, text=True)
        if "Invalid job id" in q.stderr:
            # The record is gone (purged after MinJobAge): the job's output decides.
            print(f"job {job_id}: {q.stderr.strip()}", file=sys.stderr)
            return 0
        job = fields(q.stdout)  # empty when slurmctld did not answer: ask again
        if job.get("JobState") in DONE:
            return exit_code(job)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
