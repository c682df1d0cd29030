"""opforge.rule and opforge.torch.optim.from_rule: an optimizer written as rule text in the
script that trains with it, built on the fly into the user registry through the compile cache
(a second process compiles nothing), checked against formulas written here."""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

import opforge

SIGN_SQRT = """\
optimizer {name}
  state var
  input grad
  hyper lr = 0.01 "learning rate"
  var = var - lr * sign(grad) * sqrt(abs(grad)) * {k!r}
"""


def unique_k():
    """A constant in [1, 1.001) that differs from run to run: the rule's kernels are new to
    the compile cache, so the first build is cold."""
    return 1.0 + random.SystemRandom().randrange(10 ** 6) * 1e-9


@pytest.fixture(scope="module")
def reg(tmp_path_factory):
    """The test registry with a user registry of this module's own: the other tests compare
    the ops they see with the test registry's index."""
    if not os.environ.get("OPFORGE_REGISTRY"):
        pytest.skip("OPFORGE_REGISTRY is not set (ctest sets it to the test registry)")
    user = tmp_path_factory.mktemp("user") / "registry"
    with opforge.open(user_dir=str(user)) as r:
        yield r


def sources(reg):
    d = os.path.join(reg.user_dir, "sources")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_rule_text_is_built_and_computes_its_formula(reg):
    k = unique_k()
    op = opforge.rule(SIGN_SQRT.format(name="py_sign", k=k), reg)
    assert op.name == "py_sign" and op.ops == ["py_sign"]
    assert os.path.dirname(op.source) == os.path.join(reg.user_dir, "sources")
    assert "py_sign" in reg.ops()
    rng = np.random.default_rng(5)
    for n in (1, 5, 17, 1000, 65543):
        var = rng.uniform(-2, 2, n).astype(np.float32)
        grad = rng.uniform(-2, 2, n).astype(np.float32)
        g = grad.astype(np.float64)
        want = var.astype(np.float64) - 0.25 * np.sign(g) * np.sqrt(np.abs(g)) * k
        op(var=var, grad=grad, lr=0.25)  # in place
        np.testing.assert_allclose(var, want, rtol=1e-6, atol=1e-6, err_msg=f"n={n}")


def test_an_edited_rule_replaces_its_kernels_in_the_same_process(reg):
    """A researcher's loop: edit the rule text, call rule() again, get the new update."""
    var = np.ones(17, np.float32)
    grad = np.full(17, 4.0, np.float32)
    opforge.rule(SIGN_SQRT.format(name="py_edited", k=1.0), reg)(var=var, grad=grad, lr=0.25)
    np.testing.assert_allclose(var, 1 - 0.25 * 2 * 1.0, rtol=1e-6)
    k = 2 * unique_k()
    op = opforge.rule(SIGN_SQRT.format(name="py_edited", k=k), reg)
    var[:] = 1
    op(var=var, grad=grad, lr=0.1)
    np.testing.assert_allclose(var, 1 - 0.1 * 2 * k, rtol=1e-6)


def test_rule_file_path(reg, tmp_path):
    path = tmp_path / "py_path_sign.rule"
    path.write_text(SIGN_SQRT.format(name="py_path_sign", k=1.0))
    op = opforge.rule(path, reg)
    assert op.source == str(path)
    assert op.variants()[0]["reference"] == f"rule file {path}"
    with pytest.raises(opforge.OpforgeError, match="no such file"):
        opforge.rule(str(tmp_path / "missing.rule"), reg)


def test_a_second_process_hits_the_cache(tmp_path):
    """Two fresh processes, two fresh user registries, one cache: the first compiles the
    rule's kernels, the second takes every kernel from the cache."""
    text = SIGN_SQRT.format(name="py_cached_sign", k=unique_k())
    script = ("import json, sys, opforge\n"
              "op = opforge.rule(sys.stdin.read())\n"
              "print(json.dumps([v['cache'] for v in op.build['variants']"
              " if v['op'] == 'py_cached_sign']))\n")
    runs = []
    for user in ("first", "second"):
        env = dict(os.environ, OPFORGE_USER_REGISTRY=str(tmp_path / user))
        done = subprocess.run([sys.executable, "-c", script], input=text, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout))
    assert "miss" in runs[0]
    assert runs[1] and set(runs[1]) == {"hit"}


def test_two_processes_build_into_one_user_registry_at_once(tmp_path):
    """Concurrent builds install one at a time (the registry's lock), each keeping what the
    other installed: both ops are there afterwards."""
    env = dict(os.environ, OPFORGE_USER_REGISTRY=str(tmp_path / "user"))
    script = "import sys, opforge\nopforge.rule(sys.stdin.read())\n"
    procs = []
    for name in ("py_both_a", "py_both_b"):
        p = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        p.stdin.write(SIGN_SQRT.format(name=name, k=unique_k()))
        p.stdin.close()
        procs.append(p)
    for p in procs:
        assert p.wait(timeout=600) == 0, p.stderr.read()
    with opforge.open(user_dir=str(tmp_path / "user")) as r:
        assert {"py_both_a", "py_both_b"} <= set(r.ops())


def test_bad_rule_text_gives_the_compiler_message_and_keeps_nothing(reg):
    before = sources(reg)
    text = SIGN_SQRT.format(name="py_bad", k=1.0).replace("sign(grad)", "sgn(grad)")
    with pytest.raises(opforge.OpforgeError) as e:
        opforge.rule(text, reg)
    msg = str(e.value)
    assert ":5:20: error: unknown function 'sgn'" in msg
    assert "\n                   ^" in msg  # the caret under sgn
    assert "did you mean 'sign'?" in msg
    assert sources(reg) == before
    assert "py_bad" not in reg.ops()


# A C++ op of the op table, a rule op of the library (its generators/rules file).
@pytest.mark.parametrize("name", ["apply_adam", "sign_sqrt_momentum"])
def test_a_name_of_the_library_is_refused(reg, name):
    before = sources(reg)
    with pytest.raises(opforge.OpforgeError, match=f"op '{name}' is already an op of the op "
                       "library at .*: rename the rule"):
        opforge.rule(SIGN_SQRT.format(name=name, k=1.0), reg)
    assert sources(reg) == before


# AdaBelief (Zhuang et al., NeurIPS 2020, Algorithm 2), as a researcher would write it in the
# training script: the second moment tracks (g - m)^2, the "belief" in the gradient.
ADABELIEF = """\
optimizer adabelief_rule
  state var, m, s
  input grad
  hyper lr = 0.001          "learning rate"
  hyper beta1 = 0.9         "first moment decay"
  hyper beta2 = 0.999       "belief decay"
  hyper epsilon = 1e-8      "added to s and to the denominator"
  hyper beta1_power = 0.9   "beta1 to the power t"
  hyper beta2_power = 0.999 "beta2 to the power t"
  let m_t = beta1 * m + (1 - beta1) * grad
  let d   = grad - m_t
  let s_t = beta2 * s + (1 - beta2) * d * d + epsilon
  m   = m_t
  s   = s_t
  var = var - lr * (m_t / (1 - beta1_power)) / (sqrt(s_t / (1 - beta2_power)) + epsilon)
"""


def adabelief_reference():
    """AdaBelief written from the paper's Algorithm 2 with torch tensor ops (no decay, no
    rectification, no AMSGrad), for fp64 parameters."""
    import torch

    class AdaBelief(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-3, beta1=0.9, beta2=0.999, epsilon=1e-8):
            super().__init__(params, dict(lr=lr, beta1=beta1, beta2=beta2, epsilon=epsilon))

        @torch.no_grad()
        def step(self):
            for group in self.param_groups:
                b1, b2, eps = group["beta1"], group["beta2"], group["epsilon"]
                for p in group["params"]:
                    st = self.state[p]
                    if not st:
                        st["t"], st["m"], st["s"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                    st["t"] += 1
                    t, m, s, g = st["t"], st["m"], st["s"], p.grad
                    m.mul_(b1).add_((1 - b1) * g)
                    s.mul_(b2).add_((1 - b2) * (g - m) ** 2).add_(eps)
                    m_hat = m / (1 - b1 ** t)
                    s_hat = s / (1 - b2 ** t)
                    p.sub_(group["lr"] * m_hat / (s_hat.sqrt() + eps))

    return AdaBelief


def test_adabelief_from_rule_trains_like_its_reference(reg):
    torch = pytest.importorskip("torch")
    from opforge.torch.optim import from_rule

    import optim_common as oc

    def opforge_adabelief(params, fused=True, **hypers):
        return from_rule(ADABELIEF, params, fused=fused, registry=reg, **hypers)

    kwargs = dict(lr=3e-3, beta1=0.9, beta2=0.999, epsilon=1e-8)
    ref, opt = oc.side_by_side(adabelief_reference(), opforge_adabelief, kwargs, steps=200,
                               ref_dtype=torch.float64)
    assert oc.state_keys(opt) == ["m", "s", "step"]
    # The rule's defaults fill what the script does not give.
    model = oc.mlp()
    opt = from_rule(ADABELIEF, model.parameters(), registry=reg, lr=1e-3)
    assert opt.param_groups[0]["beta2"] == pytest.approx(0.999)
    assert opt.param_groups[0]["epsilon"] == pytest.approx(1e-8)
    X, Y = oc.data()
    losses = oc.train(model, opt, 50, X, Y)
    assert losses[-1] < losses[0]
