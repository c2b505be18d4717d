"""A reasoning model's thinking, kept apart from its answer.

Local reasoning models (DeepSeek-R1, Qwen3 served by vLLM, Ollama or llama.cpp without a
reasoning parser) write their thinking into the answer's content, first, between
``<think>`` and ``</think>``: taken for the answer, it failed structured output once (a
retry paid for) and stayed in a text output. ``split_thinking`` takes a whole answer apart;
``ThinkTagSplitter`` does the same to a stream, whose tags may arrive cut across chunks.

Only a block at the start of the content (after white space) is thinking, as the models
write it: an answer that mentions the tag later (a reply about HTML, say) is left whole.
pydantic-ai's ``split_content_into_text_and_thinking`` splits every tagged block anywhere.
A block never closed (the answer cut off by ``max_tokens`` mid-thought) is all thinking.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tinyagents._record import Record

#: The tags reasoning models put around their thinking (pydantic-ai's DEFAULT_THINKING_TAGS).
THINK_TAGS: tuple[str, str] = ("<think>", "</think>")


def split_thinking(content: str, tags: tuple[str, str] = THINK_TAGS) -> tuple[str, str]:
    """``(thinking, text)`` of an answer's ``content``: the block between ``tags`` it starts
    with (stripped of the white space around it) and what follows it (``""`` and ``content``
    when it starts with no block)."""
    start, end = tags
    body = content.lstrip()
    if not body.startswith(start):
        return "", content
    body = body[len(start) :]
    closed = body.find(end)
    if closed < 0:
        return body.strip(), ""
    return body[:closed].strip(), body[closed + len(end) :].lstrip()


@dataclass(slots=True, kw_only=True, eq=False, repr=False)
class ThinkTagSplitter(Record):
    """``split_thinking`` for a stream: ``feed`` each piece of content as it arrives, and it
    returns the ``(thinking, text)`` that piece adds; ``flush`` at the end returns what it
    held back. It holds back only what may still turn out to be part of a tag (the start of
    the content while it may be ``<think>``, the end of the thinking while it may be
    ``</think>``), so text streams as it comes once the thinking is over."""

    tags: tuple[str, str] = THINK_TAGS
    #: ``start``: nothing but white space yet; ``thinking``: inside the block; ``after``: the
    #: block just ended (white space before the text is dropped); ``text``: the answer
    state: Literal["start", "thinking", "after", "text"] = "start"
    held: str = ""
    #: all the thinking so far (stripped at the end, as ``split_thinking`` strips it)
    thought: list[str] = field(default_factory=list)

    def feed(self, piece: str) -> tuple[str, str]:
        """The thinking and the text that ``piece``, the next piece of content, adds."""
        start, end = self.tags
        if self.state == "text":
            return "", piece
        held = self.held + piece
        self.held = ""
        if self.state == "after":
            held = held.lstrip()
            if not held:
                return "", ""
            self.state = "text"
            return "", held
        if self.state == "start":
            body = held.lstrip()
            if len(body) < len(start) and start.startswith(body):
                self.held = held  # still may be the tag: wait for more
                return "", ""
            if not body.startswith(start):
                self.state = "text"
                return "", held
            self.state = "thinking"
            held = body[len(start) :]
            if not self.thought:
                held = held.lstrip()  # the white space after the tag is not thinking
        closed = held.find(end)
        if closed >= 0:
            thinking = held[:closed]
            self.state = "after"
            after = self.feed(held[closed + len(end) :])[1]
            return self._thought(thinking.rstrip()), after
        keep = _partial_tag(held, end)
        if keep:
            self.held = held[-keep:]
            held = held[:-keep]
        return self._thought(held), ""

    def flush(self) -> tuple[str, str]:
        """What was held back at the end of the stream: a start that never became the tag is
        text; an end that never became ``</think>`` is thinking (the block never closed)."""
        held, self.held = self.held, ""
        if self.state == "start":
            self.state = "text"
            return "", held
        if self.state == "thinking":
            return self._thought(held), ""
        return "", ""

    @property
    def thinking(self) -> str:
        """All the thinking fed so far, without the white space around it."""
        return "".join(self.thought).strip()

    def _thought(self, piece: str) -> str:
        if piece:
            self.thought.append(piece)
        return piece


def _partial_tag(text: str, tag: str) -> int:
    """How many characters at the end of ``text`` are the start of ``tag`` (0: none)."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


def joined(*parts: str) -> str:
    """The non-empty ``parts`` of a response's thinking, a blank line apart."""
    return "\n\n".join(part for part in parts if part)
