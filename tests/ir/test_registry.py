"""The registry type every msc table is built on."""

from __future__ import annotations

import pytest

from msc.ir.registry import Registry


def test_register_and_lookup_in_key_order():
    r: Registry[str, int] = Registry("emitter")
    r.register("b", 2)
    r("a", "c")(1)
    assert list(r) == ["a", "b", "c"]
    assert r["c"] == 1 and r.get("z") is None and "a" in r and len(r) == 3
    assert r.items() == [("a", 1), ("b", 2), ("c", 1)]


def test_duplicate_key_is_an_error_naming_it():
    r: Registry[str, int] = Registry("converter")
    r.register("relu", 1)
    with pytest.raises(ValueError, match="converter 'relu' is registered twice"):
        r.register("relu", 2)


def test_copy_is_independent():
    r: Registry[str, int] = Registry("rule")
    r.register("a", 1)
    c = r.copy()
    c.register("b", 2)
    assert "b" not in r and list(c) == ["a", "b"]
    with pytest.raises(KeyError, match="no rule 'b'"):
        r["b"]
    assert list(c.without("a")) == ["b"] and list(c) == ["a", "b"]


def test_versioned_lookup_takes_the_newest_entry_not_after_the_version():
    from msc.ir.registry import VersionedRegistry

    r: VersionedRegistry[str, str] = VersionedRegistry("converter")
    r.register("Conv", 11, "v11")
    r.register("Conv", 1, "v1")
    assert r.versions("Conv") == [1, 11]
    assert r.lookup("Conv", 10) == "v1" and r.lookup("Conv", 11) == "v11"
    assert r.lookup("Conv", 99) == "v11" and r.lookup("Relu", 99) is None
    with pytest.raises(ValueError, match="since 11 is registered twice"):
        r.register("Conv", 11, "again")
