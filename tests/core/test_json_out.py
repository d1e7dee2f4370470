"""Result documents are written as ``json.dump(doc, indent=1)`` writes them, byte for byte,
by the C encoder and msgspec (a 60 MB result took 11 s), with NaN / inf as null."""
import io
import json
import math

from sofa_gui.core import json_out

DOC = {"a": [1.0, 1e-05, 0.1 + 0.2, 1e300, -0.0, 12345678901234567890, [], {}, {"x": []}],
       "text": "é\u202e\"\\\n\x1b[31m \U0001f600", "t": (1, 2), "e": {}, "z": None, "b": True}


def test_bytes_match_json_dump_indent_1():
    assert json_out.dumps(DOC) == json.dumps(DOC, indent=1).encode()


def test_lone_surrogate_still_written():
    doc = {"name": "bad \ud83d half"}
    assert json_out.dumps(doc) == json.dumps(doc, indent=1).encode()


def test_non_finite_numbers_become_null():
    doc = {"x": [math.nan, math.inf, -math.inf, 1.5], "y": {"z": math.nan}}
    out = json.loads(json_out.dumps(doc))  # strict JSON: parses without NaN support
    assert out == {"x": [None, None, None, 1.5], "y": {"z": None}}
    assert b"NaN" not in json_out.dumps(doc) and b"Infinity" not in json_out.dumps(doc)


def test_write_goes_to_the_binary_buffer_after_pending_text():
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")
    out.write("before\n")
    json_out.write({"k": 1}, out)
    assert raw.getvalue() == b'before\n{\n "k": 1\n}\n'


def test_write_to_a_plain_text_stream():
    out = io.StringIO()
    json_out.write({"k": [1]}, out)
    assert out.getvalue() == '{\n "k": [\n  1\n ]\n}\n'
