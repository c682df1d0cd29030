"""opforge.torch.optim.GlobalOptimManager, bitsandbytes' per-parameter overrides: a parameter
overridden to optim_bits=32 keeps fp32 states and steps bit for bit as the same optimizer with
state_bits=32 (the others stay 8-bit and equal the run without overrides); min_8bit_size per
parameter; what bitsandbytes accepts and opforge does not is refused by name."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402


@pytest.fixture
def mng():
    m = oo.GlobalOptimManager.get_instance()
    m.initialize()
    yield m
    m.initialize()


class Tiny(torch.nn.Module):
    """An embedding (8192 elements: 8-bit by size) and a linear layer."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(512, 16)
        self.fc = torch.nn.Linear(16, 300)


def run(model, opt, steps=3, seed=5):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        for p in model.parameters():
            p.grad = torch.randn(p.shape, generator=g)
        opt.step()


def twins():
    torch.manual_seed(3)
    a = Tiny()
    b = Tiny()
    b.load_state_dict(a.state_dict())
    return a, b


@pytest.mark.parametrize("how", ["module", "param", "dict", "before_optimizer"])
def test_an_embedding_overridden_to_32_bits_keeps_fp32_states(reg, mng, how):
    a, b = twins()
    if how == "before_optimizer":
        mng.register_parameters(a.parameters())
        mng.override_config(a.emb.weight, "optim_bits", 32)
    opt = oo.AdamW8bit(a.parameters())
    if how == "module":  # as Hugging Face's Trainer does for every nn.Embedding
        mng.register_module_override(a.emb, "weight", {"optim_bits": 32})
    elif how == "param":
        mng.override_config([a.emb.weight], "optim_bits", 32)
    elif how == "dict":
        mng.override_config(a.emb.weight, key_value_dict={"optim_bits": 32})
    run(a, opt)
    assert "exp_avg" in opt.state[a.emb.weight]  # fp32 states
    assert "exp_avg_codes" not in opt.state[a.emb.weight]
    assert "exp_avg_codes" in opt.state[a.fc.weight]  # 4800 elements: 8-bit

    # The embedding as the fp32-state optimizer steps it, the linear layer as without the
    # override (its own group each, so each one's flat buffers hold the same parameters).
    ref32 = oo.AdamW([b.emb.weight], weight_decay=1e-2)
    ref8 = oo.AdamW8bit([b.fc.weight, b.fc.bias])
    g = torch.Generator().manual_seed(5)
    for _ in range(3):
        for p in b.parameters():
            p.grad = torch.randn(p.shape, generator=g)
        ref32.step()
        ref8.step()
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)


def test_min_8bit_size_per_parameter(reg, mng):
    a, _ = twins()
    mng.override_config(a.fc.weight, "min_8bit_size", 10000)  # 4800 elements: fp32 states
    mng.override_config(a.fc.bias, "min_8bit_size", 0)  # 300 elements: 8-bit
    opt = oo.Adam8bit(a.parameters())
    run(a, opt, steps=1)
    assert "exp_avg_codes" in opt.state[a.emb.weight]
    assert "exp_avg_codes" not in opt.state[a.fc.weight]
    assert "exp_avg_codes" in opt.state[a.fc.bias]


def test_a_parameter_override_wins_over_its_group(reg, mng):
    a, _ = twins()
    mng.override_config(a.emb.weight, "optim_bits", 8)
    opt = oo.AdamW8bit([{"params": [a.emb.weight], "state_bits": 32},
                        {"params": [a.fc.weight]}])
    run(a, opt, steps=1)
    assert "exp_avg_codes" in opt.state[a.emb.weight]


def test_an_optimizer_with_fp32_states_refuses_an_8_bit_override(reg, mng):
    a, _ = twins()
    mng.override_config(a.fc.weight, "optim_bits", 8)
    with pytest.raises(ValueError, match=r"AdamW: a parameter of \(300, 16\) asks for "
                                         r"optim_bits=8 .*state_bits=8"):
        oo.AdamW(a.parameters())


@pytest.mark.parametrize("config, what", [
    ({"lr": 1e-5}, r"overriding 'lr' per parameter is not implemented .* param group"),
    ({"betas": (0.9, 0.98)}, r"overriding 'betas'"),
    ({"is_sparse": True}, r"overriding 'is_sparse'"),
    ({"optim_bits": 16}, r"optim_bits must be 8 or 32, got 16"),
    ({"min_8bit_size": -1}, r"min_8bit_size must be an int >= 0, got -1"),
    ({"percentile_clipping": 5}, r"percentile_clipping=5 is not implemented"),
    ({"block_wise": False}, r"block_wise=False is not implemented"),
])
def test_what_opforge_does_not_implement_is_refused_by_name(mng, config, what):
    p = torch.nn.Parameter(torch.zeros(3))
    with pytest.raises(ValueError, match=what):
        mng.override_config(p, key_value_dict=config)
    with pytest.raises(ValueError, match=what):
        mng.register_module_override(torch.nn.Linear(2, 2), "weight", config)
    assert mng.config(p) == {}  # nothing half-recorded


def test_do_nothing_values_are_taken(mng):
    p = torch.nn.Parameter(torch.zeros(3))
    mng.override_config(p, key_value_dict={"percentile_clipping": 100, "block_wise": 1,
                                           "max_unorm": 0.0, "optim_bits": 32})
    assert mng.config(p) == {"optim_bits": 32}


def test_bad_calls(mng):
    with pytest.raises(RuntimeError, match="get_instance"):
        oo.GlobalOptimManager()
    assert oo.GlobalOptimManager.get_instance() is mng
    p = torch.nn.Parameter(torch.zeros(3))
    with pytest.raises(ValueError, match="no key"):
        mng.override_config(p)
    with pytest.raises(ValueError, match="not both"):
        mng.override_config(p, "optim_bits", 32, key_value_dict={"optim_bits": 32})
    with pytest.raises(TypeError, match="parameter 1 is a str"):
        mng.override_config([p, "x"], "optim_bits", 32)
    with pytest.raises(TypeError, match="not a torch.nn.Module"):
        mng.register_module_override(p, "weight", {"optim_bits": 32})
