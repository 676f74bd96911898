"""Render recipes into containers/<image>/: a Dockerfile and an Apptainer definition."""

from pathlib import Path

from . import blocks
from .base import base_tag
from .blocks import CA_SECRET, Copy, Env, Label, Primitive, Shell
from .errors import KitError
from .paths import repo_root
from .recipes import Recipe

CONTINUE = " && \\\n    "


def _header(r: Recipe, variant: str) -> list[str]:
    return [
        f"# Rendered by `kit render` from recipes/{r.name}.toml "
        f"(recipe {r.version}, variant {variant}).",
        "# Edit the recipe, not this file: `kit render --check` fails when they differ.",
    ]


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dockerfile(r: Recipe, variant: str = "cpu") -> str:
    lines = [
        *_header(r, variant),
        "# Build from the repository root (`kit build` does this and passes the site CA):",
        f"#   DOCKER_BUILDKIT=1 docker build -f containers/{r.name}/Dockerfile \\",
        f"#     --secret id=cacert,src=/etc/ssl/certs/ca-certificates.crt -t {r.tag(variant)} .",
        f"ARG BASE_IMAGE={base_tag(r.distro)}",
        "FROM ${BASE_IMAGE}",
        'SHELL ["/bin/bash", "-o", "pipefail", "-c"]',
        "ARG KIT_PIP_INDEX_URL",
    ]
    for p in blocks.image(r, variant):
        lines.append(_docker(p))
    return "\n".join(lines) + "\n"


def _docker(p: Primitive) -> str:
    match p:
        case Label(values) | Env(values):
            word = "LABEL" if isinstance(p, Label) else "ENV"
            body = " \\\n    ".join(f"{k}={_quote(v)}" for k, v in values)
            return f"{word} {body}"
        case Shell(commands, secret):
            mount = f"--mount=type=secret,id=cacert,target={CA_SECRET} " if secret else ""
            return f"RUN {mount}" + CONTINUE.join(commands)
        case Copy(src, dst):
            return f"COPY {src} {dst}"
    raise TypeError(p)


def definition(r: Recipe, variant: str = "cpu") -> str:
    """An Apptainer definition built without Docker, from the base image as a SIF.

    Build from the repository root:
    apptainer build --build-arg BASE_SIF=base.sif --bind CA:/run/secrets/cacert x.sif x.def
    """
    prims = blocks.image(r, variant)
    sections: dict[str, list[str]] = {"labels": [], "environment": [], "files": [], "post": []}
    for p in prims:
        match p:
            case Label(values):
                sections["labels"] += [f"{k} {v}" for k, v in values]
            case Env(values):
                exports = [f"export {k}={_quote(v)}" for k, v in values]
                sections["environment"] += exports
                sections["post"] += exports
            case Copy(src, dst):
                sections["files"].append(f"{src} {dst}")
            case Shell(commands):
                sections["post"] += [c.replace("\n", "\n    ") for c in commands]
    lines = [
        *_header(r, variant),
        "# Build from the repository root without Docker, from the base image as a SIF:",
        f"#   apptainer build --build-arg BASE_SIF=base.sif {r.name}.sif "
        f"containers/{r.name}/{r.name}.def",
        "Bootstrap: localimage",
        "From: {{ BASE_SIF }}",
        "",
        "%arguments",
        f"    BASE_SIF=kit-base-{r.distro}.sif",
    ]
    for name in ("labels", "environment", "files"):
        lines += ["", f"%{name}"] + [f"    {x}" for x in sections[name]]
    lines += ["", "%post", "    set -euo pipefail"] + [f"    {x}" for x in sections["post"]]
    lines += ["", "%runscript", f'    exec {blocks.PYTHON} "$@"']
    return "\n".join(lines) + "\n"


def outputs(r: Recipe) -> dict[Path, str]:
    """Every file `kit render` writes for one recipe (the cpu variant is the default build)."""
    out = repo_root() / "containers" / r.name
    return {out / "Dockerfile": dockerfile(r), out / f"{r.name}.def": definition(r)}


def write(recipes: list[Recipe]) -> list[Path]:
    written = []
    for r in recipes:
        for path, text in outputs(r).items():
            if not path.exists() or path.read_text() != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
                written.append(path)
    return written


def check(recipes: list[Recipe]) -> None:
    """Fail, naming every drifted file, when containers/ no longer matches the recipes."""
    stale = [
        str(path.relative_to(repo_root()))
        for r in recipes
        for path, text in outputs(r).items()
        if not path.exists() or path.read_text() != text
    ]
    if stale:
        raise KitError(
            f"containers/ differs from recipes/ for {', '.join(stale)}; run 'kit render'"
        )
