"""The report's Images section: each image the containers ran, by digest, with what kit
verify filed for it where it ran (the trial records carry it)."""

from kit.analysis import summary
from kit.report import writers

from ..records import record, typed

DIGEST = "sha256:" + "7a62792d219a" * 5 + "abcd"
OTHER = "sha256:" + "0" * 64
VERDICT = {"at": "2026-11-28T07:00:00Z", "against": "a rebuild with no cache",
           "reproduced": True, "digest": DIGEST, "lock": "e3b0c44298fc" + "1" * 52}  # fmt: skip


def section(text: str) -> str:
    return text.split("## Images\n\n")[1].split("\n## ")[0]


def test_each_image_is_named_once_with_its_verdict_and_native_is_no_image():
    kept = dict(recipe_version="1.3.0", stack="historical")
    recs = typed([
        *(record("native", 10.0, index=i, image_digest="native-env-1", **kept) for i in range(2)),
        *(record("docker", 9.9, index=2 + i, image_digest=DIGEST, image_verified=VERDICT, **kept)
          for i in range(2)),
        record("apptainer", 9.8, index=4, image_digest=OTHER, **kept),
    ])  # fmt: skip
    said = section(writers.render(summary.summarise(recs, "x"), "md"))
    assert said.splitlines() == [
        "- pytorch-mpich (recipe 1.3.0, historical stack) sha256:7a62792d219a: reproduced "
        "by kit verify at 2026-11-28T07:00:00Z against a rebuild with no cache, lock "
        "e3b0c44298fc",
        "- pytorch-mpich (recipe 1.3.0, historical stack) sha256:000000000000: not verified "
        "where it ran (kit verify pytorch-mpich)",
    ]


def test_records_without_digests_have_no_images_section():
    text = writers.render(summary.summarise(typed([record("native", 10.0)]), "x"), "md")
    assert "## Images" not in text
