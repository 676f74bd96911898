"""Declared benchmarks: each entry point, how it is run, and what its record reports.

The campaign builds argv from a spec, the plan checks models against it, the results
reader checks records against it, and the analysis compares runtimes on its metric in
the direction the metric declares. A new benchmark (one reporting tokens/s, or a
latency, where lower is better) is a script under benchmarks/ and its spec here.
"""

from dataclasses import dataclass

from kit.core.errors import KitError

Number = (int, float)
CNN_MODELS = ("tiny", "alexnet", "resnet50", "resnet101", "resnet152", "inception3")


@dataclass(frozen=True)
class Metric:
    """The figure runtimes are compared on: a field of the benchmark's record."""

    key: str
    unit: str
    higher_is_better: bool = True


@dataclass(frozen=True)
class Bench:
    name: str
    script: str  # in benchmarks/ (and /opt/kit/benchmarks in each image)
    kind: str  # training: model x batch size x data per trial; sweep: ranks only
    result: tuple[tuple[str, type | tuple], ...]  # fields an ok record must hold
    metric: Metric | None = None  # compared across runtimes (training benchmarks)
    models: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()  # options always passed

    @property
    def sweep(self) -> bool:
        return self.kind == "sweep"


IMAGES_PER_SEC = Metric("images_per_sec", "images/s")
TRAINING_RESULT = (
    ("images_per_sec", Number),
    ("startup_s", Number),
    ("framework_version", str),
    ("mpi_library", str),
)


def _training(name: str, script: str, models=CNN_MODELS, fixed=()) -> Bench:
    return Bench(name, script, "training", TRAINING_RESULT, IMAGES_PER_SEC, models, fixed)


BENCHES: dict[str, Bench] = {
    b.name: b
    for b in (
        _training("torch-cnn", "torch_cnn.py"),
        _training("torch-hvd", "torch_cnn.py", fixed=("--dist", "horovod")),
        _training("tf-cnn", "tf_cnn.py"),
        _training("tf-ps", "tf_ps.py"),
        _training("caffe2-cnn", "caffe2_cnn.py", models=CNN_MODELS[:-1]),  # no inception3
        Bench(
            "mpi",
            "mpi_bench.py",
            "sweep",
            (("p2p", list), ("allreduce", list), ("mpi_library", str)),
        ),
        Bench(
            "grpc",
            "grpc_bench.py",
            "sweep",
            (("p2p", list), ("ps", list), ("servers", int), ("framework_version", str)),
        ),
    )
}


def get(name: str) -> Bench:
    if name not in BENCHES:
        raise KitError(f"unknown benchmark '{name}' (known: {', '.join(BENCHES)})")
    return BENCHES[name]


def is_sweep(name: str) -> bool:
    """A sweep (no model, batch size or data); an unknown name counts as training."""
    return name in BENCHES and BENCHES[name].sweep


def metric(name: str) -> Metric:
    """The metric a benchmark's runtimes are compared on (images/s if it declares none)."""
    b = BENCHES.get(name)
    return b.metric if b and b.metric else IMAGES_PER_SEC
