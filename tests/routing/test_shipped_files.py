"""Shipped weights and tables are checked on load: a damaged copy raises one error naming the file."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from iclr_lab.core.provenance import ShippedFileError, load_torch, sha256
from iclr_lab.routing import evaluate
from iclr_lab.routing.train import load_policy, shipped_path


def test_every_shipped_policy_matches_the_sha256_in_its_record():
    for model in ("ccl", "static"):
        for seed in (0, 1, 2):
            p = shipped_path(model, seed)
            assert json.loads(p.with_suffix(".json").read_text())["sha256"] == sha256(p)


def _copy(tmp_path, name="ccl-0"):
    src = shipped_path("ccl", 0)
    shutil.copyfile(src, tmp_path / f"{name}.pt")
    shutil.copyfile(src.with_suffix(".json"), tmp_path / f"{name}.json")
    return tmp_path / f"{name}.pt"


def test_a_flipped_byte_in_a_policy_is_caught_by_its_hash(tmp_path):
    p = _copy(tmp_path)
    data = bytearray(p.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(b ^ 0xFF for b in data[middle:middle + 64])
    p.write_bytes(bytes(data))
    with pytest.raises(ShippedFileError, match=r"ccl-0\.pt: corrupt or changed"):
        load_policy(p)


def test_a_truncated_or_nan_policy_without_a_record_is_refused(tmp_path):
    p = _copy(tmp_path, "policy")
    (tmp_path / "policy.json").unlink()
    p.write_bytes(p.read_bytes()[:5000])
    with pytest.raises(ShippedFileError, match="truncated or corrupt"):
        load_policy(p)
    ck = torch.load(shipped_path("ccl", 0), weights_only=True)
    key = next(iter(ck["state_dict"]))
    ck["state_dict"][key] = torch.full_like(ck["state_dict"][key], float("nan"))
    torch.save(ck, p)
    with pytest.raises(ShippedFileError, match="non-finite"):
        load_policy(p)


def test_a_shipped_record_without_a_hash_is_an_error(tmp_path):
    p = _copy(tmp_path)
    record = json.loads(p.with_suffix(".json").read_text())
    del record["sha256"]
    p.with_suffix(".json").write_text(json.dumps(record))
    with pytest.raises(ShippedFileError, match="no sha256"):
        load_torch(p, expected_sha256=record.get("sha256", ""))


@pytest.fixture
def costs_copy(tmp_path, monkeypatch):
    csv = tmp_path / "test_costs.csv"
    shutil.copyfile(evaluate.COSTS_CSV, csv)
    shutil.copyfile(evaluate.MANIFEST, tmp_path / "manifest.json")
    monkeypatch.setattr(evaluate, "COSTS_CSV", csv)
    monkeypatch.setattr(evaluate, "MANIFEST", tmp_path / "manifest.json")
    return csv


def test_the_shipped_costs_load_and_a_truncated_copy_is_refused(costs_copy):
    assert len(evaluate.load_costs()) == 2400
    lines = costs_copy.read_text().splitlines()
    costs_copy.write_text("\n".join(lines[:801]) + "\n")  # 800 rows of 2,400
    with pytest.raises(ShippedFileError, match="test_costs.csv: corrupt or changed"):
        evaluate.load_costs()


def test_a_costs_file_recorded_with_a_nan_cell_or_a_short_record_is_refused(costs_copy):
    import pandas as pd

    table = pd.read_csv(costs_copy)
    table.loc[5, "pyvrp"] = float("nan")
    table.to_csv(costs_copy, index=False)
    evaluate.write_manifest(costs_copy)  # even a consistent record cannot certify a NaN
    with pytest.raises(ShippedFileError, match="NaN cells"):
        evaluate.load_costs()
    manifest = json.loads(evaluate.MANIFEST.read_text())
    table.loc[5, "pyvrp"] = 1.0
    table.to_csv(costs_copy, index=False)
    manifest["test_costs.csv"] |= {"sha256": sha256(costs_copy), "rows": 2401}
    evaluate.MANIFEST.write_text(json.dumps(manifest))
    with pytest.raises(ShippedFileError, match="its record says 2401 rows"):
        evaluate.load_costs()
