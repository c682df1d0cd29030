"""opforge.torch.optim.Lion against a plain fp64 reference written from google/automl's
lion_pytorch.py (optim_refs.RefLion): no torch.optim class exists."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
import optim_common as oc  # noqa: E402
from optim_refs import RefLion  # noqa: E402

F64 = torch.float64
CONFIGS = {
    "default_betas": dict(lr=1e-3),
    "betas_wd": dict(lr=3e-4, betas=(0.8, 0.95), weight_decay=0.1),
}


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "per_tensor"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_matches_fp64_reference_over_200_steps(reg, config, fused):
    oc.side_by_side(RefLion, oo.Lion, CONFIGS[config], fused=fused, ref_dtype=F64)


def test_two_groups(reg):
    oc.check_two_groups(RefLion, oo.Lion, dict(lr=1e-3),
                        dict(lr=3e-4, betas=(0.5, 0.9), weight_decay=0.5), ref_dtype=F64)


def test_step_lr(reg):
    oc.check_step_lr(RefLion, oo.Lion, dict(lr=1e-3), ref_dtype=F64)


def test_checkpoints(reg):
    oc.check_checkpoints(RefLion, oo.Lion, dict(lr=1e-3, weight_decay=0.1), ["exp_avg"])


def test_one_call_per_group(reg, monkeypatch):
    oc.check_one_call_per_group(monkeypatch, oo.Lion, dict(lr=1e-3))


def test_refusals(reg):
    oc.check_refusals(oo.Lion, dict(lr=1e-3))
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        oo.Lion(oc.mlp().parameters(), betas=(0.9, 1.0))
