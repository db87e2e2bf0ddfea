"""``cryptsetup benchmark``: the crypto ceiling LUKS cannot exceed, per CPU model."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import CommandError
from ..transport.base import Transport

_UNIT = {"KiB/s": 1 / 1024, "MiB/s": 1.0, "GiB/s": 1024.0}


@dataclass(frozen=True)
class CryptoFigure:
    cipher: str
    key_bits: int
    encrypt_mib_s: float | None
    decrypt_mib_s: float | None
    error: str | None = None


def benchmark_argv(cipher: str, key_bits: int) -> list[str]:
    return ["cryptsetup", "benchmark", "--cipher", cipher, "--key-size", str(key_bits)]


def parse_benchmark(text: str) -> tuple[float | None, float | None] | None:
    """(encrypt, decrypt) MiB/s from cryptsetup's table line ("N/A" -> None); None if absent."""
    for line in text.splitlines():
        tokens = line.split()
        if len(tokens) < 4 or line.lstrip().startswith("#") or not re.fullmatch(r"\d+b", tokens[1]):
            continue
        values: list[float | None] = []
        rest = tokens[2:]
        while rest and len(values) < 2:
            if rest[0] == "N/A":
                values.append(None)
                rest = rest[1:]
            elif len(rest) >= 2:
                values.append(_value(rest[0], rest[1]))
                rest = rest[2:]
            else:
                break
        if len(values) == 2:
            return values[0], values[1]
    return None


def _value(number: str, unit: str) -> float | None:
    try:
        return float(number) * _UNIT[unit]
    except (ValueError, KeyError):
        return None


def run_benchmarks(side: Transport, ciphers: tuple[tuple[str, int], ...]) -> list[CryptoFigure]:
    out = []
    for cipher, bits in ciphers:
        try:
            res = side.run(benchmark_argv(cipher, bits), timeout=300, check=False)
        except CommandError as exc:
            out.append(CryptoFigure(cipher, bits, None, None, str(exc)))
            continue
        parsed = parse_benchmark(res.stdout)
        if res.returncode != 0 or parsed is None:
            reason = (res.stderr or res.stdout).strip().splitlines()
            out.append(CryptoFigure(cipher, bits, None, None, " ".join(reason[-2:]) or f"exit {res.returncode}"))
        else:
            out.append(CryptoFigure(cipher, bits, parsed[0], parsed[1]))
    return out
