"""One exit-code table for every command (kit.core.errors): each command driven to each
code it can give, in this process; the table is the one `kit --help` and
docs/commands.md print."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kit import cli, doctor
from kit.core import errors, proc
from kit.core.errors import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNDECIDED,
    EXIT_USAGE,
)
from tests.unit.records import campaign_folder

REPO = Path(__file__).resolve().parents[2]

# each command's least arguments: what it needs to get past its parser
LEAST = {
    "list": [],
    "render": ["--check"],
    "base": [],
    "build": ["pytorch-mpich"],
    "lock": ["pytorch-mpich"],
    "bundle": ["pytorch-mpich", "--out", "X"],
    "verify": ["pytorch-mpich"],
    "convert": ["pytorch-mpich", "--to", "singularity"],
    "normalize": ["X.sif", "--out", "Y.sif"],
    "pull": ["pytorch-mpich", "--ref", "docker://x/y:z"],
    "import": ["Dockerfile", "--name", "x"],
    "run": ["pytorch-mpich", "--dry-run"],
    "report": ["DIR"],
    "presets": [],
    "doctor": [],
    "cache": ["ls"],
    "results": ["ls"],
    "compare": ["A", "B"],
    "check": ["DIR", "--max-overhead", "docker=5%"],
    "history": ["pytorch-mpich", "--runtime", "docker"],
    "export": ["DIR"],
    "completion": ["bash"],
}


def commands() -> dict:
    return cli.commands(cli.parser())


def test_the_constants_are_the_table():
    assert (EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNDECIDED, EXIT_INTERRUPTED) == (
        0, 1, 2, 3, 130,
    )  # fmt: skip
    assert list(EXIT_CODES) == [0, 1, 2, 3, 130]
    assert errors.KitError.status == EXIT_USAGE
    assert errors.Failed.status == errors.RunFailed.status == EXIT_FAILED


def test_the_table_is_in_help_and_in_the_docs():
    said = subprocess.run(
        [sys.executable, "-m", "kit.cli", "--help"], capture_output=True, text=True
    ).stdout
    page = (REPO / "docs/commands.md").read_text()
    for code, meaning in EXIT_CODES.items():
        assert re.search(rf"^ +{code}  {re.escape(meaning)}$", said, re.M), code
        assert f"| {code} | {meaning} |" in page, code


def test_every_command_is_driven_here():
    assert set(commands()) == set(LEAST)


@pytest.mark.parametrize("name", sorted(LEAST))
def test_every_command_exits_2_on_a_usage_mistake(name, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([name, *LEAST[name], "--no-such-option"])
    assert e.value.code == EXIT_USAGE
    assert capsys.readouterr().err.startswith("kit: error: unrecognized arguments")


@pytest.mark.parametrize("name", sorted(LEAST))
def test_every_command_exits_130_when_interrupted(name, monkeypatch, capsys):
    func = commands()[name].get_default("func")

    def interrupted(_args) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(sys.modules[func.__module__], func.__name__, interrupted)
    assert cli.main([name, *LEAST[name]]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "kit: interrupted\n"


def test_a_tool_that_fails_exits_1_one_that_is_missing_exits_2(tmp_path):
    """A failed docker build or debootstrap ran and failed: 1, not the usage mistake's 2."""
    with pytest.raises(errors.Failed) as failed:
        proc.stream(["false"], "debootstrap")
    assert failed.value.status == EXIT_FAILED
    with pytest.raises(errors.Failed) as failed:
        proc.capture(["sh", "-c", "echo broken >&2; exit 4"], "docker build")
    assert str(failed.value) == "docker build failed (exit 4): broken"
    with pytest.raises(errors.KitError) as missing:
        proc.capture([str(tmp_path / "no-such-tool")], "docker build")
    assert missing.value.status == EXIT_USAGE and not isinstance(missing.value, errors.Failed)


def test_a_failed_build_exits_1(tmp_path, monkeypatch, capsys):
    """kit base: mmdebstrap found, run, and failing."""
    tool = tmp_path / "mmdebstrap"
    tool.write_text("#!/bin/sh\necho 'E: no mirror' >&2\nexit 1\n")
    tool.chmod(0o755)
    monkeypatch.setattr(proc.shutil, "which", lambda cmd: str(tool))
    monkeypatch.setattr("kit.image.engine.inspect", lambda _ref: None)
    monkeypatch.setattr("kit.image.engine.server_version", lambda: "20.10.24")  # no engine asked
    monkeypatch.setattr("os.geteuid", lambda: 0)
    code = cli.main(["base"])
    assert code == EXIT_FAILED, capsys.readouterr().err
    assert "mmdebstrap failed (exit 1)" in capsys.readouterr().err


@pytest.mark.parametrize("ok, code", [(True, EXIT_OK), (False, EXIT_FAILED)])
def test_doctor_exits_by_what_the_runtimes_need(ok, code, monkeypatch, capsys):
    row = doctor.Check("docker (docker)", ok, "27.5", "apt-get install docker.io")
    rows = {k: row for k in doctor.needs("docker")}
    monkeypatch.setattr(doctor, "components", lambda: rows)
    monkeypatch.setattr(doctor, "tools", lambda: {})
    if ok:
        assert cli.main(["doctor", "--runtime", "docker"]) == code
    else:
        with pytest.raises(SystemExit) as e:
            cli.main(["doctor", "--runtime", "docker"])
        assert e.value.code == code
    said = capsys.readouterr().out
    assert said.startswith("COMPONENT") and ("missing for docker" in said) != ok


def test_results_commands_exit_0_done_1_beyond_2_a_mistake(tmp_path, capsys):
    d = campaign_folder(tmp_path / "d", "c1", 16, {"native": 1.0, "docker": 0.9}, seed=7)
    d2 = campaign_folder(tmp_path / "d2", "c2", 16, {"native": 1.0, "docker": 0.9}, seed=8)
    db = str(tmp_path / "results.db")
    for argv in (
        ["report", str(d)],
        ["export", str(d)],
        ["results", "add", str(d), "--catalogue", db],
        ["results", "ls", "--catalogue", db],
        ["history", "pytorch-mpich", "--runtime", "docker", "--catalogue", db],
        ["compare", str(d), str(d2)],
        ["check", str(d), "--max-overhead", "docker=20%"],
        ["presets"],
    ):
        assert cli.main(argv) == EXIT_OK, (argv, capsys.readouterr().err)
    with pytest.raises(SystemExit) as e:
        cli.main(["check", str(d), "--max-overhead", "docker=2%"])
    assert e.value.code == EXIT_FAILED
    for argv in (["report", str(tmp_path / "none")], ["export", str(tmp_path / "none")]):
        assert cli.main(argv) == EXIT_USAGE


def test_docs_commands_md_has_a_row_for_every_command():
    page = (REPO / "docs/commands.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `kit ")]
    for name in commands():
        assert any(f"`kit {name}" in row or f"/ `kit {name}" in row for row in rows), name


def test_run_exits_0_for_its_plan_1_when_an_arm_has_no_trial_that_succeeded(
    monkeypatch, capsys, host_tools
):
    assert cli.main(["run", "pytorch-mpich", "--runtime", "native", "--dry-run"]) == EXIT_OK
    from kit.run import start

    def failed(q, checked) -> None:
        raise errors.RunFailed("no trial of docker (3 failed) succeeded; the records are kept")

    monkeypatch.setattr(start, "run", failed)
    assert cli.main(["run", "pytorch-mpich", "--runtime", "native"]) == EXIT_FAILED
    assert capsys.readouterr().err.endswith("succeeded; the records are kept\n")


# A docker client that answers as an engine holding kit's Debian base and fails every
# build as BuildKit does: `kit build`, `lock` and `verify` reach the real `docker build`.
BASE_ID = "sha256:" + "3a1c1aae27d1" * 5 + "6d65"
FAILING_DOCKER = f"""#!/bin/sh
case "$1 $2" in
  "version --format") echo 20.10.24 ;;
  "image inspect") echo '[{{"Id": "{BASE_ID}", "Config": {{}}}}]' ;;
  build*) echo 'ERROR: failed to solve: "apt-get update" exit code: 100' >&2; exit 1 ;;
  *) exit 0 ;;
esac
"""

# An Apptainer that builds each SIF it is asked for, or fails as it does on a bad source.
APPTAINER = """#!/bin/sh
[ "$1" = build ] || exit 0
if [ "$6" = docker://x/fails:1 ]; then echo 'FATAL: no such image' >&2; exit 255; fi
echo sif > "$5"
"""


@pytest.fixture
def engine_fails(tmp_path, monkeypatch):
    from kit.image import engine

    client = tmp_path / "docker"
    client.write_text(FAILING_DOCKER)
    client.chmod(0o755)
    monkeypatch.setenv("KIT_DOCKER", str(client))
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "kit"  # a locked build writes its pip index into the checkout
    for folder in ("recipes", "containers", "benchmarks"):
        shutil.copytree(REPO / folder, root / folder)
    monkeypatch.setenv("KIT_ROOT", str(root))
    engine.docker.cache_clear()
    yield
    engine.docker.cache_clear()


@pytest.mark.parametrize("argv", [["build", "pytorch-mpich"], ["lock", "pytorch-mpich"],
                                  ["verify", "pytorch-mpich"]])  # fmt: skip
def test_a_command_whose_docker_build_fails_exits_1(argv, engine_fails, capsys):
    assert cli.main(argv) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "kit: error: docker build failed (exit 1); see the output above"


@pytest.mark.parametrize("ref, code", [("docker://x/image:1", EXIT_OK),
                                       ("docker://x/fails:1", EXIT_FAILED)])  # fmt: skip
def test_pull_exits_0_pulled_1_when_apptainer_fails(ref, code, tmp_path, monkeypatch, capsys):
    from kit.image import pull

    tool = tmp_path / "apptainer"
    tool.write_text(APPTAINER)
    tool.chmod(0o755)
    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(pull, "which", lambda cmd, fix: str(tool))
    assert cli.main(["pull", "pytorch-mpich", "--ref", ref]) == code
    if code == EXIT_FAILED:
        assert "apptainer build failed (exit 255)" in capsys.readouterr().err


def test_the_image_commands_exit_0_when_done(tmp_path, monkeypatch, capsys, host_tools):
    """What needs no engine runs for real; build, lock, bundle, convert and verify with the
    engine's part stood in (the integration tests run them whole)."""
    from kit.image import build, bundle, convert, engine, lock, verify

    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(engine, "inspect", lambda ref: None)
    monkeypatch.setattr(engine, "image_ids", lambda: set())
    (tmp_path / "Dockerfile").write_text("FROM debian:12\nRUN true\n")
    monkeypatch.setattr(build, "build", lambda r, v, opts=None: r.tag(v))
    monkeypatch.setattr(build, "read_file", lambda image, path: [])
    monkeypatch.setattr(lock, "make", lambda r, v, apt: {"apt": [], "pip": []})
    monkeypatch.setattr(lock, "write", lambda r, v, held: tmp_path / "x.lock.json")
    monkeypatch.setattr(bundle, "make", lambda r, v, out: {"tag": "t", "digest": "sha256:0",
                        "files": {}, "seconds": 0, "recipe": r.name})  # fmt: skip
    art = convert.Artifacts("sha256:ab", tmp_path / "ab")
    monkeypatch.setattr(convert, "convert", lambda r, v, f: art)
    monkeypatch.setattr(convert, "artifacts", lambda r, v: art)
    same = verify.Verdict("kit/x", "sha256:aa", "REF", "sha256:aa", {}, [])
    monkeypatch.setattr(verify, "compare", lambda image, other: same)
    for argv in (
        ["list"],
        ["render", "--check"],
        ["build", "pytorch-mpich"],
        ["lock", "pytorch-mpich"],
        ["bundle", "pytorch-mpich", "--out", str(tmp_path / "b")],
        ["verify", "pytorch-mpich", "--against", "REF"],
        ["convert", "pytorch-mpich", "--to", "singularity"],
        ["import", str(tmp_path / "Dockerfile"), "--name", "x"],
        ["cache", "ls"],
        ["completion", "bash"],
    ):
        assert cli.main(argv) == EXIT_OK, (argv, capsys.readouterr().err)


def test_verify_exits_1_when_the_image_is_not_reproduced(tmp_path, monkeypatch, capsys):
    from kit.image import convert, verify

    monkeypatch.setenv("KIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(convert, "artifacts", lambda r, v: convert.Artifacts("sha256:ab", tmp_path))
    other = verify.Verdict("kit/x", "sha256:aa", "REF", "sha256:bb", {"content": ["etc/x"]}, [])
    monkeypatch.setattr(verify, "compare", lambda image, ref: other)
    with pytest.raises(SystemExit) as e:
        cli.main(["verify", "pytorch-mpich", "--against", "REF"])
    assert e.value.code == EXIT_FAILED
    assert capsys.readouterr().out.startswith("NOT reproduced: ")


def test_render_check_exits_1_when_containers_drifted(kit_root, capsys):
    assert cli.main(["render"]) == EXIT_OK
    (kit_root / "containers" / "mini-openmpi" / "Dockerfile").write_text("FROM x\n")
    assert cli.main(["render", "--check"]) == EXIT_FAILED
    assert "containers/ differs from recipes/" in capsys.readouterr().err
