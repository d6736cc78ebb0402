"""Next-edit prompt formats, as the models made for next edits were trained on them (SPEC M).

**Sweep** (sweepai/sweep-next-edit, Qwen2.5-Coder based): `<|file_sep|>` sections joined by line
breaks — context files, each recent edit as `{path}.diff` with `original:` and `updated:` blocks,
the window around the cursor before the edits (`original/{path}`) and now (`current/{path}`),
and an open `updated/{path}` section the model continues with the window as it should be. Greedy,
stopped at the next `<|file_sep|>` or `</s>`. (The reference: Sweep's `run_model.py`.)

**Zeta** (zed-industries/zeta, Zed's edit prediction): an instruction, the user's edits as
unified-diff hunks (`User edited "path":` and a ```diff block each), and the excerpt with its
editable region marked and the cursor in it; the model answers with the editable region
rewritten between the same markers (`zeta_rewrite` reads it). (The reference: Zed's zeta1 prompt,
and its dataset.)

The texts here are what the model sees, byte for byte; a document or edit holding one of a
format's special tokens would change the prompt's structure, so it is not sent (`None`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from margin.core.next_edit.spans import common_ends

FILE_SEP = "<|file_sep|>"
SWEEP_STOP = (FILE_SEP, "</s>")
SWEEP_SPECIAL = (FILE_SEP, "</s>", "<|endoftext|>", "<|im_start|>", "<|im_end|>")

ZETA_INSTRUCTION = (
    "### Instruction:\n"
    "You are a code completion assistant and your task is to analyze user edits and then rewrite an "
    "excerpt that the user provides, suggesting the appropriate edits within the excerpt, taking "
    "into account the cursor location.\n\n"
    "### User Edits:\n\n")
ZETA_EXCERPT = "\n\n### User Excerpt:\n\n"
ZETA_RESPONSE = "\n\n### Response:\n"
CURSOR = "<|user_cursor_is_here|>"
START_OF_FILE = "<|start_of_file|>"
REGION_START = "<|editable_region_start|>"
REGION_END = "<|editable_region_end|>"
ZETA_SPECIAL = (CURSOR, START_OF_FILE, REGION_START, REGION_END, "<|endoftext|>")


@dataclass(frozen=True)
class RecentEdit:
    """One of the user's recent edits, as a prompt shows it: the whole lines it touched, before
    and after (no final line break), and up to three unchanged lines on each side."""

    path: str
    original: str
    updated: str
    line: int = 0
    """the first line it touched (from 0)"""
    context_before: str = ""
    context_after: str = ""


def _clean(texts: Sequence[str], special: Sequence[str]) -> bool:
    return not any(token in text for text in texts for token in special)


# ---- Sweep ------------------------------------------------------------------------------------

def sweep(context_files: Sequence[tuple[str, str]], edits: Sequence[RecentEdit], path: str,
          original: str, current: str) -> str | None:
    """The Sweep prompt: `context_files` (path, text), the recent `edits` oldest first, and the
    window of `path` before the edits (`original`) and now (`current`)."""
    parts: list[str] = []
    for name, text in context_files:
        parts += [FILE_SEP + name, text]
    for edit in edits:
        parts += [f"{FILE_SEP}{edit.path}.diff", "original:", edit.original, "updated:", edit.updated]
    parts += [f"{FILE_SEP}original/{path}", original, f"{FILE_SEP}current/{path}", current, f"{FILE_SEP}updated/{path}"]
    shown = [path, original, current, *(t for pair in context_files for t in pair),
             *(t for e in edits for t in (e.path, e.original, e.updated))]
    return "\n".join(parts) if _clean(shown, SWEEP_SPECIAL) else None


# ---- Zeta -------------------------------------------------------------------------------------

def _quoted(path: str) -> str:
    """A path as Zeta's prompts quote it (Rust's debug format of a string)."""
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _range(start: int, length: int) -> str:
    """A hunk header's range as the `similar` crate writes it (Zed's diffs): the first line (from 1)
    alone for one line; else with its length, an empty range naming the line before it."""
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _lines(block: str) -> list[str]:
    """The lines of a block in which each line ends with a line break."""
    return block[:-1].split("\n") if block else []


def zeta_hunk(edit: RecentEdit) -> str:
    """The edit as a unified-diff hunk (header `@@ -a,b +c,d @@`, up to three lines of context each
    side, each line ending with a line break; no file header lines): the lines it touched, less
    those the same before and after, removed and added where the edit made them."""
    old, new = edit.original.split("\n"), edit.updated.split("\n")
    same, tail = common_ends(old, new)
    removed, added = old[same : len(old) - tail], new[same : len(new) - tail]
    above = (_lines(edit.context_before) + old[:same])[-3:]
    below = (old[len(old) - tail :] + _lines(edit.context_after))[:3]
    first = edit.line + same - len(above)
    header = f"@@ -{_range(first, len(above) + len(removed) + len(below))} " \
             f"+{_range(first, len(above) + len(added) + len(below))} @@\n"
    return header + "".join([f" {line}\n" for line in above] + [f"-{line}\n" for line in removed]
                            + [f"+{line}\n" for line in added] + [f" {line}\n" for line in below])


def zeta_event(edit: RecentEdit) -> str:
    return f"User edited {_quoted(edit.path)}:\n```diff\n{zeta_hunk(edit)}\n```"


def zeta_excerpt(path: str, text: str, context: tuple[int, int], editable: tuple[int, int], cursor: int) -> str:
    """The excerpt of `text`: the `context` span (offsets) shown, the `editable` span in it marked,
    the cursor marked at `cursor`. The editable span ends at the end of a line."""
    (low, high), (start, end) = context, editable
    if not low <= start <= cursor <= end <= high:
        raise ValueError("the cursor must be in the editable span, and that in the context")
    return (f"```{path}\n" + (f"{START_OF_FILE}\n" if low == 0 else "") + text[low:start]
            + f"{REGION_START}\n" + text[start:cursor] + CURSOR + text[cursor:end] + f"\n{REGION_END}"
            + text[end:high] + "\n```")


def zeta(edits: Sequence[RecentEdit], excerpt_path: str, text: str, context: tuple[int, int],
         editable: tuple[int, int], cursor: int) -> str | None:
    """The Zeta prompt: the recent `edits` oldest first, and the excerpt of the document."""
    if not _clean([text, excerpt_path, *(e.original + e.updated + e.context_before + e.context_after for e in edits)],
                  ZETA_SPECIAL):
        return None
    events = "\n\n".join(zeta_event(edit) for edit in edits)
    return ZETA_INSTRUCTION + events + ZETA_EXCERPT + zeta_excerpt(excerpt_path, text, context, editable, cursor) \
        + ZETA_RESPONSE


def zeta_rewrite(answer: str) -> str | None:
    """The editable region as a Zeta answer rewrote it — what follows the region's start marker
    (and its line break) up to the end of the answer, which stops at the end marker — with the
    cursor marker taken out; None when the answer holds no start marker (no rewrite)."""
    at = answer.find(REGION_START)
    if at < 0:
        return None
    region = answer[at + len(REGION_START) :].removeprefix("\n").split(REGION_END, 1)[0]
    return region.removesuffix("\n").replace(CURSOR, "")
