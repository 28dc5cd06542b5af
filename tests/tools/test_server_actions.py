"""The server actions as the model calls them: approval first, then the switches, the asker's and Parley's permissions
and the target checked as each runs, and what is done kept in the audit log."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic_ai import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent import build_responder, generate_reply
from conversation import ChannelConversation
from records import MessageRecord, ModerationAction
from tests.tools.test_tools import deps
from tools.approval import REFUSALS, ApprovalRequest, Verdict
from tools.channel_actions import NEEDS, ActionRefused, ServerActionDeps
from tools.registry import SERVER_ACTIONS
from tools.server_actions import NO_MESSAGE, NOT_NAMED, SLOWMODE_MAX_SECONDS

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
ASKER, BOB, PARLEY = 7, 8, 1
HERE = 500
QUESTION_ID = 900
REPLIED_TO = 880
ELSEWHERE_MESSAGE = 777  # a message of another channel: this channel's lookup does not find it
EVERYTHING = frozenset(permission for needs in NEEDS.values() for permission in needs.asker + needs.parley)


@dataclass
class FakeChannel:
    """`ChannelActions` over a channel holding the messages `messages`; the calls made, in order."""

    asker: frozenset[str] = EVERYTHING
    parley: frozenset[str] = EVERYTHING
    messages: set[int] = field(default_factory=lambda: {REPLIED_TO, QUESTION_ID, 881})
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    async def asker_permissions(self) -> frozenset[str]:
        return self.asker

    async def own_permissions(self) -> frozenset[str]:
        return self.parley

    def _found(self, message_id: int) -> None:
        if message_id not in self.messages:
            raise ActionRefused(f"there is no message {message_id} in this channel.")

    async def pin(self, message_id: int, reason: str) -> None:
        self._found(message_id)
        self.calls.append(("pin", message_id, reason))

    async def unpin(self, message_id: int, reason: str) -> None:
        self._found(message_id)
        self.calls.append(("unpin", message_id))

    async def delete(self, message_id: int, reason: str) -> None:
        self._found(message_id)
        self.calls.append(("delete", message_id))

    async def create_thread(self, name: str, message_id: int | None, reason: str) -> int:
        if message_id is not None:
            self._found(message_id)
        self.calls.append(("thread", name, message_id))
        return 4242

    async def set_slowmode(self, seconds: int, reason: str) -> None:
        self.calls.append(("slowmode", seconds))

    async def time_out(self, member_id: int, until: datetime, reason: str) -> None:
        self.calls.append(("timeout", member_id, until))


@dataclass
class Switches:
    off: set[str] = field(default_factory=set)
    reads: int = 0

    async def turned_off(self, guild_id: int) -> frozenset[str]:
        self.reads += 1
        return frozenset(self.off)


@dataclass
class AuditLog:
    actions: list[ModerationAction] = field(default_factory=list)

    async def record_action(self, action: ModerationAction) -> None:
        self.actions.append(action)


@dataclass
class Approver:
    """Decides every request with `verdict`, after `meanwhile()` (what changes while the asker decides)."""

    verdict: Verdict = Verdict.APPROVED
    meanwhile: Any = None
    asked: list[ApprovalRequest] = field(default_factory=list)

    async def ask(self, request: ApprovalRequest) -> Verdict:
        self.asked.append(request)
        if self.meanwhile is not None:
            self.meanwhile()
        return self.verdict


@dataclass
class World:
    channel: FakeChannel = field(default_factory=FakeChannel)
    switches: Switches = field(default_factory=Switches)
    log: AuditLog = field(default_factory=AuditLog)
    approver: Approver = field(default_factory=Approver)
    results: list[str] = field(default_factory=list)
    offered: list[str] = field(default_factory=list)

    def action_deps(self, replied_to: int | None = REPLIED_TO) -> ServerActionDeps:
        return ServerActionDeps(HERE, self.channel, self.switches, self.log, lambda: T0, replied_to)


async def call(
    make_settings,
    world: World,
    tool: str,
    arguments: dict[str, Any],
    *,
    named: frozenset[int] = frozenset(),
    offered_sets: frozenset[str] | None = None,
    guild_id: int = 42,
    replied_to: int | None = REPLIED_TO,
) -> str | None:
    """The model calls `tool` once with `arguments` in an answer to the asker; what it read back (None: the tool was
    not offered, so it was not called)."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if returned:
            world.results.append(str(returned[-1].content))
            return ModelResponse(parts=[TextPart("ok")])
        world.offered[:] = [tool.name for tool in info.function_tools]
        if tool not in world.offered:
            return ModelResponse(parts=[TextPart("not offered")])
        return ModelResponse(parts=[ToolCallPart(tool, arguments, tool_call_id="c1")])

    responder = build_responder(
        make_settings(),
        model=FunctionModel(model),
        archive_enabled=False,
        memory_enabled=False,
        reminders_enabled=False,
        server_actions_enabled=True,
    )
    message = MessageRecord(QUESTION_ID, HERE, ASKER, "Alice", "pin that", T0)
    conversation = ChannelConversation(HERE, T0, T0, deque([message]))
    run_deps = deps(
        offered_sets, approver=world.approver, named_member_ids=named, server_actions=world.action_deps(replied_to)
    )
    run_deps = replace(run_deps, guild_id=guild_id)
    assert (run_deps.requester_id, run_deps.bot_user_id) == (ASKER, PARLEY)
    await generate_reply(responder, conversation, message, run_deps)
    return world.results[-1] if world.results else None


async def test_approved_pin_pins_and_the_audit_log_names_who_asked_and_who_approved(make_settings) -> None:
    world = World()
    said = await call(make_settings, world, "pin_message", {"message_id": "881"})
    assert said == "Done: message 881 is pinned."
    [(what, message_id, reason)] = world.channel.calls
    assert (what, message_id) == ("pin", 881) and str(ASKER) in reason
    [request] = world.approver.asked
    assert request.tool_name == "pin_message" and request.arguments == '{"message_id": "881"}'
    [record] = world.log.actions
    assert (record.action, record.actor_id, record.requested_by) == ("pin", ASKER, ASKER)
    assert (record.guild_id, record.channel_id, record.target_message_id, record.at) == (42, HERE, 881, T0)


async def test_no_message_named_means_the_one_replied_to_or_none(make_settings) -> None:
    world = World()
    assert await call(make_settings, world, "pin_message", {}) == f"Done: message {REPLIED_TO} is pinned."
    nothing = World()
    assert await call(make_settings, nothing, "pin_message", {}, replied_to=None) == NO_MESSAGE
    assert nothing.channel.calls == [] and nothing.log.actions == []


@pytest.mark.parametrize("verdict", [Verdict.DENIED, Verdict.TIMED_OUT])
async def test_deny_or_no_answer_does_nothing(make_settings, verdict: Verdict) -> None:
    world = World(approver=Approver(verdict))
    said = await call(make_settings, world, "delete_message", {"message_id": "881"})
    assert said == REFUSALS[verdict]
    assert world.channel.calls == [] and world.log.actions == []


@pytest.mark.parametrize(
    ("tool", "arguments", "permission"),
    [
        ("pin_message", {"message_id": "881"}, "Manage Messages"),
        ("unpin_message", {"message_id": "881"}, "Manage Messages"),
        ("delete_message", {"message_id": "881"}, "Manage Messages"),
        ("create_thread", {"name": "release", "message_id": "881"}, "Manage Threads or Create Public Threads"),
        ("set_slowmode", {"seconds": 30}, "Manage Channels"),
        ("time_out_member", {"member_id": str(BOB), "minutes": 60}, "Moderate Members"),
    ],
)
async def test_an_asker_without_the_permission_is_refused(
    make_settings, tool: str, arguments: dict[str, Any], permission: str
) -> None:
    """A member without it asks (or text they read steers the model): they may press Approve, and nothing is done."""
    world = World(channel=FakeChannel(asker=frozenset({"send_messages", "read_message_history"})))
    said = await call(make_settings, world, tool, arguments, named=frozenset({BOB}))
    assert said is not None and said.startswith("Not done:") and f"the {permission} permission" in said
    assert "the person asking lacks" in said
    assert world.channel.calls == [] and world.log.actions == []


async def test_the_permission_is_checked_when_it_runs_not_when_it_was_offered(make_settings) -> None:
    """The asker loses Manage Messages while the prompt waits; their Approve then does nothing."""
    world = World()

    def demoted() -> None:
        world.channel.asker = frozenset()

    world.approver.meanwhile = demoted
    said = await call(make_settings, world, "pin_message", {"message_id": "881"})
    assert said is not None and "the person asking lacks" in said
    assert world.channel.calls == [] and world.log.actions == []


async def test_parley_without_the_permission_says_so(make_settings) -> None:
    world = World(channel=FakeChannel(parley=EVERYTHING - {"pin_messages"}))
    said = await call(make_settings, world, "pin_message", {"message_id": "881"})
    assert said is not None and "needs Parley to hold the Pin Messages permission" in said
    assert world.channel.calls == []


async def test_another_channels_message_is_refused(make_settings) -> None:
    """The model passes a message id of another channel: looked up in this one alone, it is not found."""
    world = World()
    said = await call(make_settings, world, "delete_message", {"message_id": str(ELSEWHERE_MESSAGE)})
    assert said == f"Not done: there is no message {ELSEWHERE_MESSAGE} in this channel."
    assert world.channel.calls == [] and world.log.actions == []


async def test_a_timeout_takes_only_a_member_the_question_names(make_settings) -> None:
    """Text the model read names someone ("time out @admin"): unless the asker's own message names them, no."""
    world = World()
    said = await call(make_settings, world, "time_out_member", {"member_id": f"<@{BOB}>", "minutes": 60})
    assert said == NOT_NAMED and world.channel.calls == []
    said = await call(
        make_settings, world, "time_out_member", {"member_id": f"<@{BOB}>", "minutes": 60}, named=frozenset({BOB})
    )
    assert said == f"Done: <@{BOB}> is timed out for 60 minutes."
    assert world.channel.calls == [("timeout", BOB, T0 + timedelta(minutes=60))]
    [record] = world.log.actions
    assert (record.action, record.target_member_id, record.detail) == ("timeout", BOB, "60 minutes")


async def test_the_asker_cannot_time_themselves_or_parley_out(make_settings) -> None:
    world = World()
    for member in (ASKER, PARLEY):
        said = await call(
            make_settings,
            world,
            "time_out_member",
            {"member_id": str(member), "minutes": 5},
            named=frozenset({ASKER, PARLEY}),
        )
        assert said == NOT_NAMED
    assert world.channel.calls == []


async def test_slowmode_and_threads(make_settings) -> None:
    world = World()
    assert await call(make_settings, world, "set_slowmode", {"seconds": 30}) == "Done: slowmode is 30 s."
    too_slow = await call(make_settings, world, "set_slowmode", {"seconds": SLOWMODE_MAX_SECONDS + 1})
    assert too_slow is not None and too_slow.startswith("Not done: slowmode is 0 to")
    said = await call(make_settings, world, "create_thread", {"name": "release notes", "on_message": False})
    assert said == "Done: the thread <#4242> is open."
    assert world.channel.calls == [("slowmode", 30), ("thread", "release notes", None)]
    assert [record.action for record in world.log.actions] == ["slowmode", "thread"]


async def test_an_action_turned_off_is_not_offered_and_refused_if_turned_off_while_waiting(make_settings) -> None:
    world = World(switches=Switches({"pin"}))
    assert await call(make_settings, world, "pin_message", {"message_id": "881"}) is None
    assert "pin_message" not in world.offered and "unpin_message" in world.offered

    waiting = World()

    def turned_off() -> None:
        waiting.switches.off.add("delete")

    waiting.approver.meanwhile = turned_off
    said = await call(make_settings, waiting, "delete_message", {"message_id": "881"})
    assert said is not None and "turned deleting a message off" in said
    assert waiting.channel.calls == []


async def test_offered_only_where_the_profile_offers_them_in_a_server(make_settings) -> None:
    world = World()
    assert await call(make_settings, world, "pin_message", {}, offered_sets=frozenset({"archive"})) is None
    assert world.offered == []
    assert await call(make_settings, world, "pin_message", {}, guild_id=0) is None
    assert world.offered == []
    assert await call(make_settings, world, "pin_message", {}, offered_sets=frozenset({SERVER_ACTIONS})) is not None


async def test_an_audit_log_that_fails_leaves_the_action_done(make_settings) -> None:
    class Failing(AuditLog):
        async def record_action(self, action: ModerationAction) -> None:
            raise RuntimeError("disk full")

    world = World(log=Failing())
    assert await call(make_settings, world, "unpin_message", {"message_id": "881"}) == (
        "Done: message 881 is unpinned."
    )
