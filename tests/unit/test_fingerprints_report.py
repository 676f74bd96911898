"""Launch fingerprints compared across arms (kit.analysis.fingerprints) and their report
section, beside the verdicts: the known causes (a --cpus limit, another OMP_NUM_THREADS,
inductor's scalar kernels with another libtorch_cpu) are named, and nothing else; the
section as golden files in Markdown, HTML and JSON (KIT_GOLDEN=write rewrites them)."""

import copy
import csv
import io
import json
import re

import pytest

from kit.analysis import fingerprints, summary
from kit.report import writers
from kit.results.record import Trial

from .records import record as trial
from .report.test_golden import matches_golden

NATIVE_TORCH = "/home/kit/.cache/kit/native/pytorch2-mpich/lib/python3.11/site-packages/torch/lib"
IMAGE_TORCH = "/opt/kit/venv/lib/python3.11/site-packages/torch/lib"
SYSTEM = "/usr/lib/x86_64-linux-gnu"
FP = {
    "version": 1,
    "libraries": {
        SYSTEM: {"libc.so.6": "1922136 6f1b2c3d4e5f", "libstdc++.so.6": "2190440 0a1b2c3d4e5f"},
        NATIVE_TORCH: {"libc10.so": "1094360 c10c10c10c10", "libtorch_cpu.so": "434 77aa77aa77aa"},
    },
    "environment": {"OMP_NUM_THREADS": "2", "LD_LIBRARY_PATH": "/opt/x"},
    "limits": {
        "affinity": "0-3",
        "cores_seen": 4,
        "cpu.max": "max 100000",
        "memory.max": "max",
        "seccomp": "0",
        "shm_bytes": 8221130752,
        "thp_enabled": "madvise",
        "ulimit_nofile": "1024/1048576",
        "ulimit_memlock": "8388608/8388608",
    },
    "isa": {"cpu_flags": "avx avx2 fma", "torch_cpu_capability": "AVX2", "compile_isa": "avx2"},
    "threads": {"process": 7, "torch_intra_op": 2, "torch_inter_op": 2},
    "took_ms": 4.2,
}


def launch(runtime: str, rate: float, i: int, repeat: int, fp: dict | None, **kw) -> Trial:
    r = trial(runtime, rate, index=i, repeat=repeat, runtime_kind=runtime.partition("@")[0], **kw)
    if fp is not None:
        r["result"]["fingerprint"] = fp
    return Trial.from_json(r)


def native(repeat: int) -> dict:
    """Native's launches: its compiled model ran scalar kernels, and the libtorch_cpu it
    mapped is the host's (another build, another folder)."""
    fp = copy.deepcopy(FP)
    del fp["libraries"][NATIVE_TORCH]["libtorch_cpu.so"]
    fp["libraries"][SYSTEM]["libtorch_cpu.so"] = "401 3bad3bad3bad"
    fp["isa"]["compile_isa"] = "INVALID_VEC_ISA"
    fp["threads"]["process"] = 7 + repeat % 2  # varies in both arms: no difference
    return fp


def docker(repeat: int) -> dict:
    """Docker's: the image's venv (same builds elsewhere), its --cpus=1.5 limit, its own
    OMP_NUM_THREADS, vector kernels."""
    fp = copy.deepcopy(FP)
    fp["libraries"][IMAGE_TORCH] = fp["libraries"].pop(NATIVE_TORCH)
    fp["limits"]["cpu.max"] = "150000 100000"
    fp["environment"]["OMP_NUM_THREADS"] = "1"
    fp["threads"]["process"] = 8 - repeat % 2
    return fp


def singularity(repeat: int) -> dict:
    """Singularity's: native's but for another memlock limit; as fast as native."""
    fp = native(repeat)
    fp["limits"]["ulimit_memlock"] = "unlimited/unlimited"
    return fp


NOISE = [1.0, 0.99, 1.01, 1.0, 0.995, 1.005, 0.99, 1.01]


def campaign(arms=("native", "docker", "singularity")) -> list[Trial]:
    made = {"native": native, "docker": docker, "singularity": singularity}
    rates = {"native": 100.0, "docker": 80.0, "singularity": 100.0}
    args = {"docker": ["--cpus=1.5"]}
    out = []
    for k, noise in enumerate(NOISE):
        for j, rt in enumerate(arms):
            rate = rates[rt] * (noise if rt == "native" else NOISE[(k + j) % len(NOISE)])
            out.append(launch(rt, rate, len(out), k, made[rt](k), runtime_args=args.get(rt, [])))
    return out


def compared(records: list[Trial]) -> fingerprints.Fingerprints:
    (group,) = summary.summarise(records, "x").groups
    return group.fingerprints


def test_the_known_causes_are_named_and_nothing_else():
    fp = compared(campaign(("native", "docker")))
    arm = fp.arms[1]
    assert arm.runtime == "docker"
    assert [(d.group, d.fact, d.baseline, d.value) for d in arm.differences] == [
        (
            "libraries",
            "libtorch_cpu.so",
            f"{SYSTEM}/libtorch_cpu.so (401 3bad3bad3bad)",
            f"{IMAGE_TORCH}/libtorch_cpu.so (434 77aa77aa77aa)",
        ),
        ("environment", "OMP_NUM_THREADS", "2", "1"),
        ("limits", "cpu.max", "max 100000", "150000 100000"),
        ("isa", "compile_isa", "INVALID_VEC_ISA", "avx2"),
    ]
    # each arm's launches varied in their thread count, alike: named, but no difference
    assert [(x.runtime, [(v.fact, v.values) for v in x.varies]) for x in fp.arms] == [
        ("native", [("process", ["7", "8"])]),
        ("docker", [("process", ["7", "8"])]),
    ]


def test_the_host_library_that_fails_inductors_probe_is_named():
    """Case (c) as it happens: both arms map the wheel's libtorch_cpu (one build, two
    folders); native's inductor probe, a program of its own, loaded the host's older one
    from the loader's path and gave scalar kernels."""
    base, image = copy.deepcopy(FP), docker(0)
    base["shadowed"] = {f"{SYSTEM}/libtorch_cpu.so": "401 3bad3bad3bad"}
    base["isa"]["compile_isa"] = "INVALID_VEC_ISA"
    image["environment"]["OMP_NUM_THREADS"] = "2"
    image["limits"]["cpu.max"] = "max 100000"
    image["threads"]["process"] = 7
    recs = [launch("native", 100.0, 0, 0, base), launch("docker", 80.0, 1, 0, image)]
    assert [(d.fact, d.baseline, d.value) for d in compared(recs).arms[1].differences] == [
        (f"{SYSTEM}/libtorch_cpu.so (loader's path)", "401 3bad3bad3bad", "absent"),
        ("compile_isa", "INVALID_VEC_ISA", "avx2"),
    ]


def test_each_difference_names_the_one_arm_that_tests_it():
    tests = {d.fact: d.test for d in compared(campaign(("native", "docker"))).arms[1].differences}
    assert tests == {
        "libtorch_cpu.so": "no arm can test it yet: they come with the image or the host",
        # docker's own --cpus set the limit: the arm without it
        "cpu.max": "--runtime native,docker,docker@no-cpu.max",
        # the rest: the arm with native's value, its own options kept
        "OMP_NUM_THREADS": "--runtime native,docker,docker@omp_num_threads-2 "
        "--runtime-arg docker@omp_num_threads-2:--cpus=1.5 "
        "--runtime-arg docker@omp_num_threads-2:--env=OMP_NUM_THREADS=2",
        "compile_isa": "--runtime native,docker,docker@compile_isa-invalid_vec_isa "
        "--runtime-arg docker@compile_isa-invalid_vec_isa:--cpus=1.5 "
        "--runtime-arg docker@compile_isa-invalid_vec_isa:--env=TORCHINDUCTOR_VEC_ISA_OK=0",
    }


def test_the_tests_each_runtime_can_run():
    arm = fingerprints.Tested("native", "docker", "docker", [])

    def test(group: str, fact: str, base: str, arm=arm) -> str:
        return fingerprints._test(group, fact, {base: base}, arm)

    assert test("limits", "seccomp", "0") == (
        "--runtime native,docker,docker@seccomp-off "
        "--runtime-arg docker@seccomp-off:--security-opt=seccomp=unconfined"
    )
    assert test("limits", "ulimit_memlock", "unlimited/unlimited").endswith(
        ":--ulimit=memlock=-1:-1"
    )
    assert test("limits", "affinity", "0-1").endswith(":--cpuset-cpus=0-1")
    assert test("limits", "memory.max", "1073741824").endswith(":--memory=1073741824")
    assert test("threads", "torch_intra_op", "4").endswith(":--env=OMP_NUM_THREADS=4")
    assert test("isa", "torch_cpu_capability", "AVX2").endswith(":--env=ATEN_CPU_CAPABILITY=avx2")
    assert test("limits", "thp_enabled", "never").endswith("the same for every arm on one host")
    singularity = fingerprints.Tested("native", "singularity", "singularity", [])
    assert test("limits", "cpu.max", "200000 100000", singularity).endswith(
        "singularity@cpu.max-200000-100000:--cpus=2"
    )
    assert test("limits", "seccomp", "0", singularity) == (
        "no arm can test it yet: no singularity option kit passes gives it native's value"
    )
    back = fingerprints.Tested("docker", "native", "native", [])
    assert test("environment", "OMP_NUM_THREADS", "2", back) == (
        "no arm can test it yet: native takes no runtime options"
    )
    assert fingerprints._test("environment", "KMP_BLOCKTIME", {None: "unset"}, arm) == (
        "no arm can test it yet: no runtime option takes it away"
    )
    both = {"1": "1", "2": "2"}
    assert fingerprints._test("environment", "X", both, arm) == (
        "no arm can test it yet: native's own launches differ in it"
    )


def test_extension_modules_of_another_build_are_one_row():
    other = copy.deepcopy(FP)
    base = copy.deepcopy(FP)
    dynload = "/usr/lib/python3.11/lib-dynload"
    names = [f"_m{i}.cpython-311-x86_64-linux-gnu.so" for i in range(5)]
    base["libraries"][dynload] = {name: f"1 {i}" for i, name in enumerate(names)}
    other["libraries"][dynload] = {name: f"1 x{i}" for i, name in enumerate(names)}
    recs = [launch("native", 100, 0, 0, base), launch("docker", 100, 1, 0, other)]
    (row,) = compared(recs).arms[1].differences
    assert (row.fact, row.baseline) == (
        "5 Python extension modules",
        "_m0.cpython-311-x86_64-linux-gnu.so, _m1.cpython-311-x86_64-linux-gnu.so, "
        "_m2.cpython-311-x86_64-linux-gnu.so, ...",
    )


def test_records_without_fingerprints_make_no_section():
    recs = [launch(rt, 100.0, i, i // 2, None) for i, rt in enumerate(["native", "docker"] * 3)]
    assert compared(recs) is None
    assert "What differs between launches" not in writers.render(summary.summarise(recs, "x"), "md")
    half = [launch("native", 100.0, 9, 0, FP), *recs]
    said = fingerprints.sentences(compared(half), {"docker": "slower"})
    assert said[2] == (
        "docker: 0 of 3 launches fingerprinted (records of an older kit): nothing to compare."
    )


def test_the_csv_carries_each_arms_differences():
    text = writers.render(summary.summarise(campaign(), "x"), "csv")
    cells = {r["runtime"]: r["fingerprint_differences"] for r in csv.DictReader(io.StringIO(text))}
    assert cells["native"] == ""
    assert cells["singularity"] == "limits ulimit_memlock: 8388608/8388608 -> unlimited/unlimited"
    assert cells["docker"].split("; ")[1:] == [
        "environment OMP_NUM_THREADS: 2 -> 1",
        "limits cpu.max: max 100000 -> 150000 100000",
        "isa compile_isa: INVALID_VEC_ISA -> avx2",
    ]


def section(fmt: str) -> str:
    """The fingerprints section of the report of campaign(), as the format renders it."""
    a = summary.summarise(campaign(), "golden")
    text = writers.render(a, fmt)
    if fmt == "md":
        return "## What differs" + text.split("## What differs", 1)[1].split("\n## ", 1)[0]
    if fmt == "html":
        text = re.sub(r"<svg.*?</svg>", "<svg/>", text, flags=re.S)
        return "<h2>What differs" + text.split("<h2>What differs", 1)[1].split("<h2>", 1)[0] + "\n"
    (group,) = json.loads(text)["groups"]
    return json.dumps(group["fingerprints"], indent=2) + "\n"


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_the_section_matches_its_golden_file(fmt):
    assert matches_golden(f"fingerprints.{fmt}", section(fmt))


def test_the_section_stands_beside_the_verdicts_and_says_what_no_test_can_yet():
    text = writers.render(summary.summarise(campaign(), "x"), "md")
    verdicts = text.index("| runtime | n |")
    assert verdicts < text.index("## What differs between launches") < text.index("## Runtimes")
    assert (
        "singularity: 8 of 8 launches fingerprinted, 20 facts alike in all, 1 varying between "
        "them. Verdict: no significant difference, yet its launches differ from native's in "
        "ulimit_memlock: this comparison cannot tell which of them matter (they may be too "
        "small to detect, or cancel out) without an arm that tests them."
    ) in text
    html = writers.render(summary.summarise(campaign(), "x"), "html")
    assert "<details><summary>Differences from native&#x27;s launches (5)</summary><table>" in html


def test_a_folded_folder_is_named_by_its_path():
    """A folder folded to one entry (hundreds of system libraries) reads as its path."""
    folded = {"libraries": {"/usr/lib/x86_64-linux-gnu": {"*": "290 libraries sha256:ab"}}}
    assert list(fingerprints.facts(folded)) == [("libraries", "/usr/lib/x86_64-linux-gnu/*")]
