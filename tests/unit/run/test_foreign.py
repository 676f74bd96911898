"""kit run --image REF --command: a user's own image and workload, checked before anything
runs, and run by each runtime as given."""

import dataclasses

import pytest

from kit import cli, runtimes
from kit.core.errors import KitError
from kit.image import foreign
from kit.run import own_image, plan, request, trial
from kit.runtimes import Job, Prepared

METRIC = "rate: (?P<rate>[0-9.]+)"


@pytest.fixture
def sif(tmp_path):
    """A file that reads as a SIF (its magic where a SIF has it)."""
    path = tmp_path / "train.sif"
    path.write_bytes(b"#!/usr/bin/env run-singularity\n\x00SIF_MAGIC" + b"\x00" * 64)
    return path


def check(*argv):
    """The campaign a dry run plans: the request checked, then prepared as a dry run is."""
    q = request.RunRequest.of(cli.parser().parse_args(["run", *argv, "--dry-run"]))
    return request.prepare(q, request.check(q), plan_only=True)


def test_a_sif_and_its_command_make_a_campaign(sif, host_tools):
    c = check("--image", str(sif), "--command", "/loop 10", "--metric", METRIC, "--unit",
              "ops/s", "--runtime", "singularity,charliecloud", "--repeats", "6")  # fmt: skip
    assert c.recipe.kind == "sif" and c.recipe.label == str(sif)
    assert c.recipe.digest.startswith("sha256:") and c.recipe.benchmarks == ("command",)
    assert [cfg.bench for cfg in c.design.configs] == ["command"]
    assert c.spec["baseline"] == "singularity"  # no native arm: the first one given
    assert c.opts.command.argv == ("/loop", "10") and c.opts.command.reduce == "last"
    job = trial.trial_job(runtimes.get("charliecloud"), Prepared("/i.sqfs", "d", "", ""),
                          c.design.configs[0], c.opts, "mpirun", "kit-x-0", "0")  # fmt: skip
    assert job.program == ["/loop", "10"] and job.read == c.opts.command.reader


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--command", "/x"], "needs --command 'CMD' .* and --metric REGEX"),
        (["--metric", METRIC], "needs --command"),
        (["--command", "/x", "--metric", "rate: (.*)"], "exactly one named group"),
        (["--command", "/x", "--metric", METRIC, "--model", "resnet50"], "--model is for kit's"),
        (["--command", "/x", "--metric", METRIC, "--runtime", "native,singularity"],
         "needs --native-command"),
        (["--command", "/x", "--metric", METRIC, "--runtime", "shifter"], "does not run --image"),
        (["--command", "/x", "--metric", METRIC, "--np", "2"], "--reduce last|first|sum"),
        (["--command", "/x", "--metric", METRIC, "--reduce", "total"], "must be one of"),
        (["--command", "/x", "--metric", METRIC, "--name", "torch-cnn"], "not one of kit's"),
        (["--command", "/x 'y", "--metric", METRIC], "check its quotes"),
        (["--command", "/x", "--metric", METRIC, "--repeats", "100000"],
         r"would run 100001 trials: 100001 rounds .* x 1 configurations \(1 --np\) x 1 launches"),
    ],
)  # fmt: skip
def test_bad_requests_are_one_line_before_anything_runs(sif, host_tools, argv, says):
    with pytest.raises(KitError, match=says):
        check("--image", str(sif), "--runtime", "singularity", *argv)


def test_what_is_not_an_image_is_named_with_the_forms_kit_reads(tmp_path, host_tools):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    for ref, says in ((str(tmp_path / "none.sif"), "is not an image kit can read"),
                      (str(text), "neither a SIF nor a docker save archive"),
                      ("docker:", "no such image in the local Docker engine")):  # fmt: skip
        with pytest.raises(KitError, match=says):
            foreign.resolve(ref)


def test_the_command_options_need_an_image(host_tools):
    with pytest.raises(KitError, match="--command goes with --image REF"):
        check("pytorch-mpich", "--command", "/x")


def test_each_runtime_runs_the_command_as_given_whatever_the_entrypoint(monkeypatch):
    image = foreign.Foreign("docker:me/loop:1", "engine", "me/loop:1", "sha256:ab" * 16)
    monkeypatch.setattr(foreign.Foreign, "config", lambda self: {"WorkingDir": "/work"})
    job = Job(["/loop", "10"], 1, "mpirun.mpich", "kit-x-0")
    monkeypatch.setattr(foreign.convert, "convert", lambda img, v, f: foreign.convert.Artifacts(
        img.digest, foreign.Path("/c")))  # fmt: skip
    docker = runtimes.get("docker")
    prep = docker.prepare_foreign(image)
    argv = docker.command(prep, job)
    assert argv[argv.index("--entrypoint=") + 1 :][-3:] == ["me/loop:1", "/loop", "10"]
    app = runtimes.get("singularity")
    assert app.command(app.prepare_foreign(image), job) == [
        "apptainer", "exec", "--pwd=/work", "/c/image.sif", "/loop", "10",
    ]  # fmt: skip
    with pytest.raises(KitError, match="runs images in the engine"):
        docker.prepare_foreign(foreign.Foreign("x.sif", "sif", "/x.sif", "sha256:0"))


def asked(mpirun):
    """A request naming this host launcher (or none)."""
    a = cli.parser().parse_args(["run", "--image", "docker:me/mpi:1", "--mpirun", "x"])
    return dataclasses.replace(request.RunRequest.of(a), mpirun=mpirun)


def test_hybrid_ranks_need_the_launcher_of_the_images_mpi(monkeypatch):
    image = foreign.Foreign("docker:me/mpi:1", "engine", "me/mpi:1", "sha256:0")
    found = (foreign.Mpi("openmpi", ""), "/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4")
    monkeypatch.setattr(foreign, "mpi_of", lambda img: found)
    monkeypatch.setattr(foreign, "flavour_of_launcher", lambda m: "mpich")
    chosen = runtimes.parse("docker,singularity")
    with pytest.raises(KitError, match=r"carries openmpi .* --mpirun mpirun.openmpi"):
        own_image.mpi_launcher(image, chosen, asked("mpirun.mpich"), [1, 2])
    monkeypatch.setattr(foreign, "flavour_of_launcher", lambda m: "openmpi")
    got, launcher = own_image.mpi_launcher(image, chosen, asked(None), [1, 2])
    assert launcher == "mpirun.openmpi" and got.mpi_library.endswith("libmpi.so.40.30.4")
    monkeypatch.setattr(foreign, "mpi_of", lambda img: None)
    with pytest.raises(KitError, match="holds no MPI library"):
        own_image.mpi_launcher(image, chosen, asked(None), [1, 2])


def test_a_plan_of_a_command_says_what_runs_and_how_its_figure_is_read(sif, host_tools):
    c = check("--image", str(sif), "--command", "/loop 10", "--metric", METRIC,
              "--runtime", "singularity,charliecloud", "--repeats", "6")  # fmt: skip
    text = plan.describe(c.design, c.opts)
    first = text.splitlines()[0].split()  # the arms in their seeded order
    assert first[0] == "0" and first[1] in ("singularity", "charliecloud")
    assert first[2:] == ["command", "np=1", "warm-up"]
    assert "command: /loop 10 in the image" in text
    assert f"its figure: --metric '{METRIC}' (last of the matches)" in text


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--runtime", "native,docker"], "has no native arm"),
        (["--runtime", "docker", "--unit", "x/s"], "--unit goes with --command"),
        (["--runtime", "docker", "--bench", "torch-cnn,nosuch"], "unknown benchmark 'nosuch'"),
        (["--runtime", "singularity"], "needs an engine image"),
    ],
)
def test_kit_benchmarks_in_a_foreign_image_are_refused_with_one_line(sif, host_tools, argv, says):
    with pytest.raises(KitError, match=says):
        check("--image", str(sif), *([] if "--bench" in argv else ["--bench", "torch-cnn"]), *argv)


def test_an_images_mpi_is_the_family_whose_launcher_it_carries():
    """Debian's PyTorch links Open MPI's library; the image's mpirun is MPICH's Hydra."""
    lib = "/usr/lib/x86_64-linux-gnu/"
    both = [f"{lib}libmpi.so.40", f"{lib}libmpich.so.12.4.3", f"{lib}libmpich.so.12"]
    assert foreign.mpi_in([*both, "/usr/bin/hydra_pmi_proxy"]) == {
        "flavour": "mpich", "library": f"{lib}libmpich.so.12.4.3"
    }  # fmt: skip
    assert foreign.mpi_in([*both, "/usr/bin/orted"])["flavour"] == "openmpi"
    assert foreign.mpi_in(both)["flavour"] == "openmpi"  # no launcher: the first library
    assert foreign.mpi_in(["/usr/bin/hydra_pmi_proxy", "/bin/sh"]) is None
