"""Sparse gradients (e.g. nn.Embedding(sparse=True)): torch's row-wise updates on opforge
kernels, and the refusal where no kernel computes torch's formula.

A sparse COO gradient of a parameter with sparse_dim s names rows of the parameter seen as
(prod(shape[:s]), rest): its values are those rows. Kernels see the same two-dimensional
row layout (the sparse ops' var (rows, cols), grad (len(indices), cols))."""

import math


def refusal(opt, gi, pi, why):
    """The error for a sparse gradient an optimizer cannot take (raised before any state
    changes, as the other gradient checks)."""
    return RuntimeError(f"{type(opt).__name__}: parameter {pi} of group {gi} has a sparse "
                        f"gradient, {why}")


def check_rows(opt, gi, pi, p):
    """The row view of a parameter updated in place needs contiguous storage."""
    if not p.is_contiguous():
        raise refusal(opt, gi, pi, "and the parameter is not contiguous (sparse updates "
                      "write its rows in place)")


def split(group):
    """(group of the parameters with dense gradients or None, parameters with sparse
    gradients). Without sparse gradients the group itself, so nothing changes for it."""
    sparse = [p for p in group["params"] if p.grad is not None and p.grad.is_sparse]
    if not sparse:
        return group, []
    dense = [p for p in group["params"] if p.grad is not None and not p.grad.is_sparse]
    return (dict(group, params=dense) if dense else None), sparse


def rows(grad, negate=False):
    """(row indices int64 (n,), values (n, cols) contiguous) of a sparse gradient,
    coalesced as torch's optimizers do (duplicate indices summed; the updates are not linear
    in the gradient, so each row must come once). negate: torch's maximize, applied before
    coalescing as torch does (the same sums, negated exactly)."""
    if negate:
        grad = -grad
    grad = grad.coalesce()
    indices, values = grad._indices(), grad._values()
    s = grad.sparse_dim()
    # Row-major linear index over the sparse dims: the row of the 2-D view.
    idx = indices[s - 1].clone()
    stride = 1
    for d in range(s - 2, -1, -1):
        stride *= grad.shape[d + 1]
        idx += indices[d] * stride
    return idx.contiguous(), values.reshape(values.shape[0], -1).contiguous()


def row_view(t, sparse_dim):
    """t as (rows, cols), rows the product of its first sparse_dim dims; no copy."""
    return t.view(math.prod(t.shape[:sparse_dim]), -1)
