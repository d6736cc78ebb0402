"""What the generator scripts share: write the files they generate (only those whose text
changed), or with --check write nothing and name each file that is out of date."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path


def out_of_date(files: dict[Path, str]) -> list[Path]:
    """The files whose committed text differs from `files`' (or that do not exist)."""
    return [path for path, text in files.items()
            if not path.exists() or path.read_text(encoding="utf-8") != text]


def _none(files: dict[Path, str]) -> Iterable[Path]:
    return ()


def stale(generated: Callable[[], dict[Path, str]],
          obsolete: Callable[[dict[Path, str]], Iterable[Path]] = _none) -> list[Path]:
    """What --check reports: the generated files out of date, and those no longer written."""
    files = generated()
    return out_of_date(files) + sorted(obsolete(files))


def main(argv: list[str] | None, *, description: str, repo: Path, command: str,
         generated: Callable[[], dict[Path, str]],
         obsolete: Callable[[dict[Path, str]], Iterable[Path]] = _none) -> int:
    """The command line of a generator: `generated()` is what is written, `obsolete(files)` the
    files it wrote before and no longer writes (removed); --check names what `stale` finds."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each file that is out of date")
    args = parser.parse_args(argv)
    if args.check:
        paths = stale(generated, obsolete)
        for path in paths:
            print(f"{path.relative_to(repo)} is out of date: run {command}", file=sys.stderr)
        return 1 if paths else 0
    files = generated()
    for path in sorted(obsolete(files)):
        path.unlink()
        print(f"removed {path.relative_to(repo)}")
    for path in out_of_date(files):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[path], encoding="utf-8")
        print(f"wrote {path.relative_to(repo)}")
    return 0
