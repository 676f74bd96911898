"""Launch fingerprints compared across arms: what differs between an arm's launches and
the baseline's, and the one more arm that would test each difference.

Every trial record carries the fingerprint its launch took of itself
(benchmarks/fingerprint.py: libraries mapped, the tuning environment, limits, ISA,
thread pools, GPU). A verdict such as "docker: 5 % slower" says that an arm is slower,
not why; setting its launches' facts beside the baseline's names the suspects, and an
arm with just one of them changed (a runtime option, where kit's runtimes have one)
turns a suspect into a cause or clears it. A fact that varies between an arm's own
launches is named apart: when it varies in both arms it is no difference between them.
"""

import re
import shlex
from dataclasses import dataclass, field
from typing import NamedTuple

from kit.results.record import Key, Trial

GROUPS = ("libraries", "environment", "limits", "isa", "threads", "gpu")
NO_ARM = "no arm can test it yet"
SHOWN_VALUES = 4  # values of a fact that varies, before "..."
EXTENSION = re.compile(r"\.cpython-|\.abi3\.so|/lib-dynload/")  # a Python extension module
OPTIONS = ("docker", "podman", "singularity", "singularity-bind")  # --env, --cpus, --memory
ENGINES = ("docker", "podman")  # take --security-opt, --cpuset-cpus, --ulimit
SECCOMP = ("seccomp", "seccomp_filters", "speculation_store_bypass")
HOST_WIDE = ("cores_seen", "cpu_flags", "thp_enabled", "thp_defrag")  # one kernel, one CPU
# which runtime options set a limit: an arm whose own --runtime-arg set it is tested without
SETS = {
    "cpu.max": ("--cpus", "--cpu-quota", "--cpu-period"),
    "memory.max": ("--memory",),
    "affinity": ("--cpuset-cpus",),
    **dict.fromkeys(SECCOMP, ("--security-opt",)),
}


@dataclass
class Difference:
    group: str
    fact: str
    baseline: str  # the baseline's value, or the values its launches had
    value: str  # this arm's
    test: str  # kit run's arms that test it (after the campaign's options), or NO_ARM: why


@dataclass
class Varying:
    group: str
    fact: str
    values: list[str]


@dataclass
class ArmFacts:
    runtime: str
    launches: int  # its ok launches
    fingerprinted: int  # those whose record carries a fingerprint
    constant: int = 0  # facts alike in all of them
    varies: list[Varying] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)  # from the baseline's


@dataclass
class Fingerprints:
    baseline: str
    campaign: str  # kit run's options for the group's configuration, the arms left out
    arms: list[ArmFacts]  # the baseline first


Facts = dict[tuple[str, str], tuple[str, str]]  # (group, fact) -> (compared, shown)


class Tested(NamedTuple):
    """An arm compared with the baseline, as a test's arms are made from it."""

    baseline: str
    runtime: str  # the arm: NAME or NAME@LABEL
    kind: str  # its runtime's name
    args: list[str]  # its own --runtime-arg options


def facts(fp: dict) -> Facts:
    """A fingerprint's facts, flat. A library is named by its file name and compared by
    content (size and build-id): the same build in another folder (a venv's, an image's)
    is no difference. A file of a mapped library's name on the loader's default path
    (which a program linked apart, like inductor's probe, loads) is named by its path."""
    out: Facts = {}
    shadowed = fp.get("shadowed")
    for path, ident in shadowed.items() if isinstance(shadowed, dict) else ():
        out[("libraries", f"{path} (loader's path)")] = (str(ident) or path, ident or "unreadable")
    for group in GROUPS:
        values = fp.get(group)
        for name, value in values.items() if isinstance(values, dict) else ():
            if group != "libraries":
                out[(group, name)] = (str(value), str(value))
                continue
            for lib, ident in value.items() if isinstance(value, dict) else ():
                path = f"{name}/{lib}"
                # a folder folded to one entry ('*': benchmarks/fingerprint.py) by its path
                key = (group, lib if (group, lib) not in out and lib != "*" else path)
                out[key] = (str(ident) or path, f"{path} ({ident or 'unreadable'})")
    return out


def _order(key: tuple[str, str]) -> tuple[int, str]:
    """Facts in GROUPS' order, by name within a group."""
    return GROUPS.index(key[0]), key[1]


def _seen(launches: list[Facts], key: tuple[str, str]) -> dict[str | None, str]:
    """What the launches had for a fact: compared value -> shown (None: lacking it)."""
    lacking = "unset" if key[0] == "environment" else "absent"
    out: dict[str | None, str] = {}
    for f in launches:
        compared, shown = f.get(key, (None, lacking))
        out.setdefault(compared, shown)
    return out


def _said(seen: dict[str | None, str]) -> str:
    shown = sorted(seen.values())
    more = f" ... ({len(shown)} values)" if len(shown) > SHOWN_VALUES else ""
    return " | ".join(shown[:SHOWN_VALUES]) + more


def compare(by_rt: dict[str, list[Trial]], baseline: str, key: Key) -> Fingerprints | None:
    """Each arm's launches against the baseline's (None where no launch of the group carries
    a fingerprint, or the group has no baseline arm)."""
    launches = {
        rt: [facts(fp) for t in rs if isinstance(fp := t.result.get("fingerprint"), dict)]
        for rt, rs in by_rt.items()
    }
    if baseline not in by_rt or not any(launches.values()):
        return None
    order = [baseline, *sorted(rt for rt in by_rt if rt != baseline)]
    base = launches[baseline]
    out = Fingerprints(baseline, _campaign(key), [])
    for rt in order:
        mine = launches[rt]
        arm = ArmFacts(rt, len(by_rt[rt]), len(mine))
        out.arms.append(arm)
        keys = sorted({k for f in mine for k in f}, key=_order)
        for k in keys:
            seen = _seen(mine, k)
            if len(seen) > 1:
                arm.varies.append(Varying(*k, sorted(seen.values())))
        arm.constant = len(keys) - len(arm.varies)
        if rt != baseline and mine and base:
            first = by_rt[rt][0]
            kind = first.runtime_kind or rt.partition("@")[0]
            tested = Tested(baseline, rt, kind, list(first.runtime_args))
            arm.differences = _fold(_differences(base, mine, tested))
    return out


def _differences(base: list[Facts], mine: list[Facts], arm: Tested) -> list[Difference]:
    """The facts whose values differ (a fact that varies in both arms' launches is noise to
    both, not a difference between them)."""
    keys = {k for f in [*base, *mine] for k in f}
    out = []
    for k in sorted(keys, key=_order):
        theirs, ours = _seen(base, k), _seen(mine, k)
        if set(theirs) == set(ours) or (len(theirs) > 1 and len(ours) > 1):
            continue
        test = _test(*k, theirs, arm)
        out.append(Difference(*k, _said(theirs), _said(ours), test))
    return out


def _fold(diffs: list[Difference]) -> list[Difference]:
    """Python extension modules that differ as one row (another interpreter or package
    build changes dozens of them at once)."""
    ext = [d for d in diffs if d.group == "libraries" and EXTENSION.search(d.baseline + d.value)]
    if len(ext) < 2:
        return diffs
    names = ", ".join(d.fact for d in ext[:3]) + (", ..." if len(ext) > 3 else "")
    why = f"{NO_ARM}: they come with the interpreter and packages"
    row = Difference("libraries", f"{len(ext)} Python extension modules", names, "others", why)
    return [*[d for d in diffs if d not in ext], row]


def _test(group: str, fact: str, theirs: dict[str | None, str], arm: Tested) -> str:
    """The arms of one more campaign that test a difference: the baseline, the arm, and the
    arm with that one fact made the baseline's (its own option that set it dropped, or
    the option that sets it added), or NO_ARM and why."""
    if group in ("libraries", "gpu"):
        return f"{NO_ARM}: they come with the image or the host"
    if fact in HOST_WIDE:
        return f"{NO_ARM}: the same for every arm on one host"
    if len(theirs) > 1:
        return f"{NO_ARM}: {arm.baseline}'s own launches differ in it"
    base = next(iter(theirs))
    drop = [a for a in arm.args if _sets(a, group, fact)]
    add = [] if drop or base is None else [x for x in [_option(group, fact, base, arm.kind)] if x]
    if not drop and not add:
        if arm.kind == "native":
            return f"{NO_ARM}: native takes no runtime options"
        if base is None:
            return f"{NO_ARM}: no runtime option takes it away"
        return f"{NO_ARM}: no {arm.kind} option kit passes gives it {arm.baseline}'s value"
    if fact in SECCOMP and add:
        label = "seccomp-off"
    else:
        label = re.sub(r"[^a-z0-9_.-]+", "-", f"{fact}-{base}" if add else f"no-{fact}", flags=re.I)
    new = f"{arm.kind}@{label.strip('-')[:40].lower()}"
    options = [f"--runtime {arm.baseline},{arm.runtime},{new}"]
    kept = [a for a in arm.args if a not in drop]
    options += [f"--runtime-arg {shlex.quote(f'{new}:{a}')}" for a in [*kept, *add]]
    return " ".join(options)


def _sets(arg: str, group: str, fact: str) -> bool:
    """Whether one of an arm's runtime options sets this fact."""
    if group == "environment":
        return arg.startswith(("--env=", "-e=")) and arg.split("=", 1)[1].startswith(f"{fact}=")
    return any(arg == o or arg.startswith(f"{o}=") for o in SETS.get(fact, ()))


def _option(group: str, fact: str, base: str, kind: str) -> str | None:
    """The runtime option that gives an arm of runtime `kind` the baseline's value of a fact
    (None where it has none)."""
    env = kind in OPTIONS
    if group == "environment" and env:
        return f"--env={fact}={base}"
    if group == "threads" and fact == "torch_intra_op" and env:
        return f"--env=OMP_NUM_THREADS={base}"  # kitbench's threads per rank, unless --threads
    if fact == "torch_cpu_capability" and env:
        return f"--env=ATEN_CPU_CAPABILITY={base.lower()}"
    if fact == "compile_isa" and env:  # inductor skips its probe (1) or takes scalar code (0)
        return f"--env=TORCHINDUCTOR_VEC_ISA_OK={0 if base == 'INVALID_VEC_ISA' else 1}"
    if fact == "cpu.max" and env and base.split()[0].isdigit():
        quota, period = base.split()
        return f"--cpus={int(quota) / int(period):g}"
    if fact == "memory.max" and env and base.isdigit():
        return f"--memory={base}"
    if kind not in ENGINES:
        return None
    if fact in SECCOMP:
        return "--security-opt=seccomp=unconfined"
    if fact == "affinity":
        return f"--cpuset-cpus={base}"
    if fact.startswith("ulimit_"):
        soft, hard = (x.replace("unlimited", "-1") for x in base.split("/"))
        return f"--ulimit={fact.removeprefix('ulimit_')}={soft}:{hard}"
    return None


def _campaign(key: Key) -> str:
    """kit run's options for a group's configuration, which a test adds its arms to."""
    if key.model == "-":  # a user's command: their image and command, as they gave them
        return "--image REF --command CMD"
    options = [key.image, f"--bench {key.bench}", f"--model {key.model}"]
    options += [f"--batch-size {key.batch_size}", f"--np {key.ranks}"]
    if key.data != "synthetic":
        options.append(f"--data {key.data}")
    options += [shlex.quote(f"--bench-arg={x}") for x in key.bench_args.split()]
    options += {"slurm": ["--launcher slurm"], "hosts": ["--hosts H1,H2"]}.get(key.launcher, [])
    return " ".join(options)


VARIES_COLUMNS = ["runtime", "group", "fact", "values seen"]


def columns(fp: Fingerprints) -> list[str]:
    return ["runtime", "group", "fact", fp.baseline, "this arm", "test: kit run CAMPAIGN with"]


def rows(fp: Fingerprints) -> list[list[str]]:
    """The differences table: one row per difference of each arm."""
    return [
        [arm.runtime, d.group, d.fact, d.baseline, d.value, d.test]
        for arm in fp.arms
        for d in arm.differences
    ]


def varies_rows(fp: Fingerprints) -> list[list[str]]:
    return [
        [arm.runtime, v.group, v.fact, " | ".join(v.values)] for arm in fp.arms for v in arm.varies
    ]


def summary(fp: Fingerprints, runtime: str) -> str:
    """One arm's differences on one line (the CSV's cell)."""
    arm = next((x for x in fp.arms if x.runtime == runtime), None)
    diffs = arm.differences if arm else []
    return "; ".join(f"{d.group} {d.fact}: {d.baseline} -> {d.value}" for d in diffs)


def sentences(fp: Fingerprints, verdicts: dict[str, str]) -> list[str]:
    """What the comparison says, an arm a sentence, read with each arm's verdict: what was
    seen, and that a difference is a suspect until an arm tests it."""
    out = [
        f"Each launch's fingerprint (libraries mapped, tuning environment, limits, ISA, "
        f"thread pools) beside {fp.baseline}'s. A test is one more campaign, kit run "
        f"{fp.campaign} with the arms in its row: the arm that changes only that fact; "
        "where its gap closes, that fact is the cause."
    ]
    for arm in fp.arms:
        head = f"{arm.runtime}: {arm.fingerprinted} of {arm.launches} launches fingerprinted"
        if not arm.fingerprinted:
            out.append(f"{head} (records of an older kit): nothing to compare.")
            continue
        head += f", {arm.constant} facts alike in all, {len(arm.varies)} varying between them"
        if arm.runtime == fp.baseline:
            out.append(f"{head}.")
            continue
        if not fp.arms[0].fingerprinted:
            out.append(f"{head}; {fp.baseline}'s launches carry none: nothing to compare.")
            continue
        verdict = verdicts.get(arm.runtime) or "not compared"
        names = [d.fact for d in arm.differences]
        seen = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        if not names:
            out.append(
                f"{head}. Verdict: {verdict}. No difference from {fp.baseline}'s launches in "
                "what the fingerprint sees: a gap lies elsewhere (the runtime's own work) or "
                "in noise."
            )
        elif verdict.startswith("no significant difference"):
            out.append(
                f"{head}. Verdict: {verdict}, yet its launches differ from {fp.baseline}'s in "
                f"{seen}: this comparison cannot tell which of them matter (they may be too "
                "small to detect, or cancel out) without an arm that tests them."
            )
        else:
            out.append(
                f"{head}. Verdict: {verdict}. Its launches differ from {fp.baseline}'s in "
                f"{seen}: suspects, until an arm that changes one of them shows its share."
            )
    return out
