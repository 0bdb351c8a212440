"""Chunks absent from a Zarr store and read as the fill value, per image, of one side.

Kept per *named* image (keyed by name: a merge that counts an image once drops its count with
it) and per *label* (``#0``, ``key/0``, a store's ``000000``: summed, never dropped), apart: a
label can be the same string as another image's name. See :mod:`segiou._extras`, which keeps
one :class:`ChunkCounts` for the ground truth and one for the predictions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from segiou.errors import CheckpointError, CountOverflowError

__all__ = ["ChunkCounts"]

_INT64_MAX = 2**63 - 1


@dataclass
class ChunkCounts:
    """Absent chunks of one side (ground truth or predictions): per named image, per label.

    A named image's count is dropped with the image by a merge that counts it once; a label's
    (a string that may equal another image's name) is summed, never dropped.
    """

    named: dict[str, int] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)

    @property
    def shown(self) -> dict[str, int]:
        """Absent chunks per image as shown: a name, or a label (summed where the strings meet)."""
        out = dict(self.named)
        for label, n in self.labels.items():
            out[label] = out.get(label, 0) + n
        return out

    def __bool__(self) -> bool:
        return bool(self.named or self.labels)

    def add(self, labels: Sequence[str], counts: Sequence[int], named: bool) -> None:
        """Add ``counts`` (one per image) to the images ``labels`` (names when ``named``)."""
        kept = self.named if named else self.labels
        for name, n in zip(labels, counts, strict=True):
            if n:
                kept[name] = kept.get(name, 0) + int(n)

    def keep_named(self, names: set[str]) -> None:
        """Take what is kept for a string not in ``names`` as a label's (read from a state)."""
        for n in [n for n in self.named if n not in names]:  # a label's (or stray)
            self.labels[n] = self.labels.get(n, 0) + self.named.pop(n)

    def merged(self, other: ChunkCounts, drop: set[str], *, larger: bool = False) -> ChunkCounts:
        """Both sides; ``other``'s named images in ``drop`` left out (counted here).

        With ``larger``, an image in ``drop`` keeps the larger of its two counts instead (the
        same values read from two stores written apart, or by a writer that did not count
        them: either order gives the same).

        Raises
        ------
        CountOverflowError
            A sum past ``2**63 - 1`` (a state holds no more chunks than pixels: altered).
        """
        out = ChunkCounts(dict(self.named), dict(self.labels))
        for name, n in other.named.items():
            if name not in drop:  # (a named image is on one side, or dropped: counted once)
                out.named[name] = out.named.get(name, 0) + n
            elif larger:
                out.named[name] = max(out.named.get(name, 0), n)
        for label, n in other.labels.items():  # labels never identify an image: summed
            out.labels[label] = out.labels.get(label, 0) + n
        for kept in (out.named, out.labels):
            if kept and (top := max(kept.values())) > _INT64_MAX:
                msg = (
                    f"merging would make {top:,} absent chunks of one image, more than 2**63 - 1; "
                    "nothing was merged (a state holds no more of them than pixels: one side "
                    "was altered)"
                )
                raise CountOverflowError(msg)
        return out

    def to_fields(self, names: Iterable[str]) -> tuple[dict[str, int], dict[str, int]]:
        """Return the state's shown counts and, where a label is also a name, the label's part.

        ``names``: the state's given names; a reader takes the rest of a shown count as the
        named image's.
        """
        both = set(names) | set(self.named)
        shared = {n: c for n, c in self.labels.items() if n in both}
        return dict(sorted(self.shown.items())), dict(sorted(shared.items()))

    @classmethod
    def from_fields(cls, shown: object, labelled: object, what: str, source: str) -> ChunkCounts:
        """Read :meth:`to_fields` back (``what``: the shown field's name), checking every count.

        Raises
        ------
        CheckpointError
            A malformed field, named.
        """
        at = f"{source}: " if source else ""
        for name, m in ((what, shown), (f"{what}_labels", labelled)):
            if not isinstance(m, Mapping):
                msg = f"{at}field {name!r} must map image names to chunk counts"
                raise CheckpointError(msg)
            for image, n in m.items():
                if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                    msg = f"{at}field {name!r} holds {n!r} for {image!r}; expected a count"
                    raise CheckpointError(msg)
        shown, labelled = cast(Mapping[str, int], shown), cast(Mapping[str, int], labelled)
        out = cls()
        for image, n in labelled.items():
            if n > shown.get(image, -1):
                msg = (
                    f"{at}field '{what}_labels' gives {image!r} {n} absent chunk(s), "
                    f"more than {what!r} shows for it; the file was altered"
                )
                raise CheckpointError(msg)
            if n:
                out.labels[str(image)] = n
        for image, n in shown.items():  # the rest: a named image's (or a label's: keep_named)
            if rest := n - labelled.get(image, 0):
                out.named[str(image)] = rest
        return out
