"""iIoU (instance-level IoU) equals cityscapesScripts' on generated Cityscapes folders.

cityscapesScripts (``evaluateImgLists`` with ``evalInstLevelScore=True``) is the oracle: the
folders hold ``*_gtFine_labelIds.png``, ``*_gtFine_instanceIds.png`` (16-bit, ``labelId * 1000
+ k``) and predictions in labelIds, with instances that cross chunk borders, instances of
classes ignored in evaluation (caravan, trailer), thing regions without instance ids, and
predictions of every labelId (void ids, caravan and trailer included). segiou counts them in
memory, from the PNG folders and from Zarr stores with small chunks and tasks split into bands.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import segiou
from segiou import ConfusionMatrix
from segiou.errors import DuplicateImageError, InstanceIdError, UsageError
from segiou.io.png import find_pairs, ingest
from segiou.io.sources import instance_files
from segiou.labels import builtin_spec
from segiou.parallel import count_stores

THINGS = [24, 25, 26, 27, 28, 29, 30, 31, 32, 33]
STUFF = [0, 1, 4, 6, 7, 8, 9, 10, 11, 12, 13, 17, 19, 20, 21, 22, 23]


def _image(rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, ...]:
    cells = rng.choice(STUFF, size=(h // 8 + 1, w // 8 + 1))
    gt = np.repeat(np.repeat(cells, 8, 0), 8, 1)[:h, :w].astype(np.uint8)
    inst = gt.astype(np.uint16)
    used: dict[int, int] = {}
    for _ in range(int(rng.integers(4, 12))):
        label = int(rng.choice(THINGS))
        hh, ww = int(rng.integers(3, h // 2)), int(rng.integers(3, w // 2))
        y0, x0 = int(rng.integers(0, h - hh)), int(rng.integers(0, w - ww))
        gt[y0 : y0 + hh, x0 : x0 + ww] = label
        if rng.random() < 0.85:  # an instance; else a group region (plain labelId)
            k = used.get(label, 0)
            used[label] = k + 1
            inst[y0 : y0 + hh, x0 : x0 + ww] = label * 1000 + k
        else:
            inst[y0 : y0 + hh, x0 : x0 + ww] = label
    pred = gt.copy()
    for _ in range(int(rng.integers(3, 10))):  # errors: any labelId, in patches
        hh, ww = int(rng.integers(2, h // 3)), int(rng.integers(2, w // 3))
        y0, x0 = int(rng.integers(0, h - hh)), int(rng.integers(0, w - ww))
        pred[y0 : y0 + hh, x0 : x0 + ww] = int(rng.integers(0, 34))
    noise = rng.random(gt.shape) < 0.03
    pred[noise] = rng.integers(0, 34, int(noise.sum()))
    return gt, inst, pred


def write_cityscapes(root: Path, n: int = 6, h: int = 40, w: int = 72, seed: int = 0) -> dict:
    """Cityscapes-layout folders ``gtFine/val/<city>/...`` and ``results/`` under ``root``."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    out: dict[str, list] = {"gt": [], "pred": [], "inst": [], "names": []}
    for i in range(n):
        city = ("aachen", "bremen", "ulm")[i % 3]
        name = f"{city}_{i:06d}_{19 + i:06d}"
        gt, inst, pred = _image(rng, h, w)
        d = root / "gtFine" / "val" / city
        d.mkdir(parents=True, exist_ok=True)
        Image.fromarray(gt).save(d / f"{name}_gtFine_labelIds.png")
        Image.fromarray(inst).save(d / f"{name}_gtFine_instanceIds.png")
        Image.fromarray(np.zeros((h, w, 3), np.uint8)).save(d / f"{name}_gtFine_color.png")
        (root / "results").mkdir(exist_ok=True)
        Image.fromarray(pred).save(root / "results" / f"{name}_leftImg8bit.png")
        out["gt"].append(gt)
        out["inst"].append(inst)
        out["pred"].append(pred)
        out["names"].append(name)
    return out


def cityscapes_scripts(root: Path) -> dict:
    """cityscapesScripts' own evaluation of the folders (the oracle)."""
    cs = pytest.importorskip("cityscapesscripts.evaluation.evalPixelLevelSemanticLabeling")
    gts = sorted(str(p) for p in (root / "gtFine" / "val").rglob("*_gtFine_labelIds.png"))
    args = cs.args
    args.JSONOutput = False
    args.quiet = True
    args.evalInstLevelScore = True
    args.predictionPath = str(root / "results")
    args.predictionWalk = None
    preds = [cs.getPrediction(args, g) for g in gts]
    # numpy 2.4 removed np.in1d, which cityscapesScripts calls: the documented equivalent,
    # np.isin on the flattened array, for the duration of the oracle's run
    had = hasattr(np, "in1d")
    if not had:
        np.in1d = lambda a, b, invert=False: np.isin(np.ravel(a), b, invert=invert)  # noqa: NPY201
    try:
        with warnings.catch_warnings():  # where numpy still has it, it is deprecated
            warnings.simplefilter("ignore")
            result: dict = cs.evaluateImgLists(preds, gts, args)
    finally:
        if not had:
            del np.in1d  # noqa: NPY201
    return result


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9


def assert_matches(r: segiou.Result, ref: dict) -> None:
    q = r.instances
    assert q is not None
    for i, name in enumerate(r.class_names):
        assert _same(q["iiou"][i], ref["classInstScores"][name]), name
        assert _same(r.per_class["iou"][i], ref["classScores"][name]), name
    for j, cat in enumerate(q["category_names"]):
        assert _same(q["category_iiou"][j], ref["categoryInstScores"][cat]), cat
    assert _same(q["miiou"], ref["averageScoreInstClasses"])
    assert _same(q["category_miiou"], ref["averageScoreInstCategories"])


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    root = tmp_path_factory.mktemp("cityscapes")
    data = write_cityscapes(root)
    return root, data, cityscapes_scripts(root)


def test_the_oracle_sees_what_the_test_is_about(folders: tuple[Path, dict, dict]) -> None:
    # a check that cannot fail proves nothing: the data holds what the test claims
    _, data, ref = folders
    inst = np.stack(data["inst"])
    assert (inst > 1000).any()
    assert ((inst // 1000) == 29).any()  # caravan instances (skipped)
    pred = np.stack(data["pred"])
    assert np.isin(pred, [29, 30]).any()  # caravan/trailer predicted: vehicle in category iIoU
    defined = [v for v in ref["classInstScores"].values() if not math.isnan(v)]
    assert len(defined) >= 6
    assert any(0 < v < 1 for v in defined)  # scores strictly between 0 and 1
    assert not math.isnan(ref["categoryInstScores"]["vehicle"])


def test_iiou_in_memory_equals_cityscapes_scripts(folders: tuple[Path, dict, dict]) -> None:
    _, data, ref = folders
    cm = ConfusionMatrix("cityscapes", gt_ids="raw", instances=True, per_image=True)
    for g, p, i, n in zip(data["gt"], data["pred"], data["inst"], data["names"], strict=True):
        cm.update(g, p, key=n, names=[n], instances=i)
    assert_matches(segiou.evaluate(cm, preset="cityscapes"), ref)


def test_iiou_from_png_folders_equals_cityscapes_scripts(folders: tuple[Path, dict, dict]) -> None:
    root, _, ref = folders
    cm = count_stores(root / "gtFine" / "val", root / "results", labels="cityscapes",
                      gt_ids="auto", scheduler="synchronous")  # fmt: skip
    assert cm.instances  # found beside the labelIds files, with no option
    assert_matches(segiou.evaluate(cm, preset="cityscapes"), ref)


@pytest.mark.parametrize(
    ("chunks", "pixels_per_task"),
    # (2, 3): chunk borders every 2-3 pixels through every instance (1 x 1 chunks wrote 52,000
    # chunk files: a minute of the CI's 12, for no border (2, 3) does not cross)
    [((8, 8), 1 << 20), ((7, 13), 360), ((40, 72), 1 << 20), ((2, 3), 720)],
)
def test_iiou_from_zarr_chunks_equals_cityscapes_scripts(
    folders: tuple[Path, dict, dict], tmp_path: Path, chunks: tuple[int, int],
    pixels_per_task: int,
) -> None:  # fmt: skip
    # instances cross chunk borders, and images are split into bands of tasks: an instance's
    # size and true positives are sums over every chunk and band it spans
    root, _, ref = folders
    gt, pred = find_pairs(root / "gtFine" / "val", root / "results", layout="cityscapes")
    inst = instance_files(gt)
    assert inst is not None
    store = tmp_path / "cs.zarr"
    ingest(gt, pred, store, chunks=chunks, instances=inst, progress=False)
    cm = count_stores(store / "gt", store / "pred", labels="cityscapes", gt_ids="auto",
                      scheduler="threads", pixels_per_task=pixels_per_task)  # fmt: skip
    assert cm.instances
    assert_matches(segiou.evaluate(cm, preset="cityscapes"), ref)
    # the state keeps the instances: a saved and reloaded state gives the same scores
    back = ConfusionMatrix.from_dict(cm.to_dict())
    assert back == cm
    assert_matches(segiou.evaluate(back, preset="cityscapes"), ref)


def test_iiou_of_merged_states_is_the_whole(folders: tuple[Path, dict, dict]) -> None:
    _, data, ref = folders
    parts = []
    for lo, hi in ((0, 2), (2, 6)):
        cm = ConfusionMatrix("cityscapes", gt_ids="raw", instances=True)
        for j in range(lo, hi):
            cm.update(data["gt"][j], data["pred"][j], key=str(j), instances=data["inst"][j])
        parts.append(cm)
    assert_matches(segiou.evaluate(parts[1] + parts[0], preset="cityscapes"), ref)


def test_unknown_instance_label_is_refused_naming_the_pixel() -> None:
    cm = ConfusionMatrix("cityscapes", gt_ids="raw", instances=True)
    gt = np.full((4, 5), 26, np.uint8)
    inst = np.full((4, 5), 26000, np.int32)
    inst[2, 3] = 7001  # road has no instance size
    with pytest.raises(InstanceIdError, match=r"instance value 7001 at pixel \(2, 3\).*'road'"):
        cm.update(gt, gt, key="a", instances=inst)
    inst[2, 3] = 99001  # no labelId 99
    with pytest.raises(InstanceIdError, match=r"label 99 is no raw id"):
        cm.update(gt, gt, key="b", instances=inst)
    assert cm.n_pixels == 0  # nothing of a refused batch is counted


def test_instances_must_be_given_with_every_batch_and_only_then() -> None:
    cm = ConfusionMatrix("cityscapes", gt_ids="raw", instances=True)
    gt = np.full((2, 2), 26, np.uint8)
    with pytest.raises(UsageError, match="instances="):
        cm.update(gt, gt, key="a")
    plain = ConfusionMatrix("cityscapes", gt_ids="raw")
    with pytest.raises(UsageError, match="instances=True"):
        plain.update(gt, gt, key="a", instances=np.full((2, 2), 26000))
    with pytest.raises(UsageError, match="instance sizes"):
        ConfusionMatrix("pascal_voc", instances=True)


def test_user_spec_gives_its_own_instance_sizes(tmp_path: Path) -> None:
    spec = {"name": "mini", "classes": ["bg", "car"], "ignore": [255],
            "categories": ["flat", "vehicle"], "class_categories": [0, 1],
            "instance_sizes": {"car": 10}}  # fmt: skip
    path = tmp_path / "mini.json"
    import json

    path.write_text(json.dumps(spec))
    cm = ConfusionMatrix(str(path), instances=True)
    gt = np.array([[1, 1, 1, 1, 0]], np.uint8)
    pred = np.array([[1, 1, 0, 0, 1]], np.uint8)
    inst = np.array([[1001, 1001, 1002, 1002, 0]], np.int32)  # two cars of 2 pixels
    cm.update(gt, pred, key="x", instances=inst)
    q = segiou.evaluate(cm).instances
    assert q is not None
    # weights 10/2 each: TPw = 2*5 + 0 = 10, FNw = 0 + 2*5 = 10, FP = 1 -> 10 / 21
    assert q["iiou"][1] == pytest.approx(10 / 21, abs=1e-12)
    assert np.isnan(q["iiou"][0])
    assert q["category_iiou"][1] == pytest.approx(10 / 21, abs=1e-12)
    assert builtin_spec("cityscapes").instance_sizes[0][1] == pytest.approx(3462.4756337644)


def test_cli_ingest_and_eval_report_iiou(
    folders: tuple[Path, dict, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from segiou.cli import main

    root, _, ref = folders
    store = tmp_path / "s.zarr"
    assert main(["ingest", "--gt", str(root / "gtFine" / "val"), "--pred", str(root / "results"),
                 "--out", str(store), "--chunks", "8x8", "--quiet"]) == 0  # fmt: skip
    out = tmp_path / "r.json"
    assert main(["eval", "--gt", str(store / "gt"), "--pred", str(store / "pred"), "--quiet",
                 "--preset", "cityscapes", "--scheduler", "synchronous",
                 "--json", str(out)]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "instance-level IoU (iIoU, cityscapesScripts)" in text
    from segiou.io.zarr import open_masks

    assert open_masks(store, "gt").complete  # ingest records that every chunk was written
    assert open_masks(store, "instances").complete
    doc = json.loads(out.read_text())["instances"]
    for c in doc["classes"]:
        want = ref["classInstScores"][c["name"]]
        assert (c["iiou"] is None and math.isnan(want)) or abs(c["iiou"] - want) <= 1e-9
    for c in doc["categories"]:
        want = ref["categoryInstScores"][c["name"]]
        assert (c["iiou"] is None and math.isnan(want)) or abs(c["iiou"] - want) <= 1e-9
    # --no-instances: ingest leaves them out, eval counts no iIoU
    bare = tmp_path / "bare.zarr"
    assert main(["ingest", "--gt", str(root / "gtFine" / "val"), "--pred", str(root / "results"),
                 "--out", str(bare), "--no-instances", "--quiet"]) == 0  # fmt: skip
    assert main(["eval", "--gt", str(bare / "gt"), "--pred", str(bare / "pred"), "--quiet",
                 "--scheduler", "synchronous", "--json", str(out)]) == 0  # fmt: skip
    assert json.loads(out.read_text())["instances"] is None


def test_an_image_counted_on_both_sides_is_counted_once(folders: tuple[Path, dict, dict]) -> None:
    # DistributedSampler pads a rank's last batch with an image another rank counts: merged,
    # its instances (and category false positives) count once, as its confusion does
    _, data, ref = folders
    parts = []
    for rng in (range(4), range(3, 6)):  # image 3 on both sides
        cm = ConfusionMatrix("cityscapes", gt_ids="raw", instances=True, per_image=True)
        for j in rng:
            n = data["names"][j]
            cm.update(data["gt"][j], data["pred"][j], key=f"{n}-{rng.start}", names=[n],
                      instances=data["inst"][j])  # fmt: skip
        parts.append(cm)
    merged = parts[0] + parts[1]
    assert merged.n_images == 6
    assert_matches(segiou.evaluate(merged, preset="cityscapes"), ref)
    assert ConfusionMatrix.from_dict(merged.to_dict()) == merged


def _with_boundary_and_instances(data: dict) -> ConfusionMatrix:
    cm = ConfusionMatrix("cityscapes", gt_ids="raw", instances=True, boundary="3px",
                         per_image=True)  # fmt: skip
    for g, p, i, n in zip(data["gt"], data["pred"], data["inst"], data["names"], strict=True):
        cm.update(g, p, key=n, names=[n], instances=i)
    return cm


def test_result_documents_keep_iiou_boundary_and_absent_chunks(
    folders: tuple[Path, dict, dict],
) -> None:
    # a result written as JSON and read back is the same result (segiou report, the service)
    from segiou.report import render_text
    from segiou.results import Result

    _, data, ref = folders
    cm = _with_boundary_and_instances(data)
    result = segiou.evaluate(cm, preset="cityscapes")
    doc = json.loads(result.to_json())
    back = Result.from_dict(doc)
    assert back.to_dict() == result.to_dict()
    assert_matches(back, ref)
    assert back.boundary is not None
    assert_array_equal(back.boundary["intersection"], result.boundary["intersection"])
    text = render_text(doc)  # the same sections from the document as from the result
    assert "mean iIoU" in text
    assert "Boundary IoU (width 3 px" in text
    assert text == render_text(result)


def test_every_report_format_shows_iiou_and_boundary_iou(
    folders: tuple[Path, dict, dict],
) -> None:
    # text, Markdown and HTML lay out the same tables; their numbers are the result's
    pytest.importorskip("jinja2")
    pytest.importorskip("matplotlib")
    import html as html_lib

    from segiou.report import Report, render_html, render_markdown, render_text
    from segiou.report.quality import quality_sections

    _, data, _ = folders
    cm = _with_boundary_and_instances(data)
    result = segiou.evaluate(cm, preset="cityscapes")
    report = Report.from_state(cm, preset="cityscapes")
    tables, _ = quality_sections(result.to_dict())
    assert [t.title.split(" (")[0] for t in tables] == [
        "Boundary IoU", "instance-level IoU", "category iIoU"]  # fmt: skip
    miiou = f"{100 * result.to_dict()['instances']['miiou']:.2f}"
    bmiou = f"{100 * result.to_dict()['boundary']['miou']:.2f}"
    assert tables[1].note == f"mean iIoU: {miiou}"
    assert tables[0].note == f"boundary mIoU: {bmiou}"
    md = render_markdown(report)
    page = html_lib.unescape(render_html(report, plots=False))
    text = render_text(result)
    for shown in (md, page, text):
        assert f"mean iIoU: {miiou}" in shown
        assert f"boundary mIoU: {bmiou}" in shown
        for t in tables:
            for row in t.rows:  # every class's row, every cell
                assert all(cell in shown for cell in row)
    assert '<section id="quality">' in render_html(report, plots=False)
    assert "## Boundary IoU and instance-level IoU" in md


def test_a_malformed_boundary_field_is_a_result_document_error() -> None:
    from segiou.errors import ResultDocumentError
    from segiou.report.quality import quality_sections

    with pytest.raises(ResultDocumentError, match="boundary"):
        quality_sections({"boundary": {"width": {"pixels": 3}}}, where="r.json")


def test_quality_tables_show_control_characters_in_names_escaped() -> None:
    from segiou.report.quality import quality_sections
    from segiou.report.text import render_quality

    row = {"id": 0, "name": "car\x1b[8m", "iou": 0.5, "intersection": 1, "gt": 2, "pred": 1}
    doc = {"boundary": {"width": {"pixels": 3}, "pixels_used": [3], "miou": 0.5,
                        "classes": [row]},
           "absent_chunks": {"total": 1, "images": {"img\x1b]0;x\x07": 1}}}  # fmt: skip
    tables, lines = quality_sections(doc)
    assert tables[0].rows[0][1] == "car\\x1b[8m"
    text = render_quality(doc)
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "car\\x1b[8m" in text
    assert "\x1b" not in lines[0]


def _car() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An 8 x 8 image with one car (instance 26000) whose top half is predicted as road."""
    g = np.full((8, 8), 7, np.uint8)
    g[2:6, 2:6] = 26
    p = g.copy()
    p[2:4, 2:6] = 7
    return g, p, np.where(g == 26, 26000, 7).astype(np.uint16)


def test_keyless_per_image_instance_states_merge_and_load() -> None:
    # two keyless states both label their image '#0': their instance records and category
    # false positives are kept without an image (only named images are matched in merges);
    # keyed by the label, the merged state saved, then failed to load
    g, p, inst = _car()

    def cm() -> ConfusionMatrix:
        return ConfusionMatrix("cityscapes", gt_ids="raw", instances=True, per_image=True)

    merged = cm().update(g, p, instances=inst) + cm().update(g, p, instances=inst)
    whole = cm().update(np.stack([g, g]), np.stack([p, p]), instances=np.stack([inst, inst]))
    loaded = ConfusionMatrix.from_dict(json.loads(json.dumps(merged.to_dict())))
    assert loaded == merged
    doc = segiou.evaluate(loaded, preset="cityscapes").to_dict()
    assert doc["instances"] == segiou.evaluate(whole, preset="cityscapes").to_dict()["instances"]
    named = cm().update(g, p, instances=inst, names=["img"])
    d = (merged + named).to_dict()
    assert d["instances"]["records"]["image"] == ["", "", "img"]
    assert ConfusionMatrix.from_dict(d) == merged + named
    d["instances"]["records"]["pixels"][0] = 200  # labelled images hold 128 pixels
    with pytest.raises(segiou.errors.CheckpointError, match="images without names"):
        ConfusionMatrix.from_dict(d)


def test_an_interrupted_update_leaves_no_instance_counts_behind(monkeypatch) -> None:
    """Ctrl-C between a counter's add and finish left the image's instance table in this
    thread's counter: the next update added it to its own (miIoU 0.375 for 1.0; the state's
    records held more pixels than it counted, and would not load)."""
    from segiou import _instances

    g, p, inst = _car()
    real = _instances.InstanceCounter.add

    def interrupted(self: object, *args: object, **kwargs: object) -> None:
        real(self, *args, **kwargs)
        raise KeyboardInterrupt

    def cm() -> ConfusionMatrix:
        return ConfusionMatrix("cityscapes", gt_ids="raw", instances=True, per_image=True)

    a = cm()
    with monkeypatch.context() as m:
        m.setattr(_instances.InstanceCounter, "add", interrupted)
        with pytest.raises(KeyboardInterrupt):
            a.update(g, p, instances=inst, key="b0")
    assert a.n_pixels == 0
    a.update(g, g, instances=inst, key="b1")  # a perfect prediction
    want = cm().update(g, g, instances=inst, key="b1")
    assert a == want
    got, ref = (segiou.evaluate(x, preset="cityscapes").to_dict()["instances"] for x in (a, want))
    assert got == ref
    assert ConfusionMatrix.from_dict(a.to_dict()) == a


def _car_state() -> dict:
    g, p, inst = _car()
    cm = ConfusionMatrix("cityscapes", gt_ids="raw", instances=True, per_image=True)
    cm.update(g, p, key="k", names=["img"], instances=inst)
    return json.loads(json.dumps(cm.to_dict()))


def _double(d: dict) -> None:
    for f, v in d["instances"]["records"].items():
        d["instances"]["records"][f] = v * 2


@pytest.mark.parametrize(
    ("mutate", "says"),
    [
        (lambda d: d["instances"]["records"]["pixels"].__setitem__(0, 10**6), "more than the 64"),
        (_double, "more than once"),
        (lambda d: d["instances"]["records"].__setitem__("image", ["stray"]), "no per-image row"),
        (lambda d: d["instances"]["records"]["pixels"].__setitem__(0, 0), "no pixel"),
        (lambda d: d["instances"].__setitem__("images", ["img"]), "image name -> counts"),
        (lambda d: d["instances"]["images"]["img"].__setitem__(0, 1), "add up"),
    ],
)
def test_instance_invariants_of_a_saved_state_are_checked(mutate, says) -> None:
    d = _car_state()
    ConfusionMatrix.from_dict(d)  # untouched: loads
    mutate(d)
    with pytest.raises(segiou.errors.CheckpointError, match=rf"s\.json: .*instances.*{says}"):
        ConfusionMatrix.from_dict(d, source="s.json")


def test_merge_order_never_shows_without_per_image_rows() -> None:
    # every record is labelled '#0' without per-image rows: a + b and b + a must still be one
    # state, saved as the same JSON
    def part(car: int, ped: int, key: str, miss: int = 1) -> ConfusionMatrix:
        g = np.full((4, 6), 7, np.uint8)
        g[:, :3] = 26
        g[:2, 3:] = 24
        inst = np.where(g == 26, 26000 + car, np.where(g == 24, 24000 + ped, 7)).astype(np.int32)
        p = g.copy()
        p[0, :miss] = 7
        cm = ConfusionMatrix("cityscapes", gt_ids="raw", instances=True)
        return cm.update(g, p, key=key, instances=inst)

    a, b = part(1, 1, "a", miss=2), part(1, 1, "b").merge(part(2, 1, "c", miss=0))
    assert a + b == b + a
    assert json.dumps((a + b).to_dict()) == json.dumps((b + a).to_dict())


def test_a_spec_without_categories_has_class_iiou_only(tmp_path: Path) -> None:
    spec = {"name": "t", "classes": [{"name": "road"}, {"name": "car"}], "ignore": [255],
            "instance_sizes": {"car": 10.0}}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    cm = ConfusionMatrix(tmp_path / "spec.json", instances=True, per_image=True)
    g = np.zeros((4, 4), np.uint8)
    g[1:3, 1:3] = 1
    p = g.copy()
    p[1, 1] = 0
    cm.update(g, p, key="a", instances=np.where(g == 1, 1001, 0).astype(np.uint16))
    r = segiou.evaluate(cm)
    assert r.instances["miiou"] == pytest.approx(0.75)  # tp 3 * 10/4, fn 1 * 10/4
    assert r.instances["category_iiou"].size == 0
    assert ConfusionMatrix.from_dict(cm.to_dict()) == cm


def test_a_batch_whose_instances_do_not_fit_counts_nothing() -> None:
    from segiou._count import count_pairs
    from segiou._instances import InstanceTally

    cm = ConfusionMatrix("cityscapes", gt_ids="raw", instances=True)
    g = np.full((1, 2, 2), 26, np.uint8)
    t = count_pairs(g, g, cm._lookup, where="t", on_unexpected="raise", per_image=False)
    n_cat = cm.extras.n_categories
    with pytest.raises(UsageError, match="nothing of it was counted"):
        cm.add_tally(
            t, key="k", names=None, n_images=1, instances=InstanceTally.empty(1, n_cat + 1)
        )
    assert (cm.n_pixels, cm.keys, cm.n_images) == (0, set(), 0)
    cm.add_tally(t, key="k", names=None, n_images=1, instances=InstanceTally.empty(1, n_cat))
    assert cm.n_pixels == 4


@pytest.mark.parametrize("policy", ["auto", "fill", "error"])
def test_never_written_instance_chunks_follow_the_ground_truth_policy(
    tmp_path: Path, policy: str
) -> None:
    # zarr with its defaults leaves out every chunk equal to the fill value, in the ground
    # truth and in the instance ids beside it alike
    zarr = pytest.importorskip("zarr")
    gt = np.full((1, 8, 8), 7, np.uint8)
    gt[0, :4, :4] = 0  # a chunk of unlabeled (0, the fill value): never written
    gt[0, 5:8, 5:8] = 26
    inst = gt.astype(np.uint16)
    inst[0, 5:8, 5:8] = 26000
    pred = gt.copy()
    pred[0, 5, 5:8] = 7
    root = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    for name, a in (("gt", gt), ("pred", pred), ("instances", inst)):
        arr = root.create_array(name, shape=a.shape, chunks=(1, 4, 4), dtype=a.dtype, fill_value=0)
        arr[:] = a
        arr.attrs["segiou"] = {"names": ["frankfurt_000000"]}
    run = {"labels": "cityscapes", "gt_ids": "raw", "scheduler": "synchronous"}
    if policy == "error":
        with pytest.raises(segiou.errors.MissingChunkError, match="'gt'"):
            count_stores(tmp_path / "s.zarr" / "gt", tmp_path / "s.zarr" / "pred",
                         missing_gt_chunks=policy, **run)  # fmt: skip
        return
    cm = count_stores(tmp_path / "s.zarr" / "gt", tmp_path / "s.zarr" / "pred",
                      missing_gt_chunks=policy, **run)  # fmt: skip
    mem = ConfusionMatrix("cityscapes", gt_ids="raw", instances=True)
    mem.update(gt, pred, key="m", instances=inst)
    assert cm.instances
    assert cm.extras.absent == {"frankfurt_000000": 1}
    got, want = segiou.evaluate(cm, preset="cityscapes"), segiou.evaluate(mem, preset="cityscapes")
    assert got.instances["iiou"][13] == want.instances["iiou"][13] == pytest.approx(2 / 3)


def test_an_image_on_both_sides_with_other_instances_is_refused() -> None:
    # the same confusion counts, but the car's pixels are one instance on one side and two on
    # the other: counting the image once would keep whichever side comes first
    g = np.full((8, 8), 7, np.uint8)
    g[2:6, 1:7] = 26
    p = g.copy()
    p[2:6, 1:3] = 7
    one = np.where(g == 26, 26000, 7).astype(np.uint16)
    two = one.copy()
    two[:, 3:] = np.where(g[:, 3:] == 26, 26001, 7)

    def state(inst: np.ndarray, key: str) -> ConfusionMatrix:
        cm = ConfusionMatrix("cityscapes", gt_ids="raw", instances=True, per_image=True)
        return cm.update(g, p, key=key, names=["frankfurt_000000"], instances=inst)

    for a, b in ((state(one, "a"), state(two, "b")), (state(two, "b"), state(one, "a"))):
        with pytest.raises(DuplicateImageError, match=r"'frankfurt_000000' \(instance records"):
            a.merge(b)
    same = state(one, "a") + state(one.copy(), "b")  # identical in everything: counted once
    assert same.n_images == 1
    assert same.extras.instance_records().n == 1


def _spec_file(tmp_path: Path, sizes: dict[str, float]) -> Path:
    spec = {"name": "t", "classes": [{"name": "tree", "category": "nature"},
                                     {"name": "car", "category": "vehicle"},
                                     {"name": "ped", "category": "human"}],
            "ignore": [255], "instance_sizes": sizes}  # fmt: skip
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def test_instance_zero_of_a_label_is_an_instance(tmp_path: Path) -> None:
    # cityscapesScripts' json2instanceImg writes label * 1000 + k from k = 0: 1000 is the first
    # car of class 1, 2000 the first pedestrian of class 2
    g = np.zeros((4, 9), np.uint8)
    g[:, 3:6] = 1
    g[:, 6:] = 2
    p = g.copy()
    p[0, :] = 1
    inst = np.repeat(np.array([0, 1000, 2000], np.uint16), 3)[None].repeat(4, 0)
    cm = ConfusionMatrix(_spec_file(tmp_path, {"car": 10.0, "ped": 5.0}), instances=True)
    r = segiou.evaluate(cm.update(g, p, key="a", instances=inst))
    assert r.instances["instances"].tolist() == [0, 1, 1]
    assert r.instances["iiou"][1:].tolist() == pytest.approx([0.625, 0.75])


def test_class_0_cannot_have_instances_in_class_ids(tmp_path: Path) -> None:
    # class 0's instances would be 0..999: plain label ids, never instances
    with pytest.raises(UsageError, match=r"class 0 \('tree'\).*below 1000"):
        ConfusionMatrix(_spec_file(tmp_path, {"tree": 8.0, "car": 10.0}), instances=True)


def test_a_truncated_instance_map_is_refused() -> None:
    g = np.full((8, 8), 7, np.uint8)
    g[2:6, 2:6] = 26
    inst = np.where(g == 26, 26001, 7).astype(np.uint16)
    cm = ConfusionMatrix("cityscapes", gt_ids="raw", instances=True)
    with pytest.raises(segiou.errors.LabelDtypeError, match=r"uint8.*looks truncated"):
        cm.update(g, g, key="a", instances=inst.astype(np.uint8))  # 26001 -> 145
    with pytest.raises(InstanceIdError, match=r"value 145 at pixel \(2, 2\).*looks truncated"):
        cm.update(g, g, key="b", instances=inst.astype(np.uint8).astype(np.uint16))
    assert cm.n_pixels == 0
    cm.update(g, g, key="c", instances=inst)
    assert segiou.evaluate(cm, preset="cityscapes").instances["instances"][13] == 1


def test_an_unexpected_prediction_is_left_out_of_its_instance_as_of_the_counts() -> None:
    # a car of 4 pixels, 2 of them predicted 9 (neither a class nor void): the counts leave
    # those out (IoU 1.0), and so does the instance: 2 pixels, both true positives
    from segiou.labels import LabelSpec

    spec = LabelSpec.from_dict({"name": "t", "classes": [{"name": "bg"}, {"name": "car"}],
                                "ignore": [255], "instance_sizes": {"car": 4.0}})  # fmt: skip
    g = np.array([[1, 1, 1, 1, 0, 0]], np.uint8)
    p = g.copy()
    p[0, :2] = 9
    cm = ConfusionMatrix(spec, instances=True, on_unexpected="count")
    cm.update(g, p, key="a", instances=np.array([[1000, 1000, 1000, 1000, 0, 0]], np.int32))
    r = segiou.evaluate(cm)
    assert cm.counts.tolist() == [[2, 0], [0, 2]]
    assert r.per_class["iou"][1] == 1.0
    assert r.instances["iiou"][1] == 1.0
    assert r.instances["tp_weighted"][1] == pytest.approx(2 * 4.0 / 2)  # weight A / n = 4 / 2
    assert r.instances["fn_weighted"][1] == 0.0
    # every pixel of the car predicted 9: no instance is left
    cm = ConfusionMatrix(spec, instances=True, on_unexpected="count")
    p[0, :4] = 9
    cm.update(g, p, key="a", instances=np.array([[1000, 1000, 1000, 1000, 0, 0]], np.int32))
    assert cm.extras.instance_records().n == 0
    assert np.isnan(segiou.evaluate(cm).instances["iiou"][1])
    # uint64 masks: 2**64 - 1 is an unexpected value (as counted), never the ignore value -1
    spec = LabelSpec.from_dict({"name": "t", "classes": [{"name": "bg"}, {"name": "car"}],
                                "ignore": [-1], "instance_sizes": {"car": 4.0}})  # fmt: skip
    g64 = g.astype(np.uint64)
    p64 = g64.copy()
    p64[0, :2] = np.uint64(2**64 - 1)
    cm = ConfusionMatrix(spec, instances=True, on_unexpected="count")
    cm.update(g64, p64, key="a", instances=np.array([[1000, 1000, 1000, 1000, 0, 0]], np.int32))
    assert cm.unexpected_pred == {2**64 - 1: 2}
    assert segiou.evaluate(cm).instances["iiou"][1] == 1.0


_SPEC = {"name": "u", "classes": [{"name": "tree", "category": "nature"},
                                  {"name": "car", "category": "vehicle"},
                                  {"name": "truck", "category": "vehicle"},
                                  {"name": "ped", "category": "human"}],
         "ignore": [255], "instance_sizes": {"car": 30.0, "truck": 50.0, "ped": 12.0}}  # fmt: skip
_UNEXPECTED = (9, 77, 200)


def _unexpected_images(seed: int, n: int = 3, h: int = 20, w: int = 30) -> tuple[np.ndarray, ...]:
    """Class ids 0..3 with instances of 1..3, ignore 255, unexpected values on both sides."""
    rng = np.random.default_rng(seed)
    gt = np.zeros((n, h, w), np.uint8)
    inst = np.zeros((n, h, w), np.uint16)
    for i in range(n):
        used: dict[int, int] = {}
        for _ in range(6):
            c = int(rng.integers(1, 4))
            hh, ww = int(rng.integers(2, 8)), int(rng.integers(2, 10))
            y, x = int(rng.integers(0, h - hh)), int(rng.integers(0, w - ww))
            gt[i, y : y + hh, x : x + ww] = c
            k = used.get(c, 0)
            used[c] = k + 1
            inst[i, y : y + hh, x : x + ww] = c * 1000 + k
    pred = np.where(rng.random(gt.shape) < 0.2, rng.integers(0, 4, gt.shape), gt).astype(np.uint8)
    pred[rng.random(gt.shape) < 0.05] = 255  # void
    for i in range(n):  # unexpected predictions in patches (over instances too) and pixels
        y, x = int(rng.integers(0, h - 5)), int(rng.integers(0, w - 6))
        pred[i, y : y + 5, x : x + 6] = 200
    pred[rng.random(gt.shape) < 0.05] = 9
    gt[rng.random(gt.shape) < 0.03] = 77  # unexpected ground truth, inside instances too
    gt[rng.random(gt.shape) < 0.03] = 255  # ignored ground truth, inside instances too
    return gt, pred, inst


def _iiou_left_out(gt: np.ndarray, pred: np.ndarray, inst: np.ndarray) -> tuple[list, list]:
    """Class and category iIoU, cityscapesScripts' formula, on the pixels the counts hold.

    A pixel is left out (of the confusion counts and of its instance) when its ground truth is
    unexpected, or its ground truth is a class and its prediction unexpected; an instance
    pixel with ignored ground truth stays in its instance (cityscapesScripts reads the
    instance map only). FP (unweighted) from the counts.
    """
    k = 4
    sizes = {1: 30.0, 2: 50.0, 3: 12.0}
    cat = [0, 1, 1, 2]
    gcls = gt < k
    known_gt = gcls | (gt == 255)
    out = ~known_gt | (gcls & ~((pred < k) | (pred == 255)))
    cm = np.zeros((k, k), np.int64)
    sel = gcls & (pred < k)
    np.add.at(cm, (gt[sel].astype(int), pred[sel].astype(int)), 1)
    tpw, fnw = np.zeros(k), np.zeros(k)
    ctpw, cfnw = np.zeros(3), np.zeros(3)
    for j in range(gt.shape[0]):
        for v in np.unique(inst[j][inst[j] >= 1000]):
            c = int(v) // 1000
            m = (inst[j] == v) & ~out[j]
            n = int(m.sum())
            if n == 0:
                continue
            pv = pred[j][m]
            w = sizes[c] / n
            tp = int((pv == c).sum())
            tpw[c] += tp * w
            fnw[c] += (n - tp) * w
            ctp = int(sum(1 for q in pv if q < k and cat[q] == cat[c]))
            ctpw[cat[c]] += ctp * w
            cfnw[cat[c]] += (n - ctp) * w
    iiou = []
    for c in range(k):
        fp = cm[:, c].sum() - cm[c, c]
        den = tpw[c] + fnw[c] + fp
        iiou.append(tpw[c] / den if c in sizes and den > 0 else math.nan)
    cats = []
    for g in range(3):
        mem = [c for c in range(k) if cat[c] == g]
        oth = [c for c in range(k) if cat[c] != g]
        fp = cm[np.ix_(oth, mem)].sum()
        den = ctpw[g] + cfnw[g] + fp
        cats.append(ctpw[g] / den if g in (1, 2) and den > 0 else math.nan)
    return iiou, cats


@pytest.mark.parametrize("seed", [0, 1])
def test_unexpected_values_are_left_out_of_iiou_in_memory_and_out_of_core(
    tmp_path: Path, seed: int
) -> None:
    zarr = pytest.importorskip("zarr")
    gt, pred, inst = _unexpected_images(seed)
    want, want_cat = _iiou_left_out(gt, pred, inst)
    path = tmp_path / "u.json"
    path.write_text(json.dumps(_SPEC))
    names = ["a", "b", "c"]

    def check(cm: ConfusionMatrix) -> None:
        assert cm.unexpected_pred  # what the test is about
        assert cm.unexpected_gt
        q = segiou.evaluate(cm).instances
        for c in range(4):
            assert _same(q["iiou"][c], want[c]), c
        for g in range(3):
            assert _same(q["category_iiou"][g], want_cat[g]), g

    for per_image in (False, True):
        mem = ConfusionMatrix(path, instances=True, on_unexpected="count", per_image=per_image)
        mem.update(gt, pred, key="m", names=names if per_image else None, instances=inst)
        check(mem)
    root = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    for name, a in (("gt", gt), ("pred", pred), ("instances", inst)):
        arr = root.create_array(name, shape=a.shape, chunks=(1, 6, 7), dtype=a.dtype)
        arr[:] = a
        arr.attrs["segiou"] = {"names": names}
    for ppt in (1 << 20, 100):
        cm = count_stores(tmp_path / "s.zarr" / "gt", tmp_path / "s.zarr" / "pred", labels=path,
                          on_unexpected="count", scheduler="threads", pixels_per_task=ppt)  # fmt: skip
        assert cm.instances
        check(cm)


@pytest.mark.parametrize(("ignore", "dtype"), [(65535, np.uint16), (255, np.uint8), (-1, np.int32)])
def test_a_far_ignore_value_never_sizes_the_instance_table(
    tmp_path: Path, ignore: int, dtype: type
) -> None:
    # an ignore value carries no instances: only the labels of classes with an average size
    # need rows (here 1000..1999), whatever the ignore value
    zarr = pytest.importorskip("zarr")
    spec = {"name": "t", "classes": [{"name": "bg"}, {"name": "car"}, {"name": "tree"}],
            "ignore": [ignore], "instance_sizes": {"car": 5.0}}  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps(spec))
    g = np.zeros((1, 6, 8), dtype)
    g[0, 0:3, 0:4] = 1  # car A, 12 pixels
    g[0, 4:6, 4:8] = 1  # car B, 8 pixels
    g[0, 3, :] = ignore
    g[0, 4:6, 0:2] = 2  # tree: no instances
    inst = np.where(g == 1, 0, g).astype(np.int32)
    inst[0, 0:3, 0:4] = 1000
    inst[0, 4:6, 4:8] = 1001
    inst[0, 3, :] = 0
    if ignore > 0:  # instances of the ignore label: skipped, not refused
        inst[0, 3, :3] = ignore * 1000 + 3
    p = g.copy()
    p[0, 0, 1:4] = 0  # 3 of car A missed
    p[0, 5, 2:4] = 1  # 2 background pixels predicted car: false positives
    p[0, 3, :] = 1  # at ignored ground truth: nothing
    # cityscapesScripts' formula by hand: w = 5 / n per instance, FP unweighted
    tpw, fnw = 9 * 5 / 12 + 8 * 5 / 8, 3 * 5 / 12
    want = tpw / (tpw + fnw + 2)
    cm = ConfusionMatrix(path, instances=True, per_image=True)
    cm.update(g, p, key="a", names=["a"], instances=inst)
    q = segiou.evaluate(cm).instances
    assert q["iiou"][1] == pytest.approx(want, abs=1e-12)
    assert q["instances"].tolist() == [0, 2, 0]
    root = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    for name, a in (("gt", g), ("pred", p), ("instances", inst)):
        arr = root.create_array(name, shape=a.shape, chunks=(1, 4, 3), dtype=a.dtype)
        arr[:] = a
        arr.attrs["segiou"] = {"names": ["a"]}
    ooc = count_stores(tmp_path / "s.zarr" / "gt", tmp_path / "s.zarr" / "pred", labels=path,
                       scheduler="synchronous", pixels_per_task=16)  # fmt: skip
    got = segiou.evaluate(ooc).instances
    assert got["iiou"][1] == q["iiou"][1]
    assert got["instances"].tolist() == [0, 2, 0]
    with pytest.raises(InstanceIdError, match=r"value 2001 .*'tree', which has no average"):
        cm.update(g, p, key="b", instances=np.where(g == 2, 2001, inst).astype(np.int32))
    with pytest.raises(InstanceIdError, match=r"label 70000 is no class id"):
        cm.update(g, p, key="c", instances=np.where(g == 1, 70_000_001, inst).astype(np.int32))


def test_a_far_unevaluated_raw_id_never_sizes_the_instance_table(tmp_path: Path) -> None:
    spec = {"name": "r", "classes": [{"name": "road"}, {"name": "car"}], "ignore": [255],
            "raw": [{"id": 65535, "name": "unlabeled", "class": None},
                    {"id": 7, "name": "road", "class": "road"},
                    {"id": 26, "name": "car", "class": "car"}],
            "instance_sizes": {"car": 10.0}}  # fmt: skip
    path = tmp_path / "r.json"
    path.write_text(json.dumps(spec))
    g = np.full((4, 6), 7, np.uint16)
    g[1:3, 1:5] = 26
    g[0, :] = 65535
    inst = np.where(g == 26, 26000, np.where(g == 65535, 7, g)).astype(np.int32)
    p = g.copy()
    p[1, 1] = 7
    cm = ConfusionMatrix(path, gt_ids="raw", instances=True)
    cm.update(g, p, key="a", instances=inst)
    # one car of 8 pixels, 7 predicted car: w = 10 / 8, no false positive
    assert segiou.evaluate(cm).instances["iiou"][1] == pytest.approx(7 / 8, abs=1e-12)


def test_labels_with_instances_spanning_too_much_are_refused_and_far_ones_fit(
    tmp_path: Path,
) -> None:
    spec = {"name": "w", "classes": [{"name": "road"}, {"name": "car"}, {"name": "bus"}],
            "ignore": [255],
            "raw": [{"id": 7, "name": "road", "class": "road"},
                    {"id": 1, "name": "car", "class": "car"},
                    {"id": 5000, "name": "bus", "class": "bus"}],
            "instance_sizes": {"car": 10.0, "bus": 20.0}}  # fmt: skip
    path = tmp_path / "w.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(
        UsageError,
        match=r"1,000\.\.5,000,999 .*more than the 4,194,304 an "
        r"instance table holds; renumber the label ids",
    ):
        ConfusionMatrix(path, gt_ids="raw", instances=True)
    # labels far from 1 but close together fit: the table starts at the lowest of them
    spec["raw"][1]["id"] = 4999
    path.write_text(json.dumps(spec))
    cm = ConfusionMatrix(path, gt_ids="raw", instances=True)
    g = np.full((3, 6), 7, np.int32)
    g[0, :4] = 4999
    g[2, 2:] = 5000
    inst = np.where(g == 7, 7, g * 1000).astype(np.int32)
    inst[2, 2:] += 1  # bus 5,000,001
    p = g.copy()
    p[0, 0] = 7  # a car pixel missed
    p[1, 5] = 5000  # a road pixel predicted bus
    cm.update(g, p, key="a", instances=inst)
    q = segiou.evaluate(cm).instances
    assert q["instances"].tolist() == [0, 1, 1]
    # car: w = 10 / 4, tp 3, fn 1; bus: w = 20 / 4, tp 4, one false positive
    assert q["iiou"][1:].tolist() == pytest.approx([3 * 2.5 / (4 * 2.5), 4 * 5 / (4 * 5 + 1)])
