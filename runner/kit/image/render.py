"""Render recipes into containers/<image>/: a Dockerfile and an Apptainer definition."""

import os
import shlex
from pathlib import Path

from kit.core.errors import Failed
from kit.core.paths import repo_root
from kit.image import blocks
from kit.image.blocks import CA_SECRET, Copy, Env, Label, Primitive, Shell
from kit.image.recipes import Recipe

CONTINUE = " && \\\n    "


def _header(r: Recipe, variant: str) -> list[str]:
    return [
        f"# Rendered by `kit render` from recipes/{r.name}.toml "
        f"(recipe {r.version}, variant {variant}).",
        "# Edit the recipe, not this file: `kit render --check` fails when they differ.",
    ]


def _quote(value: str) -> str:
    """A Dockerfile ENV/LABEL value: double-quoted, with the builder's own expansion of
    `$` escaped too (recipe values are text, not references). Line breaks cannot reach
    here: the recipe schema refuses them."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def dockerfile(r: Recipe, variant: str = "cpu") -> str:
    lines = [
        *_header(r, variant),
        "# Build from the repository root (`kit build` does this and passes the site CA):",
        f"#   DOCKER_BUILDKIT=1 docker build -f containers/{r.name}/{dockerfile_name(variant)} \\",
        f"#     --secret id=cacert,src=/etc/ssl/certs/ca-certificates.crt -t {r.tag(variant)} .",
        f"ARG BASE_IMAGE={r.base}",
    ]
    for stage in blocks.image(r, variant):
        lines += [
            "FROM ${BASE_IMAGE}" + (f" AS {stage.name}" if stage.name else ""),
            'SHELL ["/bin/bash", "-o", "pipefail", "-c"]',
            "ARG KIT_PIP_INDEX_URL",
            f"ARG SOURCE_DATE_EPOCH={r.epoch}",
        ]
        lines += [_docker(p) for p in stage.prims]
    return "\n".join(lines) + "\n"


def _docker(p: Primitive) -> str:
    match p:
        case Label(values) | Env(values):
            word = "LABEL" if isinstance(p, Label) else "ENV"
            body = " \\\n    ".join(f"{k}={_quote(v)}" for k, v in values)
            return f"{word} {body}"
        case Shell(commands, secret, bind):
            flags = f"--mount=type=secret,id=cacert,target={CA_SECRET} " if secret else ""
            if bind:
                flags += f"--mount=type=bind,source={bind[0]},target={bind[1]} "
            return f"RUN {flags}" + CONTINUE.join(commands)
        case Copy(src, dst, stage):
            return f"COPY {f'--from={stage} ' if stage else ''}{src} {dst}"
    raise TypeError(p)


def definition(r: Recipe, variant: str = "cpu") -> str:
    """An Apptainer definition built without Docker, from the base image as a SIF.

    Build from the repository root:
    apptainer build --ignore-fakeroot-command --bind CA:/run/secrets/cacert
        --build-arg BASE_SIF=base.sif x.sif x.def
    """
    stages = blocks.image(r, variant)
    lines = [
        *_header(r, variant),
    ]
    if r.local_base:
        lines += [
            "# Build from the repository root without Docker, from the base image as a SIF:",
            "#   apptainer build --ignore-fakeroot-command --build-arg BASE_SIF=base.sif \\",
            f"#     --bind /etc/ssl/certs/ca-certificates.crt:{CA_SECRET} {r.name}.sif "
            f"containers/{r.name}/{definition_name(r.name, variant)}",
        ]
        bootstrap = ["Bootstrap: localimage", "From: {{ BASE_SIF }}"]
    else:
        lines += [
            "# Build from the repository root without Docker:",
            "#   apptainer build --ignore-fakeroot-command \\",
            f"#     --bind /etc/ssl/certs/ca-certificates.crt:{CA_SECRET} {r.name}-{variant}.sif "
            f"containers/{r.name}/{definition_name(r.name, variant)}",
        ]
        bootstrap = ["Bootstrap: docker", f"From: {r.base}"]
    for i, stage in enumerate(stages):
        if i:
            lines.append("")
        lines += bootstrap
        if len(stages) > 1:
            lines.append(f"Stage: {stage.name or 'final'}")
        if i == 0 and r.local_base:
            lines += ["", "%arguments", f"    BASE_SIF=kit-base-{r.distro}.sif"]
        lines += _sections(
            stage, (f"export SOURCE_DATE_EPOCH={r.epoch}", *blocks.under_fakeroot(r))
        )
    lines += ["", "%runscript", f'    exec {blocks.PYTHON} "$@"']
    return "\n".join(lines) + "\n"


def _sections(stage: blocks.Stage, preamble: tuple[str, ...]) -> list[str]:
    sections: dict[str, list[str]] = {"labels": [], "environment": [], "files": [], "post": []}
    copied: dict[str, list[str]] = {}  # %files from <stage>
    for p in stage.prims:
        match p:
            case Label(values):
                sections["labels"] += [f"{k} {v}" for k, v in values]
            case Env(values):
                exports = [f"export {k}={shlex.quote(v)}" for k, v in values]
                sections["environment"] += exports
                sections["post"] += exports
            case Copy(src, dst, ""):
                sections["files"].append(f"{src} {dst}")
            case Copy(src, dst, stage):
                copied.setdefault(stage, []).append(f"{src} {dst}")
            case Shell(commands, _, bind):
                sections["post"] += [c.replace("\n", "\n    ") for c in commands]
                if bind:  # a definition has no build-time mounts: copied in, then removed
                    sections["files"].append(f"{bind[0]} {bind[1]}")
                    sections["post"].append(f"rm -rf {bind[1]}")
    # The site CA is bound at CA_SECRET for %post (apptainer build --bind CA:CA_SECRET),
    # which needs a mount point; an empty file means no CA.
    lines = [
        "",
        "%setup",
        f'    mkdir -p "$APPTAINER_ROOTFS{os.path.dirname(CA_SECRET)}"',
        f'    touch "$APPTAINER_ROOTFS{CA_SECRET}"',
    ]
    for name in ("labels", "environment", "files"):
        lines += ["", f"%{name}"] + [f"    {x}" for x in sections[name]]
    for src_stage, items in copied.items():
        lines += ["", f"%files from {src_stage}"] + [f"    {x}" for x in items]
    post = ["set -euo pipefail", *preamble, *sections["post"]]
    lines += ["", "%post -c /bin/bash"] + [f"    {x}" for x in post]
    return lines


def with_mounts(
    text: str, every: tuple[str, ...], apt: tuple[str, ...] = (), index: tuple[str, ...] = ()
) -> str:
    """A rendered Dockerfile with build-time mounts added to its RUN steps: `every` on each,
    `apt` on each that runs apt-get, `index` on each that reads pip's index setting
    (KIT_PIP_INDEX_URL). BuildKit keeps neither a mount nor its flags in the layers or the
    history, so the image is the one the plain Dockerfile makes from the same inputs (a
    bundle's rebuild, a build from a Debian snapshot or held to its lock)."""
    lines = text.splitlines(keepends=True)
    out = []
    for i, line in enumerate(lines):
        if line.startswith("RUN "):
            step = [line]
            for more in lines[i + 1 :]:
                if not step[-1].rstrip().endswith("\\"):
                    break
                step.append(more)
            body = "".join(step)
            mounts = [
                *every,
                *(apt if "apt-get" in body else ()),
                *(index if "KIT_PIP_INDEX_URL" in body else ()),
            ]
            if mounts:
                line = f"RUN {' '.join(mounts)} {line[4:]}"
        out.append(line)
    return "".join(out)


def dockerfile_name(variant: str) -> str:
    return "Dockerfile" if variant == "cpu" else f"Dockerfile.{variant}"


def definition_name(name: str, variant: str) -> str:
    return f"{name}.def" if variant == "cpu" else f"{name}-{variant}.def"


def outputs(r: Recipe) -> dict[Path, str]:
    """Every file `kit render` writes for one recipe: a Dockerfile and a definition per
    variant (the cpu variant's are the plain names)."""
    out = repo_root() / "containers" / r.name
    files = {}
    for v in r.variants:
        rv = r.for_variant(v)
        files[out / dockerfile_name(v)] = dockerfile(rv, v)
        files[out / definition_name(r.name, v)] = definition(rv, v)
    return files


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
        raise Failed(f"containers/ differs from recipes/ for {', '.join(stale)}; run 'kit render'")
