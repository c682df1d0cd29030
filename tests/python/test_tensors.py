"""opforge.tensors: the call templates that Kernel.call refills for torch tensors (pointers
and scalars of a signature seen before), against fp64 references (refs.py): every call must
read and write its own tensors, whatever the calls before it passed."""

import gc
import threading
import weakref

import numpy as np
import pytest

import opforge
from opforge.tensors import CallTemplates, roles
from refs import HYPER, adam_inputs, adam_torch, powers

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-5, 1e-6  # one fp32 Adam step against fp64 (test_registry.py's)


def torch_inputs(n, seed):
    return [torch.from_numpy(a) for a in adam_inputs(n, seed)]


def step(k, tensors, t):
    var, m, v, grad = tensors
    k.call(var=var, m=m, v=v, grad=grad, **HYPER, **powers(t))


def check_step(before, after, t):
    want = adam_torch(*(x.numpy() for x in before), t=t, **HYPER)
    for got, ref, name in zip(after[:3], want, ("var", "m", "v")):
        np.testing.assert_allclose(got.numpy(), ref, rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.parametrize("n", [1, 17, 65543])
def test_each_call_updates_its_own_tensors(reg, n):
    """Same signature, new tensors and new scalars each call: a template refilled with stale
    pointers or values would update the previous call's tensors or step with old powers."""
    k = reg.select("apply_adam", {"epsilon_mode": "torch"})
    bystanders = []
    for t, seed in zip((1, 2, 3, 4), (11, 12, 13, 14)):
        tensors = torch_inputs(n, seed)
        before = [x.clone() for x in tensors]
        step(k, tensors, t)
        check_step(before, tensors, t)
        for old, snapshot in bystanders:  # earlier calls' tensors are left alone
            for x, y in zip(old, snapshot):
                assert torch.equal(x, y)
        bystanders.append((tensors, [x.clone() for x in tensors]))


def test_signatures_alternate(reg):
    """Two sizes alternating: each signature's template serves its own shape."""
    k = reg.select("apply_adam", {"epsilon_mode": "torch"})
    for i, n in enumerate((5, 1000, 5, 1000, 17)):
        tensors = torch_inputs(n, 20 + i)
        before = [x.clone() for x in tensors]
        step(k, tensors, 2)
        check_step(before, tensors, 2)


def test_refusals_after_a_template_exists(reg):
    """A call the template cannot take (same shapes, but not contiguous, another dtype or
    device) still gets the checked path's error naming the tensor, and writes nothing."""
    k = reg.select("apply_adam", {"epsilon_mode": "torch"})
    step(k, torch_inputs(17, 30), 1)  # the template for 17 elements
    var, m, v, grad = torch_inputs(17, 31)
    snapshot = var.clone()
    cases = [("'grad' is not contiguous", dict(grad=torch.ones(17, 2)[:, 0])),
             ("'m' is on device meta", dict(m=torch.empty(17, device="meta"))),
             ("'v' has dtype torch.int8", dict(v=torch.zeros(17, dtype=torch.int8))),
             ("'v' has dtype float64, expected float32",
              dict(v=torch.zeros(17, dtype=torch.float64))),
             ("'grad'", dict(grad=torch.ones(16)))]
    for message, change in cases:
        args = dict(var=var, m=m, v=v, grad=grad, **HYPER, **powers(1))
        args.update(change)
        with pytest.raises(opforge.OpforgeError, match=message):
            k.call(args)
        assert torch.equal(var, snapshot)


def test_a_template_keeps_no_tensor_alive(reg):
    k = reg.select("apply_adam", {"epsilon_mode": "torch"})
    tensors = torch_inputs(999, 40)
    step(k, tensors, 1)  # builds the template for 999 elements (a size no other test uses)
    step(k, torch_inputs(999, 41), 1)
    refs = [weakref.ref(x) for x in tensors]
    del tensors
    gc.collect()
    assert all(r() is None for r in refs)


def test_templates_are_per_thread(reg):
    """ctypes releases the GIL during the call: a template shared between threads could be
    refilled by one while the other's call reads it. The same signature in another thread
    gets Args of its own (a race cannot be provoked reliably; this is the design's check)."""
    k = reg.select("apply_adam", {"epsilon_mode": "torch"})
    templates = CallTemplates(roles(k.descriptor))
    var, m, v, grad = torch_inputs(17, 50)
    args = dict(var=var, m=m, v=v, grad=grad, **HYPER, **powers(1))
    mine = templates.args(args)
    assert templates.args(args) is mine  # this thread: the template, refilled
    theirs = []
    th = threading.Thread(target=lambda: theirs.append(templates.args(args)))
    th.start()
    th.join(timeout=60)
    assert theirs and theirs[0] is not mine
    assert templates.args(args) is mine


def test_threads_calling_one_kernel(reg):
    """Two threads, one kernel, each with its own tensors, every result checked."""
    k = reg.select("apply_adam", {"epsilon_mode": "torch"})
    errors = []

    def work(seed):
        try:
            for i in range(20):
                tensors = torch_inputs(65543, seed + i)
                before = [x.clone() for x in tensors]
                step(k, tensors, 3)
                check_step(before, tensors, 3)
        except Exception as e:  # reported below: pytest sees only the main thread's
            errors.append(e)

    threads = [threading.Thread(target=work, args=(100 * (j + 1),)) for j in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads)
    assert not errors, errors[0]
