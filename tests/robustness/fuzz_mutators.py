"""Mutations of real trace files and folders into the broken inputs users hand us.

Every mutator takes a ``random.Random`` (hypothesis passes its own, the fuzz benchmark a
seeded one, so each case replays) and returns the new content plus a short label that
names what was done; the labels are what the fuzz tally counts.
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import random
import shutil
import sqlite3
import zlib
from pathlib import Path

# -- odd values -------------------------------------------------------------------------

ODD_NUMBERS = [0, -1, -(2**31), 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63), 2**64 + 5,
               -(2**70), 10**30, 1e308, -1e308, 1e-300, 0.5, -0.0, float("nan"), float("inf"),
               float("-inf")]
ODD_STRINGS = ["", " ", "abc", "12.5", "-7", "1e400", "NaN", "null", "0x1f", "\x00", "\u202e",
               "<script>alert(1)</script>", "<b>bold</b> & 'q' \"d\"", "\ud800", "\U0001f600",
               "line\nbreak", "tab\tsep", "comma,semi;colon:", "../../etc/passwd", "%s%n{0}",
               "é" * 50]
ODD_CONTAINERS = [None, True, False, [], {}, [1, 2, 3], {"a": {"b": [None]}}, [[[]]]]


def odd_value(rng: random.Random):
    pick = rng.random()
    if pick < 0.45:
        return rng.choice(ODD_NUMBERS)
    if pick < 0.8:
        return rng.choice(ODD_STRINGS)
    return copy.deepcopy(rng.choice(ODD_CONTAINERS))


def _huge_string(rng: random.Random) -> str:
    unit = rng.choice(["x", "é", "\U0001f600", "<a>", "\\", '"'])
    return unit * rng.choice([10_000, 300_000, 2_000_000])


# -- byte level (any file) --------------------------------------------------------------

def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data) + 1)] if data else data


def _flip(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return data
    buf = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 8, 64])):
        buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    return bytes(buf)


def _insert(data: bytes, rng: random.Random) -> bytes:
    pos = rng.randrange(len(data) + 1)
    junk = rng.choice([b"\xff\xfe", b"\x00" * 7, b"\xc3\x28", b"{", b"}", b"]", b'"', b",",
                       b"\xed\xa0\x80", os.urandom(rng.randrange(1, 64))])
    return data[:pos] + junk + data[pos:]


def _delete_range(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return data
    a = rng.randrange(len(data))
    return data[:a] + data[a + rng.randrange(1, 4096):]


def _zero_range(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return data
    a = rng.randrange(len(data))
    n = min(len(data) - a, rng.randrange(1, 4096))
    return data[:a] + b"\x00" * n + data[a + n:]


def _non_utf8(data: bytes, rng: random.Random) -> bytes:
    # Inside a string literal if there is one, so a lenient decoder sees it too.
    pos = data.find(b'"', rng.randrange(len(data) + 1)) if data else -1
    pos = pos + 1 if pos >= 0 else rng.randrange(len(data) + 1)
    return data[:pos] + rng.choice([b"\xff", b"\xc0\xaf", b"\xe2\x82", b"\x80\x80"]) + data[pos:]


def _garbage(data: bytes, rng: random.Random) -> bytes:
    return os.urandom(rng.choice([1, 3, 100, 5000, 70_000]))


def _empty(data: bytes, rng: random.Random) -> bytes:
    return b""


def _bom(data: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.5:
        return b"\xef\xbb\xbf" + data
    try:
        return data.decode("utf-8").encode("utf-16")
    except UnicodeDecodeError:
        return b"\xff\xfe" + data


def _whitespace(data: bytes, rng: random.Random) -> bytes:
    return b" \n\t\r" * rng.choice([1, 1000, 250_000]) + data


BYTE_MUTATORS = {
    "truncate": _truncate, "flip-bytes": _flip, "insert-bytes": _insert,
    "delete-range": _delete_range, "zero-range": _zero_range, "non-utf8": _non_utf8,
    "garbage": _garbage, "empty": _empty, "bom-or-utf16": _bom, "whitespace-prefix": _whitespace,
}


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    name = rng.choice(sorted(BYTE_MUTATORS))
    return BYTE_MUTATORS[name](data, rng), name


def gzip_variant(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Compressed forms that go wrong in the gzip layer rather than in the content."""
    z = gzip.compress(data, compresslevel=1, mtime=0)
    pick = rng.randrange(6)
    if pick == 0:
        return gzip.compress(os.urandom(rng.randrange(1, 5000)), mtime=0), "gzip-of-garbage"
    if pick == 1:
        return z[: rng.randrange(len(z))], "gzip-truncated"
    if pick == 2:
        return _flip(z, rng), "gzip-flipped"
    if pick == 3:
        return gzip.compress(z, mtime=0), "gzip-twice"
    if pick == 4:
        return z + os.urandom(rng.randrange(1, 100)), "gzip-trailing-junk"
    return zlib.compress(data), "zlib-not-gzip"


# -- Chrome / Kineto JSON ---------------------------------------------------------------

EVENT_KEYS = ["ts", "dur", "ph", "name", "pid", "tid", "cat", "args", "id", "bp", "s"]
ARG_KEYS = ["correlation", "External id", "external id", "device", "stream", "bytes",
            "Bytes", "name", "labels", "rank", "Process Group Ranks"]
PHASES = ["X", "B", "E", "i", "I", "C", "s", "t", "f", "M", "b", "e", "n", "P", "O", "N", "D",
          "R", "(", ")", "z", "", "XX", 5]


def _events(doc) -> list:
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        return doc["traceEvents"]
    if isinstance(doc, list):
        return doc
    return []


def _some(events: list, rng: random.Random) -> list[dict]:
    dicts = [e for e in events if isinstance(e, dict)]
    if not dicts:
        return []
    k = rng.choice([1, 1, 3, max(1, len(dicts) // 10), len(dicts)])
    return rng.sample(dicts, min(k, len(dicts)))


def _j_drop_key(doc, rng):
    for e in _some(_events(doc), rng):
        keys = [k for k in EVENT_KEYS if k in e] or list(e)
        if keys:
            e.pop(rng.choice(keys))
    return doc


def _j_wrong_type(doc, rng):
    for e in _some(_events(doc), rng):
        e[rng.choice(EVENT_KEYS)] = odd_value(rng)
    return doc


def _j_wrong_arg(doc, rng):
    for e in _some(_events(doc), rng):
        args = e.get("args")
        if not isinstance(args, dict):
            e["args"] = args = {}
        args[rng.choice(ARG_KEYS)] = odd_value(rng)
    return doc


def _j_bad_times(doc, rng):
    bad = [-1, -(10**12), 10**18, 2**63 - 1, 1e300, float("nan"), float("inf"), -0.5, 1e-9]
    for e in _some(_events(doc), rng):
        e[rng.choice(["ts", "dur"])] = rng.choice(bad)
    return doc


def _j_duplicate(doc, rng):
    ev = _events(doc)
    for e in _some(ev, rng):
        for _ in range(rng.choice([1, 2, 50])):
            ev.insert(rng.randrange(len(ev) + 1), copy.deepcopy(e))
    return doc


def _j_shuffle(doc, rng):
    rng.shuffle(_events(doc))
    return doc


def _j_reverse(doc, rng):
    _events(doc).reverse()
    return doc


def _j_huge_string(doc, rng):
    for e in _some(_events(doc), rng)[:3]:
        e[rng.choice(["name", "cat", "ph", "tid"])] = _huge_string(rng)
    return doc


def _j_phase(doc, rng):
    for e in _some(_events(doc), rng):
        e["ph"] = rng.choice(PHASES)
    return doc


def _j_untrusted_names(doc, rng):
    for e in _some(_events(doc), rng):
        e["name"] = rng.choice(ODD_STRINGS)
    return doc


def _j_top_level(doc, rng):
    ev = _events(doc)
    pick = rng.randrange(7)
    if pick == 0:
        return ev  # JSON Array Format: a bare list of events
    if pick == 1:
        return {"traceEvents": odd_value(rng)}
    if pick == 2:
        return odd_value(rng)
    if pick == 3:
        return {"traceEvents": []}
    if pick == 4 and isinstance(doc, dict):
        doc.pop("traceEvents", None)
        return doc
    if pick == 5 and isinstance(doc, dict):
        for key in [k for k in doc if k != "traceEvents"]:
            doc[key] = odd_value(rng)
        return doc
    return [odd_value(rng) for _ in range(rng.randrange(1, 20))] + ev[:5]


def _j_non_dict_events(doc, rng):
    ev = _events(doc)
    for _ in range(rng.choice([1, 5, 100])):
        ev.insert(rng.randrange(len(ev) + 1), odd_value(rng))
    return doc


JSON_MUTATORS = {
    "drop-key": _j_drop_key, "wrong-type": _j_wrong_type, "wrong-arg": _j_wrong_arg,
    "bad-times": _j_bad_times, "duplicate-events": _j_duplicate, "shuffle-events": _j_shuffle,
    "reverse-events": _j_reverse, "huge-string": _j_huge_string, "odd-phase": _j_phase,
    "untrusted-names": _j_untrusted_names, "top-level": _j_top_level,
    "non-dict-events": _j_non_dict_events,
}


def _deep_nesting(text: bytes, rng: random.Random) -> bytes:
    """Splice a deeply nested array into the first ``"args":`` (or the whole document)."""
    depth = rng.choice([200, 5000, 100_000])
    nest = b"[" * depth + b"1" + b"]" * depth
    pos = text.find(b'"args":')
    if pos < 0:
        return nest
    return text[: pos + 7] + b"{\"deep\": " + nest + b", \"was\": " + text[pos + 7:]


def mutate_json(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Decode, mutate structure (1-3 ops), re-encode; sometimes also damage the bytes."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # not JSON (any more), or nested past Python's limit
        return mutate_bytes(data, rng)
    if rng.random() < 0.08:
        return _deep_nesting(data, rng), "deep-nesting"
    labels = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        name = rng.choice(sorted(JSON_MUTATORS))
        doc = JSON_MUTATORS[name](doc, rng)
        labels.append(name)
    out = json.dumps(doc, allow_nan=True, ensure_ascii=rng.random() < 0.5).encode(
        "utf-8", "surrogatepass")
    if rng.random() < 0.1:
        out, extra = mutate_bytes(out, rng)
        labels.append(extra)
    return out, "+".join(labels)


# -- CSV / text ---------------------------------------------------------------------------

CSV_ODD = ["", "nan", "NaN", "inf", "-inf", "1e400", "-1e308", "-5", "abc", '"', '"a,b"',
           "99999999999999999999999", "0x10", "1.5.5", " 7 ", "\x00", "é", "<i>x</i>"]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def mutate_csv(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Row/field level damage to a CSV or line-oriented text file."""
    lines = _lines(data)
    pick = rng.randrange(9)
    body = list(range(1, len(lines))) or [0]
    if pick == 0:
        for _ in range(rng.choice([1, 5, len(lines) // 2 + 1])):
            i = rng.choice(body)
            if i < len(lines):
                cells = lines[i].split(b",")
                cells[rng.randrange(len(cells))] = rng.choice(CSV_ODD).encode("utf-8")
                lines[i] = b",".join(cells)
        label = "odd-field"
    elif pick == 1:
        i = rng.choice(body)
        if i < len(lines):
            cells = lines[i].split(b",")
            lines[i] = b",".join(cells[: rng.randrange(len(cells) + 1)]
                                 if rng.random() < 0.5 else cells + [b"extra"] * 3)
        label = "ragged-row"
    elif pick == 2:
        cells = lines[0].split(b",")
        if rng.random() < 0.5 and cells:
            cells.pop(rng.randrange(len(cells)))
        else:
            rng.shuffle(cells)
        lines[0] = b",".join(cells)
        label = "header-changed"
    elif pick == 3:
        del lines[0]
        label = "no-header"
    elif pick == 4:
        head, rest = lines[:1], lines[1:]
        rng.shuffle(rest)
        lines = head + rest
        label = "rows-shuffled"
    elif pick == 5:
        extra = [lines[rng.choice(body)] for _ in range(rng.choice([1, 20, 500]))
                 if lines]
        lines = lines + extra
        label = "rows-duplicated"
    elif pick == 6:
        i = rng.choice(body)
        if i < len(lines):
            lines[i] = lines[i] + b"," + _huge_string(rng).encode("utf-8")
        label = "huge-field"
    elif pick == 7:
        return data.replace(b"\n", b"\r\n"), "crlf"
    else:
        lines = lines + [lines[0]] * rng.choice([1, 3])  # repeated header mid-file
        label = "header-repeated"
    return b"\n".join(lines), label


# -- SQLite ----------------------------------------------------------------------------------

def mutate_sqlite(path: Path, rng: random.Random) -> str:
    """Damage a copy of an SQLite database in place through SQL (tables, columns, values)."""
    con = sqlite3.connect(path)
    try:
        return _sql_damage(con, rng)
    except sqlite3.IntegrityError:  # the schema refused the change (NOT NULL, keys)
        return "refused-by-constraint"
    finally:
        con.close()


def _sql_damage(con: sqlite3.Connection, rng: random.Random) -> str:
    """One random schema or value change; returns its label."""
    tables = [r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
    if not tables:
        return "no-tables"
    table = rng.choice(tables)
    cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    pick = rng.randrange(7)
    if pick == 0:
        con.execute(f'DROP TABLE "{table}"')
        label = "drop-table"
    elif pick == 1:
        con.execute(f'DELETE FROM "{table}" WHERE abs(random()) % 3 = 0')
        label = "delete-rows"
    elif pick == 2 and cols:
        col = rng.choice(cols)
        value = rng.choice([None, "abc", -1, -(2**62), 2**62, 1e308, float("nan"), "",
                            b"\xff\xfe", "<script>x</script>", 0.5])
        frac = rng.choice([1, 2, 10])
        con.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE abs(random()) % ? = 0',
                    (value, frac))
        label = "odd-values"
    elif pick == 3 and len(cols) > 1:
        col = rng.choice(cols)
        try:
            con.execute(f'ALTER TABLE "{table}" DROP COLUMN "{col}"')
        except sqlite3.OperationalError:  # a key or indexed column
            con.execute(f'ALTER TABLE "{table}" RENAME COLUMN "{col}" TO "{col}_x"')
        label = "drop-column"
    elif pick == 4:
        try:
            con.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}"')
        except sqlite3.IntegrityError:  # a primary key: duplicate under new keys
            con.execute(f'INSERT OR IGNORE INTO "{table}" SELECT * FROM "{table}"')
            label = "duplicate-rows-key"
        else:
            label = "duplicate-rows"
    elif pick == 5:
        con.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_renamed"')
        label = "rename-table"
    else:
        con.execute(f'DELETE FROM "{table}"')
        label = "empty-table"
    con.commit()
    return label


# -- whole files and folders --------------------------------------------------------------

def is_sqlite(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


def _plain(data: bytes) -> tuple[bytes, bool]:
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data), True
        except (OSError, EOFError, zlib.error):  # an earlier mutation broke it: bytes as is
            pass
    return data, False


def mutate_file(src: Path, dst: Path, rng: random.Random) -> str:
    """Write a mutated copy of file ``src`` at ``dst``; returns the label."""
    if is_sqlite(src):
        shutil.copyfile(src, dst)
        if rng.random() < 0.75:
            return "sqlite:" + mutate_sqlite(dst, rng)
        data, label = mutate_bytes(dst.read_bytes(), rng)
        dst.write_bytes(data)
        return "sqlite-bytes:" + label
    data, was_gz = _plain(src.read_bytes())
    text_kind = data.lstrip()[:1] in (b"{", b"[")
    pick = rng.random()
    if pick < 0.55 and text_kind:
        out, label = mutate_json(data, rng)
    elif pick < 0.55:
        out, label = mutate_csv(data, rng)
    elif pick < 0.85:
        out, label = mutate_bytes(data, rng)
    else:
        out, label = gzip_variant(data, rng)
        dst.write_bytes(out)
        return label
    if was_gz:
        out = gzip.compress(out, compresslevel=1, mtime=0)
    dst.write_bytes(out)
    return label


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def mutate_folder(folder: Path, rng: random.Random) -> str:
    """Damage a copied trace folder in place: files mutated, missing, replaced or added."""
    files = _files(folder)
    pick = rng.randrange(12)
    victim = rng.choice(files) if files else None
    if victim is None or pick == 0:
        (folder / "junk.bin").write_bytes(os.urandom(rng.randrange(1, 3000)))
        return "extra-junk-file"
    if pick <= 3:
        tmp = victim.with_name(victim.name + ".orig")
        victim.rename(tmp)
        label = mutate_file(tmp, victim, rng)
        tmp.unlink()
        return "file:" + label
    if pick == 4:
        victim.unlink()
        return "file-missing"
    if pick == 5:
        for f in files:
            if rng.random() < 0.5:
                f.unlink()
        return "files-missing"
    if pick == 6:
        victim.unlink()
        victim.mkdir()
        return "file-is-folder"
    if pick == 7:
        victim.unlink()
        victim.symlink_to(folder / "does-not-exist")
        return "broken-symlink"
    if pick == 8:
        victim.unlink()
        os.mkfifo(victim)
        return "fifo"
    if pick == 9:
        loop = folder / f"loop{rng.randrange(10**6)}"
        loop.symlink_to(folder, target_is_directory=True)
        return "symlink-loop"
    if pick == 10:
        for f in files:
            f.write_bytes(b"")
        return "all-empty"
    name = rng.choice([b"\xff\xfe-bad-name.json", b"rank-9.pt.trace.json", b"x.csv", b".hidden"])
    (folder / os.fsdecode(name)).write_bytes(victim.read_bytes()[: rng.randrange(1, 2000)])
    return "extra-partial-file"


def make_case(seed: Path, out_dir: Path, rng: random.Random) -> tuple[Path, str]:
    """A mutated copy of ``seed`` (file or folder) under ``out_dir``; returns (path, label)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dst = out_dir / seed.name
    if seed.is_dir():
        shutil.copytree(seed, dst, symlinks=True)
        for p in dst.rglob("*"):
            if p.is_file():
                p.chmod(0o644)
        label = mutate_folder(dst, rng)
        if rng.random() < 0.2:
            label += "+" + mutate_folder(dst, rng)
        return dst, label
    return dst, mutate_file(seed, dst, rng)
