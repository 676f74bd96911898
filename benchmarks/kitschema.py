"""The benchmarks' declarations: what each entry point is, what its record holds, the
figure runtimes are compared on, and how a sweep's rows are tabled and drawn.

Standard library only, Python 3.9: the benchmarks in every image validate their own
records with it (kitbench), and the runner on the host loads this same file
(kit.core.benches) for the campaign's argv, the results reader's checks, the analysis
and the report's tables and figures. A new benchmark is a script beside this file and
one entry in BENCHES; a sweep needs no analyser, table or figure of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA = "kit.bench/2"
DATASET_STAMP = "kit-dataset.json"  # in each JPEG data set a benchmark made (--data real)
CNN_MODELS = ("tiny", "alexnet", "resnet50", "resnet101", "resnet152", "inception3")


@dataclass(frozen=True)
class Metric:
    """The figure runtimes are compared on: a field of a training benchmark's record."""

    key: str
    unit: str
    higher_is_better: bool = True


@dataclass(frozen=True)
class Value:
    """A measured field of a sweep's rows: a median with its interval at every point."""

    key: str
    label: str
    unit: str
    digits: int = 1  # decimals in the report's tables


@dataclass(frozen=True)
class Series:
    """A list of rows in a sweep's record, one row a point. `at` names the fields that
    identify a point, the last of them the x axis (log scale) of the series' figures:
    with more than one, each runtime gets its own figure, a line per the others."""

    field: str
    title: str  # says what was timed, as the report's section title
    at: tuple[str, ...]
    values: tuple[Value, ...]


@dataclass(frozen=True)
class Bench:
    name: str
    script: str  # beside this file (/opt/kit/benchmarks in each image)
    title: str  # what it measures, in the report's headings
    fields: dict  # the record's own fields beyond COMMON: name -> (type, meaning)
    metric: Metric | None = None  # training benchmarks: compared across runtimes
    series: tuple[Series, ...] = ()  # sweeps: each a list field of `fields`
    version: str = "framework_version"  # the software a sweep's table names
    version_label: str = "version"
    models: tuple[str, ...] = ()
    fixed: tuple[str, ...] = ()  # options always passed
    needs: tuple[str, ...] = ()  # the Python modules it imports (checked in a foreign image)

    @property
    def sweep(self) -> bool:
        """A sweep has no model, batch size or data, and no metric: its rows are tabled."""
        return bool(self.series)


# field -> (type, meaning); a float field takes an int too
COMMON = {
    "schema": (str, SCHEMA),
    "bench": (str, "the entry point's name (BENCHES)"),
    "status": (str, "ok, or oom when the configuration did not fit in memory"),
    "framework": (str, "torch, tensorflow, caffe2, mpi4py or grpcio"),
    "framework_version": (str, "its version as imported"),
    "mpi_library": (str, "MPI library loaded (MPI_Get_library_version), or none"),
    "python": (str, "interpreter version"),
    "image": (str, "KIT_IMAGE when set by the image, else native"),
    "ranks": (int, "processes in the job"),
    "hosts": (list, "host names of the ranks"),
    "transport": (
        str,
        "how rank 0 reached the others: tcp over IFACE (its open TCP "
        "connections to other hosts), not tcp (ranks on several hosts, no TCP "
        "connection: an RDMA fabric), one host, or none (one rank)",
    ),
    "startup_s": (float, "launch (--launch-time) to the end of the first step, slowest rank"),
}
TRAIN = {  # an "oom" record has images_per_sec null and "error"
    "model": (str, "network name"),
    "batch_size": (int, "images per rank per step"),
    "data": (str, "synthetic, or real (decoded from JPEG files by the framework's pipeline)"),
    "task": (str, "throughput (fixed batch), or accuracy (a learnable problem)"),
    "dist": (
        str,
        "how gradients are combined: none, ddp, horovod, gloo, parameter_server "
        "or multi_worker_mirrored",
    ),
    "precision": (str, "fp32 or bf16"),
    "data_format": (str, "nchw or nhwc"),
    "threads_per_rank": (int, "intra-op threads"),
    "warmup_steps": (int, "untimed steps before the timed ones"),
    "steps": (int, "timed steps (more than asked when --min-time needed them)"),
    "min_time_s": (float, "the shortest timed part asked for (0: none)"),
    "images_per_sec": (float, "all ranks together: global batch x steps / slowest rank's time"),
    "images_per_sec_per_rank": (list, "each rank's own images/s"),
    "peak_rss_mb": (list, "each rank's peak resident memory, MB"),
    "step_times_s": (list, "rank 0's time per timed step"),
    "loss": (list, "rank 0's loss per timed step"),
}
# A launch's fixed cost, phase by phase, in the order they run (kitbench.Phases): what the
# training benchmarks' optional phases_s holds, in seconds of the rank whose start-up was
# slowest, and the columns of the report's launch cost table.
PHASES = {
    "runtime_start": "launch (--launch-time) to this process's creation (/proc/self/stat): "
    "the launcher and the container runtime starting it",
    "interpreter": "creation to the benchmark's main(): exec, the runtime's set-up inside "
    "the process, Python's start and its standard library",
    "imports": "the framework's and mpi4py's imports",
    "process_group": "MPI started, the ranks' rendezvous and their communication group",
    "model_build": "model, optimizer and training step built, initial weights shared",
    "warmup": "the untimed steps, the input pipeline's start and first compilations with them",
    "timed": "the timed steps (not fixed cost; what follows them is not measured inside)",
}
OPTIONAL = {  # checked when present: older records lack them
    "phases_s": (dict, "seconds per phase of the launch (PHASES), when measured"),
    "fingerprint": (
        dict,
        "what inside the launch can change its speed (fingerprint.py, its own `version`): "
        "libraries mapped (and those they shadow), the tuning environment, limits, ISA, "
        "thread pools, GPU",
    ),
}
IMAGES_PER_SEC = Metric("images_per_sec", "images/s")
LATENCY = Value("latency_us", "latency", "µs", 2)
BANDWIDTH = Value("bandwidth_mb_s", "bandwidth", "MB/s", 0)
MESSAGE = ("bytes",)
PAYLOAD = ("payload", "mode", "bytes")  # gRPC: uniform/random/skew, (non-)serialized


def _training(
    name: str, script: str, title: str, needs: tuple, models=CNN_MODELS, fixed=()
) -> Bench:
    return Bench(
        name, script, title, TRAIN, IMAGES_PER_SEC, models=models, fixed=fixed, needs=needs
    )


def _rows(*series: Series) -> dict:
    return {s.field: (list, f"{s.title}: one row per {', '.join(s.at)}") for s in series}


P2P = Series("p2p", "ping-pong between ranks 0 and 1", MESSAGE, (LATENCY, BANDWIDTH))
ALLREDUCE = Series("allreduce", "allreduce, float32 sum over all ranks", MESSAGE, (LATENCY,))
ALLGATHER = Series(
    "allgather",
    "allgather, float32 from every rank to every rank",
    MESSAGE,
    (LATENCY, Value("bandwidth_mb_s", "received", "MB/s", 0)),
)
GRPC_P2P = Series(
    "p2p",
    "Echo from rank 0 to rank 1",
    PAYLOAD,
    (Value("latency_us", "latency", "µs"), Value("bandwidth_mb_s", "bandwidth", "MB/s")),
)
GRPC_PS = Series(
    "ps",
    "parameter-server push and pull, every rank to each server",
    PAYLOAD,
    (Value("throughput_mb_s", "throughput", "MB/s"),),
)

TORCH = ("torch", "torchvision", "mpi4py")  # mpi4py: the Gloo rendezvous of several ranks
TF = ("tensorflow", "mpi4py")

BENCHES = {
    b.name: b
    for b in (
        _training("torch-cnn", "torch_cnn.py", "PyTorch CNN training", TORCH),
        _training(
            "torch-hvd",
            "torch_cnn.py",
            "PyTorch + Horovod CNN training",
            (*TORCH, "horovod.torch"),
            fixed=("--dist", "horovod"),
        ),
        _training(
            "tf-cnn", "tf_cnn.py", "TensorFlow + Horovod CNN training", (*TF, "horovod.tensorflow")
        ),
        _training("tf-ps", "tf_ps.py", "TensorFlow parameter-server CNN training", TF),
        _training(
            "tf-mwms", "tf_mwms.py", "TensorFlow MultiWorkerMirroredStrategy CNN training", TF
        ),
        _training(
            "caffe2-cnn",
            "caffe2_cnn.py",
            "Caffe2 CNN training",
            ("caffe2.python", "mpi4py"),
            models=CNN_MODELS[:-1],
        ),
        Bench(
            "mpi",
            "mpi_bench.py",
            "MPI (mpi4py)",
            _rows(P2P, ALLREDUCE),
            series=(P2P, ALLREDUCE),
            version="mpi_library",
            version_label="MPI library",
            needs=("mpi4py",),
        ),
        Bench(
            "allgather",
            "allgather_bench.py",
            "MPI allgather (mpi4py)",
            _rows(ALLGATHER),
            series=(ALLGATHER,),
            version="mpi_library",
            version_label="MPI library",
            needs=("mpi4py",),
        ),
        Bench(
            "grpc",
            "grpc_bench.py",
            "gRPC",
            {
                "servers": (int, "parameter-server ranks"),
                "buffers": (int, "buffers (iovecs) per payload, at most"),
                **_rows(GRPC_P2P, GRPC_PS),
            },
            series=(GRPC_P2P, GRPC_PS),
            version_label="grpcio",
            needs=("grpc", "mpi4py"),
        ),
    )
}


def fields(bench: str) -> dict:
    """Every field a record of `bench` holds (an unknown bench: the common ones)."""
    b = BENCHES.get(bench)
    return {**COMMON, **(b.fields if b else {})}


def validate(rec: dict) -> list[str]:
    """What is wrong with a record (empty when it follows its benchmark's declaration)."""
    problems = []
    if rec.get("schema") != SCHEMA:
        problems.append(f"schema is {rec.get('schema')!r}, not {SCHEMA}")
    bench = rec.get("bench")
    b = BENCHES.get(bench) if isinstance(bench, str) else None  # a list is no name
    if b is None:
        problems.append(f"bench {bench!r} is not declared")
    present = {k: v for k, v in OPTIONAL.items() if k in rec}
    for name, (kind, _) in {**fields(b.name if b else ""), **present}.items():
        value = rec.get(name)
        if b and b.metric and name == b.metric.key and rec.get("status") == "oom":
            kind = type(None)
        if not _is(value, kind):
            problems.append(f"{name}: {type(value).__name__}, want {kind.__name__}")
    phases = rec.get("phases_s")
    for phase, seconds in phases.items() if isinstance(phases, dict) else ():
        if phase not in PHASES or not _is(seconds, float):
            problems.append(f"phases_s: {phase} {seconds!r} is no declared phase's seconds")
    for s in b.series if b else ():
        rows = rec.get(s.field)
        for row in rows if isinstance(rows, list) else []:  # another type is named above
            want = (*s.at, *(v.key for v in s.values))
            missing = [k for k in want if not isinstance(row, dict) or k not in row]
            if missing:
                problems.append(f"{s.field}: a row without {', '.join(missing)}")
                break
    if rec.get("status") not in ("ok", "oom"):
        problems.append(f"status {rec.get('status')!r} is neither ok nor oom")
    return problems


def _is(value: object, kind: type) -> bool:
    """Whether value is of the declared kind, as JSON Schema's types say it (and the
    runner's checker, kit.results.schemas): a float takes an int, and True is no number."""
    if isinstance(value, bool) and kind is not bool:
        return False
    return isinstance(value, (int, float) if kind is float else kind)


JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array",
              dict: "object", type(None): "null"}  # fmt: skip


def json_schema() -> dict:
    """The kit.bench/2 record as a JSON Schema (2020-12), made from the declarations above,
    which validate() reads: docs/schemas/bench.json, held equal to validate by a test."""

    def typed(declared: dict) -> dict:
        return {name: {"type": JSON_TYPES[kind]} for name, (kind, _) in declared.items()}

    common = typed(COMMON)
    common["schema"] = {"const": SCHEMA}
    common["bench"] = {"enum": list(BENCHES)}
    common["status"] = {"enum": ["ok", "oom"]}
    common["phases_s"] = {
        "type": "object",
        "propertyNames": {"enum": list(PHASES)},
        "additionalProperties": {"type": "number"},
    }
    common["fingerprint"] = {"type": "object"}
    each = []
    for b in BENCHES.values():
        own = typed(b.fields)
        for s in b.series:
            want = [*s.at, *(v.key for v in s.values)]
            own[s.field] = {"type": "array", "items": {"type": "object", "required": want}}
        then: dict = {"properties": own, "required": list(b.fields)}
        if b.metric:  # an oom record has no figure (null, or left out), another has one
            key = b.metric.key
            then["required"].remove(key)
            then["if"] = {"properties": {"status": {"const": "oom"}}, "required": ["status"]}
            then["then"] = {"properties": {key: {"type": "null"}}}
            then["else"] = {"properties": {key: own.pop(key)}, "required": [key]}
        is_it = {"properties": {"bench": {"const": b.name}}, "required": ["bench"]}
        each.append({"if": is_it, "then": then})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"kit benchmark record ({SCHEMA})",
        "description": "What a benchmark prints as its record (a trial record's result), "
        "as benchmarks/kitschema.py declares it; the fields of its bench too.",
        "type": "object",
        "properties": common,
        "required": list(COMMON),
        "allOf": each,
    }
