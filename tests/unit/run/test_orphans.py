"""`kit run --resume` after a kill -9: the killed run's trials (processes carrying its
marker, containers named after them) are ended before the first trial, or the resume is
refused naming them."""

import json
import signal
import subprocess
import sys
import time
import uuid

import pytest

from kit.core.errors import KitError
from kit.run import orphans

IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(600)"
)
# Every process here is killed by the test: none may end on its own first, however slow
# the host makes the test (a sleeper that ended by itself would look ended by kit).
LONG = ["sleep", "600"]


def marked(argv: list[str], campaign: str, marker: str) -> subprocess.Popen:
    """A process carrying KIT_TRIAL=marker, returned once it shows it (from its exec on)."""
    p = subprocess.Popen(argv, env={"KIT_TRIAL": marker}, stdout=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while p.pid not in orphans.processes(campaign) and time.monotonic() < deadline:
        time.sleep(0.02)
    return p


@pytest.fixture
def cid() -> str:
    """A campaign id of this test's own: other test runs on the host use theirs."""
    return uuid.uuid4().hex[:8]


@pytest.fixture
def no_engines(monkeypatch):
    monkeypatch.setattr(orphans, "engines", lambda: [])


def test_the_killed_campaigns_ranks_are_ended_and_others_left(cid, no_engines, capsys):
    rank = marked(LONG, cid, f"kit-{cid}-4")
    stubborn = marked([sys.executable, "-c", IGNORES_TERM], cid, f"kit-{cid}-5")
    assert stubborn.stdout.readline() == b"ready\n"  # SIGTERM ignored from now on
    other = [
        subprocess.Popen(LONG, env={"KIT_TRIAL": m})
        for m in (f"kit-{cid}4-4", f"kit-x{cid}-4", f"kit-{cid}-x")
    ]
    try:
        # A grace many times what a loaded host takes to end a sleep on SIGTERM: a rank still
        # there after it gets SIGKILL, and this test would take SIGTERM for unsent.
        orphans.end(cid, grace_s=5)
        assert rank.wait(timeout=5) == -signal.SIGTERM
        assert stubborn.wait(timeout=5) == -signal.SIGKILL  # after the grace
        assert [p.poll() for p in other] == [None, None, None]
        assert capsys.readouterr().err == (
            f"kit: campaign {cid}: stopped 2 processes and removed 0 containers left running "
            "by its killed run\n"
        )
    finally:
        for p in [rank, stubborn, *other]:
            p.kill()
            p.wait()


def test_nothing_left_is_nothing_said(cid, no_engines, capsys):
    orphans.end(cid, grace_s=0.5)
    assert capsys.readouterr().err == ""


def test_processes_that_cannot_be_ended_refuse_the_resume_naming_them(cid, no_engines, monkeypatch):
    rank = marked(LONG, cid, f"kit-{cid}-4")
    monkeypatch.setattr(orphans, "_signal", lambda pids, sig: None)  # as if another user's
    try:
        with pytest.raises(KitError) as e:
            orphans.end(cid, grace_s=0.2)
        assert str(e.value) == (
            f"campaign {cid}'s trials from its killed run cannot be ended: PIDs {rank.pid} "
            "(kill -9 PID, as their owner); end them, then resume again"
        )
    finally:
        rank.kill()
        rank.wait()


def test_its_trial_containers_are_removed(cid, tmp_path, monkeypatch, capsys):
    """Named after the trial (kit-CAMPAIGN-I), listed by the engine's client, removed
    with rm --force; another campaign's stay."""
    log = tmp_path / "rm.log"
    client = tmp_path / "docker"
    client.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = ps ]; then [ -e {log} ] || printf "kit-{cid}-7\\nkit-{cid}4-1\\n"; '
        f'else echo "$@" >> {log}; fi\n'
    )
    client.chmod(0o755)
    monkeypatch.setattr(orphans, "engines", lambda: [str(client)])
    orphans.end(cid, grace_s=0.2)
    assert log.read_text() == f"rm --force kit-{cid}-7\n"
    assert capsys.readouterr().err == (
        f"kit: campaign {cid}: stopped 0 processes and removed 1 container left running by its "
        "killed run\n"
    )


def test_a_container_that_stays_refuses_the_resume(cid, tmp_path, monkeypatch):
    client = tmp_path / "docker"
    client.write_text(f'#!/bin/sh\n[ "$1" = ps ] && echo kit-{cid}-7\nexit 0\n')
    client.chmod(0o755)
    monkeypatch.setattr(orphans, "engines", lambda: [str(client)])
    with pytest.raises(KitError) as e:
        orphans.end(cid, grace_s=0.2)
    assert str(e.value) == (
        f"campaign {cid}'s trials from its killed run cannot be ended: kit-{cid}-7 ({client} "
        f"rm --force kit-{cid}-7); end them, then resume again"
    )


def test_a_resume_ends_the_killed_runs_trials_before_its_first(tmp_path, monkeypatch, host_tools):
    """kit run --resume, with the results folder held: the campaign id in campaign.json,
    its leftovers ended, then the trials; a new campaign has none to end."""
    from kit import cli
    from kit.run import campaign, start

    calls = []
    monkeypatch.setattr(orphans, "end", lambda cid: calls.append(("end", cid)))
    monkeypatch.setattr(campaign, "execute", lambda *a: calls.append(("execute", a[6])))
    monkeypatch.setattr(start.signal, "signal", lambda *a: None)  # pytest keeps its handler
    out = tmp_path / "out"
    args = ["run", "pytorch-mpich", "--runtime", "native", "--out", str(out)]
    cli.cmd_run(cli.parser().parse_args(args))
    cid = json.loads((out / "campaign.json").read_text())["campaign"]
    cli.cmd_run(cli.parser().parse_args([*args, "--resume"]))
    assert calls == [("execute", cid), ("end", cid), ("execute", cid)]
