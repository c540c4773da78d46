"""JSON from outside, read within bounds: each refusal names what was wrong, and where."""

from __future__ import annotations

import json

import pytest

from kilib import jsonbounds
from kilib.jsonbounds import JSONLimitError


def test_plain_json_reads_as_json_loads_does():
    assert jsonbounds.loads('{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}
    assert jsonbounds.loads(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}  # a UTF-8 BOM is allowed


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 100_000, "nested deeper than 32 levels"),
        ('{"a": NaN}', "NaN is not a number JSON can carry"),
        ('{"a": 1e400}', "the number 1e400 is too large"),
        ('{"a": 9007199254740992}', "the integer 9007199254740992 is beyond 2^53 - 1"),
        ('{"a": "x\\u0000"}', "a NUL character is not allowed in text"),
        ('{"a\\u0000": 1}', "a NUL character is not allowed in text"),
    ],
)
def test_what_no_later_step_can_hold_is_refused_with_its_reason(text, why):
    with pytest.raises(JSONLimitError) as refused:
        jsonbounds.loads(text)
    assert refused.value.why == why


def test_a_refusal_names_its_place():
    with pytest.raises(JSONLimitError) as refused:
        jsonbounds.loads('{"rows": [1, {"v": NaN}]}')
    assert refused.value.path == ("rows", 1, "v")
    assert str(refused.value) == "NaN is not a number JSON can carry (at rows/1/v)"


def test_depth_counts_arrays_and_objects_not_brackets_inside_strings():
    assert jsonbounds.loads('["' + "[" * 100 + '"]', max_depth=1) == ["[" * 100]
    assert jsonbounds.loads("[[]]", max_depth=2) == [[]]
    for deeper in ("[[[]]]", '[{"a": []}]', '{"a": {"b": {}}}', "[[[1]]]"):
        with pytest.raises(JSONLimitError, match="nested deeper than 2 levels"):
            jsonbounds.loads(deeper, max_depth=2)
    # Deeper than the parser's own recursion limit, valid JSON: refused, not a RecursionError.
    for text in ("[" * 100_000 + "]" * 100_000, "[" + "1" * 5000 + "," + "[" * 100_000):
        with pytest.raises(JSONLimitError, match="nested deeper than 32 levels"):
            jsonbounds.loads(text)


def test_bytes_that_are_not_utf8_are_refused():
    with pytest.raises(JSONLimitError, match="not UTF-8"):
        jsonbounds.loads(b"\xff{}")


def test_a_parsed_value_is_held_to_the_same_bounds():
    assert jsonbounds.value_problem({"a": [1, "b"]}) is None
    assert jsonbounds.value_problem({"a": float("inf")}) == "inf is not a finite number (at a)"


def test_a_list_of_floats_is_checked_whole_and_still_refuses_each_bad_number():
    # Finite floats whose sum overflows are all allowed; a NaN or an overflow anywhere in a
    # long sample list is still refused, at its place and as it was written.
    big = [1e308] * 3 + [0.5] * 1000
    assert jsonbounds.loads(json.dumps({"samples": big})) == {"samples": big}
    for bad, why in (("NaN", "NaN is not a number"), ("1e999", "the number 1e999 is too large")):
        text = '{"samples": [' + ", ".join(["0.25"] * 500 + [bad] + ["0.5"] * 500) + "]}"
        with pytest.raises(jsonbounds.JSONLimitError, match=why) as caught:
            jsonbounds.loads(text)
        assert caught.value.path == ("samples", 500)
    assert jsonbounds.value_problem([0.1, float("inf")]) is not None
