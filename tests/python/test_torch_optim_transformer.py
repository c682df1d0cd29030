"""Every opforge.torch.optim class on a tiny transformer block (self-attention, layer norms,
feed-forward) for 200 steps beside torch.optim or the fp32 reference (optim_refs).

The key projection's bias (in_proj_bias[16:32]) does not change the output (softmax is
invariant to it): its gradient is rounding noise, whose sign Lion follows (a 2*lr step either
way from the first step on), so that slice is left out of the parameter comparison; the loss
shows it has no effect. References in fp32 (LAMB's eps-sized denominators make that slice
noise-driven too; RMSprop and Adamax run with torch's default eps, which keeps that bias's
exactly-zero gradient entries finite)."""

import pytest

torch = pytest.importorskip("torch")
import opforge.torch.optim as oo  # noqa: E402
import optim_common as oc  # noqa: E402
from optim_refs import RefLAMB, RefLion  # noqa: E402

# Lion's sign(c) flips where c is within rounding of 0 (kernel and torch round
# b1*m + (1-b1)*g differently): each flip is a 2*lr = 2e-4 step, ~6e-4 of the largest
# |weight| here; 2e-3 allows a few such elements, far below a wrong formula's drift. Lion
# runs 100 steps: flipped elements then follow their own trajectories (measured 1e-2 of the
# largest |weight| after 200 steps, against at most 0.075 for any update).
CASES = {
    "Adam": (torch.optim.Adam, oo.Adam, dict(lr=1e-3), 1e-4),
    # This one's trajectory has a tipping point: torch against torch with every weight
    # started 1 ulp higher ends 5.2e-4 of linear1.bias's largest |value| apart (any rounding
    # difference does the same; opforge's AVX-512 reciprocal, vrcp14ps, met it). 2e-3 still
    # fails the wrong rules: without amsgrad 5.6e-3, weight_decay 0.0099 3.5e-2, without L2
    # or decoupled 1.4.
    "Adam_l2_amsgrad": (torch.optim.Adam, oo.Adam, dict(lr=1e-3, weight_decay=0.01,
                                                        amsgrad=True), 2e-3),
    "AdamW": (torch.optim.AdamW, oo.AdamW, dict(lr=1e-3), 1e-4),
    "SGD_nesterov": (torch.optim.SGD, oo.SGD, dict(lr=0.01, momentum=0.9, nesterov=True),
                     1e-4),
    "SGD_dampening": (torch.optim.SGD, oo.SGD, dict(lr=0.01, momentum=0.9, dampening=0.1,
                                                    weight_decay=1e-3), 1e-4),
    "Adagrad": (torch.optim.Adagrad, oo.Adagrad, dict(lr=0.01, weight_decay=0.01), 1e-4),
    "Adadelta": (torch.optim.Adadelta, oo.Adadelta, dict(lr=0.2), 1e-4),
    "Lion": (RefLion, oo.Lion, dict(lr=1e-4, weight_decay=0.1), 2e-3),
    "LAMB": (RefLAMB, oo.LAMB, dict(lr=1e-3, weight_decay=0.01), 1e-4),
    # lr 2e-4: at 1e-3 with a tiny eps, torch fp32 itself drifts from fp64 by ~1e-4 of the
    # loss after ~100 steps (g/sqrt(v) on near-zero v), so rounding alone would decide; at
    # 3e-4 it still drifted 2.1e-4 with OpenBLAS's Haswell kernels under torch (opforge 4.8e-7
    # from fp64). At 2e-4 torch, opforge and fp64 agree within 4.3e-7 with every kernel set.
    "RMSprop": (torch.optim.RMSprop, oo.RMSprop, dict(lr=2e-4, momentum=0.5, centered=True),
                1e-4),
    "Adamax": (torch.optim.Adamax, oo.Adamax, dict(lr=2e-3), 1e-4),
}


@pytest.mark.parametrize("case", list(CASES))
def test_transformer_block_200_steps(reg, case):
    ref_cls, cls, kwargs, param_rtol = CASES[case]
    X, Y = oc.transformer_data()
    ref_model, model = oc.transformer_block(), oc.transformer_block()
    runs = []
    for m, opt in ((ref_model, ref_cls(ref_model.parameters(), **kwargs)),
                   (model, cls(model.parameters(), **kwargs))):
        runs.append(oc.train(m, opt, 100 if case == "Lion" else 200, X, Y))
    oc.assert_close_losses(*runs)
    for m in (ref_model, model):
        oc.zero_key_bias(m)  # no effect on the output (see above)
    oc.assert_close_models(ref_model, model, rtol=param_rtol)
    assert runs[0][-1] < 0.95 * runs[0][0]  # it trained
