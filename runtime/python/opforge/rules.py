"""opforge.rule: an optimizer written in the rule language (dsl/rules/README.md), built on the
fly into the user registry and returned as an op of the registry.

    sign_sqrt = opforge.rule('''
    optimizer sign_sqrt
      state var
      input grad
      hyper lr = 0.01
      var = var - lr * sign(grad) * sqrt(abs(grad))
    ''')
    sign_sqrt(var=w, grad=g, lr=0.01)     # the default variant, in place

The runtime never links the compiler: the build runs the opforge command (`opforge build
--user`), through the persistent compile cache, so a second process (or a second call) with
the same rule compiles nothing. Rule text is kept in the user registry's sources/ directory,
named by its SHA-256, so every op's descriptor names a file that exists.
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile

from ._lib import OpforgeError, decode, lib
from .registry import Registry

# A build of one rule compiles about a second per variant; past this something is wrong.
BUILD_TIMEOUT_S = 1800


def user_registry_dir():
    """Where rule ops are built: $OPFORGE_USER_REGISTRY, else <compile cache>/user-registry."""
    return decode(lib().opforge_default_user_registry())


def cli_path():
    """The opforge command that builds rules: $OPFORGE_CLI, else the one installed (or built)
    with the runtime library, else `opforge` on PATH."""
    env = os.environ.get("OPFORGE_CLI")
    if env:
        return env
    path = decode(lib().opforge_cli_path()) or shutil.which("opforge")
    if not path:
        raise OpforgeError("cannot find the opforge command to build rules (set OPFORGE_CLI "
                           "to its path)")
    return path


def _write_source(text, user_dir):
    """The rule text as a file under <user_dir>/sources, named by its content (written to a
    temporary file and renamed: a concurrent writer of the same text is harmless). Returns
    the path and whether this call created it."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    sources = os.path.join(user_dir, "sources")
    os.makedirs(sources, exist_ok=True)
    path = os.path.join(sources, f"{digest}.rule")
    if os.path.exists(path):
        return path, False
    fd, tmp = tempfile.mkstemp(dir=sources, prefix=".tmp-", suffix=".rule")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path, True


def _rule_file(text_or_path, user_dir):
    """(path of the rule file, whether it was written now)."""
    if isinstance(text_or_path, os.PathLike):
        text_or_path = os.fspath(text_or_path)
    if not isinstance(text_or_path, str):
        raise TypeError(f"rule: expected rule text or a path, got {type(text_or_path).__name__}")
    if "\n" in text_or_path:
        return _write_source(text_or_path, user_dir)
    if not os.path.exists(text_or_path):
        raise OpforgeError(f"rule {text_or_path!r}: no such file (rule text spans lines, "
                           "starting with 'optimizer NAME')")
    return os.path.abspath(text_or_path), False


class RuleOp:
    """An op built from a rule: `name`, the registry it is selected from, and the build's
    report (`build`: opforge build --json's output, with per-variant cache hits)."""

    def __init__(self, name, registry, source, build, ops):
        self.name = name
        self.registry = registry
        self.source = source  # the rule file
        self.build = build
        self.ops = ops  # every op the rule declares (e.g. its sparse_ form), this one first

    def __repr__(self):
        return f"<opforge.RuleOp {self.name} from {self.source}>"

    def variants(self):
        return self.registry.variants(self.name)

    def select(self, attrs=None, isa=None):
        """The variant for attrs (as Registry.select) on this CPU or the forced isa."""
        return self.registry.select(self.name, attrs, isa)

    def __call__(self, args=None, attrs=None, **kwargs):
        """Calls the variant for attrs (default: every attr at its default) in place."""
        self.select(attrs)(args, **kwargs)


def rule(text_or_path, registry=None, *, jobs=None):
    """Builds the rule (its text, or a rule file's path) into the user registry unless the
    compile cache has every kernel, and returns its op (a RuleOp). registry: an opened
    opforge.Registry whose op library reserves names and through which the op is selected
    (default: opforge.open()). A bad rule raises OpforgeError with the compiler's message
    (file:line:col, the line, a caret, a suggestion); a rule named like an op of the op
    library is refused."""
    reg = registry if registry is not None else Registry()
    user_dir = reg.user_dir
    if not user_dir:
        raise OpforgeError("this registry reads no user registry (opened with user_dir=''); "
                           "rules are built into one")
    path, written = _rule_file(text_or_path, user_dir)
    cmd = [cli_path(), "build", "--user", "--rules", path, "--registry", reg.dir, "--json"]
    if jobs:
        cmd += ["--jobs", str(int(jobs))]
    env = dict(os.environ, OPFORGE_USER_REGISTRY=user_dir)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                              timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise OpforgeError(f"building rule {path} took over {BUILD_TIMEOUT_S} s") from None
    if done.returncode != 0:
        if written:  # a bad rule's text is not kept
            os.unlink(path)
        raise OpforgeError(done.stderr.strip() or f"{cmd[0]} exited with {done.returncode}")
    report = json.loads(done.stdout)
    ops = report["rule_ops"]
    reg.ops()  # re-reads the user registry: a rebuilt (edited) rule's kernels from now on
    return RuleOp(ops[0], reg, path, report, ops)
