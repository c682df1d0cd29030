"""scripts/bench_docs.py: the section replacement behind the bench scripts' --write-docs."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "scripts"))

import bench_docs  # noqa: E402

DOC = """# Benchmarks

## one
<!-- begin one -->
old table
<!-- end one -->
prose after one

## two
<!-- begin two -->
<!-- end two -->
"""


def test_replaces_only_its_own_section():
    out = bench_docs.replace_section(DOC, "one", "| a |\n|---|\n")
    assert "old table" not in out
    assert "<!-- begin one -->\n| a |\n|---|\n<!-- end one -->\nprose after one\n" in out
    assert out.endswith("## two\n<!-- begin two -->\n<!-- end two -->\n")
    assert out.startswith("# Benchmarks\n\n## one\n")


def test_empty_section_and_missing_newline():
    out = bench_docs.replace_section(DOC, "two", "x")
    assert out.endswith("<!-- begin two -->\nx\n<!-- end two -->\n")


def test_rerun_is_stable():
    once = bench_docs.replace_section(DOC, "one", "t\n")
    assert bench_docs.replace_section(once, "one", "t\n") == once


@pytest.mark.parametrize("text", [
    DOC.replace("<!-- end one -->\n", ""),                      # no end
    DOC.replace("<!-- begin one -->\n", ""),                    # no begin
    DOC + "<!-- begin one -->\n",                               # doubled
    "<!-- end one -->\n<!-- begin one -->\n",                   # out of order
])
def test_bad_markers_are_errors(text):
    with pytest.raises(ValueError):
        bench_docs.replace_section(text, "one", "t\n")


def test_unknown_name_is_an_error():
    with pytest.raises(ValueError, match="begin three"):
        bench_docs.replace_section(DOC, "three", "t\n")


def test_section_body_lines():
    body = bench_docs.section_body(["| a |", "|---|"], "avx512", command="python3 x.py --q",
                                   cpu="Some CPU (2 logical CPUs)", date="2026-12-02",
                                   notes=["threads: 2"])
    assert body == ("- Date: 2026-12-02\n- Command: `python3 x.py --q`\n"
                    "- CPU: Some CPU (2 logical CPUs)\n- ISA: avx512\n- threads: 2\n\n"
                    "| a |\n|---|\n")


def test_command_line_is_relative_to_the_root():
    script = os.path.join(bench_docs.ROOT, "scripts", "bench_torch.py")
    cmd = bench_docs.command_line([script, "--reps", "3", "--op", "a b"], "/usr/bin/python3")
    assert cmd == "/usr/bin/python3 scripts/bench_torch.py --reps 3 --op 'a b'"


def test_write_section_rewrites_the_file(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(DOC, encoding="utf-8")
    bench_docs.write_section("one", ["| n |", "|---|", "| 1 |"], "avx2", path=str(path),
                             command="c", cpu="cpu", date="2026-01-02")
    text = path.read_text(encoding="utf-8")
    assert "- ISA: avx2\n\n| n |\n|---|\n| 1 |\n<!-- end one -->\nprose after one" in text
    assert list(tmp_path.iterdir()) == [path]   # no temp file left


def test_write_section_leaves_the_file_on_error(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(DOC, encoding="utf-8")
    with pytest.raises(ValueError):
        bench_docs.write_section("three", ["t"], "avx2", path=str(path))
    assert path.read_text(encoding="utf-8") == DOC


def test_the_repository_file_has_each_scripts_markers():
    with open(bench_docs.BENCHMARKS, encoding="utf-8") as f:
        text = f.read()
    for name in ("bench_torch_optim", "bench_torch", "bench_nn_torch"):
        bench_docs.replace_section(text, name, "")   # raises when a marker is wrong


def test_check_section(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text(DOC, encoding="utf-8")
    bench_docs.check_section("one", path=str(path))
    with pytest.raises(ValueError):
        bench_docs.check_section("three", path=str(path))
    with pytest.raises(OSError):
        bench_docs.check_section("one", path=str(tmp_path / "missing.md"))
