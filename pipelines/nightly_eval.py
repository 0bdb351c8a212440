"""Nightly model evaluation: evaluate, write a dated report folder, compare with a baseline.

Usage::

    python pipelines/nightly_eval.py pipelines/nightly.example.toml [--date YYYY-MM-DD]

Exit codes: 0 evaluated and no regression; 1 a regression against the baseline; 2 bad
configuration or input (the message says what to fix); 3 the run failed for another reason
(a crashed cluster: the traceback is printed; a full disk: the message says so). Nothing but a
regression exits 1, so a scheduler can tell "the model got worse" from "the job broke". The
dated folder is created only once the evaluation succeeded. Writes into ``<report_dir>/<date>/``:
``report.json`` (segiou.result version 3, with bootstrap intervals), ``report.html`` (one
self-contained page with the tables and plots; needs ``segiou[report]``), ``report.txt``
(tables), ``per_image.csv``, ``state.json`` (the count state, to merge or re-score later) and,
with a baseline, ``comparison.json`` (fixed tolerances) and, with a baseline state, ``gate.json``
and ``gate.md`` (the paired bootstrap gate, ready for a pull request). The fixed tolerances
compare whole reports of one test set: a baseline report of other ground truth (a test set
that grew; with a baseline state, also other image names, or other ground-truth pixels in an
image of the same name, when the whole-report totals match) is refused (exit 2), unless
``[gate] shared_images = true``: then both the fixed
tolerances and the gate compare the images both runs share (``comparison.json`` says so in its
``scope``; the baseline's side comes from its state; a shared image whose ground truth changed
is refused, exit 2). A run that shares no image name with the baseline state (images renamed,
or another test set) is refused (exit 2) with or without it: nothing can be paired, and a
whole-report score of another test set moves without the model changing. ``comparison.json``
and ``gate.*`` are written once both comparisons are made: a run refused (exit 2) writes
neither. A regression is a drop
beyond a fixed tolerance, or a drop the gate finds both significant and beyond its threshold;
in both comparisons also a score the baseline had that is undefined now (a class whose every
pixel was predicted as an unexpected value under ``on_unexpected = "count"``), more
predicted pixels with an unexpected value than the baseline (left out of every score), and any
class with more of its ground-truth pixels predicted so than in the baseline (whatever the
total did; for the fixed tolerances, on the same ground truth: fewer of its pixels counted).
``--update-baseline`` copies the new report (and state) over the baseline after a run without
regression.
"""

from __future__ import annotations

import argparse
import datetime as dt
import errno
import json
import math
import re
import sys
import tomllib
import traceback
from pathlib import Path
from typing import Any

from segiou import PRESETS, evaluate
from segiou.cli.compare import load_state
from segiou.cli.options import labels_arg
from segiou.cli.scheduler import scheduler_context
from segiou.compare import (
    check_comparable,
    check_report,
    compare_reports,
    ground_truth_difference,
)
from segiou.errors import OutputError, SegiouError, UsageError
from segiou.outputs import check_outputs, write_atomic
from segiou.parallel import count_stores
from segiou.report import (
    Report,
    render_analysis,
    render_text,
    require_plotting,
    write_per_image_csv,
    write_report,
)
from segiou.report.gate import render_comparison_markdown, verdict_headline
from segiou.stats import (
    compare_states,
    evaluate_with_intervals,
    image_set_change,
    shared_image_reports,
)

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_FAILED = 0, 1, 2, 3

#: Summary metrics of a segiou result report a baseline can guard (``[baseline] max_drop``).
_METRICS = {"miou", "fwiou", "micro_iou", "mdice", "mprecision", "pixel_accuracy",
            "mean_accuracy", "kappa", "category_miou", "mfbeta"}  # fmt: skip
_TABLES = {"eval", "report", "baseline", "gate"}
_BASELINE_KEYS = {"path", "state", "max_drop", "max_class_drop"}
_REPORT_KEYS = {"dir"}
_EVAL_KEYS = {"gt", "pred", "labels", "preset", "beta", "scheduler", "gt_ids", "pred_ids", "ignore",
              "missing_pred", "missing_gt_chunks", "missing_pred_chunks", "on_unexpected",
              "split_every", "layout", "bootstrap", "bootstrap_seed", "boundary"}  # fmt: skip
#: [gate] keys and their defaults (the paired bootstrap gate against [baseline] state).
_GATE_DEFAULTS: dict[str, Any] = {"alpha": 0.05, "max_miou_drop": 0.005, "max_class_drop": 0.02,
                                  "resamples": 1000, "seed": 0, "shared_images": False,
                                  "correction": "holm"}  # fmt: skip


def load_config(path: Path) -> dict[str, Any]:
    """Read and validate the TOML configuration (see ``nightly.example.toml``)."""
    try:
        cfg = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        msg = f"config {str(path)!r} cannot be read: {err}"
        raise UsageError(msg) from err
    ev = cfg.get("eval")
    if not isinstance(ev, dict) or "gt" not in ev or "pred" not in ev:
        msg = f"config {str(path)!r}: an [eval] table with 'gt' and 'pred' is required"
        raise UsageError(msg)
    if unknown := sorted(set(cfg) - _TABLES):  # a misspelt [baseline] turned every check off
        msg = f"config {str(path)!r}: unknown table(s) {unknown}; known: {sorted(_TABLES)}"
        raise UsageError(msg)
    if unknown := sorted(set(ev) - _EVAL_KEYS):
        msg = f"config {str(path)!r}: unknown [eval] key(s) {unknown}; known: {sorted(_EVAL_KEYS)}"
        raise UsageError(msg)
    _check_eval(ev, str(path))
    _check_tables(cfg, str(path))
    beta = ev.get("beta")
    if beta is not None and (
        isinstance(beta, bool) or not isinstance(beta, int | float) or not 0 < beta < math.inf
    ):
        msg = f"config {str(path)!r}: [eval] beta = {beta!r} must be a number > 0 (1 = F1)"
        raise UsageError(msg)
    base = path.parent
    for key in ("gt", "pred"):  # relative paths are relative to the config file
        if "://" not in ev[key] and not Path(ev[key]).is_absolute():
            ev[key] = str(base / ev[key])
    labels = str(ev.get("labels", "cityscapes"))
    if not Path(labels).is_absolute() and (base / labels).is_file():  # a spec file next to it
        ev["labels"] = str(base / labels)
    report = cfg.setdefault("report", {})
    report["dir"] = str(base / report.get("dir", "reports"))
    for key in ("path", "state"):
        if "baseline" in cfg and key in cfg["baseline"]:
            cfg["baseline"][key] = str(base / cfg["baseline"][key])
    return cfg


def _check_eval(ev: dict[str, Any], where: str) -> None:
    """Refuse [eval] values of the wrong type before evaluating (not after the whole count)."""
    for key in ("gt", "pred", "preset", "scheduler", "layout", "gt_ids", "pred_ids",
                "on_unexpected", "missing_pred", "missing_gt_chunks",
                "missing_pred_chunks"):  # fmt: skip
        if key in ev and not isinstance(ev[key], str):
            msg = f"config {where!r}: [eval] {key} = {ev[key]!r} must be a string"
            raise UsageError(msg)
    for key, kinds, what in (("labels", (str, int), "a spec name, a spec file or a class count"),
                             ("bootstrap", (int,), "a whole number >= 0 (0: no intervals)"),
                             ("bootstrap_seed", (int,), "a whole number >= 0"),
                             ("split_every", (int,), "a whole number >= 2")):  # fmt: skip
        v = ev.get(key)
        low = {"bootstrap": 0, "bootstrap_seed": 0, "split_every": 2}.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, kinds)
                              or (low is not None and v < low)):  # fmt: skip
            msg = f"config {where!r}: [eval] {key} = {v!r} must be {what}"
            raise UsageError(msg)


def _check_tables(cfg: dict[str, Any], where: str) -> None:
    """Refuse unknown keys and wrong types in [report] and [baseline] before evaluating.

    A misspelt metric (``mIoU``) or key (``max_class_drops``) would otherwise turn a check off
    without a word.
    """

    def bad(msg: str) -> UsageError:
        return UsageError(f"config {where!r}: {msg}")

    for table, known in (("report", _REPORT_KEYS), ("baseline", _BASELINE_KEYS),
                         ("gate", set(_GATE_DEFAULTS))):  # fmt: skip
        t = cfg.get(table, {})
        if not isinstance(t, dict):
            msg = f"[{table}] must be a table"
            raise bad(msg)
        if unknown := sorted(set(t) - known):
            msg = f"unknown [{table}] key(s) {unknown}; known: {sorted(known)}"
            raise bad(msg)
    bl = cfg.get("baseline", {})
    drops = bl.get("max_drop", {})
    if not isinstance(drops, dict):
        msg = "[baseline] max_drop must be a table of metric = tolerance, e.g. { miou = 0.005 }"
        raise bad(msg)
    if unknown := sorted(set(drops) - _METRICS):
        msg = f"[baseline] max_drop names unknown metric(s) {unknown}; known: {sorted(_METRICS)}"
        raise bad(msg)
    gate = cfg.get("gate", {})
    if "gate" in cfg and "state" not in bl:  # (an empty [gate] too: it asks for the gate)
        msg = '[gate] needs the baseline\'s state: set [baseline] state = "...state.json"'
        raise bad(msg)
    if ({"max_drop", "max_class_drop"} & set(bl)) and "path" not in bl:
        msg = ('[baseline] max_drop and max_class_drop guard the baseline report: set [baseline] '
               'path = "...report.json" (the gate\'s thresholds are [gate] max_miou_drop and '
               "max_class_drop)")  # fmt: skip
        raise bad(msg)
    for name in ("alpha", "max_miou_drop", "max_class_drop"):
        v = gate.get(name, _GATE_DEFAULTS[name])
        want = "a number in (0, 1)" if name == "alpha" else "a finite number >= 0"
        number = not isinstance(v, bool) and isinstance(v, int | float)
        if not number or not (0 < v < 1 if name == "alpha" else 0 <= v < math.inf):
            msg = f"[gate] {name} = {v!r} must be {want}"
            raise bad(msg)
    if not isinstance(gate.get("shared_images", False), bool):
        msg = f"[gate] shared_images = {gate['shared_images']!r} must be true or false"
        raise bad(msg)
    if gate.get("correction", "holm") not in ("holm", "none"):
        msg = f'[gate] correction = {gate["correction"]!r} must be "holm" or "none"'
        raise bad(msg)
    for name in ("resamples", "seed"):
        v = gate.get(name, _GATE_DEFAULTS[name])
        low = 1 if name == "resamples" else 0
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            msg = f"[gate] {name} = {v!r} must be a whole number >= {low}"
            raise bad(msg)
    for key, table in (("dir", "report"), ("path", "baseline"), ("state", "baseline")):
        if key in cfg.get(table, {}) and not isinstance(cfg[table][key], str):
            msg = f"[{table}] {key} = {cfg[table][key]!r} must be a path (a string)"
            raise bad(msg)
    for name, tol in {**drops, "max_class_drop": bl.get("max_class_drop", 0.0)}.items():
        if isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 <= tol < math.inf:
            msg = f"[baseline] tolerance {name} = {tol!r} must be a finite number >= 0"
            raise bad(msg)


def run(cfg: dict[str, Any], *, date: str, update_baseline: bool, quiet: bool) -> int:
    ev = cfg["eval"]
    preset = ev.get("preset", "segiou")
    if preset not in PRESETS:  # refused before the evaluation, not after it
        msg = f"--preset {preset!r} is not a preset; choose one of {sorted(PRESETS)}"
        raise UsageError(msg)
    labels = ev.get("labels", "cityscapes")
    spec = labels if isinstance(labels, int) else labels_arg(str(labels))
    drops = cfg.get("baseline", {}).get("max_drop", {})
    if "mfbeta" in drops and ev.get("beta") is None:  # (known now, not after the evaluation)
        msg = "[baseline] max_drop guards mfbeta, which needs [eval] beta (F-beta's beta)"
        raise UsageError(msg)
    if "category_miou" in drops and (isinstance(spec, int) or not spec.categories):
        msg = (
            f"[baseline] max_drop guards category_miou, but the label spec {labels!r} has no "
            "categories"
        )
        raise UsageError(msg)
    out = Path(cfg["report"]["dir"]) / date
    base_cfg = cfg.get("baseline", {})
    base_path = Path(base_cfg["path"]) if "path" in base_cfg else None
    state_path = Path(base_cfg["state"]) if "state" in base_cfg else None
    for what, path in (("baseline", base_path), ("baseline state", state_path)):
        if path is not None and not path.is_file() and not update_baseline:
            msg = f"{what} {str(path)!r} does not exist; run once with --update-baseline"
            raise UsageError(msg)  # before the evaluation, not after it
    gate_cfg = _GATE_DEFAULTS | cfg.get("gate", {})
    # every output can be written, and none lies inside an input (before the evaluation)
    names = ("report.json", "report.html", "report.txt", "per_image.csv", "state.json",
             "comparison.json", "gate.json", "gate.md")  # fmt: skip
    require_plotting("the nightly report.html")  # refused before the evaluation, not after it
    files = {f"[report] {n}": out / n for n in names}
    if update_baseline and base_path is not None:
        files["[baseline] path"] = base_path
    if update_baseline and state_path is not None:
        files["[baseline] state"] = state_path
    check_outputs(files, inputs=[ev["gt"], ev["pred"]], create_parents=True)
    ours = {p.resolve() for p in files.values()}
    for what, path in (("[baseline] path", base_path), ("[baseline] state", state_path)):
        if path is not None and path.resolve() in ours and files.get(what) != path:
            msg = (
                f"{what} {str(path)!r} is one of this run's own outputs: it would be compared "
                "with itself and replaced by this run; point it at a baseline kept elsewhere"
            )
            raise UsageError(msg)
    baseline = _read_baseline(base_path)  # read before anything of this run is written
    with scheduler_context(ev.get("scheduler", "threads")) as scheduler:
        cm = count_stores(
            ev["gt"], ev["pred"], labels=spec, ignore_index=ev.get("ignore"),
            gt_ids=ev.get("gt_ids", "auto"), pred_ids=ev.get("pred_ids"),
            on_unexpected=ev.get("on_unexpected", "raise"),
            missing_pred=ev.get("missing_pred", "error"),
            missing_gt_chunks=ev.get("missing_gt_chunks", "auto"),
            missing_pred_chunks=ev.get("missing_pred_chunks", "auto"),
            layout=ev.get("layout") or "auto", split_every=ev.get("split_every", 8),
            boundary=ev.get("boundary"),
            scheduler=scheduler, progress=not quiet and sys.stderr.isatty(),
        )  # fmt: skip
    resamples = ev.get("bootstrap", 1000)
    if resamples:
        result = evaluate_with_intervals(cm, preset=preset, beta=ev.get("beta"),
                                         resamples=resamples, seed=ev.get("bootstrap_seed", 0))  # fmt: skip
    else:
        result = evaluate(cm, preset=preset, beta=ev.get("beta"))
    out.mkdir(parents=True, exist_ok=True)
    # a rerun on the same date replaces the folder's reports: none is left from the earlier run
    # (a comparison not made this time, for want of a baseline or because it was refused, would
    # otherwise sit beside this run's report)
    for stale in ("comparison.json", "gate.json", "gate.md"):
        (out / stale).unlink(missing_ok=True)
    report = result.to_dict()
    write_atomic(out / "report.json", json.dumps(report, indent=2) + "\n", what="report")
    view = Report.from_result(result, cm=cm, source=f"nightly run {date}")
    write_report(view, out / "report.html", what="HTML report")
    text = render_text(view) + "\n" + render_analysis(cm, preset=result.convention)
    write_atomic(out / "report.txt", text, what="text report")
    write_per_image_csv(cm, out / "per_image.csv", preset=result.convention)
    cm.save(out / "state.json")
    if not quiet:
        print(text)
    print(f"nightly: report written to {out}")
    regressions: list[str] = []
    # a missing baseline (only with --update-baseline: checked) is made from this run after
    # the one that exists was compared, and only without a regression: a baseline added to
    # the configuration later must not let a regressed run through (or become its baseline)
    missing = {p for p in (base_path, state_path) if p is not None and not p.is_file()}
    gated = state_path is not None and state_path not in missing
    base_state = load_state(str(state_path), "baseline state") if gated else None
    if baseline is not None and base_path is not None:
        check_comparable(report, baseline)  # another spec, counting or convention: exit 2
    # the states name their images: a test set whose totals match the baseline's can still be
    # another one (an image replaced by one with as many pixels of each class, images renamed)
    change = image_set_change(base_state, cm) if base_state is not None else None
    if change is not None and not change.shared:
        raise UsageError(_no_shared_image(change.detail))
    # comparison.json and gate.* are written once both comparisons are made: a run refused
    # (exit 2) leaves neither, so no file claims a regression the job did not report
    comparison: dict[str, Any] | None = None
    if baseline is not None and base_path is not None:
        other = ground_truth_difference(report, baseline)
        if other is None and change is not None:
            other = change.detail  # the totals match; the images do not
        if other is None:
            comp = compare_reports(report, baseline, max_drop=base_cfg.get("max_drop"),
                                   max_class_drop=base_cfg.get("max_class_drop", 0.02))  # fmt: skip
            comparison = comp.to_dict() | {"scope": {"images": "all"}}
            miou = comp.summary.get("miou")
            if miou:
                print(f"nightly: mIoU {miou[1]:.4f} vs baseline {miou[0]:.4f} ({miou[2]:+.4f})")
            regressions += comp.regressions
        elif gate_cfg["shared_images"] and base_state is not None:
            # whole-report scores of two test sets differ without the model changing: the
            # fixed tolerances compare both runs on the images they share (a shared image
            # whose ground truth changed is refused: exit 2)
            comparison, lines = _compare_shared(base_state, cm, other, preset=preset,
                                                beta=ev.get("beta"), base_cfg=base_cfg)  # fmt: skip
            regressions += lines
        else:
            edited = change is not None and change.edited
            raise UsageError(_other_ground_truth(other, base_path, gate_cfg["shared_images"],
                                                 edited=edited))  # fmt: skip
    elif change is not None and not gate_cfg["shared_images"] and not change.edited:
        msg = (
            f"the runs scored different images ({change.detail}): the gate compares the same "
            "images. Compare the same images, make a new baseline (remove the baseline state "
            "and run once with --update-baseline), or gate on the "
            f"{change.shared} images both runs share: [gate] shared_images = true"
        )
        raise UsageError(msg)
    gate_doc: tuple[Any, dict[str, Any]] | None = None
    if base_state is not None:  # the paired bootstrap gate
        gate = compare_states(
            base_state, cm, preset=preset,
            resamples=gate_cfg["resamples"], seed=gate_cfg["seed"], alpha=gate_cfg["alpha"],
            max_miou_drop=gate_cfg["max_miou_drop"], max_class_drop=gate_cfg["max_class_drop"],
            shared_images=gate_cfg["shared_images"], correction=gate_cfg["correction"],
        )  # fmt: skip
        gate_doc = gate, gate.to_dict()
    if comparison is not None:
        write_atomic(out / "comparison.json", json.dumps(comparison, indent=2) + "\n",
                     what="comparison")  # fmt: skip
    if gate_doc is not None:
        gate, doc = gate_doc
        write_atomic(out / "gate.json", json.dumps(doc, indent=2, allow_nan=False) + "\n",
                     what="gate")  # fmt: skip
        md = render_comparison_markdown(doc, baseline=str(state_path),
                                        candidate=str(out / "state.json"))  # fmt: skip
        write_atomic(out / "gate.md", md, what="gate")
        m = doc["miou"]
        delta = "undefined" if m["delta"] is None else f"{m['delta']:+.4f}"
        p = "undefined" if m["p_value"] is None else f"{m['p_value']:.3g}"
        # the compare command's headline (PASS, FAIL, NO VERDICT, PASS on mIoU, NO VERDICT on
        # classes, PASS, NO VERDICT on class 'x'), with "pass" in lower case as before
        word, notes = verdict_headline(doc)
        verdict = "pass" + word[4:] if word.startswith("PASS") else word
        print(f"nightly: gate {verdict}: mIoU delta {delta}, p = {p} "
              f"({doc['images']['shared']} images)")  # fmt: skip
        for note in notes:
            print(f"nightly: warning: {note}", file=sys.stderr)
        regressions += [f"gate: {r}" for r in gate.reasons]
    if regressions:
        print("nightly: REGRESSION\n  " + "\n  ".join(regressions), file=sys.stderr)
        return EXIT_REGRESSION
    if update_baseline:
        for what, path, src in (("baseline", base_path, "report.json"),
                                ("baseline state", state_path, "state.json")):  # fmt: skip
            if path is not None:
                write_atomic(path, (out / src).read_bytes(), what=what)
                done = "created from this run (none yet)" if path in missing else "updated"
                print(f"nightly: {what} {path} {done}")
    return EXIT_OK


def _compare_shared(
    base_state: Any, cm: Any, other: str, *, preset: str, beta: float | None,
    base_cfg: dict[str, Any],
) -> tuple[dict[str, Any], list[str]]:  # fmt: skip
    """The fixed tolerances on the images both runs share (the test set changed).

    Both runs are scored from their per-image counts of the shared images (the baseline's from
    its state) and compared on that one ground truth with :func:`compare_reports`. Returns
    the comparison for ``comparison.json``, with a ``scope`` saying what it covers, and its
    regressions as lines.
    """
    shared = shared_image_reports(base_state, cm, preset=preset, beta=beta)
    comp = compare_reports(shared.current, shared.baseline, max_drop=base_cfg.get("max_drop"),
                           max_class_drop=base_cfg.get("max_class_drop", 0.02))  # fmt: skip
    n = shared.images["shared"]
    scope = {"images": "shared", "test_set_change": other,
             "baseline": "the baseline state's counts of the shared images"} | shared.images  # fmt: skip
    print(f"nightly: the test set changed since the baseline report ({other}): the fixed "
          f"tolerances compare the {n} images both runs share ([gate] shared_images = true; "
          f"{shared.images['current_only']} new, {shared.images['baseline_only']} gone)")  # fmt: skip
    miou = comp.summary.get("miou")
    if miou:
        print(f"nightly: mIoU {miou[1]:.4f} vs baseline {miou[0]:.4f} ({miou[2]:+.4f}) on the "
              f"{n} shared images")  # fmt: skip
    lines = [f"on the {n} shared images: {r}" for r in comp.regressions]
    return comp.to_dict() | {"scope": scope}, lines


def _no_shared_image(detail: str) -> str:
    """Say why runs that share no image name are not compared at all, and what to do."""
    return (
        f"the runs share no image ({detail}): neither the fixed tolerances nor the gate can "
        "compare them (a whole-report score of another test set moves without the model "
        "changing, and images are paired by name). If the images were only renamed, restore "
        "their names; after changing the test set, make a new baseline (remove the baseline "
        "report and state and run once with --update-baseline)"
    )


def _other_ground_truth(detail: str, base_path: Path, shared_images: bool, *,
                        edited: bool = False) -> str:  # fmt: skip
    """Say why a baseline report of another test set is not compared, and what to do.

    ``edited``: the same image names, some with other ground truth (no comparison of the
    shared images applies either).
    """
    gate = (
        "comparing the shared images does not help: images of one name have other ground truth"
        if edited
        else "[gate] shared_images = true compares the shared images only once the baseline "
        "state exists (it does not yet)"
        if shared_images
        else "or, to keep this baseline, gate on the images both runs share: [gate] "
        "shared_images = true (with [baseline] state)"
    )
    return (
        f"the baseline report {str(base_path)!r} was scored against different ground truth "
        f"({detail}): the fixed tolerances compare whole reports of one test set. After "
        "changing the test set, make a new baseline (remove the baseline report and state and "
        f"run with --update-baseline); {gate}"
    )


def _read_baseline(path: Path | None) -> dict[str, Any] | None:
    """The baseline report (``None``: none configured, or none yet), checked as a result."""
    if path is None or not path.is_file():
        return None

    def refuse(constant: str) -> None:
        msg = f"{constant} is not JSON (a hand-edited value?)"
        raise ValueError(msg)

    try:
        doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)
        check_report(doc, "baseline report")  # a segiou result of a version this segiou reads
    except (OSError, ValueError, KeyError, TypeError) as err:
        msg = (
            f"[baseline] path {str(path)!r} is not a segiou result report ({err}); restore it, "
            "or make a new one with --update-baseline"
        )
        raise UsageError(msg) from err
    out: dict[str, Any] = doc
    return out


def _folder_name(text: str) -> str:
    """A ``--date`` that names one folder inside the report folder (no ``/``, no ``..``)."""
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", text):
        msg = f"{text!r} is not a folder name (letters, digits, '.', '_', '-'; e.g. 2026-11-23)"
        raise argparse.ArgumentTypeError(msg)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path, help="TOML configuration")
    parser.add_argument("--date", type=_folder_name, default=dt.date.today().isoformat(),
                        help="report folder name (default: today, YYYY-MM-DD)")  # fmt: skip
    parser.add_argument("--update-baseline", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
        return run(cfg, date=args.date, update_baseline=args.update_baseline, quiet=args.quiet)
    except OutputError as err:  # a full disk is no bad input: the run failed (exit 3)
        print(f"nightly: error: {err}", file=sys.stderr)
        cause = err.__cause__
        full = isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT)
        return EXIT_FAILED if full else EXIT_BAD_INPUT
    except SegiouError as err:
        print(f"nightly: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception:  # noqa: BLE001 -- any other failure is not a regression: never exit 1
        traceback.print_exc()
        print("nightly: error: the run failed (traceback above)", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
