"""`kit import PATH/Dockerfile --name NAME`: a user's Dockerfile, and the Apptainer
definition spython makes of it, so a site without Docker builds the same image.

spython's converter maps what has a Singularity equivalent (FROM, RUN, COPY/ADD, ENV,
LABEL, WORKDIR, ENTRYPOINT/CMD); what has none is listed with its line, and where
spython would write it into %post as a command that cannot run there (USER as `su`,
SHELL as it stands) or into %test as Dockerfile syntax (HEALTHCHECK), it is turned
into a comment, so the definition builds. Building is `docker build` or `apptainer
build` (as the caller, no root); the image then runs with `kit run --image`.
"""

import contextlib
import io
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

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
HEADER = re.compile(r"^Bootstrap: docker\nFrom: (\S+)", re.MULTILINE)  # spython's, first stage


@dataclass(frozen=True)
class Imported:
    name: str
    dockerfile: str
    definition: str
    untranslated: list[str]  # "line N: INSTRUCTION ...: why"
    base: str  # what the definition bootstraps from


def _instructions(text: str) -> list[tuple[int, str, str]]:
    """(line, INSTRUCTION, the rest) of each Dockerfile instruction, continuations joined."""
    out, joined, start = [], "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if not joined and (not line.strip() or line.lstrip().startswith("#")):
            continue
        start = start or n
        joined += line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            word, _, rest = joined.strip().partition(" ")
            out.append((start, word.upper(), rest.strip()))
            joined, start = "", 0
    return out


def _spython(path: Path) -> str:
    """spython's definition of the Dockerfile (its own messages kept out of kit's)."""
    from spython.logger import bot
    from spython.main.parse.parsers import DockerParser
    from spython.main.parse.writers import SingularityWriter

    said = io.StringIO()
    streams = bot.errorStream, bot.outputStream
    bot.errorStream = bot.outputStream = said
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            return SingularityWriter(DockerParser(str(path)).parse()).convert()
    except SystemExit:  # spython's bot.exit
        why = said.getvalue().strip().splitlines() or ["no reason given"]
        raise KitError(f"spython cannot convert {path}: {why[-1]}") from None
    finally:
        bot.errorStream, bot.outputStream = streams


def _mend(definition: str) -> str:
    """Lines spython writes that would break the build become comments."""
    out = []
    section = ""
    for line in definition.splitlines():
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
    archive: sites keep their base images so), else from the registry spython names."""
    first = HEADER.search(definition)
    if base is None:
        return definition, f"docker://{first.group(1)}" if first else "?"
    path = Path(base).expanduser().resolve()
    if not path.is_file():
        raise KitError(f"--base '{base}' is not a file; give a .sif or a docker save .tar")
    kind = "localimage" if path.suffix == ".sif" else "docker-archive"
    header = f"Bootstrap: {kind}\nFrom: {path}"
    return HEADER.sub(header, definition, count=1), f"{kind}:{path}"


def write(dockerfile: Path, name: str, out: Path | None, base: str | None) -> Imported:
    """NAME.def (and NAME.import.json, what was done) beside the Dockerfile or in out."""
    if not NAME.match(name):
        raise KitError(f"--name '{name}' must be lower-case letters, digits, '.', '_' or '-'")
    if not dockerfile.is_file():
        raise KitError(f"'{dockerfile}' is not a file; give the path of a Dockerfile")
    text = dockerfile.read_text(errors="replace")
    steps = _instructions(text)
    if not any(word == "FROM" for _, word, _ in steps):
        raise KitError(f"'{dockerfile}' has no FROM instruction; is it a Dockerfile?")
    definition, origin = _bootstrap(_mend(_spython(dockerfile)), base)
    untranslated = [
        f"line {n}: {word} {rest}".rstrip() + f": {UNTRANSLATED[word]}"
        for n, word, rest in steps
        if word in UNTRANSLATED
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
