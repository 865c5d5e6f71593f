"""The interval method ``sequential_t``: valid when a round stops as soon as it is decided.

Looking at an interval after every block of pairs and stopping at the first PASS gives the
noise many chances: a fixed-n interval that errs 2.5% of the time on its own errs far more
often at one of ten looks (``PEEKING_FALSE_PASS``). ``sequential_t`` is a group-sequential
interval (Pocock 1977; Jennison & Turnbull 2000, ch. 2-3): over the planned looks
``first_look, first_look + look_every, ..., max_pairs`` one constant ``c`` is chosen so that,
for normal log-ratios of any mean and spread, the chance that ``|t_k| > c`` at *any* look (``t_k``
the Student-t statistic of the true mean at look ``k``) is ``alpha = 1 - confidence``. The
interval at a look with ``n`` pairs is ``exp(m -/+ c * s / sqrt(n))``; it covers at every look
together, so wherever the round stops it covers with probability >= confidence.

``c`` has no closed form for the t statistic at several looks (their joint law has no simple
density), so it is the quantile of a pinned Monte Carlo, reproducible to the digit like the
bootstrap: ``boundary`` gives the exact recipe. With a single look it is the Student-t
quantile itself, so ``sequential_t`` without a schedule is ``student_t`` exactly.

The futility rule (``futile``) stops a round that cannot reasonably reach PASS; it only ever
stops without PASS, so it cannot raise the false-PASS rate (the boundary is computed as if no
round ever stopped for futility: non-binding, and conservative).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from pipeline.assessment import boundary as _boundary
from pipeline.assessment.boundary import BOUNDARY_SEED, DECIMALS, SIMULATIONS  # noqa: F401 (API)
from pipeline.assessment.intervals import METHODS
from pipeline.contract.declare import SCHEDULE_DEFAULTS, bounds

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

(METHOD,) = (m.name for m in METHODS.values() if m.sequential)
"""The interval method valid under early stopping (its registry entry says so)."""
FIXED_N: tuple[str, ...] = tuple(m.name for m in METHODS.values() if not m.sequential)
"""The interval methods valid for one look at a planned n only (not under early stopping)."""
FUTILITY_POWER = 0.05
"""A round whose predictive power of reaching the gate by ``max_pairs`` is below this stops
(futility)."""

PEEKING_FALSE_PASS: dict[str, float] = {
    "percentile": 0.169,
    "expanded_percentile": 0.117,
    "student_t": 0.109,
}
"""False-PASS rate of peeking at a fixed-n interval method: looking after every block of 2 pairs
from 6 to 40 pairs and stopping at the first PASS, when the true gain equals the gate (the
worst case: a smaller true gain passes less often), in calibrate's default log-normal model
(gate 1%). From ``explain-pipeline calibrate --sequential --attempts 20000`` (the table is in
docs/calibration.md, and tests/test_sequential_study.py holds these figures to it). The same
run gave ``sequential_t`` 2.4%."""


@dataclass(frozen=True)
class Schedule:
    """The planned looks of a round, in pairs: ``first_look + j * look_every`` below
    ``max_pairs``, then ``max_pairs`` (also when it is off that grid); one look when
    ``first_look >= max_pairs``. attempt.json's ``sequential`` object holds it; its defaults are
    the recorder's plan (SCHEDULE_DEFAULTS). Each field within the bounds attempt.schema.json
    gives it (ValueError otherwise)."""

    first_look: int = SCHEDULE_DEFAULTS["first_look"]
    look_every: int = SCHEDULE_DEFAULTS["look_every"]
    max_pairs: int = SCHEDULE_DEFAULTS["max_pairs"]

    def __post_init__(self) -> None:
        for name in ("first_look", "look_every", "max_pairs"):
            value = getattr(self, name)
            problem = bounds("attempt", "sequential", name).problem(value)
            if problem is not None:
                raise ValueError(f"sequential.{name} {problem}, got {value}")

    @classmethod
    def single(cls, n: int) -> Schedule:
        """One look, at ``n`` pairs: ``sequential_t`` there is ``student_t``."""
        return cls(n, 1, n)

    @property
    def looks(self) -> tuple[int, ...]:
        """Pairs at each planned look."""
        return _boundary.plan_looks(self.first_look, self.look_every, self.max_pairs)

    def boundary(self, confidence: float) -> float:
        """The constant ``c`` of these looks (``boundary``)."""
        return boundary(self.first_look, self.look_every, self.max_pairs, confidence)

    def critical(self, confidence: float, n: int) -> float:
        """The constant of the interval at ``n`` pairs under these looks (``critical``)."""
        return critical(self.first_look, self.look_every, self.max_pairs, confidence, n)


def schedule(first_look: int, look_every: int, max_pairs: int) -> tuple[int, ...]:
    """Pairs at each planned look of ``Schedule(first_look, look_every, max_pairs)``."""
    return Schedule(first_look, look_every, max_pairs).looks


@lru_cache(maxsize=256)
def boundary(first_look: int, look_every: int, max_pairs: int, confidence: float) -> float:
    """The constant ``c`` of the schedule's looks ``n_1 < ... < n_K`` (see ``schedule``).

    K = 1: ``scipy.stats.t.ppf(1 - alpha / 2, n_1 - 1)``, the Student-t quantile, unrounded.
    K >= 2: the pinned Monte Carlo of ``pipeline.assessment.boundary`` (a million simulated
    sequences; looked up in the shipped table or this machine's cache before it is computed):
      rng = numpy.random.Generator(numpy.random.PCG64(BOUNDARY_SEED))
      z = rng.standard_normal((SIMULATIONS, max_pairs))   # row i: sequence i (may be drawn
                                                           # in blocks of rows: same numbers)
      for every row and look k: S = sum of z[:n_k], Q = sum of z[:n_k] ** 2,
          t_k = (S / n_k) / sqrt((Q - S * S / n_k) / (n_k - 1) / n_k)
      M = max over k of |t_k|    (per row)
      c = round(numpy.quantile(M, confidence, method="linear"), DECIMALS)
    """
    looks = schedule(first_look, look_every, max_pairs)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if len(looks) == 1:
        return student_t_quantile(looks[0], confidence)
    return _boundary.constant((first_look, look_every, max_pairs, confidence), looks)


def student_t_quantile(n: int, confidence: float) -> float:
    """``scipy.stats.t.ppf(1 - alpha / 2, n - 1)``: the fixed-n interval's constant at n pairs."""
    from scipy import stats

    return float(stats.t.ppf(1.0 - (1.0 - confidence) / 2, n - 1))


def critical(first_look: int, look_every: int, max_pairs: int, confidence: float, n: int) -> float:
    """The constant of a ``sequential_t`` interval at ``n`` pairs under this plan: ``boundary``,
    and never below the Student-t quantile of the ``n`` pairs there. At a planned look the two
    agree (``c`` is at least every look's own quantile); a look with fewer pairs than planned
    (failed runs, a round interrupted before its first look, a single-look plan of 6 with 5
    pairs) is then as wide as a fixed-n interval of its pairs, never narrower."""
    c = boundary(first_look, look_every, max_pairs, confidence)
    return max(c, student_t_quantile(n, confidence)) if n >= 2 else c


def predictive_powers(
    n: npt.ArrayLike,
    mean: npt.ArrayLike,
    sd: npt.ArrayLike,
    *,
    gate: float,
    plan: Schedule,
    confidence: float,
) -> FloatArray:
    """The predictive power (Spiegelhalter, Freedman & Blackburn 1986): the chance that the
    interval at ``max_pairs`` reaches the gate, given the ``n`` pairs seen, when the true mean
    is as uncertain as they say. With ``c = plan.boundary(confidence)``, ``N = plan.max_pairs`` and
    ``b = ln(max(gate, 1)) + c * sd / sqrt(N)`` (the final mean that puts ``low`` on the gate,
    ``sd`` taken as known), the final mean ``(n * mean + (N - n) * future) / N``, with the
    future pairs' mean ``~ Normal(theta, sd^2 / (N - n))`` and ``theta ~ Normal(mean, sd^2 / n)``,
    is ``Normal(mean, sd^2 * (N - n) / (N * n))``; so the chance is
    ``Phi((mean - b) / (sd * sqrt((N - n) / (N * n))))``; ``sd = 0`` or ``n >= N``: 1 if
    ``mean >= b`` and ``mean > c * sd / sqrt(N)`` (the final ``low`` above 1, which PASS also
    needs: at a gate of 0 % a mean of exactly 0 cannot pass) else 0. ``mean`` and ``sd`` (ddof
    1) are those of the metric's log-ratios at
    ``n`` pairs (arrays of one shape, or scalars); ``gate`` is ``1 + min_improvement_pct / 100``.

    Unlike the conditional power under the current estimate (``theta = mean``), it does not
    take a noisy early mean at its word: in calibrate's model, with conditional power below 5%
    as the rule 91.6% of rounds with a true gain of 5x the gate passed; with predictive power,
    98.2% (docs/calibration.md)."""
    from scipy.special import ndtr

    c, max_pairs = plan.boundary(confidence), plan.max_pairs
    n_, mean_, sd_ = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (n, mean, sd)))
    half = c * sd_ / math.sqrt(max_pairs)
    target = math.log(max(gate, 1.0)) + half
    left = max_pairs - n_
    certain = (left <= 0) | (sd_ == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (mean_ - target) / (sd_ * np.sqrt(np.maximum(left, 0.0) / (max_pairs * n_)))
    passes = (mean_ >= target) & (mean_ > half)
    return np.where(certain, passes.astype(np.float64), ndtr(z))


def predictive_power(
    n: int, mean: float, sd: float, *, gate: float, plan: Schedule, confidence: float
) -> float:
    """``predictive_powers`` of one look."""
    return float(predictive_powers(n, mean, sd, gate=gate, plan=plan, confidence=confidence))


def futile_mask(
    n: npt.ArrayLike,
    mean: npt.ArrayLike,
    sd: npt.ArrayLike,
    *,
    gate: float,
    plan: Schedule,
    confidence: float,
) -> BoolArray:
    """The futility rule for many looks at once: the predictive power (``predictive_powers``)
    is below ``FUTILITY_POWER``; false at or past ``max_pairs`` (the round stops there anyway,
    as ``max``). It never stops a round with a PASS, so it cannot raise the false-PASS rate."""
    power = predictive_powers(n, mean, sd, gate=gate, plan=plan, confidence=confidence)
    return (np.asarray(n) < plan.max_pairs) & (power < FUTILITY_POWER)


def futile(
    n: int, mean: float, sd: float, *, gate: float, plan: Schedule, confidence: float
) -> bool:
    """``futile_mask`` of one look: stop this round without PASS."""
    return bool(futile_mask(n, mean, sd, gate=gate, plan=plan, confidence=confidence))
