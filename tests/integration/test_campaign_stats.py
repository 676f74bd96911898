"""The statistics on real campaigns: an A/A check, an injected slowdown, and the HTML report
rendered by a real browser."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import kit
from .test_pipeline import run_args

pytestmark = pytest.mark.integration

CPUS = 0.5  # the injected slowdown: a CFS quota of half a core on the docker arm


@pytest.fixture(scope="module")
def campaign(built, tmp_path_factory) -> Path:
    """native, a second native arm, and docker under a CPU quota; one thread per rank, so
    the quota should halve docker's throughput. Precision-targeted: rounds are added after
    the first 12 until both comparisons are within ±5 % or 2 minutes of trials are spent
    (11-14 rounds in session 21's CI runs; on a VM half as fast the 2 minutes were gone
    after the first 9, so the first rounds are 12, not 9: see the A/A test)."""
    out = tmp_path_factory.mktemp("stats") / "campaign"
    # Short trials: a launch's own offset (up to +-30 % for this model here) does not shrink
    # with its length, so the budget buys more launches instead.
    args = run_args("native,native@b,docker", out, np="1", repeats="12", steps="100", warmups="1")
    args += ["--runtime-arg", f"docker:--cpus={CPUS}", "--precision", "5%", "--budget", "2m"]
    p = kit(*args, env={**os.environ, "OMP_NUM_THREADS": "1"})
    last = p.stderr.strip().splitlines()[-1]
    assert "precision ±5.0% reached after" in last or "budget 2 min spent after" in last, last
    # a verdict judged on fewer trials than were run would hide a failure: none may fail
    recs = [json.loads(line) for line in (out / "trials.jsonl").read_text().splitlines()]
    assert [r for r in recs if r["status"] != "ok"] == []
    return out


def arms(out: Path, *extra: str) -> dict[str, dict]:
    data = json.loads(kit("report", str(out), "--format", "json", *extra).stdout)
    (group,) = data["groups"]
    return {a["runtime"]: a for a in group["arms"]}


def test_a_a_campaign_finds_no_difference(campaign):
    # A 95% interval flags one A/A campaign in twenty by design; at 99% a correct
    # kit fails this test about once in a hundred runs.
    at95 = arms(campaign)["native@b"]
    assert at95["n"] >= 12 and at95["method"].startswith("paired (")
    assert at95["precision"] in ("reached", "not reached")
    b = arms(campaign, "--confidence", "0.99")["native@b"]
    assert b["verdict"] == "no significant difference", b
    assert b["ratio"]["low"] <= 1 <= b["ratio"]["high"]
    # This VM's launches of this model scatter by up to +-30 %: 11 and 13 rounds resolved
    # 13 % and 19 % at 99 % in two CI runs here; 9 rounds 13 %, 27 %, once 45 % and, on a
    # slower VM, 60 %, past the bound: at 9 rounds the 99 % interval is the extreme pair of
    # rounds, so the campaign runs at least 12
    assert 0 < b["detectable"] < 0.5, b["detectable"]


def test_injected_slowdown_is_detected_with_its_size(campaign):
    d = arms(campaign)["docker"]
    assert d["verdict"] == "slower", d
    assert 0.35 < d["ratio"]["value"] < 0.65, f"expected about {CPUS}: {d['ratio']}"
    assert d["ratio"]["high"] < 1
    text = kit("report", str(campaign)).stdout
    assert "| slower |" in text and f"passed through: --cpus={CPUS}" in text


def test_html_report_renders_in_headless_chromium(campaign, tmp_path):
    browser = shutil.which("chromium")
    assert browser, "the HTML test needs Debian's chromium (ci/provision installs it)"
    page = Path(kit("report", str(campaign), "--format", "html").stdout.strip())
    assert page == campaign / "report.html"
    html = page.read_text()
    expected = html.count("<figure id=")
    # one batch size and one rank count: the overhead whiskers and the loss curves
    assert '<figure id="overhead-' in html and '<figure id="loss-' in html
    flags = ["--headless", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "kit report:" in dom and "native@b" in dom
    assert dom.count("<figure id=") == expected and dom.count("<svg") == expected
    # every figure laid out with a box of its own and something drawn in it: a copy of the
    # page measures itself in the browser and writes the sizes into the DOM it dumps
    probe = page.with_name("probe.html")
    probe.write_text(html.replace("</body>", MEASURE + "</body>"))
    measured = subprocess.run(
        [browser, *flags, "--dump-dom", probe.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    boxes = json.loads(measured.split('<pre id="kit-boxes">')[1].split("</pre>")[0])
    assert len(boxes) == expected
    for box in boxes:
        assert box["width"] > 100 and box["height"] > 50, box
        assert box["drawn"] > 0 and box["ink_width"] > 10 and box["ink_height"] > 10, box


# Run in the page: each figure's layout box, its SVG's drawn elements and their extent.
MEASURE = """<script>
const boxes = [...document.querySelectorAll("figure")].map(f => {
  const r = f.getBoundingClientRect(), svg = f.querySelector("svg");
  const ink = svg.getBBox();
  return {id: f.id, width: r.width, height: r.height, ink_width: ink.width,
          ink_height: ink.height,
          drawn: svg.querySelectorAll("path,line,rect,circle,polyline,polygon").length};
});
const pre = document.createElement("pre");
pre.id = "kit-boxes";
pre.textContent = JSON.stringify(boxes);
document.body.appendChild(pre);
</script>
"""
