"""NN ops through opforge.registry.Kernel: output shapes, allocated outputs and values vs
fp64 NumPy (layer_norm, matmul)."""

import numpy as np
import pytest

import opforge


def layer_norm_ref(x, gamma, beta, eps):
    """torch.nn.functional.layer_norm over the last axis: biased variance."""
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


@pytest.mark.parametrize("rows,cols", [(1, 1), (5, 17), (17, 1000), (1, 65543)])
def test_layer_norm_numpy(reg, rows, cols):
    rng = np.random.default_rng(rows * 7 + cols)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    gamma = rng.standard_normal(cols).astype(np.float32)
    beta = rng.standard_normal(cols).astype(np.float32)
    args = dict(x=x, gamma=gamma, beta=beta, eps=1e-5)
    k = reg.select_for("layer_norm", args)
    assert k.output_shape(0, args) == (rows, cols)
    assert k.output_shape("y", args) == (rows, cols)
    y = k.run(args)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (rows, cols)
    # fp32 mean/variance over up to 65543 elements: |err| <= 1e-4 + 1e-4*|ref|.
    np.testing.assert_allclose(y, layer_norm_ref(x, gamma, beta, 1e-5), rtol=1e-4, atol=1e-4)


def test_layer_norm_bad_shapes_are_refused(reg):
    k = reg.select("layer_norm")
    x = np.ones((5, 17), np.float32)
    with pytest.raises(opforge.OpforgeError, match="gamma"):
        k.output_shape(0, x=x, gamma=np.ones(16, np.float32), beta=np.ones(17, np.float32),
                       eps=1e-5)
    with pytest.raises(opforge.OpforgeError, match="no output 'z'"):
        k.output_shape("z", x=x, gamma=np.ones(17, np.float32), beta=np.ones(17, np.float32),
                       eps=1e-5)
    with pytest.raises(opforge.OpforgeError, match="run\\(\\) allocates output 'y'"):
        k.run(x=x, gamma=np.ones(17, np.float32), beta=np.ones(17, np.float32), eps=1e-5,
              y=np.ones((5, 17), np.float32))


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("m,k_,n", [(1, 1, 1), (5, 17, 1000), (17, 5, 1)])
def test_matmul_numpy_and_torch(reg, ta, tb, m, k_, n):
    rng = np.random.default_rng(m * 100 + k_ * 10 + n + 2 * ta + tb)
    a = rng.standard_normal((k_, m) if ta else (m, k_)).astype(np.float32)
    b = rng.standard_normal((n, k_) if tb else (k_, n)).astype(np.float32)
    ref = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    # fp32 dot products of K terms: |err| <= 1e-6 * K * (|a| |b|) elementwise.
    bound = 1e-6 * k_ * (np.abs(a.T if ta else a) @ np.abs(b.T if tb else b)) + 1e-7
    kern = reg.select("matmul", {"transpose_a": ta, "transpose_b": tb})
    assert kern.output_shape(0, a=a, b=b) == (m, n)
    c = kern.run(a=a, b=b)
    assert c.shape == (m, n)
    assert np.all(np.abs(c - ref) <= bound)
    torch = pytest.importorskip("torch")
    ct = kern.run(a=torch.from_numpy(a), b=torch.from_numpy(b))
    assert isinstance(ct, torch.Tensor) and ct.dtype == torch.float32
    assert np.all(np.abs(ct.numpy() - ref) <= bound)


def test_matmul_inner_dim_mismatch_is_explained(reg):
    k = reg.select("matmul")
    with pytest.raises(opforge.OpforgeError, match="a's columns \\(K\\) must equal b's rows"):
        k.output_shape(0, a=np.ones((5, 17), np.float32), b=np.ones((16, 3), np.float32))


def test_shape_value_evaluates_cost(reg):
    k = reg.select("matmul")
    a, b = np.ones((5, 17), np.float32), np.ones((17, 3), np.float32)
    assert k.shape_value("2*a_rows*a_cols*b_cols", a=a, b=b) == 2 * 5 * 17 * 3
    with pytest.raises(opforge.OpforgeError, match="nope"):
        k.shape_value("nope + 1", a=a, b=b)
