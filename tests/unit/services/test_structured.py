"""Fitting a prompt to the window by its exact count: a prompt the tokenizer counts over the
limit is assembled again with less room, and if it still does not fit it is never sent."""

from __future__ import annotations

from dataclasses import dataclass

from margin.core.budget import Item, Plan, Section, Window, plan
from margin.core.llm import ChatMessage
from margin.core.tokens.counter import TokenCounter
from margin.services.structured import FIT_ROUNDS, fit_prompt


@dataclass
class Assembly:
    messages: list[ChatMessage]
    plan: Plan


class FramingCounter(TokenCounter):
    """Counts a text as its words, and a whole prompt as its words plus `framing` the
    estimate never sees."""

    name, exact = "words", True

    def __init__(self, framing: int) -> None:
        self.framing = framing

    async def count_texts(self, texts):
        return [len(t.split()) for t in texts]

    async def count_chat(self, messages, tools=()):
        return sum(len(m.content.split()) for m in messages) + self.framing


def assembler(history_words: int, rooms: list[int]):
    def assemble(room: int) -> Assembly:
        rooms.append(room)
        result = plan([Section("system", (Item("system", 10),), required=True, is_system=True),
                       Section("history", tuple(Item(f"turn {i}", 10) for i in range(history_words // 10)))], Window(room, 100, "words", True), margin=0)
        kept = sum(item.tokens for item in result.section("history").kept)
        return Assembly([ChatMessage("system", "w " * 10), ChatMessage("user", "w " * kept)], result)
    return assemble


async def test_framing_the_estimate_missed_is_taken_out_of_the_history():
    rooms: list[int] = []
    assembly, counted = await fit_prompt(assembler(1000, rooms), FramingCounter(framing=35), window=600)
    assert counted <= assembly.plan.limit == 500 and assembly.plan.over_budget is None
    assert len(rooms) == 2 and rooms[1] < 600  # assembled once more, with less room
    assert assembly.plan.context_window == 600  # the report keeps the real window


class StubbornCounter(FramingCounter):
    """Counts every prompt as just over the limit, however much is taken out."""

    async def count_chat(self, messages, tools=()):
        return 501


async def test_a_prompt_that_never_fits_by_its_count_is_over_budget_not_sent():
    rooms: list[int] = []
    assembly, counted = await fit_prompt(assembler(1000, rooms), StubbornCounter(framing=0), window=600)
    assert len(rooms) == FIT_ROUNDS
    assert counted > assembly.plan.limit
    assert assembly.plan.over_budget and f"counts {counted} tokens" in assembly.plan.over_budget
