"""A hostile user's sixth round at the operator API's tokens and bounds: ``Auth.mint`` and
``Auth.attenuate`` given values of the wrong type, which a token then held as something else
than was asked, and ``Control``'s bounds given as what they are not. (The library's probes of this round are in ``tests/test_hostile_probes_6.py``.)"""

from __future__ import annotations

import re
from typing import Any

import pytest
from operator_server import BASE, IDLE_S, Served

from tinyagents import Runtime
from tinyagents.errors import ConfigurationError
from tinyagents.server import Auth, Control


@pytest.fixture
def auth() -> Auth:
    return Auth(Auth.generate_key())


@pytest.mark.parametrize("ttl", [True, "60", b"60", [60]], ids=repr)
def test_a_lifetime_that_is_no_number_is_refused(auth: Auth, ttl: Any) -> None:
    """Found: ``ttl_s=True`` minted (and narrowed) a token living one second, as
    ``True == 1``; ``ttl_s="60"`` was a ``TypeError`` comparing text with 0. Now a lifetime
    is a number of seconds, said as the other bad lifetimes are (a ``ConfigurationError``)."""
    token = auth.mint(user="alice", tenant="acme", rights=["agent:observe"])
    with pytest.raises(ConfigurationError, match="a token's lifetime is a number of seconds"):
        auth.mint(user="alice", tenant="acme", rights=["agent:observe"], ttl_s=ttl)
    with pytest.raises(ConfigurationError, match="a token's lifetime is a number of seconds"):
        auth.attenuate(token, ttl_s=ttl)


def test_rights_given_as_one_text_are_refused_as_such(auth: Auth) -> None:
    """Found: ``rights="agent:observe"`` was read letter by letter, and refused as the
    unknown rights ``[':', 'a', 'b', ...]``. Now it says the rights are a list."""
    with pytest.raises(ConfigurationError, match=r"rights are a list .*\['agent:observe'\]"):
        auth.mint(user="alice", tenant="acme", rights="agent:observe")


@pytest.mark.parametrize("observe_only", ["no", "false", 1, 0, None], ids=repr)
def test_an_observe_only_that_is_no_bool_is_refused(auth: Auth, observe_only: Any) -> None:
    """Found: ``observe_only="no"`` narrowed the token to reading (a non-empty text is
    true), and ``observe_only=0`` left it as it was, each without a word. Now it is a
    ``bool`` or refused."""
    token = auth.mint(user="alice", tenant="acme", rights=["agent:observe", "agent:control"])
    with pytest.raises(ConfigurationError, match="observe_only is True or False"):
        auth.attenuate(token, observe_only=observe_only)


@pytest.mark.parametrize("run_id", [5, b"r-1", ["r-1"]])
def test_a_run_id_that_is_no_text_is_refused_when_narrowing(auth: Auth, run_id: Any) -> None:
    """Found: ``attenuate(token, run_id=5)`` was ``AttributeError: 'int' object has no
    attribute 'strip'``; a run id that is no text is now a ``ConfigurationError`` naming its
    type. (Text the id rule refuses is taken: a run an older version saved under such an id
    is still read, and a token may be narrowed to it, ``tests/server/test_api_run_pages.py::
    test_a_run_id_that_reads_as_two_narrowings_is_still_listed_whole``.)"""
    token = auth.mint(user="alice", tenant="acme", rights=["agent:observe"])
    with pytest.raises(ConfigurationError, match="a string; got " + type(run_id).__name__):
        auth.attenuate(token, run_id=run_id)


async def test_tokens_narrowed_with_the_types_they_take_still_work(served: Served) -> None:
    """The values the checks take: a whole and a fractional lifetime, ``observe_only=True``
    and a run's own id give a token the server honours (it may read the run, not steer it)."""
    run = await served.start_run("acme", think_s=IDLE_S)
    token = served.auth.attenuate(
        served.auth.mint(user="al", tenant="acme", rights=["agent:observe", "agent:control"]),
        observe_only=True,
        run_id=run.run_id,
        ttl_s=600.5,
    )
    token = served.auth.attenuate(token, ttl_s=600)
    read = await served.client.get(f"{BASE}/runs/{run.run_id}", headers=served.as_(token))
    assert read.status_code == 200, read.text
    pause = await served.client.post(f"{BASE}/runs/{run.run_id}/pause", headers=served.as_(token))
    assert pause.status_code == 403, pause.text


# -- the Control's bounds ---------------------------------------------------------------------

BAD_CONTROL_BOUNDS = [
    ("ring_size", True, "ring_size must be a whole number >= 1"),
    ("ring_size", 0, "ring_size must be a whole number >= 1"),
    ("ring_size", -1, "ring_size must be a whole number >= 1"),
    ("ring_size", 2.5, "ring_size must be a whole number >= 1"),
    ("receipt_timeout_s", True, "receipt_timeout_s must be a finite number of seconds > 0"),
    ("receipt_timeout_s", 0, "receipt_timeout_s must be a finite number of seconds > 0"),
    ("receipt_timeout_s", float("nan"), "receipt_timeout_s must be a finite number"),
    ("receipt_timeout_s", float("inf"), "receipt_timeout_s must be a finite number"),
    ("receipt_timeout_s", "5", "receipt_timeout_s must be a finite number"),
    ("listing_wait_s", True, "listing_wait_s must be a finite number of seconds >= 0"),
    ("listing_wait_s", -1, "listing_wait_s must be a finite number of seconds >= 0"),
    ("listing_wait_s", float("nan"), "listing_wait_s must be a finite number"),
]


@pytest.mark.parametrize(("name", "bad", "says"), BAD_CONTROL_BOUNDS, ids=repr)
async def test_a_control_bound_that_is_no_number_of_its_kind_is_refused(
    name: str, bad: Any, says: str
) -> None:
    """Found: ``Control`` took its bounds as given. ``ring_size=True`` kept the last one
    event of a storeless server for its trace and streams (``True == 1``), ``ring_size=-1``
    was deque's bare ``ValueError``, a ``receipt_timeout_s`` of 0, below 0 or NaN is no wait
    for another worker's receipt, and ``listing_wait_s=True`` waited a second. ``create_app``
    kept its stream bounds; now ``Control`` keeps its own (a ``ConfigurationError``, as
    those are)."""
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match=re.escape(says)):
            Control(rt, **{name: bad})
