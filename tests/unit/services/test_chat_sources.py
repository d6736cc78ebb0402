"""A new kind of context through the chat service: its source registered once, its input gathered
by its own gatherer, its text in the request sent and its section in the budget report."""

from __future__ import annotations

from margin.core.sources import registry
from margin.core.where import Where
from margin.services.chat import Ask
from margin.services.gather import GATHERERS, Job
from tests.fakes.fake_provider import WS
from tests.unit.core.diagnostics_source import DIAGNOSTICS, HEADING


async def test_a_new_source_is_gathered_and_sent(services, provider, monkeypatch):
    at = [source.name for source in registry.SOURCES].index("snippets") + 1
    monkeypatch.setattr(registry, "SOURCES", [*registry.SOURCES[:at], DIAGNOSTICS, *registry.SOURCES[at:]])
    seen: list[Job] = []

    async def problems(job: Job) -> list[str]:
        seen.append(job)
        return [f"{job.ask.where.text_document}:3: undefined name 'totl'"]

    monkeypatch.setitem(GATHERERS, DIAGNOSTICS.name, problems)
    services.app.files.open(f"{WS}/a.py", "python", 1, "total = 1\nprint(totl)\n")
    provider.script(["A typo."])
    outcome = await services.chat.chat(Ask("why does it fail?", Where(f"{WS}/a.py")))
    (request,) = provider.requests
    prompt = "\n\n".join(m.content for m in request.messages)
    assert f"{HEADING}\n{WS}/a.py:3: undefined name 'totl'" in prompt
    assert prompt.index(HEADING) < prompt.index("File a.py") < prompt.index("why does it fail?")
    report = outcome.budget.section("diagnostics")
    assert report.kept == 1 and report.tokens > 0
    assert [s.name for s in outcome.budget.sections].index("diagnostics") == at
    assert [job.ask.message for job in seen] == ["why does it fail?"]
