"""MCP server for agents: `kb mcp` (or `python -m kb_core.mcp`) serves `lookup_knowledge` and `read_document` over
stdio, or with `--http` over streamable HTTP on 127.0.0.1. It opens the knowledge base from the same settings as the
console. Over HTTP, `KB_MCP_TOKEN` / `KB_MCP_TOKENS_FILE` require `Authorization: Bearer <token>` (401
otherwise); `--host` beyond loopback refuses to start without one. Idle sessions are closed, and their number
is capped.

It runs beside the console and other agent processes on the same settings: they share the Milvus Lite
directory (the first to open it serves it to the others) and follow each other's writes through the change feed.

It sits above the `KnowledgeBase` facade, beside the `kb` command (`cli`): it serves one facade and opens it
through the composition root (`bootstrap`); the tools' schemas, answers and session shares it serves come from
`kb_core.agent`, which imports neither.

Each tool is registered with kb_core's own input schema (the one `openai_tool_schemas()` gives) and its
response model as `outputSchema`. The arguments reach `KnowledgeBase.call_tool` as the agent sent them, so an
MCP call is checked exactly like an in-process one: an unknown argument, a wrong type or an unknown source is
an error result (and logged), never silently ignored.

Every call has a deadline (`KB_TOOL_TIMEOUT`, `--call-timeout`): the tool runs on a worker thread of its own
bounded pool, and a call that has not answered in time gets an error result at once; its place in the pool is
freed for the next call (the thread itself finishes in the background, and is counted until it does). So no
document, however it hangs a reader, can take the server down.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from kb_core.agent.mcp_sessions import SessionShares
from kb_core.agent.response import LookupResponse, ReadDocumentResponse
from kb_core.agent.tokens import NamedToken, TokenTable
from kb_core.agent.tool import (
    INPUT_SCHEMA,
    READ_INPUT_SCHEMA,
    READ_TOOL_DESCRIPTION,
    READ_TOOL_NAME,
    TOOL_DESCRIPTION,
    TOOL_NAME,
)
from kb_core.errors import SettingsError, ToolTimeout
from kb_core.knowledge_base import KnowledgeBase
from kb_core.ops.http_guard import HttpLimits
from kb_core.ops.logs import log_to_stderr
from kb_core.ops.metrics import MetricsRoute

log = logging.getLogger(__name__)

SERVER_NAME = "knowledge-base"
INSTRUCTIONS = ("Use lookup_knowledge for error codes, API names and known terms before guessing; use "
                "read_document to read a document an answer points to (a supplement's or an alternative's source).")


MAX_RUNNING_CALLS = 16  # tool calls running at once; more wait for a place (within their deadline)
MAX_ABANDONED_CALLS = 256  # calls past their deadline still running in the background; beyond, calls are refused


class CallDeadline:
    """Runs a blocking tool call on a worker thread, at most `workers` at once, and gives up waiting after
    `timeout` seconds (the wait for a place counts): the caller gets `ToolTimeout` and the place is free again.
    A call given up on before it started never starts. A thread cannot be stopped, so one given up on while it
    runs goes on in the background; those are counted (`abandoned`), and past `max_abandoned` new calls are
    refused at once instead of piling up threads."""

    def __init__(self, timeout: float, *, workers: int = MAX_RUNNING_CALLS,
                 max_abandoned: int = MAX_ABANDONED_CALLS):
        if timeout <= 0 or workers < 1:
            raise ValueError("a call deadline needs a positive timeout and at least one worker")
        self.timeout = timeout
        self._workers = workers
        self._max_abandoned = max_abandoned
        self._limiter: Any = None  # an anyio CapacityLimiter of the event loop in `_loop`
        self._loop: Any = None
        self._lock = threading.Lock()
        self.abandoned = 0  # calls given up on that are still running

    def _limiter_here(self) -> Any:
        import anyio
        import anyio.lowlevel

        loop = anyio.lowlevel.current_token()
        if self._limiter is None or self._loop != loop:  # a limiter belongs to one event loop
            self._limiter, self._loop = anyio.CapacityLimiter(self._workers), loop
        return self._limiter

    async def run(self, function: Callable[[], Any], what: str) -> Any:
        import anyio
        import anyio.to_thread

        if self.abandoned >= self._max_abandoned:
            raise ToolTimeout(f"{what} was not started: {self.abandoned} earlier calls are still running past "
                              "their deadline; try again later")
        state = {"started": False, "finished": False, "given_up": False, "abandoned": False}

        def work() -> Any:
            with self._lock:
                if state["given_up"]:
                    return None  # its caller has had its error already
                state["started"] = True
            try:
                return function()
            finally:
                with self._lock:
                    state["finished"] = True
                    if state["abandoned"]:
                        self.abandoned -= 1

        with anyio.move_on_after(self.timeout):
            return await anyio.to_thread.run_sync(work, abandon_on_cancel=True, limiter=self._limiter_here())
        with self._lock:
            state["given_up"] = True
            if state["started"] and not state["finished"]:
                state["abandoned"] = True
                self.abandoned += 1
        log.error("%s did not answer within %g s and was given up (%d calls running past their deadline)",
                  what, self.timeout, self.abandoned)
        raise ToolTimeout(f"{what} did not answer within {self.timeout:g} s (KB_TOOL_TIMEOUT) and was given up; "
                          "try again, or another query")


def build_server(kb: KnowledgeBase, *, call_timeout: float | None = None,
                 workers: int = MAX_RUNNING_CALLS) -> Any:
    """An `MCPServer` exposing `lookup_knowledge` and `read_document` bound to `kb` (calls are logged with caller
    "mcp"). Each call has `call_timeout` seconds (default `KB_TOOL_TIMEOUT`), at most `workers` run at once."""
    from mcp.server.mcpserver import MCPServer

    deadline = CallDeadline(call_timeout if call_timeout is not None else kb.settings.tool_timeout, workers=workers)
    tools = [_tool(kb, TOOL_NAME, TOOL_DESCRIPTION, INPUT_SCHEMA, LookupResponse, deadline),
             _tool(kb, READ_TOOL_NAME, READ_TOOL_DESCRIPTION, READ_INPUT_SCHEMA, ReadDocumentResponse, deadline)]
    server = MCPServer(name=SERVER_NAME, instructions=INSTRUCTIONS, tools=tools)
    server.call_deadline = deadline  # for tests and diagnostics: how many calls are running past their deadline
    return server


def _tool(kb: KnowledgeBase, name: str, description: str, input_schema: dict[str, Any], response: type,
          deadline: CallDeadline) -> Any:
    """One tool as the SDK's `Tool`: kb_core's input schema, the response model as output schema, and every
    argument handed to `kb.call_tool` as sent.

    The SDK's usual route (`add_tool(fn)`) derives the arguments from the function's signature and drops any
    argument it does not name; building the `Tool` here keeps the one input schema and the one validation."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.tools import Tool
    from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
    from mcp.types import CallToolResult, TextContent
    from pydantic import ConfigDict

    class Arguments(ArgModelBase):
        """Accepts whatever the agent sent; `KnowledgeBase.call_tool` checks it."""

        model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

        def model_dump_one_level(self) -> dict[str, Any]:
            return {"arguments": dict(self.model_extra or {})}

    async def call(arguments: dict[str, Any], ctx: Any = None) -> CallToolResult:
        caller, scope = _caller(kb, ctx)
        try:
            answer = await deadline.run(lambda: kb.call_tool(arguments, caller=caller, tool=name, scope=scope), name)
        except ToolTimeout as exc:
            raise ToolError(str(exc)) from None
        if answer.error:
            raise ToolError(answer.error)  # an error result: isError, the message as its text
        text = json.dumps(answer.payload, ensure_ascii=False, indent=2)
        # structuredContent is the payload itself (the SDK validates it against the output schema first)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=answer.payload)

    Arguments.__name__ = Arguments.__qualname__ = f"{name}Arguments"
    return Tool(fn=call, name=name, description=description, parameters=input_schema, is_async=True,
                fn_metadata=FuncMetadata(arg_model=Arguments, output_model=response), context_kwarg="ctx")


def _caller(kb: KnowledgeBase, ctx: Any) -> tuple[str, Any]:
    """(the call log's caller, the caller's scope): the named token of the HTTP request that carried this call
    (`BearerTokenGate`), or "mcp" reading everything (stdio, or HTTP on loopback without tokens)."""
    try:
        request = ctx.request_context.request if ctx is not None else None
    except (AttributeError, ValueError, LookupError):
        request = None
    token = getattr(request, "scope", {}).get("kb_caller") if request is not None else None
    if not isinstance(token, NamedToken):
        return "mcp", None
    return token.name, token.scope(kb.audience_rule)


LOOPBACK = ("127.0.0.1", "localhost", "::1")
SESSION_IDLE_SECONDS = 600
MAX_SESSIONS = 100


def load_tokens(token: str | None = None, tokens_file: str | None = None) -> tuple[str, ...]:
    """The accepted bearer tokens' secrets now: `KB_MCP_TOKEN`, and those of `KB_MCP_TOKENS_FILE` (YAML named
    tokens, or one per line; `agent/tokens.py`). A token shorter than 16 characters is refused."""
    return tuple(dict.fromkeys(t.secret for t in TokenTable(token, tokens_file).tokens()))


class BearerTokenGate:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <one of the tokens>` gets 401 and never
    reaches the MCP app. Tokens are compared in constant time (`hmac.compare_digest`); the table is asked at
    every request, so a token removed from the tokens file is refused from then on. The request carries who
    the token is (`kb_caller`: a `NamedToken`), which the tools read for the call log and the caller's scope."""

    def __init__(self, app: Any, tokens: TokenTable | Sequence[str]):
        self._app = app
        self._tokens = tokens if isinstance(tokens, TokenTable) else TokenTable.of_secrets(tokens)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        if scope["type"] == "http":
            which = self._which(dict(scope.get("headers") or ()).get(b"authorization"))
            if which is not None:
                # who the token is to the session manager: a session is used with the token that opened it only,
                # and the tokens' shares of sessions are counted apart (`mcp_sessions`); a label, never the token
                user = AuthenticatedUser(AccessToken(token="", client_id=which.label, scopes=[]))
                scope = {**scope, "user": user, "kb_caller": which}
        if scope["type"] == "http" and scope.get("user") is None:
            body = b'{"error": "unauthorized: send Authorization: Bearer <token>"}'
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"www-authenticate", b'Bearer realm="knowledge-base"'),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, receive, send)

    def _allowed(self, header: bytes | None) -> bool:
        return self._which(header) is not None

    def _which(self, header: bytes | None) -> NamedToken | None:
        """The token offered, or None."""
        if not header or not header[:7].lower() == b"bearer ":
            return None
        return self._tokens.which(header[7:].strip())


def serve_http(server: Any, *, host: str, port: int, tokens: TokenTable | Sequence[str],
               session_idle: float = SESSION_IDLE_SECONDS, max_sessions: int = MAX_SESSIONS,
               per_token_sessions: int | None = None, metrics: Any = None, limits: HttpLimits | None = None) -> None:
    """Streamable HTTP on `host:port`, behind the bearer-token gate when there are tokens. Beyond loopback
    without a token it refuses to start (`SettingsError`): anyone who reaches the port could call the tools.
    `metrics` (a Prometheus registry) is served at `/metrics`, behind the same gate."""
    from kb_core.ops.http_guard import serve

    if host not in LOOPBACK and not tokens:
        raise SettingsError(f"refusing to listen on {host} without a token: set KB_MCP_TOKEN or "
                            "KB_MCP_TOKENS_FILE (or listen on 127.0.0.1)")
    app = server.streamable_http_app(session_idle_timeout=session_idle, max_sessions=max_sessions, host=host)
    # one caller (no token, or one) may use every session; several tokens share them, half each at most
    share = per_token_sessions or (max_sessions if len(tokens) < 2 else max(1, max_sessions // 2))
    SessionShares(server.session_manager, per_token=share).install()
    if metrics is not None:
        app = MetricsRoute(app, metrics, loopback_only=host in LOOPBACK)  # inside the gate: a scrape sends the token
    if tokens:
        app = BearerTokenGate(app, tokens)
    log.info("serving %s, %s on http://%s:%d/mcp (%s; sessions idle for %.0f s are closed, at most %d open)",
             TOOL_NAME, READ_TOOL_NAME, host, port, "bearer token required" if tokens else "no token: loopback only",
             session_idle, max_sessions)
    serve(app, host=host, port=port, limits=limits or HttpLimits(), name="MCP server")


def main(argv: list[str] | None = None, *, prog: str = "python -m kb_core.mcp") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1",
                        help="HTTP address (default 127.0.0.1; any other needs KB_MCP_TOKEN or KB_MCP_TOKENS_FILE)")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    parser.add_argument("--session-idle", type=float, default=SESSION_IDLE_SECONDS, metavar="SECONDS",
                        help=f"close an HTTP session idle this long (default {SESSION_IDLE_SECONDS})")
    parser.add_argument("--max-sessions", type=int, default=MAX_SESSIONS,
                        help=f"open HTTP sessions at most; more get 503 (default {MAX_SESSIONS})")
    parser.add_argument("--max-sessions-per-token", type=int, default=None, metavar="N",
                        help="open HTTP sessions of one token at most; its oldest idle one makes room for a new one "
                             "(default: all of them with one token, half with several)")
    parser.add_argument("--call-timeout", type=float, default=None, metavar="SECONDS",
                        help="a tool call that takes longer gets an error result (default KB_TOOL_TIMEOUT, 10)")
    parser.add_argument("--log-level", default="INFO", help="logging level on stderr (default INFO)")
    args = parser.parse_args(argv)
    # stdout carries the MCP protocol on stdio: every log line goes to stderr.
    log_to_stderr(args.log_level, "%(asctime)s %(levelname)s %(name)s: %(message)s")

    from kb_core.bootstrap import open_knowledge_base
    from kb_core.errors import KnowledgeBaseError

    try:
        tokens: TokenTable | tuple[()] = TokenTable(os.environ.get("KB_MCP_TOKEN"),
                                                    os.environ.get("KB_MCP_TOKENS_FILE")) if args.http else ()
        if args.http and args.host not in LOOPBACK and not tokens:  # say so before opening anything
            raise SettingsError(f"refusing to listen on {args.host} without a token: set KB_MCP_TOKEN or "
                                "KB_MCP_TOKENS_FILE (or listen on 127.0.0.1)")
        kb = open_knowledge_base()
    except KnowledgeBaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.call_timeout is not None and args.call_timeout <= 0:
        print("error: --call-timeout must be positive", file=sys.stderr)
        kb.close()
        return 1
    server = build_server(kb, call_timeout=args.call_timeout)
    try:
        if args.http:
            serve_http(server, host=args.host, port=args.port, tokens=tokens, session_idle=args.session_idle,
                       max_sessions=args.max_sessions, per_token_sessions=args.max_sessions_per_token,
                       metrics=kb.metrics_registry)
        else:
            server.run("stdio")
    finally:
        kb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
