"""Deterministic UK-postcode-like sample data (postcode, latitude, longitude) for the demo and tests."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

AREAS = [
    "AB",
    "AL",
    "B",
    "BA",
    "BB",
    "BD",
    "BH",
    "BL",
    "BN",
    "BR",
    "BS",
    "BT",
    "CA",
    "CB",
    "CF",
    "CH",
    "CM",
    "CO",
    "CR",
    "CT",
    "CV",
    "CW",
    "DA",
    "DD",
    "DE",
    "DG",
    "DH",
    "DL",
    "DN",
    "DT",
    "DY",
    "E",
    "EC",
    "EH",
    "EN",
    "EX",
    "FK",
    "FY",
    "G",
    "GL",
    "GU",
    "HA",
    "HD",
    "HG",
    "HP",
    "HR",
    "HS",
    "HU",
    "HX",
    "IG",
    "IP",
    "IV",
    "KA",
    "KT",
    "KW",
    "KY",
    "L",
    "LA",
    "LD",
    "LE",
    "LL",
    "LN",
    "LS",
    "LU",
    "M",
    "ME",
    "MK",
    "ML",
    "N",
    "NE",
    "NG",
    "NN",
    "NP",
    "NR",
    "NW",
    "OL",
    "OX",
    "PA",
    "PE",
    "PH",
    "PL",
    "PO",
    "PR",
    "RG",
    "RH",
    "RM",
    "S",
    "SA",
    "SE",
    "SG",
    "SK",
    "SL",
    "SM",
    "SN",
    "SO",
    "SP",
    "SR",
    "SS",
    "ST",
    "SW",
    "SY",
    "TA",
    "TD",
    "TF",
    "TN",
    "TQ",
    "TR",
    "TS",
    "TW",
    "UB",
    "W",
    "WA",
    "WC",
    "WD",
    "WF",
    "WN",
    "WR",
    "WS",
    "WV",
    "YO",
    "ZE",
]
INWARD_LETTERS = "ABDEFGHJLNPQRSTUWXYZ"  # the letters Royal Mail uses in the inward code


def postcodes(rows: int, seed: int = 1) -> Iterator[tuple[str, str, str]]:
    """`rows` distinct postcodes with plausible coordinates, the same for the same seed."""
    rng = random.Random(seed)
    seen: set[str] = set()
    while len(seen) < rows:
        area = rng.choice(AREAS)
        code = (
            f"{area}{rng.randint(1, 99)} {rng.randint(0, 9)}"
            f"{rng.choice(INWARD_LETTERS)}{rng.choice(INWARD_LETTERS)}"
        )
        if code in seen:
            continue
        seen.add(code)
        yield code, f"{rng.uniform(49.9, 60.8):.6f}", f"{rng.uniform(-8.6, 1.8):.6f}"


def write_csv(path: Path, rows: int, seed: int = 1, header: bool = True) -> Path:
    with path.open("w", encoding="utf-8", newline="") as out:
        if header:
            out.write("postcode,latitude,longitude\n")
        for code, lat, lon in postcodes(rows, seed):
            out.write(f"{code},{lat},{lon}\n")
    return path
