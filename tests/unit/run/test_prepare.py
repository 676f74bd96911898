"""Checking a request is pure; prepare makes what the checked campaign runs: the real-data
folder, a user's image loaded, its MPI read from a conversion."""

from kit.image import foreign
from kit.run import checks, request
from kit.run.checks import RunRequest

from ..image.test_foreign import GOOD, archive

METRIC = "rate: (?P<rate>[0-9.]+)"


def test_the_real_data_folder_is_made_by_prepare_not_by_the_check(tmp_path):
    folder = tmp_path / "data"
    q = RunRequest.parse(["pytorch-mpich", "--runtime", "native", "--data", "real",
                          "--data-dir", str(folder)])  # fmt: skip
    c = request.check(q)
    assert c.opts.data_dir == str(folder) and not folder.exists()
    assert request.prepare(q, c, plan_only=True) == c and not folder.exists()
    assert request.prepare(q, c) == c and folder.is_dir()


def test_a_users_image_is_loaded_and_its_mpi_read_after_the_check(tmp_path, monkeypatch):
    """The check reads the archive's manifest only; prepare loads it and reads its MPI
    (a conversion), whose launcher the campaign then takes."""
    done = []
    monkeypatch.setattr(checks.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(foreign, "loaded", lambda image: done.append("load") or image)
    library = "/usr/lib/libmpich.so.12"
    found = (foreign.Mpi("mpich", ""), library)
    monkeypatch.setattr(foreign, "mpi_of", lambda image: done.append("mpi") or found)
    monkeypatch.setattr(foreign, "flavour_of_launcher", lambda launcher: "mpich")
    tar = archive(tmp_path / "i.tar", GOOD)
    q = RunRequest.parse(["--image", str(tar), "--command", "/x", "--metric", METRIC,
                          "--runtime", "docker", "--np", "1,2", "--reduce", "sum"])  # fmt: skip
    c = request.check(q)
    assert done == [] and c.opts.mpirun is None and c.spec["image_mpi"] is None
    assert (c.recipe.ref, c.spec["image_digest"]) == ("train:1", "sha256:0123abcd")
    made = request.prepare(q, c, plan_only=True)  # a dry run reads the MPI, loads nothing
    assert done == ["mpi"] and made.opts.mpirun == foreign.launcher_for("mpich")
    made = request.prepare(q, c)
    assert done == ["mpi", "load", "mpi"] and made.spec["image_mpi"] == library
    assert made.recipe.mpi_library == library and made.design == c.design
