"""The loose collation keys behind ``unicode_loose_md5`` / ``unicode_loose_xxhash``,
computed from x/text's CLDR-23 root table as Vitess does (the shared vectors pin the
exact keyspace ids; these tests pin the behaviour around them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vschema.errors import VindexError
from vschema.vindexes import FunctionalVindex, create_vindex
from vschema.vindexes.unicode_collation import loose_collation_key
from vschema.vindexes.xtext_collation_table import (
    TABLES_ENV,
    CollationTableMissing,
    parse_tables,
    tables_path,
)


def key(text: str) -> bytes:
    return loose_collation_key(text.encode("utf-8"))


def functional(vtype: str) -> FunctionalVindex:
    vindex = create_vindex(f"my_{vtype}", vtype)
    assert isinstance(vindex, FunctionalVindex)
    return vindex


@pytest.mark.parametrize("vtype", ["unicode_loose_md5", "unicode_loose_xxhash"])
def test_case_accents_width_and_trailing_spaces_do_not_change_the_keyspace_id(vtype: str) -> None:
    ids = functional(vtype).map(["Straße", "STRASSE", "ｓｔｒａｓｓｅ", "strasse  ", "stráSSe"])
    assert len(set(ids)) == 1


@pytest.mark.parametrize("vtype", ["unicode_loose_md5", "unicode_loose_xxhash"])
def test_letters_leading_spaces_and_punctuation_change_the_keyspace_id(vtype: str) -> None:
    ids = functional(vtype).map(["Test", "Best", " Test", "Tes", "Te-st"])
    assert len(set(ids)) == 5


@pytest.mark.parametrize("vtype", ["unicode_loose_md5", "unicode_loose_xxhash"])
def test_invalid_utf8_is_an_error_naming_the_vindex(vtype: str) -> None:
    with pytest.raises(VindexError, match=rf"vindex my_{vtype} \({vtype}\): .*invalid UTF-8"):
        functional(vtype).map([b"\xff\xfe"])


def test_canonically_equivalent_strings_share_a_key() -> None:
    # Precomposed, decomposed, and decomposed with the marks in the other order.
    assert key("ậ") == key("a\u0323\u0302") == key("a\u0302\u0323")


def test_contractions_weigh_the_sequence_not_its_parts() -> None:
    # CLDR sorts Cyrillic short i as its own letter: it is not "и" plus a breve.
    assert key("й") == key("и\u0306")
    assert key("й") != key("и")


def test_compatibility_characters_weigh_as_their_decomposition() -> None:
    assert key("ǅ") == key("DŽ")
    assert key("ﬁ") == key("fi")


def test_hangul_syllables_weigh_as_their_jamo() -> None:
    assert key("한") == key("\u1112\u1161\u11ab")


def test_cjk_ideographs_get_x_text_implicit_weights() -> None:
    # x/text gives an unlisted unified ideograph the primary rune + 0x10000, encoded in
    # 3 bytes with the top bit set: U+4E2D -> 0x014E2D -> 81 4E 2D.
    assert key("中文") == bytes.fromhex("814e2d816587")


def test_unassigned_code_points_get_the_other_implicit_offset() -> None:
    # U+0378 is unassigned: primary 0x378 + 0x50000.
    assert key("\u0378") == bytes.fromhex("850378")


def test_combining_marks_have_no_primary_weight() -> None:
    assert key("e\u0301") == key("e")


def test_empty_and_all_space_values_have_an_empty_key() -> None:
    assert key("") == key("   ") == b""


def test_missing_table_error_tells_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(TABLES_ENV, str(tmp_path / "nowhere" / "tables.go"))
    with pytest.raises(CollationTableMissing, match="apt-get install golang-golang-x-text-dev"):
        tables_path()


def test_table_of_another_unicode_version_is_refused() -> None:
    text = 'package collate\nconst UnicodeVersion = "9.0.0"\nconst CLDRVersion = "30"\n'
    with pytest.raises(CollationTableMissing, match="Unicode 9.0.0 / CLDR 30"):
        parse_tables(text, Path("tables.go"))
