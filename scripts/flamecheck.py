#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks a flame graph as a browser drew it against what its aggregation implies.

flamecheck.py EXPECT DOM PNG: EXPECT is the file the host test wrote
(tools/oxtrace/tests/flamegraph.rs with OXT_FLAME_OUT): the frame count, the widest
frame's name, and frames with their colour and width in samples. DOM is Chromium's
--dump-dom of the SVG (the document after its JavaScript ran), PNG its screenshot at one
pixel per SVG unit. Standard library only: the PNG is decoded here.
"""
import re
import struct
import sys
import zlib


def png_rows(path):
    """The rows of an 8-bit RGB or RGBA, non-interlaced PNG as lists of (r, g, b)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise SystemExit(f"{path}: depth {depth} colour type {ctype} interlace {interlace}")
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pr) & 0xFF
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return rows


def longest_run(rows, colour):
    """The longest horizontal run of pixels of exactly `colour`, and how many rows have it."""
    best, nrows = 0, 0
    for row in rows:
        run, seen = 0, False
        for px in row:
            if px == colour:
                run += 1
                seen = True
                best = max(best, run)
            else:
                run = 0
        nrows += seen
    return best, nrows


def main():
    expect_path, dom_path, png_path = sys.argv[1:4]
    expect = {"frame": []}
    for line in open(expect_path):
        k, _, v = line.strip().partition(" ")
        if k == "frame":
            expect["frame"].append(v)
        else:
            expect[k] = v
    dom = open(dom_path).read()
    bad = []
    # The post-JavaScript DOM: inferno's script made the drawing fluid (no fixed width).
    svg_tag = re.search(r"<svg[^>]*>", dom).group(0)
    if 'width="1200"' in svg_tag:
        bad.append("the SVG's script did not run (the root still has its fixed width)")
    frames = dom[dom.find('id="frames"'):]
    groups = re.findall(r"<g>\s*<title>([^<]*)</title>\s*<rect[^>]*>\s*<text[^>]*>([^<]*)</text>", frames)
    if len(groups) != int(expect["frames"]):
        bad.append(f"{len(groups)} frames in the DOM, the aggregation has {expect['frames']}")
    total = int(expect["total"])
    labels = [text.strip() for _, text in groups]
    if expect["widest"] not in labels:
        bad.append(f"the widest frame's text {expect['widest']!r} is not shown: {labels}")
    if expect["title"] not in dom:
        bad.append(f"title {expect['title']!r} missing")
    rows = png_rows(png_path)
    width = int(expect["graphwidth"])
    for f in expect["frame"]:
        name, rgb, samples = f.rsplit(" ", 2)
        colour = tuple(int(c) for c in re.findall(r"\d+", rgb))
        want = width * int(samples) / total
        run, nrows = longest_run(rows, colour)
        # The rectangle's rounded corners and antialiased edges cost a pixel or two.
        ok = abs(run - want) <= 4 and nrows >= 8
        print(f"# {name}: {rgb} drawn {run} px wide on {nrows} rows, expected {want:.0f} px"
              + ("" if ok else "  <-- wrong"))
        if not ok:
            bad.append(f"{name}: {run} px on {nrows} rows, expected {want:.0f} px")
    for b in bad:
        print(f"flamecheck: {b}", file=sys.stderr)
    print(f"# {len(groups)} frames, widest {expect['widest']!r}, {len(expect['frame'])} frame widths checked")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
