"""A report page as a reader sees it in a browser: Debian's Chromium, headless, at a given width.

:func:`chromium` runs it with nothing reaching a network and a fresh profile; :func:`layout`
loads a copy of a page with a script added that measures, in the laid-out page: the elements
wider than the viewport (outside a scrolling box), the boxes that scroll sideways (a table too
wide for the page), and the SVG text that lies outside its plot (clipped).  The page itself
has no script; only the measured copy does.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-extensions", "--no-default-browser-check",
         "--host-resolver-rules=MAP * ~NOTFOUND")  # nothing can reach a network

MEASURE = r"""
(function () {
  const vw = document.documentElement.clientWidth;
  const out = {viewport: vw, wide: [], scrolled: [], clipped: []};
  const where = (el) => { const s = el.closest("section[id]"); return s ? s.id : ""; };
  const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "");
  const scrolls = (el) => el.tagName !== "PRE" && el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible";
  const all = [...document.body.querySelectorAll("*")];
  const boxes = all.filter(scrolls);
  for (const el of boxes) out.scrolled.push([name(el), el.scrollWidth, el.clientWidth, where(el)]);
  for (const el of all) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && (r.right > vw + 0.5 || r.left < -0.5) && !boxes.some((b) => b !== el && b.contains(el)))
      out.wide.push([name(el), Math.round(r.left), Math.round(r.right), where(el)]);
  }
  for (const svg of document.querySelectorAll("svg")) {
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll("text")) {
      const r = t.getBoundingClientRect();
      if (r.width === 0) continue;
      const off = [r.left - box.left, box.right - r.right, r.top - box.top, box.bottom - r.bottom].map(Math.round);
      if (off.some((v) => v < 0)) out.clipped.push([t.textContent.slice(0, 80), ...off, where(svg)]);
    }
  }
  const pre = document.createElement("pre");
  pre.id = "vmbench-measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
"""


def chromium(workdir: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Chromium with ``args``, a fresh profile under ``workdir``."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y --no-install-recommends chromium` (make test installs it)")
    profile = workdir / f"chromium-profile-{len(list(workdir.glob('chromium-profile-*')))}"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=timeout, start_new_session=True)


def layout(page: Path, workdir: Path, width: int = 1400) -> dict:
    """The page laid out at ``width`` pixels: {"viewport", "wide", "scrolled", "clipped"} (see the module doc)."""
    measured = workdir / f"measured-{page.stem}.html"
    measured.write_text(page.read_text(encoding="utf-8").replace("</body>", f"<script>{MEASURE}</script></body>"), encoding="utf-8")
    run = chromium(workdir, f"--window-size={width},1000", "--hide-scrollbars", "--dump-dom", measured.as_uri())
    assert run.returncode == 0, run.stderr[-3000:]
    found = re.search(r'<pre id="vmbench-measured">(.*?)</pre>', run.stdout, re.S)
    assert found, run.stdout[-2000:]
    return json.loads(html.unescape(found.group(1)))


def assert_fits(page: Path, workdir: Path, width: int = 1400) -> dict:
    """No element wider than the viewport, no table scrolling sideways, no plot text clipped."""
    got = layout(page, workdir, width)
    assert got["viewport"] == width
    assert (got["wide"], got["scrolled"], got["clipped"]) == ([], [], []), json.dumps(got)[:3000]
    return got
