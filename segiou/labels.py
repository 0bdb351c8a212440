"""Label specifications: class names, raw ids, ignore values, colours and categories.

A :class:`LabelSpec` says which values of a mask are evaluated classes, which are ignored, and
which raw ids (for example Cityscapes ``labelIds``) map to which class. Masks may hold class ids
(``0..K-1`` plus ignore values) or raw ids; the accumulator is told which with ``gt_ids`` /
``pred_ids``. Built-in specs: ``cityscapes``, ``pascal_voc``, ``ade20k``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from segiou._builtin_specs import (
    ADE20K_CLASSES,
    CITYSCAPES,
    CITYSCAPES_CATEGORIES,
    CITYSCAPES_INSTANCE_SIZES,
    VOC_CLASSES,
    voc_colors,
)
from segiou._count import IGNORE
from segiou._jsontext import TOO_DEEP, loads
from segiou._resources import check_memory
from segiou._spec_checks import (
    as_int,
    check_color,
    no_duplicates,
    read_spec_fields,
)
from segiou._typing import IntArray
from segiou.errors import LabelSpecError

__all__ = [
    "Color",
    "IdSpace",
    "LabelSpec",
    "RawLabel",
    "builtin_spec",
    "load_spec",
    "upgrade_builtin",
]

Color = tuple[int, int, int]
#: Which values a mask holds: evaluated class ids, or the spec's raw ids.
IdSpace = Literal["class", "raw"]


@dataclass(frozen=True)
class RawLabel:
    """One raw id of a dataset (for example a Cityscapes ``labelId``).

    Attributes
    ----------
    id : int
        The value stored in the mask.
    name : str
        Human-readable name.
    cls : int or None
        Evaluated class index, or ``None`` when the id is not evaluated (ignored in the ground
        truth, void in a prediction).
    color : tuple of int, optional
        RGB colour of this id in colour-coded masks.
    category : int, optional
        Category index of an id that maps to no class (Cityscapes "caravan" is a "vehicle"):
        only instance-level IoU (iIoU) reads it, as cityscapesScripts counts a prediction of
        such an id as its category there.
    """

    id: int
    name: str
    cls: int | None
    color: Color | None = None
    category: int | None = None


def _ignore_tuple(values: object) -> tuple[Any, ...]:
    """Ignore values given as one value or several, as a tuple (validated by the spec).

    A 0-d array is one value (iterating it raised a bare ``TypeError``).
    """

    def one(v: object) -> object:
        return v.item() if isinstance(v, np.ndarray) and v.ndim == 0 else v

    if isinstance(values, Iterable) and not isinstance(values, str | bytes | np.ndarray):
        return tuple(one(v) for v in values)
    if isinstance(values, np.ndarray) and values.ndim:
        return tuple(values.tolist())
    return (one(values),)


def _fail(spec: str, what: str) -> LabelSpecError:
    return LabelSpecError(f"label spec {spec!r}: {what}")


def _int_raw(spec: str, r: RawLabel) -> RawLabel:
    """Check that a raw label's id and class are integers; return it with plain ints."""
    rid = as_int(r.id)
    if rid is None:
        msg = f"raw id {r.id!r} ({r.name!r}) is not an integer; raw ids are integer mask values"
        raise _fail(spec, msg)
    cls = None if r.cls is None else as_int(r.cls)
    if r.cls is not None and cls is None:
        msg = (
            f"raw id {rid} ({r.name!r}) maps to class {r.cls!r}, which is not an integer class "
            "index; give an integer class index, or None (not evaluated)"
        )
        raise _fail(spec, msg)
    if rid is r.id and cls is r.cls:
        return r
    return replace(r, id=rid, cls=cls)


@dataclass(frozen=True)
class LabelSpec:
    """What the values of a mask mean.

    Parameters
    ----------
    name : str
        Name of the spec (echoed in results and saved states).
    classes : sequence of str
        Names of the evaluated classes; class ``i`` is ``classes[i]``.
    ignore : sequence of int
        Mask values that are not evaluated: ignored in the ground truth (not counted, whatever
        was predicted), void in a prediction (a false negative of the true class). They apply
        to class-id masks and to raw-id masks alike (in raw ids, as well as the raw ids that
        map to no class); an ignore value may not be a class id, nor (in raw ids) a raw id that
        maps to a class.
    colors : sequence of (r, g, b), optional
        One colour per class, for colour-coded masks and reports.
    categories : sequence of str
        Category names (Cityscapes style); empty when the spec has none.
    class_categories : sequence of int
        Category index of each class; required when ``categories`` is given.
    raw : sequence of RawLabel
        Raw ids and the class each maps to, for masks stored in raw ids.
    instance_sizes : sequence of (int, float)
        ``(class index, average instance size in pixels)`` of the classes with instances, for
        instance-level IoU (iIoU): cityscapesScripts' ``avgClassSize`` in the built-in
        ``cityscapes`` spec.

    Raises
    ------
    LabelSpecError
        Duplicate names or ids, an ignore value that is also a class id, a class or category
        index out of range, a colour that is not three bytes, or an id, class index, category
        index or ignore value that is not an integer (floats and bools are refused, never
        truncated).

    Examples
    --------
    >>> spec = LabelSpec("roads", ["road", "car"], ignore=[255])
    >>> spec.num_classes, spec.gt_map("class")[255]
    (2, -1)
    """

    name: str
    classes: tuple[str, ...]
    ignore: tuple[int, ...] = ()
    colors: tuple[Color, ...] | None = None
    categories: tuple[str, ...] = ()
    class_categories: tuple[int, ...] = ()
    raw: tuple[RawLabel, ...] = field(default=())
    instance_sizes: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise _fail(repr(self.name), "name is not a string; name the spec with a string")
        for name in ("classes", "categories"):  # names are strings (a state is JSON), and a
            value = getattr(self, name)  # bare string is not a list of its letters
            if isinstance(value, str) or not all(isinstance(x, str) for x in value):
                msg = f"{name} {value!r} is not a list of strings; give one name per entry"
                raise _fail(self.name, msg)
        for name in ("classes", "ignore", "categories", "class_categories", "raw",
                     "instance_sizes"):  # fmt: skip
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("classes", "categories"):  # (numpy strings as plain ones)
            object.__setattr__(self, name, tuple(str(x) for x in getattr(self, name)))
        if bad := [r for r in self.raw if not isinstance(r.name, str)]:
            msg = f"raw id {bad[0].id!r} has the name {bad[0].name!r}; raw names are strings"
            raise _fail(self.name, msg)
        # numpy integers are accepted, but stored as int (states and results are JSON); floats
        # and bools are refused rather than truncated (7.9 is no raw id 7, True no class 1)
        ignore = []
        for v in self.ignore:
            if (iv := as_int(v)) is None:
                msg = f"ignore value {v!r} is not an integer; give integer mask values (e.g. 255)"
                raise _fail(self.name, msg)
            ignore.append(iv)
        object.__setattr__(self, "ignore", tuple(ignore))
        cats = []
        for i, g in enumerate(self.class_categories):
            if (ig := as_int(g)) is None:
                who = repr(self.classes[i]) if i < len(self.classes) else f"#{i}"
                msg = (
                    f"class {who} has category index {g!r}, which is not an integer; give the "
                    "integer index of its category in 'categories'"
                )
                raise _fail(self.name, msg)
            cats.append(ig)
        object.__setattr__(self, "class_categories", tuple(cats))
        object.__setattr__(self, "raw", tuple(_int_raw(self.name, r) for r in self.raw))
        sizes = []
        for item in self.instance_sizes:
            ci, size = item if isinstance(item, tuple) and len(item) == 2 else (None, None)
            ic = as_int(ci)
            number = isinstance(size, int | float | np.integer | np.floating) and not isinstance(
                size, bool | np.bool_
            )
            if ic is None or not 0 <= ic < len(self.classes) or not number or not 0 < size < np.inf:
                msg = (
                    f"instance size {item!r} must be (class index 0..{len(self.classes) - 1}, "
                    "a positive finite number of pixels)"
                )
                raise _fail(self.name, msg)
            sizes.append((ic, float(size)))
        object.__setattr__(self, "instance_sizes", tuple(sorted(sizes)))
        for what, values in (("ignore value", self.ignore), ("raw id", [r.id for r in self.raw])):
            if far := [v for v in values if not -(2**63) <= v < 2**63]:
                msg = (
                    f"{what}(s) {far[:3]} lie outside the 64-bit integer range of mask values "
                    f"(-2**63 .. 2**63 - 1); no mask can hold them: remove or renumber them"
                )
                raise _fail(self.name, msg)
        if self.colors is not None:
            object.__setattr__(self, "colors", tuple(tuple(c) for c in self.colors))
        self._validate()
        if self.colors is not None:  # validated: three integers 0..255 each
            object.__setattr__(
                self, "colors", tuple((int(c[0]), int(c[1]), int(c[2])) for c in self.colors)
            )

    def _validate(self) -> None:
        k = len(self.classes)
        if k == 0:
            raise _fail(self.name, "has no classes; give at least one class name")
        no_duplicates(self.name, "class name", self.classes)
        no_duplicates(self.name, "ignore value", self.ignore)
        if clash := sorted(v for v in self.ignore if 0 <= v < k):
            msg = (
                f"ignore value(s) {clash} are also class ids 0..{k - 1}; an id is either "
                "evaluated or ignored. Choose an ignore value outside the class range (e.g. 255)"
            )
            raise _fail(self.name, msg)
        if self.colors is not None:
            if len(self.colors) != k:
                msg = f"has {len(self.colors)} colours for {k} classes; give one per class"
                raise _fail(self.name, msg)
            for i, c in enumerate(self.colors):
                check_color(self.name, f"class {self.classes[i]!r}", c)
        if self.categories or self.class_categories:
            no_duplicates(self.name, "category", self.categories)
            if len(self.class_categories) != k:
                msg = (
                    f"has categories for {len(self.class_categories)} classes but {k} classes; "
                    "give a category for every class"
                )
                raise _fail(self.name, msg)
            for i, cat in enumerate(self.class_categories):
                if not 0 <= cat < len(self.categories):
                    msg = (
                        f"class {self.classes[i]!r} has category index {cat}, expected "
                        f"0..{len(self.categories) - 1} ({list(self.categories)})"
                    )
                    raise _fail(self.name, msg)
        no_duplicates(self.name, "raw id", [r.id for r in self.raw])
        for r in self.raw:
            if r.cls is not None and not 0 <= r.cls < k:
                msg = f"raw id {r.id} ({r.name!r}) maps to class {r.cls}, expected 0..{k - 1}"
                raise _fail(self.name, msg)
            if r.color is not None:
                check_color(self.name, f"raw id {r.id}", r.color)
            if r.category is not None and not (
                as_int(r.category) is not None and 0 <= r.category < len(self.categories)
            ):
                msg = (
                    f"raw id {r.id} ({r.name!r}) has category {r.category!r}, expected an index "
                    f"0..{len(self.categories) - 1} of the categories {list(self.categories)}"
                )
                raise _fail(self.name, msg)
            if r.category is not None and r.cls is not None:
                msg = (
                    f"raw id {r.id} ({r.name!r}) maps to class {r.cls} and also gives a category; "
                    "a raw id of a class is in its class's category: give no category"
                )
                raise _fail(self.name, msg)
        no_duplicates(self.name, "instance-size class", [c for c, _ in self.instance_sizes])

    # -- what the ids mean --------------------------------------------------------------------
    @property
    def num_classes(self) -> int:
        """Number of evaluated classes ``K``."""
        return len(self.classes)

    def gt_map(self, ids: IdSpace = "class") -> dict[int, int]:
        """Mask value -> class index or ``-1`` (ignored) for ground truth in id space ``ids``.

        Values absent from the map are unexpected. The ignore values apply in both id spaces:
        in raw ids, a value is ignored when it is an ignore value or a raw id that maps to no
        class.

        Parameters
        ----------
        ids : {"class", "raw"}, default "class"
            Whether the masks hold class ids (``0..K-1`` and the ignore values) or the spec's
            raw ids.

        Returns
        -------
        dict of int to int
            Every expected mask value and its class index, ``-1`` for ignored values.

        Raises
        ------
        LabelSpecError
            Raw ids are asked for but the spec has none, an ignore value is also a raw id
            that maps to a class (it cannot be both evaluated and ignored), or ``ids`` is
            neither ``"class"`` nor ``"raw"``.
        """
        if ids == "class":
            out = {i: i for i in range(self.num_classes)}
            out.update(dict.fromkeys(self.ignore, IGNORE))
            return out
        if ids == "raw":
            if not self.raw:
                msg = (
                    "has no raw ids, so masks cannot hold raw ids; use ids='class' or add a "
                    "'raw' table to the spec"
                )
                raise _fail(self.name, msg)
            out = {r.id: IGNORE if r.cls is None else r.cls for r in self.raw}
            for v in self.ignore:
                if out.get(v, IGNORE) != IGNORE:
                    r = next(r for r in self.raw if r.id == v)
                    msg = (
                        f"ignore value {v} is also raw id {v} ({r.name!r}), which maps to class "
                        f"{out[v]} ({self.classes[out[v]]!r}); in raw ids a value is either "
                        "evaluated or ignored. Choose an ignore value that is no evaluated raw "
                        f"id, or map raw id {v} to no class (null) in the spec"
                    )
                    raise _fail(self.name, msg)
                out[v] = IGNORE
            return out
        msg = f"id space {ids!r} is unknown; expected 'class' or 'raw'"  # type: ignore[unreachable]
        raise _fail(self.name, msg)

    def pred_map(self, ids: IdSpace = "class") -> dict[int, int]:
        """Mask value -> class index or ``-1`` (void) for predictions in id space ``ids``.

        The same table as :meth:`gt_map`: a value that is ignored in the ground truth is void
        when predicted (a false negative of the true class, never a false positive).

        Parameters
        ----------
        ids : {"class", "raw"}, default "class"
            Whether the masks hold class ids (``0..K-1`` and the ignore values) or the spec's
            raw ids.

        Returns
        -------
        dict of int to int
            Every expected mask value and its class index, ``-1`` for void values.

        Raises
        ------
        LabelSpecError
            As for :meth:`gt_map`.
        """
        return self.gt_map(ids)

    @property
    def has_raw(self) -> bool:
        """Whether the spec has a raw-id table."""
        return bool(self.raw)

    def category_matrix(self) -> IntArray:
        """``K x G`` 0/1 matrix: ``M[c, g] = 1`` when class ``c`` is in category ``g``.

        Returns
        -------
        ndarray of int64, shape (K, G)
            One row per class, one column per category, a single 1 per row.

        Raises
        ------
        LabelSpecError
            The spec has no categories.
        """
        if not self.categories:
            msg = "has no categories; add 'categories' and per-class categories to the spec"
            raise _fail(self.name, msg)
        m = np.zeros((self.num_classes, len(self.categories)), dtype=np.int64)
        m[np.arange(self.num_classes), list(self.class_categories)] = 1
        return m

    def with_ignore(self, values: int | Iterable[int]) -> LabelSpec:
        """Return a copy whose ignore values are ``values``.

        Parameters
        ----------
        values : int or iterable of int
            The new ignore values; they replace the spec's (see ``ignore`` of the class).

        Returns
        -------
        LabelSpec
            A new spec; this one is left as it is.

        Raises
        ------
        LabelSpecError
            A value that is not an integer (floats, bools and strings are refused), a duplicate
            value, or a value that is also a class id ``0..K-1``.
        """
        return replace(self, ignore=_ignore_tuple(values))

    # -- construction and serialisation -------------------------------------------------------
    @classmethod
    def from_num_classes(
        cls, num_classes: int, *, ignore: int | Iterable[int] | None = None
    ) -> LabelSpec:
        """Make a spec with classes named ``"0".."K-1"`` and the given ignore values.

        Parameters
        ----------
        num_classes : int
            Number of classes ``K`` (at least 1).
        ignore : int or iterable of int, optional
            Ignore values (e.g. 255); default none.

        Returns
        -------
        LabelSpec
            A spec named ``"<K> classes"``, without colours, categories or raw ids.

        Raises
        ------
        LabelSpecError
            ``num_classes`` is not an integer (a bool is refused) or is below 1, or an ignore
            value is not an integer, is repeated or is a class id ``0..K-1``.

        Examples
        --------
        >>> spec = LabelSpec.from_num_classes(3, ignore=255)
        >>> spec.name, spec.classes, spec.ignore
        ('3 classes', ('0', '1', '2'), (255,))
        """
        if isinstance(num_classes, bool) or not isinstance(num_classes, int | np.integer):
            msg = f"num_classes must be an int, got {num_classes!r}"
            raise LabelSpecError(msg)
        if num_classes < 1:
            msg = f"num_classes must be at least 1, got {num_classes}"
            raise LabelSpecError(msg)
        n = int(num_classes)
        check_memory(8 * n * n, f"a {n:,} x {n:,} count matrix ({n:,} classes)",
                     "Check the number of classes (--labels N)")  # fmt: skip
        ign = () if ignore is None else _ignore_tuple(ignore)
        return cls(f"{num_classes} classes", tuple(str(i) for i in range(num_classes)), ign)

    def _is_builtin(self) -> bool:
        """Whether this is a built-in spec as shipped (ignore values aside)."""
        return self.name in _BUILTIN and builtin_spec(self.name).with_ignore(self.ignore) == self

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe description; :meth:`from_dict` reads it back.

        A built-in spec's instance sizes and raw-id categories (facts of its dataset) are not
        written: :meth:`from_dict` restores them from its name.
        """
        out: dict[str, Any] = {"name": self.name, "classes": list(self.classes)}
        out["ignore"] = list(self.ignore)
        if self.colors is not None:
            out["colors"] = [list(c) for c in self.colors]
        if self.categories:
            out["categories"] = list(self.categories)
            out["class_categories"] = list(self.class_categories)
        # a built-in spec's iIoU facts come with its name: not repeated (states stay as they were)
        facts = not self._is_builtin()
        if self.raw:
            out["raw"] = [
                {"id": r.id, "name": r.name, "class": r.cls}
                | ({"color": list(r.color)} if r.color else {})
                | ({"category": self.categories[r.category]}
                   if facts and r.category is not None else {})
                for r in self.raw
            ]  # fmt: skip
        if self.instance_sizes and facts:
            out["instance_sizes"] = {self.classes[c]: v for c, v in self.instance_sizes}
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, source: str = "label spec") -> LabelSpec:
        """Build a spec from a mapping (see the README for the format).

        ``classes`` is a list of names, or of ``{"name", "color", "category"}`` objects;
        ``raw`` entries name their class by index or by name (``null``: not evaluated).

        Parameters
        ----------
        d : mapping
            The spec: ``classes`` (required) and optionally ``name``, ``ignore`` (an integer or
            a list of them), ``colors`` (one ``[r, g, b]`` per class), ``categories``,
            ``class_categories`` and ``raw`` (objects with ``id``, ``class``, ``name`` and
            ``color``). Other keys are refused. :meth:`to_dict` writes this format.
        source : str, default "label spec"
            Where the mapping came from (e.g. a file path): error messages start with it, and
            a spec without ``name`` is named after its stem.

        Returns
        -------
        LabelSpec

        Raises
        ------
        LabelSpecError
            A malformed or invalid spec; the message starts with ``source`` (the file) and
            names the entry and field, e.g. ``raw[1] field 'id' is 7.9``. Ids, class and
            category indices and ignore values must be integers: ``7.9``, ``1.0``, ``true``
            and ``"x"`` are refused, never truncated.
        """
        f = read_spec_fields(d, source)
        try:
            spec = cls(f["name"], tuple(f["classes"]), tuple(f["ignore"]), f["colors"],
                       tuple(f["categories"]), tuple(f["class_categories"]),
                       tuple(RawLabel(*e) for e in f["raw"]), f["instance_sizes"])  # fmt: skip
        except LabelSpecError as err:  # name the file too, not only the spec
            if source == "label spec":
                raise
            msg = f"{source}: {err}"
            raise LabelSpecError(msg) from None
        return upgrade_builtin(spec)


def load_spec(source: str | Path | LabelSpec) -> LabelSpec:
    """Load a built-in spec by name, or a spec file (``.json`` or ``.toml``).

    Parameters
    ----------
    source : str, Path or LabelSpec
        ``"cityscapes"``, ``"pascal_voc"``, ``"ade20k"``, or a path to a spec file.

    Returns
    -------
    LabelSpec

    Raises
    ------
    LabelSpecError
        Unknown name, unreadable or invalid file.

    Examples
    --------
    >>> load_spec("pascal_voc").num_classes
    21
    """
    if isinstance(source, LabelSpec):
        return source
    if isinstance(source, str) and source in _BUILTIN:
        return builtin_spec(source)
    path = Path(source)
    if not path.is_file():
        msg = (
            f"label spec {str(source)!r} is neither a built-in spec ({sorted(_BUILTIN)}) nor an "
            "existing .json/.toml file"
        )
        raise LabelSpecError(msg)
    try:
        if path.suffix.lower() == ".toml":
            import tomllib

            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except RecursionError:  # tomllib recurses, as json does: "[" * 3000 is 6 KB
                raise ValueError(TOO_DEEP) from None
        else:
            data = loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as err:
        msg = f"label spec file {str(path)!r} cannot be read: {err}"
        raise LabelSpecError(msg) from err
    return LabelSpec.from_dict(data, source=str(path))


# -- built-in specs ---------------------------------------------------------------------------
def _cityscapes() -> LabelSpec:
    train = sorted((t, n, cat, col) for n, _, t, cat, col in CITYSCAPES if t is not None)
    names = [n for _, n, _, _ in train]

    def raw_category(cls: int | None, cat: str) -> int | None:
        # an id of no class keeps its category for iIoU (caravan and trailer are vehicles)
        return None if cls is not None or cat not in CITYSCAPES_CATEGORIES else (
            CITYSCAPES_CATEGORIES.index(cat))  # fmt: skip

    return LabelSpec(
        name="cityscapes",
        classes=tuple(names),
        ignore=(255,),
        colors=tuple(col for *_, col in train),
        categories=CITYSCAPES_CATEGORIES,
        class_categories=tuple(CITYSCAPES_CATEGORIES.index(cat) for _, _, cat, _ in train),
        raw=tuple(RawLabel(i, n, t, col, raw_category(t, cat)) for n, i, t, cat, col in CITYSCAPES),
        # caravan and trailer have instance sizes but no class
        instance_sizes=tuple(
            (names.index(n), size) for n, size in CITYSCAPES_INSTANCE_SIZES.items() if n in names
        ),
    )


def _pascal_voc() -> LabelSpec:
    return LabelSpec("pascal_voc", VOC_CLASSES, ignore=(255,), colors=voc_colors(len(VOC_CLASSES)))


def _ade20k() -> LabelSpec:
    raw = (
        RawLabel(0, "other", None),
        *tuple(RawLabel(i + 1, n, i) for i, n in enumerate(ADE20K_CLASSES)),
    )
    return LabelSpec("ade20k", ADE20K_CLASSES, ignore=(255,), raw=raw)


_BUILTIN = {"cityscapes": _cityscapes, "pascal_voc": _pascal_voc, "ade20k": _ade20k}


def upgrade_builtin(spec: LabelSpec) -> LabelSpec:
    """Return the built-in spec of the same name when ``spec`` is it without the iIoU facts.

    States saved before the built-in specs gave instance sizes and raw-id categories hold the
    spec as it was then; read back, they are the built-in spec of today (with ``spec``'s ignore
    values), so they merge with new states. Any other spec is returned as it is.

    Parameters
    ----------
    spec : LabelSpec
        A spec read from a saved state.

    Returns
    -------
    LabelSpec
    """
    if spec.name not in _BUILTIN or spec.instance_sizes:
        return spec
    today = builtin_spec(spec.name).with_ignore(spec.ignore)
    bare = replace(today, instance_sizes=(),
                   raw=tuple(replace(r, category=None) for r in today.raw))  # fmt: skip
    return today if bare == spec else spec


def builtin_spec(name: str) -> LabelSpec:
    """Return a built-in label spec.

    Parameters
    ----------
    name : {"cityscapes", "pascal_voc", "ade20k"}
        ``cityscapes``: 19 train classes (class ids are trainIds, 255 ignored), the official 34
        labelIds as raw ids, 7 categories. ``pascal_voc``: 21 classes, 255 ignored (object
        boundaries). ``ade20k``: 150 classes; raw ids are the dataset's (0 = "other", ignored;
        ``i`` -> class ``i - 1``, i.e. mmsegmentation's ``reduce_zero_label``); class ids
        0..149 with 255 ignored.

    Returns
    -------
    LabelSpec

    Raises
    ------
    LabelSpecError
        Unknown name.

    Examples
    --------
    >>> spec = builtin_spec("cityscapes")
    >>> spec.num_classes, spec.gt_map("raw")[7], spec.gt_map("raw")[9]
    (19, 0, -1)
    """
    try:
        return _BUILTIN[name]()
    except KeyError:
        msg = f"unknown built-in label spec {name!r}; expected one of {sorted(_BUILTIN)}"
        raise LabelSpecError(msg) from None
