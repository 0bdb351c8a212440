"""Every route of ``segiou serve``: the happy path, and every refusal with its status code and
proof that nothing changed. One real server process (conftest), one run per test."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from service_support import npy_record

from segiou import ConfusionMatrix, evaluate
from segiou.client import Client, result_from_dict
from segiou.errors import RefusedError
from segiou.report import render_per_image_csv
from segiou.service.wire import (
    CONTENT_JSON,
    CONTENT_MASKS_NPY,
    CONTENT_MASKS_NPZ,
    CONTENT_STATE_NPZ,
    decode_state,
    encode_masks,
    encode_state,
)
from segiou.stats import evaluate_with_intervals
from segiou.testing.synthetic import cityscapes_like

K = 19


def masks(seed: int, n: int = 2, h: int = 24, w: int = 40) -> tuple[np.ndarray, np.ndarray]:
    return cityscapes_like(n, h, w, seed=seed)


def local(gt: np.ndarray, pred: np.ndarray, key: str, **options: object) -> ConfusionMatrix:
    opts = {"ignore_index": 255, "per_image": True} | options
    return ConfusionMatrix(K, **opts).update(gt, pred, key=key)  # type: ignore[arg-type]


def make_run(client: Client, name: str, **options: object) -> None:
    opts = {"ignore_index": 255, "per_image": True} | options
    out = client.create_run(name, K, **opts)  # type: ignore[arg-type]
    assert out["created"] is True


def same_state(a: ConfusionMatrix, b: ConfusionMatrix) -> None:
    assert a == b  # settings, counts, void, ignored, unexpected, keys, per-image rows
    np.testing.assert_array_equal(a.counts, b.counts)


# -- runs ---------------------------------------------------------------------------------------
def test_create_run_again_is_a_no_op_and_other_settings_conflict(client, run_name, raw) -> None:
    make_run(client, run_name)
    again = client.create_run(run_name, K, ignore_index=255, per_image=True)
    assert again["created"] is False
    status, body = raw("POST", "/v1/runs", json.dumps({"name": run_name, "labels": K,
                       "ignore_index": 254, "per_image": True}).encode(),
                       {"Content-Type": CONTENT_JSON})  # fmt: skip
    assert status == 409
    assert body["error"] == "ConflictError"
    assert '"ignore_index": 255' in body["message"]
    assert '"ignore_index": 254' in body["message"]  # both settings are named
    assert client.run_info(run_name)["settings"]["ignore_index"] == 255  # nothing changed


def test_create_run_with_the_same_spec_given_inline_is_the_same_run(client, run_name) -> None:
    client.create_run(run_name, "cityscapes", gt_ids="raw")
    from segiou.labels import builtin_spec

    again = client.create_run(run_name, builtin_spec("cityscapes").to_dict(), gt_ids="raw")
    assert again["created"] is False


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _skeleton(depth: int) -> np.ndarray:
    """A state npz's JSON member holding a value nested ``depth`` deep."""
    return np.frombuffer(b'{"a": ' + _deep(depth) + b"}", np.uint8)


@pytest.mark.parametrize(
    ("body", "ctype", "status", "needle"),
    [
        (b"{", CONTENT_JSON, 400, "not valid JSON"),
        (b"[]", CONTENT_JSON, 400, "must be a JSON object"),
        (_deep(10000), CONTENT_JSON, 400, "not valid JSON (nested too deeply"),
        (b'{"name": "x y", "labels": 3}', CONTENT_JSON, 400, "run name 'x y' is not valid"),
        (b'{"name": "ok", "labels": 3, "colour": 1}', CONTENT_JSON, 400, "unknown field"),
        (b'{"name": "ok"}', CONTENT_JSON, 400, "field 'labels' is missing"),
        (b'{"name": "ok", "labels": "/etc/passwd"}', CONTENT_JSON, 400, "unknown built-in"),
        (b'{"name": "ok", "labels": 3, "per_image": "yes"}', CONTENT_JSON, 400, "per_image"),
        (b'{"name": "ok", "labels": 3, "gt_ids": "rawr"}', CONTENT_JSON, 400, "gt_ids"),
        (b'{"name": "ok", "labels": 3, "ignore_index": 1.5}', CONTENT_JSON, 400, "ignore_index"),
        (b'{"name": "ok", "labels": 3, "ignore_index": 1}', CONTENT_JSON, 400, "class id"),
        (b'{"name": "ok", "labels": 0}', CONTENT_JSON, 400, "at least 1"),
        (b'{"name": "ok", "labels": 1000000000}', CONTENT_JSON, 400, "a run holds at most 4096"),
        (b'{"name": "ok", "labels": 3}', "text/plain", 415, "content type 'text/plain'"),
    ],
)
def test_create_run_refusals(raw, client, body, ctype, status, needle) -> None:
    before = [r["name"] for r in client.runs()]
    code, reply = raw("POST", "/v1/runs", body, {"Content-Type": ctype})
    assert code == status, reply
    assert needle in reply["message"]
    assert [r["name"] for r in client.runs()] == before  # nothing was created


def test_list_and_get_runs(client, run_name, raw) -> None:
    make_run(client, run_name)
    listed = {r["name"]: r for r in client.runs()}
    assert listed[run_name]["status"] == "open"
    assert "template" not in listed[run_name]
    info = client.run_info(run_name)
    assert (info["batches"], info["images"], info["pixels"]) == (0, 0, 0)
    assert ConfusionMatrix.from_dict(info["template"]) == ConfusionMatrix(K, ignore_index=255,
                                                                           per_image=True)  # fmt: skip
    assert raw("GET", "/v1/runs/no-such-run")[0] == 404
    assert raw("GET", "/v1/runs/bad%20name")[0] == 400


# -- batches ------------------------------------------------------------------------------------
def test_every_body_form_counts_like_the_eager_accumulator(client, run_name) -> None:
    make_run(client, run_name)
    eager = ConfusionMatrix(K, ignore_index=255, per_image=True)
    (g0, p0), (g1, p1), (g2, p2), (g3, p3) = (masks(s) for s in range(4))
    assert client.put_counts(local(g0, p0, "a"), "a")["outcome"] == "counted"
    assert client.put_counts(local(g1, p1, "b"), "b", binary=True)["outcome"] == "counted"
    assert client.put_masks(g2, p2, "c")["outcome"] == "counted"
    out = client.put_masks(g3, p3, "d", names=["img-x", "img-y"], npz=True)
    assert (out["outcome"], out["images"], out["batches"]) == ("counted", 2, 4)
    eager.update(g0, p0, key="a").update(g1, p1, key="b").update(g2, p2, key="c")
    eager.update(g3, p3, key="d", names=["img-x", "img-y"])
    same_state(client.state(run_name), eager)
    info = client.run_info(run_name)
    assert (info["batches"], info["images"], info["pixels"]) == (4, 8, eager.n_pixels)


def test_state_route_serves_json_and_npz(client, run_name, raw) -> None:
    make_run(client, run_name)
    g, p = masks(7)
    client.put_masks(g, p, "k")
    eager = local(g, p, "k")
    status, as_json = raw("GET", f"/v1/runs/{run_name}/state")
    assert status == 200
    same_state(ConfusionMatrix.from_dict(as_json), eager)
    status, as_npz = raw("GET", f"/v1/runs/{run_name}/state", headers={"Accept": CONTENT_STATE_NPZ})
    assert status == 200
    same_state(decode_state(as_npz, CONTENT_STATE_NPZ), eager)
    # q=0 is "not acceptable" (RFC 9110): the JSON form, which a client asking so can read
    status, refused_npz = raw("GET", f"/v1/runs/{run_name}/state",
                              headers={"Accept": f"{CONTENT_STATE_NPZ};q=0, application/json"})  # fmt: skip
    assert status == 200
    same_state(ConfusionMatrix.from_dict(refused_npz), eager)


def test_same_key_same_content_is_a_duplicate_in_every_form(client, run_name, snapshot) -> None:
    make_run(client, run_name)
    g, p = masks(11)
    assert client.put_masks(g, p, "k")["outcome"] == "counted"
    before = snapshot(client, run_name)
    # the same content: raw masks again, their state counted here, its npz form
    assert client.put_masks(g, p, "k")["outcome"] == "duplicate"
    assert client.put_masks(g, p, "k", npz=True)["outcome"] == "duplicate"
    assert client.put_counts(local(g, p, "k"), "k")["outcome"] == "duplicate"
    assert client.put_counts(local(g, p, "k"), "k", binary=True)["outcome"] == "duplicate"
    assert snapshot(client, run_name) == before


def test_same_key_other_content_is_refused(client, run_name, snapshot) -> None:
    make_run(client, run_name)
    g, p = masks(12)
    client.put_masks(g, p, "k")
    before = snapshot(client, run_name)
    p2 = p.copy()
    p2[0, 0, 0] = (p2[0, 0, 0] + 1) % K
    with pytest.raises(RefusedError) as err:
        client.put_masks(g, p2, "k")
    assert err.value.status == 409
    assert "counted before with other content" in str(err.value)
    assert snapshot(client, run_name) == before


def test_an_image_or_inner_key_counted_under_another_key_is_refused(
    client, run_name, snapshot
) -> None:
    make_run(client, run_name)
    g, p = masks(13)
    client.put_masks(g, p, "k1", names=["left", "right"])
    before = snapshot(client, run_name)
    with pytest.raises(RefusedError) as err:  # same image names, another key
        client.put_masks(g[:1], p[:1], "k2", names=["right"])
    assert (err.value.status, err.value.error) == (409, "ConflictError")
    assert "image 'right' was already counted" in str(err.value)
    with pytest.raises(RefusedError) as err:  # a state counting batch key k1 again
        client.put_counts(local(g, p, "k1"), "k3")
    assert err.value.status == 409
    assert "batch key 'k1'" in str(err.value)
    with pytest.raises(RefusedError) as err:  # one name twice in one batch
        client.put_masks(g, p, "k4", names=["twice", "twice"])
    assert err.value.status == 400
    assert snapshot(client, run_name) == before


def test_labels_of_unnamed_images_never_collide(client, run_name) -> None:
    # '#0' of a keyless update and '000000' of a store without names only show an image:
    # two workers' states of different unnamed images are both counted, as merge counts them
    make_run(client, run_name)
    g, p = masks(14)
    a = ConfusionMatrix(K, ignore_index=255, per_image=True).update(g, p)  # labels #0, #1
    b = ConfusionMatrix(K, ignore_index=255, per_image=True).update(p, g)
    assert client.put_counts(a, "w0")["outcome"] == "counted"
    assert client.put_counts(b, "w1")["outcome"] == "counted"
    assert client.put_masks(g, p, "w2")["outcome"] == "counted"  # labels w2/0, w2/1
    assert client.state(run_name).n_images == 6
    assert client.state(run_name) == a + b + local(g, p, "w2")


def _npz(**arrays: object) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return buf.getvalue()


def _zipped(**members: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _corrupted_with_trailing_bytes(g: np.ndarray, p: np.ndarray) -> bytes:
    """A stored npz whose gt member has 8 KiB after its array and a pixel flipped in transit."""
    buf = io.BytesIO()
    np.lib.format.write_array(buf, g)
    body = bytearray(_zipped(**{"gt.npy": buf.getvalue() + bytes(8192), "pred.npy": _npy(p)}))
    body[body.index(b"\x93NUMPY") + len(buf.getvalue()) - g.nbytes] ^= 2  # CRC-32 left as it was
    return bytes(body)


def _bzip2(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_BZIP2) as z:
        for name, a in arrays.items():
            z.writestr(f"{name}.npy", _npy(a))
    return buf.getvalue()


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a)
    return buf.getvalue()


def _bad_bodies() -> list[tuple[str, bytes, str, int, str]]:
    g, p = masks(20)
    other = ConfusionMatrix(K + 1, ignore_index=255, per_image=True).update(g, p, key="o")
    no_rows = ConfusionMatrix(K, ignore_index=255).update(g, p, key="o")
    ign = ConfusionMatrix(K, ignore_index=254, per_image=True).update(g % 19, p % 19, key="o")
    count = ConfusionMatrix(K, ignore_index=255, per_image=True, on_unexpected="count")
    state = local(g, p, "o").to_dict()
    bad_pixels = state | {"pixels": state["pixels"] + 1}
    npy, _, _ = encode_masks(g, p)
    npy_bytes = b"".join(bytes(c) for c in npy)
    huge = npy_record("|u1", (1, 8388608, 4194304), bytes(16), pad=False)  # 2**45 pixels
    return [
        ("malformed JSON", b'{"format": ', CONTENT_JSON, 400, "not valid JSON"),
        ("not a state", b'{"a": 1}', CONTENT_JSON, 400, "not a segiou confusion state"),
        ("altered state", json.dumps(bad_pixels).encode(), CONTENT_JSON, 400, "add up to"),
        ("malformed npz", b"PK\x03\x04 not a zip", CONTENT_STATE_NPZ, 400, "not a readable npz"),
        ("pickled npz", _npz(gt=np.array([object()], dtype=object), pred=p), CONTENT_MASKS_NPZ,
         400, "pickled"),
        ("npz without pred", _npz(gt=g), CONTENT_MASKS_NPZ, 400, "missing ['pred']"),
        ("npz extra member", _npz(gt=g, pred=p, x=g), CONTENT_MASKS_NPZ, 400, "unknown members"),
        ("npz member with bytes after its array", _corrupted_with_trailing_bytes(g, p),
         CONTENT_MASKS_NPZ, 400, "bytes after an array are refused"),
        ("npz of bzip2 members", _bzip2(gt=g, pred=p), CONTENT_MASKS_NPZ, 400,
         "compressed with bzip2, which is not read; an npz holds one .npy array per member"),
        ("truncated npy", npy_bytes[:-100], CONTENT_MASKS_NPY, 400, "truncated"),
        ("not npy", b"hello", CONTENT_MASKS_NPY, 400, "no .npy record"),
        ("negative dimension", npy_record("|u1", (0, -5)) + npy_bytes, CONTENT_MASKS_NPY, 400,
         "the .npy record at byte 0 (gt) declares shape (0, -5)"),
        ("zero itemsize", npy_bytes + npy_record("<U0", (2,)), CONTENT_MASKS_NPY, 400,
         "(names) has dtype '<U0'"),
        ("npy shape of no array", npy_record("|u1", (2**62, 0, 2)) * 2, CONTENT_MASKS_NPY, 400,
         "(gt) declares shape (4611686018427387904, 0, 2), which no array can have"),
        ("npz huge shape",
         _zipped(**{"gt.npy": huge, "pred.npy": npy_record("|u1", (4,), pad=False)}),
         CONTENT_MASKS_NPZ, 400, "npz member 'gt.npy' declares 35,184,372,088,832 bytes"),
        ("state npz huge array", _zipped(**{"__state__.npy": huge}), CONTENT_STATE_NPZ, 400,
         "npz member '__state__.npy' declares 35,184,372,088,832 bytes"),
        ("shapes differ", _npz(gt=g, pred=p[:, :-1]), CONTENT_MASKS_NPZ, 422, "shape"),
        ("float masks", _npz(gt=g.astype(np.float32), pred=p), CONTENT_MASKS_NPZ, 422, "float"),
        ("unexpected values", _npz(gt=g, pred=np.full_like(p, 40)), CONTENT_MASKS_NPZ, 422,
         "40"),
        ("names count", _npz(gt=g, pred=p, names=np.array(["a"])), CONTENT_MASKS_NPZ, 422,
         "1 image name(s) given for a batch of 2 image(s) (masks of shape (2, 24, 40))"),
        ("names count npy", b"".join(bytes(c) for c in encode_masks(g, p, ["a", "b", "c"])[0]),
         CONTENT_MASKS_NPY, 422, "3 image name(s) given for a batch of 2"),
        ("names repeat", _npz(gt=g, pred=p, names=np.array(["a", "a"])), CONTENT_MASKS_NPZ, 400,
         "repeat within the batch"),
        ("other spec", encode_state(other.to_dict())[0], CONTENT_JSON, 422, "different label"),
        ("no per-image rows", encode_state(no_rows.to_dict())[0], CONTENT_JSON, 422,
         "per_image"),
        ("other ignore", encode_state(ign.to_dict())[0], CONTENT_JSON, 422, "ignore"),
        ("other policy", encode_state(count.to_dict())[0], CONTENT_JSON, 422, "on_unexpected"),
        ("content type", b"{}", "text/csv", 415, "content type 'text/csv'"),
        ("no content type", b"{}", "", 415, "content type 'none'"),
        # nested deeper than Python's JSON parser goes: a RecursionError, answered 500 (retried)
        ("JSON nested 10000 deep", _deep(10000), CONTENT_JSON, 400,
         "the body is not valid JSON (nested too deeply"),
        ("state npz nested 10000 deep", _npz(__state__=_skeleton(10000)), CONTENT_STATE_NPZ, 400,
         "member '__state__' is not valid JSON (nested too deeply"),
        ("state npz nested 500 deep", _npz(__state__=_skeleton(500)), CONTENT_STATE_NPZ, 400,
         "member '__state__' is not a state: nested too deeply"),  # parsed, too deep to walk
        ("state field nested 900 deep", json.dumps(state | {"void": json.loads(_deep(900))})
         .encode(), CONTENT_JSON, 400, "not a segiou confusion state: nested too deeply"),
    ]  # fmt: skip


@pytest.mark.parametrize(("what", "body", "ctype", "status", "needle"), _bad_bodies(),
                         ids=[b[0] for b in _bad_bodies()])  # fmt: skip
def test_batch_refusals_change_nothing(
    client, run_name, raw, snapshot, what, body, ctype, status, needle
) -> None:
    make_run(client, run_name)
    g, p = masks(21)
    client.put_masks(g, p, "first")
    before = snapshot(client, run_name)
    headers = {"Content-Type": ctype} if ctype else {}
    code, reply = raw("PUT", f"/v1/runs/{run_name}/batches/k", body, headers)
    assert code == status, reply
    assert needle in reply["message"], reply["message"]
    assert snapshot(client, run_name) == before


@pytest.mark.parametrize("npz", [False, True])
def test_names_into_a_run_without_per_image_rows_are_422_like_such_a_state(
    client, run_name, snapshot, npz: bool
) -> None:
    """README: 422 for masks or a state the run's rules refuse. A state with per-image rows got
    422 here, but the same masks with names got 400 (UsageError)."""
    make_run(client, run_name, per_image=False)
    client.put_masks(*masks(23), "first")
    before = snapshot(client, run_name)
    g, p = masks(24)
    with pytest.raises(RefusedError) as err:
        client.put_masks(g, p, "k", names=["a", "b"], npz=npz)
    assert (err.value.status, err.value.error) == (422, "IncompatibleMatrixError")
    assert "the masks name their images, but the run keeps no per-image rows" in str(err.value)
    with pytest.raises(RefusedError) as err:
        client.put_counts(local(g, p, "k"), "k")  # the same batch as a state
    assert (err.value.status, err.value.error) == (422, "IncompatibleMatrixError")
    assert snapshot(client, run_name) == before


def test_a_state_in_another_id_space_is_refused(client, run_name, snapshot) -> None:
    client.create_run(run_name, "cityscapes", gt_ids="raw", per_image=True)
    before = snapshot(client, run_name)
    g, p = masks(22)
    in_class_ids = ConfusionMatrix("cityscapes", per_image=True).update(g, p, key="k")
    with pytest.raises(RefusedError) as err:
        client.put_counts(in_class_ids, "k")
    assert (err.value.status, err.value.error) == (422, "IncompatibleMatrixError")
    assert "gt_ids is 'raw' here but 'class'" in str(err.value)
    assert snapshot(client, run_name) == before


@pytest.mark.parametrize(
    ("path", "status"),
    [("/v1/runs/no-such-run/batches/k", 404), ("/v1/runs/{run}/batches/-bad", 400),
     ("/v1/runs/{run}/batches/" + "k" * 201, 400), ("/v1/runs/{run}/batches/a%20b", 400),
     ("/v1/runs/{run}/batches/a%2Fb", 404), ("/v1/nothing", 404)],
)  # fmt: skip
def test_unknown_runs_and_bad_keys_are_refused(client, run_name, raw, path, status) -> None:
    # every refusal in one form, routes that do not exist too (a key holding '/' names none)
    make_run(client, run_name)
    body, ctype = encode_state(local(*masks(1), "x").to_dict())
    code, reply = raw("PUT", path.format(run=run_name), body, {"Content-Type": ctype})
    assert code == status, reply
    assert set(reply) == {"error", "message", "status"}, reply
    assert reply["status"] == status
    assert client.run_info(run_name)["batches"] == 0


@pytest.mark.parametrize(
    ("method", "path"),
    [("PUT", "/v1/runs/{run}/batches/b1/"), ("GET", "/v1/runs/"), ("GET", "/v1/runs/{run}/"),
     ("POST", "/v1/runs/{run}/close/"), ("GET", "/healthz/")],
)  # fmt: skip
def test_a_trailing_slash_is_a_404_in_the_refusal_form_never_a_redirect(
    client, run_name, raw, snapshot, method, path
) -> None:
    """Starlette answered 307 with an empty body; curl -X PUT exits 0 without following it."""
    make_run(client, run_name)
    before = snapshot(client, run_name)
    body, ctype = encode_state(local(*masks(1), "x").to_dict())
    code, reply = raw(method, path.format(run=run_name), body, {"Content-Type": ctype})
    assert code == 404, reply
    assert reply["error"] == "NotFoundError"
    assert reply["status"] == 404
    assert f"no route: {method} {path.format(run=run_name)}" in reply["message"]
    assert snapshot(client, run_name) == before


def test_on_unexpected_count_reports_the_values(client, run_name) -> None:
    make_run(client, run_name, on_unexpected="count")
    g, p = masks(30)
    p[0, :2, :3] = 77
    client.put_masks(g, p, "k")
    eager = local(g, p, "k", on_unexpected="count")
    state = client.state(run_name)
    same_state(state, eager)
    assert state.unexpected_pred == {77: 6}


# -- close, delete ------------------------------------------------------------------------------
def test_a_closed_run_refuses_new_batches_but_not_a_duplicate(client, run_name, snapshot) -> None:
    make_run(client, run_name)
    g, p = masks(40)
    client.put_masks(g, p, "k")
    assert client.close(run_name)["run"]["status"] == "closed"
    assert client.close(run_name)["run"]["status"] == "closed"  # closing again: a no-op
    before = snapshot(client, run_name)
    assert client.put_masks(g, p, "k")["outcome"] == "duplicate"
    with pytest.raises(RefusedError) as err:
        client.put_masks(*masks(41), "k2")
    assert err.value.status == 409
    assert "is closed" in str(err.value)
    assert snapshot(client, run_name) == before


def test_delete_removes_the_run_and_its_batches(client, run_name, raw) -> None:
    make_run(client, run_name)
    client.put_masks(*masks(50), "k")
    assert client.delete(run_name) == {"deleted": run_name}
    assert raw("GET", f"/v1/runs/{run_name}")[0] == 404
    assert raw("DELETE", f"/v1/runs/{run_name}")[0] == 404
    make_run(client, run_name)  # a new run of the same name starts empty
    assert client.put_masks(*masks(50), "k")["outcome"] == "counted"
    assert client.run_info(run_name)["batches"] == 1


# -- results ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("preset", "beta"), [("segiou", None), ("cityscapes", 2.0),
                                              ("mmseg", 1.0), ("sklearn_all_labels", None)])  # fmt: skip
def test_result_is_the_eval_json_of_the_eager_state(client, run_name, preset, beta) -> None:
    client.create_run(run_name, "cityscapes", per_image=True)
    eager = ConfusionMatrix("cityscapes", per_image=True)
    for i in range(3):
        g, p = masks(60 + i)
        client.put_masks(g, p, f"k{i}")
        eager.update(g, p, key=f"k{i}")
    got = client.result_json(preset, beta=beta)
    want = evaluate(eager, preset=preset, beta=beta).to_dict()
    got.pop("writer"), want.pop("writer")
    assert got == want
    back = result_from_dict(client.result_json(preset, beta=beta)).to_dict()
    back.pop("writer")
    assert back == want
    assert client.result(preset, beta=beta).miou == pytest.approx(want["summary"]["miou"])


def test_result_with_bootstrap_is_the_eval_json_with_intervals(client, run_name, raw) -> None:
    client.create_run(run_name, "cityscapes", per_image=True)
    eager = ConfusionMatrix("cityscapes", per_image=True)
    for i in range(4):
        g, p = masks(70 + i)
        client.put_masks(g, p, f"k{i}", names=[f"img{i}a", f"img{i}b"])
        eager.update(g, p, key=f"k{i}", names=[f"img{i}a", f"img{i}b"])
    got = client.result_json("cityscapes", bootstrap=200, seed=3)
    want = evaluate_with_intervals(eager, preset="cityscapes", resamples=200, seed=3).to_dict()
    got.pop("writer"), want.pop("writer")
    assert got["intervals"] is not None
    assert got == want
    assert client.result_json("cityscapes")["intervals"] is None  # the default: none
    assert client.result("cityscapes", bootstrap=200, seed=3).intervals is not None
    code, reply = raw("GET", f"/v1/runs/{run_name}/result?bootstrap=-1")
    assert (code, reply["error"]) == (400, "UsageError")
    assert "bootstrap" in reply["message"]
    assert raw("GET", f"/v1/runs/{run_name}/result?bootstrap=100001")[0] == 400


def test_result_with_bootstrap_of_a_run_without_images_is_refused(client, run_name, raw) -> None:
    client.create_run(run_name, "cityscapes", per_image=False)
    client.put_masks(*masks(80), "k0")
    code, reply = raw("GET", f"/v1/runs/{run_name}/result?bootstrap=100")
    assert code == 400
    assert "per_image" in reply["message"]
    assert raw("GET", f"/v1/runs/{run_name}/result")[0] == 200


def test_result_refusals(client, run_name, raw) -> None:
    make_run(client, run_name)
    code, reply = raw("GET", f"/v1/runs/{run_name}/result?preset=best")
    assert (code, reply["error"]) == (400, "UnknownNameError")
    code, reply = raw("GET", f"/v1/runs/{run_name}/result?beta=-1")
    assert code == 400
    assert "beta" in reply["message"]
    code, reply = raw("GET", f"/v1/runs/{run_name}/result?beta=abc")
    assert code == 400
    assert raw("GET", "/v1/runs/nope/result")[0] == 404


def test_images_route_is_the_per_image_csv(client, run_name, raw) -> None:
    make_run(client, run_name)
    eager = ConfusionMatrix(K, ignore_index=255, per_image=True)
    for i in range(3):
        g, p = masks(70 + i, n=3)
        client.put_masks(g, p, f"k{i}")
        eager.update(g, p, key=f"k{i}")
    assert client.images_csv(run_name) == render_per_image_csv(eager)
    for preset in ("mmseg", "cityscapes"):  # scored under the preset the CSV names
        got = client.images_csv(run_name, preset=preset)
        assert got == render_per_image_csv(eager, preset=preset)
        assert got != render_per_image_csv(eager)
    code, reply = raw("GET", f"/v1/runs/{run_name}/images?preset=best")
    assert (code, reply["error"]) == (400, "UnknownNameError")
    client.create_run(run_name + "-flat", K, ignore_index=255)
    code, reply = raw("GET", f"/v1/runs/{run_name}-flat/images")
    assert code == 409
    assert "per_image" in reply["message"]


# -- service routes -----------------------------------------------------------------------------
def test_healthz_docs_and_openapi(raw) -> None:
    code, health = raw("GET", "/healthz")
    assert (code, health["status"]) == (200, "ok")
    code, page = raw("GET", "/docs")
    assert code == 200
    assert b"swagger" in page.lower()
    code, spec = raw("GET", "/openapi.json")
    assert code == 200
    paths = spec["paths"]
    for path in ("/v1/runs", "/v1/runs/{name}", "/v1/runs/{name}/batches/{key}",
                 "/v1/runs/{name}/result", "/v1/runs/{name}/state", "/v1/runs/{name}/images",
                 "/v1/runs/{name}/close", "/healthz", "/metrics"):  # fmt: skip
        assert path in paths


def test_metrics_parse_and_count_batches(client, run_name, raw) -> None:
    def families() -> dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
        code, text = raw("GET", "/metrics")
        assert code == 200
        out: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
        for fam in text_string_to_metric_families(text.decode()):
            for s in fam.samples:
                out.setdefault(fam.name, {})[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    before = families()
    make_run(client, run_name)
    g, p = masks(80)
    client.put_masks(g, p, "k")
    client.put_masks(g, p, "k")
    with pytest.raises(RefusedError):
        client.put_masks(g, p[:, :-1], "k2")
    after = families()

    def batches(m: dict, outcome: str) -> float:
        return m["segiou_batches"][("segiou_batches_total", (("outcome", outcome),))]

    for outcome in ("counted", "duplicate", "refused"):
        assert batches(after, outcome) - batches(before, outcome) == 1
    px = ("segiou_pixels_total", ())
    assert after["segiou_pixels"][px] - before["segiou_pixels"][px] == g.size
    assert after["segiou_open_runs"][("segiou_open_runs", ())] >= 1
    latency = after["segiou_request_duration_seconds"]
    key = ("segiou_request_duration_seconds_count",
           (("method", "PUT"), ("route", "/v1/runs/{name}/batches/{key}")))  # fmt: skip
    assert latency[key] >= 3


def test_a_batch_that_would_pass_the_pixel_limit_is_422_and_counts_nothing(client, run_name,
                                                                           snapshot) -> None:  # fmt: skip
    # a run's pixel total past 2**63 - 1 failed in the database: 503 "retry", retried by the
    # client, and every other batch of the same commit group refused with it
    make_run(client, run_name, per_image=False)
    big = ConfusionMatrix(K, ignore_index=255).to_dict()
    big["counts"][0][0] = 2**62
    big["pixels"] = 2**62
    client.put_counts(ConfusionMatrix.from_dict(big), "a")
    before = snapshot(client, run_name)
    with pytest.raises(RefusedError) as err:  # 2**62 + 2**62 = 2**63: one pixel too many
        client.put_counts(ConfusionMatrix.from_dict(big), "b")
    assert (err.value.status, err.value.error) == (422, "CountOverflowError")
    assert "would pass 2**63 - 1" in str(err.value)
    assert snapshot(client, run_name) == before
    g, p = masks(23)
    client.put_masks(g, p, "c")  # the run still takes batches that fit


def test_a_name_that_is_no_unicode_text_is_refused_not_a_server_error(
    client, run_name, snapshot
) -> None:
    # a lone surrogate travels in JSON ("\ud800") and in a unicode npy; it has no UTF-8 form
    make_run(client, run_name)
    g, p = masks(31, n=1)
    client.put_masks(g, p, "first")
    before = snapshot(client, run_name)
    d = local(g, p, "k1").to_dict()
    d["image_rows"]["names"] = ["img\ud800"]
    d["image_rows"]["given"] = [True]
    for binary in (False, True):
        with pytest.raises(RefusedError) as err:
            client.put_counts(ConfusionMatrix.from_dict(d), "k1", binary=binary)
        assert (err.value.status, err.value.error) == (400, "PayloadError"), err.value
        assert "lone surrogate" in str(err.value)
    for npz in (False, True):  # counted by the server, then refused whole by its digest
        with pytest.raises(RefusedError) as err:
            client.put_masks(g, p, "k2", names=["img\ud800"], npz=npz)
        assert (err.value.status, err.value.error) == (400, "PayloadError"), err.value
        assert "lone surrogate" in str(err.value)
    assert snapshot(client, run_name) == before


def test_ignore_values_in_another_order_are_the_same_settings(client, run_name) -> None:
    # the ignore values act as a set: a state or a run asking for them in another order counts
    # identically (it was refused with 422, and the run with 409)
    client.create_run(run_name, K, ignore_index=[255, 254], per_image=True)
    again = client.create_run(run_name, K, ignore_index=[254, 255], per_image=True)
    assert again["created"] is False
    g, p = masks(41)
    g[0, 0, 0], p[0, 0, 1] = 254, 254
    cm = ConfusionMatrix(K, ignore_index=[254, 255], per_image=True).update(g, p, key="k")
    assert client.put_counts(cm, "k")["outcome"] == "counted"
    assert client.put_counts(cm, "k", binary=True)["outcome"] == "duplicate"
    assert client.state(run_name) == cm


def test_a_server_failure_on_a_batch_is_a_500_in_the_refusal_form_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Any exception other than segiou's own was a bare 500 (plain text), in no metric."""
    import asyncio
    import types
    from concurrent.futures import ThreadPoolExecutor

    from segiou.service._metrics import Metrics
    from segiou.service.app import _Batches

    class Broken:
        def run(self, name: str) -> object:
            return types.SimpleNamespace(name=name, incarnation=1)

        def known(self, *args: object) -> None:
            return None  # not a known retry: prepared (and failing)

        def prepare(self, *args: object) -> None:
            msg = "a bug"
            raise RuntimeError(msg)

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    metrics = Metrics(lambda: 0)
    with ThreadPoolExecutor(1) as pool:
        batches = _Batches(Broken(), metrics, 1 << 20, pool)  # type: ignore[arg-type]
        headers = {b"content-type": CONTENT_JSON.encode()}
        with caplog.at_level("INFO", logger="segiou.service"):
            status, doc = asyncio.run(batches.handle("r", "k", headers, receive))
    assert status == 500
    assert doc["error"] == "RuntimeError"
    assert doc["status"] == 500
    assert "the server failed on it (RuntimeError: a bug); nothing was stored" in doc["message"]
    assert metrics.registry.get_sample_value("segiou_batches_total", {"outcome": "refused"}) == 1
    line = json.loads(caplog.records[-1].getMessage())
    assert (line["outcome"], line["status"], line["error"]) == ("refused", 500, "RuntimeError")
    assert "raise RuntimeError(msg)" in line["traceback"]


def test_listing_runs_parses_no_template_and_run_info_sends_it_unparsed(tmp_path) -> None:
    """GET /v1/runs parsed every run's template (33.6 MB of JSON for 4096 classes, seconds on
    the event loop) only to drop it; GET /v1/runs/{name} parsed and serialised it again."""
    import asyncio
    import dataclasses
    import time

    from segiou.service._ledger import CreateRun, Ledger, run_settings
    from segiou.service._metrics import Metrics
    from segiou.service.app import create_app
    from segiou.service.storage import SQLiteStorage

    async def get(app: object, path: str) -> tuple[int, bytes]:
        sent: list[dict[str, object]] = []

        async def receive() -> dict[str, object]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(),
                 "query_string": b"", "headers": [], "http_version": "1.1", "scheme": "http",
                 "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1), "root_path": ""}  # fmt: skip
        await app(scope, receive, send)  # type: ignore[operator]
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])  # type: ignore[return-value,misc]

    ledger = Ledger(SQLiteStorage(tmp_path / "db.sqlite"))
    try:
        for name in ("plain", "poisoned"):
            settings, template = run_settings({"name": name, "labels": K, "per_image": True})
            ledger.submit(CreateRun(settings, template, time.time())).result(timeout=60)
        run = ledger.runs["poisoned"]  # a template that cannot be parsed: listing never tries
        run.record = dataclasses.replace(run.record, template="{not parsed}")
        app = create_app(ledger, metrics=Metrics(ledger.open_runs), workers=1)
        status, body = asyncio.run(get(app, "/v1/runs"))
        assert status == 200, body
        assert [r["name"] for r in json.loads(body)["runs"]] == ["plain", "poisoned"]
        status, body = asyncio.run(get(app, "/v1/runs/poisoned"))
        assert (status, body.endswith(b', "template": {not parsed}}')) == (200, True)
        status, body = asyncio.run(get(app, "/v1/runs/plain"))
        assert status == 200
        assert json.loads(body) == ledger.runs["plain"].summary()
        assert json.loads(body)["template"] == template.to_dict()
    finally:
        ledger.stop()
        ledger.storage.close()
