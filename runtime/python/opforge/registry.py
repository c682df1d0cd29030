"""Registries and kernels: opforge_open / opforge_select / opforge_call and friends."""

import ctypes
import json

from . import _lib, dtypes
from ._lib import OpforgeError, check, decode, lib
from .tensors import Args, CallTemplates, is_array, roles


def _attr_text(attrs):
    """attrs as the C ABI's "name=value,..." text; a dict, a string or None."""
    if attrs is None:
        return None
    if isinstance(attrs, str):
        return attrs.encode()
    parts = []
    for k, v in attrs.items():
        if isinstance(v, bool):
            v = "1" if v else "0"
        text = f"{k}={v}"
        if "," in text or text.count("=") != 1:
            raise OpforgeError(f"attr {k!r}={v!r}: names and values cannot hold ',' or '='")
        parts.append(text)
    return ",".join(parts).encode()


def _args(args, kwargs):
    merged = dict(args or {})
    for k, v in kwargs.items():
        if k in merged:
            raise OpforgeError(f"argument '{k}' given twice")
        merged[k] = v
    return merged


class Registry:
    """An opened registry. dir None: $OPFORGE_REGISTRY, else the installed registry, else the
    build tree's (the runtime's opforge_default_registry()). user_dir: the user registry read
    beside it (rule ops built on the fly, opforge.rule): None for the default
    ($OPFORGE_USER_REGISTRY, else <compile cache>/user-registry), "" for none."""

    def __init__(self, dir=None, user_dir=None):
        handle = ctypes.c_void_p()
        check(lib().opforge_open_with_user(dir.encode() if dir else None,
                                           None if user_dir is None else user_dir.encode(),
                                           ctypes.byref(handle)))
        self._handle = handle
        self._kernels = {}  # kernel handle -> Kernel (the runtime owns them)

    def close(self):
        """Closes the registry; its kernels become unusable."""
        if self._handle:
            for k in self._kernels.values():
                k._handle = None
            lib().opforge_close(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def handle(self):
        if not self._handle:
            raise OpforgeError("the registry is closed")
        return self._handle

    @property
    def dir(self):
        return decode(lib().opforge_registry_dir(self.handle))

    @property
    def user_dir(self):
        """The user registry read beside this one ("" for none)."""
        return decode(lib().opforge_registry_user_dir(self.handle))

    def ops(self):
        """The op names, sorted (the user registry's as it is now, too)."""
        check(lib().opforge_registry_refresh_ops(self.handle))
        out, i = [], 0
        while True:
            name = lib().opforge_registry_op(self.handle, i)
            if name is None:
                return out
            out.append(decode(name))
            i += 1

    def variants(self, op):
        """Every variant's descriptor (dicts, registry/SCHEMA.md), fp32 storage first."""
        text = ctypes.c_char_p()
        check(lib().opforge_op_variants_json(self.handle, op.encode(), ctypes.byref(text)))
        return json.loads(decode(text.value))

    def set_num_threads(self, n):
        check(lib().opforge_set_num_threads(self.handle, int(n)))

    def _kernel(self, handle):
        # By handle: a variant rebuilt meanwhile (an edited rule) is a new kernel.
        k = self._kernels.get(handle.value)
        if k is None:
            k = self._kernels[handle.value] = Kernel(self, handle)
        return k

    def select(self, op, attrs=None, isa=None):
        """The variant of `op` for attrs (dict or "name=value,..."; may hold storage= and,
        for NN ops, algorithm=) on this CPU or the forced isa."""
        out = ctypes.c_void_p()
        check(lib().opforge_select(self.handle, op.encode(), _attr_text(attrs),
                                   isa.encode() if isa else None, ctypes.byref(out)))
        return self._kernel(out)

    def select_for(self, op, args=None, attrs=None, isa=None, **kwargs):
        """NN ops: the variant whose algorithm applies to these tensors and scalars (outputs
        may be left out). Other ops: as select()."""
        a = Args(_args(args, kwargs))
        out = ctypes.c_void_p()
        check(lib().opforge_select_for(self.handle, op.encode(), _attr_text(attrs),
                                       isa.encode() if isa else None, a.tensors, a.nt,
                                       a.scalars, a.ns, ctypes.byref(out)))
        return self._kernel(out)


class Kernel:
    """One selected variant; owned by its registry."""

    def __init__(self, registry, handle):
        self._registry = registry  # keeps the registry (and so the kernel) alive
        self._handle = handle
        self.variant = decode(lib().opforge_kernel_variant(handle))
        self.isa = decode(lib().opforge_kernel_isa(handle))
        text = ctypes.c_char_p()
        check(lib().opforge_kernel_descriptor_json(handle, ctypes.byref(text)))
        self.descriptor = json.loads(decode(text.value))
        self.op = self.descriptor["op"]
        self._roles = roles(self.descriptor)
        self._templates = CallTemplates(self._roles)

    def __repr__(self):
        return f"<opforge.Kernel {self.variant}>"

    @property
    def handle(self):
        if not self._handle:
            raise OpforgeError(f"kernel {self.variant}: its registry is closed")
        return self._handle

    @property
    def splittable(self):
        return bool(lib().opforge_kernel_splittable(self.handle))

    def _prepare(self, args, kwargs):
        return Args(_args(args, kwargs), roles_=self._roles)

    def __call__(self, args=None, **kwargs):
        return self.call(args, **kwargs)

    def call(self, args=None, **kwargs):
        """Validates the arguments (tensors: numpy arrays / CPU torch tensors; scalars:
        numbers) against the descriptor and calls the kernel; in-place ops update the state
        tensors where they lie."""
        merged = _args(args, kwargs)
        a = self._templates.args(merged) or Args(merged, roles_=self._roles)
        check(lib().opforge_call(self.handle, a.tensors, a.nt, a.scalars, a.ns))

    def prepare(self, args=None, **kwargs):
        """A PreparedCall: the arguments converted once, so each call is one ctypes call
        (benchmarks, optimizer steps); scalars can change between calls."""
        return PreparedCall(self, self._prepare(args, kwargs))

    def call_chunked(self, chunk_elements, args=None, **kwargs):
        """call() as consecutive kernel calls over slices of at most chunk_elements elements
        (splittable ops)."""
        a = self._prepare(args, kwargs)
        check(lib().opforge_call_chunked(self.handle, a.tensors, a.nt, a.scalars, a.ns,
                                         int(chunk_elements)))

    def call_model(self, layout, args=None, **kwargs):
        """One kernel call over flat buffers laid out by `layout` (a ModelLayout): every
        tensor argument holds layout.total_elements elements."""
        a = self._prepare(args, kwargs)
        check(lib().opforge_call_model(self.handle, layout.handle, a.tensors, a.nt, a.scalars,
                                       a.ns))

    def output_shape(self, index, args=None, **kwargs):
        """NN ops: the shape of output `index` (descriptor order, or its name) for these
        inputs and scalars."""
        if isinstance(index, str):
            names = [o["name"] for o in self.descriptor["outputs"]]
            if index not in names:
                raise OpforgeError(f"op '{self.op}' has no output '{index}' (outputs: "
                                   f"{', '.join(names)})")
            index = names.index(index)
        a = self._prepare(args, kwargs)
        shape = (ctypes.c_int64 * _lib.MAX_RANK)()
        rank = ctypes.c_int()
        check(lib().opforge_output_shape(self.handle, a.tensors, a.nt, a.scalars, a.ns,
                                         int(index), shape, _lib.MAX_RANK, ctypes.byref(rank)))
        return tuple(shape[i] for i in range(rank.value))

    def shape_value(self, expr, args=None, **kwargs):
        """NN ops: a shape expression (e.g. descriptor["cost"]["flops"]) for this call."""
        a = self._prepare(args, kwargs)
        v = ctypes.c_int64()
        check(lib().opforge_shape_value(self.handle, a.tensors, a.nt, a.scalars, a.ns,
                                        expr.encode(), ctypes.byref(v)))
        return v.value

    def fresh_outputs(self):
        """The descriptor's outputs that are fresh buffers (NN outputs), not in-place."""
        return [o for o in self.descriptor["outputs"] if not o["aliases"]]

    def allocate_outputs(self, args=None, like=None, **kwargs):
        """NN ops: {name: zeroed array} for every fresh output, shaped by output_shape and
        typed by the descriptor; torch tensors when `like` (default: the first tensor
        argument) is a torch tensor, else numpy arrays."""
        merged = _args(args, kwargs)
        if like is None:
            like = next((v for v in merged.values() if is_array(v)), None)
        use_torch = like is not None and type(like).__module__.startswith("torch")
        names = [o["name"] for o in self.descriptor["outputs"]]
        out = {}
        for o in self.fresh_outputs():
            shape = self.output_shape(names.index(o["name"]), merged)
            if use_torch:
                import torch
                out[o["name"]] = torch.zeros(shape, dtype=dtypes.torch_dtype(o["dtype"]))
            else:
                import numpy as np
                out[o["name"]] = np.zeros(shape, dtype=dtypes.numpy_dtype(o["dtype"]))
        return out

    def run(self, args=None, **kwargs):
        """NN ops: allocates the fresh outputs, calls, and returns them (one array, or a
        tuple in descriptor order when there are several)."""
        merged = _args(args, kwargs)
        outs = self.allocate_outputs(merged)
        clash = [n for n in outs if n in merged]
        if clash:
            raise OpforgeError(f"run() allocates output '{clash[0]}'; do not pass it (use "
                               "call() to write into your own buffer)")
        merged.update(outs)
        self.call(merged)
        vals = list(outs.values())
        return vals[0] if len(vals) == 1 else tuple(vals)


class PreparedCall:
    """Kernel.prepare(): tensors fixed (kept alive here), scalars settable."""

    def __init__(self, kernel, args):
        self.kernel = kernel
        self._a = args
        self._scalar_index = {args.scalars[i].name.decode(): i for i in range(args.ns)}
        self._call = lib().opforge_call

    def set_scalars(self, **values):
        for name in values:  # all checked before any is set
            if name not in self._scalar_index:
                raise OpforgeError(f"prepared call of {self.kernel.variant} has no scalar "
                                   f"'{name}' (it has: {', '.join(self._scalar_index)})")
        for name, value in values.items():
            self._a.scalars[self._scalar_index[name]].value = float(value)

    def __call__(self):
        a = self._a
        rc = self._call(self.kernel.handle, a.tensors, a.nt, a.scalars, a.ns)
        if rc != 0:
            check(rc)


def open(dir=None, user_dir=None):  # noqa: A001 (mirrors opforge_open)
    return Registry(dir, user_dir)
