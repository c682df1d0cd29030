"""python -m opforge list / describe / version, as a user runs them."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "runtime", "python")
    return subprocess.run([sys.executable, "-m", "opforge", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_list_names_every_op(reg, index):
    r = run("list")
    assert r.returncode == 0, r.stderr
    first = {line.split()[0] for line in r.stdout.splitlines()[1:]}
    assert first == {e["op"] for e in index["variants"]}
    adam = next(line for line in r.stdout.splitlines() if line.startswith("apply_adam "))
    assert "epsilon_mode=tf/torch" in adam and "avx2" in adam


def test_describe_shows_arguments_attrs_and_variants(reg, index):
    r = run("describe", "apply_adam")
    assert r.returncode == 0, r.stderr
    for name in ("var", "m", "v", "grad", "lr", "beta1_power", "epsilon_mode"):
        assert f"  {name} " in r.stdout
    for e in index["variants"]:
        if e["op"] == "apply_adam":
            assert e["variant"] in r.stdout


def test_describe_json_and_unknown_op():
    import json
    r = run("describe", "layer_norm", "--json")
    assert r.returncode == 0, r.stderr
    assert {d["op"] for d in json.loads(r.stdout)} == {"layer_norm"}
    r = run("describe", "layer_nrom")
    assert r.returncode == 1
    assert "unknown op 'layer_nrom'" in r.stderr and "layer_norm" in r.stderr


def test_version_names_library_and_registry():
    r = run("version")
    assert r.returncode == 0, r.stderr
    assert f"registry {os.environ['OPFORGE_REGISTRY']}" in r.stdout
    assert "libopforge_runtime.so" in r.stdout


@pytest.fixture(autouse=True)
def _registry_set():
    if not os.environ.get("OPFORGE_REGISTRY"):
        pytest.skip("OPFORGE_REGISTRY is not set")


def test_describe_nn_op_shows_checks_algorithms_and_cost(reg):
    d = reg.variants("conv2d")[0]
    r = run("describe", "conv2d")
    assert r.returncode == 0, r.stderr
    for c in d["shape"]["checks"]:
        assert c["message"] in r.stdout
    names = {v["algorithm"]["name"] for v in reg.variants("conv2d")}
    for name in names:
        assert f"algorithm {name}:" in r.stdout
    assert f"flops {d['cost']['flops']}" in r.stdout
