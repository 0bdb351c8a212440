"""Wire formats: names and keys, the state's npz form, raw masks as npz or .npy records, and the
digest of a batch's canonical form. No server."""

from __future__ import annotations

import io
import json
import re
import zipfile
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from service_support import npy_record

from segiou import ConfusionMatrix
from segiou.errors import PayloadError, UsageError
from segiou.service import wire
from segiou.service.wire import (
    CONTENT_JSON,
    CONTENT_MASKS_NPY,
    CONTENT_MASKS_NPZ,
    CONTENT_STATE_NPZ,
    canonical_state,
    check_key,
    check_run_name,
    decode_masks,
    decode_state,
    encode_masks,
    encode_state,
    prefers,
    state_digest,
)
from segiou.testing.strategies import label_pairs


@pytest.mark.parametrize("name", ["a", "val-2024.11_x", "A" * 64, "0"])
def test_valid_run_names(name: str) -> None:
    assert check_run_name(name) == name


@pytest.mark.parametrize("name", ["", "-a", ".a", "a b", "a/b", "A" * 65, "é", "a\n", None, 3])
def test_invalid_run_names(name: object) -> None:
    with pytest.raises(UsageError, match="run name"):
        check_run_name(name)


@pytest.mark.parametrize("key", ["k", "rank0:step-12", "a@b+c=d", "x" * 200])
def test_valid_keys(key: str) -> None:
    assert check_key(key) == key


@pytest.mark.parametrize("key", ["", "_k", "a/b", "a b", "x" * 201, "a?b", "a#b", "k\x00"])
def test_invalid_keys(key: str) -> None:
    with pytest.raises(UsageError, match="batch key"):
        check_key(key)


def _state(seed: int, labels: object = 19, **options: object) -> ConfusionMatrix:
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 19, (3, 5, 7), dtype=np.uint8)
    p = rng.integers(0, 21, (3, 5, 7), dtype=np.uint8)
    g[0, 0, :2] = 255
    opts = {"ignore_index": 255, "per_image": True, "on_unexpected": "count"} | options
    return ConfusionMatrix(labels, **opts).update(g, p, key=f"k{seed}")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cm",
    [_state(0), _state(1, per_image=False), ConfusionMatrix(4, per_image=True),
     _state(2, "cityscapes", ignore_index=None, gt_ids="class")],
    ids=["per-image", "no rows", "empty", "cityscapes"],
)  # fmt: skip
def test_the_npz_form_of_a_state_round_trips(cm: ConfusionMatrix) -> None:
    body, ctype = encode_state(cm.to_dict(), binary=True)
    assert ctype == CONTENT_STATE_NPZ
    back = decode_state(body, ctype)
    assert back == cm
    as_json = decode_state(*encode_state(cm.to_dict()))
    assert canonical_state(back) == canonical_state(as_json) == canonical_state(cm)


@settings(max_examples=15)
@given(pair=label_pairs(max_classes=30, unexpected=True), per_image=st.booleans())
def test_any_state_round_trips_through_both_forms(pair, per_image: bool) -> None:  # type: ignore[no-untyped-def]
    cm = ConfusionMatrix(pair.num_classes, ignore_index=pair.ignore or None, per_image=per_image,
                         on_unexpected="count").update(pair.gt, pair.pred, key="k")  # fmt: skip
    for binary in (False, True):
        body, ctype = encode_state(cm.to_dict(), binary=binary)
        assert decode_state(body, ctype) == cm


def test_pack_keeps_json_what_is_not_a_rectangle_of_int64() -> None:
    doc = {"m": [[1, 2], [3, 4]], "bools": [True, 1], "empty": [], "big": [2**70],
           "ragged": [[1], [2, 3]], "names": ["a", "b"], "n": 3}  # fmt: skip
    arrays: dict[str, np.ndarray] = {}
    packed = wire._pack(doc, arrays)
    assert packed["m"] == {"__npz__": "a0"}
    assert packed["ragged"] == [{"__npz__": "a1"}, {"__npz__": "a2"}]  # row by row
    for kept in ("bools", "empty", "big", "names", "n"):  # bools stay bools, 2**70 exact
        assert packed[kept] == doc[kept]
        assert type(packed[kept]) is type(doc[kept])
    assert packed["bools"][0] is True
    assert wire._unpack(packed, arrays, set(), "x") == doc


def test_a_state_npz_with_stray_or_missing_members_is_refused() -> None:
    body, _ = encode_state(_state(3).to_dict(), binary=True)
    with np.load(io.BytesIO(body)) as z:
        members = {n: z[n] for n in z.files}
    for change, needle in ((lambda m: m.pop("a0"), "not there"),
                           (lambda m: m.update(zz=np.zeros(2, np.int64)), "not referred to"),
                           (lambda m: m.pop("__state__"), "__state__"),
                           (lambda m: m.update(a0=m["a0"].astype(np.float64)), "not int64")):  # fmt: skip
        bad = dict(members)
        change(bad)
        buf = io.BytesIO()
        np.savez(buf, **bad)
        with pytest.raises(PayloadError, match=needle):
            decode_state(buf.getvalue(), CONTENT_STATE_NPZ)


def test_a_state_npz_referring_to_one_member_many_times_is_refused() -> None:
    # each reference expanded the member again before anything was checked: a 728-byte body
    # of 150 KB inflated members took the server from 187 to 461 MB (quadratic in the size)
    body, _ = encode_state(_state(3).to_dict(), binary=True)
    with np.load(io.BytesIO(body)) as z:
        members = {n: z[n] for n in z.files}
    doc = json.loads(bytes(members["__state__"]).decode())
    doc["__npz_copies__"] = [{"__npz__": "a0"}] * 3  # a0 is also the counts' member
    members["__state__"] = np.frombuffer(json.dumps(doc).encode(), np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **members)
    with pytest.raises(PayloadError, match="refers to npz member 'a0' more than once"):
        decode_state(buf.getvalue(), CONTENT_STATE_NPZ)


@pytest.mark.parametrize(
    ("gt", "pred"),
    [(np.arange(24, dtype=np.uint8).reshape(2, 3, 4) % 5, np.ones((2, 3, 4), np.uint8)),
     (np.arange(12, dtype=">u2").reshape(3, 4) % 5, np.arange(12, dtype="<i4").reshape(3, 4) % 4),
     (np.eye(5, dtype=bool), np.ones((5, 5), bool)),
     (np.asfortranarray(np.arange(20).reshape(4, 5) % 3), np.zeros((4, 5), np.int64)),
     (np.zeros((0, 3), np.uint8), np.zeros((0, 3), np.uint8))],
    ids=["uint8", "big-endian", "bool", "fortran", "empty"],
)  # fmt: skip
@pytest.mark.parametrize("npz", [False, True])
def test_masks_round_trip(gt: np.ndarray, pred: np.ndarray, npz: bool) -> None:
    names = ["first", "second"] if gt.ndim == 3 else None
    chunks, length, ctype = encode_masks(gt, pred, names, npz=npz)
    body = bytearray(b"".join(bytes(c) for c in chunks))
    assert len(body) == length
    g, p, n = decode_masks(body, ctype)
    np.testing.assert_array_equal(g, gt)
    np.testing.assert_array_equal(p, pred)
    assert (g.dtype, p.dtype, n) == (gt.dtype, pred.dtype, names)
    if not npz and g.size:
        assert ctype == CONTENT_MASKS_NPY
        assert np.shares_memory(g, np.frombuffer(body, np.uint8))  # read in place, not copied


def test_npy_records_start_at_multiples_of_64() -> None:
    chunks, _, _ = encode_masks(np.zeros(5, np.uint8), np.zeros(3, np.uint8))
    body = b"".join(bytes(c) for c in chunks)
    assert len(body) % 64 == 0
    assert body[len(body) // 2 :].startswith(b"\x93NUMPY")


def test_malformed_npy_records_are_refused() -> None:
    chunks, _, _ = encode_masks(np.zeros((2, 2), np.uint8), np.zeros((2, 2), np.uint8))
    body = b"".join(bytes(c) for c in chunks)
    chunks, _, _ = encode_masks(np.zeros((20, 20), np.uint8), np.zeros((20, 20), np.uint8))
    big = b"".join(bytes(c) for c in chunks)
    head = io.BytesIO()
    np.lib.format.write_array_header_2_0(head, {"descr": "|O", "fortran_order": False,
                                                "shape": (1,)})  # fmt: skip
    objects = head.getvalue() + bytes(8)
    huge = io.BytesIO()  # 2**32 x 2**32 elements: a product that wraps to 0 in int64
    np.lib.format.write_array_header_2_0(huge, {"descr": "|u1", "fortran_order": False,
                                                "shape": (2**32, 2**32)})  # fmt: skip
    cases = {
        "declares 18446744073709551616 bytes": 2 * huge.getvalue(),
        "Python objects": objects + body,
        "no .npy record at byte": body + b"trailing",
        "expected 2 or 3": body[: len(body) // 2],
        "truncated": big[:-100],
        "malformed": b"\x93NUMPY\x02\x00\x10\x00\x00\x00{'descr': nonsense}\n",
    }
    for needle, content in cases.items():
        with pytest.raises(PayloadError, match=needle):
            decode_masks(content, CONTENT_MASKS_NPY)


def _zip(**members: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


_OK = npy_record("|u1", (1, 2, 2), bytes(4))
_MEMBER = npy_record("|u1", (1, 2, 2), bytes(4), pad=False)  # as np.savez writes it: no padding


@pytest.mark.parametrize(
    ("body", "ctype", "needle"),
    [(npy_record("|u1", (0, -5)) + _OK, CONTENT_MASKS_NPY, "record at byte 0 (gt) declares shape (0, -5)"),
     (npy_record("|u1", (-1,)) + _OK, CONTENT_MASKS_NPY, "(gt) declares shape (-1,), with a negative"),
     (_OK + _OK + npy_record("<U0", (1,)), CONTENT_MASKS_NPY, "(names) has dtype '<U0'"),
     (npy_record("|V0", (1, 2, 2)) + _OK, CONTENT_MASKS_NPY, "(gt) has dtype '|V0'"),
     (_OK + npy_record("|S0", (1, 2, 2)), CONTENT_MASKS_NPY, "(pred) has dtype '|S0'"),
     (_zip(**{"gt.npy": npy_record("|u1", (1, 8388608, 4194304), bytes(16), pad=False),
              "pred.npy": _MEMBER}),
      CONTENT_MASKS_NPZ,
      "gt.npy' declares 35,184,372,088,832 bytes of data, but the member holds 16 after its"),
     (_zip(**{"gt.npy": npy_record("|u1", (3, -2), pad=False), "pred.npy": _MEMBER}),
      CONTENT_MASKS_NPZ,
      "member 'gt.npy' declares shape (3, -2)"),
     (_zip(**{"gt.npy": _MEMBER, "pred.npy": npy_record("<U0", (4,), pad=False)}),
      CONTENT_MASKS_NPZ,
      "member 'pred.npy' has dtype '<U0'"),
     (_zip(**{"__state__.npy": npy_record("|u1", (2**40,), b"{}", pad=False)}), CONTENT_STATE_NPZ,
      "member '__state__.npy' declares 1,099,511,627,776 bytes"),
     # no data, but a shape numpy cannot build: reshape raised (a 500, retried by the client)
     (npy_record("|u1", (2**62, 0, 2)) * 2, CONTENT_MASKS_NPY,
      "(gt) declares shape (4611686018427387904, 0, 2), which no array can have"),
     (_OK + npy_record("|u1", (0, 2**64)), CONTENT_MASKS_NPY,
      "(pred) declares shape (0, 18446744073709551616), which no array can have"),
     (_OK + _OK + npy_record("<U4", (3037000500, 3037000500, 0)), CONTENT_MASKS_NPY,
      "(names) declares shape (3037000500, 3037000500, 0), which no array can have"),
     (_zip(**{"gt.npy": npy_record("|u1", (2**62, 0, 2), pad=False), "pred.npy": _MEMBER}),
      CONTENT_MASKS_NPZ,
      "member 'gt.npy' declares shape (4611686018427387904, 0, 2), which no array can have"),
     (_zip(**{"__state__.npy": npy_record("|u1", (0, 2**64), pad=False)}), CONTENT_STATE_NPZ,
      "member '__state__.npy' declares shape (0, 18446744073709551616), which no array")],
    ids=["negative", "minus-one", "U0", "V0", "S0", "npz-huge", "npz-negative", "npz-U0",
         "state-huge", "npy-gt-no-array", "npy-pred-no-array", "npy-names-no-array",
         "npz-no-array", "state-no-array"],
)  # fmt: skip
def test_malformed_shapes_and_dtypes_are_payload_errors_naming_the_record(
    body: bytes, ctype: str, needle: str
) -> None:
    """These crashed the server (a bare 500: ValueError in reshape or frombuffer, MemoryError
    in np.load for a shape the body cannot hold; later a 500 the client retried for shapes of
    no data that numpy cannot build)."""
    decode = decode_state if ctype == CONTENT_STATE_NPZ else decode_masks
    with pytest.raises(PayloadError, match=re.escape(needle)) as err:
        decode(body, ctype, where="batch 'k'")
    assert err.value.status == 400
    assert str(err.value).startswith("batch 'k': ")


def test_masks_declaring_more_images_than_their_body_has_bytes_are_refused() -> None:
    """256 bytes of masks of shape (2**40, 0, 8) declare 2**40 images of no pixels: the server
    made a label per image (11 GB before it was killed), then a 500 MemoryError."""
    for shape in [(2**40, 0, 8), (257, 0, 8)]:
        body = npy_record("|u1", shape) * 2
        assert len(body) == 256
        needle = (f"'gt' of shape {shape} declares {shape[0]:,} images in 0 bytes of data and a "
                  "body of 256 bytes; a batch holds at most one image per byte")  # fmt: skip
        with pytest.raises(PayloadError, match=re.escape(needle)) as err:
            decode_masks(body, CONTENT_MASKS_NPY, where="batch 'k'")
        assert err.value.status == 400
    npz = _zip(**{"gt.npy": _MEMBER, "pred.npy": npy_record("|u1", (2**40, 0, 8), pad=False)})
    with pytest.raises(PayloadError, match=r"'pred' of shape \(1099511627776, 0, 8\) declares"):
        decode_masks(npz, CONTENT_MASKS_NPZ)
    gt, _, _ = decode_masks(npy_record("|u1", (256, 0, 8)) * 2, CONTENT_MASKS_NPY)  # one a byte
    assert gt.shape == (256, 0, 8)
    many = np.zeros((10**5, 1, 1), np.uint8)  # images with pixels pass, however well the npz
    buf = io.BytesIO()  # compresses them
    np.savez_compressed(buf, gt=many, pred=many.astype(bool))
    assert len(buf.getvalue()) < 10**4
    gt, pred, _ = decode_masks(buf.getvalue(), CONTENT_MASKS_NPZ)
    assert gt.shape == pred.shape == (10**5, 1, 1)


def test_npz_members_are_read_as_np_load_reads_them() -> None:
    g = np.arange(24, dtype=np.uint8).reshape(2, 3, 4) % 5
    for save in (np.savez, np.savez_compressed):
        buf = io.BytesIO()
        save(buf, gt=np.asfortranarray(g), pred=g.astype(">i4"), names=np.array(["a", "b"]))
        gt, pred, names = decode_masks(buf.getvalue(), CONTENT_MASKS_NPZ)
        assert (gt == g).all()
        assert (pred == g).all()
        assert names == ["a", "b"]
        assert gt.flags.f_contiguous
        assert pred.dtype == ">i4"
        assert gt.flags.writeable
    for body, needle in [
        (_zip(gt=_MEMBER, **{"pred.npy": _MEMBER}), "member 'gt' is not named <name>.npy"),
        (_zip(**{"gt.npy": _MEMBER[:-1], "pred.npy": _MEMBER}), "declares 4 bytes of data, but"),
    ]:  # fmt: skip
        with pytest.raises(PayloadError, match=needle):
            decode_masks(body, CONTENT_MASKS_NPZ)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_BZIP2) as z:
        z.writestr("gt.npy", _MEMBER)
    with pytest.raises(PayloadError, match="compressed with bzip2, which is not read"):
        decode_masks(buf.getvalue(), CONTENT_MASKS_NPZ)
    body = bytearray(_zip(**{"gt.npy": _MEMBER, "pred.npy": _MEMBER}))
    body[body.index(b"\x93NUMPY") + 128] ^= 1  # the data no longer matches its CRC-32
    with pytest.raises(PayloadError, match=r"not a readable npz.*Bad CRC-32"):
        decode_masks(bytes(body), CONTENT_MASKS_NPZ)


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
@pytest.mark.parametrize("trailing", [1, 10, 8192])
def test_an_npz_member_is_read_to_its_end_and_holds_nothing_after_its_array(
    compression: int, trailing: int
) -> None:
    """zipfile checks a member's CRC-32 only when the member is read to its end; the reader
    stopped after the array, so behind bytes after it a pixel corrupted in transit was counted."""
    gt = np.zeros((1, 64, 64), np.uint8)
    member = io.BytesIO()
    np.lib.format.write_array(member, gt)
    start = len(member.getvalue()) - gt.nbytes  # the first pixel
    for extra, flip in [(b"", True), (bytes(trailing), False), (bytes(trailing), True)]:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression) as z:
            z.writestr("gt.npy", member.getvalue() + extra)
            z.writestr("pred.npy", member.getvalue())
        body = bytearray(buf.getvalue())
        if flip and compression == zipfile.ZIP_STORED:  # CRC-32 left as it was
            body[body.index(b"\x93NUMPY") + start] ^= 2
        elif flip:  # deflated: a stored pixel cannot be found; flip the CRC-32 itself
            for sig, at in ((b"PK\x03\x04", 14), (b"PK\x01\x02", 16)):
                pos = body.index(sig)  # gt.npy is the first local header and directory entry
                body[pos + at] ^= 1
        with pytest.raises(PayloadError) as err:
            decode_masks(bytes(body), CONTENT_MASKS_NPZ, where="batch 'k'")
        assert err.value.status == 400
        if not extra:
            assert "Bad CRC-32 for file 'gt.npy'" in str(err.value)
        else:
            assert (
                f"member 'gt.npy' declares 4,096 bytes of data, but the member holds "
                f"{4096 + trailing:,} after its header (bytes after an array are refused"
            ) in str(err.value)
    buf = io.BytesIO()  # no bytes after, no flip: read
    with zipfile.ZipFile(buf, "w", compression) as z:
        z.writestr("gt.npy", member.getvalue())
        z.writestr("pred.npy", member.getvalue())
    assert (decode_masks(buf.getvalue(), CONTENT_MASKS_NPZ)[0] == gt).all()


_SAY_WHAT_TO_SEND = (
    "an npz holds one .npy array per member, named <name>.npy, stored or deflated: what "
    "np.savez and np.savez_compressed write"
)


@pytest.mark.parametrize(
    ("members", "compression", "needle"),
    [({"gt.npy": _MEMBER, "pred.npy": _MEMBER}, zipfile.ZIP_BZIP2,
      "npz member 'gt.npy' is compressed with bzip2, which is not read"),
     ({"gt.npy": _MEMBER, "pred.npy": _MEMBER}, zipfile.ZIP_LZMA,
      "npz member 'gt.npy' is compressed with LZMA, which is not read"),
     ({"gt": _MEMBER, "pred": _MEMBER}, zipfile.ZIP_STORED,
      "npz member 'gt' is not named <name>.npy"),
     ({"gt.npy": _MEMBER, ".npy": _MEMBER}, zipfile.ZIP_DEFLATED,
      "npz member '.npy' is not named <name>.npy"),
     ({"gt.npy": _MEMBER, "pred.npy": _MEMBER, "sub/": b""}, zipfile.ZIP_STORED,
      "npz member 'sub/' is not named <name>.npy")],
    ids=["bzip2", "lzma", "no-suffix", "no-name", "directory"],
)  # fmt: skip
def test_an_npz_other_than_np_savez_writes_is_refused_saying_what_to_send(
    members: dict[str, bytes], compression: int, needle: str
) -> None:
    """np.load reads these (and the old server counted them): the refusal says what a body may
    hold instead, as the README does."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    for ctype in (CONTENT_MASKS_NPZ, CONTENT_STATE_NPZ):
        decode = decode_state if ctype == CONTENT_STATE_NPZ else decode_masks
        with pytest.raises(PayloadError) as err:
            decode(buf.getvalue(), ctype, where="batch 'k'")
        assert err.value.status == 400
        assert str(err.value) == f"batch 'k': {needle}; {_SAY_WHAT_TO_SEND}"


def test_names_must_be_a_unicode_vector() -> None:
    buf = io.BytesIO()
    np.savez(buf, gt=np.zeros(2, np.uint8), pred=np.zeros(2, np.uint8), names=np.zeros(2))
    with pytest.raises(PayloadError, match="1-D unicode"):
        decode_masks(buf.getvalue(), CONTENT_MASKS_NPZ)
    with pytest.raises(UsageError, match="sequence of str"):
        encode_masks(np.zeros(2), np.zeros(2), names="ab")


def test_the_digest_is_of_the_content_not_of_its_form() -> None:
    rng = np.random.default_rng(5)
    g = rng.integers(0, 19, (2, 6, 6), dtype=np.uint8)
    p = rng.integers(0, 19, (2, 6, 6), dtype=np.uint8)
    a = ConfusionMatrix(19, per_image=True).update(g, p, key="k")
    b = ConfusionMatrix(19, per_image=True).update(g.astype(np.int32), p, key="k")
    c = ConfusionMatrix(19, per_image=True).update(g, p, key="other")
    assert state_digest(canonical_state(a)) == state_digest(canonical_state(b))
    assert state_digest(canonical_state(a)) != state_digest(canonical_state(c))
    text = encode_state(a.to_dict())[0].decode().replace(",", ", ")  # other spacing, same state
    assert canonical_state(decode_state(text.encode(), CONTENT_JSON)) == canonical_state(a)


def test_wrong_content_types_are_415() -> None:
    with pytest.raises(PayloadError) as err:
        decode_state(b"{}", CONTENT_MASKS_NPZ)
    assert err.value.status == 415
    with pytest.raises(PayloadError) as err:
        decode_masks(b"", CONTENT_JSON)
    assert err.value.status == 415


@pytest.mark.parametrize(
    ("header", "npz"),
    [
        (CONTENT_STATE_NPZ, True),
        (f"application/json;q=0.5, {CONTENT_STATE_NPZ}", True),
        (f" {CONTENT_STATE_NPZ.upper()} ; Q=1", True),
        (f"{CONTENT_STATE_NPZ}, */*;q=0.1", True),
        (f"{CONTENT_STATE_NPZ};q=0.5, application/json;q=0.5", True),  # a tie: the one named
        (f"application/json, {CONTENT_STATE_NPZ};q=0.9", False),  # the client prefers JSON
        (f"{CONTENT_STATE_NPZ};q=0.5, */*", False),  # JSON through the wildcard, at 1
        (f"{CONTENT_STATE_NPZ};q=0.5, application/*;q=0.8", False),
        (f"{CONTENT_STATE_NPZ};q=0", False),
        (f"{CONTENT_STATE_NPZ};q=0.0, application/json", False),
        (f"{CONTENT_STATE_NPZ};q=x", False),
        (f"{CONTENT_STATE_NPZ};q=nan", False),
        (f"{CONTENT_STATE_NPZ}-not", False),
        ("*/*", False),
        ("application/*", False),
        ("", False),
    ],
)
def test_prefers_reads_media_ranges_and_quality(header: str, npz: bool) -> None:
    assert prefers(header, CONTENT_STATE_NPZ, CONTENT_JSON) is npz


def _surrogate_state() -> ConfusionMatrix:
    """A state naming an image "img\\ud800" (update refuses it: made from an edited state)."""
    g = np.zeros((1, 4, 4), np.uint8)
    d = ConfusionMatrix(3, per_image=True).update(g, g, key="k", names=["img"]).to_dict()
    d["image_rows"]["names"] = ["img\ud800"]
    return ConfusionMatrix.from_dict(d)


def test_a_name_that_is_no_unicode_text_is_a_payload_error_not_a_crash() -> None:
    cm = _surrogate_state()  # a saved state with it still loads (and round-trips)
    with pytest.raises(PayloadError, match="lone surrogate") as err:
        canonical_state(cm)
    assert err.value.status == 400
    for binary in (False, True):  # the wire forms carry it (JSON escapes it): the digest refuses
        with pytest.raises(PayloadError, match="lone surrogate"):
            canonical_state(decode_state(*encode_state(cm.to_dict(), binary=binary)))


def test_equal_states_merged_in_either_order_have_one_digest() -> None:
    rng = np.random.default_rng(8)
    g = rng.integers(0, 19, (2, 6, 6), dtype=np.uint8)
    p = rng.integers(0, 21, (2, 6, 6), dtype=np.uint8)
    opts: dict[str, Any] = {"per_image": True, "on_unexpected": "count"}
    x = ConfusionMatrix(19, **opts).update(g, p, key="a", names=["i2", "i1"])
    y = ConfusionMatrix(19, **opts).update(p % 19, g, key="b", names=["i0", "i3"])
    z = ConfusionMatrix(19, **opts).update(g[:1], g[:1], key="c")  # a label, not a name
    one, two = (x + y) + z, z + (y + x)
    assert one == two
    assert one.images.names != two.images.names  # the rows are in another order
    assert state_digest(canonical_state(one)) == state_digest(canonical_state(two))
    assert canonical_state(one) == canonical_state(decode_state(*encode_state(two.to_dict())))
    assert state_digest(canonical_state(one)) != state_digest(canonical_state(x + y))


def test_equal_version_1_states_merged_in_either_order_have_one_digest() -> None:
    g = np.zeros((1, 4, 4), np.uint8)
    d = ConfusionMatrix(3, per_image=True).update(g, g, key="a", names=["i1"]).to_dict()
    d["version"] = 1
    d["image_rows"] = {"names": ["i1"], "tp": [[16, 0, 0]], "fp": [[0, 0, 0]],
                       "fn": [[0, 0, 0]], "ignored": [0], "unexpected": [0]}  # fmt: skip
    x = ConfusionMatrix.from_dict(d)
    y = ConfusionMatrix(3, per_image=True).update(g + 1, g + 1, key="b", names=["i0"])
    assert (x + y) == (y + x)
    assert canonical_state(x + y) == canonical_state(y + x)


@pytest.mark.parametrize("name", ["__npz__", "__npz_escaped__", "a"])
def test_an_image_named_like_an_npz_reference_round_trips(name: str) -> None:
    g = np.zeros((1, 4, 4), np.uint8)
    cm = ConfusionMatrix(3, per_image=True, boundary="1px").update(g, g, key="k", names=[name])
    assert list(cm.to_dict()["boundary"]["images"]) == [name]  # {name: rows}
    back = decode_state(*encode_state(cm.to_dict(), binary=True))
    assert back == cm
    assert canonical_state(back) == canonical_state(cm)


def test_pack_escapes_what_would_read_as_a_reference_and_reads_older_bodies() -> None:
    docs: list[dict[str, Any]] = [
        {"m": {"__npz__": [1, 2]}},
        {"m": {"__npz__": "a0"}},
        {"m": {"__npz_escaped__": {"__npz__": "x"}}},
        {"m": {"__npz_escaped__": 1, "b": [[1]]}},
    ]
    for doc in docs:
        arrays: dict[str, np.ndarray] = {}
        assert wire._unpack(wire._pack(doc, arrays), arrays, set(), "x") == doc
    # what older writers sent (no such dicts escaped): a reference reads as before
    assert wire._unpack({"m": {"__npz__": "a0"}}, {"a0": np.arange(2)}, set(), "x") == {"m": [0, 1]}


@pytest.mark.parametrize(("k", "images"), [(1024, 0), (150, 200)])
def test_the_npz_form_is_deflated_and_smaller_than_json(k: int, images: int) -> None:
    """The npz form was documented as the smaller one, but its int64 members were stored: 8
    bytes a count where JSON takes 2 for a 0 (4,096 classes: 134 MB against 33.6 MB)."""
    cm = ConfusionMatrix(k, per_image=True)
    if images:
        g = np.random.default_rng(0).integers(0, k, (images, 16, 16)).astype(np.uint16)
        cm.update(g, np.roll(g, 1), key="b", names=[f"img-{i}" for i in range(images)])
    as_json, _ = encode_state(cm.to_dict())
    body, ctype = encode_state(cm.to_dict(), binary=True)
    with zipfile.ZipFile(io.BytesIO(body)) as z:  # what np.savez_compressed writes
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}
    assert len(body) < len(as_json) / 3
    assert decode_state(body, ctype) == cm
    with np.load(io.BytesIO(body)) as z:  # numpy reads it too
        assert "__state__" in z.files
