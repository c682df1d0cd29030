"""opforge.torch.patch beyond the basic swap (test_torch_nn.py): modules whose parameters the
kernels cannot take are left with the reason; a TransformerEncoderLayer's fused fast path,
which would bypass the swapped submodules, is turned off and reported; a second patch says
what is already swapped; tracing and scripting a patched model fail by name, not silently."""

import pytest

torch = pytest.importorskip("torch")

import opforge.torch as ot  # noqa: E402
from opforge.torch import nn as onn  # noqa: E402
from opforge.torch.nn import functional as F  # noqa: E402


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_modules_with_parameters_the_kernels_cannot_take_are_left(reg, dtype):
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Conv2d(2, 2, 1),
                                torch.nn.MultiheadAttention(8, 2), torch.nn.LayerNorm(8),
                                torch.nn.GELU()).to(dtype).eval()
    _, report = ot.patch(model)
    left = {name: why for name, _, why in report.left}
    short = str(dtype).replace("torch.", "")
    for name, module in (("0", "Linear"), ("1", "Conv2d"), ("2", "MultiheadAttention")):
        assert f"weight is {short} on cpu" in left[name]
        assert f"kernels of {module} take float32 CPU parameters" in left[name]
        assert type(model[int(name)]) is getattr(torch.nn, module)
    # The norms read their parameters in fp32 whatever their dtype: bf16 ones are swapped.
    swapped = [name for name, _ in report.swapped]
    assert ("3" in swapped) == (dtype == torch.bfloat16) and "4" in swapped
    with torch.no_grad():  # what is left runs as before
        model[0](torch.ones(2, 8, dtype=dtype))


def count_kernel_calls(monkeypatch):
    calls = {"n": 0}
    real = F._call

    def counting(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "_call", counting)
    return calls


def test_transformer_encoder_layers_run_their_swapped_submodules(reg, monkeypatch):
    torch.manual_seed(4)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2).eval()
    ref = torch.nn.TransformerEncoder(layer, 2).eval()
    ref.load_state_dict(encoder.state_dict())
    _, report = ot.patch(encoder)
    assert {name for name, _ in report.swapped} >= {
        f"layers.{i}.{m}" for i in range(2)
        for m in ("self_attn", "linear1", "linear2", "norm1", "norm2")}
    assert [name for name, _, _ in report.changed] == ["layers.0", "layers.1"]
    assert "fast path" in str(report)
    x = randn(3, 7, 16, seed=5)
    calls = count_kernel_calls(monkeypatch)
    with torch.no_grad():  # eval and no gradients: where torch takes its fused fast path
        got = encoder(x)
        want = ref.double()(x.double())
    # Each layer: the attention's projections and kernel, two Linears, two norms.
    assert calls["n"] >= 2 * 9
    assert torch.allclose(got.double(), want, rtol=1e-4, atol=1e-5)


def test_a_second_patch_says_the_modules_are_already_swapped(reg):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.SiLU())
    ot.patch(model)
    _, report = ot.patch(model)
    assert report.swapped == []
    assert report.left == [("0", "Linear", "already an opforge module"),
                           ("1", "SiLU", "already an opforge module")]


def test_tracing_or_scripting_a_patched_model_is_refused_by_name(reg):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4)).eval()
    ot.patch(model)
    with torch.no_grad():
        with pytest.raises(RuntimeError, match="linear cannot be traced or scripted"):
            torch.jit.trace(model, torch.ones(2, 4))
    with pytest.raises(RuntimeError, match="modules.Linear cannot be scripted"):
        torch.jit.script(model)
    with torch.no_grad():  # eagerly it still runs
        assert model(torch.ones(2, 4)).shape == (2, 4)
    assert isinstance(model[0], onn.Linear)
