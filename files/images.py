"""Images as every vision provider takes them: png, jpeg or still webp, within the providers' size limits."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

# Anthropic's per-image limit, the smallest of the common providers' (OpenAI takes 20 MB): an image over
# it is re-encoded smaller, or skipped.
MAX_IMAGE_BYTES = 5 * 2**20
# Providers scale larger images down themselves (Anthropic past 1568 px on the long side, OpenAI to 768 px on
# the short one): sending more pixels only costs bytes, and the event loop's time to encode the request.
MAX_IMAGE_SIDE = 1568

_IMAGE_MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}


class ImageProblem(Exception):
    """An image that cannot be sent; the message says why, for the model's note."""


@dataclass(frozen=True, slots=True)
class PreparedImage:
    data: bytes
    media_type: str
    # What was done to it, for its note: "downscaled", "first frame of an animation", ...
    changes: tuple[str, ...] = ()


def prepare_image(data: bytes, *, max_bytes: int = MAX_IMAGE_BYTES, max_side: int = MAX_IMAGE_SIDE) -> PreparedImage:
    """`data` as an image every vision provider takes: png, jpeg or still webp, within the size limits.

    A gif (or an animated webp) becomes its first frame, as a png: several providers refuse gifs or
    read only one frame anyway. Blocking (decoding, resizing): run it in a thread.

    Raises:
        ImageProblem: not a readable image, or still over `max_bytes` after downscaling.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            image_format = image.format or ""
            animated = bool(getattr(image, "is_animated", False))
            fits = max(image.size) <= max_side and len(data) <= max_bytes
            if image_format in ("PNG", "JPEG", "WEBP") and not animated and fits:
                return PreparedImage(data, _IMAGE_MEDIA_TYPES[image_format])
            changes = []
            if image_format == "GIF" or animated:
                changes.append("first frame of an animation" if animated else "converted from gif")
            image.seek(0)
            keeps_alpha = image.mode in ("RGBA", "LA", "P") or "transparency" in image.info
            frame = image.convert("RGBA" if keeps_alpha else "RGB")
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as error:
        raise ImageProblem(f"could not be read as an image ({type(error).__name__})") from error
    if max(frame.size) > max_side:
        frame.thumbnail((max_side, max_side))
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


def _encode(frame: Any, keeps_alpha: bool) -> tuple[bytes, str]:
    out = io.BytesIO()
    if keeps_alpha:
        frame.save(out, format="PNG", optimize=True)
        return out.getvalue(), "image/png"
    frame.save(out, format="JPEG", quality=85)
    return out.getvalue(), "image/jpeg"
