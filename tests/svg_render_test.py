"""The SVG pictures of `slackswap plan --svg` and `slackswap simulate --node
... --svg`, rendered by headless Chromium and checked as pictures: the
budget and device lines in their colours at the rows the data puts them,
the memory area up to the activation peak, busy lanes in the event
colours, the shared links' load on either side of their axes. A blank,
broken or misplaced rendering fails; so does an SVG Chromium will not
draw (a parse error renders an error page, not the picture).

Run by ctest (tests/CMakeLists.txt), or by hand:

  python3 tests/svg_render_test.py --slackswap build/cli/slackswap \\
      --work_dir /tmp/svg_render [-v]

Exits 77 (ctest: Skipped) only when Chromium is missing or cannot start
at all; scripts/setup.sh installs Debian's chromium. PNGs are decoded
with zlib from the standard library (no PIL).
"""

import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import unittest
import xml.etree.ElementTree as ET
import zlib

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

OPTIONS = None
SKIP = 77
SVG_NS = "{http://www.w3.org/2000/svg}"

# io/svg_report.cc's colours.
STATIC = (0xBA, 0xB0, 0xAC)
ACTIVATION = (0x4E, 0x79, 0xA7)
BUDGET = (0xE1, 0x57, 0x59)
DEVICE = (0x7B, 0x2C, 0xBF)
OP = (0x59, 0xA1, 0x4F)
RECOMPUTE = (0xB0, 0x7A, 0xA1)
SWAP_OUT = (0x76, 0xB7, 0xB2)
PREFETCH = (0xED, 0xC9, 0x48)
PLOT_LEFT, PLOT_WIDTH = 80, 1100


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA,
    non-interlaced PNG (what Chromium writes)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    if depth != 8 or color not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type "
                         f"{color}, interlace {interlace}")
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            up_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                pred = left if pa <= pb and pa <= pc else (
                    up if pb <= pc else up_left)
                line[i] = (line[i] + pred) & 0xFF
        rows.append([tuple(line[x * channels:x * channels + 3])
                     for x in range(width)])
        previous = line
    return width, height, rows


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def render(svg_path, png_path, width, height):
    """Chromium's screenshot of the SVG at its own size; the process's
    output on failure."""
    if os.path.exists(png_path):
        os.remove(png_path)
    cmd = [OPTIONS.chromium, "--headless", "--disable-gpu", "--no-sandbox",
           "--hide-scrollbars", "--force-device-scale-factor=1",
           "--no-first-run", "--disable-extensions",
           f"--user-data-dir={os.path.join(OPTIONS.work_dir, 'profile')}",
           f"--screenshot={png_path}", f"--window-size={width},{height}",
           "file://" + os.path.abspath(svg_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or not os.path.exists(png_path):
        return proc.stdout + proc.stderr
    return None


def run(args):
    proc = subprocess.run([OPTIONS.slackswap] + args, capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"slackswap {' '.join(args)} exited "
                             f"{proc.returncode}:\n{proc.stderr}")
    return proc.stdout


class Picture:
    """An SVG (its elements by id) and Chromium's rendering of it."""

    def __init__(self, svg_path):
        self.root = ET.parse(svg_path).getroot()  # well-formed XML
        self.by_id = {e.get("id"): e for e in self.root.iter()
                      if e.get("id")}
        self.width = int(math.ceil(float(self.root.get("width"))))
        self.height = int(math.ceil(float(self.root.get("height"))))
        png = svg_path[:-4] + ".png"
        failure = render(svg_path, png, self.width, self.height)
        if failure is not None:
            raise AssertionError(f"chromium did not render {svg_path}:\n"
                                 f"{failure[-3000:]}")
        w, h, self.rows = read_png(png)
        if (w, h) != (self.width, self.height):
            raise AssertionError(f"rendered {w}x{h}, expected "
                                 f"{self.width}x{self.height}")

    def element(self, id_):
        if id_ not in self.by_id:
            raise AssertionError(f"no element {id_!r} in the SVG")
        return self.by_id[id_]

    def share(self, color, y, x0=PLOT_LEFT, x1=PLOT_LEFT + PLOT_WIDTH):
        """The share of row y's pixels in [x0, x1) of exactly `color`."""
        row = self.rows[int(y)][int(x0):int(x1)]
        return sum(1 for p in row if p == color) / max(1, len(row))

    def count(self, color, top, bottom, x0=PLOT_LEFT,
              x1=PLOT_LEFT + PLOT_WIDTH):
        return sum(1 for y in range(int(top), int(bottom))
                   for p in self.rows[y][int(x0):int(x1)] if p == color)

    def rows_with(self, color, top, bottom, least=1):
        """Rows in [top, bottom) with at least `least` pixels of color."""
        return [y for y in range(int(top), int(bottom))
                if sum(1 for p in self.rows[y][PLOT_LEFT:PLOT_LEFT +
                                                PLOT_WIDTH]
                       if p == color) >= least]

    def lane(self, id_):
        """(top, bottom) of a lane's band."""
        e = self.element(id_)
        top = float(e.get("y"))
        return top, top + float(e.get("height"))


class ChartChecks:
    """Checks of one result's panel (memory chart and lanes), `prefix`
    its ids' (r0, r1...)."""

    def check_panel(self, pic, prefix, result):
        chart = pic.element(f"{prefix}-memory")
        top = float(chart.get("data-top"))
        bottom = float(chart.get("data-bottom"))
        most = int(chart.get("data-max-bytes"))

        def y_of(b):
            return bottom - (bottom - top) * b / most

        static = int(result.get("static_bytes", 0))
        budget = int(result.get("budget_bytes", 0))
        # The budget line: where the data puts it, drawn dashed in its
        # colour across the chart.
        if budget > 0:
            line = pic.element(f"{prefix}-memory-budget")
            y = float(line.get("y1"))
            self.assertLessEqual(abs(y - y_of(static + budget)), 1.0)
            share = max(pic.share(BUDGET, y - 1), pic.share(BUDGET, y))
            self.assertGreater(share, 0.5, f"budget line at row {y}")
        # The device's capacity, solid, where it is on the scale (a device
        # far larger than the memory is named, not drawn).
        device = result.get("device", {})
        if f"{prefix}-memory-device" in pic.by_id:
            line = pic.element(f"{prefix}-memory-device")
            y = float(line.get("y1"))
            self.assertLessEqual(
                abs(y - y_of(int(device["capacity_bytes"]))), 1.0)
            share = max(pic.share(DEVICE, y - 1), pic.share(DEVICE, y))
            self.assertGreater(share, 0.9, f"device line at row {y}")
        # Static memory fills the chart's bottom band.
        if static > 0:
            mid = (y_of(static) + bottom) / 2
            self.assertGreater(pic.share(STATIC, mid), 0.9,
                               f"static band at row {mid}")
        # The activation area reaches the activation peak (above static)
        # and covers a plausible share of the chart.
        peak = int(result.get("peak_activation_bytes", 0))
        if peak > 0:
            rows = pic.rows_with(ACTIVATION, top, bottom, least=2)
            self.assertTrue(rows, "no activation area")
            self.assertLessEqual(abs(rows[0] - y_of(static + peak)), 3.0,
                                 f"activation peak at row {rows[0]}, "
                                 f"expected {y_of(static + peak):.1f}")
            area = pic.count(ACTIVATION, top, bottom)
            share = area / ((bottom - top) * PLOT_WIDTH)
            self.assertGreater(share, 0.01)
            self.assertLess(share, 0.9)
        # The compute lane is busy for the ops' and the recomputes' time
        # (the ideal step and recompute_ns; a column with any of it is
        # painted, so at least that share), in their colours; decisions
        # colour their lanes.
        self.assertTrue(result.get("feasible"), result)
        busy = (int(result["ideal_step_ns"]) + int(
            result.get("recompute_ns", 0))) / int(result["step_ns"])
        t, b = pic.lane(f"{prefix}-lane-compute")
        mid = (t + b) / 2
        self.assertGreater(pic.share(OP, mid) + pic.share(RECOMPUTE, mid),
                           0.8 * min(1.0, busy), "compute lane")
        if int(result.get("recomputed_tensors", 0)) > 0:
            self.assertGreater(pic.share(RECOMPUTE, mid), 0, "recomputes")
        if int(result.get("swapped_tensors", 0)) > 0:
            t, b = pic.lane(f"{prefix}-lane-d2h")
            self.assertGreater(pic.share(SWAP_OUT, (t + b) / 2), 0,
                               "swap-outs")
            t, b = pic.lane(f"{prefix}-lane-h2d")
            self.assertGreater(pic.share(PREFETCH, (t + b) / 2), 0,
                               "prefetches")


class PlanSvgTest(unittest.TestCase, ChartChecks):

    def test_plan_picture(self):
        svg = os.path.join(OPTIONS.work_dir, "plan.svg")
        report = json.loads(run([
            "plan", "--workload", "gpt2-xl", "--layers", "8", "--budget",
            "0.3", "--policy", "slackswap", "--svg", svg, "--json"]))
        result = report["results"][0]["result"]
        # The plan both swaps and recomputes: every colour has a part.
        self.assertGreater(int(result["swapped_tensors"]), 0)
        self.assertGreater(int(result["recomputed_tensors"]), 0)
        pic = Picture(svg)
        title = pic.root.find(SVG_NS + "title").text
        self.assertIn("slackswap", title)
        self.check_panel(pic, "r0", result)
        # Nothing the picture needs from elsewhere.
        with open(svg, encoding="utf-8") as f:
            text = f.read()
        for banned in ("<script", "href", "foreignObject", "<image"):
            self.assertNotIn(banned, text)


    def test_device_budget_picture(self):
        svg = os.path.join(OPTIONS.work_dir, "device.svg")
        report = json.loads(run([
            "plan", "--workload", "gpt2-xl", "--hardware", "a100-40gb-pcie4",
            "--budget", "device", "--policy", "slackswap", "--svg", svg,
            "--json"]))
        pic = Picture(svg)
        # The device is on this scale: its line is drawn, and checked.
        pic.element("r0-memory-device")
        self.check_panel(pic, "r0", report["results"][0]["result"])


class NodeSvgTest(unittest.TestCase, ChartChecks):

    def test_node_picture(self):
        plan = os.path.join(OPTIONS.work_dir, "node_plan.txtpb")
        run(["plan", "--workload", "gpt2-xl", "--layers", "4", "--budget",
             "0.5", "--policy", "swap_only", "--out", plan])
        svg = os.path.join(OPTIONS.work_dir, "node.svg")
        # Two ranks behind one switch, swapping at the same moments: their
        # copies share the uplink.
        resp = json.loads(run([
            "simulate", "--workload", "gpt2-xl", "--layers", "4", "--node",
            "dgx-a100-80gb", "--ranks", "2", "--plan", plan, "--svg", svg,
            "--json"]))
        node = resp["node"]
        pic = Picture(svg)
        for i, rank in enumerate(node["ranks"]):
            self.check_panel(pic, f"r{i}", rank["result"])
        drawn = 0
        for i, link in enumerate(node["links"]):
            if not link.get("ranks"):
                self.assertNotIn(f"link{i}", pic.by_id)
                continue
            panel = pic.element(f"link{i}")
            axis = float(panel.get("data-axis"))
            # Toward the GPUs above the axis, toward the host below.
            if int(link.get("h2d_bytes", 0)) > 0:
                self.assertGreater(pic.count(PREFETCH, axis - 30, axis), 0,
                                   link["name"])
                self.assertEqual(pic.count(PREFETCH, axis + 1, axis + 30),
                                 0, link["name"])
            if int(link.get("d2h_bytes", 0)) > 0:
                self.assertGreater(pic.count(SWAP_OUT, axis + 1, axis + 31),
                                   0, link["name"])
            drawn += 1
        self.assertGreater(drawn, 0)


def main():
    global OPTIONS
    parser = argparse.ArgumentParser()
    parser.add_argument("--slackswap", required=True)
    parser.add_argument("--work_dir", required=True)
    parser.add_argument("--chromium", default=None)
    OPTIONS, rest = parser.parse_known_args()
    OPTIONS.chromium = OPTIONS.chromium or find_chromium()
    shutil.rmtree(OPTIONS.work_dir, ignore_errors=True)
    os.makedirs(OPTIONS.work_dir)
    if OPTIONS.chromium is None:
        print("SKIPPED: no chromium on PATH (scripts/setup.sh test installs "
              "it)")
        return SKIP
    # Chromium must start and draw at all; after this, any failure fails.
    probe = os.path.join(OPTIONS.work_dir, "probe.svg")
    with open(probe, "w") as f:
        f.write('<svg xmlns="http://www.w3.org/2000/svg" width="20" '
                'height="20"><rect width="20" height="20" fill="#000000"/>'
                '</svg>')
    failure = render(probe, probe[:-4] + ".png", 20, 20)
    if failure is not None:
        print(f"SKIPPED: {OPTIONS.chromium} cannot start:\n{failure[-2000:]}")
        return SKIP
    program = unittest.main(argv=[sys.argv[0]] + rest, exit=False,
                            verbosity=2)
    return 0 if program.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
