"""Render a comparison-gate document (:func:`segiou.stats.compare_states`) as text or Markdown.

Renders the JSON-safe document only (``segiou.comparison`` version 1); no statistics here.
"""

from __future__ import annotations

from typing import Any

from segiou.report.document import few_units_warning
from segiou.report.markdown import md_escape as _md

__all__ = ["render_comparison_markdown", "render_comparison_text", "verdict_headline"]


def _pts(x: float | None, signed: bool = False) -> str:
    """Show a fraction in percentage points (``-`` when undefined)."""
    if x is None:
        return "-"
    return f"{100 * x:+.2f}" if signed else f"{100 * x:.2f}"


def _ci(iv: list[float] | None) -> str:
    return "-" if iv is None else f"[{100 * iv[0]:+.2f}, {100 * iv[1]:+.2f}]"


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.3g}"


def _unexpected(doc: dict[str, Any], mark: str, esc: Any = str) -> tuple[str, list[str]]:
    """Show the predicted pixels with an unexpected value, when either run has some.

    A line on the totals (marked with ``mark`` when more in the candidate fails), and one per
    class with more of its ground-truth pixels predicted so in the candidate (``esc`` escapes
    class names).
    """
    odd = doc.get("unexpected_pred")  # (absent from documents written before it)
    if not odd or not (odd["baseline"] or odd["candidate"]):
        return "", []
    total = (
        f"predicted pixels with an unexpected value (left out of every score): "
        f"{odd['baseline']:,} in the baseline, {odd['candidate']:,} in the candidate"
    )
    if odd["fails"] and odd["candidate"] > odd["baseline"]:  # (not when a class alone fails)
        total += mark
    classes = [  # ("classes": absent from documents written before it)
        f"on ground truth of class {esc(repr(c['name']))}: {c['baseline']:,} in the baseline, "
        f"{c['candidate']:,} in the candidate{mark}"
        for c in odd.get("classes", ())
        if c["fails"]
    ]
    return total, classes


#: Classes named in the headline, and in the warning, before "and N more".
_HEADLINE_CLASSES, _NOTE_CLASSES = 3, 10


def verdict_headline(doc: dict[str, Any], esc: Any = str) -> tuple[str, list[str]]:
    """Return the headline word and the no-verdict notes (empty when the test could decide).

    ``NO VERDICT`` instead of ``PASS`` when no p-value could go below alpha (too few units
    differ); ``PASS on mIoU, NO VERDICT on classes`` when mIoU could be decided but no class
    could (the correction over the classes keeps every adjusted p-value at or above alpha);
    ``PASS, NO VERDICT on class 'x'`` (or ``on N classes: ...``) when some classes could be
    decided but others whose IoU changed could not (``undecided_classes``), so that a bare
    PASS never stands for a class that moved unchecked. A failure by another rule stays
    ``FAIL``, with the notes. ``esc`` escapes class names (Markdown).
    """
    note = doc.get("no_verdict_reason")  # (absent from documents written before it)
    # (the classes' note only when mIoU could be decided: else it says the same, and more)
    classes = doc.get("no_class_verdict_reason") if note is None else None
    notes = [n for n in (note, classes) if n is not None]
    moved = doc.get("undecided_classes") or []  # (absent from documents written before it)
    if moved:
        notes.append(_undecided_note(doc, moved, esc))
    if doc["failed"]:
        return "FAIL", notes
    if note is not None:
        return "NO VERDICT", notes
    if classes is not None:
        return "PASS on mIoU, NO VERDICT on classes", notes
    if moved:
        return f"PASS, NO VERDICT on {_named(moved, _HEADLINE_CLASSES, esc)}", notes
    return "PASS", notes


def _named(rows: list[dict[str, Any]], most: int, esc: Any) -> str:
    """``class 'a'``, or ``3 classes: 'a', 'b', 'c'``, or ``9 classes: 'a', ... and 6 more``."""
    names = [esc(repr(str(c["name"]))) for c in rows[:most]]
    if len(rows) == 1:
        return f"class {names[0]}"
    more = f" and {len(rows) - most} more" if len(rows) > most else ""
    return f"{len(rows)} classes: {', '.join(names)}{more}"


def _undecided_note(doc: dict[str, Any], rows: list[dict[str, Any]], esc: Any) -> str:
    """Say which classes changed without any p-value they can get being below alpha."""
    test = doc["test"]
    what = "images" if test["unit"] == "image" else "groups"
    after = " after Holm's correction" if test["correction"] == "holm" else ""
    each = [
        f"{esc(repr(str(c['name'])))} {_pts(c['delta'], True)} points (differs in "
        f"{c['differing_units']} {what}; smallest p-value {_p(c['smallest_p_adjusted'])})"
        for c in rows[:_NOTE_CLASSES]
    ]
    more = f"; and {len(rows) - _NOTE_CLASSES} more" if len(rows) > _NOTE_CLASSES else ""
    one = len(rows) == 1
    it, its, change = ("it", "its", "this change") if one else ("they", "their", "these changes")
    return (
        f"no verdict on {len(rows)} {'class' if one else 'classes'} whose IoU changed: "
        f"{'; '.join(each)}{more}. No p-value {it} can get{after} is below alpha "
        f"{test['alpha']}: the gate cannot tell {change} from chance, whatever {its} size "
        f"(compare more {what})"
    )


def _header(doc: dict[str, Any], baseline: str, candidate: str, esc: Any = str) -> list[str]:
    """Say what was compared, and how: the test, the intervals (``esc`` escapes user names)."""
    im, bs = doc["images"], doc["bootstrap"]
    shared = f"{im['shared']:,} shared images"
    if im["baseline_only"] or im["candidate_only"]:
        shared += (
            f" ({im['baseline_only']:,} only in the baseline and {im['candidate_only']:,} only "
            "in the candidate were left out, --shared-images)"
        )
    corr = "Holm-adjusted" if bs["correction"] == "holm" else "not adjusted"
    unit = bs["unit"]
    units = "images" if unit == "image" else f"groups ({esc(unit.partition(':')[2])})"
    first = (
        f"candidate {esc(candidate)} vs baseline {esc(baseline)} on {shared}; labels "
        f"{esc(doc['labels'])}, preset {esc(doc['preset'])}"
    )
    test = doc.get("test")  # (absent from documents written before the swap test)
    if test is None:
        return [first, (
            f"{bs['method']} over {bs['units']:,} {units}, {bs['resamples']:,} resamples, "
            f"seed {bs['seed']}; alpha {bs['alpha']}; per-class p-values {corr}; deltas in points "
            f"(candidate - baseline), {100 * bs['level']:.0f}% intervals"
        )]  # fmt: skip
    swaps = _swaps(doc, "images" if unit == "image" else "groups")
    return [
        first,
        (
            f"p-values: {test['method']} over {test['units']:,} {units} (the runs differ in "
            f"{test['differing_units']:,}), {swaps}; alpha {test['alpha']}; per-class p-values "
            f"{corr}"
        ),
        (
            f"intervals: {bs['method']}, {bs['resamples']:,} resamples, seed {bs['seed']}; "
            f"deltas in points (candidate - baseline), {100 * bs['level']:.0f}% intervals"
        ),
        *_interval_lines(bs),
    ]


def _swaps(doc: dict[str, Any], what: str) -> str:
    """Say which swaps the p-values are over: all (exact), random ones, or each row's mode.

    A class's swaps are enumerated over the units where it differs (the others change nothing
    of it) while mIoU's may be drawn; documents written before rows had their own ``exact``
    say the test's mode only.
    """
    test = doc["test"]
    if test["exact"]:
        return f"all {test['swaps']:,} swaps (exact)"
    drawn_swaps = f"{test.get('random_swaps', test['swaps']):,} random swaps, seed {test['seed']}"
    rows = [c for c in doc["classes"] if "exact" in c and c["p_value"] is not None]
    drawn = sum(not c["exact"] for c in rows)
    miou_exact = doc["miou"].get("exact", False)
    if not rows or (drawn == len(rows) and not miou_exact):
        return drawn_swaps
    miou = f"all {test['swaps']:,} swaps (exact)" if miou_exact else drawn_swaps
    again = drawn_swaps if miou_exact else "the same random swaps"
    each = f"every swap of the {what} where each differs"
    if not drawn:
        classes = f"exact ({each})"
    elif drawn == len(rows):
        classes = again
    else:
        classes = f"exact for {len(rows) - drawn} ({each}), {again} for {drawn}"
    return f"mIoU: {miou}; classes: {classes}"


def _interval_lines(bs: dict[str, Any]) -> list[str]:
    """Why some intervals are undefined, and a warning when few units were resampled."""
    few = few_units_warning(bs.get("units"), bs["unit"])
    return [f"{prefix}: {line}" for prefix, line in (("note", bs.get("note")), ("warning", few))
            if line]  # fmt: skip


def render_comparison_text(
    doc: dict[str, Any], *, baseline: str = "baseline", candidate: str = "candidate"
) -> str:
    """Render the gate's verdict and tables as plain text.

    Parameters
    ----------
    doc : dict
        :meth:`segiou.stats.PairedComparison.to_dict`.
    baseline, candidate : str
        How to name the two runs (e.g. their files).

    Returns
    -------
    str
        The verdict (``PASS``, ``FAIL``, or ``NO VERDICT`` with a warning line when too few
        images or groups differ for any drop to be significant; ``PASS on mIoU, NO VERDICT on
        classes`` with a warning when no class's adjusted p-value could go below alpha;
        ``PASS, NO VERDICT on class 'x'`` when some could, but a class whose IoU changed could
        not; a warning names every such class, whatever the verdict), mIoU,
        every class, the predicted pixels with an unexpected value (when
        either run has some; those of each class with more in the candidate), and the reasons
        of a failure.
    """
    word, notes = verdict_headline(doc)
    lines = [f"segiou compare: {word}", *(f"warning: {n}" for n in notes)]
    lines += _header(doc, baseline, candidate)
    head = f"{'':24s} {'baseline':>9s} {'candidate':>9s} {'delta':>8s} {'interval':>18s} {'p':>8s}  change"
    lines += ["", head]
    m = doc["miou"]
    lines.append(
        f"{'mIoU':24s} {_pts(m['baseline']):>9s} {_pts(m['candidate']):>9s} "
        f"{_pts(m['delta'], True):>8s} {_ci(m['interval']):>18s} {_p(m['p_value']):>8s}  "
        f"{m['change']}{'  FAILS' if m['fails'] else ''}"
    )
    for c in doc["classes"]:
        name = "".join(ch if ch.isprintable() else "?" for ch in str(c["name"]))[:24]
        lines.append(
            f"{name:24s} {_pts(c['baseline']):>9s} {_pts(c['candidate']):>9s} "
            f"{_pts(c['delta'], True):>8s} {_ci(c['interval']):>18s} {_p(c['p_adjusted']):>8s}  "
            f"{c['change']}{'  FAILS' if c['fails'] else ''}"
        )
    odd, by_class = _unexpected(doc, "  FAILS")
    if odd:
        lines += ["", odd, *(f"  {c}" for c in by_class)]
    if doc["reasons"]:
        lines += ["", "failed because:", *(f"  - {r}" for r in doc["reasons"])]
    return "\n".join(lines) + "\n"


def render_comparison_markdown(
    doc: dict[str, Any], *, baseline: str = "baseline", candidate: str = "candidate"
) -> str:
    """Render the gate's verdict as Markdown, ready to paste into a pull-request comment.

    Parameters
    ----------
    doc : dict
        :meth:`segiou.stats.PairedComparison.to_dict`.
    baseline, candidate : str
        How to name the two runs.

    Returns
    -------
    str
        A heading with the verdict (``NO VERDICT``, ``PASS on mIoU, NO VERDICT on
        classes`` or ``PASS, NO VERDICT on class 'x'``, and the warnings, as in the text), the
        mIoU row, the classes that changed significantly, fail, or changed with no verdict
        possible, the predicted pixels with an unexpected value (when either run has some; those of
        each class with more in the candidate), the reasons of a failure, and every class in a
        collapsed ``<details>`` table.
    """
    bs = doc["bootstrap"]
    pct = f"{100 * bs['level']:.0f}%"
    word, notes = verdict_headline(doc, _md)
    out = [f"### segiou gate: **{word}**", ""]
    for note in notes:
        out += [f"> **Warning:** {note}", ""]  # (segiou's own words; class names escaped)
    for line in _header(doc, baseline, candidate, _md):
        out += [line, ""]
    head = f"| | baseline | candidate | Δ (points) | {pct} interval of Δ | p | change |"
    rule = "|---|---:|---:|---:|---:|---:|---|"
    m = doc["miou"]
    out += [head, rule, (f"| **mIoU** | {_pts(m['baseline'])} | {_pts(m['candidate'])} | "
            f"{_pts(m['delta'], True)} | {_ci(m['interval'])} | {_p(m['p_value'])} | "
            f"{m['change']}{' (fails)' if m['fails'] else ''} |")]  # fmt: skip
    changed = [c for c in doc["classes"]
               if c["change"] in ("worse", "better", "no verdict") or c["fails"]]  # fmt: skip
    for c in changed:
        out.append(
            f"| {_md(c['name'])} | {_pts(c['baseline'])} | {_pts(c['candidate'])} | "
            f"{_pts(c['delta'], True)} | {_ci(c['interval'])} | {_p(c['p_adjusted'])} | "
            f"{c['change']}{' (fails)' if c['fails'] else ''} |"
        )
    odd, by_class = _unexpected(doc, " (fails)", _md)
    if odd:
        out += ["", odd, *[""] * bool(by_class), *(f"- {c}" for c in by_class)]
    if doc["reasons"]:
        out += ["", "**Failed because:**", "", *(f"- {_md(r)}" for r in doc["reasons"])]
    worse = sum(c["change"] == "worse" for c in doc["classes"])
    better = sum(c["change"] == "better" for c in doc["classes"])
    out += ["", (f"<details><summary>Every class: {worse} significantly worse, {better} "
            f"significantly better, {len(doc['classes']) - worse - better} other</summary>"), "",
            (f"| class | baseline | candidate | Δ (points) | {pct} interval of Δ | p | p adjusted "
            "| change |"), "|---|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for c in doc["classes"]:
        out.append(
            f"| {_md(c['name'])} | {_pts(c['baseline'])} | {_pts(c['candidate'])} | "
            f"{_pts(c['delta'], True)} | {_ci(c['interval'])} | {_p(c['p_value'])} | "
            f"{_p(c['p_adjusted'])} | {c['change']}{' (fails)' if c['fails'] else ''} |"
        )
    out += ["", "</details>", ""]
    return "\n".join(out)
