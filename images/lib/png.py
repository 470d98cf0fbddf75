#!/usr/bin/python3
"""Tiny PNG/PPM helper for screenshots, standard library only.

  png.py topng IN OUT.png    IN is a PNG (copied) or a binary PPM (P6, as virsh screenshot
                             writes with older QEMU); OUT is an RGB PNG
  png.py stats FILE.png      prints width, height, distinct colours, the share of the commonest
                             colour, as JSON
  png.py notblank FILE.png   exit 0 if the picture is not (nearly) a single colour
"""
import json
import shutil
import struct
import sys
import zlib
from collections import Counter

PNG_SIG = b"\x89PNG\r\n\x1a\n"


def read_ppm(data):
    # P6 <ws> width <ws> height <ws> maxval <single ws> pixels; comments start with '#'.
    fields, pos = [], 2
    while len(fields) < 3:
        while data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos) + 1
            continue
        start = pos
        while not data[pos:pos + 1].isspace():
            pos += 1
        fields.append(int(data[start:pos]))
    pos += 1
    width, height, maxval = fields
    if maxval != 255:
        raise ValueError("only 8-bit PPM supported")
    return width, height, data[pos:pos + width * height * 3]


def write_png(path, width, height, rgb):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    stride = width * 3
    raw = b"".join(b"\x00" + rgb[y * stride:(y + 1) * stride] for y in range(height))
    with open(path, "wb") as f:
        f.write(PNG_SIG)
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))


def read_png(path):
    """Returns (width, height, channels, rows) for 8-bit, non-interlaced RGB/RGBA/grey PNGs."""
    data = open(path, "rb").read()
    if not data.startswith(PNG_SIG):
        raise ValueError("not a PNG")
    pos, idat, width = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or interlace or ctype not in (0, 2, 4, 6):
                raise ValueError("unsupported PNG (depth %d, colour type %d)" % (depth, ctype))
            channels = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = prev[x]
            c = prev[x - channels] if x >= channels else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ftype == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ftype == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def stats(path):
    width, height, channels, rows = read_png(path)
    counts = Counter()
    for row in rows:
        for x in range(0, width * channels, channels * 2):  # every other pixel is plenty
            counts[row[x:x + min(channels, 3)]] += 1
    total = sum(counts.values())
    top = counts.most_common(1)[0][1] / total if total else 1.0
    return {"width": width, "height": height, "colours": len(counts), "dominant_share": round(top, 4)}


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd = sys.argv[1]
    if cmd == "topng":
        data = open(sys.argv[2], "rb").read()
        if data.startswith(PNG_SIG):
            shutil.copyfile(sys.argv[2], sys.argv[3])
        elif data[:2] == b"P6":
            write_png(sys.argv[3], *read_ppm(data))
        else:
            sys.exit("topng: %s is neither PNG nor PPM" % sys.argv[2])
    elif cmd == "stats":
        print(json.dumps(stats(sys.argv[2])))
    elif cmd == "notblank":
        s = stats(sys.argv[2])
        print(json.dumps(s))
        sys.exit(0 if s["colours"] > 1 and s["dominant_share"] < 0.995 else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
