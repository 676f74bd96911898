"""Faults around a campaign, made for real: a results disk that fills up, a rank killed
by a signal in the middle of a trial or by the kernel's OOM killer, Apptainer or its
mount daemon dying, the Docker engine going away mid-campaign, the host's clock jumping."""

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from kit.image import recipes

from .conftest import kit, records

pytestmark = pytest.mark.integration

FULL = Path("/srv/kit-test-full")  # a 2 MB file system of its own (ci/test mounts it)
SMALL = ("--bench", "torch-cnn", "--model", "tiny", "--warmup-trials", "0", "--steps", "2")
SMALL += ("--warmup-steps", "1", "--baseline-launches", "1")


@pytest.fixture
def full_disk() -> Iterator[Path]:
    """FULL, held by this test alone: another test run on the machine (ci/test mounts one
    FULL for all) would fill, measure or clear it meanwhile. Waits for the other's test."""
    if not os.path.ismount(FULL):
        pytest.fail(f"{FULL} must be a small file system of its own (ci/test mounts it)")
    with open(FULL / ".kit-test.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield FULL


def test_a_full_results_disk_stops_the_campaign_and_resume_goes_on(built, full_disk):
    """The results disk fills up mid-campaign: kit stops at once with one line, every
    record in the file is whole, none already written is lost; once there is room again
    --resume runs exactly the trials that are missing."""
    out, filler = FULL / "run", FULL / "filler"
    shutil.rmtree(out, ignore_errors=True)
    filler.unlink(missing_ok=True)
    room = os.statvfs(FULL)
    # room for two records at the most a record takes (16 KiB, launch fingerprint and all),
    # and for fewer than the ten a record of this campaign (about 6-8 KB) needs
    filler.write_bytes(bytes(room.f_bavail * room.f_frsize - 40 * 1024))
    args = ("run", "pytorch-mpich", *SMALL, "--runtime", "native", "--np", "1", "--repeats", "10")
    args = (*args, "--out", str(out))
    try:
        full = kit(*args, check=False)
        assert full.returncode == 2, full.stderr[-2000:]
        assert full.stderr.splitlines()[-1] == (
            f"kit: error: cannot write a record to '{out / 'trials.jsonl'}': No space left on "
            f"device; the records before it are kept: make room, then continue with kit run "
            f"... --out {out} --resume"
        )
        kept = records(out)  # every line parses: nothing torn
        assert 1 <= len(kept) < 10 and all(r["status"] == "ok" for r in kept)
    finally:
        filler.unlink()
    kit(*args, "--resume")
    after = records(out)
    assert after[: len(kept)] == kept
    assert sorted(r["index"] for r in after) == list(range(10))
    shutil.rmtree(out)


def test_a_cache_disk_too_small_for_a_conversion_is_refused_before_it_starts(built, full_disk):
    """The cache's disk cannot take the image's squashfs: one line naming the need, the
    room and the fix, before any export, and nothing left in the cache."""
    cache = FULL / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "KIT_CACHE": str(cache)}
    p = kit("convert", "pytorch-mpich", "--to", "singularity", env=env, check=False)
    folder = next((cache / "images" / "pytorch-mpich").iterdir())
    line = p.stderr.splitlines()[-1]
    assert p.returncode == 2 and line.startswith(
        f"kit: error: the squashfs of {recipes.load('pytorch-mpich').tag()} needs about 0."
    ), p.stderr[-2000:]
    assert line.endswith(
        f"GB and {folder} has 0.00 GB free; make room there, or set KIT_CACHE to a larger disk"
    )
    # nothing but the folder's own marks (its lock, its in-use and last-used stamps)
    assert sorted(f.name for f in folder.iterdir()) == [".in-use", ".last-used", ".lock"]
    shutil.rmtree(cache)


def marked(pid: int | str, marker_prefix: str) -> bool:
    """The process's environment, or its parent's, holds KIT_TRIAL=marker_prefix...
    (Apptainer's starter carries the trial's environment inside its engine configuration,
    and gives its mount daemon an environment of its own)."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
        parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
        env += Path(f"/proc/{parent}/environ").read_bytes()
    except (OSError, IndexError):
        return False
    return f"KIT_TRIAL={marker_prefix}".encode() in env


def ours(marker_prefix: str, *needles: bytes) -> int | None:
    """The pid of a process of a running trial whose environment or command line holds
    every needle, if there is one."""
    for entry in Path("/proc").iterdir():
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            cmd = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if all(n in env or n in cmd for n in needles) and marked(entry.name, marker_prefix):
            return int(entry.name)
    return None


def rank_one(marker_prefix: str) -> int | None:
    return ours(marker_prefix, b"PMI_RANK=1", b"torch_cnn.py")


def trials_of(out: Path) -> str | None:
    """The marker prefix of the campaign writing to out (kit-CAMPAIGN-), once its
    campaign.json is there: only its trials, not another test run's, are to be killed."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return f"kit-{json.loads((out / 'campaign.json').read_text())['campaign']}-"
    return None


def caught(args: tuple[str, ...], out: Path, find) -> tuple[subprocess.Popen, int]:
    """Start `kit` with args (writing to out); the pid `find(prefix)` names once one of its
    trials is running, prefix being the campaign's marker prefix."""
    run = subprocess.Popen(["kit", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline, victim = time.monotonic() + 300, None
    while victim is None and time.monotonic() < deadline and run.poll() is None:
        victim = find(prefix) if (prefix := trials_of(out)) else None
        time.sleep(0.2)
    assert victim is not None, "the process to kill was never seen running"
    time.sleep(2)  # in the trial's timed steps
    return run, victim


def test_a_rank_killed_mid_trial_is_filed_with_its_signal_and_the_campaign_goes_on(built, tmp_path):
    """kill -9 (what the OOM killer sends) of rank 1 during the first trial: that trial
    is filed failed with the signal named, the next trials run, nothing is left running."""
    out = tmp_path / "run"
    args = ("run", "pytorch-mpich", *SMALL, "--runtime", "native", "--np", "2", "--repeats", "3")
    args = (*args, "--out", str(out))
    args = (*args, "--bench-arg=--min-time=8")  # long enough to be caught in the act
    campaign, victim = caught(args, out, rank_one)
    os.kill(victim, signal.SIGKILL)
    _, err = campaign.communicate(timeout=900)
    assert campaign.returncode == 0, err.decode()[-3000:]
    recs = records(out)
    failed = [r for r in recs if r["status"] != "ok"]
    said = [(r["status"], r["cause"], r["output_tail"][-1500:]) for r in recs]
    assert len(recs) == 3 and len(failed) == 1, said
    assert failed[0]["status"] == "failed" and "SIGKILL" in failed[0]["cause"], failed[0]
    assert rank_one(f"kit-{failed[0]['campaign']}-") is None
    text = kit("report", str(out)).stdout
    assert f"failed (exit {failed[0]['exit_code']}; a rank was killed by SIGKILL" in text


def test_a_rank_the_oom_killer_ends_is_filed_as_out_of_memory(built, tmp_path):
    """A container's memory limit met for real: the kernel's OOM killer ends the rank
    (SIGKILL, nothing the benchmark can catch). Not fitting is a result: the trial is
    filed oom with the cause, the run exits 0 and the report lists the configuration."""
    out = tmp_path / "run"
    args = ("run", "pytorch-mpich", *SMALL, "--runtime", "docker", "--np", "1")
    args = (*args, "--model", "resnet50", "--batch-size", "64", "--repeats", "1")
    limit = ("--runtime-arg", "docker:--memory=700m", "--runtime-arg", "docker:--memory-swap=700m")
    args = (*args, *limit)
    kit(*args, "--out", str(out))
    [r] = records(out)
    assert r["status"] == "oom", r
    assert r["cause"].startswith("a rank was killed by the kernel's OOM killer (SIGKILL; "), r
    assert (
        "| pytorch-mpich | torch-cnn | resnet50 | 64 | 1 | docker | 1 |"
        in kit("report", str(out)).stdout
    )


def test_apptainer_killed_under_a_trial_is_filed_and_leaves_nothing(built, tmp_path):
    """kill -9 of Apptainer's own process (the runtime parent that holds the container)
    under a running trial: the trial is filed failed with the signal, the next trial
    runs, and no process or mount of the campaign is left."""
    out = tmp_path / "run"
    args = ("run", "pytorch-mpich", *SMALL, "--np", "1", "--repeats", "2", "--out", str(out))
    args = (*args, "--runtime", "singularity", "--bench-arg=--min-time=8")
    campaign, victim = caught(args, out, lambda m: ours(m, b"Apptainer runtime parent"))
    os.kill(victim, signal.SIGKILL)
    _, err = campaign.communicate(timeout=900)
    recs = records(out)
    assert [r["status"] for r in recs] == ["failed", "ok"], err.decode()[-3000:]
    assert "SIGKILL" in recs[0]["cause"], recs[0]
    assert ours(f"kit-{recs[0]['campaign']}-") is None  # no process of any of its trials
    mounts = Path("/proc/self/mounts").read_text()
    assert str(out) not in mounts and "squashfuse" not in mounts


class EngineRelay:
    """The Docker engine's socket relayed through one of ours (DOCKER_HOST): closing the
    relay is, for every docker client kit starts, the engine dying; a new relay on the
    same path is the engine back."""

    def __init__(self, path: Path) -> None:
        self.path, self.open = path, True
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        self.server.settimeout(0.2)
        self.links: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self.open:
            try:
                client, _ = self.server.accept()
            except (TimeoutError, OSError):
                continue
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect("/var/run/docker.sock")
            self.links += [client, engine]
            for a, b in ((client, engine), (engine, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        self.open = False
        self.server.close()
        self.path.unlink()
        for s in self.links:
            s.close()


def test_a_mount_daemon_killed_under_a_trial_leaves_nothing_mounted(built, tmp_path):
    """Apptainer's squashfuse_ll dies under a running trial: the trial is filed (whatever
    the rank made of losing its files), the campaign goes on, and no mount and no mount
    daemon of the campaign is left."""
    out = tmp_path / "run"
    args = ("run", "pytorch-mpich", *SMALL, "--np", "1", "--repeats", "2", "--out", str(out))
    args = (*args, "--runtime", "singularity", "--bench-arg=--min-time=8")
    campaign, victim = caught(args, out, lambda m: ours(m, b"squashfuse_ll"))
    os.kill(victim, signal.SIGKILL)
    _, err = campaign.communicate(timeout=900)
    recs = records(out)
    assert len(recs) == 2 and recs[1]["status"] == "ok", err.decode()[-3000:]
    assert ours(f"kit-{recs[0]['campaign']}-", b"squashfuse") is None
    mounts = Path("/proc/self/mounts").read_text()
    assert str(out) not in mounts and "squashfuse" not in mounts


def test_an_engine_that_stops_mid_campaign_loses_only_its_trials(built, tmp_path):
    """The engine goes away once the campaign has started: each Docker trial is filed
    lost, saying so, native trials go on, the run exits 1 naming the arm; with the
    engine back, --resume runs the lost trials and nothing else."""
    sock = tmp_path / "engine.sock"
    relay = EngineRelay(sock)
    env = {**os.environ, "DOCKER_HOST": f"unix://{sock}"}
    out = tmp_path / "run"
    args = ("run", "pytorch-mpich", *SMALL, "--runtime", "native,docker", "--np", "1")
    args = (*args, "--repeats", "3", "--out", str(out))
    run = subprocess.Popen(
        ["kit", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen = []
    for line in run.stderr:  # checked and prepared every runtime: the loop starts
        seen.append(line)
        if " trials to run " in line:
            relay.close()
            break
    _, rest = run.communicate(timeout=900)
    err = "".join(seen) + rest
    assert run.returncode == 1, err[-3000:]
    assert err.splitlines()[-1].startswith("kit: error: no trial of docker (3 lost) succeeded")
    recs = records(out)
    assert sorted((r["runtime"], r["status"]) for r in recs) == [
        *[("docker", "lost")] * 3, *[("native", "ok")] * 3,
    ]  # fmt: skip
    assert {r["cause"] for r in recs if r["status"] == "lost"} == {
        "the Docker engine stopped answering"
    }
    relay = EngineRelay(sock)
    try:
        kit(*args, "--resume", env=env)
    finally:
        relay.close()
    again = records(out)[len(recs) :]
    assert sorted((r["runtime"], r["status"]) for r in again) == [("docker", "ok")] * 3
    assert {r["index"] for r in again} == {r["index"] for r in recs if r["status"] == "lost"}


def test_a_data_folder_that_can_neither_be_read_nor_written_is_refused_before_any_trial(
    tmp_path,
):
    """/etc holds no data set and (as an ordinary user) none can be made there: refused by
    the dry run as by the run, not once per trial (ci/test runs this suite as one)."""
    assert os.geteuid() != 0, "ci/test runs the integration suite as an ordinary user"
    never = tmp_path / "never-made"  # this run's own: not a path another run may make
    for plan in (("--dry-run",), ("--out", str(never))):
        p = kit("run", "pytorch-mpich", "--runtime", "native", "--data", "real",
                "--data-dir", "/etc", *plan, check=False)  # fmt: skip
        assert (p.returncode, p.stderr) == (
            2,
            "kit: error: --data-dir '/etc' holds no data set kit made (jpeg-SIDEpx-N/"
            "kit-dataset.json) and is not writable, so none can be made there; give a "
            "writable folder, or one holding a data set\n",
        )
    assert not never.exists()


def test_a_clock_jump_mid_campaign_changes_labels_not_durations(built, tmp_path):
    """kit's wall clock jumps 3 h forward after the first trial (libfaketime, monotonic
    clocks left alone): trial durations and the budget come from monotonic clocks, so
    the campaign still runs its 40 s, and only the start labels show the jump."""
    import libfaketime

    clock = tmp_path / "clock"
    clock.write_text("+0\n")
    _, faked = libfaketime.get_reload_information()
    env = {**os.environ, **faked, "FAKETIME_TIMESTAMP_FILE": str(clock)}
    assert faked["DONT_FAKE_MONOTONIC"] == "1"
    out = tmp_path / "run"
    args = ("run", "pytorch-mpich", *SMALL, "--runtime", "native", "--np", "1")
    args = (*args, "--repeats", "2", "--precision", "1%", "--budget", "40s", "--out", str(out))
    t0 = time.monotonic()
    run = subprocess.Popen(["kit", *args], env=env, stderr=subprocess.PIPE, text=True)
    while not (out / "trials.jsonl").is_file() or not (out / "trials.jsonl").stat().st_size:
        assert run.poll() is None, run.stderr.read()[-3000:]
        time.sleep(0.2)
    clock.write_text("+3h\n")
    _, err = run.communicate(timeout=600)
    assert run.returncode == 0, err[-3000:]
    recs = records(out)
    # a campaign stops before a round that would overrun its budget, so the one it ran took
    # more than half of it (spent + spent / rounds > 40 s): a budget on the jumped clock
    # would have ended after the first trial (load only makes the campaign longer)
    assert "budget 0.67 min spent after" in err and time.monotonic() - t0 > 20 - 1, err[-2000:]
    assert all(r["wall_s"] < 3600 for r in recs)  # not the 3 h jump
    first, last = (datetime.fromisoformat(r["started"]) for r in (recs[0], recs[-1]))
    assert (last - first).total_seconds() > 3 * 3600 - 60  # the labels jumped
