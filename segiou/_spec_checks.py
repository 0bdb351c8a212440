"""Checks and readers of label-spec fields, shared by :mod:`segiou.labels` (no spec logic here).

Every reader names where a value came from (the spec, the file, the entry and the field) and
refuses what is not exactly the expected type: ``7.9``, ``1.0``, ``true`` and ``"x"`` are never
read as integers, and ``5`` or ``null`` never as a name (every name is a string).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from segiou.errors import LabelSpecError

__all__ = [
    "as_int",
    "check_color",
    "int_list",
    "is_color",
    "no_duplicates",
    "read_color",
    "read_instance_sizes",
    "read_raw_entries",
    "read_spec_fields",
]


def as_int(value: object) -> int | None:
    """Return ``value`` as an int when it is an integer (int or numpy integer, not bool)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        return None
    return int(value)


def no_duplicates(spec: str, what: str, items: Iterable[object]) -> None:
    """Refuse repeated items, naming the spec and what they are."""
    seen: set[object] = set()
    dup = [x for x in items if x in seen or seen.add(x)]  # type: ignore[func-returns-value]
    if dup:
        msg = f"label spec {spec!r}: duplicate {what}(s) {sorted(set(map(str, dup)))}; each must be unique"
        raise LabelSpecError(msg)


def is_color(c: object) -> bool:
    """Whether ``c`` is three integers 0..255."""
    if isinstance(c, str | bytes | Mapping) or not isinstance(c, Sequence) or len(c) != 3:
        return False
    return all((iv := as_int(v)) is not None and 0 <= iv <= 255 for v in c)


def check_color(spec: str, where: str, c: Sequence[int]) -> None:
    """Refuse a colour that is not three integers 0..255."""
    if not is_color(c):
        msg = f"label spec {spec!r}: {where} has colour {c!r}; expected three integers 0..255"
        raise LabelSpecError(msg)


def read_color(c: Any, where: str) -> tuple[int, int, int]:
    """Read a colour from a spec file; ``where`` names the file, the entry and the field."""
    if not is_color(c):
        msg = f"{where} is {c!r}; expected a colour: three integers 0..255 (r, g, b)"
        raise LabelSpecError(msg)
    return (int(c[0]), int(c[1]), int(c[2]))


def int_list(value: Any, source: str, key: str, what: str) -> list[int]:
    """Read the list of integers ``key`` of a spec file (a single integer is a list of one)."""
    if as_int(value) is not None:
        return [int(value)]
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        msg = f"{source}: {key!r} is {value!r}; expected an integer {what} or a list of them"
        raise LabelSpecError(msg)
    out = []
    for j, v in enumerate(value):
        if (iv := as_int(v)) is None:
            msg = f"{source}: {key}[{j}] is {v!r}; expected an integer {what}"
            raise LabelSpecError(msg)
        out.append(iv)
    return out


def read_instance_sizes(
    value: Any, classes: Sequence[str], where: str
) -> tuple[tuple[int, float], ...]:
    """Read ``{class name: average instance size in pixels}`` as ``((class index, size), ...)``.

    Sizes are positive finite numbers (integers or floats; not bools); names must be classes.
    """
    if not isinstance(value, Mapping):
        msg = (
            f"{where}: 'instance_sizes' is {str(value)[:60]!r}; expected an object of class "
            "name -> average instance size in pixels (cityscapesScripts' avgClassSize)"
        )
        raise LabelSpecError(msg)
    out = []
    for name, size in value.items():
        if name not in classes:
            msg = (
                f"{where}: instance_sizes names {name!r}, which is no class; known classes: "
                f"{list(classes)[:20]}"
            )
            raise LabelSpecError(msg)
        ok = isinstance(size, int | float | np.integer | np.floating) and not isinstance(
            size, bool | np.bool_
        )
        if not ok or not math.isfinite(float(size)) or float(size) <= 0:
            msg = (
                f"{where}: instance_sizes[{name!r}] is {size!r}; expected a positive number of "
                "pixels (the class's average instance size)"
            )
            raise LabelSpecError(msg)
        out.append((list(classes).index(name), float(size)))
    return tuple(sorted(out))


#: One raw entry as read from a spec file: (id, name, class or None, colour or None, category).
RawEntry = tuple[int, str, int | None, tuple[int, int, int] | None, int | None]


#: Keys of a raw-id entry and of a class object in a spec file (anything else is refused).
_RAW_KEYS = frozenset({"id", "name", "class", "color", "category"})
_CLASS_KEYS = frozenset({"name", "color", "category"})


def read_raw_entries(
    value: Any, names: Sequence[str], cats: Sequence[str], source: str
) -> list[RawEntry]:
    """Read a spec file's ``raw`` list: ids, names, classes (index or name), colours, categories."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        msg = f"{source}: 'raw' is {str(value)[:60]!r}; expected a list of raw-id objects"
        raise LabelSpecError(msg)
    out: list[RawEntry] = []
    for i, r in enumerate(value):
        if not isinstance(r, Mapping) or "id" not in r:
            msg = f"{source}: raw[{i}] is {r!r}; expected an object with 'id' (and 'class')"
            raise LabelSpecError(msg)
        # a misspelt 'class' would leave the id without one: not evaluated, silently ignored
        if unknown := sorted(set(r) - _RAW_KEYS):
            msg = f"{source}: raw[{i}] has unknown key(s) {unknown}; expected some of {sorted(_RAW_KEYS)}"
            raise LabelSpecError(msg)
        rid = as_int(r["id"])
        if rid is None:
            msg = (
                f"{source}: raw[{i}] field 'id' is {r['id']!r}; expected an integer raw id "
                "(the value stored in the mask)"
            )
            raise LabelSpecError(msg)
        target = r.get("class")
        if isinstance(target, str):
            if target not in names:
                msg = f"{source}: raw[{i}] maps to unknown class {target!r}; known: {list(names)}"
                raise LabelSpecError(msg)
            target = list(names).index(target)
        elif target is not None and (target := as_int(target)) is None:
            msg = (
                f"{source}: raw[{i}] field 'class' is {r['class']!r}; expected an integer "
                f"class index 0..{len(names) - 1}, a class name, or null (not evaluated)"
            )
            raise LabelSpecError(msg)
        where = f"{source}: raw[{i}] field 'color'"
        color = read_color(r["color"], where) if r.get("color") is not None else None
        if "name" in r and not isinstance(r["name"], str):
            msg = f"{source}: raw[{i}] field 'name' is {r['name']!r}; expected a name (a string)"
            raise LabelSpecError(msg)
        rcat = r.get("category")
        if rcat is not None and not isinstance(rcat, str):
            msg = f"{source}: raw[{i}] field 'category' is {rcat!r}; expected a category name"
            raise LabelSpecError(msg)
        if rcat is not None and rcat not in cats:
            msg = (
                f"{source}: raw[{i}] has category {rcat!r}, which is not in categories {list(cats)}"
            )
            raise LabelSpecError(msg)
        category = None if rcat is None else list(cats).index(rcat)
        out.append((rid, r.get("name", str(rid)), target, color, category))
    return out


def read_spec_fields(d: Any, source: str) -> dict[str, Any]:
    """Read a spec file's mapping into the fields of a label spec (raw ids as plain tuples).

    Refuses unknown keys and malformed entries, naming ``source``, the entry and the field;
    the spec itself checks the rest when it is built.
    """
    if not isinstance(d, Mapping):
        msg = f"{source}: expected an object with 'classes', got {type(d).__name__}"
        raise LabelSpecError(msg)
    known = {"name", "classes", "ignore", "colors", "categories", "class_categories", "raw",
             "instance_sizes"}  # fmt: skip
    if unknown := sorted(set(d) - known):
        msg = f"{source}: unknown key(s) {unknown}; expected some of {sorted(known)}"
        raise LabelSpecError(msg)
    if "classes" not in d:
        msg = f"{source}: missing 'classes' (a list of class names)"
        raise LabelSpecError(msg)
    if isinstance(d["classes"], str | Mapping) or not isinstance(d["classes"], Sequence):
        msg = f"{source}: 'classes' is {d['classes']!r}; expected a list of class names"
        raise LabelSpecError(msg)
    name = d.get("name", Path(source).stem)
    if not isinstance(name, str):
        msg = f"{source}: 'name' is {name!r}; expected the spec's name (a string)"
        raise LabelSpecError(msg)
    names: list[str] = []
    colors: list[tuple[int, int, int]] | None = None
    if "colors" in d:
        if isinstance(d["colors"], str | Mapping) or not isinstance(d["colors"], Sequence):
            msg = f"{source}: 'colors' is {d['colors']!r}; expected a list of [r, g, b]"
            raise LabelSpecError(msg)
        colors = [read_color(c, f"{source}: colors[{j}]") for j, c in enumerate(d["colors"])]
    categories = d.get("categories", [])
    if isinstance(categories, str | Mapping) or not isinstance(categories, Sequence):
        msg = f"{source}: 'categories' is {categories!r}; expected a list of category names"
        raise LabelSpecError(msg)
    for j, c in enumerate(categories):
        if not isinstance(c, str):
            msg = f"{source}: categories[{j}] is {c!r}; expected a category name (a string)"
            raise LabelSpecError(msg)
    cats = list(categories)
    class_cats = int_list(
        d.get("class_categories", []), source, "class_categories", "category index"
    )
    given_cats = len(class_cats)
    for i, c in enumerate(d["classes"]):
        if isinstance(c, str):
            names.append(c)
            continue
        if not isinstance(c, Mapping) or "name" not in c:
            msg = f"{source}: classes[{i}] is {c!r}; expected a name or an object with 'name'"
            raise LabelSpecError(msg)
        if unknown := sorted(set(c) - _CLASS_KEYS):
            msg = (
                f"{source}: classes[{i}] has unknown key(s) {unknown}; expected some of "
                f"{sorted(_CLASS_KEYS)}"
            )
            raise LabelSpecError(msg)
        if not isinstance(c["name"], str):
            msg = (
                f"{source}: classes[{i}] field 'name' is {c['name']!r}; expected a name (a string)"
            )
            raise LabelSpecError(msg)
        names.append(c["name"])
        if "color" in c:
            if "colors" in d:
                msg = (
                    f"{source}: classes[{i}] has a 'color' and the spec a 'colors' list; "
                    "give colours one way: per class, or as the list"
                )
                raise LabelSpecError(msg)
            colors = colors or [None] * len(d["classes"])  # type: ignore[list-item]
            colors[i] = read_color(c["color"], f"{source}: classes[{i}] field 'color'")
        if "category" in c:
            cat = c["category"]
            if not isinstance(cat, str):
                msg = f"{source}: class {c['name']!r} has category {cat!r}; expected a name"
                raise LabelSpecError(msg)
            if cat not in cats:
                if "categories" in d:
                    msg = (
                        f"{source}: class {c['name']!r} has category {cat!r}, "
                        f"which is not in categories {cats}"
                    )
                    raise LabelSpecError(msg)
                cats.append(cat)
            if i < given_cats and class_cats[i] != cats.index(cat):  # given two ways
                msg = (
                    f"{source}: class {c['name']!r} has category {cat!r}, but class_categories "
                    f"[{i}] says {cats[class_cats[i]] if 0 <= class_cats[i] < len(cats) else class_cats[i]!r}; "
                    "give categories one way"
                )
                raise LabelSpecError(msg)
            class_cats.extend([-1] * (i + 1 - len(class_cats)))  # -1: no category given
            class_cats[i] = cats.index(cat)
    if missing := [names[i] for i, g in enumerate(class_cats) if g == -1]:
        msg = f"{source}: class(es) {missing} have no category; give every class a category"
        raise LabelSpecError(msg)
    raw = read_raw_entries(d.get("raw", []), names, cats, source)
    sizes = read_instance_sizes(d.get("instance_sizes", {}), names, source)
    ignore = int_list(d.get("ignore", []), source, "ignore", "ignore value (e.g. 255)")
    if colors and None in colors:  # a silent (0, 0, 0) would claim black pixels
        missing = [names[j] for j, col in enumerate(colors) if col is None]
        msg = (
            f"{source}: class(es) {missing[:5]} have no 'color' while others have one; "
            "give every class a colour, or none (colour masks need every class's colour)"
        )
        raise LabelSpecError(msg)
    return {"name": name, "classes": names, "ignore": ignore,
            "colors": tuple(colors) if colors else None, "categories": cats,
            "class_categories": class_cats, "raw": raw, "instance_sizes": sizes}  # fmt: skip
