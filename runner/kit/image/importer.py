"""`kit import PATH/Dockerfile --name NAME`: a user's Dockerfile, and the Apptainer
definition spython makes of it, so a site without Docker builds the same image.

spython's converter maps what has a Singularity equivalent (FROM, RUN, COPY/ADD, ENV,
LABEL, WORKDIR, ENTRYPOINT/CMD); what has none is listed with its line, and where
spython would write it into %post as a command that cannot run there (USER as `su`,
SHELL as it stands) or into %test as Dockerfile syntax (HEALTHCHECK), it is turned
into a comment, so the definition builds. Building is `docker build` or `apptainer
build` (as the caller, no root); the image then runs with `kit run --image`.

The Dockerfile is read once (kit.core.inputs: UTF-8, size-capped) and parsed once. A
multi-stage one becomes a multi-stage definition (`Stage:` headers, `%files from
STAGE`): spython keeps stages apart only when each FROM names its stage, so every stage
is given its Docker name (an unnamed one its number) and every COPY --from spells it;
what Apptainer cannot do (a stage FROM another stage, COPY --from an image) is refused.
"""

import contextlib
import io
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from kit.core import inputs
from kit.core.errors import KitError
from kit.core.paths import made_whole, write_atomically
from kit.core.proc import stream, which
from kit.image import convert, engine

# Instruction -> what an Apptainer definition does with it instead (none: listed)
UNTRANSLATED = {
    "USER": "Apptainer runs as the caller; the definition has no user to switch to",
    "SHELL": "%post runs /bin/sh; the shell is not chosen",
    "HEALTHCHECK": "Apptainer has no health checks; kept as a comment in %test",
    "ONBUILD": "no trigger runs in a later build",
    "EXPOSE": "the container shares the host's network; nothing to publish",
    "VOLUME": "Apptainer binds host folders at run time (--bind)",
    "STOPSIGNAL": "the runtime's own signal handling applies",
    "ARG": "set once to its default in %post; no --build-arg",
}
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
HEADER = re.compile(r"^Bootstrap: docker\nFrom: (\S+)", re.MULTILINE)  # spython's, each stage
FROM = re.compile(r"(?P<image>\S+)(?:\s+AS\s+(?P<name>\S+))?", re.IGNORECASE)
COPY_FROM = re.compile(r"(?:^|\s)--from=(\S+)")


@dataclass(frozen=True)
class Imported:
    name: str
    dockerfile: str
    definition: str
    untranslated: list[str]  # "line N: INSTRUCTION ...: why"
    base: str  # what the definition bootstraps from


@dataclass(frozen=True)
class Step:
    """One Dockerfile instruction, its continuation lines joined."""

    first: int  # its lines, from 1
    last: int
    word: str  # the instruction, upper case
    rest: str


def _instructions(text: str) -> list[Step]:
    """Each Dockerfile instruction, continuations joined."""
    out, joined, start = [], "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if not joined and (not line.strip() or line.lstrip().startswith("#")):
            continue
        start = start or n
        joined += line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            word, _, rest = joined.strip().partition(" ")
            out.append(Step(start, n, word.upper(), rest.strip()))
            joined, start = "", 0
    return out


@dataclass(frozen=True)
class Stage:
    name: str  # its own, lower case as Docker takes it, or its number (how Docker names
    # an unnamed one; never a name, which starts with a letter)
    image: str


def _stage(stages: list[Stage], ref: str) -> Stage | None:
    """The stage a FROM or a COPY --from names: by its name or its number, as Docker's."""
    ref = ref.lower()
    if ref.isdigit():
        return stages[int(ref)] if int(ref) < len(stages) else None
    return next((s for s in stages if s.name == ref), None)


def _listed(stages: list[Stage]) -> str:
    return ", ".join(f"{s.name} ({s.image})" for s in stages)


def _stages(where: str, steps: list[Step]) -> list[Stage]:
    """The Dockerfile's stages. Refused, naming them, what a definition's stages cannot
    be: a stage FROM another (an Apptainer stage starts from an image), a COPY --from
    that is none of the stages before it (an image: %files from takes a stage)."""
    stages: list[Stage] = []
    for step in steps:
        if step.word == "FROM":
            m = FROM.fullmatch(step.rest)
            if m is None:
                raise KitError(
                    f"{where} line {step.first}: 'FROM {step.rest}' is not FROM IMAGE [AS NAME] "
                    "(kit import takes no FROM options)"
                )
            if _stage(stages, m["image"]) or (m["name"] and _stage(stages, m["name"])):
                raise KitError(
                    f"{where} line {step.first}: 'FROM {step.rest}' names a stage before it "
                    f"(stages: {_listed(stages)}); an Apptainer stage starts from an image and "
                    "each has its own name: build this one with docker"
                )
            stages.append(Stage((m["name"] or str(len(stages))).lower(), m["image"]))
        elif (
            step.word == "COPY"
            and (m := COPY_FROM.search(step.rest))
            and _stage(stages[:-1], m[1]) is None
        ):
            before = f"stages: {_listed(stages[:-1])}" if len(stages) > 1 else "there is none"
            raise KitError(
                f"{where} line {step.first}: COPY --from={m[1]} names no stage before it "
                f"({before}); Apptainer's %files from takes a stage, not an image"
            )
    return stages


def _named(text: str, steps: list[Step], stages: list[Stage]) -> list[str]:
    """The Dockerfile's lines for spython: of several stages, every FROM naming its stage
    and every COPY --from spelling that name (spython puts the lines of a FROM without
    AS into the stage before, and looks --from up by its exact name)."""
    lines = text.splitlines(keepends=True)
    if len(stages) < 2:
        return lines
    made = iter(stages)
    for step in steps:
        if step.word == "FROM":
            stage = next(made)
            line = f"FROM {stage.image} AS {stage.name}\n"
        elif step.word == "COPY" and (m := COPY_FROM.search(step.rest)):
            rest = COPY_FROM.sub(" ", step.rest, count=1).strip()
            line = f"COPY --from={_stage(stages, m[1]).name} {rest}\n"
        else:
            continue
        lines[step.first - 1 : step.last] = [line] + ["\n"] * (step.last - step.first)
    return lines


def _spython(where: str, lines: list[str]) -> str:
    """spython's definition of the Dockerfile's lines, parsed once (its own messages kept
    out of kit's)."""
    from spython.logger import bot
    from spython.main.parse.parsers import DockerParser
    from spython.main.parse.writers import SingularityWriter

    said = io.StringIO()
    streams = bot.errorStream, bot.outputStream
    bot.errorStream = bot.outputStream = said
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            parser = DockerParser(None, load=False)  # it would read the file itself, and
            parser.lines = lines  # parse it on load: then parse() made every RUN twice
            return SingularityWriter(parser.parse()).convert()
    except SystemExit:  # spython's bot.exit
        why = said.getvalue().strip().splitlines() or ["no reason given"]
        raise KitError(f"spython cannot convert {where}: {why[-1]}") from None
    except (IndexError, KeyError, TypeError, ValueError) as e:  # a line it cannot split
        raise KitError(f"spython cannot convert {where} ({type(e).__name__}: {e})") from None
    finally:
        bot.errorStream, bot.outputStream = streams


def _mend(definition: str) -> str:
    """Lines spython writes that would break the build become comments."""
    out = []
    section = ""
    for line in definition.splitlines():
        line = line.rstrip()  # spython leaves a space where it took out FROM's AS NAME
        if line.startswith("%"):
            section = line.split()[0]
        elif section == "%post" and (line.startswith("su - ") or line.startswith("SHELL [")):
            line = f"# {line}  (kit import: not run, see the list of what did not translate)"
        elif section == "%test" and line.startswith("CMD "):
            line = f"# HEALTHCHECK {line}"
        out.append(line)
    return "\n".join(out).strip() + "\n"


def _bootstrap(definition: str, base: str | None) -> tuple[str, str]:
    """The definition bootstrapped from `base` when given (a local SIF, or a docker save
    archive: sites keep their base images so), else from the registry spython names (the
    last stage's image: the one that runs)."""
    if base is None:
        images = HEADER.findall(definition)
        return definition, f"docker://{images[-1]}" if images else "?"
    path = Path(base).expanduser().resolve()
    if not path.is_file():
        raise KitError(f"--base '{base}' is not a file; give a .sif or a docker save .tar")
    kind = "localimage" if path.suffix == ".sif" else "docker-archive"
    header = f"Bootstrap: {kind}\nFrom: {path}"
    return HEADER.sub(header, definition, count=1), f"{kind}:{path}"


BINARY = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # no text's: all but \t \n \r


def write(dockerfile: Path, name: str, out: Path | None, base: str | None) -> Imported:
    """NAME.def (and NAME.import.json, what was done) beside the Dockerfile or in out."""
    if not NAME.match(name):
        raise KitError(f"--name '{name}' must be lower-case letters, digits, '.', '_' or '-'")
    if not dockerfile.is_file():
        raise KitError(f"'{dockerfile}' is not a file; give the path of a Dockerfile")
    where = f"'{dockerfile}'"
    text = inputs.read_text(dockerfile, where, "give a Dockerfile (UTF-8 text)")
    if bad := BINARY.search(text):  # spython copied a NUL or a \x01 into the definition
        line = text.count("\n", 0, bad.start()) + 1
        raise KitError(
            f"{where} line {line} holds the control character {bad.group()!r}; a Dockerfile "
            "is text: remove it"
        )
    steps = _instructions(text)
    stages = _stages(where, steps)
    if not stages:
        raise KitError(f"{where} has no FROM instruction; is it a Dockerfile?")
    if base is not None and len(stages) > 1:
        raise KitError(
            f"--base replaces the one image a Dockerfile starts FROM, and {where} has "
            f"{len(stages)} stages: {_listed(stages)}; leave out --base"
        )
    definition, origin = _bootstrap(_mend(_spython(where, _named(text, steps, stages))), base)
    untranslated = [
        f"line {s.first}: {s.word} {s.rest}".rstrip() + f": {UNTRANSLATED[s.word]}"
        for s in steps
        if s.word in UNTRANSLATED
    ]
    folder = (out or dockerfile.parent).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    imported = Imported(name, str(dockerfile.resolve()), str(folder / f"{name}.def"),
                        untranslated, origin)  # fmt: skip
    write_atomically(Path(imported.definition), definition)
    write_atomically(folder / f"{name}.import.json", json.dumps(asdict(imported), indent=2) + "\n")
    return imported


def build(imported: Imported, with_: str) -> str:
    """Build the imported image: `docker` (tag NAME, in the local engine) or `apptainer`
    (NAME.sif beside the definition, as the caller). Returns what kit run --image takes."""
    context = str(Path(imported.dockerfile).parent)
    if with_ == "docker":
        engine.server_version()
        stream([engine.docker(), "build", "--tag", imported.name, "--file",
                imported.dockerfile, context], "docker build")  # fmt: skip
        return f"docker:{imported.name}"
    apptainer = which("apptainer", convert.APPTAINER_FIX)
    sif = Path(imported.definition).with_suffix(".sif")
    comp = convert.mksquashfs_args(convert.compression())
    with made_whole(sif) as part:
        stream([apptainer, "build", "--force", "--mksquashfs-args", " ".join(comp), str(part),
                imported.definition], "apptainer build", cwd=context)  # fmt: skip
    return str(sif)
