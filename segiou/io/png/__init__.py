"""Layer 4: folders of label images (PNG, TIFF, NPY): pair by name, decode, pack into Zarr.

A :class:`PngSet` is a small, picklable list of named image files. Each file decodes to one
2-D integer array (:meth:`PngSet.read`):

=====================  ========================================================================
file                   values
=====================  ========================================================================
``L`` / ``1``          ``uint8`` grey values are the labels
``P`` (palette)        ``uint8`` palette *index* is the label (PASCAL VOC ``SegmentationClass``)
``I;16``               ``uint16``; ``I`` (32-bit TIFF): ``int32``
``RGB`` / ``RGBA``     colour-coded: converted to ids (``ids="class"`` or ``"raw"``) by colours
``.npy``               a 2-D integer or bool array, memory-mapped (``np.load(mmap_mode="r")``)
=====================  ========================================================================

TIFF files are read with Pillow, or with ``tifffile`` (when installed; ``segiou[tiff]``, with
``imagecodecs`` for LZW and deflate) if Pillow cannot; TIFF is told by a file's first bytes,
not its name. A file cut short or damaged is refused by name also while Pillow's
process-wide ``ImageFile.LOAD_TRUNCATED_IMAGES`` is set (Pillow would then leave the missing
pixels 0): segiou checks PNG and TIFF files itself and never changes the flag. Large masks (an
orthophoto's 13,500 x 13,500) are read whatever Pillow's decompression-bomb limit
(``Image.MAX_IMAGE_PIXELS``, a guard for images from strangers) says, without changing it;
a mask whose decoding would need more memory than is available is refused by name
(``ResourceError``) before anything is decoded.

Colour-coded masks use the spec's raw-id colours when its raw table has colours (Cityscapes),
else its class colours (PASCAL VOC), and decode to the id space the mask is evaluated in
(``read(..., ids=...)``, default ``"class"``):

* ``ids="class"``: each colour becomes the class its ids map to, or the spec's first ignore
  value when they are all ignored.
* ``ids="raw"`` (specs with raw ids): each colour becomes a raw id that owns it. When several
  raw ids share a colour and map the same way, the smallest of them is chosen (Cityscapes
  ``(0, 0, 0)``, raw ids 0-4, all ignored, becomes 0 ``unlabeled``); a class colour becomes
  the smallest raw id of its class; "the ignore value" is the smallest ignored raw id (else the
  spec's first ignore value, which is ignored in raw-id space too).

A colour shared by one evaluated class and ignored ids is that class (Cityscapes ``pole`` and
``polegroup``, both ``(153, 153, 153)``, decode to ``pole``: a colour mask cannot tell them
apart, and cityscapesScripts draws both alike). A colour shared by ids of different evaluated
classes is ambiguous and raises when an image holds it, as does an unknown colour
(``colors="ignore"`` maps both to the ignore value instead). Evaluate a mask in the id space it
was decoded to: ``segiou eval`` assumes raw ids when the spec has them (``gt_ids="raw"``).

Image names (what pairs a prediction with its ground truth) come from the file's path relative
to the folder, with ``/`` separators: by default the path without its suffix
(``val/a/img_1.png`` -> ``val/a/img_1``); with ``layout="cityscapes"`` the
``<city>_<seq>_<frame>`` prefix of the file name (``frankfurt_000000_000294_gtFine_labelIds.png``
and a result ``frankfurt_000000_000294_pred.png`` are both ``frankfurt_000000_000294``, in any
sub-folder, as in cityscapesScripts); or the group ``(?P<name>...)`` of a regular expression
searched in the relative path.

:func:`ingest` packs one or two sets into a Zarr store (``gt`` and ``pred``, see
:mod:`segiou.io.zarr`): the ``stack`` layout when every image has one size, else the ``group``
layout, where each array is named by its image name with ``/`` replaced by ``__`` (the
original names are kept in the group attribute ``segiou.original_names``). Ingest decodes
colour images to the id space ``segiou eval`` assumes for the spec (raw ids when it has them),
records it in the root attribute ``segiou.ids`` when it is known (colour images were decoded,
or ``ids`` was given), writes every chunk (also chunks of 0s), and
compresses chunks with zstd unless told otherwise (``codec``, see :func:`parse_codec`).
"""

from __future__ import annotations

from segiou.errors import ImageDecodeError, NamingError, StoreExistsError
from segiou.io.png._colors import Colors
from segiou.io.png._ingest import CODEC_CHOICES, ingest, parse_codec
from segiou.io.png._pairs import (
    CITYSCAPES_NAME,
    FolderLayout,
    PngSet,
    check_apart,
    find_pairs,
    png_set,
)

__all__ = [
    "CITYSCAPES_NAME",
    "CODEC_CHOICES",
    "Colors",
    "FolderLayout",
    "ImageDecodeError",
    "NamingError",
    "PngSet",
    "StoreExistsError",
    "check_apart",
    "find_pairs",
    "ingest",
    "parse_codec",
    "png_set",
]
