"""kit import: a Dockerfile's Apptainer definition, and what did not translate."""

import json

import pytest

from kit.core.errors import KitError
from kit.image import importer

DOCKERFILE = """\
# a user's image
FROM kit/debian:bookworm
ARG N=10
ENV LOOP_N=3000000 \\
    PATH=/opt/loop/bin:$PATH
COPY loop /opt/loop/bin/loop
WORKDIR /work
USER 1000
SHELL ["/bin/bash", "-c"]
HEALTHCHECK CMD true
ENTRYPOINT ["/opt/loop/bin/loop"]
CMD ["1000"]
"""


def test_the_definition_keeps_what_translates_and_lists_the_rest(tmp_path):
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    done = importer.write(tmp_path / "Dockerfile", "loop", None, None)
    text = (tmp_path / "loop.def").read_text()
    assert text.startswith("Bootstrap: docker\nFrom: kit/debian:bookworm")
    assert "export LOOP_N=3000000" in text and "loop /opt/loop/bin/loop" in text
    assert "exec /opt/loop/bin/loop 1000" in text  # ENTRYPOINT + CMD: the run script
    post = text.split("%post", 1)[1].split("\n%", 1)[0]
    assert all(
        line.startswith("#") for line in post.splitlines() if "su -" in line or "SHELL" in line
    )
    assert done.untranslated == [
        "line 3: ARG N=10: " + importer.UNTRANSLATED["ARG"],
        "line 8: USER 1000: " + importer.UNTRANSLATED["USER"],
        'line 9: SHELL ["/bin/bash", "-c"]: ' + importer.UNTRANSLATED["SHELL"],
        "line 10: HEALTHCHECK CMD true: " + importer.UNTRANSLATED["HEALTHCHECK"],
    ]
    saved = json.loads((tmp_path / "loop.import.json").read_text())
    assert saved["base"] == "docker://kit/debian:bookworm" and saved["name"] == "loop"


def test_a_local_base_replaces_the_registry(tmp_path):
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    base = tmp_path / "base.sif"
    base.write_bytes(b"sif")
    done = importer.write(tmp_path / "Dockerfile", "loop", tmp_path / "out", str(base))
    text = (tmp_path / "out" / "loop.def").read_text()
    assert text.startswith(f"Bootstrap: localimage\nFrom: {base}\n")
    assert done.base == f"localimage:{base}"


@pytest.mark.parametrize(
    ("content", "name", "says"),
    [
        (DOCKERFILE, "Bad Name", "must be lower-case"),
        ("RUN true\n", "x", "has no FROM instruction"),
        (None, "x", "is not a file"),
    ],
)
def test_bad_input_is_one_line(tmp_path, content, name, says):
    if content is not None:
        (tmp_path / "Dockerfile").write_text(content)
    with pytest.raises(KitError, match=says):
        importer.write(tmp_path / "Dockerfile", name, None, None)


def test_a_run_is_in_the_definition_once(tmp_path):
    """spython parsed the Dockerfile on load and again on parse(): every RUN was built
    twice (`mkdir /only-once` failed with 'File exists' under apptainer build)."""
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm\nRUN mkdir /only-once\n")
    importer.write(tmp_path / "Dockerfile", "once", None, None)
    assert (tmp_path / "once.def").read_text() == (
        "Bootstrap: docker\n"
        "From: debian:bookworm\n"
        "Stage: spython-base\n"
        "\n"
        "%post\n"
        "mkdir /only-once\n"
        "%runscript\n"
        'exec /bin/bash "$@"\n'
        "%startscript\n"
        'exec /bin/bash "$@"\n'
    )


MULTI_STAGE = """\
FROM golang:1.22 AS Build
RUN go build -o /out/app . && \\
    strip /out/app
FROM debian:bookworm
COPY --from=build /out/app /usr/bin/app
COPY --from=0 /out/app.1 /usr/share/man/man1/app.1
RUN mkdir /only-once
ENTRYPOINT ["/usr/bin/app"]
"""


def test_stages_stay_stages_each_named_as_docker_names_it(tmp_path):
    """Each FROM a Stage:, its files copied from the stage COPY --from names (by name or
    number); an unnamed stage is spython's to merge into the one before, so it is named
    by its number first, as Docker names it."""
    (tmp_path / "Dockerfile").write_text(MULTI_STAGE)
    done = importer.write(tmp_path / "Dockerfile", "app", None, None)
    assert (tmp_path / "app.def").read_text() == (
        "Bootstrap: docker\n"
        "From: golang:1.22\n"
        "Stage: build\n"
        "\n"
        "%post\n"
        "go build -o /out/app . && \\\n"
        "strip /out/app\n"
        "\n"
        "Bootstrap: docker\n"
        "From: debian:bookworm\n"
        "Stage: 1\n"
        "\n"
        "%files from build\n"
        "/out/app /usr/bin/app\n"
        "/out/app.1 /usr/share/man/man1/app.1\n"
        "%post\n"
        "mkdir /only-once\n"
        "%runscript\n"
        'exec /usr/bin/app "$@"\n'
        "%startscript\n"
        'exec /usr/bin/app "$@"\n'
    )
    assert done.base == "docker://debian:bookworm"  # the stage that runs


@pytest.mark.parametrize(
    ("content", "base", "says"),
    [
        (
            "FROM golang AS build\nFROM build\nRUN true\n",
            None,
            "line 2: 'FROM build' names a stage before it (stages: build (golang)); an "
            "Apptainer stage starts from an image and each has its own name: build this one "
            "with docker",
        ),
        (
            "FROM debian\nCOPY --from=nginx:1 /etc/nginx /etc/nginx\n",
            None,
            "line 2: COPY --from=nginx:1 names no stage before it (there is none); "
            "Apptainer's %files from takes a stage, not an image",
        ),
        (
            "FROM golang AS build\nFROM debian\nCOPY --from=2 /a /b\n",
            None,
            "line 3: COPY --from=2 names no stage before it (stages: build (golang)); "
            "Apptainer's %files from takes a stage, not an image",
        ),
        (
            MULTI_STAGE,
            "base.sif",
            "--base replaces the one image a Dockerfile starts FROM, and '{df}' has 2 stages: "
            "build (golang:1.22), 1 (debian:bookworm); leave out --base",
        ),
        (
            "FROM --platform=linux/arm64 debian\n",
            None,
            "line 1: 'FROM --platform=linux/arm64 debian' is not FROM IMAGE [AS NAME] (kit "
            "import takes no FROM options)",
        ),
    ],
)
def test_what_a_definition_cannot_hold_is_refused_naming_the_stages(tmp_path, content, base, says):
    df = tmp_path / "Dockerfile"
    df.write_text(content)
    if base:
        (tmp_path / base).write_bytes(b"sif")
    with pytest.raises(KitError) as e:
        importer.write(df, "x", None, base and str(tmp_path / base))
    assert str(e.value).endswith(says.format(df=df))
    assert not (tmp_path / "x.def").exists()


def test_a_binary_file_is_one_line(tmp_path):
    (tmp_path / "Dockerfile").write_bytes(b"FROM debian\nRUN \xff\xfe\n")
    with pytest.raises(KitError) as e:
        importer.write(tmp_path / "Dockerfile", "x", None, None)
    assert str(e.value) == (
        f"'{tmp_path / 'Dockerfile'}': not UTF-8 text (byte 16); give a Dockerfile (UTF-8 text)"
    )


def test_a_control_character_is_refused_not_copied_into_the_definition(tmp_path):
    """kit import copied NUL and \\x01 bytes into the definition."""
    (tmp_path / "Dockerfile").write_text("FROM debian\nRUN echo a\x00b\x01\n")
    with pytest.raises(KitError) as e:
        importer.write(tmp_path / "Dockerfile", "x", None, None)
    assert str(e.value) == (
        f"'{tmp_path / 'Dockerfile'}' line 2 holds the control character '\\x00'; a "
        "Dockerfile is text: remove it"
    )
    assert not (tmp_path / "x.def").exists()
