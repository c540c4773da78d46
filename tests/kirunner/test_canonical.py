"""kirunner.canonical against RFC 8785's own examples and the rfc8785 package."""

from __future__ import annotations

import json
import math
import random
import struct

import pytest
import rfc8785

from kirunner.canonical import CanonicalizationError, canonicalize, format_number


def _random_doubles(n: int, seed: int = 8785) -> list[float]:
    rng = random.Random(seed)
    out: list[float] = []
    while len(out) < n:
        (x,) = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))
        if math.isfinite(x):
            out.append(x)
    return out


EDGE_FLOATS = [
    0.0,
    -0.0,
    0.1,
    -0.1,
    0.5,
    1.0,
    -1.0,
    100.0,
    1e-7,
    1e-6,
    1.5e-7,
    0.000001,
    0.0000012345,
    1e20,
    1e21,
    1e22,
    -1e21,
    123456789012345680000.0,
    1.2345678901234568e21,
    333333333.33333329,
    1e30,
    4.5,
    2e-3,
    1e-27,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    9007199254740991.0,
    9007199254740992.0,
    0.1 + 0.2,
    1 / 3,
    2**-1074,
    295147905179352830000.0,
    4.35,
    0.30000000000000004,
    123e-20,
    1e-5,
    1e-4,
    12345678.9,
]

ES_FORMS = {
    1e-7: "1e-7",
    1e21: "1e+21",
    1e20: "100000000000000000000",
    0.1: "0.1",
    -0.0: "0",
    0.000001: "0.000001",
    1.5e-7: "1.5e-7",
    123e-20: "1.23e-18",
    5e-324: "5e-324",
    1.7976931348623157e308: "1.7976931348623157e+308",
    9007199254740992.0: "9007199254740992",
    100.0: "100",
    -1e21: "-1e+21",
    333333333.33333329: "333333333.3333333",
    1e30: "1e+30",
}


def test_numbers_use_ecmascript_form() -> None:
    assert {value: format_number(value) for value in ES_FORMS} == ES_FORMS


def test_floats_match_rfc8785_package() -> None:
    """One test over 2,000 random doubles and the edge cases, alone and inside a document
    (where the fast path may take them); each reads back as the same double."""
    for value in EDGE_FLOATS + _random_doubles(2000):
        assert canonicalize(value) == rfc8785.dumps(value), value
        assert canonicalize({"v": [value]}) == rfc8785.dumps({"v": [value]}), value
        assert float(canonicalize(value)) == value


def test_rfc8785_appendix_example() -> None:
    # RFC 8785 section 3.2.2 / appendix: the sample input and its canonical output.
    doc = json.loads(
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    ).encode()
    assert canonicalize(doc) == expected
    assert canonicalize(doc) == rfc8785.dumps(doc)


def test_keys_sort_by_utf16_code_units() -> None:
    # RFC 8785 3.2.3's example: the emoji (a surrogate pair, D83D...) sorts before U+FB33
    # even though its code point is larger.
    doc = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    out = canonicalize(doc).decode()
    assert out == rfc8785.dumps(doc).decode()
    assert list(json.loads(out)) == [
        "\r",
        "1",
        "\u0080",
        "\u00f6",
        "\u20ac",
        "\U0001f600",
        "\ufb33",
    ]


PAYLOADS = [
    {},
    [],
    {"a": []},
    {"b": 1, "a": 2, "A": 3, "aa": 4, "": 5},
    {"nested": {"z": [1, 2.5, {"y": None, "x": True}], "a": False}},
    {
        "unicode": "na\u00efve \u65e5\u672c\u8a9e \U0001f680",
        "ctl": '\x00\x01\x1f\x7f\t\n\b\f\r"\\/',
    },
    {"\U0001f680": 1, "\u00e9": 2, "e": 3, "\ufffd": 4},
    {"ints": [0, -1, 1, 2**53 - 1, -(2**53 - 1), 10**15]},
    {"floats": [1e-7, 1e21, 0.1, -0.0, 1.0, 2.5e-5, 6.02214076e23, -1e-300]},
    {
        "payload": {
            "job": {"id": "6f1c1f7e-1b53-4a43-9d1e-2a4f9c1f0a11", "nonce": "ab" * 16},
            "measurement": {"median": 0.1673445, "samples": [0.1, 0.2000001, 1e-9], "unit": "ms"},
            "environment": {"gpuName": "NVIDIA H200", "computeCapability": "sm_90"},
        }
    },
    "just a string",
    3.14159,
    None,
    True,
]


def test_payloads_match_rfc8785_package() -> None:
    for doc in PAYLOADS:
        assert canonicalize(doc) == rfc8785.dumps(doc), doc


def test_random_nested_documents_match_rfc8785_package() -> None:
    rng = random.Random(42)
    alphabet = ["a", "b", "Z", "\u00e9", "\u20ac", "\U0001f600", "\n", '"', "\\", "1", " "]
    floats = _random_doubles(500, seed=7)

    def value(depth: int) -> object:
        kind = rng.randrange(8 if depth < 4 else 5)
        if kind == 0:
            return rng.choice([None, True, False])
        if kind == 1:
            return rng.randint(-(2**53 - 1), 2**53 - 1)
        if kind == 2:
            return rng.choice(floats)
        if kind in (3, 4):
            return "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))
        if kind in (5, 6):
            return {
                "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 4))): value(depth + 1)
                for _ in range(rng.randrange(5))
            }
        return [value(depth + 1) for _ in range(rng.randrange(5))]

    for _ in range(300):
        doc = value(0)
        assert canonicalize(doc) == rfc8785.dumps(doc)


def test_values_without_a_canonical_form_are_rejected() -> None:
    bad_values = [
        float("nan"),
        float("inf"),
        -float("inf"),
        2**53,
        -(2**53),
        {1: "x"},
        "\ud800",
        {"s": object()},
        {"a": ["\ud800"]},
    ]
    for bad in bad_values:
        with pytest.raises(CanonicalizationError):
            canonicalize(bad)


def test_server_and_runner_share_the_rule() -> None:
    """The digest rule and both ends of the signature call the same function."""
    from kirunner import sign
    from runs.manifest import canonical

    doc = {"b": 1.5e-7, "a": [4096.0, "\u00e9"]}
    assert canonical.canonical_json(doc) == sign.canonicalize(doc) == rfc8785.dumps(doc)
    assert sign.canonicalize is canonicalize


def test_numbers_put_aside_are_written_back_in_the_packages_form() -> None:
    """A document whose floats print otherwise under ECMAScript rules (4096.0, 1e-07, 1e+21)
    takes the C encoder with those numbers written back; the bytes are the package's."""
    from kirunner import canonical

    doc = {"samples": [4096.0, 1e-07, 0.5, -0.0, 1e21, 123456789012345680.0], "n": 3, "u": "é"}
    assert canonical._with_numbers_put_back(doc) is not None
    assert canonicalize(doc) == rfc8785.dumps(doc)
    # A string that happens to be a marker is not mistaken for one: the package decides.
    forged = {"a": 1.0, "b": f"{canonical._TOKEN}:0"}
    assert canonical._with_numbers_put_back(forged) is None
    assert canonicalize(forged) == rfc8785.dumps(forged)
    # A non-ASCII key still goes to the package (UTF-16 key order).
    assert canonical._with_numbers_put_back({"\U0001f600": 1.0, "\ufb33": 2.0}) is None
    with pytest.raises(CanonicalizationError):
        canonicalize({"a": 1.0, "b": float("nan")})
