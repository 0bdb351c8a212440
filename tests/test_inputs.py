"""Masks as training loops have them: DLPack and __array__ objects, read without a copy."""

from __future__ import annotations

import numpy as np
import pytest
import reference
from numpy.testing import assert_array_equal

from segiou import ConfusionMatrix
from segiou.errors import LabelDeviceError, SegiouError


class DLPackOnly:
    """Exposes only DLPack (as a PyTorch CPU tensor does), on a chosen device type."""

    def __init__(self, a: np.ndarray, device: int = 1) -> None:
        self._a, self._device = a, device
        self.device = "cpu" if device == 1 else f"cuda:{0}"

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (self._device, 0)


class ArrayOnly:
    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __array__(self, dtype=None, copy=None):
        return self._a


def _pair() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    gt = rng.integers(0, 4, (2, 16, 16)).astype(np.uint8)
    pred = rng.integers(0, 4, (2, 16, 16)).astype(np.int64)  # as argmax returns it
    return gt, pred


@pytest.mark.parametrize("wrap", [DLPackOnly, ArrayOnly])
def test_dlpack_and_array_objects_count_as_their_arrays(wrap):
    gt, pred = _pair()
    ref = ConfusionMatrix(4, per_image=True).update(gt, pred, key="a")
    cm = ConfusionMatrix(4, per_image=True).update(wrap(gt), wrap(pred), key="a")
    assert cm == ref


def test_dlpack_is_read_without_a_copy():
    from segiou._arrays import to_numpy

    gt, _ = _pair()
    seen = to_numpy(DLPackOnly(gt), "gt", "update")
    assert np.shares_memory(seen, gt)


def test_a_device_array_is_refused_saying_to_call_cpu():
    gt, pred = _pair()
    cm = ConfusionMatrix(4)
    with pytest.raises(LabelDeviceError, match=r"cuda:0.*\.cpu\(\)") as info:
        cm.update(DLPackOnly(gt, device=2), pred, key="a")
    assert isinstance(info.value, SegiouError)
    assert isinstance(info.value, TypeError)
    assert cm.keys == set()  # nothing counted, the key is free
    cm.update(gt, pred, key="a")
    assert_array_equal(cm.counts, ConfusionMatrix(4).update(gt, pred).counts)


def test_torch_tensors_when_torch_is_installed():
    torch = pytest.importorskip("torch")
    gt, pred = _pair()
    ref = ConfusionMatrix(4).update(gt, pred)
    cm = ConfusionMatrix(4).update(torch.from_numpy(gt), torch.from_numpy(pred))
    assert_array_equal(cm.counts, ref.counts)
    needs_grad = torch.zeros((2, 16, 16), dtype=torch.float32, requires_grad=True)
    with pytest.raises(LabelDeviceError, match="detach"):
        cm.update(gt, needs_grad)


@pytest.mark.parametrize("dtype", [np.uint8, np.int64, np.int32, np.uint16])
@pytest.mark.parametrize("kind", ["matrix", "memmap", "subclass"])
@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_ndarray_subclasses_count_as_plain_arrays(kind, dtype, tmp_path):
    rng = np.random.default_rng(3)
    gt = rng.integers(0, 5, (24, 40)).astype(dtype)
    gt[gt == 4] = 255  # ignored
    pred = rng.integers(0, 4, (24, 40)).astype(dtype)

    class Tagged(np.ndarray):
        pass

    def wrap(a: np.ndarray, name: str):
        if kind == "matrix":
            return np.matrix(a)
        if kind == "subclass":
            return a.view(Tagged)
        m = np.memmap(tmp_path / name, dtype=a.dtype, mode="w+", shape=a.shape)
        m[:] = a
        return m

    cm = ConfusionMatrix(4, ignore_index=255)
    for _ in range(2):  # the first call makes the short way's tables, the second uses them
        cm.update(wrap(gt, "g"), wrap(pred, "p"))
    ref = reference.confusion(gt, pred, 4, ignore=(255,))
    assert_array_equal(cm.counts, 2 * ref.counts)
    assert cm.n_ignored == 2 * ref.n_ignored > 0
    assert cm.n_pixels == 2 * gt.size


@pytest.mark.parametrize("side", ["gt", "pred"])
def test_a_masked_array_is_refused_saying_how_to_fill_it(side):
    gt, pred = _pair()
    arrays = {"gt": gt, "pred": pred}
    arrays[side] = np.ma.masked_array(arrays[side], mask=arrays[side] == 1)
    cm = ConfusionMatrix(4)
    with pytest.raises(LabelDeviceError, match=rf"batch 'a': {side} is a numpy masked array.*"
                       rf"{side}\.filled\(255\).*{side}\.data"):  # fmt: skip
        cm.update(arrays["gt"], arrays["pred"], key="a")
    assert cm.n_pixels == 0
    assert cm.keys == set()


# -- settings given in a form the API does not take: refused at once, saying what to give ------
@pytest.mark.parametrize("threads", [1.5, "2", True, 2.0])
def test_threads_that_are_not_whole_numbers_are_refused_when_made(threads):
    with pytest.raises(SegiouError, match=r"threads=.* is not a whole number"):
        ConfusionMatrix(3, threads=threads)  # (a large batch raised a bare TypeError later)
    assert ConfusionMatrix(3, threads=np.int64(2)).threads == 2


def test_an_ignore_value_given_as_a_0d_array_is_one_value():
    g = np.array([[0, 255], [1, 2]], np.uint8)
    for ignore in (np.array(255), np.uint8(255), [np.array(255)]):
        cm = ConfusionMatrix(3, ignore_index=ignore).update(g, g)
        assert cm.n_ignored == 1
        assert cm.spec.ignore == (255,)
    assert ConfusionMatrix("cityscapes", ignore_index=np.array(254)).spec.ignore == (254,)


def test_an_empty_batch_key_is_refused_with_or_without_per_image_rows():
    g = np.zeros((2, 2), np.uint8)
    for per_image in (False, True):
        cm = ConfusionMatrix(3, per_image=per_image)
        with pytest.raises(SegiouError, match="key='' is empty"):
            cm.update(g, g, key="")
        assert cm.n_pixels == 0


def test_a_convention_averaging_over_an_unknown_set_is_refused_when_made():
    from segiou.conventions import Convention

    with pytest.raises(SegiouError, match="mean_over='everything' is unknown"):
        Convention("x", "everything", float("nan"), "d")  # type: ignore[arg-type]
