"""Images as every vision provider takes them: png, jpeg or still webp, within the providers' size limits."""

from __future__ import annotations

import asyncio
import functools
import io
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

# Anthropic's per-image limit, the smallest of the common providers' (OpenAI takes 20 MB): an image over
# it is re-encoded smaller, or skipped.
MAX_IMAGE_BYTES = 5 * 2**20
# Providers scale larger images down themselves (Anthropic past 1568 px on the long side, OpenAI to 768 px on
# the short one): sending more pixels only costs bytes, and the event loop's time to encode the request.
MAX_IMAGE_SIDE = 1568

# Refused before decoding: width x height, well under Pillow's own limit (89 megapixels, only a warning below twice
# that), and a 40 MP phone photo's size. Pillow keeps a pixel in 1 to 4 bytes, so one decode takes at most 160 MB
# (MAX_DECODED_BYTES); a palette image converted for resampling adds its 4 bytes a pixel to its 1.
MAX_IMAGE_PIXELS = 40_000_000
MAX_DECODED_BYTES = 160 * 2**20
# Bytes Pillow stores a pixel of these modes in; every other mode takes 4.
_STORED_BYTES = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16B": 2, "I;16L": 2, "I;16N": 2}
_PALETTE_MODES = frozenset({"1", "P", "PA"})
# Images decoded at once, in the whole process: with MAX_DECODED_BYTES, the ceiling on what decoding adds to the
# process's peak memory, whatever members post (bench/bench_hostile_files.py: 230 MB for 40 MP RGB pngs).
IMAGES_DECODED_AT_ONCE = 1

_IMAGE_MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}


class ImageProblem(Exception):
    """An image that cannot be sent; the message says why, for the model's note."""


@dataclass(frozen=True, slots=True)
class PreparedImage:
    data: bytes
    media_type: str
    # What was done to it, for its note: "downscaled", "first frame of an animation", ...
    changes: tuple[str, ...] = ()


def prepare_image(
    data: bytes,
    *,
    max_bytes: int = MAX_IMAGE_BYTES,
    max_side: int = MAX_IMAGE_SIDE,
    max_pixels: int = MAX_IMAGE_PIXELS,
    max_decoded_bytes: int = MAX_DECODED_BYTES,
) -> PreparedImage:
    """`data` as an image every vision provider takes: png, jpeg or still webp, within the size limits.

    A gif (or an animated webp) becomes its first frame, as a png: several providers refuse gifs or
    read only one frame anyway. Only its header is read before an image over `max_pixels` (or
    `max_decoded_bytes` once decoded) is refused; a jpeg is decoded at the smallest scale that still
    covers `max_side`. Blocking (decoding, resizing): run it through `prepared_image`.

    Raises:
        ImageProblem: not a readable image, too large to decode, or still over `max_bytes` after downscaling.
    """
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            _refuse_oversized(image, max_pixels, max_decoded_bytes)
            declared_size = image.size
            image_format = image.format or ""
            animated = bool(getattr(image, "is_animated", False))
            fits = max(image.size) <= max_side and len(data) <= max_bytes
            if image_format in ("PNG", "JPEG", "WEBP") and not animated and fits:
                # Decoded whole (at most max_side squared pixels): a file cut short is found here, not by the provider.
                image.load()
                return PreparedImage(data, _IMAGE_MEDIA_TYPES[image_format])
            changes = []
            if image_format == "GIF" or animated:
                changes.append("first frame of an animation" if animated else "converted from gif")
            keeps_alpha = image.mode in ("RGBA", "LA", "P", "PA") or "transparency" in image.info
            frame = _reduced(image, max_side, "RGBA" if keeps_alpha else "RGB")
    except ImageProblem:
        raise
    # Pillow's decoders raise many types on malformed input (SyntaxError, struct.error, IndexError, OSError, ...):
    # whichever it is, the file is not a readable image.
    except Exception as error:
        raise ImageProblem(f"could not be read as an image ({type(error).__name__})") from error
    if frame.size != declared_size:
        changes.append(f"downscaled to {frame.size[0]}x{frame.size[1]}")
    encoded, media_type = _encode(frame, keeps_alpha)
    side = max(frame.size)
    # Still too heavy (a photo-like png): jpeg, then smaller, a few times before giving up.
    while len(encoded) > max_bytes and side > 256:
        side = side * 2 // 3
        frame = frame.convert("RGB")
        frame.thumbnail((side, side))
        encoded, media_type = _encode(frame, False)
        changes.append(f"downscaled to {frame.size[0]}x{frame.size[1]} to fit {max_bytes // 2**20} MB")
    if len(encoded) > max_bytes:
        raise ImageProblem(f"over the {max_bytes // 2**20} MB image limit even downscaled")
    return PreparedImage(encoded, media_type, tuple(dict.fromkeys(changes)))


def _refuse_oversized(image: Any, max_pixels: int, max_decoded_bytes: int) -> None:
    """Refuse, from its header alone, an image whose decoding would take more memory than the ceiling allows."""
    width, height = image.size
    if width * height > max_pixels:
        raise ImageProblem(f"too large to open ({width}x{height} pixels; the limit is {max_pixels / 1e6:g} megapixels)")
    decoded = width * height * _STORED_BYTES.get(image.mode, 4)
    if decoded > max_decoded_bytes:
        raise ImageProblem(f"too large to open ({width}x{height} pixels in {image.mode} take {decoded // 2**20} MB)")


def _reduced(image: Any, max_side: int, mode: str) -> Any:
    """The first frame of `image` in `mode`, at most `max_side` on its long side, decoded as small as its format
    allows."""
    image.seek(0)
    # A jpeg decodes at 1/2, 1/4 or 1/8 scale: draft picks the smallest that still covers max_side.
    image.draft(None, (max_side, max_side))
    if image.mode in _PALETTE_MODES:
        # Resampling a palette or bilevel image takes the nearest pixel: converted first, it is averaged properly.
        frame = image.convert(mode)
        frame.thumbnail((max_side, max_side))
        return frame
    # In its own mode (1 to 4 bytes a pixel) first, so the full-size image is never held twice.
    image.thumbnail((max_side, max_side))
    return image.convert(mode)


def _encode(frame: Any, keeps_alpha: bool) -> tuple[bytes, str]:
    out = io.BytesIO()
    if keeps_alpha:
        frame.save(out, format="PNG", optimize=True)
        return out.getvalue(), "image/png"
    frame.save(out, format="JPEG", quality=85)
    return out.getvalue(), "image/jpeg"


# The threads that decode images: their number is the bound on images decoded at once, and they are not the default
# executor's, whose threads aiohttp's DNS lookups use.
_DECODERS = ThreadPoolExecutor(max_workers=IMAGES_DECODED_AT_ONCE, thread_name_prefix="parley-image")


async def prepared_image(data: bytes) -> PreparedImage:
    """`prepare_image` on one of the image decoding threads."""
    return await asyncio.get_running_loop().run_in_executor(_DECODERS, prepare_image, data)


# A made image posted to Discord keeps up to this many pixels on its long side (the image models make 1024 to 4096).
POSTED_IMAGE_SIDE = 4096


async def prepared_to_fit(data: bytes, max_bytes: int) -> PreparedImage:
    """An image made for posting, within Discord's upload limit `max_bytes`: as it is when it fits, else re-encoded
    and downscaled (`prepare_image`), on an image decoding thread.

    Raises:
        ImageProblem: not a readable image, or still over `max_bytes` after downscaling.
    """
    return await asyncio.get_running_loop().run_in_executor(
        _DECODERS, functools.partial(prepare_image, data, max_bytes=max_bytes, max_side=POSTED_IMAGE_SIDE)
    )
