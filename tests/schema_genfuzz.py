"""Checks samples of a schema's grammar with a reference validator.

    schema_genfuzz.py SCHEMA.json < SAMPLES

SAMPLES: texts each followed by a NUL byte (tests/schema_genfuzz.c). Each
must be one JSON text that the schema accepts (python3-jsonschema, with
format checks: the library's, and, for the formats it leaves unchecked
without optional packages, checks written here from RFC 3339, RFC 1123,
RFC 3986 and RFC 4648). Exit 1, printing the first failing samples, if any
is not; 0 otherwise. Run with /usr/bin/python3 (Debian's jsonschema).

The schema's `pattern` and `patternProperties` regexes are ECMA-262 (JSON
Schema's dialect), which the library hands to Python's `re` as they are.
They are rewritten first (ecma_to_python) where the two differ: `$`
matches before a final newline in Python only, `.` excludes only `\n`
there (ECMA-262: every line terminator), and `\d`, `\w`, `\s` are
Unicode-aware there (ECMA-262: ASCII digits and word characters, its own
list of white space). Without this, a key such as "a\n" under
`patternProperties` `^\S+$` is judged against the wrong subschema.
"""

import base64
import binascii
import json
import re
import sys

import jsonschema

_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_TIME = re.compile(
    r"^(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2}))$")
_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_UNRES = r"A-Za-z0-9\-._~"
_SUBD = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRES}{_SUBD}:@]|{_PCT})"
_H16 = r"[0-9A-Fa-f]{1,4}"
_V4 = r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_LS32 = rf"(?:{_H16}:{_H16}|{_V4})"
_V6 = ("(?:"
       rf"(?:{_H16}:){{6}}{_LS32}|::(?:{_H16}:){{5}}{_LS32}|"
       rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}|"
       rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}|"
       rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}|"
       rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}|"
       rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}|"
       rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}|"
       rf"(?:(?:{_H16}:){{0,6}}{_H16})?::)")
_AUTH = (rf"(?:(?:[{_UNRES}{_SUBD}:]|{_PCT})*@)?"
         rf"(?:\[(?:{_V6}|v[0-9A-Fa-f]+\.[{_UNRES}{_SUBD}:]+)\]"
         rf"|(?:[{_UNRES}{_SUBD}]|{_PCT})*)(?::\d*)?")
_ABEMPTY = rf"(?:/{_PCHAR}*)*"
_QF = (rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?")
_HIER = rf"(?://{_AUTH}{_ABEMPTY}|/(?:{_PCHAR}+{_ABEMPTY})?|{_PCHAR}+{_ABEMPTY})?"
_REL = (rf"(?://{_AUTH}{_ABEMPTY}|/(?:{_PCHAR}+{_ABEMPTY})?"
        rf"|(?:[{_UNRES}{_SUBD}@]|{_PCT})+{_ABEMPTY})?")
_URI = re.compile(rf"^[A-Za-z][A-Za-z0-9+.\-]*:{_HIER}{_QF}$")
_URIREF = re.compile(rf"^(?:[A-Za-z][A-Za-z0-9+.\-]*:{_HIER}|{_REL}){_QF}$")

checker = jsonschema.FormatChecker()

# ECMA-262 white space and line terminators, as a class body.
_ECMA_WS = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_OUT = {"d": "[0-9]", "D": "[^0-9]", "w": "[0-9A-Za-z_]", "W": "[^0-9A-Za-z_]",
        "s": f"[{_ECMA_WS}]", "S": f"[^{_ECMA_WS}]"}
_IN = {"d": "0-9", "w": "0-9A-Za-z_", "s": _ECMA_WS}


def ecma_to_python(p):
    """The ECMA-262 regex p (no flags) as a Python `re` pattern with the
    same meaning for the escapes and anchors above. `\\D`, `\\W`, `\\S`
    inside a class keep Python's meaning (none in the corpus)."""
    out = []
    i, in_class = 0, False
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            e = p[i + 1]
            table = _IN if in_class else _OUT
            out.append(table.get(e, c + e))
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            out.append(c)
        elif p.startswith("[]", i):
            out.append("(?!)")  # ECMA-262: the empty class
            i += 2
            continue
        elif p.startswith("[^]", i):
            out.append(r"[\s\S]")  # ECMA-262: any character
            i += 3
            continue
        elif c == "[":
            in_class = True
            out.append(c)
            if p[i + 1:i + 2] == "^":  # a leading `^` negates, never ends it
                out.append("^")
                i += 1
        elif c == "$":
            out.append(r"\Z")
        elif c == ".":
            out.append(r"[^\n\r\u2028\u2029]")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def ecma_schema(s):
    """The schema s with every pattern rewritten by ecma_to_python (values
    of const, enum, default and examples left as they are)."""
    if isinstance(s, list):
        return [ecma_schema(x) for x in s]
    if not isinstance(s, dict):
        return s
    r = {}
    for k, v in s.items():
        if k == "pattern" and isinstance(v, str):
            r[k] = ecma_to_python(v)
        elif k == "patternProperties" and isinstance(v, dict):
            r[k] = {ecma_to_python(pk): ecma_schema(pv) for pk, pv in v.items()}
        elif k in ("const", "enum", "default", "examples"):
            r[k] = v
        elif k in ("properties", "$defs", "definitions", "dependentSchemas"):
            r[k] = ({pk: ecma_schema(pv) for pk, pv in v.items()}
                    if isinstance(v, dict) else v)
        else:
            r[k] = ecma_schema(v)
    return r


def _leap(y):
    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)


@checker.checks("date")
def _is_date(s):
    if not isinstance(s, str):
        return True
    m = _DATE.match(s)
    if not m:
        return False
    y, mo, d = map(int, m.groups())
    days = [31, 29 if _leap(y) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    return 1 <= mo <= 12 and 1 <= d <= days[mo - 1]


@checker.checks("time")
def _is_time(s):
    if not isinstance(s, str):
        return True
    m = _TIME.match(s)
    if not m:
        return False
    h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3))
    oh = int(m.group(7) or 0)
    om = int(m.group(8) or 0)
    if h > 23 or mi > 59 or sec > 60 or oh > 23 or om > 59:
        return False
    if sec == 60:  # the last second of a UTC day only
        sign = -1 if m.group(6) == "+" else 1
        utc = (h * 60 + mi + sign * (oh * 60 + om)) % (24 * 60)
        return utc == 23 * 60 + 59
    return True


@checker.checks("date-time")
def _is_date_time(s):
    if not isinstance(s, str):
        return True
    parts = re.split("[Tt]", s)
    return len(parts) == 2 and _is_date(parts[0]) and _is_time(parts[1])


@checker.checks("hostname")
def _is_hostname(s):
    if not isinstance(s, str):
        return True
    return (0 < len(s.encode()) <= 253
            and all(_LABEL.match(x) for x in s.split(".")))


@checker.checks("uri")
def _is_uri(s):
    return not isinstance(s, str) or bool(_URI.match(s))


@checker.checks("uri-reference")
def _is_uri_reference(s):
    return not isinstance(s, str) or bool(_URIREF.match(s))


@checker.checks("byte")
def _is_byte(s):
    if not isinstance(s, str):
        return True
    try:
        base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(s) % 4 == 0


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        schema = ecma_schema(json.load(f))
    cls = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft202012Validator)
    validator = cls(schema, format_checker=checker)
    data = sys.stdin.buffer.read()
    bad = 0
    total = 0
    for raw in data.split(b"\0")[:-1]:
        total += 1
        try:
            inst = json.loads(raw.decode("utf-8"))
        except ValueError as e:
            bad += 1
            print(f"NOT JSON ({e}): {raw!r}")
            continue
        errs = list(validator.iter_errors(inst))
        if errs:
            bad += 1
            print(f"INVALID ({errs[0].message[:200]}): {raw!r}")
        if bad >= 5:
            break
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
