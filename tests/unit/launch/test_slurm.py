"""Slurm batch scripts: exact text per runtime and Shifter form, and the site settings."""

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kit import runtimes
from kit.core import benches, readers
from kit.core.errors import KitError
from kit.image import engine
from kit.launch import slurm, slurm_wait, streams
from kit.runtimes import Job, Prepared

PROG = [
    "/opt/kit/venv/bin/python",
    "/opt/kit/benchmarks/mpi_bench.py",
    "--launch-time",
    slurm.LAUNCH_ARG,
]
OUT = Path("/r/slurm/kit-c-1.out")
JOB = Job(PROG, 2, "mpirun.mpich", "kit-c-1")
HEAD = """\
#!/bin/bash
# trial
#SBATCH --job-name=kit-c-1
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --ntasks-per-node=2
#SBATCH --time=00:30:00
#SBATCH --output=/r/slurm/kit-c-1.out
#SBATCH --error=/r/slurm/kit-c-1.err
"""
TAIL = """\
export KIT_LAUNCH_TIME=$(date +%s.%N)
echo "kit-slurm: job ${SLURM_JOB_ID} nodes ${SLURM_JOB_NODELIST}" >&2
"""
STEP_ARGS = (
    '/opt/kit/venv/bin/python /opt/kit/benchmarks/mpi_bench.py --launch-time "${KIT_LAUNCH_TIME}"\n'
)


DEFAULT = slurm.Site()


def script(runtime: str, ref: str, site=DEFAULT, flavour="mpich", job=JOB) -> str:
    prep = Prepared(ref, "sha256:0", PROG[0], "/opt/kit/benchmarks")
    return slurm.script(runtimes.get(runtime), prep, job, site, flavour, OUT, "trial")


def test_apptainer_hybrid_under_srun_pmi2():
    assert script("singularity", "/c/image.sif") == (
        HEAD
        + "set -euo pipefail\nexport UCX_POSIX_USE_PROC_LINK=n\nexport UCX_TLS='^cma'\n"
        + "export OMPI_MCA_btl_vader_single_copy_mechanism=none\n"
        + "export KIT_TRIAL=kit-c-1\n"
        + TAIL
        + "srun --mpi=pmi2 apptainer exec /c/image.sif "
        + STEP_ARGS
    )


def test_shifter_nersc_form():
    """NERSC: the image is a job option (Slurm's Shifter plugin), `srun shifter COMMAND`."""
    assert script("shifter", "kit/pytorch-mpich:1.2.0-cpu") == (
        HEAD.replace(
            "kit-c-1.err\n", "kit-c-1.err\n#SBATCH --image=docker:kit/pytorch-mpich:1.2.0-cpu\n"
        )
        + "set -euo pipefail\nexport KIT_TRIAL=kit-c-1\n"
        + TAIL
        + "srun --mpi=pmi2 shifter "
        + STEP_ARGS
    )


def test_shifter_cscs_form():
    """CSCS: an image loaded with `shifter load`, run with the site's MPI swapped in."""
    site = slurm.Site(partition="normal", options=("--constraint=gpu",),
                      setup=("module load daint-gpu", "module load shifter-ng"),
                      runtime_options=(("shifter", "cscs"),))  # fmt: skip
    job = Job(PROG, 2, "mpirun.mpich", "kit-c-1", [], ("/scratch/data",))
    assert script("shifter", "kit/pytorch-mpich:1.2.0-cpu", site, job=job) == (
        HEAD
        + "#SBATCH --partition=normal\n#SBATCH --constraint=gpu\n"
        + "set -euo pipefail\nmodule load daint-gpu\nmodule load shifter-ng\n"
        + "export KIT_TRIAL=kit-c-1\n"
        + TAIL
        + "srun --mpi=pmi2 shifter run --mpi "
        + "--mount=type=bind,source=/scratch/data,destination=/scratch/data "
        + "load/library/kit/pytorch-mpich:1.2.0-cpu "
        + STEP_ARGS
    )  # fmt: skip


def test_open_mpi_starts_ranks_with_its_mpirun_inside_the_allocation():
    job = Job(PROG, 4, "mpirun.openmpi", "kit-c-1")
    text = script("charliecloud", "/c/image.sqfs", slurm.Site(tasks_per_node=2), "openmpi", job)
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks=4\n#SBATCH --ntasks-per-node=2\n" in text
    assert text.endswith("mpirun.openmpi -np 4 ch-run /c/image.sqfs -- " + STEP_ARGS)


def test_docker_only_where_the_site_allows_it():
    with pytest.raises(KitError, match="allow_docker = true"):
        script("docker", "kit/x:1")
    text = script("docker", "kit/x:1", slurm.Site(runtime_options=(("allow_docker", True),)))
    assert f"srun --ntasks=1 {engine.docker()} run --rm --init --name kit-c-1 " in text
    assert " kit/x:1 mpirun -np 2 /opt/kit/venv/bin/python " in text


def test_podman_runs_one_container_a_job_whose_own_mpirun_starts_the_ranks():
    """Not a container per rank (Slurm's PMI socket does not reach a rank conmon starts):
    this step once wrote one podman per rank under srun --mpi=pmi2, and before that
    stopped with a traceback."""
    text = script("podman", "localhost/kit/x:1")
    assert "\nsrun --ntasks=1 podman run --rm --init --name kit-c-1 --userns=keep-id " in text
    assert " localhost/kit/x:1 mpirun -np 2 /opt/kit/venv/bin/python " in text


def test_site_config(tmp_path):
    f = tmp_path / "site.toml"
    f.write_text(
        '[slurm]\npartition = "debug"\noptions = ["--exclusive"]\ntasks_per_node = 1\n'
        'shifter = "cscs"\n'
    )
    site = slurm.load_site(f)
    assert site == slurm.Site(
        partition="debug",
        options=("--exclusive",),
        tasks_per_node=1,
        runtime_options=(("shifter", "cscs"),),
    )
    assert (site.option("shifter"), site.option("allow_docker")) == ("cscs", False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[slurm]\nqueue = "debug"', "[slurm] unknown key 'queue' (known: account, allow_docker"),
        ('[slurm]\nshifter = "olcf"', "[slurm] shifter: 'olcf' is not allowed here"),
        ('[slurm]\nallow_docker = "no"', "[slurm] allow_docker: must be a bool, got str"),
        ('[slrum]\npartition = "x"', "unknown table(s) slrum; kit reads [slurm]"),
        ('[slurm]\noptions = "--exclusive"', "[slurm] options: must be a list, got str"),
        ('[slurm]\npartition = "a\\nrm -rf ~"', "[slurm] partition: 'a\\nrm -rf ~' is not allowed"),
        ('[slurm]\nsetup = ["ok", "x\\ny"]', "[slurm] setup: 'x\\ny' is not allowed here"),
        ("[slurm]\ntasks_per_node = -2", "[slurm] tasks_per_node must be 0 (all on one node)"),
        ("[slurm]\ntasks_per_node = true", "[slurm] tasks_per_node: must be a int, got a boolean"),
        ('[slurm]\noptions = ["exclusive"]', "[slurm] options: 'exclusive' is not allowed here"),
        ("[slurm", "not valid TOML"),
        ("[slurm]\nsetup = " + "[" * 100_000, "nested too deeply to be a site file"),
        (b"[slurm]\npartition = '\xff'", "not UTF-8 text (byte 21); give a TOML file"),
    ],
)
def test_site_file_refuses_what_could_break_a_script(tmp_path, text, message):
    f = tmp_path / "site.toml"
    f.write_bytes(text if isinstance(text, bytes) else text.encode() + b"\n")
    with pytest.raises(KitError) as e:
        slurm.load_site(f)
    assert str(e.value).startswith(f"--slurm-config {f}: ") and message in str(e.value)


def test_a_site_file_that_is_a_device_is_read_no_further_than_its_cap():
    with pytest.raises(KitError, match=r"^--slurm-config /dev/zero: larger than 1 MiB, the most"):
        slurm.load_site(Path("/dev/zero"))


@given(
    st.dictionaries(
        st.sampled_from([*slurm.SITE_FIELDS, "other"]),
        st.one_of(
            st.text(max_size=20),
            st.integers(-5, 5),
            st.booleans(),
            st.lists(st.one_of(st.text(max_size=10), st.integers()), max_size=3),
        ),
        max_size=4,
    )
)
def test_any_site_table_gives_a_site_or_a_kit_error(tmp_path_factory, table):
    f = tmp_path_factory.mktemp("site") / "site.toml"
    f.write_text("[slurm]\n" + "".join(f"{k} = {toml(v)}\n" for k, v in table.items()))
    try:
        site = slurm.load_site(f)
    except KitError:
        return
    for line in (site.partition, site.account, site.time, *site.options, *site.setup):
        assert "\n" not in line


def toml(v) -> str:
    """A TOML value (JSON's strings, numbers, booleans and arrays are TOML's)."""
    return json.dumps(v)


@pytest.mark.parametrize(
    "state, code, expected",
    [
        ("COMPLETED", "0:0", 0),
        ("FAILED", "3:0", 3),
        ("CANCELLED", "0:15", 143),  # scancel: SIGTERM, as a shell reports it
        ("TIMEOUT", "0:0", 1),  # the time limit ended it: never a success
        ("NODE_FAIL", "0:0", 1),
    ],
)
def test_the_waited_job_exits_as_sbatch_wait_would(state, code, expected):
    line = f"JobId=7 JobName=kit-c-1 JobState={state} Reason=None ExitCode={code} NodeList=n1"
    job = slurm_wait.fields(line)
    assert job["JobState"] in slurm_wait.DONE
    assert slurm_wait.exit_code(job) == expected


def test_the_wait_checks_often_for_short_jobs_and_rarely_for_long_ones():
    waits = [slurm_wait.interval(t) for t in (0, 3, 20, 600, 36000)]
    assert waits == [0.5, 0.5, 2.0, 5.0, 5.0]


def test_a_jobs_output_is_read_bounded_and_its_job_line_kept(tmp_path, monkeypatch):
    """A job's output files are read as a local trial's stdout is: its record (on stdout)
    and the script's job line (on stderr, a file of its own so that no stderr line can
    land inside the record's) are found however much follows them, and only tails kept."""
    monkeypatch.setattr(streams, "TAIL_BYTES", 100)
    record = json.dumps({"schema": benches.SCHEMA, "images_per_sec": 3.0})
    output = tmp_path / "kit-c-1.out"
    output.write_text(f"{record}\n" + "noise\n" * 1000)
    slurm.errors(output).write_text("kit-slurm: job 42 nodes n[01-02]\n" + "warning\n" * 99)
    assert slurm.errors(output) == tmp_path / "kit-c-1.err"
    reader, job = readers.BenchRecord(), slurm.JobOutput()
    text = streams.read_file(output, reader).text()
    streams.read_file(slurm.errors(output), job)
    assert (job.job_id, job.nodes) == ("42", "n[01-02]")
    assert readers.read_result(reader) == ({"schema": benches.SCHEMA, "images_per_sec": 3.0}, "")
    cut = len(output.read_bytes()) - 100
    assert text == f"… {cut} bytes cut …\n" + ("noise\n" * 1000)[-100:]
    assert streams.read_file(tmp_path / "none.out", job).text() == ""
