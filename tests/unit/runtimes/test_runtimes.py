"""Each runtime's exact command line, for one rank and for two."""

import dataclasses
import os

import pytest

from kit import runtimes
from kit.core.errors import KitError
from kit.image import convert, engine
from kit.runtimes import Job, Prepared, apptainer, base, charliecloud
from kit.runtimes.base import WORKLOAD_PREFIXES

PROG = ["/opt/kit/venv/bin/python", "/opt/kit/benchmarks/torch_cnn.py", "--steps", "5"]


def job(ranks, extra=()):
    return Job(PROG, ranks, "mpirun.mpich", "kit-abc-3", list(extra))


@pytest.fixture
def prep():
    return Prepared("IMG", "sha256:0", PROG[0], "/opt/kit/benchmarks")


def test_native(prep):
    rt = runtimes.get("native")
    assert rt.command(prep, job(1)) == PROG
    assert rt.command(prep, job(2)) == ["mpirun.mpich", "-np", "2", *PROG]


def test_apptainer_hybrid(prep):
    rt = runtimes.get("apptainer")
    assert rt.name == "singularity"
    assert rt.command(prep, job(2)) == [
        "mpirun.mpich",
        "-np",
        "2",
        "apptainer",
        "exec",
        "IMG",
        *PROG,
    ]
    assert rt.env == {
        "UCX_POSIX_USE_PROC_LINK": "n",
        "UCX_TLS": "^cma",
        "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    }


def test_charliecloud_hybrid(prep):
    rt = runtimes.get("charliecloud")
    assert rt.command(prep, job(1, ["--no-home"])) == ["ch-run", "--no-home", "IMG", "--", *PROG]
    assert rt.command(prep, job(2))[:5] == ["mpirun.mpich", "-np", "2", "ch-run", "IMG"]


def test_charliecloud_mounts_the_squashfs_on_a_folder_made_beside_it(tmp_path):
    """Not ch-run's default mount point, which ranks starting together race to make."""
    made = charliecloud.mounted(Prepared(str(tmp_path / "image.sqfs"), "sha256:0", "py", "/b"))
    mnt = tmp_path / charliecloud.MOUNT_POINT
    assert mnt.is_dir() and made.dirs == (str(mnt),)
    rt = runtimes.get("charliecloud")
    assert rt.command(made, job(1)) == ["ch-run", f"--mount={mnt}", made.ref, "--", *PROG]


def test_shifter_nersc_form(prep):
    rt = runtimes.get("shifter")
    assert rt.command(prep, job(2)) == [
        "mpirun.mpich",
        "-np",
        "2",
        "shifter",
        "--image=docker:IMG",
        "--",
        *PROG,
    ]


def test_docker_mpirun_inside(prep, monkeypatch):
    for k in os.environ:
        if k.startswith(WORKLOAD_PREFIXES):
            monkeypatch.delenv(k)
    monkeypatch.setenv("KIT_DOCKER", "docker")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    engine.docker.cache_clear()
    argv = runtimes.get("docker").command(prep, job(2, ["--cpus=1.5"]))
    assert argv == [
        "docker",
        "run",
        "--rm",
        "--init",
        "--name",
        "kit-abc-3",
        "--user",
        f"{os.getuid()}:{os.getgid()}",
        "--network=host",
        "--ipc=host",
        "-e",
        "HOME=/tmp",
        "-e",
        "KIT_TRIAL",
        "-e",
        "OMP_NUM_THREADS",
        "--cpus=1.5",
        "IMG",
        "mpirun",
        "-np",
        "2",
        *PROG,
    ]


def test_parse_rejects_unknown_and_repeats():
    with pytest.raises(KitError, match="unknown runtime 'rkt'"):
        runtimes.parse("native,rkt")
    with pytest.raises(KitError, match="names a runtime twice"):
        runtimes.parse("singularity,apptainer")
    assert [r.name for r in runtimes.parse("native, docker")] == ["native", "docker"]


def test_data_folder_is_bound_into_every_container(prep):
    j = Job(PROG, 1, "mpirun.mpich", "kit-abc-3", [], ("/data/set",))
    assert "--volume=/data/set:/data/set" in runtimes.get("docker").command(prep, j)
    assert runtimes.get("apptainer").command(prep, j)[:3] == [
        "apptainer",
        "exec",
        "--bind=/data/set",
    ]
    ch = runtimes.get("charliecloud")
    assert ch.command(prep, j)[:2] == ["ch-run", "--bind=/data/set:/mnt"]
    assert ch.data_path("/data/set") == "/mnt"  # squashfs: only existing folders
    assert runtimes.get("shifter").command(prep, j)[:3] == [
        "shifter", "--image=docker:IMG", "--volume=/data/set:/data/set",
    ]  # fmt: skip
    assert runtimes.get("native").command(prep, j) == PROG


def test_apptainer_bind_model_swaps_in_the_host_mpi(prep):
    rt = runtimes.get("apptainer-bind")
    assert rt.arm == "singularity-bind" and rt.env == {
        "UCX_POSIX_USE_PROC_LINK": "n",
        "UCX_TLS": "^cma",
        "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    }
    library = "/usr/lib/x86_64-linux-gnu/libmpich.so.12.2.0"
    prep = dataclasses.replace(prep, options=apptainer.inject(library, "libmpich.so.12"))
    assert rt.command(prep, job(2)) == [
        "mpirun.mpich", "-np", "2", "apptainer", "exec",
        "--bind=/usr/lib/x86_64-linux-gnu/libmpich.so.12.2.0:/opt/kit/host-mpi/libmpich.so.12:ro",
        "--env=LD_LIBRARY_PATH=/opt/kit/host-mpi",
        "IMG", *PROG,
    ]  # fmt: skip
    with pytest.raises(KitError, match=r"needs the host's libnope\.so\.1"):
        apptainer.host_library("libnope.so.1")


def test_every_registered_runtime_declares_what_doctor_and_help_read():
    from kit import doctor
    from kit.image import convert

    components = set(doctor.components())
    help_text = runtimes.described()
    for name, cls in runtimes.RUNTIMES.items():
        assert cls.summary and cls.tool and cls.fix, name
        assert cls.runs in (*convert.FORMATS, "engine", "host"), name
        assert set(cls.needs) <= components, name
        assert f"  {name} " in help_text
    assert runtimes.ALIASES == {"apptainer": "singularity", "apptainer-bind": "singularity-bind"}


def test_podman_rootless_with_dockers_settings(prep, monkeypatch):
    for k in os.environ:
        if k.startswith(WORKLOAD_PREFIXES):
            monkeypatch.delenv(k)
    rt = runtimes.get("podman")
    j = Job(PROG, 2, "mpirun.mpich", "kit-abc-3", ["--cpus=1.5"], ("/data/set",))
    assert rt.command(prep, j) == [
        "podman", "run", "--rm", "--init", "--name", "kit-abc-3",
        "--userns=keep-id", "--network=host", "--ipc=host",
        "-e", "HOME=/tmp", "-e", "KIT_TRIAL", "--volume=/data/set:/data/set",
        "--cpus=1.5", "IMG", "mpirun", "-np", "2", *PROG,
    ]  # fmt: skip
    assert (rt.runs, rt.launcher(2)) == ("docker-archive", "mpirun in container")


def test_a_trials_client_talks_to_the_engine_kit_prepared_with(monkeypatch):
    """DOCKER_HOST (rootless Docker, a remote engine) reaches the docker client of every
    trial, and only the clients that read it: trials otherwise start from user_env()."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/user/1000/docker.sock")
    monkeypatch.setenv("CONTAINER_HOST", "unix:///run/podman.sock")
    assert runtimes.get("docker").client_settings() == {
        "DOCKER_HOST": "unix:///run/user/1000/docker.sock"
    }
    assert runtimes.get("podman").client_settings()["CONTAINER_HOST"] == "unix:///run/podman.sock"
    assert runtimes.get("singularity").client_settings() == {}
    assert "DOCKER_HOST" not in base.user_env()


def test_podman_loads_a_rebuilt_image_and_removes_the_one_it_replaced(tmp_path, monkeypatch):
    """Each rebuild loaded into Podman's store would otherwise leave a 2 GB image behind
    (48 GB on a test machine before this): the image the tag named before goes, without
    --force, so one still tagged otherwise or in use stays. The same image: no load."""
    calls = tmp_path / "calls"
    fake = tmp_path / "podman"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n[ "$1" = image ] && echo "$HELD"\nexit 0\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    art = convert.Artifacts("sha256:" + "b" * 64, tmp_path)
    art.tar.write_bytes(b"")  # converted before: loaded from the cache's archive
    podman = runtimes.get("podman")
    monkeypatch.setenv("HELD", "a" * 64)
    assert podman._load("localhost/kit/x:1", art, "kit/x:1") == "localhost/kit/x:1"
    assert calls.read_text().splitlines() == [
        "image inspect --format {{.Id}} localhost/kit/x:1",
        f"load --quiet --input {tmp_path / 'image.tar'}",
        f"rmi {'a' * 64}",
    ]
    calls.unlink()
    monkeypatch.setenv("HELD", "b" * 64)
    podman._load("localhost/kit/x:1", art)
    assert calls.read_text().splitlines() == ["image inspect --format {{.Id}} localhost/kit/x:1"]


def test_podman_loads_an_image_not_converted_from_the_engine_keeping_no_copy(tmp_path, monkeypatch):
    """No archive in the cache: `docker save` streams into `podman load`, so the cache
    does not keep a second copy of every image beside Podman's store."""
    calls = tmp_path / "calls"
    fake = tmp_path / "podman"
    fake.write_text(f'#!/bin/sh\necho "$* $(cat | wc -c)" >> {calls}\nexit 0\n')
    fake.chmod(0o755)
    docker = tmp_path / "docker"
    docker.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nprintf archive\n')
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("KIT_DOCKER", str(docker))
    engine.docker.cache_clear()
    art = convert.Artifacts("sha256:" + "b" * 64, tmp_path / "none")
    runtimes.get("podman")._load("localhost/kit/x:1", art, "kit/x:1")
    engine.docker.cache_clear()
    said = calls.read_text().splitlines()
    assert said[0].startswith("image inspect --format {{.Id}} localhost/kit/x:1")
    assert "save kit/x:1" in said and "load --quiet 7" in said
    assert not art.tar.exists()


def test_each_runtime_names_its_helpers_as_proc_gives_their_names():
    """A helper is found by the name /proc/PID/stat gives (15 characters at most, no
    path): a longer or path-like name would never match, and the helper's CPU would read
    as outside load. The runtimes that run through an engine or a FUSE mount declare
    theirs."""
    for name, cls in runtimes.RUNTIMES.items():
        assert all(0 < len(h) <= 15 and "/" not in h for h in cls.helpers), name
    assert "containerd-shim" in runtimes.get("docker").helpers
    assert {"conmon", "fuse-overlayfs", "slirp4netns"} <= set(runtimes.get("podman").helpers)
    for rt in ("singularity", "charliecloud", "podman-hpc", "podman-hpc-shared"):
        assert "squashfuse_ll" in runtimes.get(rt).helpers
    assert {"conmon", "fuse-overlayfs"} <= set(runtimes.get("podman-hpc").helpers)
    assert runtimes.get("native").helpers == ()


def test_a_variable_no_program_could_start_with_is_refused_before_the_first_trial(
    monkeypatch,
):
    """5 MB of OMP_* variables: the native trial ran, the Docker trial failed with
    "argument list too long" and an empty cause."""
    monkeypatch.setenv("OMP_HUGE", "x" * base.ARG_STRLEN)
    with pytest.raises(KitError) as one:
        base.check_env(base.user_env())
    assert str(one.value) == (
        f"the variable OMP_HUGE holds {base.ARG_STRLEN + 10} bytes, more than the "
        f"{base.ARG_STRLEN} one variable may hold in a program's start (Linux's "
        "MAX_ARG_STRLEN); unset or shorten it before kit run"
    )
    monkeypatch.delenv("OMP_HUGE")
    for i in range(8):
        monkeypatch.setenv(f"OMP_BIG{i}", "x" * (base.ARG_STRLEN // 2))
    with pytest.raises(KitError, match=r"hold \d+ bytes \(largest: OMP_BIG"):
        base.check_env(base.user_env())
