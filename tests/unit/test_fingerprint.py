"""A launch's fingerprint (benchmarks/fingerprint.py), fact by fact, from a fake /proc and
/sys: each field is read from the files a launch sees, and what is missing is left out."""

import argparse
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import fingerprint
import kitbench
import kitschema
import pytest

LIB = "/usr/lib/x86_64-linux-gnu"
BUILD_ID = bytes(range(20))


def elf(build_id: bytes, wide: bool = True) -> bytes:
    """A minimal little-endian ELF whose one program header is a PT_NOTE holding the GNU
    build-id note (64- or 32-bit layout)."""
    note = struct.pack("<III", 4, len(build_id), 3) + b"GNU\0" + build_id
    ident = b"\x7fELF" + bytes([2 if wide else 1, 1, 1]) + bytes(9)
    if wide:
        head = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, 1, 64, 0, 0)
        return head + struct.pack("<IIQQQQQQ", 4, 4, 120, 0, 0, len(note), len(note), 4) + note
    head = ident + struct.pack("<HHIIIIIHHHHHH", 3, 3, 1, 0, 52, 0, 0, 52, 32, 1, 40, 0, 0)
    return head + struct.pack("<IIIIIIII", 4, 84, 0, 0, len(note), len(note), 4, 4) + note


def write(root: Path, path: str, data: str | bytes) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data.encode() if isinstance(data, str) else data)


@pytest.fixture
def fake(tmp_path: Path) -> SimpleNamespace:
    """Empty /proc, /sys and file-system roots, and take() reading from them."""
    roots = SimpleNamespace(proc=tmp_path / "proc", sys=tmp_path / "sys", files=tmp_path / "fs")
    for root in vars(roots).values():
        root.mkdir()
    (roots.proc / "self").mkdir()
    fingerprint._ids.clear()

    def take(known=None, modules=None) -> dict:
        return fingerprint.take(
            known,
            proc=str(roots.proc),
            sys_root=str(roots.sys),
            files=str(roots.files),
            modules=modules or {},
        )

    roots.take = take
    return roots


def test_libraries_are_each_mapped_object_by_folder_with_size_and_build_id(fake):
    write(fake.files, f"{LIB}/libgomp.so.1", elf(BUILD_ID))
    write(fake.files, "/lib32/libold.so", elf(BUILD_ID[::-1], wide=False))
    stripped = os.urandom(3000)  # no ELF: sha256 of the first MiB
    write(fake.files, "/opt/venv/lib/_ext.cpython-311-x86_64-linux-gnu.so", stripped)
    write(fake.files, "/usr/bin/python3.11", elf(b"\xaa" * 20))
    (fake.proc / "self" / "exe").symlink_to("/usr/bin/python3.11")
    write(fake.proc, "self/maps", "\n".join([
        f"7f00-7f01 r-xp 00000000 08:01 11 {LIB}/libgomp.so.1",
        f"7f01-7f02 r--p 00001000 08:01 11 {LIB}/libgomp.so.1",  # mapped twice: listed once
        "7f02-7f03 r-xp 00000000 08:01 12 /lib32/libold.so",
        "7f03-7f04 r-xp 00000000 08:01 13 /opt/venv/lib/_ext.cpython-311-x86_64-linux-gnu.so",
        "5500-5501 r-xp 00000000 08:01 14 /usr/bin/python3.11",
        "7f05-7f06 rw-p 00000000 00:00 0 ",
        "7f06-7f07 r--p 00000000 08:01 15 /usr/lib/locale/locale-archive",
        "7f07-7f08 r-xp 00000000 08:01 16 /tmp/gone.so (deleted)",
        "7ffc-7ffd rw-p 00000000 00:00 0 [stack]",
    ]) + "\n")  # fmt: skip
    assert fake.take()["libraries"] == {
        "/lib32": {"libold.so": f"{len(elf(BUILD_ID, False))} {BUILD_ID[::-1].hex()[:12]}"},
        "/opt/venv/lib": {
            "_ext.cpython-311-x86_64-linux-gnu.so": "3000 sha256:"
            + hashlib.sha256(stripped).hexdigest()[:12]
        },
        "/tmp": {"gone.so (deleted)": ""},
        "/usr/bin": {"python3.11": f"{len(elf(b'x' * 20))} {'aa' * 6}"},
        LIB: {"libgomp.so.1": f"{len(elf(BUILD_ID))} {BUILD_ID.hex()[:12]}"},
    }


def test_a_folder_of_hundreds_of_libraries_is_folded_to_keep_the_record_small(fake):
    """Debian's torch maps 250 libraries from /usr/lib/<arch>: that folder becomes one
    entry (how many, a digest of their names and ids) while the small ones stay listed."""
    lines = []
    for i in range(300):
        write(fake.files, f"{LIB}/libx{i:03d}.so", elf(bytes([i % 256]) * 20))
        lines.append(f"7f00-7f01 r-xp 00000000 08:01 {i} {LIB}/libx{i:03d}.so")
    write(fake.files, "/opt/venv/lib/libtorch_cpu.so", elf(BUILD_ID))
    lines.append("7f02-7f03 r-xp 00000000 08:01 999 /opt/venv/lib/libtorch_cpu.so")
    write(fake.proc, "self/maps", "\n".join(lines) + "\n")
    libraries = fake.take()["libraries"]
    assert len(json.dumps(libraries)) <= fingerprint.LIBRARIES_BYTES
    assert list(libraries[LIB]) == ["*"] and libraries[LIB]["*"].startswith("300 libraries sha256:")
    assert libraries["/opt/venv/lib"] == {
        "libtorch_cpu.so": f"{len(elf(BUILD_ID))} {BUILD_ID.hex()[:12]}"
    }
    write(fake.files, f"{LIB}/libx007.so", elf(b"\x01" * 20))  # one of them rebuilt
    fingerprint._ids.clear()
    assert fake.take()["libraries"][LIB] != libraries[LIB]


def test_shadowed_are_files_on_the_loaders_path_named_as_a_library_mapped_from_elsewhere(fake):
    system = f"/usr/lib/{os.uname().machine}-linux-gnu"
    wheel = "/opt/venv/torch/lib"
    for folder, build in ((wheel, b"\x01" * 20), (system, b"\x02" * 20), ("/lib64", b"\x03" * 20)):
        write(fake.files, f"{folder}/libtorch_cpu.so", elf(build))
    write(fake.files, f"{system}/libc.so.6", elf(BUILD_ID))  # mapped from the system: none
    (fake.files / "usr" / "lib" / "python3.11").mkdir(parents=True)  # a folder: none
    write(fake.files, "/usr/bin/python3.11", elf(BUILD_ID))
    (fake.proc / "self" / "exe").symlink_to("/usr/bin/python3.11")
    write(fake.proc, "self/maps", "".join(
        f"7f0{i}-7f1{i} r-xp 00000000 08:01 1{i} {path}\n"
        for i, path in enumerate([f"{wheel}/libtorch_cpu.so", f"{system}/libc.so.6",
                                  "/usr/bin/python3.11"])
    ))  # fmt: skip
    size = len(elf(BUILD_ID))
    assert fake.take()["shadowed"] == {
        f"{system}/libtorch_cpu.so": f"{size} {'02' * 6}",
        "/lib64/libtorch_cpu.so": f"{size} {'03' * 6}",
    }


def test_environment_is_the_tuning_variables_the_launch_started_with(fake):
    env = [
        "OMP_NUM_THREADS=2", "KMP_AFFINITY=compact", "LD_LIBRARY_PATH=/opt/x", "UCX_TLS=sm",
        "OMPI_MCA_btl=self,vader", "NCCL_DEBUG=WARN", "GLIBC_TUNABLES=glibc.malloc.arena_max=2",
        "HOME=/tmp", "PATH=/bin", "KIT_TRIAL=kit-1-2",  # no tuning
        "OMPI_COMM_WORLD_RANK=0", "OMPI_MCA_orte_hnp_uri=123.0;tcp://10.0.0.1:4000",  # identity
    ]  # fmt: skip
    write(fake.proc, "self/environ", "\0".join(env) + "\0")
    assert fake.take()["environment"] == {
        "GLIBC_TUNABLES": "glibc.malloc.arena_max=2",
        "KMP_AFFINITY": "compact",
        "LD_LIBRARY_PATH": "/opt/x",
        "NCCL_DEBUG": "WARN",
        "OMPI_MCA_btl": "self,vader",
        "OMP_NUM_THREADS": "2",
        "UCX_TLS": "sm",
    }


STATUS = """Name:\tpython3
Threads:\t7
Seccomp:\t2
Seccomp_filters:\t1
Speculation_Store_Bypass:\tthread force mitigated
SpeculationIndirectBranch:\tconditional enabled
Cpus_allowed_list:\t0-1,3
"""


def test_affinity_and_the_cores_the_system_shows(fake):
    write(fake.proc, "self/status", STATUS)
    write(fake.sys, "devices/system/cpu/online", "0-5,8\n")
    limits = fake.take()["limits"]
    assert (limits["affinity"], limits["cores_seen"]) == ("0-1,3", 7)


def test_seccomp_mode_filters_and_the_speculation_mitigations_it_brings(fake):
    write(fake.proc, "self/status", STATUS)
    limits = fake.take()["limits"]
    assert {k: v for k, v in limits.items() if k.startswith(("secc", "spec"))} == {
        "seccomp": "2",
        "seccomp_filters": "1",
        "speculation_store_bypass": "thread force mitigated",
        "speculation_indirect_branch": "conditional enabled",
    }


def test_cgroup_limits_are_the_tightest_on_the_way_to_the_root(fake):
    write(fake.proc, "self/cgroup", "0::/kit.slice/job/step\n")
    write(fake.sys, "fs/cgroup/kit.slice/job/step/cpu.max", "max 100000\n")
    write(fake.sys, "fs/cgroup/kit.slice/job/cpu.max", "150000 100000\n")
    write(fake.sys, "fs/cgroup/kit.slice/cpu.max", "400000 100000\n")
    write(fake.sys, "fs/cgroup/kit.slice/job/step/memory.max", "max\n")
    assert {k: v for k, v in fake.take()["limits"].items() if k.endswith(".max")} == {
        "cpu.max": "150000 100000",
        "memory.max": "max",
    }


def test_a_containers_own_cgroup_is_its_namespaces_root(fake):
    write(fake.proc, "self/cgroup", "0::/\n")
    write(fake.sys, "fs/cgroup/cpu.max", "200000 100000\n")
    write(fake.sys, "fs/cgroup/memory.max", "1073741824\n")
    limits = fake.take()["limits"]
    assert (limits["cpu.max"], limits["memory.max"]) == ("200000 100000", "1073741824")


def test_cgroup_v1_limits_are_written_the_v2_way(fake):
    # Docker on a v1 host: the container's own cgroups mounted at each controller's root
    write(fake.proc, "self/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n")
    write(fake.sys, "fs/cgroup/cpu/cpu.cfs_quota_us", "150000\n")
    write(fake.sys, "fs/cgroup/cpu/cpu.cfs_period_us", "100000\n")
    write(fake.sys, "fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
    limits = fake.take()["limits"]
    assert (limits["cpu.max"], limits["memory.max"]) == ("150000 100000", "max")
    write(fake.sys, "fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n")
    write(fake.sys, "fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n")
    limits = fake.take()["limits"]
    assert (limits["cpu.max"], limits["memory.max"]) == ("max 100000", "1073741824")


def test_dev_shm_size_is_its_file_systems(fake):
    (fake.files / "dev" / "shm").mkdir(parents=True)
    fs = os.statvfs(fake.files / "dev" / "shm")
    assert fake.take()["limits"]["shm_bytes"] == fs.f_blocks * fs.f_frsize


def test_transparent_huge_pages_are_the_chosen_settings(fake):
    write(fake.sys, "kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    write(fake.sys, "kernel/mm/transparent_hugepage/defrag", "[always] defer madvise never\n")
    limits = fake.take()["limits"]
    assert (limits["thp_enabled"], limits["thp_defrag"]) == ("madvise", "always")


def test_ulimits_are_soft_and_hard_from_the_processes_limits(fake):
    write(fake.proc, "self/limits", (
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max cpu time              unlimited            unlimited            seconds   \n"
        "Max stack size            8388608              unlimited            bytes     \n"
        "Max processes             63260                63260                processes \n"
        "Max open files            1024                 1048576              files     \n"
        "Max locked memory         8388608              8388608              bytes     \n"
        "Max address space         unlimited            unlimited            bytes     \n"
    ))  # fmt: skip
    limits = fake.take()["limits"]
    assert {k: v for k, v in limits.items() if k.startswith("ulimit_")} == {
        "ulimit_stack": "8388608/unlimited",
        "ulimit_nproc": "63260/63260",
        "ulimit_nofile": "1024/1048576",
        "ulimit_memlock": "8388608/8388608",
        "ulimit_as": "unlimited/unlimited",
    }


def torch(cuda: bool = False) -> SimpleNamespace:
    """What the fingerprint asks of an imported torch."""
    return SimpleNamespace(
        get_num_threads=lambda: 4,
        get_num_interop_threads=lambda: 2,
        backends=SimpleNamespace(
            cpu=SimpleNamespace(get_cpu_capability=lambda: "AVX512"),
            cudnn=SimpleNamespace(version=lambda: 90100),
        ),
        cuda=SimpleNamespace(
            is_initialized=lambda: cuda,
            current_device=lambda: 0,
            get_device_name=lambda i: f"NVIDIA A100 #{i}",
            nccl=SimpleNamespace(version=lambda: (2, 21, 5)),
        ),
        version=SimpleNamespace(cuda="12.4"),
    )


def test_isa_is_the_cpus_vector_flags_atens_choice_and_what_the_benchmark_measured(fake):
    first = "processor\t: 0\nflags\t\t: fpu sse avx avx2 fma avx512f\n"
    write(fake.proc, "cpuinfo", first + "\nprocessor\t: 1\nflags\t\t: fpu amx_tile\n")
    isa = fake.take({"compile_isa": "avx512"}, {"torch": torch()})["isa"]
    assert isa == {
        "cpu_flags": "avx avx2 fma avx512f",
        "torch_cpu_capability": "AVX512",
        "compile_isa": "avx512",
    }
    assert fake.take()["isa"] == {"cpu_flags": "avx avx2 fma avx512f"}  # no torch loaded


def test_threads_are_the_processes_and_each_loaded_frameworks_pools(fake):
    write(fake.proc, "self/status", STATUS)
    pools = SimpleNamespace(
        get_intra_op_parallelism_threads=lambda: 3, get_inter_op_parallelism_threads=lambda: 1
    )
    tf = SimpleNamespace(config=SimpleNamespace(threading=pools))
    assert fake.take(modules={"torch": torch(), "tensorflow": tf})["threads"] == {
        "process": 7,
        "torch_intra_op": 4,
        "torch_inter_op": 2,
        "tf_intra_op": 3,
        "tf_inter_op": 1,
    }
    assert fake.take()["threads"] == {"process": 7}  # no framework loaded


def test_gpu_facts_only_where_a_gpu_is(fake):
    assert "gpu" not in fake.take(modules={"torch": torch(cuda=False)})
    driver = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 2024\n"
    write(fake.proc, "driver/nvidia/version", driver + "GCC version:  gcc version 12.2.0\n")
    assert fake.take(modules={"torch": torch(cuda=True)})["gpu"] == {
        "driver": "550.54.15",
        "device": "NVIDIA A100 #0",
        "cuda": "12.4",
        "cudnn": "90100",
        "nccl": "2.21.5",
    }


def test_every_fact_fails_soft(fake):
    def broken():
        raise RuntimeError("not built with it")

    odd = SimpleNamespace(get_num_threads=broken, backends=None, cuda=None)
    write(fake.proc, "self/cgroup", "0::/a\n")
    write(fake.sys, "fs/cgroup/a/cpu.max", "lots 100000\n")  # no number
    write(fake.sys, "devices/system/cpu/online", "\n")
    fp = fake.take(modules={"torch": odd})
    assert {k: v for k, v in fp.items() if k != "took_ms"} == {
        "version": fingerprint.VERSION,
        "libraries": {},
        "shadowed": {},
        "environment": {},
        "limits": {},
        "isa": {},
        "threads": {},
    }


def test_this_process_fingerprint_is_small_and_names_its_own_libraries():
    """Taken in a process of its own: pytest's, after the tests that import scipy, maps
    so many libraries that libc's folder is folded into one entry (fingerprint._fit)."""
    code = "import json, fingerprint; print(json.dumps(fingerprint.take()))"
    env = {**os.environ, "PYTHONPATH": str(Path(fingerprint.__file__).parent)}
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    fp = json.loads(said.stdout)
    mapped = {name for names in fp["libraries"].values() for name in names}
    assert any(name.startswith("libc.so") for name in mapped)
    assert fp["limits"]["affinity"] and fp["threads"]["process"] >= 1
    assert len(json.dumps(fp)) < 16384


def test_every_record_a_benchmark_prints_carries_its_fingerprint():
    a = argparse.Namespace(
        model="tiny", batch_size=32, data="synthetic", task="throughput", dist="ddp",
        precision="fp32", data_format="nchw", warmup=5, steps=2, min_time=0.0, logdir=None,
    )  # fmt: skip
    ranks = [kitbench.rank_figures(0, 32, [0.5, 0.5], 2.0, {})]
    rec = kitbench.record(
        "torch-cnn", "torch", "2.13", "none", a, ranks, 1, [0.5, 0.5], [2.3, 2.2],
        compile=True, compile_isa="avx2",
    )  # fmt: skip
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        kitbench.emit(rec)
    printed = json.loads(out.getvalue())
    assert printed["fingerprint"]["version"] == fingerprint.VERSION
    assert printed["fingerprint"]["isa"]["compile_isa"] == "avx2"
    assert kitschema.validate(printed) == []
    del printed["fingerprint"]
    assert kitschema.validate(printed) == []  # a record before fingerprints still reads
    assert kitschema.validate({**printed, "fingerprint": "x"}) == ["fingerprint: str, want dict"]


def test_the_environment_is_bounded_and_says_what_it_cut(fake):
    """5 MB of OMP_* variables made the native trial's fingerprint 5,001,752 bytes."""
    env = [f"OMP_X{i:05d}={'v' * 1000}" for i in range(5000)] + ["OMP_NUM_THREADS=2"]
    write(fake.proc, "self/environ", "\0".join(env) + "\0")
    got = fake.take()["environment"]
    assert len(json.dumps(got)) <= fingerprint.ENVIRONMENT_BYTES
    assert got["OMP_NUM_THREADS"] == "2"  # names sort: kept before the long ones
    assert got["OMP_X00000"].startswith("1000 chars sha256:")
    assert got["*"].startswith(f"{5001 - len(got) + 1} more from OMP_X")
