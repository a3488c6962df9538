import json
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest

from iclr_lab import cli
from iclr_lab.core.registry import chapters
from iclr_lab.core.report import Claim, Report


def test_list_shows_all_chapters(capsys):
    assert cli.main(["list"]) == 0
    rows = {line.split()[0]: line.split()[2] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows == {c.slug: "yes" if c.available else "planned" for c in chapters()}


def test_bad_arguments_exit_2_with_a_clear_message(capsys):
    assert cli.main(["reproduce", "adam9000"]) == 2
    assert "slug must be one of" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["reproduce", "vradam", "--scale", "huge"])
    assert exc.value.code == 2


def _fake(passed: bool, expected: bool = True, slug: str = "discounted_oco"):
    def reproduce(scale: str, seed: int) -> Report:
        claim = Claim("c", "x <= 1", 0.5 if passed else 2.0, 1.0, expected=expected)
        return Report(slug, scale, seed, {"t": pd.DataFrame({"a": [1]})}, [claim])

    return SimpleNamespace(reproduce=reproduce)


@pytest.mark.parametrize(("passed", "expected", "code"),
                         [(True, True, 0), (False, True, 1), (False, False, 0)])
def test_exit_status_follows_expected_claims(monkeypatch, capsys, passed, expected, code):
    monkeypatch.setattr("iclr_lab.core.registry.load", lambda slug: _fake(passed, expected))
    assert cli.main(["reproduce", "discounted_oco", "--json"]) == code
    d = json.loads(capsys.readouterr().out)
    assert d["slug"] == "discounted_oco" and d["claims"][0]["passed"] is passed


def test_all_writes_a_scoreboard(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr("iclr_lab.core.registry.load", lambda slug: _fake(True, slug=slug))
    assert cli.main(["reproduce", "--all", "--out", str(tmp_path)]) == 0
    board = pd.read_csv(tmp_path / "scoreboard.csv")
    assert set(board.status) == {"pass"}
    assert {"paper", "claim", "kind", "paper's number", "measured", "needed"} <= set(board.columns)
    assert list(board.slug) == [c.slug for c in chapters(available_only=True)]
    assert (tmp_path / "scoreboard.md").exists()


def test_python_dash_m_runs_the_same_cli():
    out = subprocess.run([sys.executable, "-m", "iclr_lab", "list"], capture_output=True,
                         text=True, check=True).stdout
    assert "discounted_oco" in out


def test_version_and_help_read_as_plain_text(capsys):
    from iclr_lab import __version__

    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"iclr-lab {__version__}"
    for args in (["--help"], ["reproduce", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(args)
        text = capsys.readouterr().out
        assert "usage: iclr-lab" in text and "``" not in text and "`" not in text


# --- iclr-lab launch ------------------------------------------------------------------------------

def _launchable(calls):
    def launch(comm, scale="book", seed=0):
        import torch

        x = torch.full((3,), float(comm.rank + seed))
        comm.all_reduce_mean([x], kind="parameters")
        calls.append((comm.rank, comm.world_size, scale, seed))
        return {"final": pd.DataFrame({"method": ["m"], "final_loss": [float(x[0])]}),
                "curves": pd.DataFrame({"step": [1, 2], "loss": [1.0, 0.5]})}

    return SimpleNamespace(launch=launch)


def test_launch_under_torchrun_joins_the_group_from_the_environment(monkeypatch, tmp_path, capsys):
    """The torchrun path, in this process: RANK and WORLD_SIZE set, a group of one (gloo)."""
    from iclr_lab.core.collective import _free_port

    calls = []
    monkeypatch.setattr("iclr_lab.core.registry.load", lambda slug: _launchable(calls))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_free_port()))
    assert cli.main(["launch", "desloc", "--backend", "gloo", "--scale", "smoke", "--seed", "3",
                     "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "torchrun" in out and "simulator" not in out and "3" in out
    assert calls == [(0, 1, "smoke", 3)]
    assert pd.read_csv(tmp_path / "final.csv").final_loss.tolist() == [3.0]
    assert (tmp_path / "curves.csv").exists()
    import torch.distributed as dist

    assert not dist.is_initialized()  # the group is torn down


def test_launch_rejects_chapters_without_a_launch_and_bad_arguments(monkeypatch, capsys):
    monkeypatch.setattr("iclr_lab.core.registry.load", lambda slug: SimpleNamespace())
    assert cli.main(["launch", "vradam"]) == 2
    assert "no launch" in capsys.readouterr().err
    assert cli.main(["launch", "adam9000"]) == 2
    assert "slug must be one of" in capsys.readouterr().err
    monkeypatch.setattr("iclr_lab.core.registry.load", lambda slug: _launchable([]))
    monkeypatch.delenv("RANK", raising=False)
    assert cli.main(["launch", "desloc", "--nproc", "0"]) == 2
    assert "nproc" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["launch", "desloc", "--backend", "mpi"])


def test_launch_help_reads_as_plain_text(capsys):
    with pytest.raises(SystemExit):
        cli.main(["launch", "--help"])
    text = capsys.readouterr().out
    assert "usage: iclr-lab launch" in text and "torchrun" in text and "`" not in text


@pytest.mark.parametrize("command", [["reproduce", "vradam"], ["reproduce", "--all"],
                                     ["stability", "vradam"], ["launch", "desloc"]])
@pytest.mark.parametrize("where", ["a file", "under a file", "read-only"])
def test_a_bad_out_is_one_line_and_exit_2_before_anything_runs(monkeypatch, tmp_path, capsys,
                                                               command, where):
    def must_not_run(slug):
        raise AssertionError("the chapter ran before --out was checked")

    monkeypatch.setattr("iclr_lab.core.registry.load", must_not_run)
    (tmp_path / "f").write_text("x")
    out = {"a file": tmp_path / "f", "under a file": tmp_path / "f" / "sub",
           "read-only": "/proc/iclr_lab_out"}[where]
    assert cli.main([*command, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"iclr-lab: error: --out {out}") and "\n" not in err


def test_a_dead_rank_is_one_line_and_exit_2(monkeypatch, capsys):
    from iclr_lab.core.collective import CollectiveError

    def dies(slug):
        raise CollectiveError("rank 0 of 2: an all-reduce of parameters failed: another rank ...")

    monkeypatch.setattr(cli, "_launchable", dies)
    assert cli.main(["launch", "desloc"]) == 2
    assert capsys.readouterr().err.startswith("iclr-lab: error: rank 0 of 2: an all-reduce")
