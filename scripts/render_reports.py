"""Render report.html files in headless Chromium: a screenshot of the first screen and a layout check.

For each report the check measures, after the page has loaded, whether the page is wider
than the window (horizontal overflow) and where the verdict summary (the `#verdicts`
section's heading and first paragraph) lies; it fails when the page overflows sideways or
the summary's headline is not in the first screen. Needs Debian's `chromium` on PATH
(`apt-get install chromium`); no Python package beyond the standard library, and Pillow to
make the screenshot small (a palette PNG).

    python scripts/render_reports.py data/runs/.../report/report.html --out docs/figures
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WIDTH, HEIGHT = 1280, 900
SUMMARY = "verdicts"  # the id of the verdict summary's section (pipeline.report.document.slug)
# Appended to a copy of the page: on load, the layout as JSON in a <pre> that --dump-dom prints.
PROBE = """<script>window.addEventListener("load", () => {
  const root = document.documentElement, box = document.getElementById("%s");
  const head = box && box.querySelector("h2 + *");
  const found = {scroll_width: root.scrollWidth, client_width: root.clientWidth, screen: window.innerHeight,
                 summary_top: box && box.getBoundingClientRect().top,
                 headline_bottom: head && head.getBoundingClientRect().bottom};
  const out = document.createElement("pre"); out.id = "vpeval-layout"; out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});</script>""" % SUMMARY


def chromium() -> str | None:
    """The Chromium executable, None when absent."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(url: str, *args: str, width: int, height: int) -> str:
    command = [chromium() or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--window-size={width},{height}", "--virtual-time-budget=10000", *args, url]
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=120).stdout


def measure(report: Path, width: int = WIDTH, height: int = HEIGHT) -> dict:
    """The layout of `report` in a `width` x `height` window: scroll_width, client_width,
    screen (the viewport's height), summary_top and headline_bottom (px from the top; None
    when the page has no verdict summary)."""
    with tempfile.TemporaryDirectory() as scratch:
        probe = Path(scratch) / "probe.html"
        probe.write_text(Path(report).read_text().replace("</body>", PROBE + "</body>"))
        dom = _run(probe.as_uri(), "--dump-dom", width=width, height=height)
    found = re.search(r'<pre id="vpeval-layout">(.*?)</pre>', dom, re.S)
    if found is None:
        raise RuntimeError(f"{report}: Chromium returned no layout (the page did not load?)")
    return json.loads(found.group(1))


def problems(layout: dict) -> list[str]:
    """What is wrong with a measured layout: sideways overflow, a verdict summary missing or
    below the first screen."""
    found = []
    if layout["scroll_width"] > layout["client_width"]:
        found.append(f"the page overflows sideways ({layout['scroll_width']} px wide in a "
                     f"{layout['client_width']} px window)")
    if layout["summary_top"] is None:
        found.append(f"no verdict summary (no #{SUMMARY} section)")
    elif layout["headline_bottom"] is None or layout["headline_bottom"] > layout["screen"]:
        found.append(f"the verdict summary's headline ends at {layout['headline_bottom']} px, below the first "
                     f"screen ({layout['screen']} px)")
    return found


def screenshot(report: Path, png: Path, width: int = WIDTH, height: int = HEIGHT) -> Path:
    """The first screen of `report` as a PNG, reduced to a 128-colour palette."""
    from PIL import Image

    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    _run(Path(report).resolve().as_uri(), f"--screenshot={png.resolve()}", width=width, height=height)
    with Image.open(png) as image:
        small = image.convert("RGB").quantize(colors=128)
    small.save(png, optimize=True)
    return png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", type=Path, help="report.html files")
    parser.add_argument("--out", type=Path, help="folder of the screenshots (default: beside each report); "
                                                 "named after the report's folder (report, aggregate) or --name")
    parser.add_argument("--name", action="append", help="screenshot file name, once per report")
    args = parser.parse_args(argv)
    if chromium() is None:
        print("render_reports: no chromium on PATH (apt-get install chromium)", file=sys.stderr)
        return 2
    if args.name and len(args.name) != len(args.reports):
        parser.error("give --name once per report")
    failed = False
    for i, report in enumerate(args.reports):
        name = args.name[i] if args.name else f"{report.parent.name}.png"
        png = screenshot(report, (args.out or report.parent) / name)
        layout = measure(report)
        found = problems(layout)
        failed |= bool(found)
        print(f"{report}: {png}; " + ("; ".join(found) if found else
              f"no overflow, verdict summary at {layout['summary_top']:.0f}-{layout['headline_bottom']:.0f} px "
              f"of a {layout['screen']} px screen"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
