"""Model layouts (multi-tensor apply): a model's tensors back to back in flat buffers, so
one kernel call (Kernel.call_model) updates them all."""

import ctypes

from ._lib import OpforgeError, TensorShape, check, decode, lib


def preset_names():
    """The built-in model layouts' names (opforge_model_preset_name)."""
    out, i = [], 0
    while True:
        name = lib().opforge_model_preset_name(i)
        if name is None:
            return out
        out.append(decode(name))
        i += 1


class ModelLayout:
    """tensors: [(name, shape), ...] or {name: shape}; alignment in elements (0: the
    runtime's default, 32). Tensor i occupies [offsets[i], offsets[i] + elements[i]) of
    every flat buffer of total_elements elements."""

    def __init__(self, tensors, alignment=0):
        items = list(tensors.items() if isinstance(tensors, dict) else tensors)
        keep, structs = [], []
        for i, item in enumerate(items):
            try:
                name, shape = item
                shape = tuple(int(d) for d in shape)
            except (TypeError, ValueError):
                raise OpforgeError(f"model layout: tensor {i} must be (name, shape), got "
                                   f"{item!r}") from None
            if not isinstance(name, str):
                raise OpforgeError(f"model layout: tensor {i}'s name must be a string, got "
                                   f"{name!r}")
            buf = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            keep.append(buf)
            structs.append(TensorShape(name.encode(), len(shape), buf))
        arr = (TensorShape * max(len(structs), 1))(*structs)
        handle = ctypes.c_void_p()
        check(lib().opforge_model_layout_create(arr, len(structs), int(alignment),
                                                ctypes.byref(handle)))
        self._init(handle)

    @classmethod
    def preset(cls, name, alignment=0):
        """A built-in model, e.g. "transformer-small" (preset_names())."""
        handle = ctypes.c_void_p()
        check(lib().opforge_model_layout_preset(name.encode(), int(alignment),
                                                ctypes.byref(handle)))
        self = cls.__new__(cls)
        self._init(handle)
        return self

    def _init(self, handle):
        self._handle = handle
        L = lib()
        n = L.opforge_model_layout_tensors(handle)
        self.total_elements = L.opforge_model_layout_total_elements(handle)
        offs = L.opforge_model_layout_offsets(handle)
        elems = L.opforge_model_layout_elements(handle)
        self.offsets = tuple(offs[i] for i in range(n + 1))
        self.elements = tuple(elems[i] for i in range(n))
        self.names = tuple(decode(L.opforge_model_layout_name(handle, i)) for i in range(n))

    @property
    def handle(self):
        if not self._handle:
            raise OpforgeError("the model layout is freed")
        return self._handle

    def __len__(self):
        return len(self.names)

    def index(self, name):
        try:
            return self.names.index(name)
        except ValueError:
            raise OpforgeError(f"model layout has no tensor '{name}'") from None

    def view(self, flat, name):
        """Tensor `name`'s elements of a flat buffer (a 1-D view, no copy)."""
        i = self.index(name) if isinstance(name, str) else int(name)
        if len(flat) != self.total_elements:
            raise OpforgeError(f"flat buffer has {len(flat)} elements, the layout "
                               f"{self.total_elements}")
        return flat[self.offsets[i]:self.offsets[i] + self.elements[i]]

    def free(self):
        if self._handle:
            lib().opforge_model_layout_free(self._handle)
            self._handle = None

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass
