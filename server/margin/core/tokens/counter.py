"""The TokenCounter interface, in-process counters with a shared count cache, and the
heuristic: the token bound, for models Margin cannot count exactly.

A counter counts a text, and a whole chat prompt as the backend will see it: message contents
plus the model family's framing (role markers, separators, reply priming). Counters that run
in-process (`LocalCounter`) count synchronously and cache counts by content hash, so a text is
tokenized once however often it is budgeted; a counter that asks the model server (llama.cpp)
is asynchronous and lives in adapters/.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from margin.core.llm import ChatMessage
from margin.core.text_memo import TextMemo
from margin.core.tokens.bound import token_bound
from margin.core.tokens.cuts import LineCuts

T = TypeVar("T")

LONGEST_TOKEN_BYTES = 256
"""No vocabulary Margin counts with has a token longer than this many bytes (o200k_base's and
cl100k_base's longest are 128, the token bound's table's 31: tests/unit/core/tokens/test_fewest.py),
so a text of n characters (at least n bytes) costs at least n / 256 tokens with any of them."""
OFF_LOOP_CHARS = 64 * 1024
"""Texts not counted yet of more characters than this, in one call, are counted in a worker
thread: a request's counting never holds the event loop (and every other request) for long."""


COUNTING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="margin-count")
"""the worker threads counting and assembly run in: of their own, so that they never wait behind
background work (the retrieval index's) in the default executor"""


async def off_loop(work: Callable[[], T]) -> T:
    """`work()` in a counting thread."""
    return await asyncio.get_running_loop().run_in_executor(COUNTING, work)


def fewest_tokens(text: str) -> int:
    """Tokens `text` costs at least, with any tokenizer: a check at the cost of a length, before
    any counting, of what can never fit a window."""
    return len(text) // LONGEST_TOKEN_BYTES


class TokenCounter(ABC):
    name: str
    """e.g. `tiktoken:o200k_base`, `tekken:tekken_240911@v7`, `llama.cpp`, `heuristic`"""
    exact: bool
    """counts are the model's own (False for the heuristic)"""

    @abstractmethod
    async def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each text, counted on its own."""

    @abstractmethod
    async def count_chat(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] = ()) -> int:
        """Tokens in the whole prompt `messages` (and the definitions of `tools`) make, framing
        and reply priming included."""


class CountCache:
    """Token counts by content hash (blake2b, 128 bits), least recently used evicted. Hashing
    runs at memory speed, far faster than tokenizing, so a hit is nearly free.

    In front of it, the counts of the texts seen lately by the text itself (up to `front_chars`
    of text held): a prompt is counted from the same strings request after request (the stored
    thread, the open files' blocks), and a string keeps its hash, so finding one there costs a
    dict lookup, not a pass over its bytes."""

    def __init__(self, max_entries: int = 200_000, front_chars: int = 8 * 1024 * 1024) -> None:
        self._counts: OrderedDict[bytes, int] = OrderedDict()
        self._max = max_entries
        self._front: TextMemo[int] = TextMemo(front_chars)
        self._lock = threading.Lock()
        """counting may run in a worker thread (LocalCounter) while the loop counts too"""
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def get(self, text: str) -> int | None:
        found = self._front.get(text)
        if found is not None:
            self.hits += 1
            return found
        key = self.key(text)
        with self._lock:
            found = self._counts.get(key)
            if found is None:
                self.misses += 1
                return None
            self._counts.move_to_end(key)
            self.hits += 1
            self._front.put(text, found)
        return found

    def put(self, text: str, count: int) -> None:
        key = self.key(text)
        with self._lock:
            self._counts[key] = count
            if len(self._counts) > self._max:
                self._counts.popitem(last=False)
            self._front.put(text, count)

    def unknown_chars(self, texts: Sequence[str]) -> int:
        """Characters of the texts whose counts are not held (by the text itself: a cheap look)."""
        return sum(len(text) for text in texts if self._front.get(text) is None)

    def get_or_count(self, text: str, count: Callable[[str], int]) -> int:
        found = self._front.get(text)  # most texts of a prompt: `get`'s first step, inline
        if found is not None:
            self.hits += 1
            return found
        found = self.get(text)
        if found is None:
            found = count(text)
            self.put(text, found)
        return found


class ChatFraming(ABC):
    """How a model family wraps messages into one prompt, in tokens."""

    json_tool_results = False
    """tool answers are sent as JSON strings (escaped), not as they are"""

    @abstractmethod
    def count(self, messages: Sequence[ChatMessage], count_text: Callable[[str], int]) -> int: ...


class OpenAIFraming(ChatFraming):
    """OpenAI chat models: each message costs its role and content plus 3 tokens of markers,
    and the reply is primed with 3 more (OpenAI's published counting recipe)."""

    PER_MESSAGE = 3
    REPLY_PRIMING = 3

    def count(self, messages: Sequence[ChatMessage], count_text: Callable[[str], int]) -> int:
        total, roles = self.REPLY_PRIMING, dict[str, int]()
        for message in messages:
            if (role := roles.get(message.role)) is None:
                role = roles[message.role] = count_text(message.role)
            total += self.PER_MESSAGE + role + count_text(message.content)
        return total


class LocalCounter(TokenCounter):
    """Counts in-process with `encode_len` (a tokenizer's length function), caching by content."""

    def __init__(
        self,
        name: str,
        encode_len: Callable[[str], int],
        framing: ChatFraming,
        *,
        exact: bool = True,
        cache: CountCache | None = None,
        line_cuts: LineCuts | None = None,
    ) -> None:
        self.name = name
        self.exact = exact
        self.line_cuts = line_cuts
        """where a text may be cut with counts that add up exactly (core/tokens/cuts.py), when known"""
        self._encode_len = encode_len
        self.framing = framing
        self.cache = cache if cache is not None else CountCache()

    def count(self, text: str) -> int:
        if not text:
            return 0
        return self.cache.get_or_count(text, self._encode_len)

    async def count_texts(self, texts: Sequence[str]) -> list[int]:
        if self.cache.unknown_chars(texts) > OFF_LOOP_CHARS:
            return await off_loop(lambda: [self.count(text) for text in texts])
        return [self.count(text) for text in texts]

    def count_chat_now(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] = ()) -> int:
        if not tools and not any(m.tool_calls or m.role == "tool" for m in messages):
            return self.framing.count(messages, self.count)
        return tool_prompt_tokens(messages, tools, self.framing, self.count)

    async def count_chat(self, messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]] = ()) -> int:
        if self.cache.unknown_chars([m.content for m in messages]) > OFF_LOOP_CHARS:
            return await off_loop(lambda: self.count_chat_now(messages, tools))
        return self.count_chat_now(messages, tools)


TOOLS_OVERHEAD = 32
"""Tokens, beyond their JSON, that tool definitions are allowed: the templates' wrapping text
(OpenAI's `namespace functions`, Tekken's [AVAILABLE_TOOLS] ... [/AVAILABLE_TOOLS])"""
TOOL_CALL_OVERHEAD = 16
"""Tokens, beyond its name and arguments, one call is allowed: its id and markers"""
TOOL_RESULT_OVERHEAD = 16
"""Tokens, beyond its content, a tool's answer is allowed: the call's id and markers"""


_TOOLS_JSON: dict[int, tuple[Sequence[dict[str, Any]], str]] = {}


def tools_json(tools: Sequence[dict[str, Any]]) -> str:
    """Tool definitions as compact JSON, as counted: made once for each list of them (a prompt
    offers the same constant lists, the recall tool's, request after request). Kept by the
    list's identity, with the list itself, so a new list at a reused id is not taken for it."""
    kept = _TOOLS_JSON.get(id(tools))
    if kept is None or kept[0] is not tools:
        if len(_TOOLS_JSON) >= 16:
            _TOOLS_JSON.clear()
        kept = _TOOLS_JSON[id(tools)] = (tools, json.dumps(list(tools), separators=(",", ":")))
    return kept[1]


def tool_prompt_tokens(messages: Sequence[ChatMessage], tools: Sequence[dict[str, Any]],
                       framing: ChatFraming, count: Callable[[str], int]) -> int:
    """A prompt with tools and tool calls, for an in-process tokenizer: the framing of its
    plain messages counted as ever, and on top the tools' definitions as compact JSON, each
    call's name and arguments and each tool answer, with generous allowances for their markers
    (never fewer than the templates use: tests/unit/core/tokens/test_tool_counts.py)."""
    plain = [m if not m.tool_calls and m.tool_call_id is None else ChatMessage(m.role, m.content)
             for m in messages if m.role != "tool"]
    total = framing.count(plain, count)
    if tools:
        total += count(tools_json(tools)) + TOOLS_OVERHEAD
    for message in messages:
        for call in message.tool_calls:
            total += count(call.name) + count(call.arguments) + count(call.id) + TOOL_CALL_OVERHEAD
        if message.role == "tool":
            content = json.dumps(message.content, ensure_ascii=False) if framing.json_tool_results else message.content
            total += count(content) + count(message.tool_call_id or "") + TOOL_RESULT_OVERHEAD
    return total


# --- the heuristic -----------------------------------------------------------------------

def heuristic_count(text: str) -> int:
    """A count no covered tokenizer goes over: the token bound (core/tokens/bound.py)."""
    return token_bound(text)


class HeuristicFraming(ChatFraming):
    """Generous framing for unknown templates: 8 tokens a message, 8 to prime the reply."""

    def count(self, messages: Sequence[ChatMessage], count_text: Callable[[str], int]) -> int:
        return 8 + sum(8 + count_text(message.content) for message in messages)


def heuristic_counter(cache: CountCache | None = None) -> LocalCounter:
    return LocalCounter("heuristic", heuristic_count, HeuristicFraming(), exact=False, cache=cache)
