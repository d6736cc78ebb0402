"""Open files as a prompt source (SPEC D, seed 000 option A): each file's block is a context
message stored in the thread where it is first sent, retained while it is unchanged and in the
window, sent again when the budget dropped it or it changed. Priority: the active file, the
files edited most recently, the other open files; the lowest is cut first, after snippets."""

from __future__ import annotations

from collections.abc import Sequence

from margin.core.budget import Section, SectionResult
from margin.core.sources.base import Draft, FileRef, Part, Source, items_of, sent_parts


class Files(Source):
    """Input: the files the prompt may include, most important first."""

    name, at, default = "files", 90, ()

    def contexts(self, given: Sequence[FileRef]) -> Sequence[FileRef]:
        return given

    def section(self, draft: Draft) -> Section:
        items = items_of(draft.input(self), "file", draft)[::-1]  # dropped lowest priority first
        return Section(self.name, tuple(items), drop_reason="lower priority than the files kept")

    def render(self, kept: SectionResult, draft: Draft) -> list[Part]:
        return sent_parts([item.payload for item in kept.kept][::-1], draft)  # priority order


FILES = Files()
