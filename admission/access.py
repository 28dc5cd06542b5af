"""Who may use Parley where: the access rule, a pure function of where a message was written, who wrote it, and the
allow and block lists that apply there.

The lists name channels (or categories), roles and members. A thread follows its parent channel, and a channel
its category: a list that names the category names every channel in it.

- A channel is answered in only if no block list names it (or its category) and, when a channel allow list is
  set, that list names it or its category. Otherwise it is never answered: no answer, and no notice either.
- A member may use Parley only if no block list names them or a role they hold, and, when a role or member allow
  list is set, that list names them or one of their roles.
- A member whose roles Discord could not tell (it failed when asked) is not answered this time: judged without
  them, a blocked role's member would be answered, an allowed role's refused.
- An empty allow list allows everything; a block always wins over an allow (a channel allowed by name in a
  blocked category is blocked, a member with an allowed and a blocked role is blocked).

The lists themselves (settings and `/parley-admin access`) are kept by `admission.access_lists`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from records import Decision

# A message Parley may not answer because of the access lists: recorded, archived, never answered.
NOT_ALLOWED = Decision(False, "not_allowed", "access")

# What a member who asks Parley directly in a server it does not serve (ALLOWED_SERVERS leaves it out) is told.
SERVER_REFUSAL = "Parley isn't used in this server."
# What a member who asks Parley directly in a channel it does not serve is told, only them (`AccessVerdict.refusal`).
CHANNEL_REFUSAL = "Parley isn't used in this channel: an admin has limited where it answers."
# What the member who clicked Regenerate is told, only them, when the answer's asker may not use Parley there now.
REGENERATE_NOT_ALLOWED = "The member this answer was for may not use Parley here now, so I won't write it again."
# What a member who asked directly is told when Discord could not say which roles they hold.
ROLES_UNKNOWN_REFUSAL = "Parley couldn't check your roles with Discord just now; please try again in a moment."
# The one line a member who may not use Parley is told the first time they address it (`AccessVerdict.notice`).
NOTICE = "You can't use Parley here: {why}. I'll stay quiet when you mention me."


class AccessVerdict(StrEnum):
    """Whether a message may be answered and, if not, which list says no."""

    ALLOWED = "allowed"
    SERVER_NOT_ALLOWED = "server_not_allowed"
    CHANNEL_BLOCKED = "channel_blocked"
    CHANNEL_NOT_ALLOWED = "channel_not_allowed"
    MEMBER_BLOCKED = "member_blocked"
    ROLE_BLOCKED = "role_blocked"
    NOT_ALLOWED_ROLE = "not_allowed_role"
    ROLES_UNKNOWN = "roles_unknown"

    @property
    def allowed(self) -> bool:
        return self is AccessVerdict.ALLOWED

    @property
    def refusal(self) -> str:
        """The line a member who asked Parley directly (a command such as /parley catchup) is told, only them: unlike
        a mention, such a question is answered even where the channel is the reason."""
        if self is AccessVerdict.ROLES_UNKNOWN:
            return ROLES_UNKNOWN_REFUSAL
        if self is AccessVerdict.SERVER_NOT_ALLOWED:
            return SERVER_REFUSAL
        return self.notice or CHANNEL_REFUSAL

    @property
    def notice(self) -> str | None:
        """The line a member is told once when they address Parley; None for a server's or a channel's verdict, since
        an admin who restricted Parley to some servers or channels wants silence in every other, and None when
        their roles are unknown (Discord may answer next time: a notice told once would be wrong then)."""
        why = _WHY.get(self)
        return None if why is None else NOTICE.format(why=why)


_WHY = {
    AccessVerdict.MEMBER_BLOCKED: "an admin has blocked you from using it in this server",
    AccessVerdict.ROLE_BLOCKED: "an admin has blocked one of your roles from using it in this server",
    AccessVerdict.NOT_ALLOWED_ROLE: "in this server only some roles may use it",
}


@dataclass(frozen=True, slots=True)
class Place:
    """Where a message was written, as the lists see it: the channel (a thread's parent) and its category."""

    channel_id: int
    category_id: int | None = None

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(i for i in (self.channel_id, self.category_id) if i is not None)


@dataclass(frozen=True, slots=True)
class Asker:
    """Who wrote it: the member and the roles they hold in that server (the @everyone role's id is the server's);
    `roles_known` is False when Discord could not say which (edge/member_roles.py)."""

    member_id: int
    role_ids: frozenset[int] = frozenset()
    roles_known: bool = True


@dataclass(frozen=True, slots=True)
class Lists:
    """The allow and block lists that apply in one server: the deploy's settings and the server's own, together."""

    allowed_channels: frozenset[int] = frozenset()  # channels or categories
    blocked_channels: frozenset[int] = frozenset()
    allowed_roles: frozenset[int] = frozenset()
    blocked_roles: frozenset[int] = frozenset()
    allowed_members: frozenset[int] = frozenset()
    blocked_members: frozenset[int] = frozenset()

    def __or__(self, other: Lists) -> Lists:
        return Lists(
            self.allowed_channels | other.allowed_channels,
            self.blocked_channels | other.blocked_channels,
            self.allowed_roles | other.allowed_roles,
            self.blocked_roles | other.blocked_roles,
            self.allowed_members | other.allowed_members,
            self.blocked_members | other.blocked_members,
        )

    @property
    def limits_members(self) -> bool:
        """Whether an allow list of roles or members is set: then only those it names may use Parley."""
        return bool(self.allowed_roles or self.allowed_members)


def verdict(place: Place, asker: Asker, lists: Lists) -> AccessVerdict:
    """Whether `asker` may be answered at `place` under `lists`; the channel is judged first, so a member in a
    channel Parley does not serve gets the channel's silence rather than a notice about themselves."""
    channel = channel_verdict(place, lists)
    return channel if not channel.allowed else member_verdict(asker, lists)


def channel_verdict(place: Place, lists: Lists) -> AccessVerdict:
    """Whether Parley answers anyone at `place`."""
    if place.ids & lists.blocked_channels:
        return AccessVerdict.CHANNEL_BLOCKED
    if lists.allowed_channels and not place.ids & lists.allowed_channels:
        return AccessVerdict.CHANNEL_NOT_ALLOWED
    return AccessVerdict.ALLOWED


def member_verdict(asker: Asker, lists: Lists) -> AccessVerdict:
    """Whether `asker` may use Parley wherever it answers under `lists`."""
    if asker.member_id in lists.blocked_members:
        return AccessVerdict.MEMBER_BLOCKED
    if not asker.roles_known:
        return AccessVerdict.ROLES_UNKNOWN
    if asker.role_ids & lists.blocked_roles:
        return AccessVerdict.ROLE_BLOCKED
    if lists.limits_members and not (asker.member_id in lists.allowed_members or asker.role_ids & lists.allowed_roles):
        return AccessVerdict.NOT_ALLOWED_ROLE
    return AccessVerdict.ALLOWED
