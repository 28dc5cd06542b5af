"""Files an attacker posts (issue 30), built byte by byte so none needs the memory it makes Parley use.

Used by the unit, fuzz and end-to-end tests and by bench/bench_hostile_files.py.
"""

from __future__ import annotations

import io
import random
import struct
import zlib
from collections.abc import Iterator

from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def bomb_png(side: int = 13_000) -> bytes:
    """A one-bit black png of `side` x `side` pixels: ~20 kB for 13,000 (169 megapixels, under Pillow's hard limit,
    so it only warns), which decoded whole takes 169 MB, and over 700 MB once converted to RGBA."""
    return flat_png(side, side, rgb=False)


def flat_png(width: int, height: int, *, rgb: bool = True) -> bytes:
    """A png of one colour: 8-bit RGB, or one-bit greyscale; tiny whatever its size, written a row at a time."""
    row = b"\x00" + (bytes([90, 140, 200]) * width if rgb else bytes((width + 7) // 8))  # filter type 0, the pixels
    compressor = zlib.compressobj(9)
    data = b"".join(compressor.compress(row) for _ in range(height)) + compressor.flush()
    header = struct.pack(">IIBBBBB", width, height, 8 if rgb else 1, 2 if rgb else 0, 0, 0, 0)
    return PNG_SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")


def broken_png(width: int = 1600, height: int = 16) -> bytes:
    """A one-bit png wider than providers take (so it is decoded to be downscaled), its pixels in two IDAT chunks,
    with bytes cut from the middle of the first: decoding it, Pillow reads a chunk type among the pixels and raises
    SyntaxError ("broken PNG file"). About 3 kB."""
    row = b"\x00" + bytes((width + 7) // 8)
    data = zlib.compress(row * height, 0)  # stored: the cut leaves the deflate stream itself readable
    half = len(data) // 2
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    first = _chunk(b"IDAT", data[:half])
    cut = first[: 8 + half // 2] + first[8 + half // 2 + 10 :]
    return PNG_SIGNATURE + _chunk(b"IHDR", header) + cut + _chunk(b"IDAT", data[half:]) + _chunk(b"IEND", b"")


def image(image_format: str, size: tuple[int, int] = (48, 32)) -> bytes:
    """A small noisy image in `image_format` (PNG, JPEG, GIF or WEBP), a seed for mutations."""
    rng = random.Random(image_format)
    picture = Image.frombytes("RGB", size, rng.randbytes(size[0] * size[1] * 3))
    out = io.BytesIO()
    picture.save(out, format=image_format)
    return out.getvalue()


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF of `objects` (numbered from 1, the first the catalog) with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _stream(content: bytes, *, compress: bool = False) -> bytes:
    if compress:
        packed = zlib.compress(content, 9)
        return b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(packed), packed)
    return b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content)


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def text_pdf(text: str = "hello from a PDF") -> bytes:
    """A one-page PDF whose text layer says `text`."""
    return shared_stream_pdf(pages=1, lines=[text])


def shared_stream_pdf(pages: int = 200, lines: list[str] | None = None) -> bytes:
    """A PDF of `pages` pages that all show one compressed content stream: a tiny file with a huge text layer
    (200 pages of 1,000 lines of 80 characters: about 16 million characters from about 30 kB)."""
    lines = lines if lines is not None else [f"line {n:04d} " + "lorem ipsum dolor sit amet " * 3 for n in range(1000)]
    content = b"BT /F1 10 Tf 12 TL 40 780 Td " + b" ".join(b"(%s) '" % line.encode() for line in lines) + b" ET"
    kids = b" ".join(b"%d 0 R" % (5 + page) for page in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        _stream(content, compress=True),
        _FONT,
    ]
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R"
    page += b" /Resources << /Font << /F1 4 0 R >> >> >>"
    return _pdf(objects + [page] * pages)


def malformed_pdfs() -> dict[str, bytes]:
    """PDFs on which pypdf raises, each a different way."""
    whole = text_pdf("the quarterly numbers")
    contents_not_a_stream = _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
            b"<< /Not /AStream >>",
        ]
    )
    return {
        "header-only.pdf": b"%PDF-1.7\n",
        "cut-short.pdf": whole[: len(whole) // 2],
        "contents-not-a-stream.pdf": contents_not_a_stream,
        "pages-not-a-dictionary.pdf": _pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"[1 2 3]"]),
    }


# Found by the fuzz (seed and mutation number): mutations on which pypdf raises something else than PdfReadError,
# which Parley used to let out (issue 30).
_PYPDF_CHOKES = {
    "limit-reached.pdf": (0, 26),  # LimitReachedError
    "unsupported-filter.pdf": (5, 46),  # NotImplementedError
    "indirect-reference.pdf": (30, 9),  # AttributeError
    "str-plus-int.pdf": (51, 40),  # TypeError
}


def pdfs_pypdf_chokes_on() -> dict[str, bytes]:
    """Mutated PDFs on which pypdf (7.x) raises LimitReachedError, NotImplementedError, AttributeError, TypeError."""
    seeds = [text_pdf("the first quarter"), shared_stream_pdf(pages=3, lines=["a", "b"])]
    donors = [*seeds, *malformed_pdfs().values()]
    found = {}
    for name, (seed, number) in _PYPDF_CHOKES.items():
        rng = random.Random(seed)
        for count in range(number + 1):
            data = mutated(rng, seeds[count % 2], donors)
        found[name] = data
    return found


def mutated(rng: random.Random, data: bytes, donors: list[bytes]) -> bytes:
    """`data` damaged the way a fuzzer would: bytes flipped, cut short, a piece of another file spliced in,
    a piece repeated, or a run zeroed."""
    damaged = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        how = rng.randrange(5)
        at = rng.randrange(max(1, len(damaged)))
        if how == 0:
            for _ in range(rng.randint(1, 8)):
                damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        elif how == 1:
            del damaged[max(8, at) :]
        elif how == 2:
            donor = rng.choice(donors)
            start = rng.randrange(max(1, len(donor)))
            damaged[at:at] = donor[start : start + rng.randint(1, 512)]
        elif how == 3:
            damaged[at:at] = damaged[at : at + rng.randint(1, 256)] * rng.randint(1, 4)
        else:
            damaged[at : at + rng.randint(1, 64)] = bytes(rng.randint(1, 64))
    return bytes(damaged)


def mutations(seed: int, seeds: list[bytes], count: int) -> Iterator[bytes]:
    """`count` mutated copies of the `seeds`, in turn, reproducibly from `seed`."""
    rng = random.Random(seed)
    for number in range(count):
        yield mutated(rng, seeds[number % len(seeds)], seeds)
