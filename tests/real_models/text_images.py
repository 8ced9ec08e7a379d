#!/usr/bin/env python3
"""Seeded images of printed text for the OCR models' quantization tests (Debian's python3-pil and
fonts-dejavu-core): text lines (PP-OCR cls / rec input) or pages of lines (det input).

Writes OUT/png/NNN.png (8-bit RGB, what a calibration image folder holds) and OUT/bin/NNN.bin
(float32 NCHW at the model's input size, normalized as PP-OCR does: (v / 255 - 0.5) / 0.5).

Usage: text_images.py line|page OUT COUNT SEED HEIGHT WIDTH [--turn-half]
  --turn-half: the second half of the images are the first half turned 180 degrees (cls's classes).
"""
import os
import random
import struct
import sys

from PIL import Image, ImageDraw, ImageFilter, ImageFont

WORDS = ("the of and to in is for on with as by at from this that are be or an was it not have all "
         "invoice total date order number price amount tax account payment customer address phone "
         "street city road north station model version report page section figure table summary "
         "kiln convert model weights layer output input batch device memory speed quality").split()
FONTS = ["DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf"]
FONT_DIR = "/usr/share/fonts/truetype/dejavu"


def phrase(rng):
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.4:
        words.append(str(rng.randint(0, 99999)))
    text = " ".join(words)
    return text.capitalize() if rng.random() < 0.5 else text


def font(rng, size):
    return ImageFont.truetype(os.path.join(FONT_DIR, rng.choice(FONTS)), size)


def line_image(rng, height, width):
    """One text line, cropped to its ink like a detector's box, then resized to height keeping the
    aspect ratio and padded on the right (PP-OCR's cls/rec preprocessing)."""
    text = phrase(rng)
    f = font(rng, rng.randint(22, 34))
    paper = tuple(rng.randint(200, 255) for _ in range(3))
    ink = tuple(rng.randint(0, 70) for _ in range(3))
    box = f.getbbox(text)
    canvas = Image.new("RGB", (box[2] + 12, box[3] + 10), paper)
    ImageDraw.Draw(canvas).text((6, 5), text, font=f, fill=ink)
    scaled_width = min(width, max(8, round(canvas.width * height / canvas.height)))
    line = canvas.resize((scaled_width, height), Image.BILINEAR)
    out = Image.new("RGB", (width, height), paper)
    out.paste(line, (0, 0))
    return out


def page_image(rng, height, width):
    paper = tuple(rng.randint(210, 255) for _ in range(3))
    page = Image.new("RGB", (width, height), paper)
    draw = ImageDraw.Draw(page)
    y = rng.randint(5, 30)
    while y < height - 40:
        f = font(rng, rng.randint(16, 34))
        x = rng.randint(5, width // 4)
        draw.text((x, y), " ".join(phrase(rng) for _ in range(rng.randint(1, 3))), font=f,
                  fill=tuple(rng.randint(0, 80) for _ in range(3)))
        y += f.size + rng.randint(8, 40)
    return page


def normalized_chw(image):
    planes = image.split()
    values = []
    for plane in planes:
        values.extend((v / 255.0 - 0.5) / 0.5 for v in plane.getdata())
    return struct.pack("<%df" % len(values), *values)


def main():
    if len(sys.argv) < 7:
        sys.exit(__doc__)
    kind, out, count, seed, height, width = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
    turn_half = "--turn-half" in sys.argv[7:]
    os.makedirs(os.path.join(out, "png"), exist_ok=True)
    os.makedirs(os.path.join(out, "bin"), exist_ok=True)
    images = []
    for i in range(count):
        if turn_half and i >= count // 2:
            image = images[i - count // 2].rotate(180)
        else:
            rng = random.Random(seed * 100003 + i)
            image = line_image(rng, height, width) if kind == "line" else page_image(rng, height, width)
            if rng.random() < 0.3:
                image = image.filter(ImageFilter.GaussianBlur(0.6))
        images.append(image)
        image.save(os.path.join(out, "png", "%03d.png" % i))
        with open(os.path.join(out, "bin", "%03d.bin" % i), "wb") as f:
            f.write(normalized_chw(image))


if __name__ == "__main__":
    main()
