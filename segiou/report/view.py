"""What a saved state adds to a report, and the report itself (document + state).

The state's counts are only normalised, ranked and cut for display here (rows of the confusion
matrix divided by their ground-truth pixels; the largest off-diagonal cells; the images with the
lowest mIoU); each image's IoU and mIoU are :func:`segiou.results.image_scores`, under the
result's convention. No statistic is computed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from segiou._jsontext import loads
from segiou.errors import ResultDocumentError, UsageError
from segiou.report.document import HINT, ResultDoc

if TYPE_CHECKING:
    from segiou.confusion import ConfusionMatrix
    from segiou.conventions import Convention
    from segiou.results import Result

__all__ = [
    "ConfusedPair",
    "ImageScore",
    "Report",
    "StateView",
    "image_rule",
    "no_intervals_reason",
    "void_label",
]


def void_label(class_names: list[str]) -> str:
    """Name the void predictions (no evaluated class) so that no class name can be read as it.

    Parameters
    ----------
    class_names : list of str
        The classes (one may be called ``void``, or even ``(void)``).

    Returns
    -------
    str
        ``"(void)"``, with more parentheses while that is a class name.

    Examples
    --------
    >>> void_label(["road", "void"]), void_label(["(void)"])
    ('(void)', '((void))')
    """
    label = "(void)"
    while label in class_names:
        label = f"({label})"
    return label


_IMAGE_MEAN = {
    "present": "the classes present in it (TP+FP+FN > 0)",
    "gt": "the classes with ground-truth pixels in it (a class only predicted there is left out)",
    "all": "every class (a class absent from it scores 0)",
}


def image_rule(conv: Convention) -> str:
    """Say how an image's mIoU is averaged under ``conv`` (one sentence, no final period).

    Parameters
    ----------
    conv : Convention
        The result's convention.

    Returns
    -------
    str

    Examples
    --------
    >>> from segiou.conventions import get_convention
    >>> image_rule(get_convention("detectron2"))[:64]
    "An image's mIoU follows preset 'detectron2': it averages the cla"
    """
    return (
        f"An image's mIoU follows preset {conv.name!r}: it averages {_IMAGE_MEAN[conv.mean_over]}; "
        "dataset scores are never averages of these"
    )


@dataclass(frozen=True)
class ConfusedPair:
    """Ground-truth pixels of one class predicted as another (or void)."""

    gt: str
    pred: str
    pixels: int
    share: float  # of the ground-truth class's pixels


@dataclass(frozen=True)
class ImageScore:
    """One image's mIoU (under the result's convention) and its weakest class."""

    name: str
    miou: float
    weakest: str | None
    weakest_iou: float | None
    ignored: int


@dataclass(frozen=True)
class StateView:
    """What a saved state adds to a report: the confusion matrix and the per-image scores.

    Attributes
    ----------
    class_names : list of str
    counts : ndarray of int64, shape (K, K + 1)
        ``counts[gt, pred]``; the last column is void.
    row_share : ndarray of float, shape (K, K + 1)
        ``counts`` divided by each class's ground-truth pixels (``nan`` rows: no such pixel).
    pairs : list of ConfusedPair
        The largest off-diagonal cells (void included), largest first.
    image_names : list of str
    image_miou : ndarray of float, shape (n_images,)
        Each image's mIoU under the result's convention (:func:`segiou.results.image_scores`;
        ``nan``: no class averaged); empty when the state has no per-image rows.
    worst : list of ImageScore
        The images with the lowest ``image_miou``, lowest first; the weakest class of each is
        the one with the lowest IoU among the classes in the image its mIoU averages.
    per_image_note : str or None
        Why there are no per-image scores, when there are none.
    image_rule : str
        How ``image_miou`` is averaged, in words (:func:`image_rule`).
    """

    class_names: list[str]
    counts: np.ndarray
    row_share: np.ndarray
    pairs: list[ConfusedPair]
    image_names: list[str]
    image_miou: np.ndarray
    worst: list[ImageScore]
    per_image_note: str | None
    image_rule: str = ""

    @classmethod
    def from_state(cls, cm: ConfusionMatrix, *, top: int = 10,
                   preset: str | Convention = "segiou") -> StateView:  # fmt: skip
        """Read a state's counts and per-image rows for display.

        Parameters
        ----------
        cm : ConfusionMatrix
            The counts (per-image rows give the histogram and the worst images).
        top : int, default 10
            How many confused pairs and worst images to keep.
        preset : str or Convention, default "segiou"
            The result's convention: each image is scored under it.

        Returns
        -------
        StateView
        """
        from segiou.conventions import Convention, get_convention
        from segiou.results import image_scores

        conv = preset if isinstance(preset, Convention) else get_convention(preset)
        k = cm.num_classes
        names = list(cm.spec.classes)
        full = np.concatenate([cm.counts, cm.void[:, None]], axis=1)
        gt = full.sum(axis=1)
        share = np.divide(full, gt[:, None], out=np.full(full.shape, np.nan),
                          where=gt[:, None] > 0)  # fmt: skip
        off = full.copy()
        off[np.arange(k), np.arange(k)] = 0
        flat = np.argsort(-off, axis=None, kind="stable")[:top]
        pairs = [
            ConfusedPair(names[g], names[p] if p < k else void_label(names), int(off[g, p]),
                         float(share[g, p]))
            for g, p in (divmod(int(i), k + 1) for i in flat)
            if off[g, p] > 0
        ]  # fmt: skip
        note = None
        image_names: list[str] = []
        miou = np.zeros(0)
        worst: list[ImageScore] = []
        if not cm.per_image:
            note = "the state has no per-image rows (it was counted without per_image=True)"
        elif cm.n_images == 0:
            note = "the state counted no image"
        else:
            t = cm.images
            iou, miou = image_scores(t, preset=conv)
            # the weakest class: of the classes in the image that its mIoU averages
            weak = conv.averaged(t.tp, t.fp, t.fn) & ((t.tp + t.fp + t.fn) > 0) & ~np.isnan(iou)
            image_names = list(t.names)
            for i in [int(i) for i in np.argsort(miou, kind="stable") if not np.isnan(miou[i])]:
                if len(worst) == top:
                    break
                c = int(np.argmin(np.where(weak[i], iou[i], np.inf)))
                worst.append(ImageScore(image_names[i], float(miou[i]), names[c] if weak[i, c]
                                        else None, float(iou[i, c]) if weak[i, c] else None,
                                        int(t.ignored[i])))  # fmt: skip
        return cls(names, full, share, pairs, image_names, miou, worst, note, image_rule(conv))


def _convention(doc: ResultDoc) -> Convention:
    """Return the convention a document echoes.

    One that does not state its rules (a hand-made document) is taken as the preset of its
    name, else as segiou's averaging (over the classes present).
    """
    from segiou.conventions import PRESETS, Convention

    try:
        return Convention.from_dict(doc.convention)
    except (KeyError, TypeError, ValueError):
        return PRESETS.get(doc.preset) or Convention(doc.preset, "present", float("nan"), "")


def no_intervals_reason(cm: ConfusionMatrix) -> str | None:
    """Why ``cm`` cannot give bootstrap intervals, in words; ``None`` when it can.

    Parameters
    ----------
    cm : ConfusionMatrix
        A count state.

    Returns
    -------
    str or None
        E.g. ``"no intervals: they resample the state's images, and it counted no image"``:
        "run with --bootstrap" would not help such a state.
    """
    rows = cm.images.rows if cm.per_image and cm.n_images else None
    if rows is not None and rows.legacy is None:
        return None
    why = (
        "it has no per-image rows (it was counted without per_image=True)"
        if not cm.per_image else "it counted no image" if rows is None
        else "its per-image rows are of an old format (version 1: no per-image "
        "confusion entries)"
    )  # fmt: skip
    return f"no intervals: they resample the state's images, and {why}"


@dataclass(frozen=True)
class Report:
    """Everything a report shows: the result document, and the state's view when there is one.

    Build with :meth:`from_state`, :meth:`from_result` or :meth:`load`; render with
    :func:`~segiou.report.render_html`, :func:`~segiou.report.render_markdown`,
    :func:`~segiou.report.render_text`, :func:`~segiou.report.render_csv`, or
    :func:`~segiou.report.write_report`.

    Attributes
    ----------
    doc : ResultDoc
        The scores (and intervals and slices, when the document has them).
    state : StateView or None
        The confusion matrix and per-image scores (``None``: made from a result document).
    source : str
        What the report was made from, in words.
    intervals_note : str or None
        Why intervals asked for could not be made (e.g. a state without per-image rows).
    """

    doc: ResultDoc
    state: StateView | None
    source: str
    intervals_note: str | None = None

    @property
    def no_intervals(self) -> str:
        """Why the report has no intervals, in words (for a document without them)."""
        return self.intervals_note or (
            "no intervals (they come from --bootstrap on a saved state with per-image rows)"
        )

    @classmethod
    def from_state(cls, cm: ConfusionMatrix, *, preset: str = "segiou",
                   beta: float | None = None, top: int = 10, source: str = "a count state",
                   bootstrap: int = 0, seed: int = 0) -> Report:  # fmt: skip
        """Evaluate a state with :func:`segiou.evaluate` and make its report.

        Parameters
        ----------
        cm : ConfusionMatrix
            The counts.
        preset : str, default "segiou"
            Averaging convention (see :data:`segiou.PRESETS`).
        beta : float, optional
            Also report F-beta.
        top : int, default 10
            Confused pairs and worst images to list.
        source : str
            What to call the input in the report.
        bootstrap : int, default 0
            Resamples of images for the intervals (:func:`segiou.stats.evaluate_with_intervals`)
            when the state keeps per-image counts (format 2); 0: none.
        seed : int, default 0
            Seed of the resamples.

        Returns
        -------
        Report
        """
        from segiou.results import evaluate

        note = no_intervals_reason(cm)
        if bootstrap and note is None:
            from segiou.stats import evaluate_with_intervals

            result = evaluate_with_intervals(cm, preset=preset, beta=beta, resamples=bootstrap,
                                             seed=seed)  # fmt: skip
        else:
            result = evaluate(cm, preset=preset, beta=beta)
        report = cls.from_result(result, cm=cm, top=top, source=source)
        return cls(report.doc, report.state, report.source, note)

    @classmethod
    def from_result(cls, result: Result | Mapping[str, Any], *, cm: ConfusionMatrix | None = None,
                    top: int = 10, source: str = "a result document") -> Report:  # fmt: skip
        """Make the report of a result (or its document), with its state when there is one.

        Parameters
        ----------
        result : Result or dict
            What :func:`segiou.evaluate` returned, or its :meth:`~segiou.Result.to_dict`
            document (version 1 or 2).
        cm : ConfusionMatrix, optional
            The state the result was evaluated from: adds the confusion heatmap, the confused
            pairs, the per-image histogram and the worst images.
        top : int, default 10
            Confused pairs and worst images to list.
        source : str
            What to call the input in the report.

        Returns
        -------
        Report

        Raises
        ------
        ResultDocumentError
            The document is malformed (see :meth:`ResultDoc.read`).
        UsageError
            ``cm`` is not the state the result was evaluated from (other classes or counts),
            or ``top`` is below 1.
        """
        if top < 1:
            msg = f"top={top!r}: list at least one confused pair and worst image"
            raise UsageError(msg)
        data = result if isinstance(result, Mapping) else result.to_dict()
        doc = ResultDoc.read(data, where=source)
        state = None
        if cm is not None:
            conv = result.convention if not isinstance(result, Mapping) else _convention(doc)
            state = StateView.from_state(cm, top=top, preset=conv)
            tp = [c.tp for c in doc.classes]
            if state.class_names != [c.name for c in doc.classes] or tp != [
                int(state.counts[i, i]) for i in range(len(tp))
            ]:
                msg = (
                    f"{source}: the state given with it has other classes or counts than the "
                    "result; pass the state the result was evaluated from"
                )
                raise UsageError(msg)
        return cls(doc, state, source)

    @classmethod
    def load(cls, path: str | Path, *, preset: str | None = None, beta: float | None = None,
             top: int = 10, bootstrap: int | None = None, seed: int | None = None,
             default_bootstrap: int = 0) -> Report:  # fmt: skip
        """Make the report of a saved state or of a result JSON file.

        Parameters
        ----------
        path : str or Path
            A state (``segiou.confusion``, versions 1 to 3; :meth:`ConfusionMatrix.save`) or
            a result document (``segiou.result``, versions 1 to 3).
        preset : str, optional
            For a state: the averaging convention (default ``"segiou"``).
        beta : float, optional
            For a state: also report F-beta.
        top : int, default 10
            Confused pairs and worst images to list.
        bootstrap, seed : int, optional
            For a state: intervals, as for :meth:`from_state` (``None``: ``default_bootstrap``
            resamples, seed 0).
        default_bootstrap : int, default 0
            For a state: the resamples when ``bootstrap`` is not given (``segiou report``
            passes 1000).

        Returns
        -------
        Report

        Raises
        ------
        ResultDocumentError
            The file cannot be read, is not JSON, or is neither a state nor a result document.
        CheckpointError
            A malformed state.
        UsageError
            ``preset``, ``beta``, ``bootstrap`` or ``seed`` given for a result document (it was
            evaluated already).
        """
        from segiou.confusion import ConfusionMatrix

        p = Path(path)
        try:
            data = loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError as err:
            msg = f"report input {str(p)!r} does not exist; {HINT}"
            raise ResultDocumentError(msg) from err
        except (OSError, ValueError) as err:
            msg = f"report input {str(p)!r} is not readable JSON ({err}); {HINT}"
            raise ResultDocumentError(msg) from err
        kind = data.get("format") if isinstance(data, dict) else None
        if kind == "segiou.confusion":
            cm = ConfusionMatrix.from_dict(data, source=str(p))
            how = preset or "segiou"
            b = default_bootstrap if bootstrap is None else bootstrap
            return cls.from_state(cm, preset=how, beta=beta, top=top, bootstrap=b,
                                  seed=seed or 0,
                                  source=f"state {p.name} (evaluated with preset {how!r})")  # fmt: skip
        if kind != "segiou.result":
            shown = "no format field" if kind is None else f"format {kind!r}"
            msg = (
                f"report input {str(p)!r} has {shown}: it is neither a saved state "
                f"('segiou.confusion') nor a result document ('segiou.result'); {HINT}"
            )
            raise ResultDocumentError(msg)
        given = {"--preset": preset, "--beta": beta, "--bootstrap": bootstrap,
                 "--bootstrap-seed": seed}  # fmt: skip
        what = next((opt for opt, value in given.items() if value is not None), None)
        if what is not None:
            msg = (
                f"{what} applies to a saved state; {str(p)!r} is a result document, evaluated "
                "already (its preset and intervals are in the report): leave it out, or pass "
                "the state"
            )
            raise UsageError(msg)
        return cls.from_result(data, top=top, source=f"result {p.name}")

    def missing_parts(self) -> list[str]:
        """Say which parts are left out, and why (shown in every report)."""
        if self.state is None:
            note = (
                "the confusion heatmap, the confused pairs, the per-image mIoU histogram and "
                "the worst images need the saved state: make the report from it (segiou "
                "report STATE.json, written by segiou eval --state) or with segiou eval --report"
            )
            return [note]
        notes = [self.intervals_note] if self.intervals_note else []
        if self.state.per_image_note:
            notes.insert(0, "no per-image mIoU histogram and no worst images: "
                         f"{self.state.per_image_note}")  # fmt: skip
        return notes
