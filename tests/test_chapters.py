"""Checks every implemented chapter's reproduce() against the module contract (DESIGN.md section 2)."""

import pandas as pd
import pytest

from iclr_lab.core.registry import chapters, load
from iclr_lab.core.report import Claim, Report

SLUGS = [c.slug for c in chapters(available_only=True)]


@pytest.fixture(scope="module", params=SLUGS)
def runs(request):
    module = load(request.param)
    return request.param, [module.reproduce(scale="smoke", seed=s) for s in (0, 0, 1)]


def test_reproduce_returns_a_well_formed_report(runs):
    slug, (first, _, _) = runs
    assert isinstance(first, Report)
    assert (first.slug, first.scale, first.seed) == (slug, "smoke", 0)
    assert first.tables and all(isinstance(t, pd.DataFrame) and len(t) for t in first.tables.values())
    assert first.claims and all(isinstance(c, Claim) for c in first.claims)
    assert all(c.statement and c.paper for c in first.claims), "claims say what the paper reported"
    assert first.seconds > 0
    for name, chart in first.charts().items():
        chart.to_dict()  # valid Vega-Lite
        assert len(name) > 0


def test_same_seed_gives_identical_tables_and_claims(runs):
    _, (a, b, _) = runs
    assert a.tables.keys() == b.tables.keys()
    for name in a.tables:
        pd.testing.assert_frame_equal(a.tables[name], b.tables[name], check_exact=True)
    # Series.equals treats NaN == NaN, so a claim that is NaN twice counts as reproducible
    assert pd.Series([c.measured for c in a.claims]).equals(pd.Series([c.measured for c in b.claims]))


def test_another_seed_gives_other_numbers(runs):
    _, (a, _, c) = runs
    assert c.seed == 1
    assert any(not a.tables[n].equals(c.tables[n]) for n in a.tables), "the seed is used"


def test_unknown_scale_is_rejected():
    for slug in SLUGS:
        with pytest.raises(ValueError, match="scale must be one of"):
            load(slug).reproduce(scale="huge")
