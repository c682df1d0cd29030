#!/usr/bin/env python3
"""How closely each opforge.torch.optim class follows its reference: the MLP of the tests
(tests/python/optim_common.py) trained 200 steps from one seed by both; the largest relative
loss difference over the steps and the largest parameter difference relative to each tensor's
largest |value|, against the reference in fp32 (torch.optim itself, or optim_refs.py) and in
fp64 (how far fp32 rounding alone takes torch too).

    /usr/bin/python3 scripts/optim_agreement.py      # OPFORGE_LIBRARY / OPFORGE_REGISTRY as usual
"""

import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(here, "..", "runtime", "python"),
                os.path.join(here, "..", "tests", "python")]

import torch  # noqa: E402

import opforge.torch.optim as oo  # noqa: E402
from optim_common import max_rel_diffs  # noqa: E402
from optim_refs import RefLAMB, RefLARS, RefLion  # noqa: E402

CASES = [
    ("Adam", torch.optim.Adam, oo.Adam, dict(lr=3e-3)),
    ("Adam amsgrad, L2", torch.optim.Adam, oo.Adam, dict(lr=3e-3, weight_decay=0.1,
                                                           amsgrad=True)),
    ("AdamW", torch.optim.AdamW, oo.AdamW, dict(lr=3e-3)),
    ("SGD momentum, dampening", torch.optim.SGD, oo.SGD,
     dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3)),
    ("SGD nesterov", torch.optim.SGD, oo.SGD, dict(lr=0.01, momentum=0.9, nesterov=True)),
    ("Adagrad", torch.optim.Adagrad, oo.Adagrad, dict(lr=0.05, lr_decay=1e-3)),
    # lr 0.2: at torch's default 1.0 this MLP is chaotic after ~80 steps (torch fp32 and
    # fp64 then differ by 12% in the loss).
    ("Adadelta", torch.optim.Adadelta, oo.Adadelta, dict(lr=0.2)),
    ("RMSprop centered, momentum", torch.optim.RMSprop, oo.RMSprop,
     dict(lr=3e-4, momentum=0.5, centered=True)),
    ("Adamax", torch.optim.Adamax, oo.Adamax, dict(lr=2e-3)),
    ("Lion", RefLion, oo.Lion, dict(lr=1e-4, weight_decay=0.1)),
    ("LAMB", RefLAMB, oo.LAMB, dict(lr=1e-3, weight_decay=0.01)),
    ("LARS", RefLARS, oo.LARS, dict(lr=0.1, weight_decay=1e-3)),
]


def main():
    print("| class | config | reference | loss vs fp32 ref | params vs fp32 ref "
          "| loss vs fp64 ref | params vs fp64 ref |")
    print("|---|---|---|---:|---:|---:|---:|")
    for label, ref_cls, cls, kwargs in CASES:
        l32, p32 = max_rel_diffs(ref_cls, cls, kwargs)
        l64, p64 = max_rel_diffs(ref_cls, cls, kwargs, ref_dtype=torch.float64)
        print(f"| {cls.__name__} | {label} | {ref_cls.__module__}.{ref_cls.__name__} "
              f"| {l32:.1e} | {p32:.1e} | {l64:.1e} | {p64:.1e} |")


if __name__ == "__main__":
    main()
