"""fastjson gives what json gives: the same values, the same bytes, the same errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuhook import fastjson

DOCUMENTS = [
    '{"ociVersion":"1.0.2","process":{"env":["A=1","B=é"],"args":["sh","-c","echo \\"hi\\""]},"n":null}',
    '  \n{"a": [1, -2, 3.5e10, 1e-7, 12345678901234567890123], "b": {"c": [true, false, {}], "d": []}}\t\r\n',
    '[]', '"text \\u00e9 \\ud83d\\ude00 \\n"', "0", "-0.0", "true", "null",
    '{"dup": 1, "dup": 2}', '{"nan": NaN, "inf": Infinity, "ninf": -Infinity}',
]


@pytest.mark.parametrize("text", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_loads_matches_json(text: str) -> None:
    got, want = fastjson.loads(text.encode()), json.loads(text)
    assert repr(got) == repr(want)  # repr: nan != nan, and -0.0 == 0.0 would hide a difference
    assert repr(fastjson.loads(text)) == repr(want)  # text as well as bytes


@pytest.mark.parametrize("text", ["", "{", '{"a": 1,}', '{"a": 1} x', '{"a": 1}{}', "\ufeff{}", "[1, 2", "nul",
                                  '{"a": "\x01"}'], ids=repr)
def test_bad_documents_raise_what_json_raises(text: str) -> None:
    with pytest.raises(ValueError) as ours:
        fastjson.loads(text.encode())
    with pytest.raises(ValueError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)


def test_bytes_that_are_not_utf8_are_a_value_error() -> None:
    with pytest.raises(ValueError):
        fastjson.loads(b'{"a": "\xff"}')


@pytest.mark.parametrize("value", [
    {"a": [1, 2.5, "é", None, True, False], "b": {"c": 1e100, "d": 10**30, "e": "\x00\"\\/"}},
    [], {}, "😀", -0.0, float("inf"), {"k": (1, 2)}, {1: "int keys become strings"},
], ids=range(8))
def test_dumps_matches_json(value: object) -> None:
    assert fastjson.dumps(value) == json.dumps(value, separators=(",", ":"))


def test_dumps_refuses_what_json_refuses_and_recovers() -> None:
    with pytest.raises(TypeError, match="object"):
        fastjson.dumps({"a": [object()]})
    shared = [1]
    assert fastjson.dumps({"x": shared, "y": shared}) == '{"x":[1],"y":[1]}'  # no stale cycle markers
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        fastjson.dumps(loop)


def test_errors_without_the_json_package_loaded() -> None:
    """The C scanner reports errors through json.decoder; in the shim that module is not loaded."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from gpuhook import fastjson\n"
            "try:\n    fastjson.loads(b'{\"a\": 1,')\nexcept ValueError as e:\n    print(type(e).__name__, e)")
    hook = str(Path(__file__).resolve().parents[2] / "hook")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, hook], capture_output=True, text=True, check=False)
    want = "JSONDecodeError Expecting property name enclosed in double quotes: line 1 column 9 (char 8)"
    assert done.stdout.strip() == want, done.stderr


@pytest.mark.parametrize("shape", ["def make_scanner(a, b): return None",
                                   "import _json as real\nmake_scanner = real.make_scanner\n"
                                   "def make_encoder(*a): raise TypeError('takes 10 arguments')",
                                   "make_scanner = 1"], ids=["scanner-signature", "encoder-signature", "not-callable"])
def test_a_changed_private_codec_falls_back_to_json(shape: str) -> None:
    """`_json` is CPython's private API: where a release changes its shape, the json package takes over."""
    code = ("import sys, types, _json as real; sys.path.insert(0, sys.argv[1])\n"
            f"fake = types.ModuleType('_json'); exec({shape!r}, fake.__dict__); sys.modules['_json'] = fake\n"
            "from gpuhook import fastjson\n"
            "sys.modules['_json'] = real  # the json package of the same release matches its own codec\n"
            "print(fastjson.dumps({'a': [1, 'é']}), fastjson.loads(b' {\"b\": [true, null]} '))")
    hook = str(Path(__file__).resolve().parents[2] / "hook")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, hook], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == '{"a":[1,"\\u00e9"]} ' + "{'b': [True, None]}", done.stderr


# Every parser of outside input is bounded in depth (issue 43, 7): a pod author's 2,000-deep opaque parameters,
# a deep record or checkpoint are a ValueError naming the bound, never the RecursionError a traceback came from.
@pytest.mark.parametrize("text", ["[" * 2000 + "]" * 2000, '{"a":' * 2000 + "1" + "}" * 2000,
                                  "[" * 100_000, "[" * 65 + "]" * 65],
                         ids=["array-2000", "object-2000", "unclosed-100k", "just-past-the-bound"])
def test_deep_documents_are_refused_by_name_not_recursion(text: str) -> None:
    with pytest.raises(fastjson.TooDeep, match="nests deeper than 64 levels"):
        fastjson.loads(text.encode())


def test_the_bound_itself_is_read_and_brackets_in_strings_do_not_count() -> None:
    assert fastjson.loads("[" * 64 + "]" * 64) is not None
    assert fastjson.loads(json.dumps({"s": "[" * 5000})) == {"s": "[" * 5000}
    assert fastjson.loads("[[1]]", max_depth=2) == [[1]]
    with pytest.raises(fastjson.TooDeep):
        fastjson.loads("[[1]]", max_depth=1)


def test_pruned_keeps_the_shallow_parts_and_cuts_each_deep_subtree_to_a_marker() -> None:
    deep = '{"parameters":' + '{"x":' * 2000 + "1" + "}" * 2000 + "}"
    text = '{"items":[{"name":"a ] [ {","spec":' + deep + '},{"name":"b","spec":{}}],"kind":"List"}'
    got = fastjson.loads_pruned(text.encode(), max_depth=6)
    assert got["kind"] == "List" and got["items"][1] == {"name": "b", "spec": {}}
    assert got["items"][0]["name"] == "a ] [ {"
    cut = got["items"][0]["spec"]["parameters"]["x"]  # levels 5 and 6 read, the 7th cut
    assert cut == {"x": fastjson.PRUNED}
    fastjson.check_depth(got, 6)


def test_pruned_reads_past_an_integer_python_refuses_to_read() -> None:
    """A pod author's 5,000-digit number in a claim's parameters (Python reads at most 4,300 digits into an int):
    the API server's answer is read with that number cut to the marker, not refused for the whole cluster."""
    huge = "9" * 5000
    text = ('{"items":[{"name":"a","parameters":{"n":' + huge + ',"s":"' + huge + '","f":1.' + huge + '}},'
            '{"name":"b","n":-' + huge + '}],"kind":"List"}')
    with pytest.raises(ValueError, match="integer string conversion"):
        fastjson.loads(text)
    got = fastjson.loads_pruned(text)
    assert got["kind"] == "List" and got["items"][0]["parameters"]["n"] == fastjson.PRUNED
    assert got["items"][0]["parameters"]["s"] == huge  # a string of digits is text, kept
    assert got["items"][0]["parameters"]["f"] > 1  # a float of any length is read
    assert got["items"][1] == {"name": "b", "n": fastjson.PRUNED}
    assert fastjson.loads_pruned('{"n": 12}') == {"n": 12}


@pytest.mark.parametrize(("value", "ok"), [([[[]]], True), ([[[[]]]], False), ({"a": {"b": {"c": 1}}}, True),
                                           ({"a": ({"b": []},)}, False), ("[[[[[", True)],
                         ids=["3-lists", "4-lists", "3-dicts", "tuple-counts", "text-is-no-nesting"])
def test_check_depth_bounds_what_other_parsers_returned(value: object, ok: bool) -> None:
    if ok:
        fastjson.check_depth(value, 3)
    else:
        with pytest.raises(fastjson.TooDeep, match="the TOML nests deeper than 3 levels"):
            fastjson.check_depth(value, 3, "the TOML")
