"""Integration fixtures: each image built once per session, all at once, then converted.

These need the Docker engine, the base image, Apptainer, Charliecloud and MPICH
(ci/test provisions them) and must run as an ordinary user. They fail, with
`kit doctor`'s table as the reason, when something is missing.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest

from kit.core import inputs
from kit.image import recipes
from kit.results import store

IMAGE = "pytorch-mpich"
RUNTIMES = "native,docker,podman,singularity,charliecloud"
REPO = Path(__file__).resolve().parents[2]
HOROVOD_TAG = recipes.load("horovod-mpich").tag("cpu")
CAFFE2_TAG = recipes.load("caffe2-mpich").tag("cpu")


def kit(
    *args: str, check: bool = True, timeout: float = 1800, env: dict | None = None
) -> subprocess.CompletedProcess:
    p = subprocess.run(["kit", *args], capture_output=True, text=True, timeout=timeout, env=env)
    if check and p.returncode != 0:
        pytest.fail(f"kit {' '.join(args)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p


# The sweeps' timed part per message size, shortened: the tests check each sweep's shape
# and reach, not its figures (defaults: mpi 0.2 s, grpc 0.05 s; about 100 s of the run).
SWEEP_TIME = {"mpi": "0.05", "allgather": "0.05", "grpc": "0.01"}


def short_sweeps(benches: str) -> list[str]:
    """`kit run` options that shorten each sweep among `benches` (bench-scoped)."""
    return [
        f"--bench-arg={b}:--time-per-size={SWEEP_TIME[b]}"
        for b in benches.split(",")
        if b in SWEEP_TIME
    ]


@pytest.fixture(scope="session")
def ready() -> None:
    if os.geteuid() == 0:
        pytest.fail("integration tests must run as an ordinary user: use ci/test")
    doctor = kit("doctor", "--runtime", RUNTIMES, check=False)
    if doctor.returncode != 0:
        pytest.fail("this host lacks what the tests need (run ci/provision):\n" + doctor.stdout)


# The images the suite builds, by the fixture through which tests ask for each.
IMAGE_OF = {
    "built": IMAGE,
    "openmpi": "pytorch2-openmpi",
    "horovod": "horovod-mpich",
    "caffe2": "caffe2-mpich",
    "pytorch2": "pytorch2-mpich",
    "tf2": "tf2-mpich",
    "tf2_openmpi": "tf2-openmpi",
}


def apptainer(
    *args: str, timeout: float = 3000, env: dict | None = None
) -> subprocess.CompletedProcess:
    """apptainer from the repository root (definitions name files relative to it)."""
    return subprocess.run(
        ["apptainer", *args], capture_output=True, text=True, cwd=REPO, timeout=timeout, env=env
    )


DEFINITION = "containers/pytorch-mpich/pytorch-mpich.def"
# The definition's SIFs kept between runs under a key of everything the build reads, as the
# engine's layer cache keeps the images' builds: a change to any input builds anew.
DEFINITION_CACHE = Path.home() / ".cache" / "kit-tests" / "definition"


def definition_key(env: dict) -> str:
    """The definition, every file its %files takes (benchmarks/), the base image's ID and
    Apptainer's version, hashed."""
    h = hashlib.sha256()
    for f in [REPO / DEFINITION, *sorted((REPO / "benchmarks").rglob("*"))]:
        if f.is_file() and "__pycache__" not in f.parts:
            h.update(f"{f.relative_to(REPO)}\0".encode() + f.read_bytes() + b"\0")
    for argv in (
        ["docker", "image", "inspect", "--format", "{{.Id}}", "kit/debian:bookworm"],
        ["apptainer", "--version"],
    ):
        h.update(subprocess.run(argv, capture_output=True, text=True, env=env).stdout.encode())
    return h.hexdigest()[:16]


def cached_definition(env: dict) -> Path | str:
    """The definition's SIF (beside the base SIF it was built on) from the cache when its
    inputs are unchanged, else built anew into the cache, which keeps only that one."""
    folder = DEFINITION_CACHE / definition_key(env)
    sif = folder / "pytorch-mpich.sif"
    if sif.is_file() and (folder / "base.sif").is_file():
        return sif
    shutil.rmtree(DEFINITION_CACHE, ignore_errors=True)
    scratch = Path(tempfile.mkdtemp(prefix="kit-test-definition-"))
    made = build_definition(scratch, env)
    if isinstance(made, str):
        shutil.rmtree(scratch, ignore_errors=True)
        return made
    (scratch / "base.tar").unlink()
    folder.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(scratch, folder)
    return sif


def build_definition(scratch: Path, env: dict) -> Path | str:
    """pytorch-mpich's definition made into a SIF by Apptainer alone, as an ordinary user:
    the local base as a SIF (from its archive), then the definition. The SIF, or why not."""
    base_tar = scratch / "base.tar"
    save = ["docker", "save", "-o", str(base_tar), "kit/debian:bookworm"]
    if (p := subprocess.run(save, capture_output=True, text=True, env=env)).returncode != 0:
        return f"{' '.join(save)} exited {p.returncode}: {p.stderr[-1000:]}"
    sif = scratch / "pytorch-mpich.sif"
    for args in (
        ("build", str(scratch / "base.sif"), f"docker-archive://{base_tar}"),
        (
            *("build", "--ignore-fakeroot-command"),
            *("--mksquashfs-args", "-comp zstd -Xcompression-level 3"),  # as docs/build.md's
            *("--bind", "/etc/ssl/certs/ca-certificates.crt:/run/secrets/cacert"),
            *("--build-arg", f"BASE_SIF={scratch / 'base.sif'}"),
            *(str(sif), DEFINITION),
        ),
    ):
        p = apptainer(*args, env=env)
        if p.returncode != 0:
            return f"apptainer {' '.join(args)} exited {p.returncode}:\n{p.stderr[-3000:]}"
    return sif


class Builds:
    """Every image this session's tests ask for, and the definition's SIF, built in the
    background from the moment pytest has collected the tests, one at a time in the order
    the tests need them: a test waits for its own image only, and no more than one build
    runs beside the tests (seven at once on two cores took load averages of 14 and
    stretched every build past the tests that waited for it). Each build's start and end,
    in seconds since the first started, go in the summary.

    Every build runs in the environment as it was when the builds were started: the unit
    tests run beside them in this process and patch os.environ (a PATH of stubs, a fake
    KIT_DOCKER), which a build started in such a moment would otherwise inherit."""

    def __init__(self, images: list[str], definition: bool) -> None:
        self.t0 = time.monotonic()
        self.times: dict[str, tuple[float, float]] = {}
        self.pool = ThreadPoolExecutor(max_workers=1)
        env = dict(os.environ)
        jobs: dict[str, Callable[[], object]] = {i: partial(build_image, i, env) for i in images}
        if definition:
            jobs["definition"] = partial(cached_definition, env)
        order = sorted(jobs, key=lambda n: ORDER.index(FIXTURE_OF.get(n, n)))
        self.futures = {n: self.pool.submit(self._timed, n, jobs[n]) for n in order}

    def _timed(self, name: str, job: Callable[[], object]) -> object:
        start = time.monotonic() - self.t0
        try:
            return job()
        finally:
            self.times[name] = (start, time.monotonic() - self.t0)

    def image(self, image: str) -> str:
        """The image's build output once it is built, or the test fails with why not."""
        p = self.futures[image].result()
        if p.returncode != 0:
            pytest.fail(f"kit build {image} exited {p.returncode}:\n{p.stderr[-2000:]}")
        return p.stdout

    def definition(self) -> Path | str:
        return self.futures["definition"].result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def build_image(image: str, env: dict) -> subprocess.CompletedProcess:
    argv = ["kit", "build", image]
    return subprocess.run(argv, capture_output=True, text=True, timeout=3600, env=env)


# The tests run grouped by the image they need, in this order, and the images build in the
# same order; those that need none (the CA-certificate test) first, while the first builds.
ORDER = (
    *("built", "openmpi", "definition", "horovod", "caffe2", "pytorch2", "tf2", "tf2_openmpi"),
    "quiet",  # the tests that measure: once every build is done
)
FIXTURE_OF = {image: fixture for fixture, image in IMAGE_OF.items()}
# The images only `ci/test --all-images` builds: the default tier proves every runtime, both
# MPI flavours, the nodes, Slurm and the faults on the two smallest images (docs/development.md).
ALL_IMAGES_ONLY = frozenset({"horovod", "caffe2", "pytorch2", "tf2", "tf2_openmpi"})
BUILDS = pytest.StashKey[Builds]()


@pytest.hookimpl(trylast=True)  # after -k/-m have deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests grouped by the image they need; without --all-images, those that need an image
    of the --all-images tier or are marked all_images deselected (counted in pytest's
    summary). --only-image IMAGE keeps the tests of that image, marked ones included."""

    def rank(item: pytest.Item) -> int:
        return max((ORDER.index(f) + 1 for f in item.fixturenames if f in ORDER), default=0)

    items.sort(key=rank)
    if only := config.getoption("only_image"):
        if unknown := set(only) - set(IMAGE_OF.values()):
            raise pytest.UsageError(f"--only-image {', '.join(sorted(unknown))}: not one of "
                                    f"{', '.join(sorted(IMAGE_OF.values()))}")  # fmt: skip
        wanted = {f for f, image in IMAGE_OF.items() if image in only}
        other = [i for i in items if not wanted & set(i.fixturenames)]
        config.hook.pytest_deselected(items=other)
        items[:] = [i for i in items if i not in other]
    elif not config.getoption("all_images"):
        later = [
            i for i in items
            if ALL_IMAGES_ONLY & set(i.fixturenames) or i.get_closest_marker("all_images")
        ]  # fmt: skip
        if later:
            config.hook.pytest_deselected(items=later)
            items[:] = [i for i in items if i not in later]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the builds while the unit tests run (none as root: `ready` says why)."""
    items = session.items
    wanted = sorted({IMAGE_OF[f] for i in items for f in i.fixturenames if f in IMAGE_OF})
    definition = any("definition" in i.fixturenames for i in items)
    if (wanted or definition) and os.geteuid() != 0 and not session.config.option.collectonly:
        session.config.stash[BUILDS] = Builds(wanted, definition)


def pytest_unconfigure(config: pytest.Config) -> None:
    if builds := config.stash.get(BUILDS, None):
        builds.close()


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    if builds := config.stash.get(BUILDS, None):
        spans = ", ".join(f"{n} {a:.0f}-{b:.0f}" for n, (a, b) in sorted(builds.times.items()))
        terminalreporter.write_line(f"image builds (s after the first started): {spans}")


@pytest.fixture(scope="session")
def builds(ready, request) -> Builds:
    """The session's builds (see Builds): each fixture below waits for its own (none when
    the tests chosen need no image of the suite's)."""
    if BUILDS not in request.config.stash:
        request.config.stash[BUILDS] = Builds([], definition=False)
    return request.config.stash[BUILDS]


@pytest.fixture(scope="session")
def quiet(builds) -> None:
    """Every build of the session done: a campaign that measures runs with none beside it
    (the tests that ask for this run last)."""
    for name in builds.futures:
        builds.futures[name].exception()


@pytest.fixture(scope="session")
def built(builds) -> dict:
    """pytorch-mpich converted once; later conversions of the same digest must be free."""
    builds.image(IMAGE)
    conv = kit("convert", IMAGE, "--to", "singularity,shifter")
    return {"dir": Path(conv.stdout.strip().splitlines()[-1])}


@pytest.fixture(scope="session")
def openmpi(builds) -> Path:
    """pytorch2-openmpi converted once, for every Open MPI test (the Open MPI paths are the
    MPI's, whichever PyTorch: the studies' pytorch-openmpi differs only in PyTorch 1.13,
    which pytorch-mpich runs)."""
    builds.image("pytorch2-openmpi")
    conv = kit("convert", "pytorch2-openmpi", "--to", "singularity,charliecloud")
    return Path(conv.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def horovod(builds) -> dict:
    """horovod-mpich's manifest (Horovod compiled in its builder stage)."""
    out = builds.image("horovod-mpich")
    path = next(line.split()[-1] for line in out.splitlines() if line.startswith("manifest "))
    return json.loads(open(path).read())


@pytest.fixture(scope="session")
def caffe2(builds) -> None:
    """caffe2-mpich, built."""
    builds.image("caffe2-mpich")


@pytest.fixture(scope="session")
def pytorch2(builds) -> None:
    """pytorch2-mpich (today's PyTorch, from the host's pip), built."""
    builds.image("pytorch2-mpich")


@pytest.fixture(scope="session")
def tf2(builds) -> None:
    """tf2-mpich (today's TensorFlow, Keras 3), built."""
    builds.image("tf2-mpich")


@pytest.fixture(scope="session")
def tf2_openmpi(builds) -> None:
    """tf2-openmpi, built."""
    builds.image("tf2-openmpi")


@pytest.fixture(scope="session")
def definition(builds) -> Path | str:
    """pytorch-mpich's definition built by Apptainer alone: the SIF, or why it failed."""
    return builds.definition()


def in_image(tag: str, *argv: str, volume: str | None = None) -> subprocess.CompletedProcess:
    """Run in the image as the invoking user, with the same settings kit's docker runtime uses."""
    user = f"{os.getuid()}:{os.getgid()}"
    mount = ["-v", volume] if volume else []
    settings = ["--user", user, "--ipc=host", "--network=host", "-e", "HOME=/tmp", *mount]
    return subprocess.run(
        ["docker", "run", "--rm", *settings, tag, *argv],
        capture_output=True,
        text=True,
        timeout=600,
    )


NODE_UP = frozenset({"idle", "mixed", "allocated", "completing"})  # sinfo's %T, not down


@pytest.fixture(scope="session")
def cluster(ready) -> None:
    """The local two-node Slurm cluster that ci/provision starts."""
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True)
    # up: idle, or running another job (another test run's on this machine): it queues
    state = dict(line.split()[:2] for line in nodes.stdout.splitlines() if len(line.split()) > 1)
    if not all(state.get(n) in NODE_UP for n in ("kit-n1", "kit-n2")):
        pytest.fail(f"the local Slurm cluster is not up (run ci/provision): {nodes.stdout}")


# What a trial starts; none of it may outlive the trial (kit stops the whole tree). A name
# counts where it starts a word, so that a package build's "python3-sortedcontainers" (an
# image build runs beside the tests) is not taken for Open MPI's orted.
LEFTOVER = re.compile(
    r"(?<![\w-])(squashfuse|mpirun|hydra_pmi_proxy|orted|ch-run|starter|conmon"
    r"|torch_cnn|tf_cnn|caffe2_cnn|mpi_bench|lean\.py|mpiloop)"
)
# A trial's name, kit-CAMPAIGN-INDEX: in KIT_TRIAL, container names and conmon's argv
TRIAL_NAME = re.compile(rb"kit-([0-9a-f]{8})-\d+")


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout


class Session:
    """This test session's own: its campaigns (each writes OUT/campaign.json under pytest's
    temporary folder) and when it started, so that what another job of the same user runs
    beside the tests is never taken for a leftover of theirs."""

    tmp: Path | None = None
    started = 0  # clock ticks since boot (/proc/PID/stat's start time)

    @classmethod
    def campaigns(cls) -> set[bytes]:
        found = set()
        # kit's own reader: a unit test of the same session leaves hostile campaign.json
        # files (one of "[" x 100000) under the same temporary root
        for f in cls.tmp.rglob(store.SPEC_FILE) if cls.tmp else ():
            if isinstance(spec := inputs.remade(f), dict) and isinstance(spec.get("campaign"), str):
                found.add(spec["campaign"].encode())
        return found


def _ticks_now() -> int:
    return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK"))


def _proc(pid: str) -> tuple[bytes, bytes, int, int] | None:
    """(argv, environ, parent pid, start ticks) of one of our running processes."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if stat[0] == "Z":  # a zombie runs nothing: Podman's conmon exits as the container
            return None  # ends, and its parent reaps it a moment later
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except (OSError, IndexError):
        return None
    return argv, environ, int(stat[1]), int(stat[19])


def leftovers(within_s: float = 10.0) -> list[str]:
    """What leftovers_now finds still there after waiting up to within_s for it to go: a
    process kit stopped may take a while, on a loaded host, to die and be reaped (and a
    container to be removed), while one kit left running is still there at the deadline
    (short, so that a leftover rank does not end its steps meanwhile)."""
    deadline = time.monotonic() + within_s
    while (left := leftovers_now()) and time.monotonic() < deadline:
        time.sleep(1)
    return left


def leftovers_now() -> list[str]:
    """This session's trial processes and containers still there (see trial_processes), and
    the processes a trial starts that carry no marker (mount daemons clear their
    environment): named in LEFTOVER, started since the session began, orphaned (their
    launcher gone), and naming no other campaign."""
    mine = Session.campaigns()
    found = trial_processes()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not (p := _proc(entry.name)):
            continue
        argv, environ, parent, start = p
        if b"KIT_TRIAL=" in environ or parent != 1 or start < Session.started:
            continue
        if LEFTOVER.search(argv.decode(errors="replace")) and set(TRIAL_NAME.findall(argv)) <= mine:
            found.append(argv.decode(errors="replace")[:120])
    return found


def records(out: Path) -> list[dict]:
    """A campaign's trial records, as filed."""
    return [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]


def running_trials(campaign: str) -> set[int]:
    """The indices of this campaign's trials that have a process running now (each carries
    KIT_TRIAL=kit-CAMPAIGN-INDEX in its environment)."""
    marker = re.compile(rb"(?:^|\0)KIT_TRIAL=kit-" + campaign.encode() + rb"-(\d+)(?:\0|$)")
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (p := _proc(entry.name)) and (m := marker.search(p[1])):
            found.add(int(m[1]))
    return found


def trial_processes() -> list[str]:
    """This session's trial processes (their KIT_TRIAL marker, which kit sets in every
    trial's environment so that every rank and launcher has it, names one of its
    campaigns) and containers."""
    mine = Session.campaigns()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not (p := _proc(entry.name)):
            continue
        argv, environ, _, _ = p
        marker = next((v for v in environ.split(b"\0") if v.startswith(b"KIT_TRIAL=")), b"")
        if set(TRIAL_NAME.findall(marker)) & mine:
            found.append(argv.decode(errors="replace")[:120])
    names = docker("ps", "-a", "--filter", "name=kit-", "--format", "{{.Names}}").split()
    return found + [n for n in names if set(TRIAL_NAME.findall(n.encode())) & mine]


@pytest.fixture(scope="session", autouse=True)
def session(tmp_path_factory) -> None:
    Session.tmp, Session.started = tmp_path_factory.getbasetemp(), _ticks_now()


@pytest.fixture(autouse=True)
def nothing_left_behind(session):
    """After every integration test, no process or container of any trial it ran is left
    (a test that killed kit itself gets 30 s for the orphans to finish)."""
    yield
    deadline = time.monotonic() + 30
    while (left := trial_processes()) and time.monotonic() < deadline:
        time.sleep(1)
    assert left == [], f"left behind: {left}"
