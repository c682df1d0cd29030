"""opforge.torch.optim.LAMB against a plain fp64 reference written from
tfa.optimizers.LAMB (optim_refs.RefLAMB): no torch.optim class exists."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
import optim_common as oc  # noqa: E402
from optim_refs import RefLAMB  # noqa: E402

F64 = torch.float64
CONFIGS = {
    "lr1e-2": dict(lr=1e-2),
    "betas_eps_wd": dict(lr=5e-3, betas=(0.8, 0.99), eps=1e-4, weight_decay=0.01),
}


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_matches_fp64_reference_over_200_steps(reg, config, fused):
    oc.side_by_side(RefLAMB, oo.LAMB, CONFIGS[config], fused=fused, ref_dtype=F64)


def test_two_groups(reg):
    oc.check_two_groups(RefLAMB, oo.LAMB, dict(lr=1e-2),
                        dict(lr=3e-3, betas=(0.5, 0.9), weight_decay=0.1), ref_dtype=F64)


def test_step_lr(reg):
    oc.check_step_lr(RefLAMB, oo.LAMB, dict(lr=1e-2), ref_dtype=F64)


def test_checkpoints(reg):
    oc.check_checkpoints(RefLAMB, oo.LAMB, dict(lr=1e-2, weight_decay=0.01),
                         ["exp_avg", "exp_avg_sq", "step"])


def test_one_call_per_group(reg, monkeypatch):
    oc.check_one_call_per_group(monkeypatch, oo.LAMB, dict(lr=1e-2))


def test_refusals(reg):
    oc.check_refusals(oo.LAMB, dict(lr=1e-2))
    with pytest.raises(ValueError, match="Invalid epsilon value: -1"):
        oo.LAMB(oc.mlp().parameters(), eps=-1)
