"""Detection operators of ``F.contrib`` in plain JAX with static shapes: box_nms (its output has the
input's shape: kept boxes first, in descending score, the other rows -1), box_iou, box_encode,
box_decode, bipartite_matching, ROIAlign, and ROIPooling."""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._registry import Attrs, OpContext, register
from ._util import ndim_check

_FORMATS = ("corner", "center")


def _corners(boxes, fmt: str):
    """(xmin, ymin, xmax, ymax) of ``boxes[..., :4]`` in ``fmt``."""
    if fmt == "corner":
        return boxes[..., 0], boxes[..., 1], boxes[..., 2], boxes[..., 3]
    x, y, hw, hh = boxes[..., 0], boxes[..., 1], boxes[..., 2] / 2, boxes[..., 3] / 2
    return x - hw, y - hh, x + hw, y + hh


def _area(x0, y0, x1, y1):
    w, h = x1 - x0, y1 - y0
    return jnp.where((w < 0) | (h < 0), 0, w * h)


def _pairwise_iou(lhs, rhs, fmt: str):
    """IoU of every box in ``lhs`` (..., N, 4) with every box in ``rhs`` (..., M, 4): (..., N, M)."""
    l0, l1, l2, l3 = (v[..., :, None] for v in _corners(lhs, fmt))
    r0, r1, r2, r3 = (v[..., None, :] for v in _corners(rhs, fmt))
    w = jnp.maximum(jnp.minimum(l2, r2) - jnp.maximum(l0, r0), 0)
    h = jnp.maximum(jnp.minimum(l3, r3) - jnp.maximum(l1, r1), 0)
    inter = w * h
    union = _area(l0, l1, l2, l3) + _area(r0, r1, r2, r3) - inter
    return jnp.where(inter > 0, inter / jnp.where(inter > 0, union, 1), 0)


@register("_contrib_box_iou", inputs=("lhs", "rhs"))
def box_iou(ins: list, a: Attrs, ctx: OpContext) -> list:
    """IoU of boxes (last axis 4): shape ``lhs.shape[:-1] + rhs.shape[:-1]``."""
    lhs, rhs = ins[0], ins[1]
    if lhs.shape[-1] != 4 or rhs.shape[-1] != 4:
        raise a.fail(f"boxes need a last axis of 4, got lhs {tuple(lhs.shape)} and rhs {tuple(rhs.shape)}")
    fmt = a.str("format", "corner", _FORMATS)
    iou = _pairwise_iou(lhs.reshape(-1, 4), rhs.reshape(-1, 4), fmt)
    return [lax.stop_gradient(iou.reshape(lhs.shape[:-1] + rhs.shape[:-1]))]


# -- non-maximum suppression ---------------------------------------------------------------------
def _convert_format(rows, start: int, source: str, target: str):
    """Rows' coordinates converted between formats; rows whose first coordinate is negative (MXNet's -1
    fill) are left as they are."""
    box = rows[..., start:start + 4]
    if source == "corner":
        x0, y0, x1, y1 = (box[..., i] for i in range(4))
        new = jnp.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], -1)
    else:
        new = jnp.stack(_corners(box, "center"), -1)
    new = jnp.where(box[..., :1] < 0, box, new)
    # concatenated rather than written with .at[].set: XLA:CPU (jaxlib 0.10) miscompiles that update
    # after the NMS gather when the result is reshaped (the new xmax read the updated xmin)
    return jnp.concatenate([rows[..., :start], new, rows[..., start + 4:]], axis=-1)


_NMS_MATRIX_LIMIT = 4096


def _nms_one(rows, a: dict):
    """NMS of one batch entry's rows (N, width); only the first ``topk`` ranked rows are compared, so the
    work is O(topk^2) however many rows there are."""
    n = rows.shape[0]
    k = a["topk"]
    scores = rows[:, a["score"]]
    valid = scores > a["valid_thresh"]
    if a["id"] >= 0:  # with the default background_id=-1, rows of class -1 are dropped too
        valid &= rows[:, a["id"]] != a["background"]
    order = jnp.argsort(jnp.where(valid, -scores, jnp.inf), stable=True)[:k]
    ranked = rows[order]
    candidate = jnp.arange(k) < jnp.sum(valid)
    boxes = ranked[:, a["coord"]:a["coord"] + 4]
    same_class = a["id"] >= 0 and not a["force"]

    def overlaps(rows_of, cols):
        """(len(rows_of), k): which later-ranked candidates each of ``rows_of`` suppresses."""
        over = _pairwise_iou(boxes[rows_of], boxes, a["in_format"]) > a["overlap"]
        if same_class:
            over &= ranked[rows_of, a["id"], None] == ranked[None, :, a["id"]]
        return over & (jnp.arange(k)[None, :] > cols[:, None])

    if k <= _NMS_MATRIX_LIMIT:  # all pairs at once
        table = overlaps(jnp.arange(k), jnp.arange(k))

        def suppress(i, keep):
            return keep & ~(keep[i] & table[i])
    else:  # one row of pairs per step: memory O(k)
        def suppress(i, keep):
            return keep & ~(keep[i] & overlaps(i[None], i[None])[0])

    keep = lax.fori_loop(0, k, suppress, candidate)
    first = jnp.argsort(~keep, stable=True)  # kept rows first, in score order
    kept = jnp.where((jnp.arange(k) < jnp.sum(keep))[:, None], ranked[first], -jnp.ones((), rows.dtype))
    return jnp.concatenate([kept, -jnp.ones((n - k, rows.shape[1]), rows.dtype)]) if k < n else kept


@register("_contrib_box_nms", "_contrib_box_non_maximum_suppression")
def box_nms(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Non-maximum suppression over the boxes of the second-last axis (one record per row: score at
    ``score_index``, 4 coordinates from ``coord_start``, optional class at ``id_index``). Rows with score
    ``> valid_thresh`` are sorted by score (only the first ``topk`` considered); a row is dropped when its
    IoU with a kept higher-scoring row of the same class (any class with ``force_suppress``) exceeds
    ``overlap_thresh``. Same shape as the input: kept rows first, then rows of -1."""
    x = ins[0]
    if x.ndim < 2:
        raise a.fail(f"data must have at least 2 dimensions (boxes, record), got shape {tuple(x.shape)}")
    n, width = x.shape[-2], x.shape[-1]
    topk = a.int("topk", -1)
    params = {"score": a.int("score_index", 1), "coord": a.int("coord_start", 2), "id": a.int("id_index", -1),
              "background": a.int("background_id", -1), "valid_thresh": a.float("valid_thresh", 0.0),
              "overlap": a.float("overlap_thresh", 0.5), "force": a.bool("force_suppress", False),
              "in_format": a.str("in_format", "corner", _FORMATS), "topk": n if topk < 0 else min(n, topk)}
    out_format = a.str("out_format", "corner", _FORMATS)
    coords = range(params["coord"], params["coord"] + 4)
    if not 0 <= params["score"] < width or params["score"] in coords:
        raise a.fail(f"score_index={params['score']} must be a column of the {width} outside the coordinates")
    if params["coord"] < 0 or params["coord"] + 4 > width:
        raise a.fail(f"coord_start={params['coord']} leaves no 4 coordinates in records of width {width}")
    if params["id"] >= 0 and (params["id"] >= width or params["id"] in coords or params["id"] == params["score"]):
        raise a.fail(f"id_index={params['id']} must be a column of the {width} apart from score and coordinates")
    if params["topk"] < 1:
        return [x]
    return [_box_nms(x, tuple(sorted(params.items())), out_format)]


@functools.partial(jax.jit, static_argnums=(1, 2))
def _box_nms(x, params: tuple, out_format: str):
    """One compiled program per configuration (eager calls would otherwise dispatch op by op)."""
    params = dict(params)
    n, width = x.shape[-2], x.shape[-1]
    out = jax.vmap(lambda r: _nms_one(r, params))(x.reshape((-1, n, width)))
    if params["in_format"] != out_format:
        out = _convert_format(out, params["coord"], params["in_format"], out_format)
    return out.reshape(x.shape)


# -- box encoding --------------------------------------------------------------------------------------
def _center_size(boxes):
    w, h = boxes[..., 2] - boxes[..., 0], boxes[..., 3] - boxes[..., 1]
    return boxes[..., 0] + w * 0.5, boxes[..., 1] + h * 0.5, w, h


@register("_contrib_box_encode", inputs=("samples", "matches", "anchors", "refs", "means", "stds"),
          num_outputs=2)
def box_encode(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Regression targets of anchors (B, N, 4, corner) towards their matched references (B, M, 4, corner):
    ``[targets (B, N, 4), masks (B, N, 4)]``, both zero where ``samples <= 0.5``."""
    samples, matches, anchors, refs, means, stds = ins[:6]
    index = jnp.clip(matches.astype(jnp.int32), 0, refs.shape[1] - 1)
    matched = jnp.take_along_axis(refs, index[..., None], axis=1)
    gx, gy, gw, gh = _center_size(matched)
    ax, ay, aw, ah = _center_size(anchors)
    raw = jnp.stack([(gx - ax) / aw, (gy - ay) / ah, jnp.log(gw / aw), jnp.log(gh / ah)], -1)
    positive = (samples > 0.5)[..., None]
    targets = jnp.where(positive, (raw - means) / stds, 0).astype(anchors.dtype)
    return [targets, jnp.broadcast_to(positive, targets.shape).astype(anchors.dtype)]


@register("_contrib_box_decode", inputs=("data", "anchors"))
def box_decode(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Corner boxes from offsets (B, N, 4) and anchors (1 or B, N, 4) in ``format`` (default 'center'):
    ``x = d0*std0*aw + ax``, ``w = exp(min(d2*std2, clip)) * aw`` (clip when > 0)."""
    data, anchors = ins[0], ins[1]
    stds = [a.float(f"std{i}", 1.0) for i in range(4)]
    clip = a.float("clip", -1.0)
    if a.str("format", "center", _FORMATS) == "corner":
        ax, ay, aw, ah = _center_size(anchors)
    else:
        ax, ay, aw, ah = anchors[..., 0], anchors[..., 1], anchors[..., 2], anchors[..., 3]
    ox, oy = data[..., 0] * stds[0] * aw + ax, data[..., 1] * stds[1] * ah + ay
    dw, dh = data[..., 2] * stds[2], data[..., 3] * stds[3]
    if clip > 0:
        dw, dh = jnp.minimum(dw, clip), jnp.minimum(dh, clip)
    hw, hh = jnp.exp(dw) * aw / 2, jnp.exp(dh) * ah / 2
    return [jnp.stack([ox - hw, oy - hh, ox + hw, oy + hh], -1)]


# -- matching --------------------------------------------------------------------------------------------
def _match_one(scores, threshold: float, ascend: bool, topk: int):
    rows, cols = scores.shape
    flat = scores.reshape(-1)
    order = jnp.argsort(flat if ascend else -flat, stable=True)

    def step(j, state):
        row_mark, col_mark, count, done = state
        idx = order[j]
        r, c = idx // cols, idx % cols
        free = (row_mark[r] < 0) & (col_mark[c] < 0) & ~done
        good = flat[idx] < threshold if ascend else flat[idx] > threshold
        take = free & good
        row_mark = jnp.where(take, row_mark.at[r].set(c), row_mark)
        col_mark = jnp.where(take, col_mark.at[c].set(r), col_mark)
        count = count + take
        done = done | (free & ~good) | (take & (topk > 0) & (count > topk))
        return row_mark, col_mark, count, done

    init = (-jnp.ones(rows, jnp.int32), -jnp.ones(cols, jnp.int32), jnp.int32(0), jnp.bool_(False))
    row_mark, col_mark, _, _ = lax.fori_loop(0, rows * cols, step, init)
    return row_mark, col_mark


@register("_contrib_bipartite_matching", num_outputs=2)
def bipartite_matching(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Greedy matching of rows to columns of a score matrix (..., N, M) in score order: ``[row_marker
    (..., N), col_marker (..., M)]`` holding the matched column / row, or -1. Matching stops at the first
    free pair whose score fails ``threshold``, and (as MXNet does) after ``topk + 1`` matches."""
    x = ins[0]
    if x.ndim < 2:
        raise a.fail(f"data must have at least 2 dimensions, got shape {tuple(x.shape)}")
    threshold, ascend, topk = a.float("threshold"), a.bool("is_ascend", False), a.int("topk", -1)
    return list(_matching(lax.stop_gradient(x), threshold, ascend, topk))


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _matching(x, threshold: float, ascend: bool, topk: int):
    scores = x.reshape((-1,) + tuple(x.shape[-2:]))
    rows, cols = jax.vmap(lambda s: _match_one(s, threshold, ascend, topk))(scores)
    return rows.reshape(x.shape[:-1]).astype(x.dtype), cols.reshape(x.shape[:-2] + x.shape[-1:]).astype(x.dtype)


# -- region pooling ----------------------------------------------------------------------------------------
def _pooled_size(a: Attrs) -> tuple[int, int]:
    size = a.tuple("pooled_size")
    size = size * 2 if len(size) == 1 else size
    if len(size) != 2 or min(size) < 1:
        raise a.fail(f"pooled_size={size} must be two positive integers")
    return size


def _check_rois(a: Attrs, data, rois) -> None:
    ndim_check(a, data, (4,))
    if rois.ndim != 2 or rois.shape[1] != 5:
        raise a.fail(f"rois must have shape (R, 5) [batch_index, x1, y1, x2, y2], got {tuple(rois.shape)}")


def _sample_weights(start, bin_size, grid, max_grid: int, pooled: int, size: int):
    """(R, pooled, size) weights averaging ``grid`` bilinear samples per bin along one axis."""
    g = jnp.arange(max_grid)
    p = jnp.arange(pooled)
    # sample coordinates (R, pooled, max_grid)
    coord = start[:, None, None] + p[None, :, None] * bin_size[:, None, None] + \
        (g[None, None, :] + 0.5) * bin_size[:, None, None] / grid[:, None, None]
    used = g[None, None, :] < grid[:, None, None]
    inside = (coord >= -1.0) & (coord <= size)
    coord = jnp.maximum(coord, 0.0)
    low = jnp.floor(coord).astype(jnp.int32)
    at_edge = low >= size - 1
    low = jnp.where(at_edge, size - 1, low)
    high = jnp.where(at_edge, size - 1, low + 1)
    frac = jnp.where(at_edge, 0.0, coord - low)
    cells = jnp.arange(size)
    weight = (1 - frac)[..., None] * (cells == low[..., None]) + frac[..., None] * (cells == high[..., None])
    weight = jnp.where((used & inside)[..., None], weight, 0.0)
    return jnp.sum(weight, axis=2) / grid[:, None, None]


def _per_image(data, rows_weight, cols_weight, batch):
    """out[r, c, p, q] = sum_hw rows_weight[r, p, h] data[batch[r], c, h, w] cols_weight[r, q, w]."""
    out = 0
    for n in range(data.shape[0]):
        mine = (batch == n).astype(data.dtype)[:, None, None]
        rows = jnp.einsum("rph,chw->rcpw", rows_weight * mine, data[n])
        out = out + jnp.einsum("rcpw,rqw->rcpq", rows, cols_weight)
    return out


@register("_contrib_ROIAlign", inputs=("data", "rois"))
def roi_align(ins: list, a: Attrs, ctx: OpContext) -> list:
    """ROIAlign of NCHW ``data`` over ``rois`` (R, 5): each output bin averages bilinear samples on a
    ``sample_ratio`` grid (adaptive ``ceil(roi_size / pooled)`` when <= 0: exact on concrete rois; inside
    hybridize/jit the grid is bounded by ``ceil(feature size / pooled) + 1``). Rois with a negative batch
    index give zeros (MXNet 1.9.1 instead writes one 0 at flat position r of the whole output and leaves
    that roi's own outputs unwritten). ``position_sensitive`` reads channel ``(c * ph + i) * pw + j`` for bin (i, j)."""
    data, rois = ins[0], lax.stop_gradient(ins[1])
    _check_rois(a, data, rois)
    ph, pw = _pooled_size(a)
    scale = a.float("spatial_scale")
    ratio = a.int("sample_ratio", -1)
    aligned, sensitive = a.bool("aligned", False), a.bool("position_sensitive", False)
    if sensitive and data.shape[1] % (ph * pw):
        raise a.fail(f"position_sensitive needs channels ({data.shape[1]}) divisible by {ph}x{pw}")
    if ratio > 0:
        grid = (ratio, ratio)
    else:  # the largest adaptive grid: exact for concrete rois, bounded by the feature map under tracing
        try:
            r = np.asarray(rois, np.float64)
            extent = [(r[:, 4] - r[:, 2]) * scale, (r[:, 3] - r[:, 1]) * scale]
            if not aligned:
                extent = [np.maximum(e, 1.0) for e in extent]
            grid = tuple(int(max(1, np.max(np.ceil(e / p), initial=1))) for e, p in zip(extent, (ph, pw)))
        except jax.errors.TracerArrayConversionError:
            grid = (math.ceil(data.shape[2] / ph) + 1, math.ceil(data.shape[3] / pw) + 1)
    return [_roi_align(data, rois, (ph, pw), scale, ratio, aligned, sensitive, grid)]


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5, 6, 7))
def _roi_align(data, rois, pooled: tuple, scale: float, ratio: int, aligned: bool, sensitive: bool, grid: tuple):
    ph, pw = pooled
    offset = 0.5 if aligned else 0.0
    height, width = data.shape[2], data.shape[3]
    dtype = jnp.promote_types(data.dtype, jnp.float32)
    r = rois.astype(dtype)
    x0, y0 = r[:, 1] * scale - offset, r[:, 2] * scale - offset
    roi_w, roi_h = r[:, 3] * scale - offset - x0, r[:, 4] * scale - offset - y0
    if not aligned:
        roi_w, roi_h = jnp.maximum(roi_w, 1.0), jnp.maximum(roi_h, 1.0)
    bin_h, bin_w = roi_h / ph, roi_w / pw
    if ratio > 0:
        grid_h = grid_w = jnp.full(r.shape[0], float(ratio), dtype)
    else:
        grid_h = jnp.clip(jnp.ceil(roi_h / ph), 1.0, grid[0])
        grid_w = jnp.clip(jnp.ceil(roi_w / pw), 1.0, grid[1])
    wy = _sample_weights(y0, bin_h, grid_h, grid[0], ph, height).astype(data.dtype)
    wx = _sample_weights(x0, bin_w, grid_w, grid[1], pw, width).astype(data.dtype)
    batch = r[:, 0].astype(jnp.int32)
    out = _per_image(data, wy, wx, batch)  # (R, C, ph, pw)
    if sensitive:
        groups = out.reshape(out.shape[0], data.shape[1] // (ph * pw), ph, pw, ph, pw)
        out = jnp.einsum("rcijij->rcij", groups)
    return jnp.where((r[:, 0] >= 0)[:, None, None, None], out, 0)


def _round_half_away(v):
    return jnp.where(v >= 0, jnp.floor(v + 0.5), jnp.ceil(v - 0.5))


def _bin_masks(start, end, pooled: int, size: int):
    """(R, pooled, size) membership of cells in MXNet's ROIPooling bins along one axis."""
    extent = jnp.maximum(end - start + 1, 1)[:, None]
    p = jnp.arange(pooled)[None]
    # floor(p * extent / pooled) and ceil((p + 1) * extent / pooled) in exact integer arithmetic
    low = jnp.clip(p * extent // pooled + start[:, None], 0, size)
    high = jnp.clip(-(-(p + 1) * extent // pooled) + start[:, None], 0, size)
    cells = jnp.arange(size)
    return (cells >= low[..., None]) & (cells < high[..., None])


@register("ROIPooling", inputs=("data", "rois"))
def roi_pooling(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Max pooling of NCHW ``data`` over the bins of each roi (R, 5) [batch, x1, y1, x2, y2], with the
    corners rounded after scaling by ``spatial_scale``; empty bins give 0."""
    data, rois = ins[0], lax.stop_gradient(ins[1])
    _check_rois(a, data, rois)
    return [_roi_pooling(data, rois, _pooled_size(a), a.float("spatial_scale"))]


@functools.partial(jax.jit, static_argnums=(2, 3))
def _roi_pooling(data, rois, pooled: tuple, scale: float):
    ph, pw = pooled
    corners = _round_half_away(rois[:, 1:].astype(jnp.float32) * scale).astype(jnp.int32)
    rows = _bin_masks(corners[:, 1], corners[:, 3], ph, data.shape[2])  # (R, ph, H)
    cols = _bin_masks(corners[:, 0], corners[:, 2], pw, data.shape[3])  # (R, pw, W)
    batch = rois[:, 0].astype(jnp.int32)
    lowest = jnp.asarray(-jnp.inf, data.dtype)
    image = data[jnp.clip(batch, 0, data.shape[0] - 1)]  # (R, C, H, W)
    over_w = jnp.max(jnp.where(cols[:, None, None, :, :], image[:, :, :, None, :], lowest), axis=-1)  # R,C,H,pw
    out = jnp.max(jnp.where(rows[:, None, :, :, None], over_w[:, :, None, :, :], lowest), axis=3)  # R,C,ph,pw
    return jnp.where(jnp.isneginf(out) | (batch < 0)[:, None, None, None], 0, out)


@register("_contrib_MultiBoxPrior")
def multibox_prior(ins: list, a: Attrs, ctx: OpContext) -> list:
    """SSD anchors for every cell of NCHW ``data``: (1, H * W * (len(sizes) + len(ratios) - 1), 4) corner
    boxes in [0, 1] image coordinates (all sizes with the first ratio, then the other ratios with the first
    size), centred at ``(cell + offsets) * steps`` (steps default to 1 / size); ``clip`` clips to [0, 1]."""
    x = ins[0]
    ndim_check(a, x, (4,))
    height, width = x.shape[2], x.shape[3]
    sizes, ratios = a.floats("sizes", (1.0,)), a.floats("ratios", (1.0,))
    steps, offsets = a.floats("steps", (-1.0, -1.0)), a.floats("offsets", (0.5, 0.5))
    step_y = steps[0] if steps[0] > 0 else 1.0 / height
    step_x = steps[1] if steps[1] > 0 else 1.0 / width
    shapes = [(s, math.sqrt(ratios[0])) for s in sizes] + [(sizes[0], math.sqrt(r)) for r in ratios[1:]]
    half = np.array([[s * height / width * r / 2, s / r / 2] for s, r in shapes], np.float32)  # (A, 2): w, h
    cy = (np.arange(height, dtype=np.float32) + offsets[0]) * step_y
    cx = (np.arange(width, dtype=np.float32) + offsets[1]) * step_x
    centre = np.stack(np.meshgrid(cx, cy), -1)  # (H, W, 2): x, y
    lo = centre[:, :, None, :] - half[None, None]
    hi = centre[:, :, None, :] + half[None, None]
    boxes = np.concatenate([lo, hi], -1).reshape(1, -1, 4)
    if a.bool("clip", False):
        boxes = np.clip(boxes, 0.0, 1.0)
    return [jnp.asarray(boxes, x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.float32)]
