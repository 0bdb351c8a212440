"""Tests of segiou.sets: label-set Jaccard / Dice and multi-label indicator matrices."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from segiou.errors import SegiouError, ShapeMismatchError
from segiou.geometry.sets import (
    AVERAGES,
    IndicatorMatrixError,
    LabelSetError,
    SetOptionError,
    multilabel_dice,
    multilabel_jaccard,
    set_dice,
    set_jaccard,
    set_overlap,
)

# --------------------------------------------------------------------------------------------
# Plain references (no segiou)
# --------------------------------------------------------------------------------------------


def ref_set_scores(a, b, *, dedupe=True, empty=1.0):
    """(jaccard, dice) via Python sets, or Counters for multisets (& is min, | is max)."""
    if dedupe:
        inter, union, size_a, size_b = (
            len(set(a) & set(b)),
            len(set(a) | set(b)),
            len(set(a)),
            len(set(b)),
        )
    else:
        ca, cb = Counter(a), Counter(b)
        inter, union = sum((ca & cb).values()), sum((ca | cb).values())
        size_a, size_b = sum(ca.values()), sum(cb.values())
    if union == 0:
        return empty, empty
    return inter / union, 2 * inter / (size_a + size_b)


def ref_multilabel(gt, pred, average, empty=math.nan, dice=False):
    """Loops over classes or samples; nan scores are left out of the means."""
    gt, pred = np.asarray(gt).astype(bool).tolist(), np.asarray(pred).astype(bool).tolist()
    n, k = len(gt), (len(gt[0]) if gt else 0)

    def score(pairs):
        tp = sum(g and p for g, p in pairs)
        fp = sum(p and not g for g, p in pairs)
        fn = sum(g and not p for g, p in pairs)
        num = 2 * tp if dice else tp
        return (num / (num + fp + fn) if num + fp + fn else empty), tp + fn

    def mean(values, weights=None):
        kept = [
            (v, w)
            for v, w in zip(values, weights or [1] * len(values), strict=True)
            if not math.isnan(v)
        ]
        if weights is not None and sum(w for _, w in kept) > 0:
            return sum(v * w for v, w in kept) / sum(w for _, w in kept)
        return sum(v for v, _ in kept) / len(kept) if kept else math.nan

    if average == "samples":
        return mean([score(list(zip(gt[i], pred[i], strict=True)))[0] for i in range(n)])
    if average == "micro":
        return score([(gt[i][c], pred[i][c]) for i in range(n) for c in range(k)])[0]
    per_class = [score([(gt[i][c], pred[i][c]) for i in range(n)]) for c in range(k)]
    if average is None:
        return np.array([s for s, _ in per_class])
    if average == "macro":
        return mean([s for s, _ in per_class])
    return mean([s for s, _ in per_class], [w for _, w in per_class])


# --------------------------------------------------------------------------------------------
# Label sets: worked examples
# --------------------------------------------------------------------------------------------


def test_worked_example():
    o = set_overlap(["cat", "dog", "bird"], ["dog", "bird", "fish"])
    assert o.intersection == ("dog", "bird")
    assert o.union == ("cat", "dog", "bird", "fish")
    assert (o.n_intersection, o.n_union, o.size_gt, o.size_pred) == (2, 4, 3, 3)
    assert o.jaccard == 0.5
    assert o.dice == 4 / 6
    assert set_jaccard(["cat", "dog", "bird"], ["dog", "bird", "fish"]) == 0.5
    assert set_dice(["cat", "dog", "bird"], ["dog", "bird", "fish"]) == 4 / 6


def test_empty_sets_convention():
    assert set_jaccard([], []) == 1.0  # by convention
    assert set_dice(set(), set()) == 1.0
    assert set_jaccard([], [], empty=0.0) == 0.0
    assert math.isnan(set_jaccard([], [], empty=math.nan))
    assert set_jaccard([], ["a"]) == 0.0
    assert set_dice(["a"], []) == 0.0


def test_options_lower_and_dedupe():
    assert set_jaccard(["Cat", "DOG"], ["cat", "dog"]) == 0.0
    assert set_jaccard(["Cat", "DOG"], ["cat", "dog"], lower=True) == 1.0
    assert set_jaccard(["a", "a", "b"], ["a", "b"]) == 1.0  # sets: duplicates ignored
    assert set_jaccard(["a", "a", "b"], ["a", "b"], dedupe=False) == 2 / 3
    o = set_overlap(["a", "a", "b"], ["a", "c", "a", "a"], dedupe=False)
    assert o.intersection == ("a", "a")
    assert o.union == ("a", "a", "a", "b", "c")
    assert o.dice == 2 * 2 / (3 + 4)
    # lower applies to strings only; other hashables are compared as they are
    assert (
        set_jaccard([1, (2, 3), "X", frozenset({4})], ["x", 1, (2, 3), frozenset({4})], lower=True)
        == 1.0
    )


def test_any_hashable_labels():
    assert set_jaccard(range(10), range(5, 15)) == 5 / 15
    assert set_jaccard({(0, 1), (1, 1)}, [(1, 1)]) == 0.5
    assert set_jaccard(iter("abc"), ["a"]) == 1 / 3  # an iterator of single characters is fine


def test_label_set_errors():
    with pytest.raises(LabelSetError, match=r"gt is a single string 'cat,dog'.*gt.split"):
        set_jaccard("cat,dog", ["cat"])
    with pytest.raises(LabelSetError, match=r"pred\[1\] = \['b'\] is an unhashable list"):
        set_jaccard(["a"], ["a", ["b"]])
    with pytest.raises(LabelSetError, match=r"pred is a int, not an iterable"):
        set_dice(["a"], 5)
    with pytest.raises(SetOptionError, match=r"empty=-1 is outside \[0, 1\]"):
        set_jaccard([], [], empty=-1)
    with pytest.raises(TypeError):  # LabelSetError is a TypeError
        set_jaccard(b"ab", ["a"])
    with pytest.raises(SegiouError):
        set_jaccard("ab", ["a"])


@pytest.mark.parametrize("empty", ["one", None, [1.0]])
def test_non_numeric_empty_option(empty):
    with pytest.raises(SetOptionError, match=r"empty=.* is not a number; pass 1.0 \(default\)"):
        set_jaccard([], [], empty=empty)
    with pytest.raises(SetOptionError, match=r"empty=.* is not a number; pass nan \(default\)"):
        multilabel_jaccard(GT, PRED, empty=empty)


# --------------------------------------------------------------------------------------------
# Label sets: properties
# --------------------------------------------------------------------------------------------

labels = st.lists(st.sampled_from(["a", "b", "c", "d", "e", "A", "B", 1, 2, (1, 2)]), max_size=12)


@settings(deadline=None, max_examples=200)
@given(a=labels, b=labels, dedupe=st.booleans())
def test_matches_reference(a, b, dedupe):
    o = set_overlap(a, b, dedupe=dedupe)
    assert (o.jaccard, o.dice) == ref_set_scores(a, b, dedupe=dedupe)


@settings(deadline=None, max_examples=200)
@given(a=labels, b=labels, dedupe=st.booleans())
def test_set_properties(a, b, dedupe):
    o, r = set_overlap(a, b, dedupe=dedupe), set_overlap(b, a, dedupe=dedupe)
    assert (o.jaccard, o.dice, o.n_intersection, o.n_union) == (
        r.jaccard,
        r.dice,
        r.n_intersection,
        r.n_union,
    )
    assert 0.0 <= o.jaccard <= o.dice <= 1.0
    assert o.dice == pytest.approx(2 * o.jaccard / (1 + o.jaccard), rel=1e-15)
    assert (o.jaccard == 1.0) == (Counter(a) == Counter(b) if not dedupe else set(a) == set(b))
    assert set_jaccard(a + a, b) == set_jaccard(a, b)  # de-duplicated by default
    assert set(o.intersection) <= set(o.union)


@settings(deadline=None, max_examples=100)
@given(
    a=st.lists(st.sampled_from(["x", "X", "y", "Y"]), max_size=6),
    b=st.lists(st.sampled_from(["x", "X", "y", "Y"]), max_size=6),
)
def test_lower_equals_lowering_first(a, b):
    assert set_jaccard(a, b, lower=True) == set_jaccard(
        [s.lower() for s in a], [s.lower() for s in b]
    )


# --------------------------------------------------------------------------------------------
# Multi-label indicator matrices
# --------------------------------------------------------------------------------------------

GT = np.array([[1, 0, 1, 0], [0, 1, 1, 0], [1, 1, 0, 0]])
PRED = np.array([[1, 1, 1, 0], [0, 0, 1, 0], [1, 0, 0, 0]])


def test_multilabel_worked_example():
    # class 0: tp 2; class 1: tp 0, fp 1, fn 2; class 2: tp 2; class 3: absent
    assert_array_equal(multilabel_jaccard(GT, PRED), [1.0, 0.0, 1.0, np.nan])
    assert multilabel_jaccard(GT, PRED, average="macro") == 2 / 3
    assert multilabel_jaccard(GT, PRED, average="micro") == 4 / (4 + 1 + 2)
    assert multilabel_jaccard(GT, PRED, average="weighted") == (2 * 1 + 2 * 0 + 2 * 1) / 6
    assert multilabel_jaccard(GT, PRED, average="samples") == pytest.approx(
        (2 / 3 + 1 / 2 + 1 / 2) / 3
    )
    assert multilabel_jaccard(GT, PRED, average="macro", empty=1.0) == 3 / 4
    assert multilabel_jaccard(GT, PRED, average="macro", empty=0.0) == 2 / 4
    assert_array_equal(multilabel_dice(GT, PRED), [1.0, 0.0, 1.0, np.nan])
    assert multilabel_dice(GT, PRED, average="micro") == 8 / (8 + 1 + 2)


def test_multilabel_empty_everything():
    z = np.zeros((3, 2), dtype=bool)
    assert np.isnan(multilabel_jaccard(z, z)).all()
    for average in AVERAGES:
        assert math.isnan(multilabel_jaccard(z, z, average=average))
        assert multilabel_jaccard(z, z, average=average, empty=1.0) == 1.0
    assert multilabel_jaccard(np.zeros((0, 3)), np.zeros((0, 3))).shape == (3,)


def test_multilabel_input_kinds():
    as_bool = multilabel_jaccard(GT.astype(bool), PRED.astype(bool), average="macro")
    as_float = multilabel_jaccard(GT.astype(float), PRED.astype(np.float32), average="macro")
    assert as_bool == as_float == multilabel_jaccard(GT.tolist(), PRED.tolist(), average="macro")


def test_weighted_without_support_falls_back_to_macro():
    gt = np.zeros((2, 3), dtype=int)
    pred = np.array([[1, 0, 0], [0, 0, 0]])
    assert multilabel_jaccard(gt, pred, average="weighted") == 0.0
    assert multilabel_jaccard(gt, pred, average="weighted", empty=1.0) == pytest.approx(2 / 3)


def random_indicators(rng, n, k):
    density = rng.uniform(0.05, 0.6, size=k)
    gt = rng.random((n, k)) < density
    pred = gt ^ (rng.random((n, k)) < 0.2)
    gt[:, 0] = pred[:, 0] = False  # an absent class
    gt[0], pred[0] = False, False  # an empty sample
    return gt, pred


@pytest.mark.parametrize("average", [None, *AVERAGES])
@pytest.mark.parametrize("dice", [False, True])
def test_multilabel_against_reference(average, dice):
    rng = np.random.default_rng(10)
    fn = multilabel_dice if dice else multilabel_jaccard
    for n, k in [(1, 1), (7, 3), (40, 9)]:
        gt, pred = random_indicators(rng, n, k)
        for empty in (math.nan, 0.0, 1.0):
            got = fn(gt, pred, average=average, empty=empty)
            expected = ref_multilabel(gt, pred, average, empty, dice)
            assert_allclose(got, expected, rtol=1e-14, atol=0, equal_nan=True)


@pytest.mark.parametrize("average", [None, *AVERAGES])
@pytest.mark.parametrize("zero_division", [0.0, 1.0])
def test_multilabel_against_sklearn(average, zero_division):
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(11)
    for n, k in [(5, 2), (30, 6), (200, 12)]:
        gt, pred = random_indicators(rng, n, k)
        gt, pred = gt.astype(int), pred.astype(int)
        want_j = metrics.jaccard_score(gt, pred, average=average, zero_division=zero_division)
        want_f = metrics.f1_score(gt, pred, average=average, zero_division=zero_division)
        got_j = multilabel_jaccard(gt, pred, average=average, empty=zero_division)
        got_f = multilabel_dice(gt, pred, average=average, empty=zero_division)
        assert_allclose(got_j, want_j, rtol=1e-12, atol=1e-15)
        assert_allclose(got_f, want_f, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("average", [None, *AVERAGES])
def test_nan_default_equals_sklearn_f1_zero_division_nan(average):
    # scikit-learn's f1_score takes zero_division=nan and, like segiou, leaves nan out of means
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(13)
    for n, k in [(5, 2), (30, 6)]:
        gt, pred = random_indicators(rng, n, k)
        want = metrics.f1_score(gt, pred, average=average, zero_division=np.nan)
        assert_allclose(multilabel_dice(gt, pred, average=average), want, equal_nan=True)


def test_weighted_without_support_against_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    gt, pred = np.zeros((2, 3), dtype=int), np.array([[1, 0, 0], [0, 0, 0]])
    for zero_division in (0.0, 1.0):
        for ours, theirs in (
            (multilabel_jaccard, metrics.jaccard_score),
            (multilabel_dice, metrics.f1_score),
        ):
            want = theirs(gt, pred, average="weighted", zero_division=zero_division)
            assert ours(gt, pred, average="weighted", empty=zero_division) == pytest.approx(want)


def test_nan_default_equals_sklearn_on_present_classes():
    metrics = pytest.importorskip("sklearn.metrics")
    gt, pred = random_indicators(np.random.default_rng(12), 50, 8)
    present = (gt | pred).any(axis=0)
    want = metrics.jaccard_score(gt[:, present], pred[:, present], average="macro", zero_division=0)
    assert multilabel_jaccard(gt, pred, average="macro") == pytest.approx(want, rel=1e-14)


@settings(deadline=None, max_examples=60)
@given(
    data=st.integers(1, 8).flatmap(
        lambda k: st.tuples(
            st.lists(st.lists(st.booleans(), min_size=k, max_size=k), min_size=1, max_size=8),
            st.lists(st.lists(st.booleans(), min_size=k, max_size=k), min_size=1, max_size=8),
        )
    ),
    average=st.sampled_from([None, *AVERAGES]),
)
def test_multilabel_properties(data, average):
    a, b = data
    n = min(len(a), len(b))
    gt, pred = np.array(a[:n]), np.array(b[:n])
    j = multilabel_jaccard(gt, pred, average=average)
    if average != "weighted":  # weights come from gt's support; everything else is symmetric
        assert_array_equal(j, multilabel_jaccard(pred, gt, average=average))
    assert_allclose(j, ref_multilabel(gt, pred, average), rtol=1e-14, equal_nan=True)
    vals = np.atleast_1d(j)
    assert np.all(np.isnan(vals) | ((vals >= 0) & (vals <= 1)))
    # samples average = mean over rows of the set Jaccard of each row (empty rows skipped)
    if average == "samples":
        rows = [
            set_jaccard(np.flatnonzero(g), np.flatnonzero(p), empty=math.nan)
            for g, p in zip(gt, pred, strict=True)
        ]
        kept = [r for r in rows if not math.isnan(r)]
        assert j == pytest.approx(
            sum(kept) / len(kept) if kept else math.nan, nan_ok=True, rel=1e-14
        )


def test_multilabel_errors():
    with pytest.raises(IndicatorMatrixError, match=r"gt has shape \(4,\); expected a 2-D.*reshape"):
        multilabel_jaccard(np.ones(4), np.ones(4))
    bad = GT.copy()
    bad[1, 2] = 2
    with pytest.raises(IndicatorMatrixError, match=r"pred\[1, 2\] = 2 is not 0 or 1"):
        multilabel_jaccard(GT, bad)
    with pytest.raises(IndicatorMatrixError, match=r"gt\[0, 0\] = 0.5 is not 0 or 1.*threshold"):
        multilabel_dice(np.full((2, 2), 0.5), np.ones((2, 2)))
    with pytest.raises(IndicatorMatrixError, match=r"gt\[0, 1\] = nan is not 0 or 1"):
        multilabel_dice(np.array([[0, np.nan]]), np.ones((1, 2)))
    with pytest.raises(IndicatorMatrixError, match="dtype <U1"):
        multilabel_dice(np.array([["a"]]), np.ones((1, 1)))
    with pytest.raises(
        ShapeMismatchError, match=r"gt has shape \(3, 4\) and pred has shape \(3, 3\)"
    ):
        multilabel_jaccard(GT, PRED[:, :3])
    with pytest.raises(SetOptionError, match="average='binary' is unknown"):
        multilabel_jaccard(GT, PRED, average="binary")
    with pytest.raises(SetOptionError, match=r"empty=5 is outside \[0, 1\]"):
        multilabel_jaccard(GT, PRED, empty=5)
    with pytest.raises(ValueError, match="not 0 or 1"):
        multilabel_jaccard(GT, bad)


def test_masked_arrays_are_refused():
    """np.asarray dropped the mask: a masked 1 was counted as a label present."""
    masked = np.ma.array([[1, 1]], mask=[[0, 1]])
    with pytest.raises(IndicatorMatrixError, match=r"gt is a numpy masked array.*gt.filled\(0\)"):
        multilabel_jaccard(masked, np.array([[1, 0]]))
    with pytest.raises(IndicatorMatrixError, match="pred is a numpy masked array"):
        multilabel_dice(np.array([[1, 0]]), masked)
    with pytest.raises(LabelSetError, match=r"pred is a numpy masked array.*compressed\(\)"):
        set_jaccard([1, 2], np.ma.array([1, 2], mask=[0, 1]))
    assert multilabel_jaccard(masked.filled(0), np.array([[1, 0]]), average="micro") == 1.0


def test_sparse_and_ragged_indicator_inputs_get_the_modules_error():
    """A scipy sparse matrix read as a 0-d object array ('has shape (); reshape with
    .reshape(-1, 1)'), and ragged rows raised numpy's bare ValueError."""
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(IndicatorMatrixError, match=r"gt is a scipy sparse .*gt.toarray\(\)"):
        multilabel_jaccard(sparse.csr_matrix(np.eye(2)), np.eye(2))
    with pytest.raises(IndicatorMatrixError, match=r"pred is a scipy sparse"):
        multilabel_dice(np.eye(2), sparse.coo_array(np.eye(2)))
    with pytest.raises(IndicatorMatrixError, match=r"gt is not a \(samples, classes\) array"):
        multilabel_jaccard([[1, 0], [1]], [[1, 0], [1, 0]])
    assert_array_equal(
        multilabel_jaccard(sparse.csr_matrix(np.eye(2)).toarray(), np.eye(2)), [1, 1]
    )
