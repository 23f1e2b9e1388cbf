"""Checks samples of a schema's grammar with a reference validator.

    schema_genfuzz.py SCHEMA.json < SAMPLES

SAMPLES: texts each followed by a NUL byte (tests/schema_genfuzz.c). Each
must be one JSON text that the schema accepts (python3-jsonschema, with
format checks: the library's, and, for the formats it leaves unchecked
without optional packages, checks written here from RFC 3339, RFC 1123,
RFC 3986 and RFC 4648). Exit 1, printing the first failing samples, if any
is not; 0 otherwise. Run with /usr/bin/python3 (Debian's jsonschema).
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
        schema = json.load(f)
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
