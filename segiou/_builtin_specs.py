"""Facts of the built-in datasets: class names, raw ids, categories, colours. Data only.

:mod:`segiou.labels` builds the :class:`~segiou.labels.LabelSpec` of each from these tables.
"""

from __future__ import annotations

__all__ = [
    "ADE20K_CLASSES",
    "CITYSCAPES",
    "CITYSCAPES_CATEGORIES",
    "CITYSCAPES_INSTANCE_SIZES",
    "VOC_CLASSES",
    "voc_colors",
]

# Cityscapes: (name, labelId, trainId or None, category, colour), from the dataset's label table.
#: One row per Cityscapes labelId.
CITYSCAPES: tuple[tuple[str, int, int | None, str, tuple[int, int, int]], ...] = (
    ("unlabeled", 0, None, "void", (0, 0, 0)),
    ("ego vehicle", 1, None, "void", (0, 0, 0)),
    ("rectification border", 2, None, "void", (0, 0, 0)),
    ("out of roi", 3, None, "void", (0, 0, 0)),
    ("static", 4, None, "void", (0, 0, 0)),
    ("dynamic", 5, None, "void", (111, 74, 0)),
    ("ground", 6, None, "void", (81, 0, 81)),
    ("road", 7, 0, "flat", (128, 64, 128)),
    ("sidewalk", 8, 1, "flat", (244, 35, 232)),
    ("parking", 9, None, "flat", (250, 170, 160)),
    ("rail track", 10, None, "flat", (230, 150, 140)),
    ("building", 11, 2, "construction", (70, 70, 70)),
    ("wall", 12, 3, "construction", (102, 102, 156)),
    ("fence", 13, 4, "construction", (190, 153, 153)),
    ("guard rail", 14, None, "construction", (180, 165, 180)),
    ("bridge", 15, None, "construction", (150, 100, 100)),
    ("tunnel", 16, None, "construction", (150, 120, 90)),
    ("pole", 17, 5, "object", (153, 153, 153)),
    ("polegroup", 18, None, "object", (153, 153, 153)),
    ("traffic light", 19, 6, "object", (250, 170, 30)),
    ("traffic sign", 20, 7, "object", (220, 220, 0)),
    ("vegetation", 21, 8, "nature", (107, 142, 35)),
    ("terrain", 22, 9, "nature", (152, 251, 152)),
    ("sky", 23, 10, "sky", (70, 130, 180)),
    ("person", 24, 11, "human", (220, 20, 60)),
    ("rider", 25, 12, "human", (255, 0, 0)),
    ("car", 26, 13, "vehicle", (0, 0, 142)),
    ("truck", 27, 14, "vehicle", (0, 0, 70)),
    ("bus", 28, 15, "vehicle", (0, 60, 100)),
    ("caravan", 29, None, "vehicle", (0, 0, 90)),
    ("trailer", 30, None, "vehicle", (0, 0, 110)),
    ("train", 31, 16, "vehicle", (0, 80, 100)),
    ("motorcycle", 32, 17, "vehicle", (0, 0, 230)),
    ("bicycle", 33, 18, "vehicle", (119, 11, 32)),
)
CITYSCAPES_CATEGORIES = ("flat", "construction", "object", "nature", "sky", "human", "vehicle")
#: Average instance size in pixels per class with instances (the benchmark's iIoU weights, as
#: cityscapesScripts' evalPixelLevelSemanticLabeling gives them in ``avgClassSize``).
CITYSCAPES_INSTANCE_SIZES = {
    "bicycle": 4672.3249222261,
    "caravan": 36771.8241758242,
    "motorcycle": 6298.7200839748,
    "rider": 3930.4788056518,
    "bus": 35732.1511111111,
    "train": 67583.7075812274,
    "car": 12794.0202738185,
    "person": 3462.4756337644,
    "truck": 27855.1264367816,
    "trailer": 16926.9763313609,
}

VOC_CLASSES = (
    "background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair",
    "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa",
    "train", "tvmonitor",
)  # fmt: skip

ADE20K_CLASSES = (
    "wall", "building", "sky", "floor", "tree", "ceiling", "road", "bed", "windowpane", "grass",
    "cabinet", "sidewalk", "person", "earth", "door", "table", "mountain", "plant", "curtain",
    "chair", "car", "water", "painting", "sofa", "shelf", "house", "sea", "mirror", "rug",
    "field", "armchair", "seat", "fence", "desk", "rock", "wardrobe", "lamp", "bathtub",
    "railing", "cushion", "base", "box", "column", "signboard", "chest of drawers", "counter",
    "sand", "sink", "skyscraper", "fireplace", "refrigerator", "grandstand", "path", "stairs",
    "runway", "case", "pool table", "pillow", "screen door", "stairway", "river", "bridge",
    "bookcase", "blind", "coffee table", "toilet", "flower", "book", "hill", "bench",
    "countertop", "stove", "palm", "kitchen island", "computer", "swivel chair", "boat", "bar",
    "arcade machine", "hovel", "bus", "towel", "light", "truck", "tower", "chandelier",
    "awning", "streetlight", "booth", "television receiver", "airplane", "dirt track",
    "apparel", "pole", "land", "bannister", "escalator", "ottoman", "bottle", "buffet",
    "poster", "stage", "van", "ship", "fountain", "conveyer belt", "canopy", "washer",
    "plaything", "swimming pool", "stool", "barrel", "basket", "waterfall", "tent", "bag",
    "minibike", "cradle", "oven", "ball", "food", "step", "tank", "trade name", "microwave",
    "pot", "animal", "bicycle", "lake", "dishwasher", "screen", "blanket", "sculpture", "hood",
    "sconce", "vase", "traffic light", "tray", "ashcan", "fan", "pier", "crt screen", "plate",
    "monitor", "bulletin board", "shower", "radiator", "glass", "clock", "flag",
)  # fmt: skip


def voc_colors(n: int) -> tuple[tuple[int, int, int], ...]:
    """Return the PASCAL VOC devkit colour map: bits of the index spread over R, G and B."""
    out = []
    for i in range(n):
        r = g = b = 0
        c = i
        for j in range(8):
            r |= ((c >> 0) & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        out.append((r, g, b))
    return tuple(out)
