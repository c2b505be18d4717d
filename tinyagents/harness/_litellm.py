"""``LiteLLMModel``, imported with the first model string an agent is given (``tinyagents._lazy``).

Its module (with its stream and error readers: about 1 % of ``import tinyagents``) is of no use
to a program whose agents are given ``Model`` objects (a test's scripted models, a model of its
own): ``Agent`` and ``tinyagents.harness`` name it through here. No model is a ``LiteLLMModel``
until its module is imported, which ``is_litellm_model`` says without importing it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from tinyagents._lazy import lazy_names

if TYPE_CHECKING:  # what __getattr__ imports (tinyagents._lazy)
    from tinyagents.harness.litellm_model import LiteLLMModel as LiteLLMModel
    from tinyagents.harness.litellm_model import as_model as as_model
    from tinyagents.harness.litellm_model import forced_tool as forced_tool

_HOME = "tinyagents.harness.litellm_model"

__getattr__, __dir__ = lazy_names(
    __name__, {"LiteLLMModel": _HOME, "as_model": _HOME, "forced_tool": _HOME}
)


def is_litellm_model(model: object) -> bool:
    """Whether ``model`` is a ``LiteLLMModel``, without importing its module (none is before)."""
    home = sys.modules.get(_HOME)
    return home is not None and isinstance(model, home.LiteLLMModel)
