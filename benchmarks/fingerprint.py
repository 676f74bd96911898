"""A launch's fingerprint: what inside one launch can make the same software run at
another speed, read where the benchmark runs (in its container, with its view of the
machine), so that the report can set one arm's launches beside another's
(kit.results.fingerprints) and name what differs.

Standard library only, Python 3.9: it runs in every image beside kitbench, which adds
it to each trial's record after the timed steps. Cheap (a few milliseconds: small files
of /proc and /sys, and each mapped library's ELF build-id note); every fact fails soft:
what cannot be read is left out, never raised. The groups are the report's: libraries
(and the files on the loader's path they shadow), environment, limits, isa, threads, and
gpu where a GPU is present. Every path is read
under roots given to take(), so the unit tests feed it fake /proc and /sys trees, and a
process can be read from outside it (/proc/PID, its files under /proc/PID/root).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import struct
import sys
import time
from collections.abc import Mapping
from typing import BinaryIO

VERSION = 1  # of the fingerprint's layout: kit.results.fingerprints compares like with like
# the variables that change what the workload's libraries do (thread pools, BLAS, oneDNN and
# ATen ISA caps, the loader, glibc, MPI and its transports, collectives, CUDA, inductor)
ENV_PREFIXES = (
    "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "DNNL_", "ONEDNN_", "ATEN_CPU_CAPABILITY",
    "GLIBC_TUNABLES", "LD_", "UCX_", "OMPI_", "MPICH_", "MPIR_CVAR_", "NCCL_", "CUDA_",
    "TORCHINDUCTOR_", "TF_ENABLE_ONEDNN_OPTS", "TF_NUM_",
)  # fmt: skip
# what Open MPI's launcher sets to name this launch (job ids, URIs, session folders, argv):
# different in every launch, and no setting
LAUNCH_IDENTITY = re.compile(
    r"OMPI_(COMM_WORLD_|UNIVERSE_SIZE|FILE_LOCATION|ARGV|COMMAND|APP_CTX_|FIRST_RANKS|"
    r"NUM_APP_CTX|MCA_(orte|ess|pmix|prte)_|MCA_initial_wdir)"
)
STATUS = {  # /proc/PID/status line -> limits key
    "Seccomp": "seccomp",
    "Seccomp_filters": "seccomp_filters",
    "Speculation_Store_Bypass": "speculation_store_bypass",
    "SpeculationIndirectBranch": "speculation_indirect_branch",
    "Cpus_allowed_list": "affinity",
}
ULIMITS = {  # /proc/PID/limits row -> ulimit name (docker run --ulimit's)
    "Max open files": "nofile",
    "Max locked memory": "memlock",
    "Max stack size": "stack",
    "Max processes": "nproc",
    "Max address space": "as",
}
VECTOR_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
ID_HEX = 12  # of a build-id or hash: tells two builds of a library apart in 48 bits
HEAD = 8192  # an ELF's first bytes: its program headers and build-id note lie there
HASHED = 1 << 20  # a library without a build-id: sha256 of its first MiB
_ids: dict[tuple, str] = {}  # (device, inode, size, mtime) -> "size id", once a process


def take(
    known: Mapping[str, str] | None = None,
    *,
    proc: str = "/proc",
    pid: str = "self",
    sys_root: str = "/sys",
    files: str = "",
    modules: Mapping[str, object] | None = None,
    cgroups: str = "",
) -> dict:
    """The fingerprint of process `pid` (this one by default): `known` holds what the
    benchmark measured of its kernels itself (torch_cnn's compile_isa), `files` prefixes
    the paths the process sees (its libraries, /dev/shm), `modules` are the frameworks
    already imported (sys.modules: none is imported here), `cgroups` is where the cgroup
    paths /proc/PID/cgroup names lie (sys_root/fs/cgroup; read from outside, the reader's
    own: the file names them in the reader's cgroup namespace)."""
    t0 = time.perf_counter()
    here = f"{proc}/{pid}"
    modules = sys.modules if modules is None else modules
    status = _fields(_read(f"{here}/status") or "")
    libraries = _libraries(here, files)
    fp: dict = {
        "version": VERSION,
        "libraries": libraries,
        "shadowed": _shadowed(libraries, files),
        "environment": _environment(here),
        "limits": _limits(here, status, sys_root, files, cgroups or f"{sys_root}/fs/cgroup"),
        "isa": _isa(proc, modules, known or {}),
        "threads": _threads(status, modules),
    }
    gpu = _gpu(proc, modules)
    if gpu:
        fp["gpu"] = gpu
    _fit(libraries)
    fp["took_ms"] = round(1000 * (time.perf_counter() - t0), 2)
    return fp


LIBRARIES_BYTES = 8 << 10  # the libraries' share of a record kept under 16 KiB a trial


def _fit(libraries: dict[str, dict[str, str]]) -> None:
    """Fold the folders of most libraries, one at a time, into one entry each ('*': how
    many and a digest of their names and ids) until the list fits LIBRARIES_BYTES: a
    process of Debian's torch maps over 300, 250 of them from /usr/lib/<arch>. A folded
    folder still tells two arms apart, not which of its files differ."""
    size = len(json.dumps(libraries))
    for folder in sorted(libraries, key=lambda d: -len(libraries[d])):
        if size <= LIBRARIES_BYTES or len(libraries[folder]) < 2:
            return
        names = libraries[folder]
        digest = hashlib.sha256(json.dumps(names, sort_keys=True).encode()).hexdigest()
        folded = {"*": f"{len(names)} libraries sha256:{digest[:ID_HEX]}"}
        size += len(json.dumps(folded)) - len(json.dumps(names))
        libraries[folder] = folded


def _read(path: str, size: int = -1) -> str | None:
    """A file's text (its first `size` characters), None where it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(size)
    except OSError:
        return None


def _soft(fn, *args) -> object:
    """fn(*args), or None whatever it raised: a framework's answer is a fact, never a fault."""
    try:
        return fn(*args)
    except Exception:
        return None


def _kept(facts: dict) -> dict:
    return {k: v for k, v in facts.items() if v is not None and v != ""}


def _fields(text: str) -> dict[str, str]:
    """'Name:<tab>value' lines (/proc/PID/status) as a dict."""
    return {k.strip(): v.strip() for k, _, v in (x.partition(":") for x in text.splitlines())}


def _libraries(here: str, files: str) -> dict[str, dict[str, str]]:
    """Each shared object mapped (and the executable), folder -> name -> 'size id'."""
    maps = _read(f"{here}/maps")
    if maps is None:
        return {}
    try:
        exe = os.readlink(f"{here}/exe")
    except OSError:
        exe = ""
    out: dict[str, dict[str, str]] = {}
    for line in maps.splitlines():
        cols = line.split(None, 5)
        path = cols[5] if len(cols) == 6 else ""
        folder, _, name = path.rpartition("/")
        if path.startswith("/") and (path == exe or ".so" in name):
            out.setdefault(folder or "/", {})[name] = ""
    return {
        folder: {name: _identity(f"{files}{folder}/{name}") for name in sorted(names)}
        for folder, names in sorted(out.items())
    }


def _shadowed(libraries: dict[str, dict[str, str]], files: str) -> dict[str, str]:
    """Files named as a library the process mapped from a folder of its own, in the
    loader's default folders: what a program linked without the process's paths loads
    instead (the host's older libtorch_cpu that fails inductor's probe, built and loaded in
    a process of its own). Path -> 'size id'."""
    arch = f"{os.uname().machine}-linux-gnu"  # the loader's order (/lib may be /usr/lib)
    system = (f"/lib/{arch}", f"/usr/lib/{arch}", "/lib", "/usr/lib", "/lib64", "/usr/lib64")
    system += ("/usr/local/lib",)
    found: dict[tuple[int, int], str] = {}  # one file by two paths: the first
    for folder, names in libraries.items():
        for name in names if folder not in system else ():
            for d in system:
                with contextlib.suppress(OSError):
                    st = os.stat(f"{files}{d}/{name}")
                    if stat.S_ISREG(st.st_mode):
                        found.setdefault((st.st_dev, st.st_ino), f"{d}/{name}")
    return {path: _identity(files + path) for path in sorted(found.values())}


def _identity(path: str) -> str:
    """'size id' of a file: its GNU build-id, else sha256 of its first MiB; '' when it
    cannot be read (deleted since it was mapped)."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            # the file, not the path: read through /proc/PID/root each trial names it anew
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if key not in _ids:
                found = _soft(_build_id, f.read(HEAD), f)
                if found:
                    found = found[:ID_HEX]
                else:
                    f.seek(0)
                    found = "sha256:" + hashlib.sha256(f.read(HASHED)).hexdigest()[:ID_HEX]
                _ids[key] = f"{st.st_size} {found}"
            return _ids[key]
    except OSError:
        return ""


# (word, e_phoff, e_phentsize, p_offset, p_filesz): offsets in a 32- and a 64-bit ELF
ELF = {1: ("I", 28, 42, 4, 16), 2: ("Q", 32, 54, 8, 32)}


def _build_id(head: bytes, f: BinaryIO) -> str | None:
    """The NT_GNU_BUILD_ID note of an ELF file, hex, from its PT_NOTE segments."""
    if head[:4] != b"\x7fELF":
        return None
    word, phoff_at, entsize_at, offset_at, size_at = ELF[head[4]]
    order = "<" if head[5] == 1 else ">"
    phoff = struct.unpack_from(order + word, head, phoff_at)[0]
    entsize, count = struct.unpack_from(order + "HH", head, entsize_at)
    for i in range(count):
        ph = _chunk(head, f, phoff + i * entsize, entsize)
        if struct.unpack_from(order + "I", ph)[0] != 4:  # PT_NOTE
            continue
        offset = struct.unpack_from(order + word, ph, offset_at)[0]
        size = struct.unpack_from(order + word, ph, size_at)[0]
        notes, at = _chunk(head, f, offset, min(size, 4096)), 0
        while at + 12 <= len(notes):
            namesz, descsz, kind = struct.unpack_from(order + "III", notes, at)
            desc = at + 12 + (namesz + 3) // 4 * 4
            if kind == 3 and notes[at + 12 : at + 15] == b"GNU":  # NT_GNU_BUILD_ID
                return notes[desc : desc + descsz].hex()
            at = desc + (descsz + 3) // 4 * 4
    return None


def _chunk(head: bytes, f: BinaryIO, at: int, size: int) -> bytes:
    """size bytes at `at`, from the head already read where it holds them."""
    if at + size <= len(head):
        return head[at : at + size]
    f.seek(at)
    return f.read(size)


def _environment(here: str) -> dict[str, str]:
    """The performance variables of the environment the process was started with."""
    try:
        with open(f"{here}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    out = {}
    for entry in raw.split(b"\0"):
        name, sep, value = entry.decode(errors="replace").partition("=")
        if sep and name.startswith(ENV_PREFIXES) and not LAUNCH_IDENTITY.match(name):
            out[name] = value
    return _bounded(dict(sorted(out.items())))


ENVIRONMENT_BYTES = 4 << 10  # the environment's share of a record kept under 16 KiB a trial
VALUE_CHARS = 256  # a longer value is kept as its length and a digest


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:ID_HEX]


def _bounded(env: dict[str, str]) -> dict[str, str]:
    """The variables as a record keeps them, in ENVIRONMENT_BYTES: a value longer than
    VALUE_CHARS as its length and digest, and past the bound the rest (in name order)
    folded into one entry '*' (how many, their first name, a digest), so that 5 MB of
    OMP_* variables made no 5 MB record. What is cut still tells two launches apart, and
    says what was cut."""
    out = {
        name: value if len(value) <= VALUE_CHARS else f"{len(value)} chars sha256:{_digest(value)}"
        for name, value in env.items()
    }
    if len(json.dumps(out)) <= ENVIRONMENT_BYTES:
        return out
    kept: dict[str, str] = {}
    size, room = 2, ENVIRONMENT_BYTES - 2 * VALUE_CHARS  # room left for the '*' entry
    names = list(out)
    for i, name in enumerate(names):
        cost = len(json.dumps({name: out[name]}))
        if len(name) > VALUE_CHARS or size + cost > room:
            rest = {n: env[n] for n in names[i:]}
            first = names[i][:64]
            kept["*"] = f"{len(rest)} more from {first}, sha256:{_digest(rest)}"
            return kept
        kept[name], size = out[name], size + cost
    return kept


def _limits(here: str, status: dict[str, str], sys_root: str, files: str, cgroups: str) -> dict:
    """What bounds the process: affinity and the cores the system shows, cgroup CPU and
    memory limits, seccomp (and the speculation mitigations it can bring), /dev/shm's
    size, transparent huge pages, ulimits."""
    facts: dict = {STATUS[k]: v for k, v in status.items() if k in STATUS}
    facts["cores_seen"] = _soft(_count, _read(f"{sys_root}/devices/system/cpu/online"))
    facts.update(_cgroup(here, cgroups))
    facts["shm_bytes"] = _soft(_size, f"{files}/dev/shm")
    for name in ("enabled", "defrag"):
        text = _read(f"{sys_root}/kernel/mm/transparent_hugepage/{name}") or ""
        chosen = re.search(r"\[(\w+)\]", text)
        facts[f"thp_{name}"] = chosen.group(1) if chosen else None
    for line in (_read(f"{here}/limits") or "").splitlines():
        row = re.match(r"(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)", line)
        if row and row.group(1) in ULIMITS:
            facts[f"ulimit_{ULIMITS[row.group(1)]}"] = f"{row.group(2)}/{row.group(3)}"
    return _kept(facts)


def _size(path: str) -> int:
    """The size of the file system at path (/dev/shm: what shared memory can fill)."""
    fs = os.statvfs(path)
    return fs.f_blocks * fs.f_frsize


def _count(cpus: str | None) -> int:
    """How many CPUs a list such as '0-3,8' names."""
    ends = (part.partition("-") for part in (cpus or "").strip().split(","))
    return sum(int(last or first) - int(first) + 1 for first, _, last in ends)


def _cgroup(here: str, cgroups: str) -> dict[str, str]:
    """cpu.max and memory.max of the process's cgroup, the tightest on the way up to the
    root (in a container's cgroup namespace, or under its v1 mounts, the container's own):
    cgroup v2's files, else v1's written the v2 way."""
    paths: dict[str, str] = {}  # controller ("" for v2) -> the process's cgroup
    for line in (_read(f"{here}/cgroup") or "").splitlines():
        controllers, _, path = line.partition(":")[2].partition(":")
        paths.update(dict.fromkeys(controllers.split(","), path.rstrip("/")))
    out = {}
    for name, controller in (("cpu.max", "cpu"), ("memory.max", "memory")):
        for v1 in (False, True):
            path = paths.get(controller if v1 else "")
            root = cgroups + (f"/{controller}" if v1 else "")
            seen = (
                [_soft(_limit, root + d, name, v1) for d in _up(path)] if path is not None else []
            )
            bound = [(b, v) for v in seen if v and (b := _soft(_bound, v)) is not None]
            if bound:
                out[name] = min(bound, key=lambda bv: bv[0])[1]
                break
    return out


def _up(path: str) -> list[str]:
    """A cgroup and those above it: '/a/b' -> ['/a/b', '/a', '']."""
    parts = [x for x in path.split("/") if x]
    return ["".join(f"/{x}" for x in parts[:i]) for i in range(len(parts), -1, -1)]


def _limit(folder: str, name: str, v1: bool) -> str | None:
    """One cgroup's limit as v2 writes it (cpu.max 'quota period', 'max' for none;
    memory.max bytes or 'max'), from v1's cpu.cfs_quota_us and cfs_period_us, and
    memory.limit_in_bytes (near 2**63 for none)."""
    if not v1:
        return (_read(f"{folder}/{name}") or "").strip() or None
    if name == "cpu.max":
        quota, period = (
            (_read(f"{folder}/cpu.cfs_{x}_us") or "").strip() for x in ("quota", "period")
        )
        return f"{'max' if quota == '-1' else quota} {period}" if quota and period else None
    limit = int(_read(f"{folder}/memory.limit_in_bytes") or "")
    return "max" if limit >= 1 << 62 else str(limit)


def _bound(value: str) -> float:
    """A cgroup limit as a number: cpu.max 'quota period' in cores, memory.max in bytes;
    'max' is none."""
    first, *period = value.split()
    if first == "max":
        return float("inf")
    return int(first) / int(period[0]) if period else int(first)


def _isa(proc: str, modules: Mapping[str, object], known: Mapping[str, str]) -> dict:
    """The vector instructions the CPU offers and those the kernels chose: ATen's CPU
    capability (oneDNN and ATen's own kernels) when torch is loaded, and what the
    benchmark measured itself (inductor's, `known`)."""
    facts: dict = {}
    # the first CPU's entry: the kernel makes the others' (slowly, on a large machine) only
    # when they are read
    cpuinfo = (_read(f"{proc}/cpuinfo", 8192) or "").split("\n\n", 1)[0]
    flags = set(_fields(cpuinfo).get("flags", "").split())
    facts["cpu_flags"] = " ".join(x for x in VECTOR_FLAGS if x in flags)
    torch = modules.get("torch")
    if torch is not None:
        facts["torch_cpu_capability"] = _soft(lambda: str(torch.backends.cpu.get_cpu_capability()))
    return _kept({**facts, **known})


def _threads(status: dict[str, str], modules: Mapping[str, object]) -> dict:
    """The process's threads, and each framework's pools when it is loaded."""
    facts: dict = {"process": _soft(int, status.get("Threads"))}
    torch = modules.get("torch")
    if torch is not None:
        facts["torch_intra_op"] = _soft(lambda: int(torch.get_num_threads()))
        facts["torch_inter_op"] = _soft(lambda: int(torch.get_num_interop_threads()))
    tf = modules.get("tensorflow")
    if tf is not None:
        pools = _soft(lambda: tf.config.threading)
        facts["tf_intra_op"] = _soft(lambda: int(pools.get_intra_op_parallelism_threads()))
        facts["tf_inter_op"] = _soft(lambda: int(pools.get_inter_op_parallelism_threads()))
    return _kept(facts)


def _gpu(proc: str, modules: Mapping[str, object]) -> dict:
    """The NVIDIA driver, and the device and CUDA, cuDNN and NCCL versions torch uses when it
    has initialised CUDA (their libraries are among the mapped ones)."""
    facts: dict = {}
    driver = re.search(r"Kernel Module\s+(\S+)", _read(f"{proc}/driver/nvidia/version") or "")
    facts["driver"] = driver.group(1) if driver else None
    torch = modules.get("torch")
    if torch is not None and _soft(lambda: torch.cuda.is_initialized()):
        facts["device"] = _soft(lambda: torch.cuda.get_device_name(torch.cuda.current_device()))
        facts["cuda"] = _soft(lambda: str(torch.version.cuda))
        facts["cudnn"] = _soft(lambda: str(torch.backends.cudnn.version()))
        facts["nccl"] = _soft(lambda: ".".join(map(str, torch.cuda.nccl.version())))
    return _kept(facts)
