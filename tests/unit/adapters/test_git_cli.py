"""adapters.git_cli against a real git repository: when HEAD moved, the recent commits with
their paths relative to the folder (a repository's subfolder too), and nothing outside one."""

from __future__ import annotations

import subprocess
from pathlib import Path

from margin.adapters.git_cli import GitCommandHistory
from tests.unit.adapters.test_workspace_scan import tree


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
                   check=True, capture_output=True)


async def test_commits_newest_first_with_paths_relative_to_the_folder(tmp_path):
    root = tmp_path / "repo"
    tree(root, {"a.py": "a = 1\n", "sub/b.py": "b = 1\n"})
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "Initial import")
    (root / "a.py").write_text("a = 2\n")
    git(root, "commit", "-qam", "Change a only")
    (root / "sub/b.py").write_text("b = 2\n")
    git(root, "commit", "-qam", "Change b only")

    whole = GitCommandHistory(root)
    assert whole.head_moved() is not None
    commits = await whole.commits()
    assert [(c.subject, c.paths) for c in commits] == [("Change b only", ("sub/b.py",)), ("Change a only", ("a.py",)),
                                                       ("Initial import", ("a.py", "sub/b.py"))]
    sub = GitCommandHistory(root / "sub")
    assert sub.head_moved() == whole.head_moved()  # the repository's HEAD, found above the folder
    assert [(c.subject, c.paths) for c in await sub.commits()] == [("Change b only", ("b.py",)), ("Change a only", ()),
                                                                  ("Initial import", ("b.py",))]


async def test_outside_a_repository_there_is_no_history(tmp_path):
    history = GitCommandHistory(tmp_path)
    assert history.head_moved() is None
    assert await history.commits() is None
