#!/usr/bin/env python3
"""Every `zinf report` kind rendered in headless Chromium and measured as laid out (issue 29 §2).

  report_render_test.py ZINF SOURCE_DIR OUT_DIR

The inputs are made by the real binary in OUT_DIR on small scenarios: a quickstart train record (twice,
for compare), an offload-nvme train record (ZeRO-3, parameters and optimizer on NVMe), a 1T plan, a
parameter x nodes sweep and a bench io record; the bench peers page renders tests/fixtures/reports/
bench-peers.json, a record of a real tiny `zinf bench peers` run (making one here would start DeepSpeed
several times: minutes of CI for a page). Each page (train x2, two train records side by side,
plan, sweep, bench io, bench peers, compare) is copied with a probe script appended — never part of the product —
that measures the rendered page with getBoundingClientRect and writes a verdict into the DOM, which
`--dump-dom` prints. The test fails when, on a 1600 x 1200 window:
  - a chart is empty: it says "no data", or draws no bar at least 1 px tall, no point and no line;
  - a text label in a chart overlaps another (boxes intersecting by more than 1 px both ways) or
    lies outside the chart's box;
  - two lines of one chart share a colour and dash pattern;
  - a number is shown in e-notation ("2.608e+04") instead of with a unit;
  - text overflows its box (a cell, paragraph, heading or caption whose scrollWidth exceeds its
    width), a table is wider than the page's content, or the page scrolls sideways.
Exit 77 (skipped) when no Chromium is installed and CI is not set; under CI a missing Chromium fails.
"""
import html
import json
import os
import shutil
import subprocess
import sys

PROBE = r"""
<script>
(function () {
  const problems = [];
  const say = (text) => { if (problems.length < 40) problems.push(text); };
  const box = (e) => e.getBoundingClientRect();
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 &&
                            Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  let charts = 0;
  document.querySelectorAll('svg').forEach((svg, i) => {
    charts++;
    const name = svg.getAttribute('aria-label') || ('chart ' + i);
    const frame = box(svg);
    if (frame.width < 100 || frame.height < 50) say(`${name}: chart box ${frame.width}x${frame.height}`);
    let marks = 0;
    svg.querySelectorAll('rect').forEach((r) => {
      const b = box(r);  // a bar carries a <title> with its value; legend swatches do not
      if (r.querySelector('title') && b.width >= 1 && b.height >= 1) marks++;
    });
    svg.querySelectorAll('circle').forEach((c) => { if (box(c).width > 0) marks++; });
    svg.querySelectorAll('polyline').forEach((p) => { const b = box(p); if (b.width > 1 || b.height > 1) marks++; });
    const texts = Array.from(svg.querySelectorAll('text')).filter((t) => t.textContent.trim() !== '');
    if (texts.some((t) => t.textContent.trim() === 'no data')) say(`${name}: an empty "no data" chart`);
    else if (marks === 0) say(`${name}: draws no data (no bar >= 1 px, no point, no line)`);
    const boxes = texts.map((t) => [t.textContent.trim(), box(t)]);
    for (const [text, b] of boxes) {
      if (b.left < frame.left - 1 || b.right > frame.right + 1 || b.top < frame.top - 1 || b.bottom > frame.bottom + 1)
        say(`${name}: label "${text}" lies outside the chart`);
    }
    const strokes = Array.from(svg.querySelectorAll('polyline')).map((p) => {
      const style = getComputedStyle(p);
      return style.stroke + ' ' + style.strokeDasharray;
    });
    if (new Set(strokes).size < strokes.length) say(`${name}: ${strokes.length} lines in ${new Set(strokes).size} styles`);
    for (let a = 0; a < boxes.length; a++)
      for (let b = a + 1; b < boxes.length; b++)
        if (overlap(boxes[a][1], boxes[b][1])) say(`${name}: label "${boxes[a][0]}" overlaps "${boxes[b][0]}"`);
  });
  document.querySelectorAll('td, th, p, h1, h2, figcaption, li').forEach((e) => {
    if (e.scrollWidth > e.clientWidth + 1)
      say(`text overflows its ${e.tagName.toLowerCase()}: "${e.textContent.trim().slice(0, 60)}"`);
  });
  document.querySelectorAll('table').forEach((t) => {
    const outer = box(t.parentElement.closest('section') || document.body);
    if (box(t).right > outer.right + 1)
      say(`a table ${Math.round(box(t).width)} px wide leaves the page (${Math.round(outer.width)} px): ` +
          `"${t.textContent.trim().slice(0, 40)}"`);
  });
  document.querySelectorAll('div').forEach((d) => {
    if (d.scrollWidth > d.clientWidth + 1) say(`a box scrolls sideways: "${d.textContent.trim().slice(0, 40)}"`);
  });
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const raw = n.textContent.match(/\d(\.\d+)?e[+-]\d+/);
    if (raw && !n.parentElement.closest('title')) say(`a number in e-notation: "${n.textContent.trim().slice(0, 60)}"`);
  }
  if (document.documentElement.scrollWidth > window.innerWidth + 1)
    say(`the page scrolls sideways: ${document.documentElement.scrollWidth} px in a ${window.innerWidth} px window`);
  const out = document.createElement('pre');
  out.id = 'zinf-verdict';
  out.textContent = JSON.stringify({charts: charts, problems: problems});
  document.body.appendChild(out);
})();
</script>
"""


def browser():
    for name in ("chromium-headless-shell", "chromium"):
        path = shutil.which(name) or (f"/usr/lib/chromium/{name}" if name != "chromium" else None)
        if path and os.path.exists(path):
            return path
    return None


def run(cmd, cwd, expect=(0,)):
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    if done.returncode not in expect:
        sys.exit(f"{' '.join(cmd)}: exit {done.returncode}, expected {expect}\n{done.stderr[-2000:]}")
    return done


def make_inputs(zinf, source, out):
    """The records and pages, from the real binary on small runs in `out`."""
    scenario = lambda name: os.path.join(source, "scenarios", name)
    for name, steps, record in (("quickstart.json", 24, "quickstart.json"),
                                ("quickstart.json", 24, "quickstart-again.json"),
                                ("offload-nvme.json", 8, "offload-nvme.json")):
        run([zinf, "train", scenario(name), "--steps", str(steps), "--record", record, "--quiet"], out)
    run([zinf, "plan", "--params", "1T", "--hw", "dgx2-v100", "--format", "json", "--out", "plan.json"], out)
    run([zinf, "plan", "--sweep", "params=1B..100T", "--nodes", "1,2,4,8,16,32,64", "--format", "json", "--out",
         "sweep.json"], out)
    os.makedirs(os.path.join(out, "io"), exist_ok=True)
    io = [zinf, "bench", "io", "--path", os.path.join(out, "io"), "--size", "64MiB", "--tensor", "4MiB", "--repeat",
          "2", "--buffered-ok", "--format", "json", "--out", "bench-io.json"]
    run(io + (["--fio"] if shutil.which("fio") else []), out)
    shutil.copy(os.path.join(source, "tests", "fixtures", "reports", "bench-peers.json"), out)
    pages = {}
    for name in ("quickstart", "offload-nvme", "plan", "sweep", "bench-io", "bench-peers"):
        pages[name] = name + ".html"
        run([zinf, "report", name + ".json", "--out", pages[name]], out)
    pages["side-by-side"] = "side-by-side.html"
    run([zinf, "report", "quickstart.json", "offload-nvme.json", "--out", pages["side-by-side"]], out)
    pages["compare"] = "compare.html"
    run([zinf, "compare", "quickstart.json", "quickstart-again.json", "--format", "html", "--out", "compare.html"], out,
        expect=(0, 3))
    return pages


def measure(chromium, page, out):
    """The probe's verdict on `page` as Chromium lays it out in a 1600 x 1200 window."""
    text = open(page, encoding="utf-8").read()
    assert "</body>" in text, f"{page}: no </body>"
    probe = page[:-len(".html")] + ".probe.html"
    open(probe, "w", encoding="utf-8").write(text.replace("</body>", PROBE + "</body>", 1))
    cmd = [chromium, "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1600,1200",
           f"--user-data-dir={os.path.join(out, 'chromium-profile')}", "--dump-dom", "file://" + probe]
    if os.path.basename(chromium) == "chromium":
        cmd.insert(1, "--headless")
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=180).stdout
    start = dom.find('<pre id="zinf-verdict">')
    assert start >= 0, f"{page}: the probe wrote no verdict (did the page load?)"
    body = dom[start + len('<pre id="zinf-verdict">'):dom.index("</pre>", start)]
    return json.loads(html.unescape(body))


def main():
    zinf, source, out = sys.argv[1:4]
    chromium = browser()
    if chromium is None:
        ci = os.environ.get("CI", "")
        if ci and ci.lower() not in ("0", "false", "no"):
            sys.exit("CI is set and no chromium-headless-shell or chromium is installed (scripts/install-deps.sh)")
        print("no chromium-headless-shell or chromium (scripts/install-deps.sh installs it): skipped")
        sys.exit(77)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    pages = make_inputs(zinf, source, out)
    failures = []
    for name, page in pages.items():
        verdict = measure(chromium, os.path.join(out, page), out)
        print(f"{name}: {verdict['charts']} charts, {len(verdict['problems'])} problems")
        if verdict["charts"] == 0 and name != "compare":
            failures.append(f"{name}: no chart at all")
        failures += [f"{name}: {p}" for p in verdict["problems"]]
    if failures:
        sys.exit("rendered reports have faults:\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    main()
