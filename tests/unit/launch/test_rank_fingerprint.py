"""A user's command's fingerprint read from the host, from a fake /proc and /sys: which
process is its first rank, and which of its facts come from where (its own /proc files,
the files it sees through /proc/PID/root, this host's cgroup tree)."""

import hashlib
from pathlib import Path

import fingerprint
import pytest

from kit.launch import proctree, rank_fingerprint

PROGRAM = ["python3", "train.py", "--epochs", "1"]
LIB = "/usr/lib/x86_64-linux-gnu/libgomp.so.1"
ELF = b"\x7fELF\x02\x01" + bytes(100)  # no build-id note: identified by its sha256


def write(root: Path, path: str, data: str | bytes) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data.encode() if isinstance(data, str) else data)


def process(proc: Path, pid: int, argv: list[str], start: int, env=(), state="S") -> None:
    """A process as /proc shows it: its argv, environment and stat (state, start time)."""
    write(proc, f"{pid}/cmdline", "".join(f"{a}\0" for a in argv))
    write(proc, f"{pid}/environ", "".join(f"{e}\0" for e in env))
    fields = [state, "1", *["0"] * 17, str(start), "0"]
    write(proc, f"{pid}/stat", f"{pid} ({Path(argv[0]).name[:15]}) {' '.join(fields)}")


def test_a_process_runs_the_program_as_given_or_behind_its_scripts_interpreter():
    assert proctree.runs(PROGRAM, PROGRAM)
    assert proctree.runs(["/usr/bin/python3", *PROGRAM[1:]], PROGRAM)  # found on PATH
    script = ["train.sh", "--epochs", "1"]
    assert proctree.runs(["/bin/bash", "/opt/bin/train.sh", "--epochs", "1"], script)  # #!
    assert proctree.runs(["/usr/bin/env", "-S", "/opt/bin/train.sh", "--epochs", "1"], script)
    assert not proctree.runs(["mpirun", "-np", "2", *PROGRAM], PROGRAM)  # launchers end with it
    assert not proctree.runs(["docker", "run", "--rm", "img", *PROGRAM], PROGRAM)
    assert not proctree.runs(["python3", "train.py", "--epochs", "2"], PROGRAM)


def test_the_first_rank_is_the_lowest_ranked_process_running_the_program(tmp_path):
    process(tmp_path, 10, ["mpirun", "-np", "2", *PROGRAM], 100)
    process(tmp_path, 12, PROGRAM, 110, ["PMI_RANK=1"])
    process(tmp_path, 13, PROGRAM, 111, ["PMI_RANK=0", "OMP_NUM_THREADS=2"])
    process(tmp_path, 14, PROGRAM, 150, ["PMI_RANK=0"])  # a worker it forked: same argv
    process(tmp_path, 15, PROGRAM, 90, ["PMI_RANK=0"], state="Z")  # ended
    pids = [10, 12, 13, 14, 15, 16]  # 16 gone
    assert proctree.first_rank(pids, PROGRAM, str(tmp_path)) == (13, "111")


def test_one_rank_is_the_process_running_the_program_not_its_launcher(tmp_path):
    process(tmp_path, 20, ["docker", "run", "-e", "KIT_TRIAL", "img", *PROGRAM], 100)
    process(tmp_path, 31, PROGRAM, 120, ["KIT_TRIAL=t"])  # in the container
    assert proctree.first_rank([20, 31], PROGRAM, str(tmp_path)) == (31, "120")
    assert proctree.first_rank([20], PROGRAM, str(tmp_path)) is None


@pytest.fixture
def rank(tmp_path: Path):
    """Process 7 in a fake /proc, its root file system under /proc/7/root, and the host's
    /sys with its cgroup; take() reading them."""
    proc, sys_root = tmp_path / "proc", tmp_path / "sys"
    process(proc, 7, PROGRAM, 300, ["OMP_NUM_THREADS=2", "HOME=/root"])
    write(proc, "7/maps", f"7f00-7f01 r-xp 00000000 08:01 11 {LIB}\n")
    write(proc, "7/status", "Threads:\t5\nSeccomp:\t2\nCpus_allowed_list:\t0-1\n")
    write(proc, "7/cgroup", "0::/system.slice/docker-abc.scope\n")  # as this host names it
    write(proc, "7/limits", "Max open files            1024                 4096      files\n")
    root = proc / "7" / "root"
    write(root, LIB, ELF)
    write(root, "/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    write(root, "/sys/devices/system/cpu/online", "0-1\n")
    (root / "dev" / "shm").mkdir(parents=True)
    write(sys_root, "/fs/cgroup/system.slice/docker-abc.scope/cpu.max", "150000 100000\n")
    write(sys_root, "/fs/cgroup/system.slice/docker-abc.scope/memory.max", "max\n")
    write(sys_root, "/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n")
    fingerprint._ids.clear()
    return lambda: rank_fingerprint.take(7, "300", str(proc), str(sys_root))


def test_facts_come_from_the_rank_its_file_system_and_this_hosts_cgroup_tree(rank):
    fp = rank()
    ident = f"{len(ELF)} sha256:{hashlib.sha256(ELF).hexdigest()[:12]}"  # read through its root
    assert fp["libraries"] == {"/usr/lib/x86_64-linux-gnu": {"libgomp.so.1": ident}}
    assert fp["environment"] == {"OMP_NUM_THREADS": "2"}
    limits = fp["limits"]
    assert limits["cpu.max"] == "150000 100000" and limits["memory.max"] == "max"
    assert limits["thp_enabled"] == "madvise"  # as the container sees it, not the host's /sys
    assert limits["cores_seen"] == 2 and limits["shm_bytes"] > 0
    assert limits["seccomp"] == "2" and limits["affinity"] == "0-1"
    assert limits["ulimit_nofile"] == "1024/4096"
    assert fp["threads"] == {"process": 5}  # no framework of kit's own is asked


def test_what_its_root_does_not_show_is_left_out(rank, tmp_path):
    (tmp_path / "proc" / "7" / "root").rename(tmp_path / "elsewhere")  # not readable by us
    fp = rank()
    assert fp["libraries"] == {"/usr/lib/x86_64-linux-gnu": {"libgomp.so.1": ""}}
    assert not {"thp_enabled", "thp_defrag", "cores_seen", "shm_bytes"} & fp["limits"].keys()
    assert fp["limits"]["cpu.max"] == "150000 100000"  # the host's view of its cgroup


def test_a_rank_that_ended_while_it_was_read_has_none(rank, tmp_path):
    process(tmp_path / "proc", 7, PROGRAM, 300, state="Z")
    assert rank() is None
    process(tmp_path / "proc", 7, PROGRAM, 301)  # another process, its pid reused
    assert rank() is None
