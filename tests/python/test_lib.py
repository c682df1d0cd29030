"""opforge._lib: finding and loading the runtime library."""

import os
import re
import subprocess
import sys

import opforge

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def python(code, **env):
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "runtime", "python"), **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e,
                          timeout=120)


def test_version_is_the_projects():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        want = re.search(r"project\(opforge VERSION (\d+\.\d+\.\d+)", f.read()).group(1)
    assert opforge.version() == want


def test_default_registry_honours_the_environment():
    assert opforge.default_registry() == os.environ.get("OPFORGE_REGISTRY",
                                                        opforge.default_registry())
    r = python("import opforge; print(opforge.default_registry())", OPFORGE_REGISTRY="/x/y")
    assert r.stdout.strip() == "/x/y", r.stderr


def test_opforge_library_overrides_and_a_bad_one_is_named():
    path = opforge.library_path()
    r = python("import opforge; print(opforge.library_path()); print(opforge.version())",
               OPFORGE_LIBRARY=path)
    assert r.returncode == 0 and r.stdout.split()[0] == path, r.stderr
    r = python("import opforge\ntry:\n    opforge.version()\nexcept opforge.OpforgeError as e:"
               "\n    print(e)", OPFORGE_LIBRARY="/no/such/libopforge_runtime.so")
    assert "cannot load the opforge runtime /no/such/libopforge_runtime.so" in r.stdout, \
        r.stderr


def test_open_a_missing_registry_names_it():
    import pytest
    with pytest.raises(opforge.OpforgeError, match="/no/such/registry"):
        opforge.open("/no/such/registry")
