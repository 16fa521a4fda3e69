"""Fair MCP sessions: one token holder cannot take every session of the HTTP server.

mcp's session manager answers 503 to every new client while `max_sessions` are open, for as long as the
holder keeps them (up to the idle timeout). Here each caller (the bearer token that opened a session; without
tokens, everyone is one caller) has a share, `per_token` sessions. A new session of a caller at its share takes
the place of that caller's oldest *idle* session (no request in flight, no open stream); when the server as a
whole is full, the oldest idle session of the caller holding the most is closed for it. Only when none of them
is idle is the new client refused (503). A closed session answers 404, and an MCP client then opens a new one.

It is installed on the manager's admission step (`StreamableHTTPSessionManager._admit_session`, mcp 2.x); a
session is closed the way its idle timeout closes it (its idle scope is cancelled), so the manager forgets it
and ends its task as usual.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["SessionShares"]


class SessionShares:
    def __init__(self, manager: Any, *, per_token: int):
        if per_token < 1:
            raise ValueError("a caller's share of MCP sessions is at least one")
        self._manager = manager
        self._per_token = per_token
        self._admit = manager._admit_session
        self.evicted = 0

    def install(self) -> SessionShares:
        self._manager._admit_session = self.admit
        return self

    def _owner(self, session_id: str) -> Any:
        owner = self._manager._session_owners.get(session_id)
        return None if owner is None else owner.get("client_id")

    @staticmethod
    def _idle(transport: Any) -> bool:
        return not getattr(transport, "_requests_in_flight", 0) and not transport.is_terminated

    def admit(self, requestor: Any) -> Any:
        manager = self._manager
        caller = None if requestor is None else requestor.get("client_id")
        sessions = manager._server_instances
        held = Counter(self._owner(sid) for sid in sessions)
        if held[caller] >= self._per_token:
            if not self._evict_oldest_idle(caller):
                log.warning("MCP session refused: %s holds its %d sessions and none is idle",
                            caller or "the loopback caller", self._per_token)
                return None  # the manager answers 503
        elif manager.max_sessions is not None and len(sessions) >= manager.max_sessions:
            for hoarder, _count in held.most_common():
                if self._evict_oldest_idle(hoarder):
                    break
        return self._admit(requestor)

    def _evict_oldest_idle(self, caller: Any) -> bool:
        manager = self._manager
        for session_id, transport in list(manager._server_instances.items()):  # oldest first
            if self._owner(session_id) == caller and self._idle(transport):
                manager._server_instances.pop(session_id, None)
                manager._session_owners.pop(session_id, None)
                scope = transport.idle_scope
                if scope is not None:
                    scope.cancel()  # ends the session's task, which terminates the transport
                elif manager._task_group is not None:
                    manager._task_group.start_soon(transport.terminate)
                self.evicted += 1
                log.info("MCP session %s… of %s closed (idle, the oldest) to make room for a new one",
                         session_id[:8], caller or "the loopback caller")
                return True
        return False
