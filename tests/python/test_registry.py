"""opforge.registry: listing, describing, selecting and calling kernels, against the index
file and fp64 references (refs.py)."""

import numpy as np
import pytest

import opforge
from refs import (HYPER, SIZES, adam_inputs, adam_tf, adam_torch, from_bf16_bits, powers,
                  to_bf16_bits)

# One fp32 Adam step vs fp64 on the same fp32 inputs: a few ulp of var (|var| ~ 1).
RTOL, ATOL = 1e-5, 1e-6


def attr_values(desc):
    return {a["name"]: a["value"] for a in desc["attrs"]}


def storage(desc):
    return {t["name"]: t["dtype"] for t in desc["inputs"] if t["role"] != "scalar"}


# ------------------------------------------------------------------------------ listing
def test_ops_match_the_index(reg, index):
    ops = reg.ops()
    assert ops == sorted(set(e["op"] for e in index["variants"]))
    assert {"apply_adam", "layer_norm", "matmul"} <= set(ops)


def test_variants_are_every_indexed_variant_of_the_op(reg, index):
    got = reg.variants("apply_adam")
    want = {e["variant"] for e in index["variants"] if e["op"] == "apply_adam"}
    assert {d["variant"] for d in got} == want
    assert all(d["op"] == "apply_adam" and d["kind"] == "optimizer" for d in got)
    # fp32 storage first: its tensors are all float32.
    assert set(storage(got[0]).values()) == {"float32"}


def test_unknown_op_is_named_with_a_suggestion(reg):
    with pytest.raises(opforge.OpforgeError, match="unknown op 'apply_adamm'.*apply_adam"):
        reg.variants("apply_adamm")
    with pytest.raises(opforge.OpforgeError, match="apply_adamm"):
        reg.select("apply_adamm")


def test_registry_dir_is_the_opened_one(reg):
    import os
    assert os.path.realpath(reg.dir) == os.path.realpath(os.environ["OPFORGE_REGISTRY"])


# ------------------------------------------------------------------------------ selecting
def test_select_by_attrs(reg):
    k = reg.select("apply_adam", {"epsilon_mode": "torch"})
    assert attr_values(k.descriptor)["epsilon_mode"] == "torch"
    assert k.descriptor["target"]["isa"] == k.isa
    k = reg.select("apply_adam", "epsilon_mode=torch,use_nesterov=1")
    assert attr_values(k.descriptor)["use_nesterov"] is True
    for flag in (True, False):  # Python bools as the C ABI's 1/0
        k = reg.select("apply_adam", {"use_nesterov": flag, "epsilon_mode": "torch"})
        assert attr_values(k.descriptor)["use_nesterov"] is flag
    k = reg.select("apply_adam", {"storage": "bf16m"})
    assert storage(k.descriptor) == {"var": "float32", "m": "float32", "v": "float32",
                                     "model": "bfloat16", "grad": "bfloat16"}
    k = reg.select("apply_adam")  # defaults: tf convention, fp32
    assert attr_values(k.descriptor)["epsilon_mode"] == "tf"
    assert set(storage(k.descriptor).values()) == {"float32"}


def test_kernel_descriptor_is_the_variants(reg):
    k = reg.select("apply_adam", {"use_nesterov": True})
    same = [d for d in reg.variants("apply_adam") if d["variant"] == k.variant]
    assert same == [k.descriptor]


def test_bad_attr_is_named(reg):
    with pytest.raises(opforge.OpforgeError, match="epsilon_mode"):
        reg.select("apply_adam", {"epsilon_mode": "keras"})
    with pytest.raises(opforge.OpforgeError, match="no_such_attr"):
        reg.select("apply_adam", {"no_such_attr": 1})


# ------------------------------------------------------------------------------ calls
def adam_step(k, var, m, v, grad, t, **extra):
    k(var=var, m=m, v=v, grad=grad, **HYPER, **powers(t), **extra)


@pytest.mark.parametrize("n", SIZES)
def test_adam_tf_numpy_f32(reg, n):
    k = reg.select("apply_adam")
    var, m, v, grad = adam_inputs(n, seed=n)
    want = adam_tf(var, m, v, grad, t=3, **HYPER)
    adam_step(k, var, m, v, grad, 3)
    for got, ref in zip((var, m, v), want):
        np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("n", SIZES)
def test_adam_torch_convention_torch_f32(reg, n):
    torch = pytest.importorskip("torch")
    k = reg.select("apply_adam", {"epsilon_mode": "torch"})
    arrays = adam_inputs(n, seed=100 + n)
    want = adam_torch(*arrays, t=5, **HYPER)
    var, m, v, grad = (torch.from_numpy(a.copy()) for a in arrays)
    adam_step(k, var, m, v, grad, 5)
    for got, ref in zip((var, m, v), want):
        np.testing.assert_allclose(got.numpy(), ref, rtol=RTOL, atol=ATOL)


def test_several_steps_track_the_reference(reg):
    k = reg.select("apply_adam", {"epsilon_mode": "torch"})
    var, m, v, grad = adam_inputs(1000, seed=7)
    m[:] = 0
    v[:] = 0
    ref = (var.astype(np.float64), m.astype(np.float64), v.astype(np.float64))
    rng = np.random.default_rng(8)
    for t in range(1, 11):
        grad = rng.standard_normal(1000).astype(np.float32)
        ref = adam_torch(*ref, grad, t=t, **HYPER)
        adam_step(k, var, m, v, grad, t)
    # Ten steps: fp32 rounding of the state accumulates to a few times one step's.
    np.testing.assert_allclose(var, ref[0], rtol=1e-5, atol=1e-5)


# bf16 storage (mixed precision): fp32 master var/m/v, bf16 gradient, bf16 model copy written.
# The model copy is the rounded var: within half a bf16 ulp (2^-9 relative) of the fp32 var,
# and so within 2^-8 of the fp64 reference.
BF16_RTOL = 2.0 ** -8


@pytest.mark.parametrize("n", SIZES)
def test_adam_bf16m_numpy_uint16_bits(reg, n):
    k = reg.select("apply_adam", {"storage": "bf16m"})
    var, m, v, grad32 = adam_inputs(n, seed=200 + n)
    grad = to_bf16_bits(grad32)
    model = np.zeros(n, np.uint16)
    want = adam_tf(var, m, v, from_bf16_bits(grad), t=2, **HYPER)
    adam_step(k, var, m, v, grad, 2, model=model)
    for got, ref in zip((var, m, v), want):
        np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(from_bf16_bits(model), want[0], rtol=BF16_RTOL, atol=1e-30)


@pytest.mark.parametrize("n", [5, 65543])
def test_adam_bf16m_torch_bfloat16(reg, n):
    torch = pytest.importorskip("torch")
    k = reg.select("apply_adam", {"storage": "bf16m"})
    arrays = adam_inputs(n, seed=300 + n)
    var, m, v = (torch.from_numpy(a.copy()) for a in arrays[:3])
    grad = torch.from_numpy(arrays[3]).to(torch.bfloat16)
    model = torch.zeros(n, dtype=torch.bfloat16)
    want = adam_tf(*arrays[:3], grad.double().numpy(), t=4, **HYPER)
    adam_step(k, var, m, v, grad, 4, model=model)
    np.testing.assert_allclose(var.numpy(), want[0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(model.double().numpy(), want[0], rtol=BF16_RTOL, atol=1e-30)


@pytest.mark.parametrize("n", [17, 1000])
def test_adam_bf16ms_narrow_states(reg, n):
    """bf16ms: m and v stored as bf16 too. They are rounded once after the update, so each
    is within 2^-8 of fp64; var moves by about lr, with the update's relative error within
    2^-7 (from the rounded-state inputs)."""
    k = reg.select("apply_adam", {"storage": "bf16ms"})
    var, m32, v32, g32 = adam_inputs(n, seed=400 + n)
    m, v, grad = to_bf16_bits(m32), to_bf16_bits(v32), to_bf16_bits(g32)
    model = np.zeros(n, np.uint16)
    want = adam_tf(var, from_bf16_bits(m), from_bf16_bits(v), from_bf16_bits(grad), t=3,
                   **HYPER)
    adam_step(k, var, m, v, grad, 3, model=model)
    np.testing.assert_allclose(from_bf16_bits(m), want[1], rtol=BF16_RTOL, atol=1e-30)
    np.testing.assert_allclose(from_bf16_bits(v), want[2], rtol=BF16_RTOL, atol=1e-30)
    np.testing.assert_allclose(var, want[0], rtol=RTOL, atol=HYPER["lr"] * 2.0 ** -7)


# ------------------------------------------------------------------------------ errors
# Every refused call leaves the state as it was.

def refused(k, match, **args):
    before = {n: a.copy() for n, a in args.items() if hasattr(a, "copy")}
    with pytest.raises(opforge.OpforgeError, match=match):
        k(**args)
    for n, a in before.items():
        np.testing.assert_array_equal(np.asarray(args[n]), np.asarray(a), err_msg=n)


def adam_args(n=17, seed=1, **change):
    var, m, v, grad = adam_inputs(n, seed)
    args = dict(var=var, m=m, v=v, grad=grad, **HYPER, **powers(1))
    args.update(change)
    return args


def test_scalar_outside_its_domain_is_refused_unless_checks_are_off(reg):
    k = reg.select("apply_adam")
    refused(k, r"scalar beta2_power = 1.5 is outside its domain \[0, 1\)",
            **adam_args(beta2_power=1.5))
    refused(k, "scalar lr = nan is outside its domain finite", **adam_args(lr=float("nan")))
    refused(k, "lr = 1e\\+39 overflows float32", **adam_args(lr=1e39))
    opforge.set_scalar_checks(False)
    try:
        k(**adam_args(beta2_power=1.5))  # runs: the experiment asked for it
    finally:
        opforge.set_scalar_checks(True)
    refused(k, "beta2_power", **adam_args(beta2_power=1.5))


def test_wrong_dtype_names_the_tensor(reg):
    k = reg.select("apply_adam")
    refused(k, "'grad'.*float64", **adam_args(grad=np.ones(17)))
    refused(k, "'m'.*uint16.*bfloat16.*float32", **adam_args(m=np.zeros(17, np.uint16)))
    refused(k, "'v'.*int8", **adam_args(v=np.zeros(17, np.int8)))


def test_non_contiguous_is_refused_by_name(reg):
    k = reg.select("apply_adam")
    refused(k, "'grad' is not C-contiguous", **adam_args(grad=np.ones(34, np.float32)[::2]))
    torch = pytest.importorskip("torch")
    t = torch.ones(17, 2)[:, 0]
    with pytest.raises(opforge.OpforgeError, match="'var' is not contiguous"):
        k(**adam_args(var=t))


def test_wrong_device_is_refused_by_name(reg):
    torch = pytest.importorskip("torch")
    k = reg.select("apply_adam")
    with pytest.raises(opforge.OpforgeError, match="'m' is on device meta"):
        k(**adam_args(m=torch.empty(17, device="meta")))


def test_missing_scalar_is_named(reg):
    args = adam_args()
    del args["epsilon"]
    refused(reg.select("apply_adam"), "missing scalar argument 'epsilon'", **args)


def test_shape_mismatch_and_read_only_and_non_arrays(reg):
    k = reg.select("apply_adam")
    refused(k, "grad", **adam_args(grad=np.ones(16, np.float32)))
    ro = np.ones(17, np.float32)
    ro.flags.writeable = False
    refused(k, "'var' is read-only", **adam_args(var=ro))
    refused(k, "'grad' is a list", **adam_args(grad=[1.0] * 17))


# ------------------------------------------------------------------------------ chunked
@pytest.mark.parametrize("n,chunk", [(1, 1), (17, 5), (65543, 1000)])
def test_call_chunked(reg, n, chunk):
    k = reg.select("apply_adam")
    assert k.splittable
    var, m, v, grad = adam_inputs(n, seed=500 + n)
    want = adam_tf(var, m, v, grad, t=2, **HYPER)
    k.call_chunked(chunk, var=var, m=m, v=v, grad=grad, **HYPER, **powers(2))
    for got, ref in zip((var, m, v), want):
        np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)


def test_call_chunked_refuses_bad_chunks_and_unsplittable_ops(reg):
    args = adam_args()
    before = args["var"].copy()
    with pytest.raises(opforge.OpforgeError, match="chunk_elements must be at least 1"):
        reg.select("apply_adam").call_chunked(0, **args)
    np.testing.assert_array_equal(args["var"], before)
    assert not reg.select("apply_lamb").splittable


# ------------------------------------------------------------------------------ model layout
def test_call_model_matches_per_tensor_calls_and_reference(reg):
    shapes = [("w1", (5,)), ("w2", (17, 3)), ("b", (1,)), ("w3", (1000,))]
    layout = opforge.ModelLayout(shapes)
    k = reg.select("apply_adam", {"epsilon_mode": "torch"})
    flat = {n: np.zeros(layout.total_elements, np.float32) for n in ("var", "m", "v", "grad")}
    singles = []
    for i, (name, shape) in enumerate(shapes):
        arrays = adam_inputs(int(np.prod(shape)), seed=600 + i)
        for buf, a in zip(flat.values(), arrays):
            layout.view(buf, name)[:] = a
        singles.append([a.copy() for a in arrays])
    ref = [adam_torch(*a, t=3, **HYPER) for a in singles]
    k.call_model(layout, flat, **HYPER, **powers(3))
    for (name, _), single, want in zip(shapes, singles, ref):
        adam_step(k, *single, 3)
        for j, key in enumerate(("var", "m", "v")):
            got = layout.view(flat[key], name)
            np.testing.assert_array_equal(got, single[j], err_msg=f"{name}.{key}")
            np.testing.assert_allclose(got, want[j], rtol=RTOL, atol=ATOL)


def test_call_model_refuses_wrong_length_before_running(reg):
    layout = opforge.ModelLayout({"a": (5,), "b": (7,)})
    k = reg.select("apply_adam")
    n = layout.total_elements
    args = adam_args(n)
    args["grad"] = np.ones(n - 1, np.float32)
    before = args["var"].copy()
    with pytest.raises(opforge.OpforgeError, match=f"'grad' has {n - 1} elements.* {n}"):
        k.call_model(layout, args)
    np.testing.assert_array_equal(args["var"], before)
    with pytest.raises(opforge.OpforgeError, match="'apply_lamb' needs per-tensor norms"):
        reg.select("apply_lamb").call_model(layout, var=args["var"])
    np.testing.assert_array_equal(args["var"], before)


# ------------------------------------------------------------------------------ prepared
def test_prepared_call_steps_with_new_scalars(reg):
    k = reg.select("apply_adam", {"epsilon_mode": "torch"})
    var, m, v, _ = adam_inputs(17, seed=9)
    m[:] = 0
    v[:] = 0
    grad = np.zeros(17, np.float32)
    step = k.prepare(var=var, m=m, v=v, grad=grad, **HYPER, **powers(1))
    ref = (var.astype(np.float64), m.astype(np.float64), v.astype(np.float64))
    rng = np.random.default_rng(10)
    for t in (1, 2, 3):
        grad[:] = rng.standard_normal(17)  # the prepared call reads the buffer in place
        ref = adam_torch(*ref, grad, t=t, **HYPER)
        step.set_scalars(**powers(t))
        step()
    np.testing.assert_allclose(var, ref[0], rtol=RTOL, atol=3 * ATOL)
    with pytest.raises(opforge.OpforgeError, match="no scalar 'lr2'"):
        step.set_scalars(lr=0.5, lr2=1)
    # The refused set changed nothing: step 4 with the powers of t = 4 set before it.
    step.set_scalars(**powers(4))
    step()
    ref = adam_torch(*ref, grad, t=4, **HYPER)
    np.testing.assert_allclose(var, ref[0], rtol=RTOL, atol=3 * ATOL)


# ------------------------------------------------------------------------------ other dtypes
@pytest.mark.parametrize("n", [1, 17, 65543])
def test_adam_f16m_numpy_float16(reg, n):
    """f16m: fp32 master var/m/v, float16 gradient and model copy (the rounded var: within
    half a float16 ulp, 2^-11 relative, so 2^-10 of the fp64 reference for normal values)."""
    k = reg.select("apply_adam", {"storage": "f16m"})
    var, m, v, g32 = adam_inputs(n, seed=700 + n)
    grad = g32.astype(np.float16)
    model = np.zeros(n, np.float16)
    want = adam_tf(var, m, v, grad.astype(np.float64), t=2, **HYPER)
    adam_step(k, var, m, v, grad, 2, model=model)
    np.testing.assert_allclose(var, want[0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(model.astype(np.float64), want[0], rtol=2.0 ** -10, atol=1e-4)


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("use_torch", [False, True], ids=["numpy", "torch"])
def test_sparse_adagrad_with_integer_indices(reg, index_dtype, use_torch):
    """TF SparseApplyAdagrad (update_slots): for each i, row r = indices[i]:
    accum[r] += grad[i]^2; var[r] -= lr * grad[i] / sqrt(accum[r]). Unique indices."""
    rng = np.random.default_rng(11)
    rows, cols, lr = 1000, 17, 0.1
    var = rng.standard_normal((rows, cols)).astype(np.float32)
    accum = (0.1 + rng.random((rows, cols))).astype(np.float32)
    idx = rng.choice(rows, size=5, replace=False).astype(index_dtype)
    grad = rng.standard_normal((5, cols)).astype(np.float32)
    want_var, want_acc = var.astype(np.float64), accum.astype(np.float64)
    for i, r in enumerate(idx):
        want_acc[r] += grad[i].astype(np.float64) ** 2
        want_var[r] -= lr * grad[i] / np.sqrt(want_acc[r])
    k = reg.select("sparse_apply_adagrad", {"Tindices": index_dtype})
    if use_torch:
        torch = pytest.importorskip("torch")
        var, accum, grad, idx = (torch.from_numpy(a) for a in (var, accum, grad, idx))
    k(var=var, accum=accum, grad=grad, indices=idx, lr=lr)
    np.testing.assert_allclose(np.asarray(var), want_var, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(np.asarray(accum), want_acc, rtol=RTOL, atol=ATOL)
    with pytest.raises(opforge.OpforgeError, match="'indices'"):
        other = "int64" if index_dtype == "int32" else "int32"
        k(var=var, accum=accum, grad=grad, indices=np.asarray(idx).astype(other), lr=lr)


# ------------------------------------------------------------------------------ lifetime
def test_threads_and_closing():
    with opforge.open() as r:
        r.set_num_threads(1)
        k = r.select("apply_adam")
        var, m, v, grad = adam_inputs(65543, seed=12)
        want = adam_tf(var, m, v, grad, t=1, **HYPER)
        adam_step(k, var, m, v, grad, 1)  # serial pool: the same values
        np.testing.assert_allclose(var, want[0], rtol=RTOL, atol=ATOL)
        r.set_num_threads(0)
    with pytest.raises(opforge.OpforgeError, match="registry is closed"):
        r.ops()
    with pytest.raises(opforge.OpforgeError, match="its registry is closed"):
        adam_step(k, var, m, v, grad, 2)
