"""opforge.torch.nn._alloc: large outputs on transparent huge pages, small ones untouched."""

import pytest

torch = pytest.importorskip("torch")

from opforge.torch.nn import _alloc  # noqa: E402
from opforge.torch.nn import functional as F  # noqa: E402


def anon_huge_kb(start, end):
    """AnonHugePages (kB) of the mappings of this process overlapping [start, end)."""
    total, overlaps = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(v, 16) for v in head.split("-"))
                overlaps = lo < end and start < hi
            elif overlaps and head == "AnonHugePages:":
                total += int(line.split()[1])
    return total


def test_small_tensors_are_left_alone():
    t = torch.empty(_alloc.HUGE_MIN // 4 - 1)
    assert not _alloc.advise_huge(t)


@pytest.mark.skipif(_alloc.thp_mode() not in ("madvise", "always"),
                    reason="transparent huge pages are off on this machine")
def test_large_output_lands_on_huge_pages():
    # 64 MB: over glibc's largest mmap threshold, so its own mapping, faulted in below.
    t = _alloc.empty((16 << 20,))
    assert t.shape == (16 << 20,) and t.dtype == torch.float32
    t.fill_(1.0)
    start = t.data_ptr()
    assert anon_huge_kb(start, start + t.numel() * 4) >= 2048


def test_outputs_of_the_functional_ops_are_still_right():
    # A layer_norm over 8 MB goes through empty() and advise_huge.
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2048, 1024, generator=g)
    w, b = torch.randn(1024, generator=g), torch.randn(1024, generator=g)
    with torch.no_grad():
        got = F.layer_norm(x, (1024,), w, b)
        ref = torch.nn.functional.layer_norm(x.double(), (1024,), w.double(), b.double())
    assert (got.double() - ref).abs().max().item() <= 1e-4
