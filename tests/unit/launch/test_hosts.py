"""Host lists over ssh (kit run --hosts): the list, the launchers' exact argv, and one line
for each way a host can fail before the first trial (a stand-in ssh on PATH)."""

import os
from pathlib import Path

import pytest

from kit import runtimes
from kit.core.errors import KitError
from kit.launch import hosts, launchers, supervise
from kit.runtimes import Job, Prepared
from kit.runtimes.base import WORKLOAD_PREFIXES, Leftovers

from .test_launchers import Started


def test_a_host_list_from_the_command_line_or_a_file(tmp_path):
    assert hosts.parse("n1, n2", None) == ("n1", "n2")
    assert hosts.parse(None, None) == ()
    f = tmp_path / "hostfile"
    f.write_text("# the nodes\nn1:4\nn2 slots=8  # Open MPI's form\n\n10.0.0.3\n")
    assert hosts.parse(None, f) == ("n1", "n2", "10.0.0.3")
    for args, said in (
        (("n1,n1", None), "names a host twice"),
        (("n1,-oProxyCommand=x", None), "'-oProxyCommand=x' is not a host name or address"),
        ((" , ", None), "names no host"),
        (("n1", f), "give --hosts or --hostfile, not both"),
        ((None, tmp_path / "none"), r"unreadable \(No such file or directory\); give a text"),
    ):
        with pytest.raises(KitError, match=said):
            hosts.parse(*args)


@pytest.mark.parametrize("address", ["fe80::1", "[fe80::1]:2", "::1", "fe80::1%eth0"])
def test_an_ipv6_address_is_refused_naming_the_fix(tmp_path, address):
    """mpirun's host lists (Hydra's -hosts, Open MPI's -H) read a ':' as a slot count's:
    --hosts refused an IPv6 address as no host name, and a --hostfile's fe80::1 was cut
    to a host named fe80."""
    f = tmp_path / "hostfile"
    f.write_text(f"n1\n{address}  # the second node\n")
    for given, where in (((f"n1,{address}", None), f"--hosts 'n1,{address}'"),
                         ((None, f), f"--hostfile {f}")):  # fmt: skip
        with pytest.raises(KitError) as e:
            hosts.parse(*given)
        assert str(e.value) == (
            f"{where}: '{address}' is an IPv6 address, which mpirun's host list cannot carry "
            "(a ':' there starts a slot count); give the host's name (one /etc/hosts or DNS "
            "gives it)"
        )


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "--hostfile /dev/zero: larger than 1 MiB, the most kit reads of it; give a text "
               "file of host names, one a line"),
        (b"n1\n\xff\xfe\x00\n", "--hostfile {f}: not UTF-8 text (byte 3); give a text file"),
        (b"n1\n\x1b[2Jn2\n", "--hostfile {f}: '\\x1b[2Jn2' is not a host name or address"),
    ],
)  # fmt: skip
def test_a_host_file_that_is_a_device_or_binary_is_one_line(tmp_path, content, said):
    """/dev/zero was read whole (23 GB, then out of memory); a binary was a traceback."""
    f = Path("/dev/zero") if content is None else tmp_path / "hosts"
    if content is not None:
        f.write_bytes(content)
    with pytest.raises(KitError) as e:
        hosts.parse(None, f)
    assert str(e.value).startswith(said.format(f=f)) and "\n" not in str(e.value)


def test_each_flavour_starts_one_rank_a_host_over_ssh():
    two = ("kitn1", "kitn2")
    route = ("kitbr0", "10.77.0.0/24")
    assert hosts.launcher_argv("mpich", "mpirun.mpich", two, 2, route, ["KIT_TRIAL"]) == [
        "mpirun.mpich", "-launcher", "ssh", "-hosts", "kitn1,kitn2", "-iface", "kitbr0",
        "-np", "2",
    ]  # fmt: skip
    assert hosts.launcher_argv("openmpi", "mpirun.openmpi", two, 4, route, ["KIT_TRIAL", "U"]) == [
        "mpirun.openmpi", "-H", "kitn1,kitn2", "--map-by", "node", "--oversubscribe",
        "--mca", "oob_tcp_if_include", "10.77.0.0/24",
        "--mca", "btl_tcp_if_include", "10.77.0.0/24",
        "-x", "KIT_TRIAL", "-x", "U", "-np", "4",
    ]  # fmt: skip
    pmix = (("PMIX_MCA_psec", "none"), ("PMIX_MCA_gds", "hash"))  # podman-hpc's ranks
    argv = hosts.launcher_argv("openmpi", "mpirun.openmpi", two, 2, route, ["PMIX_MCA_psec"],
                               None, pmix)  # fmt: skip
    at = argv.index("orte_launch_agent")
    assert argv[at - 1 : at + 2] == [
        "--mca", "orte_launch_agent", "env PMIX_MCA_psec=none PMIX_MCA_gds=hash orted",
    ]  # fmt: skip


def test_a_host_list_trial_runs_each_rank_in_the_runtime_on_its_host(monkeypatch):
    def start(argv, *args):
        raise Started(argv)

    monkeypatch.setattr(supervise, "run", start)
    monkeypatch.setattr(hosts, "interface", lambda host: "kitbr0")
    monkeypatch.setattr(hosts, "subnet", lambda iface: "10.77.0.0/24")
    rt = runtimes.get("singularity")
    prep = Prepared("/c/image.sif", "sha256:1", "/opt/kit/venv/bin/python", "/b")
    job = Job(["/opt/kit/venv/bin/python", "/b/mpi_bench.py"], 2, "mpirun.mpich", "kit-t1")
    with pytest.raises(Started) as started:
        launchers.Hosts(("kitn1", "kitn2"), "mpich").run(rt, prep, job, {"KIT_TRIAL": "t"}, 60, "")
    assert started.value.args[0] == [
        "mpirun.mpich", "-launcher", "ssh", "-hosts", "kitn1,kitn2", "-iface", "kitbr0",
        "-np", "2", "apptainer", "exec", "/c/image.sif", *job.program,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "user"),
    [("podman", ["--userns=keep-id"]), ("docker", ["--user", f"{os.getuid()}:{os.getgid()}"])],
)
def test_an_engine_on_a_host_list_runs_a_container_per_rank_and_clears_them_after(
    monkeypatch, name, user
):
    """Each host's own engine: Hydra gives ranks a TCP port (-pmi-port), each rank's
    container gets its variables by name, and after the trial that trial's containers
    are found and removed on every host (a killed client leaves its container running)."""
    cleared = []

    def start(argv, env, timeout, name, cleanup, *args):
        cleanup()
        raise Started(argv)

    monkeypatch.setattr(supervise, "run", start)
    monkeypatch.setattr(hosts, "interface", lambda host: "kitbr0")
    monkeypatch.setattr(hosts, "subnet", lambda iface: "10.77.0.0/24")
    monkeypatch.setattr(hosts, "source", lambda host: "10.77.0.254")
    monkeypatch.setattr(hosts, "clear", lambda names, left: cleared.append((names, left)))
    for k in list(os.environ):
        if k.startswith(WORKLOAD_PREFIXES):
            monkeypatch.delenv(k)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    rt = runtimes.get(name)
    monkeypatch.setattr(rt, "cleanup", lambda job: None)
    prep = Prepared("localhost/kit/p:1", "sha256:1", "/opt/kit/venv/bin/python", "/b")
    job = Job(["/opt/kit/venv/bin/python", "/b/mpi_bench.py"], 2, "mpirun.mpich", "kit-t1")
    two = ("kitn1", "kitn2")
    with pytest.raises(Started) as started:
        launchers.Hosts(two, "mpich").run(rt, prep, job, {"KIT_TRIAL": "t"}, 60, "")
    assert started.value.args[0] == [
        "mpirun.mpich", "-launcher", "ssh", "-hosts", "kitn1,kitn2",
        "-localhost", "10.77.0.254", "-pmi-port", "-np", "2",
        name, "run", *user, "--rm", "--label=kit.trial=kit-t1",
        "--network=host", "--ipc=host", "--pid=host",
        "-e", "HOME=/tmp", "-e", "KIT_TRIAL", "--env=PMI_SIZE=2", "-e", "PMI_PORT",
        "-e", "PMI_ID", "-e", "MPI_LOCALNRANKS", "-e", "MPI_LOCALRANKID",
        "-e", "MPIR_CVAR_CH3_INTERFACE_HOSTNAME",
        "--env=UCX_POSIX_USE_PROC_LINK=n", "--env=UCX_TLS=^cma",
        "--env=OMPI_MCA_btl_vader_single_copy_mechanism=none",
        "-e", "OMP_NUM_THREADS", "localhost/kit/p:1", *job.program,
    ]  # fmt: skip
    assert cleared == [
        (two, Leftovers(
            [name, "ps", "--all", "--quiet", "--filter", "label=kit.trial=kit-t1"],
            [name, "rm", "--force"],
        ))
    ]  # fmt: skip
    assert rt.identity(prep) == [name, "image", "inspect", "--format", "{{.Id}}", prep.ref]
    with pytest.raises(KitError, match=rf"^runtime '{name}' under --hosts runs MPICH images"):
        launchers.Hosts(two, "openmpi").check_prepared(rt, prep)


def test_docker_on_a_host_list_needs_an_engine_on_each_host(monkeypatch):
    """One engine answering for two hosts (a shared socket, DOCKER_HOST) would run every
    rank in its own namespaces: refused with one line, as is a host with no engine."""
    rt = runtimes.get("docker")
    prep = Prepared("kit/p:1", "sha256:1", "/py", "/b")
    monkeypatch.setattr(hosts, "holds", lambda host, argv, here: True)
    for ids, said in (
        ({"kitn1": "ENG-A", "kitn2": "ENG-A"}, "runtime 'docker' under --hosts needs an engine "
         "on each host; 'kitn1' and 'kitn2' answer from the same one (ENG-A), whose containers "
         "run in its own namespaces, not the hosts': use podman, or a hybrid runtime"),
        ({"kitn1": "ENG-A", "kitn2": ""}, "host 'kitn2': the Docker engine does not answer there "),
    ):  # fmt: skip
        monkeypatch.setattr(hosts, "engines", lambda names, argv, ids=ids: ids)
        with pytest.raises(KitError) as e:
            launchers.Hosts(("kitn1", "kitn2"), "mpich").check_prepared(rt, prep)
        assert str(e.value).startswith(said)
    monkeypatch.setattr(hosts, "engines", lambda names, argv: {"kitn1": "A", "kitn2": "B"})
    launchers.Hosts(("kitn1", "kitn2"), "mpich").check_prepared(rt, prep)


def fake_ssh(folder: Path, monkeypatch, said: str, rc: int) -> None:
    ssh = folder / "ssh"
    ssh.write_text(f"#!/bin/sh\necho '{said}' >&2\nexit {rc}\n")
    ssh.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))


@pytest.mark.parametrize(
    ("said", "line"),
    [
        (
            "Host key verification failed.",
            "host 'kitn2': ssh does not accept its host key (Host key verification failed.); "
            "check the key it offers, then add it to ~/.ssh/known_hosts (ssh-keyscan kitn2)",
        ),
        (
            "kit@kitn2: Permission denied (publickey).",
            "host 'kitn2' refused this user's ssh key (kit@kitn2: Permission denied (publickey).)"
            "; kit needs ssh without a password: add your public key to ~/.ssh/authorized_keys "
            "there",
        ),
        (
            "ssh: connect to host kitn2 port 22: No route to host",
            "host 'kitn2' cannot be reached over ssh (ssh: connect to host kitn2 port 22: No "
            "route to host); check its name and that sshd runs there",
        ),
    ],
)
def test_each_way_a_host_fails_is_one_line(tmp_path, monkeypatch, said, line):
    fake_ssh(tmp_path, monkeypatch, said, 255)
    with pytest.raises(KitError) as e:
        hosts.reach("kitn2")
    assert str(e.value) == line


def test_a_node_without_the_image_is_refused_before_the_first_trial(tmp_path, monkeypatch):
    """The conversion's manifest (its image digest) must be on every host, byte for byte."""
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"digest": "sha256:1"}')
    prep = Prepared(str(tmp_path / "image.sif"), "sha256:1", "/py", "/b")
    seen = {"kitn1": manifest.read_bytes(), "kitn2": b'{"digest": "sha256:0"}'}
    monkeypatch.setattr(hosts, "holds", lambda host, argv, here: seen[host] == here)
    rt = runtimes.get("charliecloud")
    assert rt.identity(prep) == ["cat", str(manifest)]
    with pytest.raises(KitError, match=r"^host 'kitn2' lacks what runtime 'charliecloud' runs"):
        launchers.Hosts(("kitn1", "kitn2"), "mpich").check_prepared(rt, prep)
    seen["kitn2"] = seen["kitn1"]
    launchers.Hosts(("kitn1", "kitn2"), "mpich").check_prepared(rt, prep)


def test_the_bind_models_host_library_must_be_on_every_host_too(tmp_path):
    """singularity-bind binds a staged copy of the host's MPI library into each rank: the
    nodes must hold it as well as the SIF, both compared by content."""
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"digest": "sha256:1"}')
    lib = tmp_path / "host-mpi" / "libmpich.so.12"
    prep = Prepared(str(tmp_path / "image.sif"), "sha256:1", "/py", "/b", files=(str(lib),))
    rt = runtimes.get("singularity-bind")
    assert rt.identity(prep) == ["sha256sum", str(manifest), str(lib)]
    assert hosts.answer(rt.identity(prep)) is None  # the library is not there: no answer
    lib.parent.mkdir()
    lib.write_bytes(b"\x7fELF")
    assert hosts.answer(rt.identity(prep)).decode().split()[1::2] == [str(manifest), str(lib)]


def test_a_folder_a_host_cannot_make_is_one_line(tmp_path, monkeypatch):
    fake_ssh(tmp_path, monkeypatch, "mkdir: cannot create directory /c/ch-mnt: Read-only", 1)
    hosts.make_dirs("kitn2", ())  # nothing asked: no ssh
    with pytest.raises(KitError) as e:
        hosts.make_dirs("kitn2", ("/c/ch-mnt",))
    assert str(e.value) == (
        "host 'kitn2': cannot make /c/ch-mnt (mkdir: cannot create directory /c/ch-mnt: "
        "Read-only); make it writable there, or share the folder with the nodes"
    )
