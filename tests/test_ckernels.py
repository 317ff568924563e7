"""maxk.ckernels: a kernel's library is rebuilt when a header it includes changes, and a missing header
is named."""

from __future__ import annotations

import pytest

from maxk import ckernels


def test_a_header_change_is_a_new_library(tmp_path, monkeypatch):
    compiler = ckernels.compiler()
    if compiler is None:
        pytest.skip("no C compiler here")
    monkeypatch.setenv("MAXK_KERNEL_CACHE", str(tmp_path / "cache"))
    src, inc = tmp_path / "src", tmp_path / "inc"
    src.mkdir(), inc.mkdir()
    (src / "k.c").write_text('#include "a.h"\nint f(void) { return A; }\n')
    (inc / "a.h").write_text('#include "b.h"\n#define A B\n')
    (inc / "b.h").write_text("#define B 1\n")
    assert ckernels.headers(src / "k.c", [src, inc]) == [inc / "a.h", inc / "b.h"]
    flags = ["-O1", "-fPIC", "-shared"]
    first = ckernels.build(src / "k.c", compiler, flags, [src, inc])
    assert ckernels.build(src / "k.c", compiler, flags, [src, inc]) == first
    (inc / "b.h").write_text("#define B 2\n")  # a header of a header
    assert ckernels.build(src / "k.c", compiler, flags, [src, inc]) != first
    (src / "b.h").write_text("#define B 3\n")  # the source's own folder comes first
    assert ckernels.headers(src / "k.c", [src, inc]) == [inc / "a.h", src / "b.h"]
    (src / "k.c").write_text('#include "missing.h"\n')
    with pytest.raises(RuntimeError, match=r'k.c: #include "missing.h" is in none of'):
        ckernels.build(src / "k.c", compiler, flags, [src, inc])
