from pathlib import Path

import pytest

import iclr_lab
from iclr_lab.core.registry import PARTS, chapter, chapters, load

ROOT = Path(__file__).resolve().parents[2]
DESIGN_SLUGS = [
    "vradam", "doit", "dnt", "desloc", "mtdao", "fedmuon", "ringleader", "l2fob", "discounted_oco",
    "utility_learning", "frank_wolfe_bregman", "tubal_fgd", "sparse_relu_iht", "risp",
    "data_curation", "amd", "imitation_reward_class", "rlr", "ccl_vrp",
]


def test_the_table_lists_the_19_papers_in_book_order():
    assert [c.slug for c in chapters()] == DESIGN_SLUGS
    assert all(c.part in PARTS for c in chapters())
    parts = [c.part for c in chapters()]
    assert parts == sorted(parts, key=list(PARTS).index), "chapters are grouped by part"


def test_available_means_the_module_exists():
    for c in chapters():
        module_file = ROOT / (c.module_name.replace(".", "/") + ".py")
        package = ROOT / c.module_name.replace(".", "/") / "__init__.py"
        assert c.available == (module_file.exists() or package.exists()), c.slug
    assert {"vradam", "discounted_oco"} <= {c.slug for c in chapters(available_only=True)}


def test_unknown_and_planned_slugs_give_clear_errors():
    with pytest.raises(ValueError, match="slug must be one of"):
        chapter("adam9000")
    planned = [c for c in chapters() if not c.available]
    if planned:
        with pytest.raises(ValueError, match="not implemented yet"):
            load(planned[0].slug)
    with pytest.raises(ValueError, match="scale must be one of"):
        iclr_lab.reproduce("discounted_oco", scale="huge")


def test_links_point_at_the_paper():
    assert chapter("vradam").url == "https://arxiv.org/abs/2505.13196"
    assert chapter("doit").url.startswith("https://openreview.net/forum?id=")
