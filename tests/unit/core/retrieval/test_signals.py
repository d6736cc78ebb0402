"""Git signals: parsing `git log` output, recency, co-change and commit subjects."""

from __future__ import annotations

from margin.core.retrieval.signals import Commit, History, HistoryWeights, parse_git_log

LOG = ("\x1e1700000300\x1fFix redirect loop (#12)\n\nsrc/client.py\ntests/test_client.py\n"
       "\x1e1700000200\x1fAdd cookie jar\n\nsrc/cookies.py\n"
       "\x1e1700000100\x1fFix client timeout\n\nsrc/client.py\nsrc/config.py\n")


def test_parse_git_log_reads_timestamps_subjects_and_paths_newest_first():
    commits = parse_git_log(LOG)
    assert commits == [
        Commit(1700000300, ("src/client.py", "tests/test_client.py"), "Fix redirect loop (#12)"),
        Commit(1700000200, ("src/cookies.py",), "Add cookie jar"),
        Commit(1700000100, ("src/client.py", "src/config.py"), "Fix client timeout"),
    ]
    assert parse_git_log("") == []


def test_recency_favours_files_changed_often_and_lately():
    history = History(parse_git_log(LOG), HistoryWeights(half_life=1.0))
    assert history.recency["src/client.py"] == 1.0
    assert history.recency["tests/test_client.py"] > history.recency["src/cookies.py"] > history.recency["src/config.py"]
    assert "src/other.py" not in history.recency


def test_cochange_counts_commits_shared_with_the_given_files():
    history = History(parse_git_log(LOG))
    together = history.cochange(["src/client.py"])
    assert set(together) == {"tests/test_client.py", "src/config.py"}
    assert together["tests/test_client.py"] == 1.0 > together["src/config.py"] > 0


def test_sweeping_commits_give_no_cochange_and_no_subject_terms():
    paths = tuple(f"f{i}.py" for i in range(30))
    history = History([Commit(1, paths, "Reformat everything")], HistoryWeights(max_commit_files=20))
    assert history.cochange(["f0.py"]) == {}
    assert history.subjects.score(["reformat"]) == {}
    assert history.recency["f0.py"] == 1.0


def test_subjects_of_past_commits_are_searchable_per_file():
    history = History(parse_git_log(LOG))
    scores = history.subjects.score(["redirect"])
    assert set(scores) == {"src/client.py", "tests/test_client.py"}
