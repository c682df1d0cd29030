"""opforge.layout: model layouts' offsets, presets and refusals."""

import numpy as np
import pytest

import opforge


@pytest.mark.parametrize("alignment", [0, 1, 32, 1024])
def test_layout_places_tensors_aligned_back_to_back(alignment):
    shapes = [("w", (17, 5)), ("b", (5,)), ("s", ()), ("big", (65543,)), ("one", (1,))]
    layout = opforge.ModelLayout(shapes, alignment=alignment)
    align = alignment or 32  # the documented default
    assert layout.names == tuple(n for n, _ in shapes)
    assert layout.elements == (85, 5, 1, 65543, 1)
    off = layout.offsets
    assert off[0] == 0 and off[-1] == layout.total_elements and len(layout) == 5
    for i, e in enumerate(layout.elements):
        assert off[i] % align == 0
        # Back to back: the next tensor starts at the first aligned offset past this one.
        assert off[i + 1] == -(-(off[i] + e) // align) * align


def test_view_is_the_tensor_slice():
    layout = opforge.ModelLayout({"a": (3,), "b": (2, 2)}, alignment=4)
    flat = np.arange(layout.total_elements, dtype=np.float32)
    np.testing.assert_array_equal(layout.view(flat, "b"), [4, 5, 6, 7])
    layout.view(flat, "a")[:] = -1  # a view, not a copy
    assert flat[:3].tolist() == [-1, -1, -1]
    with pytest.raises(opforge.OpforgeError, match="no tensor 'c'"):
        layout.view(flat, "c")
    with pytest.raises(opforge.OpforgeError, match="flat buffer has 3 elements"):
        layout.view(flat[:3], "a")


def test_bad_layouts_are_refused():
    with pytest.raises(opforge.OpforgeError, match="'a' appears twice"):
        opforge.ModelLayout([("a", (1,)), ("a", (2,))])
    with pytest.raises(opforge.OpforgeError, match="alignment"):
        opforge.ModelLayout([("a", (1,))], alignment=3)
    with pytest.raises(opforge.OpforgeError, match="negative|-2"):
        opforge.ModelLayout([("a", (-2,))])
    with pytest.raises(opforge.OpforgeError, match="tensor 0 must be \\(name, shape\\)"):
        opforge.ModelLayout([("a",)])


def test_presets():
    names = opforge.preset_names()
    assert "transformer-small" in names
    layout = opforge.ModelLayout.preset("transformer-small")
    assert len(layout) > 0 and layout.total_elements >= sum(layout.elements)
    with pytest.raises(opforge.OpforgeError, match="no-such-model"):
        opforge.ModelLayout.preset("no-such-model")
