"""The payload models, imported with the first payload validated (``tinyagents._lazy``).

``tinyagents.protocol.commands`` reads ``PAYLOAD_MODELS`` through here, so ``import
tinyagents`` does not define them (``tinyagents.protocol.payloads``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyagents._lazy import lazy_names

if TYPE_CHECKING:  # what __getattr__ imports (tinyagents._lazy)
    from tinyagents.protocol.payloads import PAYLOAD_MODELS as PAYLOAD_MODELS

__getattr__, __dir__ = lazy_names(__name__, {"PAYLOAD_MODELS": "tinyagents.protocol.payloads"})
