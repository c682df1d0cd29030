"""Precision dumps from Python: an optimizer with dump_dir= records each kernel call of its
steps (inputs before, outputs after), changes nothing in what it computes, leaves dumping as
it found it, and `opforge check --replay` re-runs every recorded call through the fp64
golden; opforge.dumping() does the same for any block of calls."""

import json
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import opforge  # noqa: E402
import opforge.torch.optim as oo  # noqa: E402
from opforge.rules import cli_path  # noqa: E402

SIZES = (5, 17, 1000)  # odd sizes, one parameter each


def params(seed):
    g = torch.Generator().manual_seed(seed)
    ps = [torch.nn.Parameter(torch.randn(n, generator=g)) for n in SIZES]
    for p in ps:
        p.grad = torch.randn(p.shape, generator=g)
    return ps


def entries(path):
    return sorted(e for e in os.listdir(path) if e[:6].isdigit())


def replay(path):
    r = subprocess.run([cli_path(), "check", "--replay", str(path), "--json"],
                       capture_output=True, text=True, timeout=300)
    return r.returncode, json.loads(r.stdout) if r.stdout else {}, r.stderr


@pytest.mark.parametrize("fused", [True, False])
def test_adam_dump_dir_records_each_call_and_replays_green(reg, tmp_path, fused):
    dumped, plain = params(1), params(1)
    opt = oo.Adam(dumped, lr=1e-2, weight_decay=0.01, fused=fused, dump_dir=tmp_path)
    ref = oo.Adam(plain, lr=1e-2, weight_decay=0.01, fused=fused)
    before = [p.detach().clone() for p in dumped]
    for _ in range(2):
        opt.step()
        ref.step()
    assert opforge.dump_dir() is None  # only inside the steps
    for a, b in zip(dumped, plain):
        assert torch.equal(a, b)  # dumping changes nothing

    calls = entries(tmp_path)
    assert len(calls) == (2 if fused else 2 * len(SIZES))
    first = json.load(open(tmp_path / calls[0] / "call.json"))
    assert first["op"] == "apply_adamw"
    assert first["scalars"]["lr"] == pytest.approx(1e-2)
    var_in = np.load(tmp_path / calls[0] / "in.var.npy")
    var_out = np.load(tmp_path / calls[0] / "out.var.npy")
    if fused:  # the group's flat buffer: the parameters in order, zero padding between
        flat = torch.cat(before).numpy()
        assert np.array_equal(var_in[:SIZES[0]], before[0].numpy())
        assert np.array_equal(np.sort(var_in[var_in != 0]), np.sort(flat[flat != 0]))
    else:
        assert np.array_equal(var_in, before[0].numpy())
    assert not np.array_equal(var_in, var_out)

    rc, report, err = replay(tmp_path)
    assert rc == 0, err
    assert report["ok"] == len(calls) and report["failed"] == 0


def test_dumping_block_restores_the_setting_and_bad_dirs_raise(reg, tmp_path):
    ps = params(2)
    opt = oo.SGD(ps, lr=0.1, momentum=0.9)
    with opforge.dumping(tmp_path / "outer"):
        with opforge.dumping(tmp_path / "inner"):
            opt.step()
        assert opforge.dump_dir() == str(tmp_path / "outer")
        opt.step()
    assert opforge.dump_dir() is None
    assert len(entries(tmp_path / "inner")) == 1
    assert len(entries(tmp_path / "outer")) == 1
    (tmp_path / "file").write_text("x")
    with pytest.raises(opforge.OpforgeError, match="file"):
        opforge.set_dump_dir(tmp_path / "file" / "sub")
    assert opforge.dump_dir() is None
    rc, report, err = replay(tmp_path / "outer")
    assert rc == 0, err
