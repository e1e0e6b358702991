"""perflab track and history on a real git repository of a C program whose third commit makes
it 8x slower: the store keeps every track's runs (two at once, or one killed), history finds
the change at that commit and confirms it by a comparison, the gate trips on it; the change
point search itself on given series."""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import fill_disk, slowed_repo, wait_for

from perflab.cli import cli
from perflab.errors import PerflabError
from perflab.lab import history
from perflab.lab.history import changes
from perflab.lab.history.store import machine_key
from perflab.store import results

BUILD = ["--build", "cc -O1 -o prog prog.c", "--run", "./prog"]
SMALL = ["--setups", "3", "--repeat", "2"]


def _track(store, *args: str) -> tuple[int, str]:
    r = slowed_repo()
    res = CliRunner().invoke(cli, ["track", *args, "--repo", r["repo"], "--store", str(store),
                                   *BUILD, *SMALL])  # fmt: skip
    return res.exit_code, res.output + (res.stderr if res.stderr_bytes else "")


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """The four commits tracked into one store: the first alone, then c0..c3 (the rest, as
    git reads a range)."""
    store = tmp_path_factory.mktemp("history")
    r = slowed_repo()
    code, out = _track(store, r["c0"])
    assert code == 0, out
    code, out = _track(store, f"{r['c0']}..{r['c3']}")
    assert code == 0, out
    return store


def test_each_commit_is_kept_with_its_parents_and_runs(tracked):
    r = slowed_repo()
    entries = history.Store(tracked).entries()
    assert [e.sha for e in changes.commit_order(entries)] == [r[f"c{i}"] for i in range(4)]
    by_sha = {e.sha: e for e in entries}
    assert by_sha[r["c1"]].parents == [r["c0"]] and by_sha[r["c0"]].parents == []
    assert all(e.runs == 3 * 2 * 2 and e.tracks == 1 for e in entries)
    assert by_sha[r["c2"]].subject == "commit 2" and by_sha[r["c2"]].build == BUILD[1].split()


@pytest.mark.long
def test_history_confirms_the_slower_commit_by_a_comparison_and_gates_on_it(tracked, tmp_path):
    """The series in history's order; a change point, where the search finds one (tracked
    minutes apart, a guest's drift may read as large as the 8x loop: CI once read the same
    program 2.3x apart in two commits), is confirmed only where the commits differ; the
    comparison of c1 and c2 itself shows the 8x loop, is kept, and trips the gate. At 99.9 %:
    a dismissal compares builds of the same bytes, which a 95 % split over few change points
    calls slower about once in a hundred."""
    r = slowed_repo()
    res = CliRunner().invoke(cli, ["history", "--store", str(tracked), "--repo", r["repo"],
                                   "--setups", "6", "--repeat", "3", "--confidence", "0.999",
                                   "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [s["sha"] for s in doc["series"]] == [r[f"c{i}"] for i in range(4)]
    for c in doc["change_points"]:
        slower = (c["before"], c["after"]) == (r["c1"], r["c2"])
        assert c["verdict"] == ("confirmed" if slower else "dismissed"), c
    kept = history.Store(tracked)
    change = {"machine": machine_key(), "before": r["c1"], "after": r["c2"], "position": 2}
    said: list[str] = []
    for _ in range(2):  # made (unless history above made it), then kept: built and run once
        found = history.confirm_change(kept, Path(r["repo"]), change, kept.entries(), 6, 3, 0,
                                       0.95, said.append)  # fmt: skip
        assert found["verdict"] == "confirmed" and found["ci_low"] > 2, found
    assert "kept from an earlier history" in said[1]
    meta = {"this_machine": machine_key(), "change_points": [change | found]}
    assert "beyond --fail-above 50.0%" in (history.tripped(meta, 0.5) or "")
    page = tmp_path / "h.html"
    res = CliRunner().invoke(cli, ["history", "--store", str(tracked), "--no-confirm",
                                   "--html", str(page)])  # fmt: skip
    assert res.exit_code == 0, res.output
    text = page.read_text()
    assert "data:image/png;base64," in text and r["c2"][:10] in text


def test_every_commit_runs_beside_the_first_and_drift_between_tracks_cancels(tracked, tmp_path):
    """The series' commits all ran beside c0 (the first track's first commit, kept by the
    second); a host 35 % slower during one commit's track (both sides of its pairs) leaves
    that commit's place in the series exactly where it was."""
    r = slowed_repo()
    assert {e.reference for e in history.Store(tracked).entries()} == {r["c0"]}
    store = tmp_path / "drifted"
    shutil.copytree(tracked, store)
    before = history.history(tracked, confirm=False).set_index("sha")["value"]
    kept = history.Store(store)
    entry = next(e for e in kept.entries() if e.sha == r["c3"])
    df = kept.runs(entry)
    for col in ("ticks", "outer_ticks"):
        if col in df:
            df[col] = df[col] * 1.35
    results.save(df, store / entry.file)
    after = history.history(store, confirm=False).set_index("sha")["value"]
    assert after[r["c3"]] / after[r["c2"]] == pytest.approx(before[r["c3"]] / before[r["c2"]])
    assert after[r["c1"]] / after[r["c0"]] == pytest.approx(before[r["c1"]] / before[r["c0"]])


def test_history_reads_the_childrens_cpu_time_and_refuses_a_count_track_did_not_make(tracked):
    """--metric cpu: the same series in the children's CPU time, c2's 8x loop plain in it;
    instructions-exact, which track does not count, is one line."""
    r = slowed_repo()
    df = history.history(tracked, confirm=False, metric="cpu").set_index("sha")
    assert set(df["unit"]) == {"cpu_ns"} and df.attrs["perflab"]["metric"] == "cpu"
    assert df.loc[r["c2"], "value"] > 2 * df.loc[r["c1"], "value"] > 0
    res = CliRunner().invoke(cli, ["history", "--store", str(tracked), "--no-confirm",
                                   "--metric", "instructions-exact"])  # fmt: skip
    lines = [x for x in res.output.splitlines() if x.startswith("Error:")]
    assert res.exit_code != 0 and len(lines) == 1 and "history reads one of" in lines[0]


def test_history_without_confirming_builds_nothing_and_says_so(tracked):
    r = slowed_repo()
    df = history.history(tracked, repo=r["repo"], confirm=False)
    for change in df.attrs["perflab"]["change_points"]:
        assert change["verdict"] == "unconfirmed" and "--no-confirm" in change["why"]
    assert history.tripped(df.attrs["perflab"], 0.0) is None  # only confirmed ones gate


@pytest.mark.long
def test_two_tracks_at_once_keep_both_and_a_killed_one_loses_nothing(tmp_path):
    r = slowed_repo()
    store = tmp_path / "store"
    store.mkdir()
    argv = [sys.executable, "-m", "perflab", "track", r["c3"], "--repo", r["repo"], "--store",
            str(store), *BUILD, *SMALL]  # fmt: skip
    both = [subprocess.Popen(argv, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    said = [p.communicate(timeout=300)[1] for p in both]  # both read: no pipe left open
    assert [p.returncode for p in both] == [0, 0], said
    (entry,) = history.Store(store).entries()
    assert entry.tracks == 2 and entry.runs == 2 * 3 * 2 * 2
    runs = history.Store(store).runs(entry)
    # one seed, the same three layouts; each track's runs told apart, the metadata kept
    assert runs["setup"].nunique() == 3 and set(runs["track"]) == {0, 1}
    assert not runs.duplicated(["track", "setup", "side", "rep"]).any()
    assert results.metadata(runs)["experiment"] == "compare"
    # killed while it measures: the store stays as the last whole write left it
    slow = [*argv[:-4], "--setups", "200", "--repeat", "5"]
    p = subprocess.Popen(slow, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: p.poll() is None and _running_children(p.pid), "the track's runs", 120)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        p.kill()
    (after,) = history.Store(store).entries()
    assert after == entry and len(history.Store(store).runs(after)) == len(runs)


def _running_children(pid: int) -> bool:
    import psutil

    return bool(psutil.Process(pid).children(recursive=True))


def test_bad_input_is_one_line_before_anything_is_built(tmp_path):
    r = slowed_repo()
    cases = [
        (["track", "HEAD", "--repo", str(tmp_path), *BUILD], "not a git repository"),
        (["track", "nosuch", "--repo", r["repo"], *BUILD], "names no commit"),
        (["track", f"{r['c3']}..{r['c0']}", "--repo", r["repo"], *BUILD], "holds no commit"),
        (["track", f"{r['c0']}...{r['c3']}", "--repo", r["repo"], *BUILD], "A...B"),
        (["track", "..HEAD", "--repo", r["repo"], *BUILD], "(HEAD is in HEAD's history)"),
        (["history", "--store", str(tmp_path / "none"), "--no-confirm"], "no history store"),
        (["history", "--store", str(tmp_path / "bad"), "--no-confirm"], "not a perflab history"),
    ]
    (tmp_path / "bad").mkdir(mode=0o700)
    (tmp_path / "bad" / "index.json").write_text('{"version": 2, "entries": [{"machine": "..",'
                                                 ' "sha": "x"}]}')  # fmt: skip
    for args, said in cases:
        res = CliRunner().invoke(cli, [*args, "--store", str(tmp_path / "s")]
                                 if args[0] == "track" else args)  # fmt: skip
        lines = [x for x in res.output.splitlines() if x.startswith("Error:")]
        assert res.exit_code != 0 and len(lines) == 1 and said in lines[0], (args, res.output)
    assert not (tmp_path / "s" / "index.json").exists()


def test_a_commit_tracked_again_with_another_program_is_refused(tracked):
    r = slowed_repo()
    res = CliRunner().invoke(cli, ["track", r["c3"], "--repo", r["repo"], "--store", str(tracked),
                                   "--build", "cc -O1 -o prog prog.c", "--run", "./prog x",
                                   *SMALL])  # fmt: skip
    lines = [x for x in res.output.splitlines() if x.startswith("Error:")]
    assert res.exit_code != 0 and len(lines) == 1 and "was tracked here with --run" in lines[0]
    res = CliRunner().invoke(cli, ["track", r["c3"], "--repo", r["repo"], "--store", str(tracked),
                                   *BUILD, "--reference", r["c1"], *SMALL])  # fmt: skip
    lines = [x for x in res.output.splitlines() if x.startswith("Error:")]
    assert res.exit_code != 0 and len(lines) == 1 and "with --reference" in lines[0]
    assert {e.tracks for e in history.Store(tracked).entries()} == {1}
    kept = history.Store(tracked)  # another track added it with ./prog while this one measured
    entry = next(e for e in kept.entries() if e.sha == r["c3"])
    runs, index = kept.runs(entry), (tracked / "index.json").read_bytes()
    with pytest.raises(PerflabError, match=r"not added \(.* was tracked here with --run "
                       r"\['./prog'\], not \['./prog', 'x'\].*\); this track's \d+ runs are kept "
                       r"in (\S+) and the store is as it was: give them") as said:  # fmt: skip
        kept.add(dataclasses.replace(entry, run=["./prog", "x"]), runs)
    spare = Path(re.search(r"are kept in (\S+) and", str(said.value))[1])
    assert len(results.load(spare)) == len(runs) and (tracked / "index.json").read_bytes() == index
    spare.unlink()


def test_branches_are_ordered_by_author_time_whatever_their_offsets():
    def entry(sha: str, parents: list[str], date: str) -> history.Entry:
        return history.Entry("m", sha * 40, [p * 40 for p in parents], "s", date, ["b"], ["r"],
                             0, 1, 1)  # fmt: skip

    root = entry("a", [], "2024-01-01T00:00:00+00:00")
    x = entry("b", ["a"], "2024-01-01T10:00:00+05:00")  # 05:00 UTC
    y = entry("c", ["a"], "2024-01-01T08:00:00+00:00")
    merge = entry("d", ["c", "b"], "2024-01-01T09:00:00+00:00")
    order = changes.commit_order([merge, y, x, root])
    assert [e.sha[0] for e in order] == ["a", "b", "c", "d"]


def test_a_store_reached_through_a_link_another_user_owns_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("planting another user's link needs root")
    (tmp_path / "real" / "store").mkdir(parents=True)
    os.symlink(tmp_path / "real", tmp_path / "planted")
    os.lchown(tmp_path / "planted", 65534, 65534)
    with pytest.raises(PerflabError, match="a link another user owns"):
        history.Store(tmp_path / "planted" / "store", create=True)


def test_another_user_s_repository_is_said_as_git_refuses_it(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a repository to another user needs root")
    shutil.copytree(slowed_repo()["repo"], tmp_path / "r", symlinks=True)
    for d, _, names in os.walk(tmp_path / "r"):
        for x in [d, *(os.path.join(d, n) for n in names)]:
            os.lchown(x, 65534, 65534)
    res = CliRunner().invoke(cli, ["track", "HEAD", "--repo", str(tmp_path / "r"), *BUILD])
    assert res.exit_code == 1 and res.output.startswith(f"Error: --repo {tmp_path / 'r'}: "
                                                        "another user's repository, which git "
                                                        "refuses"), res.output  # fmt: skip
    assert "?" not in res.output  # git's hint is indented by a tab


@pytest.mark.parametrize("seed", range(5))
def test_a_step_is_found_where_it_is_and_noise_alone_finds_none(seed):
    """On series of 24 commits with 1 % noise: a 4 % step at commit 15 is the one change
    point; the same series without it has none."""
    rng = np.random.default_rng(seed)
    logs = rng.normal(0, 0.01, 24)
    se = np.full(24, 0.01)
    assert changes.change_points(logs, changes.noise(logs, se)) == []
    stepped = logs + np.log(1.04) * (np.arange(24) >= 15)
    assert changes.change_points(stepped, changes.noise(stepped, se)) == [15]


def test_a_change_dismissed_where_the_search_put_it_is_confirmed_one_commit_off():
    """The search split the series one commit late (the slower commit read near its parent in
    its layouts): the comparison there is dismissed, the one a commit earlier confirms it, and
    the change moves there; a pair that is another change point's is not tried again."""
    positions = {sha: 10 + i for i, sha in enumerate("abcde")}
    verdicts = {("a", "b"): "confirmed", ("b", "c"): "dismissed", ("c", "d"): "confirmed"}
    tried: list[tuple[str, str]] = []

    def confirm_at(pair):
        tried.append((pair["before"], pair["after"]))
        return {"verdict": verdicts[tried[-1]], "why": "the commits either side differ"}

    change = {"before": "b", "after": "c", "position": 12}
    other = {"before": "c", "after": "d", "position": 13}
    got = history._confirmed_near(change, positions, [change, other], confirm_at)
    assert (got["before"], got["after"], got["position"], got["verdict"]) == (
        "a",
        "b",
        11,
        "confirmed",
    )
    assert "one commit later" in got["why"] and tried == [("b", "c"), ("a", "b")]
    verdicts[("a", "b")] = "dismissed"
    tried.clear()
    got = history._confirmed_near(change, positions, [change, other], confirm_at)
    assert got["verdict"] == "dismissed" and tried == [("b", "c"), ("a", "b")]


def test_history_orders_commits_by_the_repository_whatever_their_dates(tmp_path):
    """Author dates running backwards (as after a rebase) and a commit that does not build
    (left out of the store: a gap): the series follows the graph, the gap is said, and a gate
    with --no-confirm is refused before anything is read."""
    from conftest import CHAIN, PROG, new_repo

    repo = tmp_path / "backwards"
    git = new_repo(repo)
    shas = []
    for i, body in enumerate([PROG % 1_000_000, PROG % 1_000_000, "not C\n",
                              PROG % 1_000_000, PROG % 8_000_000]):  # fmt: skip
        (repo / "chain.h").write_text(CHAIN)
        (repo / "prog.c").write_text(body)
        git("add", "-A")
        date = f"2024-01-{20 - i:02d}T12:00:00+00:00"
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", f"c{i}"],
                       env={**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date,
                            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"},
                       check=True)  # fmt: skip
        shas.append(git("rev-parse", "HEAD"))
    store = tmp_path / "store"
    store.mkdir()
    for revs in (shas[0], f"{shas[0]}..{shas[-1]}"):
        res = CliRunner().invoke(cli, ["track", revs, "--repo", str(repo), "--store", str(store),
                                       *BUILD, *SMALL])  # fmt: skip
    assert "tracked 3 commits, left 1 out" in res.output  # c2 does not build
    df = history.history(store, repo=repo, confirm=False)
    assert list(df["sha"]) == [shas[0], shas[1], shas[3], shas[4]]
    assert list(df["position"]) == [0, 1, 3, 4]
    order = results.metadata(df)["order"]
    assert order["gaps"] == 1 and order["lacking"] == []
    said = history.summary(df, results.metadata(df)).lines[0]
    assert said.startswith("commits in the topological order of the repository ")
    assert said.endswith("; 1 commits of that range are not in the store (gaps)")
    res = CliRunner().invoke(cli, ["history", "--store", str(store), "--repo", str(repo),
                                   "--no-confirm", "--fail-above", "0"])  # fmt: skip
    assert res.exit_code != 0 and "the gate could never fail" in res.output


@pytest.fixture
def small_store(tmp_path):
    """Two commits tracked into a store of the test's own: (store, c0, c1)."""
    r = slowed_repo()
    store = tmp_path / "store"
    store.mkdir()
    code, out = _track(store, f"{r['c0']}..{r['c1']}")
    assert code == 0, out
    code, out = _track(store, r["c0"])
    assert code == 0, out
    return store, r["c0"], r["c1"]


def _index(store: Path) -> dict:
    return json.loads((store / "index.json").read_text())


def test_a_store_whose_files_were_swapped_or_replaced_is_one_line_naming_the_file(small_store):
    store, c0, c1 = small_store
    (entry,) = {e["machine"] for e in _index(store)["entries"]}
    a, b = store / entry / f"{c0}.parquet", store / entry / f"{c1}.parquet"
    a_bytes, b_bytes = a.read_bytes(), b.read_bytes()
    a.write_bytes(b_bytes)
    b.write_bytes(a_bytes)
    with pytest.raises(PerflabError, match=rf"{a.name}: holds commit {c1[:10]}, not the runs of"):
        history.history(store, repo=slowed_repo()["repo"], confirm=False)
    a.write_bytes(a_bytes)
    b.write_bytes(b_bytes)
    foreign = pd.DataFrame({"env_size": [1], "rep": [0], "ticks": [1.0], "status": ["ok"]})
    results.save(results.attach(foreign, {"experiment": "env-size", "commit": c1}), b)
    res = CliRunner().invoke(cli, ["history", "--store", str(store), "--no-confirm"])
    assert res.exit_code != 0 and "holds a 'env-size' result" in res.output
    assert "internal error" not in res.output
    before = b.read_bytes()
    code, out = _track(store, c1)
    assert code != 0 and "holds a 'env-size' result" in out
    assert b.read_bytes() == before  # nothing appended to the foreign file


def test_a_damaged_commit_file_is_said_before_measuring_and_one_damaged_meanwhile_kept(
    small_store,
):
    store, _, c1 = small_store
    kept = history.Store(store)
    entry = next(e for e in kept.entries() if e.sha == c1)
    runs = kept.runs(entry)
    path = store / entry.file
    path.write_bytes(b"")
    code, out = _track(store, c1)
    (line,) = set(out.strip().splitlines())  # before a CPU is chosen or a run made
    assert code == 1 and line == f"Error: {path}: empty file (not a result perflab wrote)", out
    path.write_bytes(b"PAR1")  # truncated while a track measured: its runs are kept aside
    with pytest.raises(PerflabError, match=r"this track's \d+ runs are kept in (\S+) and the "
                       "store is as it was: put the file back") as said:  # fmt: skip
        kept.add(entry, runs)
    spare = Path(re.search(r"are kept in (\S+) and", str(said.value))[1])
    assert len(results.load(spare)) == len(runs)
    spare.unlink()


def test_a_malformed_index_is_one_line(small_store):
    store = small_store[0]
    doc = _index(store)
    doc["entries"].append(doc["entries"][0])
    (store / "index.json").write_text(json.dumps(doc))
    with pytest.raises(PerflabError, match="is listed twice"):
        history.Store(store).entries()
    (store / "index.json").write_text("[" * 200_000 + "]" * 200_000)
    res = CliRunner().invoke(cli, ["history", "--store", str(store), "--no-confirm"])
    assert res.exit_code != 0 and "not a perflab history index (nested too deep)" in res.output
    entry = doc["entries"][0]
    for entries, said in ([[5], "entry 0 is not an object of names and values"],
                          [[entry | {"x": 1}], "entry 0 holds x, which no entry has"],
                          [[{k: v for k, v in entry.items() if k != "run"}], "entry 0 lacks run"],
                          [[entry | {"parents": 7}], "entry 0 holds a field of the wrong kind"],
                          [[entry | {"host": 7}], "entry 0 holds a field of the wrong kind"],
                          [[entry | {"build": " ".join(entry["build"])}], "commit .*: its texts"],
                          [[entry | {"run": {"./prog": 1}}], "commit .*: its texts"],
                          [[entry | {"run": ["./prog", 5]}], "commit .*: its texts"],
                          [[entry | {"seed": True}], "commit .*: its counts"],
                          [[entry | {"tracks": 10**40}], "commit .*: its counts"],
                          [{"a": 1}, "its entries are not a list"]):  # fmt: skip
        (store / "index.json").write_text(json.dumps(doc | {"entries": entries}))
        with pytest.raises(PerflabError, match=f"not a perflab history index \\({said}\\)$"):
            history.Store(store).entries()
    (store / "index.json").write_text("[1]")
    with pytest.raises(PerflabError, match=r"\(not a JSON object\)$"):
        history.Store(store).entries()


def _tracked_once(disk: Path) -> tuple[dict, Path, history.Entry]:
    """A store on `disk` holding one commit of the slowed repository: (the repo, store, entry)."""
    r = slowed_repo()
    store = disk / "store"
    store.mkdir()
    code, out = _track(store, r["c0"])
    assert code == 0, out
    (entry,) = history.Store(store).entries()
    return r, store, entry


def test_a_full_disk_under_the_store_keeps_the_track_s_runs_aside_and_names_both(tiny_disk):
    r, store, entry = _tracked_once(tiny_disk)
    index = (store / "index.json").read_bytes()
    before = len(history.Store(store).runs(entry))
    filler = fill_disk(tiny_disk, 0)
    code, out = _track(store, r["c0"])
    filler.unlink()
    assert code == 1
    lines = {x for x in out.splitlines() if x.startswith("Error:")}  # stderr in both
    assert len(lines) == 1, out
    (line,) = lines
    path = store / entry.machine / f"{r['c0']}.parquet"
    assert line.startswith(f"Error: {path}: cannot write (No space left on device); this "
                           f"track's {before} runs are kept in ")  # fmt: skip
    spare = Path(line.split(" are kept in ")[1].split(" and the store")[0])
    assert spare.parent.name == "unsaved" and spare.parent.stat().st_mode & 0o077 == 0
    kept = results.load(spare)
    assert len(kept) == before and results.metadata(kept)["commit"] == r["c0"]
    assert (store / "index.json").read_bytes() == index  # nothing appended
    assert len(history.Store(store).runs(entry)) == before
    spare.unlink()


def test_a_store_made_read_only_is_one_line_before_building_and_a_track_s_runs_kept(tiny_disk):
    r, store, entry = _tracked_once(tiny_disk)
    kept = history.Store(store)
    runs = kept.runs(entry)
    subprocess.run(["mount", "-o", "remount,ro", tiny_disk], check=True)
    code, out = _track(store, r["c0"])
    (line,) = set(out.strip().splitlines())  # before a CPU is chosen (stderr twice)
    assert code == 1 and line.endswith("index.json.lock: Read-only file system"), out
    with pytest.raises(PerflabError, match=r"cannot write \(Read-only file system\); this "
                       r"track's \d+ runs are kept in (\S+) and the store is as it was: make "
                       "the store writable") as said:  # fmt: skip
        kept.add(entry, runs)  # a track whose store was made read-only while it measured
    spare = Path(re.search(r"are kept in (\S+) and", str(said.value))[1])
    assert len(results.load(spare)) == len(runs)
    spare.unlink()


def test_track_takes_the_children_s_controls_its_warnings_name(tmp_path):
    r = slowed_repo()
    code, out = _track(tmp_path, r["c0"], "--no-rt", "--timeout", "7", "--cpu", "0")
    assert code == 0, out
    (entry,) = history.Store(tmp_path).entries()
    params = results.metadata(history.Store(tmp_path).runs(entry))["params"]
    assert (params["rt"], params["timeout"], params["cpus"]) == (False, 7.0, [0])
    code, out = _track(tmp_path / "other", r["c0"], "--cpu", "99")
    assert code != 0 and "Error: CPU 99 does not exist" in out
    assert not (tmp_path / "other").exists()  # refused before a store or a build
    with pytest.raises(PerflabError, match=r"^controls: jobs is not one of cpus, timeout, rt$"):
        history.track(r["c0"], ["true"], ["true"], repo=r["repo"], store=tmp_path,
                      controls={"jobs": 2})  # fmt: skip
    with pytest.raises(PerflabError, match=r"^rt: 'no' is not True or False$"):
        history.history(tmp_path, controls={"rt": "no"})


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"setups": 0}, r"^--setups must be at least 1, not 0$"),
        ({"repeat": 0}, r"^--repeat must be at least 1, not 0$"),
        ({"seed": -1}, r"^--seed must be 0 to 4294967295, not -1$"),
        ({"seed": 2**32}, r"^--seed must be 0 to 4294967295, not 4294967296$"),
    ],
)
def test_the_verbs_on_commits_refuse_a_comparison_out_of_bounds_as_their_options_do(
    tmp_path, given, said
):
    """One plan (plan/commits.py) checks the three functions' layouts, pairs and seed, before
    a repository or a store is looked at; the options refuse the same values."""
    from perflab.lab import bisect

    for verb in (lambda: bisect.bisect("a", "b", ["true"], ["true"], repo=tmp_path, **given),
                 lambda: history.track("a", ["true"], ["true"], repo=tmp_path, **given),
                 lambda: history.history(tmp_path, **given)):  # fmt: skip
        with pytest.raises(PerflabError, match=said):
            verb()
    ((name, value),) = given.items()
    commands = ["--build", "true", "--run", "true"]
    for words in (["bisect", "a", "b", *commands], ["track", *commands], ["history"]):
        res = CliRunner().invoke(cli, [*words, f"--{name}", str(value), "--repo", str(tmp_path)])
        assert res.exit_code == 2 and f"--{name}" in res.output, res.output


def test_a_commit_file_gone_from_the_store_is_refused_not_tracked_anew(tmp_path):
    r = slowed_repo()
    code, out = _track(tmp_path, r["c0"])
    assert code == 0, out
    (entry,) = history.Store(tmp_path).entries()
    (tmp_path / entry.machine / f"{r['c0']}.parquet").unlink()
    index = (tmp_path / "index.json").read_bytes()
    code, out = _track(tmp_path, r["c0"])
    assert code == 1 and f"{r['c0']}.parquet: missing, though the index lists" in out
    assert (tmp_path / "index.json").read_bytes() == index
    assert not (tmp_path / entry.machine / f"{r['c0']}.parquet").exists()


def test_a_full_disk_under_a_confirmation_keeps_its_runs_aside(tracked, tiny_disk):
    store = tiny_disk / "store"
    shutil.copytree(tracked, store, ignore=shutil.ignore_patterns("confirm-*"))
    filler = fill_disk(tiny_disk, 0)
    res = CliRunner().invoke(cli, ["history", "--store", str(store), "--repo",
                                   slowed_repo()["repo"], *SMALL])  # fmt: skip
    filler.unlink()
    said = res.output + (res.stderr if res.stderr_bytes else "")
    assert res.exit_code == 1, said
    line = next(x for x in said.splitlines() if x.startswith("Error:"))
    assert "confirm-" in line and "cannot write (No space left on device)" in line
    assert "the confirming comparison's" in line and "/unsaved/" in line
    spare = Path(line.split(" runs are kept in ")[1].split(" and the store")[0])
    assert results.metadata(results.load(spare))["experiment"] == "compare"
    spare.unlink()


def test_a_metric_no_run_measured_is_one_line_without_a_library_s_warning(tracked, recwarn):
    res = CliRunner().invoke(cli, ["history", "--store", str(tracked), "--metric", "cycles",
                                   "--no-confirm"])  # fmt: skip
    assert res.exit_code == 1  # the program runs no probe: no machine counts its cycles
    assert "no commit in the store has a run that measured cycles" in res.output
    assert "RuntimeWarning" not in res.output and not [w for w in recwarn]


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_an_index_that_is_not_a_file_is_named_as_what_it_is(tmp_path, kind):
    index = tmp_path / "index.json"
    os.mkfifo(index) if kind == "fifo" else index.mkdir()
    res = CliRunner().invoke(cli, ["history", "--store", str(tmp_path), "--no-confirm"])
    said = "a FIFO" if kind == "fifo" else "a directory"
    assert res.exit_code == 1 and f"index.json: is {said}, not a perflab history index" in (
        res.output
    )
