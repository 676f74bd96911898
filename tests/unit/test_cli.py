"""User mistakes: one line on stderr, exit 2, no traceback."""

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .pipes import unblocked


def kit(*args, env=None):
    """`python -m kit.cli ARGS`: a given env gets the PYTHONPATH of this checkout's kit."""
    if env is not None:
        env = {**env, "PYTHONPATH": os.environ["PYTHONPATH"]}
    return subprocess.run(
        [sys.executable, "-m", "kit.cli", *args], capture_output=True, text=True, env=env
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["build", "nope"], "kit: error: unknown image 'nope' (known: "),
        (["run", "pytorch-mpich", "--runtime", "rkt"], "kit: error: unknown runtime 'rkt'"),
        (["run", "pytorch-mpich", "--np", "0"], "kit: error: --np '0' must be comma-separated"),
        (["run", "pytorch-mpich", "--runtime-arg", "docker"], "must be RUNTIME:ARG"),
        (["convert", "pytorch-mpich", "--to", "rpm"], "kit: error: unknown format 'rpm'"),
        (["build", "pytorch-mpich", "--variant", "tpu"], "has no variant 'tpu'"),
        (["report", "/nonexistent"], "kit: error: results directory '/nonexistent' does not"),
        (["report", "/", "--format", "pdf"], "kit: error: --format 'pdf' is not one of md,"),
        (["run", "pytorch-mpich", "--runtime", "native,native"], "names a runtime twice; label"),
        (
            ["run", "pytorch-mpich", "--runtime", "native", "--runtime-arg", "docker:--cpus=1"],
            "kit: error: --runtime-arg 'docker:--cpus=1' names 'docker', not in --runtime native",
        ),
        (  # ignored, yet filed in every native record as passed
            ["run", "pytorch-mpich", "--runtime-arg", "native:-x", "--dry-run"],
            "kit: error: --runtime-arg 'native:-x': native runs on the host, with no container "
            "runtime to take options; drop it",
        ),
        (["run", "pytorch-mpich", "--bench", "tf-cnn"], "image 'pytorch-mpich' has torch-cnn, mpi"),
        (["run", "pytorch-mpich", "--model", "vgg"], "--model 'vgg' is not a model of torch-cnn"),
        (["run", "pytorch-mpich", "--data", "disk"], "--data 'disk' must be synthetic, real"),
        (["run", "pytorch-mpich", "--launcher", "pbs", "--dry-run"], "--launcher 'pbs' must be"),
        (
            ["run", "pytorch2-mpich", "--launcher", "torchrun", "--bench", "torch-cnn,mpi"],
            "--launcher torchrun starts PyTorch's own ranks, which only torch-cnn (DDP) uses; "
            "run mpi in a campaign of its own with --launcher local",
        ),
        (["run", "pytorch-mpich", "--emit", "d", "--dry-run"], "go with --launcher slurm"),
        (
            ["run", "pytorch2-mpich", "--hosts", "n1,n2", "--runtime", "shifter", "--dry-run"],
            "kit: error: runtime 'shifter' is not run by kit on hosts it reaches over ssh; --hosts "
            "runs the runtimes whose ranks the launcher starts on each host: charliecloud, docker, "
            "native, podman, podman-hpc, podman-hpc-shared, singularity, singularity-bind",
        ),
        (
            ["run", "pytorch2-mpich", "--hosts", "n1", "--launcher", "slurm", "--dry-run"],
            "--hosts starts ranks over ssh itself; leave out --launcher slurm",
        ),
        (["run", "pytorch-mpich", "--timeout", "-5", "--dry-run"], "--timeout -5.0 must be a pos"),
        (["run", "pytorch-mpich", "--warmup-trials", "-1", "--dry-run"], "must be at least 0"),
        (["run", "pytorch-mpich", "--steps", "0", "--dry-run"], "--steps 0 must be at least 1"),
        (["run", "pytorch-mpich", "--np", "100000", "--dry-run"], "--np 100000 is more ranks"),
        (["run", "pytorch-mpich", "--variant", "rocm", "--dry-run"], "--variant 'rocm': image"),
        (["run", "pytorch-mpich", "--precision", "2", "--dry-run"], "--precision '2' must be a"),
        (["run", "pytorch-mpich", "--precision", "2%", "--budget", "soon", "--dry-run"], "--bud"),
        (["run", "pytorch-mpich", "--budget", "30m", "--dry-run"], "--budget goes with --prec"),
        (
            ["run", "pytorch-mpich", "--runtime", "docker", "--precision", "2%", "--dry-run"],
            "--precision compares every arm with native: add native to --runtime",
        ),
        (
            ["run", "pytorch-mpich", "--runtime", "native", "--baseline", "docker", "--dry-run"],
            "--baseline 'docker' is not an arm of --runtime (native); choose one of them, or",
        ),
        (
            [
                *("run", "pytorch-mpich", "--runtime=docker,podman", "--baseline=all"),
                *("--precision=2%", "--dry-run"),
            ],
            "--precision compares every arm with native: add native to --runtime",
        ),
        (["run", "pytorch-mpich", "--min-time", "-1", "--dry-run"], "--min-time -1 must be"),
        (["run", "pytorch-mpich", "--min-time", "auto", "--warmup-trials", "0"], "use --warmup"),
        (["run", "pytorch-mpich", "--baseline-launches", "0"], "--baseline-launches 0 must be"),
        (["run", "pytorch-mpich", "--bench-arg", "nosuch:--x"], "names no benchmark 'nosuch'"),
        (["run", "pytorch-mpich", "--batch-size", "9" * 23], "is out of range; give values"),
        (["report", "/tmp", "/tmp/"], "results directory '/tmp' is given twice"),
        (["run", "pytorch-mpich", "--bench-arg=mpi:--x", "--dry-run"], "names 'mpi', not in"),
        (["run", "pytorch-mpich", "--bench-arg=mpi:", "--dry-run"], "'mpi:' must be BENCH:ARG"),
        (["run", "pytorch-mpich", "--out", "/proc/version"], "--out '/proc/version' is a file"),
    ],
)
def test_user_errors(args, message):
    p = kit(*args)
    assert p.returncode == 2
    assert p.stderr.startswith("kit: error: ") and message in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert "Traceback" not in p.stderr


def test_missing_engine(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "KIT_DOCKER": str(tmp_path / "no-docker"),
        "HOME": str(tmp_path),
    }
    p = kit("convert", "pytorch-mpich", "--to", "singularity", env=env)
    assert p.returncode == 2
    assert p.stderr == (
        f"kit: error: no docker client '{tmp_path}/no-docker' on PATH; "
        "install docker.io or run ci/provision\n"
    )


@pytest.mark.usefixtures("host_tools")
def test_dry_run_interleaves_with_warmup_first():
    p = kit(
        "run",
        "pytorch-mpich",
        "--runtime",
        "native,docker",
        "--np",
        "1,2",
        "--repeats",
        "2",
        "--dry-run",
    )
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and len(lines) == 12
    assert all("warm-up" in x for x in lines[:4])
    assert not any("warm-up" in x for x in lines[4:])


@pytest.mark.usefixtures("host_tools")
@pytest.mark.parametrize("budget, said", [("20m", "20 min"), ("90s", "1.5 min")])
def test_precision_dry_run_says_how_it_ends(budget, said):
    p = kit("run", "pytorch-mpich", "--runtime", "native,docker", "--precision", "2%",
            "--budget", budget, "--repeats", "3", "--dry-run")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[-1] == (
        f"then a round at a time until every comparison is within ±2.0% or {said} are spent"
    )


def test_doctor_prints_its_table_whatever_the_engine_does(tmp_path):
    dead = tmp_path / "docker"
    dead.write_text(  # a client whose engine is not there
        '#!/bin/sh\n[ "$1" = --version ] && echo "Docker version 27.5.1" && exit 0\n'
        "echo 'Cannot connect to the Docker daemon' >&2\nexit 1\n"
    )
    dead.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "KIT_DOCKER": str(dead), "HOME": str(tmp_path)}
    p = kit("doctor", "--runtime", "docker", env=env)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["COMPONENT", "STATUS", "DETAIL"]
    assert lines[1].startswith("docker engine") and "MISSING" in lines[1]
    assert lines[-1] == "missing for docker: base image, docker engine"
    (disk,) = [line for line in lines if line.startswith("disk: ")]
    said = f" GB free under {tmp_path}/.cache/kit (the cache holds 0.0 GB, converted images "
    # the low-space advice may follow: this machine's disk decides
    assert said + "0.0 GB of it: kit cache ls)" in disk


def test_unrunnable_docker_client_is_one_line(tmp_path):
    client = tmp_path / "docker"
    client.write_text("not a program")  # not executable
    env = {"PATH": "/usr/bin:/bin", "KIT_DOCKER": str(client), "HOME": str(tmp_path)}
    p = kit("convert", "pytorch-mpich", "--to", "singularity", env=env)
    assert p.returncode == 2
    assert p.stderr == (
        f"kit: error: docker client '{client}' cannot be run (Permission denied); "
        "set KIT_DOCKER to a working docker client\n"
    )


def test_a_client_that_answers_nonsense_is_named_with_what_it_said(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "KIT_DOCKER": "/bin/echo", "HOME": str(tmp_path)}
    p = kit("convert", "pytorch-mpich", "--to", "singularity", env=env)
    assert (p.returncode, p.stderr) == (
        2,
        "kit: error: '/bin/echo image inspect kit/pytorch-mpich:1.3.0-cpu' answered "
        "'image inspect kit/pytorch-mpich:1.3.0-cpu', not an image's inspection; set "
        "KIT_DOCKER to a working docker client\n",
    )
    p = kit("doctor", "--runtime", "docker", env=env)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "'/bin/echo version' answered 'version --format {{.Server.Version}}', not" in p.stdout
    p = kit("list", env=env)
    assert p.returncode == 0 and p.stderr.startswith(
        "kit: note: SIZE not shown: '/bin/echo version' answered"
    )


def test_report_in_a_read_only_folder_is_printed(tmp_path):
    from kit.results import store

    from .records import record

    for i in range(6):
        store.append(tmp_path, record("native", 100.0 + i, index=i))
    tmp_path.chmod(0o555)
    try:
        p = kit("report", str(tmp_path))
    finally:
        tmp_path.chmod(0o755)
    if os.geteuid() == 0:  # root writes anyway: the report is filed
        assert (tmp_path / "report.md").is_file()
    else:
        assert "kit: warning: cannot write" in p.stderr and "(Permission denied)" in p.stderr
    assert p.returncode == 0 and p.stdout.startswith("# kit report: ")


def test_mpich_launcher_version_is_hydras_version_field():
    from kit.core.proc import version_line

    hydra = "HYDRA build details:\n    Version:                                 4.0.2\n"
    assert version_line(hydra) == "MPICH (Hydra) 4.0.2"
    assert version_line("mpirun (Open MPI) 4.1.4\n\nReport bugs") == "mpirun (Open MPI) 4.1.4"


def test_allow_mismatch_from_the_command_line(tmp_path):
    """Refused by default (named as such), compared and marked with --allow-mismatch."""
    from kit.results import store

    from .records import record

    for i, rate in enumerate((100, 101, 102, 103, 104, 105)):
        store.append(tmp_path, record("native", rate, index=2 * i))
        other = record("docker", rate, index=2 * i + 1)
        other["result"]["framework_version"] = "2.0"
        store.append(tmp_path, other)
    refused = kit("report", str(tmp_path))
    assert refused.returncode == 0, refused.stderr
    assert "not compared: software differs from native (2.0 / MPICH 4.0.2" in refused.stdout
    allowed = kit("report", str(tmp_path), "--allow-mismatch")
    assert allowed.returncode == 0, allowed.stderr
    assert "not compared" not in allowed.stdout
    assert "no significant difference (MISMATCHED SOFTWARE)" in allowed.stdout


def test_help_names_every_container_runtime_the_registry_has():
    from kit import runtimes

    line = kit("--help").stdout.split("\n\n")[1]
    products = {cls.product for cls in runtimes.RUNTIMES.values() if cls.product}
    assert products >= {"Apptainer", "Charliecloud", "Docker", "Podman", "Podman-HPC", "Shifter"}
    assert all(p in line for p in products) and line.endswith("Podman, Podman-HPC and Shifter.")


@pytest.mark.usefixtures("host_tools")
def test_repeated_values_are_one_configuration():
    p = kit(
        "run",
        "pytorch-mpich",
        "--runtime",
        "native,docker",
        "--batch-size",
        "4,4",
        "--np",
        "1,1",
        "--repeats",
        "1",
        "--warmup-trials",
        "0",
        "--dry-run",
    )
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 2, p.stdout


def test_the_dry_run_refuses_what_the_run_would(tmp_path, host_tools):
    """Found before any trial, by the dry run as by the run: a --mpirun that is not there,
    a folder that holds another campaign's trials, a --resume with other options."""
    plan = ["run", "pytorch-mpich", "--runtime", "native", "--np", "2", "--dry-run"]
    p = kit(*plan, "--mpirun", "/nonexistent")
    assert (p.returncode, p.stderr) == (
        2,
        "kit: error: more than one rank needs '/nonexistent' on PATH; install mpich or pass "
        "--mpirun PATH\n",
    )
    out = tmp_path / "run"
    out.mkdir()
    (out / "campaign.json").write_text(json.dumps({"campaign": "c0", "repeats": 99}))
    (out / "trials.jsonl").write_text("{}\n")
    p = kit(*plan, "--out", str(out))
    assert p.returncode == 2 and p.stderr.startswith(f"kit: error: {out} already holds trials")
    p = kit(*plan, "--out", str(out), "--resume")
    assert p.returncode == 2 and "--resume must repeat the campaign's options" in p.stderr
    assert sorted(x.name for x in out.iterdir()) == ["campaign.json", "trials.jsonl"]
    assert kit(*plan, "--out", str(tmp_path / "new")).returncode == 0
    assert not (tmp_path / "new").exists()  # a dry run makes nothing


@pytest.mark.parametrize("free_gb", [9.4, 10.0])
def test_doctor_warns_of_a_disk_too_small_for_a_campaign(tmp_path, monkeypatch, free_gb):
    from kit import doctor

    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache" / "images" / "x" / "0123").mkdir(parents=True)
    with open(tmp_path / "cache" / "a.sif", "wb") as sif:
        sif.truncate(300_000_000)  # sparse: counts as 0.3 GB held, takes no disk
    with open(tmp_path / "cache" / "images" / "x" / "0123" / "image.sif", "wb") as sif:
        sif.truncate(200_000_000)
    usage = doctor.shutil.disk_usage(tmp_path)._replace(free=int(free_gb * 1e9))
    monkeypatch.setattr(doctor.shutil, "disk_usage", lambda _: usage)
    line = (
        f"disk: {free_gb:.0f} GB free under {tmp_path}/cache (the cache holds 0.5 GB, "
        "converted images 0.2 GB of it: kit cache ls)"
    )
    if free_gb < doctor.LOW_DISK_GB:
        line += (
            "; under 10 GB: each image a campaign runs is converted there (a few GB each), "
            "so free space (kit cache prune) or set KIT_CACHE to a larger disk"
        )
    assert doctor.disk() == line


def test_doctor_checks_the_docker_client_kit_calls_not_paths_first(tmp_path, monkeypatch):
    """PATH's first docker (28.2) lacks the buildx plugin, so kit calls the next, whose
    built-in BuildKit it builds with (20.10): the engine row and the tool row both name
    that one, with its path and version."""
    from kit import doctor
    from kit.image import engine

    clients = {}
    for version, folder in (("28.2.2", "new"), ("20.10.24", "old")):
        client = tmp_path / folder / "docker"
        client.parent.mkdir()
        client.write_text(
            f'#!/bin/sh\ncase "$1" in buildx) exit 1 ;; --version) echo "Docker version '
            f'{version}, build x" ;; version) echo {version} ;; *) exit 1 ;; esac\n'
        )
        client.chmod(0o755)
        clients[version] = client
    monkeypatch.setenv("PATH", f"{tmp_path / 'new'}:{tmp_path / 'old'}:/usr/bin:/bin")
    monkeypatch.delenv("KIT_DOCKER", raising=False)
    engine.docker.cache_clear()
    try:
        tool = doctor.tools()["tool:docker"]
        assert (tool.ok, tool.detail) == (
            True, f"Docker version 20.10.24, build x ({clients['20.10.24']})",
        )  # fmt: skip
        assert doctor.components()["engine"].detail == f"20.10.24 via {clients['20.10.24']}"
    finally:
        engine.docker.cache_clear()


def test_doctor_names_a_tool_that_does_not_answer_instead_of_waiting_on_it():
    from kit import doctor

    check = doctor._tool("Slurm", ["sleep", "30"], "start slurmctld", wait=0.3)
    assert (check.ok, check.detail) == (False, "'sleep' gave no answer within 0.3 s")


# The required arguments of each command whose options a user's string reaches a script,
# a file name or a report's markup through: (its positional's value, other options).
TYPED = {"run": ("pytorch-mpich", ["--dry-run"]), "report": ("results", []),
         "import": ("Dockerfile", ["--name", "x"])}  # fmt: skip


def typed(command: str) -> list[argparse.Action]:
    """Every option and argument of `kit COMMAND` that takes a string (or a path), as its
    parser declares them: a new option is walked without a test naming it."""
    from kit import cli

    actions = cli.commands(cli.parser())[command]._actions
    return [a for a in actions if a.nargs != 0 and a.type in (None, str, Path)]


@pytest.mark.parametrize("command", list(TYPED))
def test_no_option_takes_a_line_break(command, capsys):
    """A newline in --emit wrote a line into the sbatch script (running it ran `touch`);
    one in --unit split the report's table. Every string option of kit run (and of kit
    report and kit import) refuses one, in one line naming it, before anything runs."""
    from kit import cli

    positional, options = TYPED[command]
    walked = typed(command)
    assert len(walked) >= {"run": 30, "report": 3, "import": 4}[command]
    for action in walked:
        name = max(action.option_strings, key=len, default=action.metavar)
        bad = "a\nb\x1b[2J"
        if action.option_strings:
            argv = [command, positional, *options, name, bad]
        else:
            argv = [command, bad, *options]
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err == (
            f"kit: error: {name} 'a\\nb\\x1b[2J' holds a control character (a line break, a "
            "tab, an escape); give it on one line of printable characters\n"
        ), argv


@pytest.mark.parametrize("command", list(TYPED))
def test_no_option_takes_bytes_that_are_not_utf8(command, capsys):
    """A file name's non-UTF-8 byte reaches Python as a lone surrogate, which no UTF-8 file
    can hold: kit import --base '/x/base\\xff.sif' was a UnicodeEncodeError traceback as the
    definition was written. Every string option refuses one, before anything runs."""
    from kit import cli

    positional, options = TYPED[command]
    for action in typed(command):
        name = max(action.option_strings, key=len, default=action.metavar)
        bad = os.fsdecode(b"a\xffb")
        if action.option_strings:
            argv = [command, positional, *options, name, bad]
        else:
            argv = [command, bad, *options]
        assert cli.main(argv) == 2, argv
        assert capsys.readouterr().err == (
            f"kit: error: {name} 'a\\udcffb' is not UTF-8 text (kit writes it into UTF-8 "
            "files: a report, a definition); rename it, or give it in UTF-8\n"
        ), argv


@contextlib.contextmanager
def unprivileged() -> Iterator[None]:
    """Run as nobody (root writes in any folder, so cannot be refused one)."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def refused(case: str, tmp: Path) -> tuple[list[str], contextlib.AbstractContextManager]:
    """The options of a case the run refuses before its first trial, and what holds while
    it is run (a lock, a user)."""
    plan = ["pytorch-mpich", "--runtime", "native"]
    (tmp / "file").write_text("")
    if case == "--out a file":
        return [*plan, "--out", str(tmp / "file")], contextlib.nullcontext()
    if case == "--out not writable":
        (tmp / "ro").mkdir(mode=0o555)
        return [*plan, "--out", str(tmp / "ro" / "x")], unprivileged()
    if case == "trials.jsonl a folder":
        (tmp / "out" / "trials.jsonl").mkdir(parents=True)
        return [*plan, "--out", str(tmp / "out")], contextlib.nullcontext()
    if case == "the folder's lock a pipe":  # open() waited for a writer: the dry run hung
        (tmp / "out").mkdir()
        unblocked(tmp / "out" / ".kit-run.lock")
        return [*plan, "--out", str(tmp / "out")], contextlib.nullcontext()
    if case == "--emit a file":
        return [*plan, "--launcher", "slurm", "--emit", str(tmp / "file")], contextlib.nullcontext()
    if case == "--emit holding an earlier emission":
        (tmp / "em").mkdir()
        (tmp / "em" / "kit-0000.sbatch").symlink_to(tmp / "file")
        return [*plan, "--launcher", "slurm", "--emit", str(tmp / "em")], contextlib.nullcontext()
    if case == "--data-dir a file":
        return [*plan, "--data", "real", "--data-dir", str(tmp / "file")], contextlib.nullcontext()
    if case == "--resume without --out":
        return [*plan, "--resume"], contextlib.nullcontext()
    if case == "--resume while another run holds the folder":
        from kit.results import runlock, store

        store.open_campaign(tmp / "out", {"image": "x"}, resume=False)
        return [*plan, "--out", str(tmp / "out"), "--resume"], runlock.held(tmp / "out")
    with tarfile.open(tmp / "image.tar", "w") as t:  # an image tar with a bogus manifest
        data = json.dumps([{"Config": "c.json", "Layers": ["l/layer.tar"]}]).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    command = ["--command", "train", "--metric=(?P<rate>[0-9.]+)", "--runtime", "docker"]
    return ["--image", str(tmp / "image.tar"), *command], contextlib.nullcontext()


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("--out a file", "--out '{t}/file' is a file; choose a directory"),
        ("--out not writable", "--out '{t}/ro/x' cannot be made (Permission denied); choose"),
        ("trials.jsonl a folder", "'{t}/out/trials.jsonl' is a folder, not a regular file; move"),
        ("the folder's lock a pipe", "'{t}/out/.kit-run.lock' is a named pipe, not a regular "
         "file; move it away or choose another --out"),
        ("--data-dir a file", "--data-dir '{t}/file' is a file; choose a directory"),
        ("--emit a file", "--emit '{t}/file' is a file; choose a directory"),
        ("--emit holding an earlier emission", "--emit '{t}/em' holds 1 sbatch script(s) of an "
         "earlier emission (kit-0000.sbatch, ...); remove them, or choose another folder"),
        ("--resume without --out", "--resume needs --out DIR, the campaign to continue"),
        ("--resume while another run holds the folder", "{t}/out is in use by another kit run"),
        ("an image tar with a bogus manifest", "--image '{t}/image.tar' is a tar file but not "
         "a docker save archive: its manifest.json names c.json, which the archive does not"),
    ],
)  # fmt: skip
def test_the_dry_run_refuses_what_the_run_refuses_with_the_same_line(case, said, capsys):
    """The dry run passed each of these, which the run refuses before its first trial: it
    makes the same checks, in the same order, without making a folder, taking a lock or
    loading an image."""
    from kit import cli

    with tempfile.TemporaryDirectory() as name:  # not under pytest's root-only folder
        tmp = Path(name)
        tmp.chmod(0o755)
        args, holding = refused(case, tmp)
        with holding:
            before = sorted(tmp.rglob("*"))
            assert cli.main(["run", *args, "--dry-run"]) == 2
            dry = capsys.readouterr().err
            assert sorted(tmp.rglob("*")) == before  # the dry run made nothing
            assert cli.main(["run", *args]) == 2
            real = capsys.readouterr().err
    assert dry.startswith(f"kit: error: {said.format(t=tmp)}") and len(dry.splitlines()) == 1
    assert real.splitlines()[0] == dry.splitlines()[0]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--repeats", "1000000000"],
            "the campaign would run 2000000002 trials: 1000000001 rounds (--warmup-trials 1 + "
            "--repeats 1000000000) x 1 configurations (1 --bench x 1 --model x 1 --batch-size "
            "x 1 --np x 1 --data) x 2 launches (2 --runtime arms); one campaign runs at most "
            "100000: lower these, or split it into campaigns",
        ),
        (
            ["--baseline-launches", "2000000000"],
            "the campaign would run 18000000009 trials: 9 rounds (--warmup-trials 1 + "
            "--repeats 8) x 1 configurations (1 --bench x 1 --model x 1 --batch-size x 1 --np "
            "x 1 --data) x 2000000001 launches (2 --runtime arms, native 2000000000 times); "
            "one campaign runs at most 100000: lower these, or split it into campaigns",
        ),
        (
            [
                *("--batch-size", ",".join(map(str, range(1, 501))), "--model", "tiny,alexnet"),
                *("--np", "1,2", "--data", "synthetic,real", "--repeats", "17"),
            ],
            "the campaign would run 144000 trials: 18 rounds (--warmup-trials 1 + --repeats 17) "
            "x 4000 configurations (1 --bench x 2 --model x 500 --batch-size x 2 --np x 2 "
            "--data) x 2 launches (2 --runtime arms); one campaign runs at most 100000: lower "
            "these, or split it into campaigns",
        ),
    ],
)
def test_a_campaign_too_large_is_refused_before_its_plan_is_built(args, said, capsys):
    """--dry-run --repeats 1000000000 printed nothing for a minute, then ran out of
    memory: the plan's size is known from the options' counts before it is built."""
    from kit import cli

    assert cli.main(["run", "pytorch-mpich", "--runtime", "native,docker", "--dry-run", *args]) == 2
    assert capsys.readouterr().err == f"kit: error: {said}\n"


def test_a_mistake_argparse_finds_is_one_line_too(capsys):
    from kit import cli

    with pytest.raises(SystemExit) as e:
        cli.main(["run", "pytorch-mpich", "--baseline-launches", "2e9"])
    assert e.value.code == 2
    assert capsys.readouterr().err == (
        "kit: error: argument --baseline-launches: invalid int value: '2e9'; see kit run --help\n"
    )


@pytest.mark.parametrize("args", [["completion", "bash"], ["report", "--help"]])
def test_output_to_a_full_device_is_named_and_fails(args):
    """Redirected to /dev/full, kit said "No space left on device" of no file, or nothing
    and exit 0 when Python's last flush at exit failed."""
    with open("/dev/full", "w") as full:
        env = {**os.environ, "PYTHONPATH": os.environ["PYTHONPATH"]}
        p = subprocess.run([sys.executable, "-m", "kit.cli", *args], stdout=full,
                           stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    assert (p.returncode, p.stderr) == (2, "kit: error: could not write kit's output to "
        "standard output (No space left on device); free space where it goes or send it "
        "elsewhere\n")  # fmt: skip
