"""A port of pve-common's ``PVE::JSONSchema`` checks (check_prop, check_object, check_type,
check_format, parse_property_string), with PVE's error wording.

Values arrive as PVE sees them: strings (form or query), lists (repeated keys), or JSON values
(a JSON body).  Errors are collected in a dict ``{path: message}`` exactly like PVE's
``add_error``; named formats come from :mod:`.formats`, and a format the fake does not know
raises :class:`~.schema.SchemaError` (PVE itself dies with "undefined format")."""

from __future__ import annotations

import re
from typing import Any, Callable

from .schema import SchemaError, indexed_schema

NOT_IN_SCHEMA = "property is not defined in schema and the schema does not allow additional properties"
MISSING = "property is missing and it is not optional"
KNOWN_KEYWORDS = {
    "type", "optional", "default", "description", "verbose_description", "typetext", "format",
    "format_description", "enum", "minimum", "maximum", "maxLength", "minLength", "pattern",
    "properties", "additionalProperties", "items", "requires", "title", "alias", "default_key",
    "renderer", "links", "keyAlias", "print_width", "instance-types", "type-property",
}


class FormatDie(Exception):
    """A Perl ``die`` inside a format check: the message keeps PVE's trailing newline."""

    def __init__(self, message: str, errors: dict | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors or {}

    def perl_string(self) -> str:
        """How PVE::Exception stringifies: message, then ``path: error`` lines."""
        msg = self.message if self.message.endswith("\n") else self.message + "\n"
        for k, v in self.errors.items():
            msg += f"{k}: {v}\n"
        return msg


def truthy(v: Any) -> bool:
    """Perl truth of a schema flag (1, "1", true)."""
    return v not in (None, 0, "0", "", False)


def perl_str(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def is_number(v: str) -> bool:
    return re.fullmatch(r"[+-]?(\d+\.\d+|\d+\.|\.\d+|\d+)([eE][+-]?\d+)?", v) is not None


def is_integer(v: str) -> bool:
    return re.fullmatch(r"[+-]?\d+", v) is not None


def perl_regex(pattern: str) -> str:
    """Perl regex text as exported by PVE -> Python: ``(?^:`` / ``(?^i:`` flag groups."""
    out = pattern.replace("(?^:", "(?:")
    out = re.sub(r"\(\?\^([a-z]+):", r"(?\1:", out)
    return out


def add_error(errors: dict, path: str, msg: str) -> None:
    path = path or "_root"
    if errors.get(path):
        errors[path] = errors[path] + "\\n" + msg  # sic: PVE joins with a literal backslash-n
    else:
        errors[path] = msg


class Checker:
    """Checks values against schemas; ``formats`` maps a named format to a validator
    (a callable raising FormatDie) or to a dict (a property-string format)."""

    def __init__(self, formats: dict[str, Any], validators: dict[str, Callable] | None = None) -> None:
        self.formats = formats
        self.validators = validators or {}

    # ---- types ---------------------------------------------------------------------------

    def check_type(self, path: str, typ: Any, value: Any, errors: dict) -> bool:
        if not typ:
            return True
        if isinstance(typ, (list, dict)):
            raise SchemaError(f"{path}: union/object types are not supported by the fake")
        if typ == "any":
            return True
        if typ == "null":
            if value is not None:
                add_error(errors, path, f"type check ('{typ}') failed - value is not null")
                return False
            return True
        if typ == "array":
            if not isinstance(value, list):
                add_error(errors, path, f"type check ('{typ}') failed")
                return False
            return True
        if typ == "object":
            if not isinstance(value, dict):
                add_error(errors, path, f"type check ('{typ}') failed")
                return False
            return True
        if isinstance(value, (list, dict)):
            add_error(errors, path, f"type check ('{typ}') failed - got {'ARRAY' if isinstance(value, list) else 'HASH'}")
            return False
        if isinstance(value, bool):  # a JSON true/false
            if typ == "boolean":
                return True
            add_error(errors, path, f"type check ('{typ}') failed - got JSON::PP::Boolean")
            return False
        text = perl_str(value)
        if typ == "string":
            return True
        if typ == "boolean":
            if text in ("0", "1"):
                return True
            add_error(errors, path, f"type check ('{typ}') failed - got '{text}'")
            return False
        if typ == "integer":
            if not is_integer(text):
                add_error(errors, path, f"type check ('{typ}') failed - got '{text}'")
                return False
            return True
        if typ == "number":
            if not is_number(text):
                add_error(errors, path, f"type check ('{typ}') failed - got '{text}'")
                return False
            return True
        return True

    # ---- properties ----------------------------------------------------------------------

    def check_prop(self, value: Any, schema: Any, path: str, errors: dict) -> None:
        if not isinstance(schema, dict):
            add_error(errors, path, "Invalid schema definition.")
            return
        unknown = set(schema) - KNOWN_KEYWORDS
        if unknown & {"oneOf", "allOf", "extends", "disallow", "patternProperties", "type-property-schema"}:
            raise SchemaError(f"{path}: schema keyword(s) {sorted(unknown)} not supported by the fake")
        if schema.get("alias"):
            return
        if value is None:
            if schema.get("type") == "null":
                return
            if not truthy(schema.get("optional")) and not truthy(schema.get("group")):
                add_error(errors, path, MISSING)
            return
        if not self.check_type(path, schema.get("type"), value, errors):
            return
        if isinstance(value, list):
            items = schema.get("items")
            if items:
                if isinstance(items, list):
                    raise SchemaError(f"{path}: tuple 'items' not supported")
                for i, el in enumerate(value):
                    self.check_prop(el, items, f"{path}[{i}]", errors)
            return
        if isinstance(value, dict):
            if schema.get("properties") is not None or schema.get("additionalProperties") is not None:
                self.check_object(path, schema.get("properties") or {}, value, schema.get("additionalProperties"), errors)
            return
        text = perl_str(value)
        fmt = schema.get("format")
        if fmt:
            try:
                self.check_format(fmt, text, path)
            except FormatDie as exc:
                add_error(errors, path, "invalid format - " + exc.perl_string())
                return
        pattern = schema.get("pattern")
        if pattern:
            if re.fullmatch(f"(?:{perl_regex(pattern)})", text) is None:
                add_error(errors, path, "value does not match the regex pattern")
                return
        if schema.get("maxLength") is not None and len(text) > int(schema["maxLength"]):
            add_error(errors, path, f"value may only be {schema['maxLength']} characters long")
            return
        if schema.get("minLength") is not None and len(text) < int(schema["minLength"]):
            add_error(errors, path, f"value must be at least {schema['minLength']} characters long")
            return
        if is_number(text):
            num = float(text)
            if schema.get("maximum") is not None and num > float(schema["maximum"]):
                add_error(errors, path, f"value must have a maximum value of {schema['maximum']}")
                return
            if schema.get("minimum") is not None and num < float(schema["minimum"]):
                add_error(errors, path, f"value must have a minimum value of {schema['minimum']}")
                return
        enum = schema.get("enum")
        if enum and text not in [perl_str(e) for e in enum]:
            add_error(errors, path, f"value '{text}' does not have a value in the enumeration '{', '.join(perl_str(e) for e in enum)}'")

    def check_object(self, path: str, schema: dict, value: Any, additional: Any, errors: dict) -> None:
        if not isinstance(schema, dict):
            add_error(errors, path, "Invalid schema definition.")
            return
        if not isinstance(value, dict):
            add_error(errors, path, "an object is required")
            return
        for k in list(value):  # aliases -> canonical keys
            sub = schema.get(k)
            if sub and sub.get("alias"):
                target = sub["alias"]
                if value.get(target) is not None:
                    add_error(errors, f"{path}.{k}" if path else k, f"cannot set both '{k}' and its alias target '{target}'")
                else:
                    value[target] = value.pop(k)
        for k, sub in schema.items():
            if k.endswith("[n]"):
                continue
            self.check_prop(value.get(k), sub, f"{path}.{k}" if path else k, errors)
        for k in value:
            newpath = f"{path}.{k}" if path else k
            sub = schema.get(k)
            if sub is None:
                sub = indexed_schema(schema, k)
                if sub is not None:
                    self.check_prop(value[k], sub, newpath, errors)
            if sub is not None:
                req = sub.get("requires")
                if req:
                    if isinstance(req, str):
                        if value.get(req) is None:
                            add_error(errors, f"{path}.{req}" if path else req, f"missing property required by '{newpath}'")
                    else:
                        raise SchemaError(f"{newpath}: schema 'requires' objects are not supported")
                continue
            if additional is not None and not truthy(additional):
                add_error(errors, newpath, NOT_IN_SCHEMA)
                continue
            if isinstance(additional, dict):
                self.check_prop(value[k], additional, newpath, errors)

    # ---- formats -------------------------------------------------------------------------

    def check_format(self, fmt: Any, value: str, path: str) -> Any:
        if isinstance(fmt, dict):
            return self.parse_property_string(fmt, value, path)
        if fmt == "regex":
            try:
                re.compile(perl_regex(value))
            except re.error as exc:
                raise FormatDie(f"invalid regex: {exc}\n") from None
            return value
        m = re.fullmatch(r"(.*?)(?:-(list|opt))?", fmt)
        name, kind = m.group(1), m.group(2) or "none"
        registered = self.formats.get(name)
        if registered is None:
            # PVE: die "undefined format '$format'" -- here it is the fake that does not know it
            raise SchemaError(f"{path}: named format '{fmt}' is not implemented by the fake PVE")
        if kind != "none" and isinstance(registered, dict):
            raise FormatDie(f"'-{kind}' format must have code ref, not hash\n")
        if kind == "list":
            return [registered(v) for v in split_list(value)]
        if kind == "opt":
            return registered(value) if value else None
        if isinstance(registered, dict):
            return self.parse_property_string(name, value, path)
        return registered(value)

    def parse_property_string(self, fmt: Any, data: str, path: str = "", additional: Any = 0) -> dict:
        validator = None
        if isinstance(fmt, str):
            reg = self.formats.get(fmt)
            if reg is None:
                raise SchemaError(f"{path}: named format '{fmt}' is not implemented by the fake PVE")
            if not isinstance(reg, dict):
                raise FormatDie("parse_property_string only accepts hash based named formats\n")
            validator = self.validators.get(fmt)
            fmt = reg
        res: dict[str, Any] = {}
        default_key = None
        for part in data.split(","):
            if re.fullmatch(r"\s*", part):
                continue
            kv = re.fullmatch(r"([^=]+)=(.+)", part, re.S)
            if kv:
                k, v = kv.group(1), kv.group(2)
                if res.get(k) is not None:
                    raise FormatDie(f"duplicate key in comma-separated list property: {k}\n")
                sub = fmt.get(k) or {}
                if sub.get("alias"):
                    k = sub["alias"]
                    sub = fmt.get(k)
                    if res.get(k) is not None:
                        raise FormatDie(f"key '{k}' is already defined (via alias)\n")
                if not sub:
                    raise FormatDie(f"invalid key in comma-separated list property: {k}\n")
                if sub.get("type") == "boolean":
                    v = parse_boolean(v, v)
                res[k] = v
            elif "=" not in part:
                if default_key:
                    raise FormatDie(f"duplicate key in comma-separated list property: {default_key}\n")
                for key, sub in fmt.items():
                    if truthy(sub.get("default_key")):
                        default_key = key
                        if not truthy(res.get(key)):
                            res[key] = parse_boolean(part, part) if sub.get("type") == "boolean" else part
                            break
                        raise FormatDie(f"duplicate key in comma-separated list property: {default_key}\n")
                if not default_key:
                    raise FormatDie("value without key, but schema does not define a default key\n")
            else:
                raise FormatDie("missing key in comma-separated list property\n")
        errors: dict = {}
        self.check_object(path, fmt, res, additional, errors)
        if errors:
            raise FormatDie("format error\n", errors)
        if validator is not None:
            return validator(res)
        return res


def parse_boolean(v: str, default: Any = None) -> Any:
    if re.fullmatch(r"(1|on|yes|true)", v, re.I):
        return 1
    if re.fullmatch(r"(0|off|no|false)", v, re.I):
        return 0
    return default


def split_list(text: str) -> list[str]:
    """PVE::Tools::split_list: NUL-separated, else ',' ';' and whitespace."""
    text = text or ""
    if "\0" in text:
        return text.split("\0")
    text = re.sub(r"[,;]", " ", text).lstrip()
    return [p for p in re.split(r"\s+", text) if p != ""] if text else []


def format_size(size: int) -> str:
    """PVE::JSONSchema::format_size (bytes -> 8G, 512M, ...)."""
    size = int(size)
    kb, rem = divmod(size, 1024)
    if rem:
        return str(size)
    mb, rem = divmod(kb, 1024)
    if rem:
        return f"{kb}K"
    gb, rem = divmod(mb, 1024)
    if rem:
        return f"{mb}M"
    tb, rem = divmod(gb, 1024)
    if rem:
        return f"{gb}G"
    return f"{tb}T"


def parse_size(value: str) -> int | None:
    m = re.fullmatch(r"(\d+(\.\d+)?)([KMGT](?:iB)?)?", value)
    if not m:
        return None
    size = float(m.group(1))
    unit = (m.group(3) or "")[:1]
    size *= {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}[unit]
    return int(size)


def print_property_string(data: dict, fmt: dict) -> str:
    """PVE::JSONSchema::print_property_string: default key first, required keys, then the
    rest, each sorted; disk-size values printed with format_size."""
    default_key = next((k for k, s in fmt.items() if truthy(s.get("default_key"))), None)
    out: list[str] = []
    done: set[str] = set()

    def add(key: str, is_default: bool = False) -> None:
        if key in done or data.get(key) is None:
            done.add(key)
            return
        done.add(key)
        sub = fmt.get(key) or {}
        value = data[key]
        text = format_size(value) if sub.get("format") == "disk-size" and not isinstance(value, str) else perl_str(value)
        out.append(text if is_default else f"{key}={text}")

    if default_key:
        add(default_key, True)
    for k in sorted(data):
        if not truthy((fmt.get(k) or {}).get("optional")):
            add(k)
    for k in sorted(data):
        add(k)
    return ",".join(out)
