"""Rendered text, checked exactly (as hpccm's snapshot tests do)."""

import re
import shlex

import pytest

from kit.core.errors import KitError
from kit.image import blocks, recipes, render

DOCKERFILE = """\
# Rendered by `kit render` from recipes/mini-openmpi.toml (recipe 0.1.0, variant cpu).
# Edit the recipe, not this file: `kit render --check` fails when they differ.
# Build from the repository root (`kit build` does this and passes the site CA):
#   DOCKER_BUILDKIT=1 docker build -f containers/mini-openmpi/Dockerfile \\
#     --secret id=cacert,src=/etc/ssl/certs/ca-certificates.crt -t kit/mini-openmpi:0.1.0-cpu .
ARG BASE_IMAGE=kit/debian:bookworm
FROM ${BASE_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG KIT_PIP_INDEX_URL
ARG SOURCE_DATE_EPOCH=1795824000
RUN apt-get -o APT::Sandbox::User=root update && \\
    DEBIAN_FRONTEND=noninteractive apt-get -o APT::Sandbox::User=root install -y \
--no-install-recommends \\
        python3=3.11.2-1+b1 && \\
    apt-get clean && \\
    rm -rf /var/lib/apt/lists/* && \\
    rm -rf /var/log/dpkg.log /var/log/alternatives.log /var/log/apt/*.log \
/var/log/apt/eipp.log.xz /var/cache/ldconfig/aux-cache /var/cache/fontconfig/*
RUN apt-get -o APT::Sandbox::User=root update && \\
    DEBIAN_FRONTEND=noninteractive apt-get -o APT::Sandbox::User=root install -y \
--no-install-recommends \\
        openmpi-bin=4.1.4-3+b1 \\
        libopenmpi-dev=4.1.4-3+b1 && \\
    apt-get clean && \\
    rm -rf /var/lib/apt/lists/* && \\
    rm -rf /var/log/dpkg.log /var/log/alternatives.log /var/log/apt/*.log \
/var/log/apt/eipp.log.xz /var/cache/ldconfig/aux-cache /var/cache/fontconfig/*
LABEL org.opencontainers.image.title="mini-openmpi" \\
    org.opencontainers.image.version="0.1.0" \\
    org.opencontainers.image.description="test recipe" \\
    kit.recipe="mini-openmpi" \\
    kit.recipe.version="0.1.0" \\
    kit.variant="cpu" \\
    kit.mpi.flavour="openmpi" \\
    kit.mpi.version="4.1.4-3+b1" \\
    kit.source-date-epoch="1795824000"
ENV KIT_IMAGE="mini-openmpi" \\
    KIT_RECIPE_VERSION="0.1.0" \\
    KIT_VARIANT="cpu" \\
    KIT_MPI_FLAVOUR="openmpi" \\
    PATH="/opt/kit/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RUN update-alternatives --set mpi /usr/bin/mpicc.openmpi && \\
    update-alternatives --set mpirun /usr/bin/mpirun.openmpi && \\
    rm -rf /var/log/dpkg.log /var/log/alternatives.log /var/log/apt/*.log \
/var/log/apt/eipp.log.xz /var/cache/ldconfig/aux-cache /var/cache/fontconfig/*
RUN --mount=type=secret,id=cacert,target=/run/secrets/cacert \
if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert; fi && \\
    python3 -m venv /opt/kit/venv && \\
    MPICC=mpicc.openmpi CFLAGS=-g0 /opt/kit/venv/bin/pip install --no-cache-dir \
${KIT_PIP_INDEX_URL:+--index-url="$KIT_PIP_INDEX_URL"} \\
        setuptools==70.3.0 && \\
    MPICC=mpicc.openmpi CFLAGS=-g0 /opt/kit/venv/bin/pip install --no-cache-dir \
--no-build-isolation --no-binary=mpi4py ${KIT_PIP_INDEX_URL:+--index-url="$KIT_PIP_INDEX_URL"} \\
        mpi4py==3.1.4
RUN mkdir -p /opt/kit && \\
    dpkg-query -W -f='${Package}=${Version}\\n' > /opt/kit/apt-packages.txt && \\
    /opt/kit/venv/bin/python -m pip list --format=freeze > /opt/kit/pip-packages.txt
COPY benchmarks /opt/kit/benchmarks
"""


APT_UPDATE = "RUN apt-get -o APT::Sandbox::User=root update"


def test_dockerfile_exact(kit_root):
    assert render.dockerfile(recipes.load("mini-openmpi")) == DOCKERFILE


def test_definition_has_same_content_as_dockerfile(kit_root):
    text = render.definition(recipes.load("mini-openmpi"))
    lines = text.splitlines()
    start = lines.index("Bootstrap: localimage")
    assert lines[start : start + 4] == [
        "Bootstrap: localimage",
        "From: {{ BASE_SIF }}",
        "",
        "%arguments",
    ]
    assert "%files\n    benchmarks /opt/kit/benchmarks\n" in text
    assert '%setup\n    mkdir -p "$APPTAINER_ROOTFS/run/secrets"\n' in text
    assert "    kit.mpi.flavour openmpi\n" in text
    assert "    export KIT_IMAGE=mini-openmpi\n" in text
    post = text.split("%post -c /bin/bash\n    set -euo pipefail\n", 1)[1]
    # every date the build writes is the recipe's epoch; unprivileged Apptainer builds
    # re-run %post under the distribution's fakeroot
    assert post.startswith(
        '    export SOURCE_DATE_EPOCH=1795824000\n    if [ -z "${FAKEROOTKEY:-}" ]; then\n'
    )
    assert (
        "fakeroot=1.31-1.2\n        export FAKEROOTDONTTRYCHOWN=1\n"
        '        exec fakeroot -- /bin/bash "$0"\n    fi\n'
    ) in post
    assert "        openmpi-bin=4.1.4-3+b1 \\\n" in post
    assert "--no-build-isolation --no-binary=mpi4py" in post
    assert text.endswith('%runscript\n    exec /opt/kit/venv/bin/python "$@"\n')


def _joined(text: str) -> list[str]:
    return re.sub(r"\\\n\s*", " ", text).splitlines()


def dockerfile_parts(text: str) -> tuple[set[str], dict, dict]:
    """The shell commands of every RUN (mounts aside), ENV and the recipe's LABELs."""
    commands, env, labels = set(), {}, {}
    for line in _joined(text):
        if line.startswith("RUN "):
            body = line[4:]
            while body.startswith("--mount="):
                body = body.split(" ", 1)[1]
            commands |= {" ".join(c.split()) for c in body.split(" && ")}
        elif line.startswith("ENV "):
            env.update(t.split("=", 1) for t in shlex.split(line[4:]))
        elif line.startswith("LABEL "):
            labels.update(t.split("=", 1) for t in shlex.split(line[6:]))
    # the package lists are build arguments, known only once the image exists
    return commands, env, {k: v for k, v in labels.items() if "${KIT_" not in v}


def definition_parts(text: str) -> tuple[set[str], dict, dict]:
    """The same from an Apptainer definition: %post commands (without the fakeroot
    preamble and its exports), %environment and %labels."""
    commands, env, labels, section, preamble = set(), {}, {}, None, False
    for line in _joined(text):
        s = line.strip()
        if line.startswith("%") or s.startswith(("Bootstrap:", "From:", "Stage:")):
            section = line.split()[0]
        elif not s or s.startswith("#"):
            continue
        elif section == "%labels":
            key, value = s.split(" ", 1)
            labels[key] = value
        elif section == "%environment":
            env.update(t.split("=", 1) for t in shlex.split(s.removeprefix("export ")))
        elif section == "%post":
            preamble = preamble or s.startswith('if [ -z "${FAKEROOTKEY')
            if preamble:
                preamble = s != "fi"
            elif s != "set -euo pipefail" and not (s.startswith("export ") and "=" in s):
                commands.add(" ".join(s.split()))
    # a build-time mount of the Dockerfile is copied in by %files, then removed
    commands.discard(f"rm -rf {blocks.HOST_WHEELS}")
    return commands, env, labels


@pytest.mark.parametrize("name", sorted(recipes.load_all()))
def test_definition_and_dockerfile_carry_the_same_steps(name):
    """Every command (apt pins, pip arguments), environment variable and label of the
    Dockerfile is in the definition and nothing else is, for every recipe and variant."""
    r = recipes.load(name)
    for variant in r.variants:
        commands, env, labels = dockerfile_parts(render.dockerfile(r, variant))
        def_commands, def_env, def_labels = definition_parts(render.definition(r, variant))
        assert def_commands == commands
        assert (def_env, def_labels) == (env, labels)
        assert any("install -y" in c for c in commands) and labels["kit.recipe"] == name


def test_render_then_check_then_drift(kit_root):
    r = recipes.load("mini-openmpi")
    with pytest.raises(KitError, match="run 'kit render'"):
        render.check([r])
    assert len(render.write([r])) == 2
    render.check([r])
    assert render.write([r]) == []
    dockerfile = kit_root / "containers" / "mini-openmpi" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN true\n")
    with pytest.raises(KitError, match="containers/mini-openmpi/Dockerfile"):
        render.check([r])


def test_committed_containers_match_recipes():
    render.check(list(recipes.load_all().values()))


def test_compiled_packages_build_in_a_builder_stage(kit_root, mini):
    (kit_root / "recipes" / "mini-openmpi.toml").write_text(
        mini.replace(
            '[apt]\npackages = ["python3=3.11.2-1+b1"]',
            '[apt]\npackages = ["python3=3.11.2-1+b1"]\nbuild = ["g++=4:12.2.0-3"]',
        )
        + '[compile]\npackages = ["horovod==0.28.1"]\ncheck = ["horovodrun --check-build"]\n'
        + '[compile.env]\nHOROVOD_WITH_MPI = "1"\n'
    )
    r = recipes.load("mini-openmpi")
    text = render.dockerfile(r)
    builder, final = text.split("FROM ${BASE_IMAGE}")[1:]
    assert builder.startswith(" AS builder\n") and final.startswith("\nSHELL")
    # the shared steps (frameworks' and MPI's packages, identity, venv) come first in
    # both stages, so BuildKit runs them once
    shared = APT_UPDATE.join(builder.split("\n", 1)[1].split(APT_UPDATE)[:3])
    assert final.split("\n", 1)[1].startswith(shared) and "python3 -m venv" in shared
    assert "g++=4:12.2.0-3" in builder and "g++" not in final
    assert (  # no debug information: CFLAGS for setuptools, a toolchain file for CMake
        "    printf '%s\\n' 'set(CMAKE_C_FLAGS_RELWITHDEBINFO \"-O2 -DNDEBUG\" CACHE STRING \"\")' "
        '\'set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O2 -DNDEBUG" CACHE STRING "")\' '
        '\'set(CMAKE_CUDA_FLAGS_RELWITHDEBINFO "-O2 -DNDEBUG" CACHE STRING "")\' '
        "> /opt/kit/release.cmake && \\\n"
        # the source release is built in a fixed folder (pip's own has a random name,
        # which compiled files keep)
        "    MPICC=mpicc.openmpi CFLAGS=-g0 /opt/kit/venv/bin/pip download --no-cache-dir "
        "--no-build-isolation --no-deps --no-binary=horovod --dest=/tmp/kit-sources "
        '${KIT_PIP_INDEX_URL:+--index-url="$KIT_PIP_INDEX_URL"} \\\n'
        "        horovod==0.28.1 && \\\n"
        '    for a in /tmp/kit-sources/*.tar.gz; do tar -xzf "$a" -C /tmp/kit-sources; done '
        "&& \\\n"
        "    MPICC=mpicc.openmpi CFLAGS=-g0 CMAKE_TOOLCHAIN_FILE=/opt/kit/release.cmake "
        "HOROVOD_WITH_MPI=1 /opt/kit/venv/bin/pip wheel "
        "--wheel-dir=/opt/kit/wheels --no-cache-dir --no-build-isolation --no-deps "
        '${KIT_PIP_INDEX_URL:+--index-url="$KIT_PIP_INDEX_URL"} \\\n'
        "        /tmp/kit-sources/*/\n"
    ) in builder
    assert (  # the wheels stay in the image: the native environment installs them too;
        # the check's temporary files (Open MPI's session folder) go with its folder
        "COPY --from=builder /opt/kit/wheels /opt/kit/wheels\n"
        "RUN /opt/kit/venv/bin/pip install --no-cache-dir --no-deps --no-index "
        '/opt/kit/wheels/*.whl && \\\n    TMPDIR="$(mktemp -d)" && \\\n    export TMPDIR && '
        '\\\n    horovodrun --check-build && \\\n    rm -rf "$TMPDIR" && \\\n    unset TMPDIR\n'
    ) in final
    definition = render.definition(r)
    assert definition.count("Bootstrap: localimage") == 2
    assert "Stage: builder\n" in definition and "Stage: final\n" in definition
    final_def = definition.split("Stage: final\n")[1]
    assert "%files from builder\n    /opt/kit/wheels /opt/kit/wheels\n" in final_def
    assert '/opt/kit/wheels/*.whl\n    TMPDIR="$(mktemp -d)"\n    export TMPDIR\n' in final_def


HOSTILE = "$(touch /tmp/pwned) `id` \"q\" \\ ${HOME} 'x'"


def test_hostile_values_are_quoted_for_each_format(kit_root, mini):
    """Recipe text reaches a Dockerfile (the builder expands $) and an Apptainer
    definition (a shell runs %environment and %post): neither may run or expand it."""
    toml_value = HOSTILE.replace("\\", "\\\\").replace('"', '\\"')
    text = mini.replace('description = "test recipe"', f'description = "{toml_value}"').replace(
        "[mpi]", f'[env]\nEVIL = "{toml_value}"\n\n[mpi]'
    )
    (kit_root / "recipes" / "mini-openmpi.toml").write_text(text)
    r = recipes.load("mini-openmpi")
    docker = render.dockerfile(r)
    assert 'ENV EVIL="\\$(touch /tmp/pwned) `id` \\"q\\" \\\\ \\${HOME} \'x\'"\n' in docker
    assert (
        'org.opencontainers.image.description="\\$(touch /tmp/pwned) `id` \\"q\\" '
        "\\\\ \\${HOME} 'x'\"" in docker
    )
    definition = render.definition(r)
    quoted = "'$(touch /tmp/pwned) `id` \"q\" \\ ${HOME} '\"'\"'x'\"'\"''"
    assert f"\n    export EVIL={quoted}\n" in definition  # %environment and %post alike
    assert definition.count(f"export EVIL={quoted}") == 2
    assert f"\n    org.opencontainers.image.description {HOSTILE}\n" in definition  # %labels


def test_one_frameworks_images_share_their_package_layer():
    """pytorch-mpich and pytorch-openmpi start with the same steps up to the MPI
    packages, so the 2 GB layer of Debian's PyTorch is built and stored once."""
    mpich, openmpi = (
        render.dockerfile(recipes.load(name)) for name in ("pytorch-mpich", "pytorch-openmpi")
    )

    def first_layers(text: str) -> str:
        start = text.index("FROM ${BASE_IMAGE}")
        return text[start : text.index(APT_UPDATE, text.index(APT_UPDATE, start) + 1)]

    assert first_layers(mpich) == first_layers(openmpi)
    assert "python3-torch=" in first_layers(mpich) and "mpich" not in first_layers(mpich)


def test_host_wheels_are_a_build_mount_in_docker_and_copied_then_removed_in_apptainer():
    """pytorch2's torch comes from the host's pip: in no image layer, installed by pin."""
    r = recipes.load("pytorch2-mpich")
    pip = "/opt/kit/venv/bin/pip install --no-cache-dir --no-deps --no-index --find-links"
    run = f"RUN --mount=type=bind,source=.kit-wheels,target=/tmp/kit-host-wheels {pip}"
    assert f"{run} /tmp/kit-host-wheels torch==2.13.0+cpu\n" in render.dockerfile(r)
    definition = render.definition(r)
    assert "%files\n    .kit-wheels /tmp/kit-host-wheels\n" in definition
    install = f"    {pip} /tmp/kit-host-wheels torch==2.13.0+cpu\n"
    assert f"{install}    rm -rf /tmp/kit-host-wheels\n" in definition


def test_a_venv_sees_the_system_site_only_where_debian_brings_python_modules():
    """Debian's python3-torch is in pytorch-mpich's system site; pytorch2's venv is alone,
    so a host's Debian torchvision cannot reach its native arm."""
    assert recipes.load("pytorch-mpich").venv_options == ["--system-site-packages"]
    assert recipes.load("pytorch2-mpich").venv_options == []
    assert "python3 -m venv /opt/kit/venv &&" in render.dockerfile(recipes.load("pytorch2-mpich"))


def test_pip_byte_compiles_under_a_fixed_hash_seed_before_python_3_11():
    """Python 3.9's .pyc of a frozenset constant follow the string-hash seed: caffe2's
    (bullseye) pip steps fix it; bookworm's Python 3.11 needs nothing."""
    caffe2, torch = recipes.load("caffe2-mpich"), recipes.load("pytorch-mpich")
    assert blocks.hash_seed(caffe2) == (("PYTHONHASHSEED", "0"),)
    assert blocks.hash_seed(torch) == ()
    text = next(t for p, t in render.outputs(caffe2).items() if p.name == "Dockerfile")
    assert "CFLAGS=-g0 PYTHONHASHSEED=0 /opt/kit/venv/bin/pip install" in text
    # Debian's own byte-compilation ignores the seed (python3 -E): the step that ran it
    # compiles its .pyc files again under the seed, before apt's leftovers go
    assert f"libmpich-dev=3.4.1-5~deb11u1 && \\\n    PYTHONHASHSEED=0 {blocks.RECOMPILE} && \\\n" \
        "    apt-get clean" in text  # fmt: skip
    assert text.count("PYTHONHASHSEED=0 python3 -c") == 2  # Python's step, MPI's
    assert "python3 -c" not in render.dockerfile(torch)


def test_the_recompile_program_is_python_in_single_quotes():
    """It runs in the images' shell as python3 -c '...': one quoted word that Python parses
    (what it does to the library was run in the images: docs/images.md)."""
    program = blocks.RECOMPILE.removeprefix("python3 -c '").removesuffix("'")
    assert "'" not in program
    compile(program, "RECOMPILE", "exec")
