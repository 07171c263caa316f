"""Row generators for the four large stand-ins: text in each original file's exact format.

Each generator turns a seeded numpy Generator and a row count into lines of text, chunk by chunk,
so a file of any length is written with bounded memory. What each keeps from the original file:

* HIGGS.csv.gz: 29 comma-separated numbers printed as `%.18e` of float32 values, label first
  (1.0 signal / 0.0 background, 53 % signal); 21 kinematic features (transverse momenta,
  pseudorapidities, azimuths, b-tags on the file's three values) and 7 invariant masses. The
  label shifts the b-tags, jet momenta and four of the masses, so a model learns something.
* Poker Hand: five cards (suit 1-4, rank 1-13, distinct cards) and the hand's class 0-9 computed
  by the poker rules, CRLF line ends as in the UCI files. Rare hands (four of a kind, straight
  flush, royal flush, ...) are planted a few times per file, as the UCI training file has them,
  so every class level exists at any size.
* covtype.data.gz: 10 integer measurements in the UCI ranges, one-hot wilderness area (4) and
  soil type (40), cover type 1-7 in the UCI class proportions; the measurements and the one-hot
  columns depend on the class.
* census-income.{data,test}.gz: 42 fields separated by ", ", the levels of census-income.names,
  '?' for missing values, the instance weight with two decimals, labels "- 50000." / "50000+."
  (about 6 % positive) from a fixed logistic function of age, education, sex, work and capital.

The distributions that define each synthetic world (class-conditional probabilities) come from a
fixed internal seed; `--seed` only changes the draws. Nothing here reads the real files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from benchmarks.scale import census_levels

__all__ = ["FilePart", "GENERATORS", "LineGenerator", "poker_hand_class"]

_WORLD_SEED = 20240613  # fixed: the stand-ins' class-conditional structure never changes


@dataclass(frozen=True)
class FilePart:
    """Which rows of which file a chunk is: generators plant rare rows at a file's start."""

    file_index: int
    file_rows: int
    start: int  # first row of this chunk within the file


LineGenerator = Callable[[np.random.Generator, int, FilePart], str]


# ----------------------------------------------------------------------------------------------
# HIGGS

_BTAG_VALUES = np.array([0.0, 1.0865380764007568, 2.1730761528015137])  # the file's three b-tag values
_PHI_LIMIT = 1.7433  # azimuths are scaled to about [-1.743, 1.743] in the UCI file
_HIGGS_FORMAT = ",".join(["%.18e"] * 29)


def _lognormal(rng: np.random.Generator, mu: np.ndarray | float, sigma: np.ndarray | float, n: int) -> np.ndarray:
    return np.exp(rng.normal(mu, sigma, n))


def higgs_lines(rng: np.random.Generator, n: int, part: FilePart) -> str:
    """n rows of HIGGS.csv: label, 21 low-level features, 7 high-level masses."""
    signal = rng.random(n) < 0.5299
    s = signal.astype(np.float64)
    columns = [s]
    lepton_pt = _lognormal(rng, -0.12, 0.45, n)
    columns += [lepton_pt, np.clip(rng.normal(0.0, 1.0, n), -2.434, 2.434), rng.uniform(-_PHI_LIMIT, _PHI_LIMIT, n)]
    columns += [_lognormal(rng, -0.1 + 0.05 * s, 0.55, n), rng.uniform(-_PHI_LIMIT, _PHI_LIMIT, n)]
    jet_pts = []
    for jet in range(4):
        pt = _lognormal(rng, -0.05 - 0.1 * jet + 0.08 * s, 0.45, n)
        jet_pts.append(pt)
        p_btag = np.where(signal[:, None], (0.42, 0.13, 0.45), (0.58, 0.14, 0.28))
        btag = _BTAG_VALUES[(rng.random(n)[:, None] > np.cumsum(p_btag, axis=1)).sum(axis=1)]
        columns += [pt, np.clip(rng.normal(0.0, 1.0, n), -2.97, 2.97), rng.uniform(-_PHI_LIMIT, _PHI_LIMIT, n), btag]
    log_pair = 0.5 * (np.log(jet_pts[0]) + np.log(jet_pts[1]))
    columns += [
        np.exp(0.4 * log_pair + rng.normal(0.0, 0.3, n)),  # m_jj
        _lognormal(rng, 0.0 + 0.04 * s, 0.3 - 0.1 * s, n),  # m_jjj
        _lognormal(rng, 0.0, 0.12 + 0.1 * (1 - s), n),  # m_lv
        _lognormal(rng, 0.02 + 0.05 * s, 0.3, n),  # m_jlv
        _lognormal(rng, 0.0 - 0.03 * s, 0.45 - 0.2 * s, n),  # m_bb
        _lognormal(rng, 0.0 - 0.05 * s, 0.35 - 0.12 * s, n),  # m_wbb
        _lognormal(rng, 0.0 - 0.08 * s, 0.35 - 0.12 * s, n),  # m_wwbb
    ]
    values = np.column_stack(columns).astype(np.float32).astype(np.float64)  # the file holds float32 values
    return "".join(_HIGGS_FORMAT % tuple(row) + "\n" for row in values.tolist())


# ----------------------------------------------------------------------------------------------
# Poker Hand

_ROYAL = (1, 10, 11, 12, 13)


def poker_hand_class(suits: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """The poker hand (0 nothing ... 9 royal flush) of each row of five cards, as the UCI file codes it."""
    n = len(ranks)
    counts = np.zeros((n, 14), dtype=np.int8)
    np.add.at(counts, (np.arange(n)[:, None], ranks), 1)
    ordered = -np.sort(-counts, axis=1)
    top, second = ordered[:, 0], ordered[:, 1]
    flush = (suits == suits[:, :1]).all(axis=1)
    distinct = top == 1
    span = ranks.max(axis=1) - ranks.min(axis=1)
    royal_ranks = np.all(np.sort(ranks, axis=1) == np.array(_ROYAL), axis=1)
    straight = distinct & ((span == 4) | royal_ranks)
    hand = np.zeros(n, dtype=np.int64)
    hand[top == 2] = 1
    hand[(top == 2) & (second == 2)] = 2
    hand[top == 3] = 3
    hand[straight] = 4
    hand[flush & ~straight] = 5
    hand[(top == 3) & (second == 2)] = 6
    hand[top == 4] = 7
    hand[straight & flush] = 8
    hand[royal_ranks & flush] = 9
    return hand


def _deal(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n hands of five distinct cards: (suits, ranks), each (n, 5), values from 1."""
    cards = np.argsort(rng.random((n, 52)), axis=1)[:, :5]
    return cards // 13 + 1, cards % 13 + 1


def _planted_hand(rng: np.random.Generator, hand: int) -> tuple[list[int], list[int]]:
    """One hand of a rare class (4-9), built directly (rejection sampling would take millions)."""
    suit = int(rng.integers(1, 5))
    others = [s for s in range(1, 5) if s != suit]
    if hand == 9:
        ranks, suits = list(_ROYAL), [suit] * 5
    elif hand == 8:
        low = int(rng.integers(1, 10))
        ranks, suits = list(range(low, low + 5)), [suit] * 5
    elif hand == 7:
        rank, kicker = rng.choice(np.arange(1, 14), 2, replace=False).tolist()
        ranks, suits = [rank] * 4 + [kicker], [1, 2, 3, 4, suit]
    elif hand == 6:
        three, two = rng.choice(np.arange(1, 14), 2, replace=False).tolist()
        pair_suits = rng.choice(4, 2, replace=False) + 1
        ranks, suits = [three] * 3 + [two] * 2, others + pair_suits.tolist()
    elif hand == 5:
        while True:
            ranks = sorted(rng.choice(np.arange(1, 14), 5, replace=False).tolist())
            if ranks[-1] - ranks[0] != 4 and ranks != list(_ROYAL):
                break
        suits = [suit] * 5
    elif hand == 4:
        low = int(rng.integers(1, 11))
        ranks = [1 if r == 14 else r for r in range(low, low + 5)]
        suits = others[:2] + [suit] * 3
    else:
        raise ValueError(f"hand class {hand} is not planted")
    order = rng.permutation(5)
    return [suits[i] for i in order], [ranks[i] for i in order]


def _planted_count(file_rows: int) -> int:
    """Planted hands per rare class: 5 in a file the size of the UCI training file, >= 1 always."""
    return max(1, min(5, file_rows // 5000))


def poker_lines(rng: np.random.Generator, n: int, part: FilePart) -> str:
    """n rows of poker-hand-*.data: S1,C1,...,S5,C5,CLASS with CRLF line ends."""
    suits, ranks = _deal(rng, n)
    if part.start == 0:
        planted = [hand for hand in range(9, 3, -1) for _ in range(_planted_count(part.file_rows))]
        for row, hand in enumerate(planted[:n]):
            suits[row], ranks[row] = _planted_hand(rng, hand)
    hand = poker_hand_class(suits, ranks)
    table = np.empty((n, 11), dtype=np.int64)
    table[:, 0:10:2], table[:, 1:10:2], table[:, 10] = suits, ranks, hand
    return "".join(",".join(map(str, row)) + "\r\n" for row in table.tolist())


# ----------------------------------------------------------------------------------------------
# Forest cover type

_COVER_SHARE = np.array([211840, 283301, 35754, 2747, 9493, 17367, 20510], dtype=np.float64)
_COVER_ELEVATION = ((3128, 157), (2920, 190), (2394, 196), (2223, 102), (2787, 96), (2419, 188), (3361, 106))
_COVER_WILDERNESS = np.array(
    [  # area 1..4 per cover type (the areas' species differ)
        [0.46, 0.08, 0.44, 0.02],
        [0.51, 0.04, 0.41, 0.04],
        [0.00, 0.00, 0.36, 0.64],
        [0.00, 0.00, 0.00, 1.00],
        [0.40, 0.00, 0.60, 0.00],
        [0.00, 0.00, 0.45, 0.55],
        [0.33, 0.12, 0.55, 0.00],
    ]
)


def _soil_probabilities() -> np.ndarray:
    """(7, 40) soil-type probabilities per cover type, mixed with 10 % uniform so every type occurs."""
    world = np.random.default_rng(_WORLD_SEED)
    skewed = world.dirichlet(np.full(40, 0.3), size=7)
    return 0.9 * skewed + 0.1 / 40


_SOIL = _soil_probabilities()


def _categorical(rng: np.random.Generator, probabilities: np.ndarray) -> np.ndarray:
    """One category index per row of a (n, k) probability matrix."""
    cumulative = np.cumsum(probabilities, axis=1)
    draws = rng.random(len(probabilities))[:, None] * cumulative[:, -1:]
    return (draws > cumulative).sum(axis=1)


def covtype_lines(rng: np.random.Generator, n: int, part: FilePart) -> str:
    """n rows of covtype.data: 10 integers, 4 + 40 one-hot columns, cover type 1-7."""
    cover = rng.choice(7, n, p=_COVER_SHARE / _COVER_SHARE.sum())
    mean = np.array([m for m, _ in _COVER_ELEVATION])[cover]
    sd = np.array([s for _, s in _COVER_ELEVATION])[cover]
    steep = np.isin(cover, (2, 3, 5)).astype(np.float64)
    aspect = rng.integers(0, 361, n)
    horizontal_hydrology = np.clip(rng.exponential(270, n), 0, 1397)
    radians = np.deg2rad(aspect)
    columns = [
        np.clip(rng.normal(mean, sd), 1859, 3858),
        aspect,
        np.clip(np.abs(rng.normal(13 + 5 * steep, 7.5)), 0, 66),
        horizontal_hydrology,
        np.clip(0.2 * horizontal_hydrology + rng.normal(0, 45, n), -173, 601),
        np.clip(rng.exponential(2350 - 900 * steep), 0, 7117),
        np.clip(212 + 25 * np.sin(radians) + rng.normal(0, 15, n), 0, 254),
        np.clip(223 + rng.normal(0, 20, n) - 4 * steep, 0, 254),
        np.clip(143 - 35 * np.sin(radians) + rng.normal(0, 25, n), 0, 254),
        np.clip(rng.exponential(1980 - 700 * steep), 0, 7173),
    ]
    wilderness = np.eye(4, dtype=np.int64)[_categorical(rng, _COVER_WILDERNESS[cover])]
    soil = np.eye(40, dtype=np.int64)[_categorical(rng, _SOIL[cover])]
    table = np.column_stack([np.rint(c).astype(np.int64) for c in columns] + [wilderness, soil, cover + 1])
    return "".join(",".join(map(str, row)) + "\n" for row in table.tolist())


# ----------------------------------------------------------------------------------------------
# Census-Income (KDD)

_CENSUS_CONTINUOUS = (
    "age",
    "wage_per_hour",
    "capital_gains",
    "capital_losses",
    "dividends_from_stocks",
    "instance_weight",
    "num_persons_worked_for_employer",
    "weeks_worked_in_year",
)


def _level_weights() -> dict[str, np.ndarray]:
    """Per categorical column: probabilities decreasing along census_levels' order (fixed)."""
    world = np.random.default_rng(_WORLD_SEED + 1)
    weights = {}
    for name, levels in census_levels.LEVELS.items():
        raw = world.dirichlet(np.full(len(levels), 0.7)) + 0.02
        raw = np.sort(raw)[::-1]
        raw[0] += 0.5 * (len(levels) > 2)  # the first level ("Not in universe", ...) dominates
        weights[name] = raw / raw.sum()
    return weights


_LEVEL_WEIGHTS = _level_weights()
_EDUCATION_SCORE = {  # years of schooling, roughly: the label's strongest input
    "Children": 0,
    "Less than 1st grade": 0,
    "1st 2nd 3rd or 4th grade": 3,
    "5th or 6th grade": 6,
    "7th and 8th grade": 8,
    "9th grade": 9,
    "10th grade": 10,
    "11th grade": 11,
    "12th grade no diploma": 11.5,
    "High school graduate": 12,
    "Some college but no degree": 13,
    "Associates degree-occup /vocational": 14,
    "Associates degree-academic program": 14,
    "Bachelors degree(BA AB BS)": 16,
    "Masters degree(MA MS MEng MEd MSW MBA)": 18,
    "Prof school degree (MD DDS DVM LLB JD)": 19,
    "Doctorate degree(PhD EdD)": 20,
}


def _sparse_amount(rng: np.random.Generator, n: int, share: float, scale: float, cap: int) -> np.ndarray:
    """Mostly zero, otherwise a skewed positive integer (wages, capital gains, dividends)."""
    amount = np.minimum(np.rint(rng.lognormal(np.log(scale), 1.0, n)), cap).astype(np.int64)
    return np.where(rng.random(n) < share, amount, 0)


def census_lines(rng: np.random.Generator, n: int, part: FilePart) -> str:
    """n rows of census-income.{data,test}: 42 fields separated by ', ', '?' for missing."""
    age = np.clip(np.rint(rng.gamma(2.2, 16.0, n)), 0, 90).astype(np.int64)
    child = age < 16
    columns: dict[str, np.ndarray] = {}
    for name, levels in census_levels.LEVELS.items():
        values = np.asarray(levels, dtype=object)[rng.choice(len(levels), n, p=_LEVEL_WEIGHTS[name])]
        rate = census_levels.MISSING_RATE.get(name, 0.0)
        if rate:
            values[rng.random(n) < rate] = "?"
        columns[name] = values
    columns["education"][child] = "Children"
    columns["class_of_worker"][child] = "Not in universe"
    columns["marital_status"][child] = "Never married"
    working = ~child & (columns["class_of_worker"] != "Not in universe")
    weeks = np.where(working, np.clip(np.rint(rng.normal(45, 12, n)), 0, 52), 0).astype(np.int64)
    gains = _sparse_amount(rng, n, 0.04, 3000, 99999)
    dividends = _sparse_amount(rng, n, 0.11, 400, 99999)
    numbers = {
        "age": age,
        "wage_per_hour": np.where(working, _sparse_amount(rng, n, 0.06, 700, 9999), 0),
        "capital_gains": gains,
        "capital_losses": _sparse_amount(rng, n, 0.02, 1700, 4608),
        "dividends_from_stocks": dividends,
        "instance_weight": np.round(rng.gamma(4.0, 440.0, n) + 37.0, 2),
        "num_persons_worked_for_employer": np.where(working, rng.integers(0, 7, n), 0),
        "weeks_worked_in_year": weeks,
    }
    schooling = np.array([_EDUCATION_SCORE[e] for e in columns["education"]], dtype=np.float64)
    logit = (
        -9.2
        + 0.32 * schooling
        + 0.045 * weeks
        + 0.9 * (columns["sex"] == "Male")
        + 0.035 * np.minimum(age, 55)
        + 1.8 * (gains > 0)
        + 0.9 * (dividends > 0)
        - 4.0 * child
    )
    positive = rng.random(n) < 1.0 / (1.0 + np.exp(-logit))
    label = np.where(positive, census_levels.LABELS[1], census_levels.LABELS[0])
    order = _census_column_order()
    fields = []
    for name in order:
        if name == "income":
            fields.append(label)
        elif name == "instance_weight":
            fields.append(np.char.mod("%.2f", numbers[name]))
        elif name in numbers:
            fields.append(numbers[name].astype(str))
        else:
            fields.append(columns[name])
    return "".join(", ".join(row) + "\n" for row in zip(*(f.tolist() for f in fields)))


def _census_column_order() -> tuple[str, ...]:
    from tabrepro.data.registry import get_source

    columns = get_source("census_income_kdd").format.columns
    assert columns is not None
    return columns


# Registry name -> line generator
GENERATORS: dict[str, LineGenerator] = {
    "higgs": higgs_lines,
    "poker_hand": poker_lines,
    "forest_cover": covtype_lines,
    "census_income_kdd": census_lines,
}
