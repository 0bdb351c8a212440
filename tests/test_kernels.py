"""Adversarial tests of the counting strategies: every way of counting equals the oracle.

Both counting kernels choose how to count from a small sample: the generic kernel from the
first ``ROW_SAMPLE`` pixels of a row segment (run by run, or pixel by pixel), the word kernels
from the first ``SAMPLE_WORDS`` words of a ``BLOCK_WORDS``-word block (``RUNS``, ``PAIRS`` or
``BYTES``). The choice must only change the speed. These tests build data whose sample lies
about the rest, that switches strategy at every block or row, that puts changes of pair at every
position of a word, runs across word, block, row, image and thread-span boundaries, and call
each strategy directly on the same data. Every result is compared with the plain-numpy oracle
of ``tests/reference.py`` (``on_unexpected="count"``, so unexpected values are counted too).

``_coherent`` and ``_block_modes`` below restate the kernels' sampling rules; they are used only
to check that the data of a test really exercises the strategies it is meant to (never as the
oracle).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from unittest import mock

import numpy as np
import pytest
import reference
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

from segiou import ConfusionMatrix, LabelSpec, RawLabel, _count, _kernels
from segiou import _word_kernels as _words
from segiou.testing.strategies import aligned_empty

ROW = _kernels.ROW_SAMPLE
SAMPLE = _words.SAMPLE_WORDS * 8  # pixels sampled at the start of a block of the word path
BLOCK_WORDS = _words.BLOCK_WORDS
BLOCK = BLOCK_WORDS * 8  # pixels per block of the word path
#: Examples per Hypothesis test: twice the profile's (120 in "ci", 1000 in "thorough"); the
#: examples are small, a few milliseconds each.
EXAMPLES = 2 * settings.default.max_examples

# --- labels and the oracle ----------------------------------------------------------------------


@dataclass(frozen=True)
class Labels:
    """A label setup: class-id masks (``raw is None``) or raw ids -> class / None."""

    k: int
    ignore: tuple[int, ...] = ()
    raw: tuple[tuple[int, int | None], ...] | None = None

    def spec(self) -> LabelSpec:
        if self.raw is None:
            return LabelSpec.from_num_classes(self.k, ignore=list(self.ignore))
        return LabelSpec(
            "raw",
            [f"c{i}" for i in range(self.k)],
            ignore=self.ignore,
            raw=[RawLabel(v, f"r{v}", c) for v, c in self.raw],
        )

    @property
    def ids(self) -> str:
        return "class" if self.raw is None else "raw"

    def matrix(self, **kw: object) -> ConfusionMatrix:
        return ConfusionMatrix(self.spec(), gt_ids=self.ids, on_unexpected="count", **kw)

    def lookup(self) -> _count.Lookup:
        spec = self.spec()
        return _count.Lookup(self.k, spec.gt_map(self.ids), spec.pred_map(self.ids))

    def ref(self, gt: np.ndarray, pred: np.ndarray) -> reference.Counts:
        if self.raw is None:
            return reference.confusion(gt, pred, self.k, ignore=self.ignore)
        mapping: dict[int, int | None] = dict(self.raw)
        mapping.update(dict.fromkeys(self.ignore))
        return reference.confusion(gt, pred, self.k, gt_map=mapping)


#: uint8 class ids 0..255, every one a class: the counts are the full histogram of raw pairs.
U8_ALL = Labels(256)
#: int8 raw ids -128..127, each its own class: the full histogram of signed raw pairs.
I8_ALL = Labels(256, raw=tuple((v, v + 128) for v in range(-128, 128)))
#: Few classes, ignore/void values 255 and -1; any other value (7, 128, -128, ...) is unexpected.
SMALL = Labels(5, ignore=(255, -1))
#: Several raw ids per class inside one run, ignored raw ids, an ignore value.
RAW_SHARED = Labels(
    3, ignore=(1000,), raw=((3, 0), (-5, 0), (300, 0), (7, 1), (8, 1), (9, None), (-300, 2))
)


def _count_cm(labels: Labels, gt, pred, *, words: bool | None = None, **kw) -> ConfusionMatrix:
    """Count with ``on_unexpected="count"``.

    ``words=True`` checks that the word kernels count, ``words=False`` switches them off (the
    generic kernel counts everything), ``None`` checks nothing.
    """
    cm = labels.matrix(**kw)
    if words:
        assert not kw.get("per_image")
        assert _word_path(gt, pred)
    if words is False:
        with mock.patch.object(_count, "word_path", return_value=False):
            cm.update(gt, pred)
        return cm
    cm.update(gt, pred)
    return cm


def _word_path(gt: np.ndarray, pred: np.ndarray) -> bool:
    g = gt.view(np.uint8) if gt.dtype == np.bool_ else gt
    p = pred.view(np.uint8) if pred.dtype == np.bool_ else pred
    return _count.word_path(g, p, _count.Lookup(2, {0: 0, 1: 1}, {0: 0, 1: 1}))


def _assert_same(labels: Labels, gt, pred, **kw) -> ConfusionMatrix:
    cm = _count_cm(labels, gt, pred, **kw)
    reference.assert_same_counts(cm, labels.ref(gt, pred))
    assert cm.n_pixels == gt.size
    return cm


def _assert_images(cm: ConfusionMatrix, labels: Labels, gt: np.ndarray, pred: np.ndarray):
    """Per-image rows of an ``N x H x W`` batch equal the oracle image by image."""
    rows = cm.images
    assert rows.tp.shape[0] == gt.shape[0]
    for i in range(gt.shape[0]):
        ref = labels.ref(gt[i], pred[i])
        assert_array_equal(rows.tp[i], ref.tp)
        assert_array_equal(rows.fp[i], ref.fp)
        assert_array_equal(rows.fn[i], ref.fn)
        assert rows.ignored[i] == ref.n_ignored
        assert rows.unexpected[i] == ref.n_unexpected


def _assert_table(table: np.ndarray, ref: reference.Counts, k: int) -> None:
    """A folded ``(K+2) x (K+2)`` code table (ImageCounter, direct kernel calls) vs the oracle."""
    assert_array_equal(table[:k, :k], ref.counts)
    assert_array_equal(table[:k, k], ref.void)
    assert int(table[k, :].sum()) == ref.n_ignored
    assert int(table[k + 1, :].sum()) == sum(ref.unexpected_gt.values())
    assert int(table[:k, k + 1].sum()) == sum(ref.unexpected_pred.values())
    assert int(table.sum()) == ref.n_pixels


def _aligned(values: np.ndarray, dtype: str, offset: int = 0) -> np.ndarray:
    out = aligned_empty(values.size, dtype, offset=offset)
    out[...] = values.reshape(-1).astype(dtype)
    return out.reshape(values.shape)


# --- the sampling rules (to check what a test exercises) ---------------------------------------


def _coherent(g: np.ndarray, p: np.ndarray) -> bool:
    """The generic kernel's rule: at least 1 in 4 pixels repeat their left neighbour's pair."""
    rep = np.count_nonzero((g[1:] == g[:-1]) & (p[1:] == p[:-1]))
    return 4 * rep >= g.size


def _mode(g8: np.ndarray, p8: np.ndarray) -> str:
    """The word kernels' rule on the pixels of a block (a whole number of words)."""
    gw, pw = g8.reshape(-1, 8)[: _words.SAMPLE_WORDS], p8.reshape(-1, 8)[: _words.SAMPLE_WORDS]
    s = gw.shape[0]
    gl = np.concatenate([gw[:1, 0], gw[:-1, 7]])  # the pixel before each word
    pl = np.concatenate([pw[:1, 0], pw[:-1, 7]])
    changed = np.count_nonzero((gw != gl[:, None]).any(1) | (pw != pl[:, None]).any(1))
    inner = (gw[:, 1:] != gw[:, :-1]) | (pw[:, 1:] != pw[:, :-1])
    multi = np.count_nonzero(inner.sum(1) >= 2)
    if multi * _words.SAMPLE_WORDS >= _words.BYTES_MIN_MULTI * s:
        return "bytes"
    if changed * _words.SAMPLE_WORDS <= _words.RUNS_MAX_CHANGED * s:
        return "runs"
    return "pairs"


def _block_modes(g: np.ndarray, p: np.ndarray, w0: int = 0, w1: int | None = None) -> list[str]:
    """The mode of each block of words ``[w0, w1)`` of two aligned masks (serial: all words)."""
    g8, p8 = g.reshape(-1).view(np.uint8), p.reshape(-1).view(np.uint8)
    w1 = g8.size // 8 if w1 is None else w1
    return [_mode(g8[q0 * 8 : min(q0 + BLOCK_WORDS, w1) * 8],
                  p8[q0 * 8 : min(q0 + BLOCK_WORDS, w1) * 8])
            for q0 in range(w0, w1, BLOCK_WORDS)]  # fmt: skip


def _row_kinds(g: np.ndarray, p: np.ndarray) -> list[bool]:
    """Coherent (True) or noisy (False), per row of an ``N x H x W`` batch (one thread)."""
    w = g.shape[-1]
    gr, pr = g.reshape(-1, w), p.reshape(-1, w)
    return [_coherent(gr[r, :ROW], pr[r, :ROW]) for r in range(gr.shape[0])]


# --- data made of segments ----------------------------------------------------------------------

KINDS = (
    "const",  # one pair
    "noise",  # iid pairs
    "runs",  # runs of 1..12 pixels
    "gt_flip",  # ground truth changes at every pixel, prediction constant
    "pred_flip",  # the reverse
    "both_flip",  # both change at every pixel
    "sparse",  # constant with single-pixel blips (many one-change words)
    "threshold",  # runs of 2, 1, 1: exactly 1 repeat in 4 (the generic rule's edge)
    "halves",  # words of two runs of 4 (one change in each word: PAIRS)
)


def _other(rng: np.random.Generator, vals: np.ndarray, v: int) -> int:
    """A value of ``vals`` other than ``v`` (``v`` itself if there is none)."""
    rest = vals[vals != v]
    return int(rng.choice(rest)) if rest.size else int(v)


def _flip(rng: np.random.Generator, vals: np.ndarray, n: int) -> np.ndarray:
    a = int(rng.choice(vals))
    b = _other(rng, vals, a)
    out = np.full(n, a, dtype=np.int64)
    out[1::2] = b
    return out


def _runs(rng: np.random.Generator, vals: np.ndarray, n: int, lengths: np.ndarray) -> np.ndarray:
    """Runs of the given (cycled) lengths, each of a value other than the previous run's."""
    reps = np.resize(lengths, n)  # at most n runs are needed
    out = np.empty(n, dtype=np.int64)
    pos, v = 0, int(rng.choice(vals))
    for length in reps:
        if pos >= n:
            break
        out[pos : pos + length] = v
        pos += int(length)
        v = _other(rng, vals, v)
    return out


def _segment(rng, kind: str, n: int, gvals: np.ndarray, pvals: np.ndarray):
    if kind == "const":
        return np.full(n, rng.choice(gvals)), np.full(n, rng.choice(pvals))
    if kind == "noise":
        return rng.choice(gvals, n), rng.choice(pvals, n)
    if kind == "runs":
        return (
            _runs(rng, gvals, n, rng.integers(1, 13, size=n // 2 + 1)),
            _runs(rng, pvals, n, rng.integers(1, 13, size=n // 2 + 1)),
        )
    if kind == "gt_flip":
        return _flip(rng, gvals, n), np.full(n, rng.choice(pvals))
    if kind == "pred_flip":
        return np.full(n, rng.choice(gvals)), _flip(rng, pvals, n)
    if kind == "both_flip":
        return _flip(rng, gvals, n), _flip(rng, pvals, n)
    if kind == "sparse":
        g, p = np.full(n, rng.choice(gvals)), np.full(n, rng.choice(pvals))
        blips = rng.random(n) < 0.1
        g[blips] = rng.choice(gvals, int(blips.sum()))
        blips = rng.random(n) < 0.1
        p[blips] = rng.choice(pvals, int(blips.sum()))
        return g, p
    if kind == "halves":
        return _runs(rng, gvals, n, np.array([4])), np.full(n, rng.choice(pvals))
    assert kind == "threshold"
    return _runs(rng, gvals, n, np.array([2, 1, 1])), np.full(n, rng.choice(pvals))


def _build(seed: int, plan, gvals, pvals) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate segments ``(kind, length)`` of int64 values."""
    rng = np.random.default_rng(seed)
    gvals, pvals = np.asarray(gvals, np.int64), np.asarray(pvals, np.int64)
    parts = [_segment(rng, kind, n, gvals, pvals) for kind, n in plan]
    g = np.concatenate([a for a, _ in parts]).astype(np.int64)
    p = np.concatenate([b for _, b in parts]).astype(np.int64)
    return g, p


#: Values per dtype: extremes, negatives, ignore values, unexpected values.
VALUES = {
    "uint8": [0, 1, 2, 3, 4, 7, 128, 200, 254, 255],
    "int8": [-128, -127, -1, 0, 1, 2, 3, 4, 9, 126, 127],
    "bool": [0, 1],
    "uint16": [0, 1, 2, 3, 4, 9, 255, 256, 65535],
    "int16": [-32768, -300, -5, -1, 0, 1, 2, 3, 4, 7, 8, 9, 255, 300, 1000, 32767],
    "int32": [-(2**31), -300, -5, -1, 0, 1, 2, 3, 4, 7, 8, 9, 255, 300, 1000, 70000, 2**31 - 1],
    "int64": [-(2**63), -300, -5, -1, 0, 1, 2, 3, 4, 7, 8, 9, 255, 300, 1000, 2**63 - 1],
}


def _vals(dtype: str, labels: Labels) -> list[int]:
    """Values of ``dtype`` for ``labels``: the full byte range for the histogram setups."""
    if labels is U8_ALL:
        return list(range(256))
    if labels is I8_ALL:
        return list(range(-128, 128))
    return VALUES[dtype]


lengths = st.one_of(
    st.integers(1, 24),
    st.sampled_from([ROW - 1, ROW, ROW + 1, SAMPLE - 1, SAMPLE, SAMPLE + 1, SAMPLE + 8]),
    st.integers(1, 3000),
)
plans = st.lists(st.tuples(st.sampled_from(KINDS), lengths), min_size=1, max_size=8)


def test_layout_assumptions():
    # The boundary tests below are built around these sizes (see segiou/_word_kernels.py).
    assert (ROW, SAMPLE, BLOCK_WORDS, _words.COPIES) == (64, 256, 512, 8)
    assert Labels(179).lookup().copies == 8
    assert Labels(180).lookup().copies == 1
    assert Labels(180).lookup().word_table_size == 182 * 182 * 8  # always 8 on the word path


# --- each strategy called directly on the same data ---------------------------------------------

#: Byte codes of the identity setup: every byte its own class, a 256 x 256 table of raw pairs.
_IDENT_G = (np.arange(256, dtype=np.uint64) * np.uint64(256 * _words.COPIES)).astype(np.uint64)
_IDENT_P = (np.arange(256, dtype=np.uint64) * np.uint64(_words.COPIES)).astype(np.uint64)


def _histogram(tab: np.ndarray) -> np.ndarray:
    """A word table of the identity setup as the 256 x 256 histogram of raw byte pairs."""
    return tab.reshape(256, 256, _words.COPIES).sum(axis=2)


@settings(deadline=None, max_examples=EXAMPLES)
@given(
    plan=st.lists(
        st.tuples(st.sampled_from(KINDS), st.integers(1, 3 * SAMPLE)), min_size=1, max_size=10
    ),
    seed=st.integers(0, 2**32 - 1),
    extreme=st.booleans(),
)
def test_word_strategies_agree_on_any_block(plan, seed, extreme):
    # count_runs, count_pairs and count_bytes (and count_words, which picks one per block) on
    # the same words, whatever the sample would say: each the full histogram of raw pairs.
    vals = [0, 1, 254, 255] if extreme else list(range(256))
    g, p = _build(seed, plan, vals, vals)
    n = min(g.size // 8 * 8, 2 * BLOCK)
    assume(n > 0)
    gb, pb = _aligned(g[:n], "uint8"), _aligned(p[:n], "uint8")
    gs, ps = gb.view(np.uint64), pb.view(np.uint64)
    ref = reference.confusion(gb, pb, 256).counts
    for fn in (_words.count_runs, _words.count_pairs, _words.count_bytes):
        tab = np.zeros(256 * 256 * _words.COPIES, dtype=np.int64)
        fn(gs, ps, _IDENT_G, _IDENT_P, tab)
        assert_array_equal(_histogram(tab), ref, err_msg=fn.__name__)
    tab = np.zeros(256 * 256 * _words.COPIES, dtype=np.int64)
    _words.count_words(gs, ps, _IDENT_G, _IDENT_P, tab)
    assert_array_equal(_histogram(tab), ref)


@settings(deadline=None, max_examples=EXAMPLES)
@given(
    plan=plans,
    seed=st.integers(0, 2**32 - 1),
    dtype=st.sampled_from(["uint8", "int16", "int32", "int64"]),
    labels=st.sampled_from(
        [SMALL, RAW_SHARED, Labels(179, ignore=(255, -1)), Labels(180, ignore=(255, -1))]
    ),
)
def test_row_strategies_agree_on_any_row(plan, seed, dtype, labels):
    # _count_row (pixel by pixel) and _count_row_runs (run by run) on the same row segment,
    # with 8 interleaved copies (up to 179 classes) or one (180 classes and more).
    g, p = _build(seed, plan, VALUES[dtype], VALUES[dtype])
    g, p = g.astype(dtype), p.astype(dtype)
    lk = labels.lookup()
    width = labels.k + 2
    ref = labels.ref(g, p)
    args = (lk.glut, lk.glo, lk.gunexp, lk.plut, lk.plo, lk.punexp, lk.copies - 1)
    sizes = (np.uint64(lk.glut.size), np.uint64(lk.plut.size))
    for fn in (_kernels._count_row, _kernels._count_row_runs):
        t = np.zeros(lk.table_size, dtype=np.int64)
        fn(g, p, *args, t, *sizes)
        _assert_table(t.reshape(width, width, lk.copies).sum(axis=2), ref, labels.k)


@settings(deadline=None, max_examples=EXAMPLES)
@given(
    plan=plans,
    seed=st.integers(0, 2**32 - 1),
    width=st.sampled_from([1, 3, 8, ROW - 1, ROW, ROW + 1, 100]),
    cuts=st.lists(st.integers(0, 20000), max_size=6),
    per_image=st.booleans(),
)
def test_generic_spans_cut_anywhere(plan, seed, width, cuts, per_image):
    # count_span over arbitrary [e0, e1) spans (any number of workers), cut inside rows, at row
    # ends and inside runs, into one table per image or one in all.
    g, p = _build(seed, plan, VALUES["int16"], VALUES["int16"])
    n = g.size // width * width
    assume(n > 0)
    h = max(1, min(5, n // width))
    n = n // (h * width) * (h * width)  # at least h * width: n >= width and h <= n // width
    g3 = g[:n].astype(np.int16).reshape(-1, h, width)
    p3 = p[:n].astype(np.int16).reshape(-1, h, width)
    labels = RAW_SHARED
    lk = labels.lookup()
    width_t = labels.k + 2
    n_out = g3.shape[0] if per_image else 1
    tab = np.zeros((n_out, lk.table_size), dtype=np.int64)
    bounds = sorted({0, n, *(c % (n + 1) for c in cuts)})
    for e0, e1 in itertools.pairwise(bounds):
        _kernels.count_span(g3, p3, e0, e1, lk.glut, lk.glo, lk.gunexp, lk.plut, lk.plo,
                            lk.punexp, lk.copies - 1, tab, per_image)  # fmt: skip
    tables = tab.reshape(n_out, width_t, width_t, lk.copies).sum(axis=3)
    if per_image:
        for i in range(n_out):
            _assert_table(tables[i], labels.ref(g3[i], p3[i]), labels.k)
    else:
        _assert_table(tables[0], labels.ref(g3, p3), labels.k)


@settings(deadline=None, max_examples=EXAMPLES)
@given(
    plan=st.lists(
        st.tuples(
            st.sampled_from(KINDS),
            st.one_of(st.integers(1, 3000), st.integers(BLOCK - 8, BLOCK + 8)),
        ),
        min_size=1,
        max_size=6,
    ),
    seed=st.integers(0, 2**32 - 1),
    cuts=st.lists(st.integers(0, 2**16), max_size=5),
    offsets=st.sampled_from([(0, 0), (3, 3), (0, 5), (7, 1)]),
)
def test_word_spans_cut_anywhere(plan, seed, cuts, offsets):
    # count_u8_span over arbitrary pixel spans (words, blocks and the head before the first
    # word boundary then start anywhere), the two masks at the same offset from a word boundary
    # (read in place) or not (copied block by block into aligned buffers).
    g, p = _build(seed, plan, VALUES["uint8"], VALUES["uint8"])
    gb, pb = _aligned(g, "uint8", offsets[0]), _aligned(p, "uint8", offsets[1])
    tab = np.zeros(256 * 256 * _words.COPIES, dtype=np.int64)
    bounds = sorted({0, gb.size, *(c % (gb.size + 1) for c in cuts)})
    for i0, i1 in itertools.pairwise(bounds):
        _words.count_u8_span(gb, pb, i0, i1, _IDENT_G, _IDENT_P, tab)
    assert_array_equal(_histogram(tab), reference.confusion(gb, pb, 256).counts)


# --- 8-bit word path, through ConfusionMatrix ---------------------------------------------------

#: Byte values to build changes from: the extremes of each 8-bit dtype and their neighbours.
BYTE_POOL = {
    "uint8": [0, 1, 2, 127, 128, 254, 255],
    "int8": [-128, -127, -1, 0, 1, 126, 127],
    "bool": [0, 1],
}


def _change_words(rng: np.random.Generator, pool: list[int], reps: int) -> np.ndarray:
    """Words (rows of 8 pixels, ``(n, 2, 8)``: gt, pred) with a change of pair at exactly the
    positions of every 7-bit mask (so 0..7 changes inside a word, at every position 1..7), in
    the ground truth only, the prediction only, or both; the first pixel of a word repeats the
    previous word's last pair or not (an 8th change, across the word boundary)."""
    vals = np.array(pool, dtype=np.int64)
    words = []
    g_last, p_last = int(vals[0]), int(vals[-1])
    for _ in range(reps):
        for mask in range(128):
            for side in ("gt", "pred", "both"):
                g = np.empty(8, np.int64)
                p = np.empty(8, np.int64)
                cross = rng.random() < 0.5
                g[0] = _other(rng, vals, g_last) if cross and side != "pred" else g_last
                p[0] = _other(rng, vals, p_last) if cross and side != "gt" else p_last
                for k in range(1, 8):
                    g[k], p[k] = g[k - 1], p[k - 1]
                    if mask >> (k - 1) & 1:
                        if side != "pred":
                            g[k] = _other(rng, vals, int(g[k - 1]))
                        if side != "gt":
                            p[k] = _other(rng, vals, int(p[k - 1]))
                words.append(np.stack([g, p]))
                g_last, p_last = int(g[7]), int(p[7])
    return np.array(words)


def _prefix(kind: str, pool: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """``SAMPLE`` pixels that make a block's mode ``runs`` (one pair), ``pairs`` (every word
    two runs of 4 pixels: one change in each, and each differs from the pixel before it) or
    ``bytes`` (the ground truth changing at every pixel)."""
    a, b = pool[0], pool[-1]
    if kind == "runs":
        return np.full(SAMPLE, a), np.full(SAMPLE, b)
    g = np.full(SAMPLE, a)
    if kind == "pairs":
        g.reshape(-1, 8)[:, 4:] = b
    else:
        g[1::2] = b
    return g, np.full(SAMPLE, b)


def _strided(a: np.ndarray) -> np.ndarray:
    """The values of ``a`` as a view of every other element of a buffer (the generic kernel)."""
    base = np.zeros((*a.shape[:-1], 2 * a.shape[-1]), a.dtype)
    view = base[..., ::2]
    view[...] = a
    return view


@pytest.mark.parametrize("kind", ["runs", "pairs", "bytes"])
@pytest.mark.parametrize(
    ("dtype", "labels"), [("uint8", U8_ALL), ("int8", I8_ALL), ("bool", Labels(2))]
)
def test_word_path_change_at_every_position(kind, dtype, labels):
    # Blocks whose sample makes them RUNS (words that continue the run, end it once, or more
    # often), PAIRS (each word's first and last run) or BYTES, made of words with changes of
    # pair at every position (and across word boundaries); the full histogram of pairs is
    # compared, for the word path read in place, copied (masks at different offsets from a
    # word boundary) and for the generic kernel.
    pool = BYTE_POOL[dtype]
    words = _change_words(np.random.default_rng(7), pool, reps=2)  # 768 words: 2 blocks
    body = BLOCK_WORDS - SAMPLE // 8
    gs, ps = [], []
    for start in range(0, len(words), body):
        pg, pp = _prefix(kind, pool)
        chunk = words[start : start + body]
        gs += [pg, chunk[:, 0].reshape(-1)]
        ps += [pp, chunk[:, 1].reshape(-1)]
    tail_g, tail_p = words[:1, 0, :5].reshape(-1), words[:1, 1, :5].reshape(-1)  # byte tail
    g = _aligned(np.concatenate([*gs, tail_g]), dtype)
    p = _aligned(np.concatenate([*ps, tail_p]), dtype)
    assert set(_block_modes(g, p)) == {kind}
    for threads in (1, 2):
        _assert_same(labels, g, p, threads=threads, words=True)
    _assert_same(labels, g, _aligned(p, dtype, offset=3), words=True)  # copied blocks
    _assert_same(labels, _strided(g), _strided(p), words=False)


def _boundary_pair(n: int, background: str, dtype: str, seed: int):
    """``n`` pixels: a background, then runs across every block boundary and many word
    boundaries (starting at offsets -9..+9 of them), and one-change words at every position."""
    rng = np.random.default_rng(seed)
    vals = np.array(BYTE_POOL[dtype], dtype=np.int64)
    if background == "alternate":  # the sample says coherent / noisy in turn, block by block
        plan = [("const" if b % 2 else "both_flip", min(BLOCK, n - b * BLOCK))
                for b in range(-(-n // BLOCK))]  # fmt: skip
    else:
        plan = [(background, n)]
    g, p = _build(seed, plan, vals, vals)
    for edge in range(BLOCK, n + 9, BLOCK):
        start = max(0, edge - int(rng.integers(1, 10)))
        g[start : edge + int(rng.integers(1, 12))] = rng.choice(vals)
    for edge in range(8, n, 8 * 37):  # a run from a random offset across a word boundary
        a = max(0, edge - int(rng.integers(0, 9)))
        b = edge + int(rng.integers(0, 9))
        g[a:b] = rng.choice(vals)
        p[a:b] = rng.choice(vals)
    return _aligned(g[:n], dtype), _aligned(p[:n], dtype)


@pytest.mark.parametrize(
    "n",
    [
        1,
        7,
        8,
        9,
        SAMPLE - 1,
        SAMPLE + 3,
        BLOCK - 8,
        BLOCK - 1,
        BLOCK,
        BLOCK + 1,
        BLOCK + 7,
        BLOCK + 8,
        BLOCK + 9,
        BLOCK + SAMPLE,
        2 * BLOCK - 3,
        2 * BLOCK + 8,
        3 * BLOCK + 5,
    ],
)
def test_word_path_block_and_word_boundaries(n):
    for background, dtype, labels in [
        ("noise", "uint8", U8_ALL),
        ("const", "int8", I8_ALL),
        ("alternate", "uint8", SMALL),
        ("sparse", "bool", Labels(2)),
    ]:
        g, p = _boundary_pair(n, background, dtype, seed=n)
        for threads in (1, 2):
            _assert_same(labels, g, p, threads=threads, words=True)


def _deceptive_blocks(n_blocks: int, tail: int, dtype: str, seed: int):
    """Blocks that cycle through: a RUNS sample then noise, a BYTES sample then one pair, a
    PAIRS sample then one pair, one-change words at every position, threshold data, noise."""
    rng = np.random.default_rng(seed)
    vals = BYTE_POOL[dtype] if dtype == "bool" else VALUES[dtype]
    plans = [
        [("const", SAMPLE), ("noise", BLOCK - SAMPLE)],
        [("both_flip", SAMPLE), ("const", BLOCK - SAMPLE)],
        [("halves", SAMPLE), ("noise", BLOCK - SAMPLE)],
        [("gt_flip", SAMPLE - 8), ("sparse", BLOCK - SAMPLE + 8)],
        [("threshold", BLOCK)],
        [("noise", SAMPLE), ("runs", BLOCK - SAMPLE)],
        [("sparse", BLOCK)],
    ]
    plan = [seg for b in range(n_blocks) for seg in plans[b % len(plans)]] + [("runs", tail)]
    g, p = _build(int(rng.integers(2**32)), plan, vals, vals)
    return _aligned(g, dtype), _aligned(p, dtype)


@pytest.mark.parametrize(("dtype", "labels"), [("uint8", SMALL), ("int8", SMALL)])
def test_word_path_deceptive_samples_large(dtype, labels):
    # Blocks whose sample lies about the rest, over 2**20 pixels: one thread, two (spans that
    # start in the middle of a block) and the default.
    g, p = _deceptive_blocks(256, 8 * 1000 + 5, dtype, seed=1)
    assert g.size >= 1 << 20
    assert _word_path(g, p)
    assert set(_block_modes(g, p)) == {"runs", "pairs", "bytes"}
    half = (g.size // 8) // 2
    assert half % BLOCK_WORDS != 0  # the second worker starts mid-block
    assert len(set(_block_modes(g, p, 0, half))) == 3
    assert len(set(_block_modes(g, p, half))) >= 2  # its blocks sample other pixels
    ref = labels.ref(g, p)
    assert ref.n_ignored
    assert ref.void.sum()
    assert ref.unexpected_gt
    assert ref.unexpected_pred
    for threads in (1, 2, None):
        cm = _count_cm(labels, g, p, threads=threads)
        reference.assert_same_counts(cm, ref)


@settings(deadline=None, max_examples=EXAMPLES)
@given(
    plan=st.lists(
        st.tuples(
            st.sampled_from(KINDS),
            st.one_of(lengths, st.integers(BLOCK - 9, BLOCK + 9)),
        ),
        min_size=1,
        max_size=8,
    ),
    seed=st.integers(0, 2**32 - 1),
    setup=st.sampled_from(
        [
            ("uint8", "uint8", U8_ALL),
            ("int8", "int8", I8_ALL),
            ("uint8", "uint8", SMALL),
            ("int8", "uint8", SMALL),
            ("uint8", "bool", SMALL),
            ("bool", "bool", Labels(2)),
        ]
    ),
    threads=st.sampled_from([1, 2, 3]),
)
def test_word_path_segments_equal_reference(plan, seed, setup, threads):
    gdtype, pdtype, labels = setup
    g, p = _build(seed, plan, _vals(gdtype, labels), _vals(pdtype, labels))
    if pdtype == "bool":
        p = p & 1
    gt, pred = _aligned(g, gdtype), _aligned(p, pdtype)
    _assert_same(labels, gt, pred, threads=threads, words=True)


# --- generic kernel ----------------------------------------------------------------------------

#: Dtype pairs for the generic kernel (a short list: each pair is a Numba specialisation).
GENERIC_DTYPES = [
    ("uint16", "uint16"),
    ("int16", "int16"),
    ("int32", "int32"),
    ("int64", "int64"),
    ("uint8", "int16"),
    ("int32", "uint16"),
    ("int8", "int8"),
    ("bool", "bool"),
]


def _fit(values: np.ndarray, dtype: str) -> np.ndarray:
    """Values cast to ``dtype`` (values it cannot hold become its smallest value)."""
    if dtype == "bool":
        return (values & 1).astype(bool)
    info = np.iinfo(dtype)
    ok = (values >= info.min) & (values <= info.max)
    return np.where(ok, values, info.min).astype(dtype)


def _rows_plan(draw, width: int, n_rows: int) -> list[tuple[str, int]]:
    """Rows whose first ``ROW`` pixels are one kind and the rest another."""
    plan = []
    for _ in range(n_rows):
        head = min(width, draw(st.sampled_from([ROW - 1, ROW, ROW + 1, 8, width])))
        plan.append((draw(st.sampled_from(KINDS)), head))
        if width > head:
            plan.append((draw(st.sampled_from(KINDS)), width - head))
    return plan


def _layout(a: np.ndarray, how: str, fill: int) -> np.ndarray:
    """``a`` (``N x H x W``) as a strided view of a bigger buffer whose gaps hold ``fill``."""
    n, h, w = a.shape
    if how == "C":
        return a
    if how == "step_w":  # a[..., ::2] of a twice wider buffer
        base = np.full((n, h, 2 * w), fill, a.dtype)
        view = base[:, :, 1::2]
    elif how == "step_h":  # a[:, ::2]
        base = np.full((n, 2 * h, w), fill, a.dtype)
        view = base[:, ::2]
    elif how == "rev_w":  # negative strides along rows
        view = np.full((n, h, w), fill, a.dtype)[:, :, ::-1]
    elif how == "rev_h":  # a[:, ::-1]
        view = np.full((n, h, w), fill, a.dtype)[:, ::-1]
    elif how == "transposed":  # rows are columns of the buffer
        view = np.full((n, w, h), fill, a.dtype).transpose(0, 2, 1)
    else:
        assert how == "F"
        return np.asfortranarray(a)
    view[...] = a
    return view


@settings(deadline=None, max_examples=EXAMPLES)
@given(
    data=st.data(),
    seed=st.integers(0, 2**32 - 1),
    dtypes=st.sampled_from(GENERIC_DTYPES),
    shape=st.tuples(
        st.integers(1, 4),
        st.integers(1, 5),
        st.sampled_from([1, 2, 7, 8, ROW - 1, ROW, ROW + 1, 2 * ROW + 3]),
    ),
    per_image=st.booleans(),
    threads=st.sampled_from([1, 2, 3]),
)
def test_generic_rows_equal_reference(data, seed, dtypes, shape, per_image, threads):
    # Rows whose 64-pixel sample is coherent and the rest noise (or the reverse, or anything);
    # both kernels threads, per-image tables.
    gdtype, pdtype = dtypes
    n, h, w = shape
    plan = _rows_plan(data.draw, w, n * h)
    g, p = _build(seed, plan, VALUES["int64"] + VALUES["int16"], VALUES["int32"])
    gt, pred = _fit(g, gdtype).reshape(shape), _fit(p, pdtype).reshape(shape)
    labels = SMALL if data.draw(st.booleans()) else RAW_SHARED
    cm = _assert_same(labels, gt, pred, threads=threads, per_image=per_image, words=False)
    if per_image:
        _assert_images(cm, labels, gt, pred)


@pytest.mark.parametrize("how", ["step_w", "step_h", "rev_w", "rev_h", "transposed", "F"])
@pytest.mark.parametrize("dtype", ["int16", "uint8"])
def test_generic_strided_layouts(how, dtype):
    # Rows that switch strategy one after the other, in strided, reversed and transposed views
    # of bigger buffers whose gaps hold a counted value (reading outside a view changes counts).
    shape = (3, 6, 2 * ROW + 5)
    plan = []
    for r in range(shape[0] * shape[1]):
        head = ("const", ROW) if r % 2 else ("both_flip", ROW)
        plan += [head, ("noise" if r % 2 else "sparse", shape[2] - ROW)]
    g, p = _build(3, plan, VALUES[dtype], VALUES[dtype])
    gt = _fit(g, dtype).reshape(shape)
    pred = _fit(p, dtype).reshape(shape)
    assert set(_row_kinds(gt, pred)) == {True, False}
    gv, pv = _layout(gt, how, fill=1), _layout(pred, how, fill=2)
    assert not gv.flags.c_contiguous
    for threads in (1, 2):
        for per_image in (False, True):
            cm = _assert_same(SMALL, gv, pv, threads=threads, per_image=per_image, words=False)
            if per_image:
                _assert_images(cm, SMALL, gt, pred)
    # a C-contiguous gt with a reversed prediction: the two masks with different strides
    cm = _assert_same(SMALL, gt, pv, threads=2, words=False)


@pytest.mark.parametrize(
    "shape", [(5, 40, 1), (3, 1, 150), (1, 300, 1), (2, 1, ROW), (2, 3, ROW + 1), (40, 1, 1)]
)
def test_runs_across_rows_images_and_threads(shape):
    # One pair nearly everywhere: runs that would continue across rows, images and thread spans
    # if the run kernel did not flush at every segment end; a few different pixels at the first
    # and last pixel of rows and images.
    gt = np.full(shape, 3, np.int32)
    pred = np.full(shape, 3, np.int32)
    gt[0, 0, 0] = 1
    gt[-1, -1, -1] = 255
    pred[:, :, -1] = 4  # last pixel of every row
    pred[:, 0, 0] = -1  # first pixel of every image (void)
    pred[shape[0] // 2, :, 0] = 7  # unexpected
    for labels in (SMALL, RAW_SHARED):
        for threads in (1, 2, 3):  # 3 spans on 2 cores: a span inside one row
            cm = _assert_same(labels, gt, pred, threads=threads, per_image=True, words=False)
            _assert_images(cm, labels, gt, pred)
            _assert_same(labels, gt, pred, threads=threads, words=False)
    # the same as 2-D (one image) and 1-D masks
    for threads in (1, 2, 3):
        _assert_same(SMALL, gt.reshape(-1, shape[-1]), pred.reshape(-1, shape[-1]), threads=threads)
        _assert_same(SMALL, gt.reshape(-1), pred.reshape(-1), threads=threads)


def test_per_image_tables_counted_in_groups():
    # 1000 classes: a table is 1002**2 counters, so per-image tables are counted a few images
    # at a time (_TABLE_BUDGET_BYTES); runs continue across images, groups and thread spans.
    labels = Labels(1000, ignore=(65535,))
    rng = np.random.default_rng(5)
    vals = np.array([0, 1, 500, 999, 65535, 1000, 4000])  # 1000 and 4000 are unexpected
    shape = (9, 7, 90)
    lengths = rng.integers(1, 200, size=400)
    g = _runs(rng, vals, math.prod(shape), lengths).reshape(shape).astype(np.uint16)
    p = _runs(rng, vals, math.prod(shape), lengths[::-1]).reshape(shape).astype(np.uint16)
    p[4:6] = 999  # images of one pair, across a group boundary
    g[4:6] = 999
    table_size = labels.lookup().table_size
    for threads in (1, 2, 3):
        group = _count._TABLE_BUDGET_BYTES // (8 * threads * table_size)
        assert 1 < group < shape[0]
        cm = _assert_same(labels, g, p, threads=threads, per_image=True, words=False)
        _assert_images(cm, labels, g, p)


def test_per_image_large_aligned_bytes():
    # Aligned 8-bit masks of over 2**20 pixels: per_image counts them on the generic kernel,
    # whose rows here switch strategy; totals and rows equal the oracle.
    g, p = _deceptive_blocks(272, 0, "uint8", seed=2)
    g, p = g.reshape(4, 272, 1024), p.reshape(4, 272, 1024)
    assert _word_path(g, p)  # the word path without per_image
    kinds = _row_kinds(g, p)
    assert set(kinds) == {True, False}
    for threads in (1, 2):
        cm = _assert_same(SMALL, g, p, threads=threads, per_image=True)
        _assert_images(cm, SMALL, g, p)


@pytest.mark.parametrize("dtype", ["int16", "int32"])
def test_raw_ids_of_one_class_inside_runs(dtype):
    # Raw ids 3, -5 and 300 are all class 0, 7 and 8 class 1, 9 and 1000 ignored: a run of one
    # class made of several raw ids is several runs of raw pairs, each looked up on its own.
    w = 3 * ROW
    row_a = np.repeat([3, -5, 300, 3], w // 4)  # long runs of different raw ids, one class
    row_b = np.tile([3, -5], w // 2)  # the raw id changes at every pixel, the class never
    row_c = np.repeat([7, 8, 9, 1000, -300, 42], w // 6)  # 42 is unexpected
    g = np.stack([row_a, row_b, row_c, row_b[::-1], row_a])
    p = np.stack([row_b, row_a, row_a, row_c, np.full(w, 9)])
    gt, pred = g.astype(dtype)[None], p.astype(dtype)[None]
    assert set(_row_kinds(gt, pred)) == {True, False}
    for threads in (1, 2):
        for per_image in (False, True):
            _assert_same(RAW_SHARED, gt, pred, threads=threads, per_image=per_image)
        _assert_same(RAW_SHARED, gt[:, :, ::-1], pred[:, ::-1], threads=threads)


# --- ImageCounter (Zarr engine) ----------------------------------------------------------------

#: Raw ids: 100 and 200 are second ids of classes 1 and 2, 50 and -1 are ignored, 127 and 255
#: unexpected. A chunk of the values of one alphabet fits every dtype (but bool), of only
#: non-negative values uint8 (not int8), of values up to 127 int8 (not uint8): signed and
#: unsigned byte chunks of one image then hold bytes whose meaning differs between the two.
COUNTER_LABELS = Labels(
    4, raw=((0, 0), (1, 1), (2, 2), (3, 3), (100, 1), (200, 2), (50, None), (-1, None))
)
ALPHABETS = ([0, 1, 2, 3, 50, 100, 127], [0, 1, 2, 3, 50, 200, 255], [-1, 0, 1, 2, 3, 100, 127])

#: How a chunk pair is handed to the counter: (gt dtype, pred dtype, layout).
CHUNK_FORMS = [
    ("uint8", "uint8", "aligned"),  # word path, read in place
    ("int8", "int8", "aligned"),  # word path, signed bytes: other codes for the same bytes
    ("uint8", "int8", "aligned"),  # word path, mixed
    ("int8", "uint8", "aligned"),
    ("bool", "bool", "aligned"),  # word path (chunks of 0 and 1 only)
    ("uint8", "uint8", "misaligned"),  # word path, both 3 bytes past a word boundary
    ("int8", "int8", "strided"),  # generic kernel, a view
    ("int16", "int16", "F"),  # generic kernel
    ("int32", "uint16", "C"),  # word path, narrowed (a block with 127/255/-1 byte by byte)
]


def _holds(dtype: str, a: np.ndarray) -> bool:
    if a.size == 0:
        return True
    if dtype == "bool":
        return bool(np.isin(a, [0, 1]).all())
    info = np.iinfo(dtype)
    return bool(info.min <= a.min() and a.max() <= info.max)


def _form(index: int, g: np.ndarray, p: np.ndarray) -> tuple[str, str, str]:
    """The first form from ``CHUNK_FORMS[index]`` on (cyclically) whose dtypes hold the chunk
    (int16 holds every value)."""
    order = CHUNK_FORMS[index:] + CHUNK_FORMS[:index]
    return next(f for f in order if _holds(f[0], g) and _holds(f[1], p))


def _chunk_as(g: np.ndarray, p: np.ndarray, form: tuple[str, str, str]):
    gdtype, pdtype, how = form
    if how in ("aligned", "misaligned"):
        off = 0 if how == "aligned" else 3
        return _aligned(g, gdtype, off), _aligned(p, pdtype, off)
    if how == "strided":
        gb = np.full((g.shape[0], 2 * g.shape[1]), 1, gdtype)
        pb = np.full((p.shape[0], 2 * p.shape[1]), 2, pdtype)
        gb[:, ::2], pb[:, ::2] = g, p
        return gb[:, ::2], pb[:, ::2]
    if how == "F":
        return np.asfortranarray(g.astype(gdtype)), np.asfortranarray(p.astype(pdtype))
    return g.astype(gdtype), p.astype(pdtype)


@settings(deadline=None, max_examples=EXAMPLES)
@given(
    data=st.data(),
    seed=st.integers(0, 2**32 - 1),
    bands=st.lists(
        st.tuples(
            st.integers(1, 24), st.sampled_from(range(len(ALPHABETS))), st.sampled_from(KINDS)
        ),
        min_size=1,
        max_size=4,
    ),
    width=st.integers(1, 90),
    step=st.tuples(st.integers(1, 40), st.integers(1, 64)),
)
def test_image_counter_chunks_equal_reference(data, seed, bands, width, step):
    # One image in chunks of several dtypes and layouts (word path and generic kernel mixed,
    # signed and unsigned bytes in turn), then finish(); then a second image on the same
    # counter, interleaved chunk by chunk with a second counter on the same thread.
    rows = []
    for i, (height, alphabet, kind) in enumerate(bands):
        n = height * width
        vals = ALPHABETS[alphabet]
        rows.append(_build(seed + i, [(kind, n - n // 2), ("runs", n // 2)], vals, vals))
    gt = np.concatenate([g for g, _ in rows]).reshape(-1, width)
    pred = np.concatenate([p for _, p in rows]).reshape(-1, width)
    sy, sx = step
    lk = COUNTER_LABELS.lookup()
    counter, other = _count.ImageCounter(lk), _count.ImageCounter(lk)
    forms = itertools.cycle(
        data.draw(st.lists(st.integers(0, len(CHUNK_FORMS) - 1), min_size=1, max_size=64))
    )
    for image in range(2):
        for y in range(0, gt.shape[0], sy):
            for x in range(0, width, sx):
                gc, pc = gt[y : y + sy, x : x + sx], pred[y : y + sy, x : x + sx]
                counter.add(*_chunk_as(gc, pc, _form(next(forms), gc, pc)))
                if image == 1:  # another counter on the same thread in between
                    other.add(*_chunk_as(pc, gc, _form(next(forms), pc, gc)))
        _assert_table(counter.finish(), COUNTER_LABELS.ref(gt, pred), COUNTER_LABELS.k)
    _assert_table(other.finish(), COUNTER_LABELS.ref(pred, gt), COUNTER_LABELS.k)


def test_image_counter_signed_and_unsigned_bytes():
    # The same bytes mean 200/255 in uint8 chunks and -56/-1 in int8 chunks of one image.
    lk = COUNTER_LABELS.lookup()
    counter = _count.ImageCounter(lk)
    u = np.array([[200, 200, 255, 0, 0, 0, 0, 0] * 4] * 8)  # 200: class 2, 255: unexpected
    s = np.array([[-1, -1, 127, 0, 1, 1, 1, 1] * 4] * 8)  # -1: ignored, 127: unexpected
    for g, p, dtypes in [(u, u, "uu"), (s, s, "ss"), (u, s, "us"), (s, u, "su"), (u, u, "uu")]:
        gd = "uint8" if dtypes[0] == "u" else "int8"
        pd = "uint8" if dtypes[1] == "u" else "int8"
        counter.add(_aligned(g, gd), _aligned(p, pd))
    g_all = np.concatenate([u, s, u, s, u])
    p_all = np.concatenate([u, s, s, u, u])
    _assert_table(counter.finish(), COUNTER_LABELS.ref(g_all, p_all), COUNTER_LABELS.k)
