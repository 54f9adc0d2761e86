#!/usr/bin/env python3
"""CLI checks of `zinf report` and `zinf compare` (registered in tests/cli/CMakeLists.txt).

  report_check.py html ZINF FIXTURES OUT_DIR     every record kind to html/md/csv: the HTML parses
                                                 (html.parser with a tag-balance check, and as XML),
                                                 holds an <svg> per figure, references nothing outside
  report_check.py browser ZINF FIXTURES OUT_DIR  renders a train report in chromium-headless-shell:
                                                 screenshot not blank, no console errors, every chart
                                                 SVG with a non-zero size (exit 77 = skipped when
                                                 chromium-headless-shell is missing)
  report_check.py compare ZINF FIXTURES OUT_DIR  exit codes 0 (rerun), 3 (20% slower), 2 (mixed kinds)
"""
import html.parser
import os
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
import zlib

# train.json is a ZeRO-0 run: no byte crosses a link, so its two link charts are left out (a line says why).
KINDS = {  # fixture -> least number of <svg> charts its report holds
    "train.json": 4, "bench-io.json": 1, "bench-train.json": 1, "plan.json": 2, "plan-sweep.json": 3,
    "max-params.json": 1, "bench-suite.json": 1, "hardware.json": 0, "compare.json": 1, "small-train.json": 6, "small-bench-io.json": 1, "small-bench-scaling.json": 1, "unknown-kind.json": 1,
}
VOID = {"meta", "br", "hr", "img", "input", "link"}


class Balance(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.svgs, self.scripts = [], [], 0, 0

    def handle_starttag(self, tag, attrs):
        if tag == "svg":
            self.svgs += 1
        if tag == "script":
            self.scripts += 1
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
        else:
            self.stack.pop()


def run(cmd, expect=0):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != expect:
        sys.exit(f"{' '.join(cmd)}: exit {done.returncode}, expected {expect}\n{done.stderr}")
    return done


def check_html(zinf, fixtures, out):
    for name, charts in KINDS.items():
        src = os.path.join(fixtures, name)
        page = os.path.join(out, name + ".html")
        run([zinf, "report", src, "--out", page])
        text = open(page, encoding="utf-8").read()
        parser = Balance()
        parser.feed(text)
        parser.close()
        assert not parser.errors, f"{name}: {parser.errors[:3]}"
        assert not parser.stack, f"{name}: unclosed {parser.stack}"
        ElementTree.fromstring(text.replace("<!DOCTYPE html>", "", 1))  # also well-formed XML
        assert parser.svgs >= charts, f"{name}: {parser.svgs} charts, expected >= {charts}"
        assert parser.scripts == 0 and "http:" not in text and "https:" not in text, f"{name}: external reference"
        assert not re.search(r"(src|href)=", text), f"{name}: a src/href attribute"
        if name not in ("train.json", "bench-io.json", "unknown-kind.json"):
            continue  # md and csv of every kind: reports_test; through the binary: three kinds
        md = run([zinf, "report", src, "--format", "md"]).stdout
        assert md.count("*Figure: ") >= charts, f"{name}: markdown figures"
        csv = run([zinf, "report", src, "--format", "csv"]).stdout
        assert csv.startswith("section,item,row,column,value\n") and csv.count("figure: ") >= charts
    both = os.path.join(out, "two.html")
    run([zinf, "report", os.path.join(fixtures, "train.json"), os.path.join(fixtures, "train-rerun.json"), "--out", both])
    assert "Train runs side by side" in open(both, encoding="utf-8").read()
    bad = run([zinf, "report", os.path.join(fixtures, "train.json"), "--format", "xml"], expect=2)
    assert bad.stderr.count("\n") == 1 and "--format" in bad.stderr


def png_pixels(path):
    """(width, height, distinct RGB(A) pixel values in a sample) of an 8-bit RGB/RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), "expected 8-bit RGB or RGBA"
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    distinct = {row[i:i + channels] for row in rows[::7] for i in range(0, stride, channels * 5)}
    return width, height, len(distinct)


def check_browser(zinf, fixtures, out):
    chromium = shutil.which("chromium-headless-shell") or "/usr/lib/chromium/chromium-headless-shell"
    if not os.path.exists(chromium):
        print("chromium-headless-shell not installed (scripts/install-deps.sh installs it): skipped")
        sys.exit(77)
    page = os.path.join(out, "train.html")
    run([zinf, "report", os.path.join(fixtures, "train.json"), "--out", page])
    base = [chromium, "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
            "--window-size=1000,1800", f"--user-data-dir={os.path.join(out, 'chromium-profile')}"]
    shot = os.path.join(out, "train.png")
    done = subprocess.run(base + [f"--screenshot={shot}", "file://" + page], capture_output=True, text=True,
                          timeout=120)
    assert os.path.exists(shot), f"no screenshot: {done.stderr[-2000:]}"
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not console, f"console messages: {console}"
    width, height, distinct = png_pixels(shot)
    assert width == 1000 and height == 1800 and distinct > 8, f"blank screenshot? {distinct} colours"
    # Chart sizes as laid out: a copy of the page with a probe script (never in the product) writes
    # each SVG's box into the DOM, which --dump-dom prints.
    probe = os.path.join(out, "train-probe.html")
    text = open(page, encoding="utf-8").read().replace(
        "</body>", "<script>document.body.setAttribute('data-boxes', Array.from(document.querySelectorAll('svg'))"
        ".map(s => {const r = s.getBoundingClientRect(); return r.width + 'x' + r.height;}).join(' '));</script></body>")
    open(probe, "w", encoding="utf-8").write(text)
    dom = subprocess.run(base + ["--dump-dom", "file://" + probe], capture_output=True, text=True, timeout=120).stdout
    boxes = re.search(r'data-boxes="([^"]*)"', dom)
    assert boxes, "the probe found no charts"
    sizes = [tuple(float(v) for v in b.split("x")) for b in boxes.group(1).split()]
    assert len(sizes) >= 4 and all(w > 100 and h > 50 for w, h in sizes), f"chart sizes {sizes}"
    print(f"screenshot {shot}: {width}x{height}, {distinct} colours; {len(sizes)} charts, first {sizes[0]}")


def check_compare(zinf, fixtures, out):
    f = lambda name: os.path.join(fixtures, name)
    same = run([zinf, "compare", f("train.json"), f("train-rerun.json")], expect=0).stdout
    assert "no regression" in same
    slower = run([zinf, "compare", f("train.json"), f("train-slower.json")], expect=3).stdout
    assert "steps[].step_ms regressed: +20.0%" in slower, slower
    mixed = run([zinf, "compare", f("train.json"), f("bench-io.json")], expect=2)
    assert mixed.stderr.count("\n") == 1 and "cannot compare a train record with a bench-io record" in mixed.stderr
    assert mixed.stdout == ""
    page = os.path.join(out, "compare.html")
    run([zinf, "compare", f("train.json"), f("train-slower.json"), "--format", "html", "--out", page], expect=3)
    ElementTree.fromstring(open(page, encoding="utf-8").read().replace("<!DOCTYPE html>", "", 1))
    for fmt in ("json", "csv", "md"):
        run([zinf, "compare", f("train.json"), f("train-slower.json"), "--format", fmt], expect=3)
    run([zinf, "compare", f("train.json"), f("train-slower.json"), "--threshold", "25%"], expect=0)
    bad = run([zinf, "compare", f("train.json"), f("train-slower.json"), "--threshold", "-5%"], expect=2)
    assert "--threshold" in bad.stderr and bad.stderr.count("\n") == 1


if __name__ == "__main__":
    mode, zinf, fixtures, out = sys.argv[1:5]
    os.makedirs(out, exist_ok=True)
    {"html": check_html, "browser": check_browser, "compare": check_compare}[mode](zinf, fixtures, out)
