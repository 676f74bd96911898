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
