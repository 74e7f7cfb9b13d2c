"""The dashboard's HTTP server: aiohttp on the runtime's own loop, GET only.

Routes (docs/dashboard.md): ``/`` the page, ``/static/...`` its files, ``/api/...`` the
JSON views, ``/api/events`` server-sent events (the summary, once a second). Every other
method is 405. A non-loopback bind requires a token (``?token=`` once, which sets a cookie,
an ``Authorization: Bearer`` header, or that cookie): without it 401, wrong 403. A loopback
bind checks the ``Host`` header instead (a page of another site that resolves its name to
127.0.0.1 is refused).
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import json
import logging
import math
import secrets
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

try:
    from aiohttp import web
except ImportError as exc:  # the extra is not installed
    raise ImportError(
        "the dashboard needs aiohttp: pip install 'actorrt[dashboard]'"
    ) from exc

from . import _files, _sources, _sweeps
from ._config import DEFAULT_PORT, DashboardConfig, is_loopback
from ._state import Pages

__all__ = ["DashboardServer"]

logger = logging.getLogger("actorrt")

STATIC = Path(__file__).parent / "static"
COOKIE = "actorrt_dashboard_token"
EVENT_PERIOD = 1.0  # seconds between server-sent summaries
_PORT_TRIES = 100  # ports tried from the default one up
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]", "::1")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class DashboardServer:
    """One dashboard: :meth:`start` listens and returns the URL, :meth:`close` stops.

    Args:
        config: where to listen, and the token.
        state: the runtime's pages, or ``None`` (an experiment folder's view alone).
        cluster_token: the cluster's token, the default token of a non-loopback bind.
    """

    def __init__(
        self,
        config: DashboardConfig,
        state: Pages | None,
        cluster_token: str | None = None,
    ) -> None:
        self.config = config
        self.state = state
        self.generated = False
        self.token = config.token
        if self.token is None and not is_loopback(config.host):
            if cluster_token is not None:
                self.token = cluster_token
            else:
                self.token, self.generated = secrets.token_urlsafe(18), True
        self.port = config.port or 0
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()

    async def start(self) -> str:
        """Listen, say where (stderr and the ``actorrt`` logger), return the URL.

        Raises:
            OSError: the port is in use, or the host cannot be bound (the message names
                both).
        """
        app = web.Application(middlewares=[self._guard])
        self._routes(app)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        given = self.config.port
        ports = range(DEFAULT_PORT, DEFAULT_PORT + _PORT_TRIES) if given is None else [given]
        for port in ports:
            site = web.TCPSite(runner, self.config.host, port)
            try:
                await site.start()
                break
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE and port != ports[-1]:
                    continue  # the default port is taken: the next one, as Ray does
                await runner.cleanup()
                why = "the port is in use" if exc.errno == errno.EADDRINUSE else str(exc)
                tried = f"{port}" if given is not None else f"{ports[0]}..{ports[-1]}"
                raise OSError(
                    exc.errno,
                    f"the dashboard cannot listen on {self.config.host}:{tried}: {why} (give "
                    "another port, or port 0 to let the system choose a free one)",
                ) from exc
        self._runner = runner
        _sources.server_started()
        self.port = runner.addresses[0][1]
        self.url = self._url()
        shown = self.url
        if self.token is not None and not self.generated:
            shown = self._url(token="<the cluster token>" if self.config.token is None
                              else "<your token>")
        print(f"[actorrt] dashboard at {shown}", file=sys.stderr, flush=True)
        logger.info("dashboard at %s", shown)
        return self.url

    def _url(self, token: str | None = None) -> str:
        host = self.config.host
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1" if host == "0.0.0.0" else "[::1]"
        elif ":" in host:
            host = f"[{host}]"
        url = f"http://{host}:{self.port}/"
        shown = token if token is not None else self.token
        return f"{url}?token={shown}" if shown is not None else url

    async def close(self) -> None:
        """Stop listening; open event streams end."""
        self._closing.set()
        runner, self._runner = self._runner, None
        if runner is not None:
            _sources.server_closed()
            await runner.cleanup()

    # ------------------------------------------------------------------ guard

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            return _error(405, f"the dashboard is read-only: {request.method} is not allowed",
                          headers={"Allow": "GET, HEAD"})
        if self.token is None:
            if _host_name(request.host) not in _LOOPBACK_NAMES:
                return _error(403, f"Host {request.host!r} is not this machine's loopback name")
        else:
            given, set_cookie = _token_of(request)
            if given is None:
                return _error(401, "this dashboard needs its token: open the URL it printed "
                                   "(…/?token=...) or send 'Authorization: Bearer TOKEN'")
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return _error(403, "wrong dashboard token")
            response = await handler(request)
            if set_cookie:
                response.set_cookie(COOKIE, given, httponly=True, samesite="Strict", path="/")
            return response
        return await handler(request)

    # ------------------------------------------------------------------ routes

    def _routes(self, app: web.Application) -> None:
        get = app.router.add_get
        get("/", self._index)
        app.router.add_static("/static/", STATIC, follow_symlinks=False)
        get("/api/summary", self._summary)
        get("/api/events", self._events)
        get("/api/sweeps", self._sweeps)
        get("/api/sweeps/{key}", self._sweep)
        get("/api/sweeps/{key}/curves", self._curves)
        get("/api/sweeps/{key}/trials/{trial}", self._trial)
        get("/api/sweeps/{key}/trials/{trial}/log", self._log)
        for page in ("resources", "waits", "actors", "nodes"):
            get(f"/api/{page}", self._runtime_page(page))

    async def _index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html", headers=_NO_CACHE)

    def _summary_data(self) -> dict[str, Any]:
        return {
            "view": "runtime" if self.state is not None else "folder",
            "runtime": self.state.summary() if self.state is not None else None,
            "sweeps": [
                {"key": key, "name": s.name, "running": s.running}
                for key, s in _sources.sweeps().items()
            ],
        }

    async def _summary(self, request: web.Request) -> web.StreamResponse:
        return _json(self._summary_data())

    async def _events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        while not self._closing.is_set():
            data = _dumps(self._summary_data())
            try:
                await response.write(f"data: {data}\n\n".encode())
            except (ConnectionError, RuntimeError):
                break  # the page went away
            try:
                await asyncio.wait_for(self._closing.wait(), EVENT_PERIOD)
            except TimeoutError:
                pass
        return response

    async def _sweeps(self, request: web.Request) -> web.StreamResponse:
        views = [await _sweeps.sweep_view(k, s) for k, s in _sources.sweeps().items()]
        return _json({"sweeps": views})

    def _source(self, request: web.Request) -> _sources.SweepSource:
        key = request.match_info["key"]
        source = _sources.sweeps().get(key)
        if source is None:
            raise _not_found(f"no sweep {key!r}; /api/sweeps lists them")
        return source

    async def _sweep(self, request: web.Request) -> web.StreamResponse:
        return _json(await _sweeps.sweep_view(request.match_info["key"], self._source(request)))

    async def _curves(self, request: web.Request) -> web.StreamResponse:
        metric = request.query.get("metric") or None
        return _json(await _sweeps.sweep_curves(self._source(request), metric))

    async def _trial(self, request: web.Request) -> web.StreamResponse:
        view = await _sweeps.trial_view(self._source(request), request.match_info["trial"])
        if view is None:
            raise _not_found(f"no trial {request.match_info['trial']!r} in this sweep")
        return _json(view)

    async def _log(self, request: web.Request) -> web.StreamResponse:
        source = self._source(request)
        name = request.match_info["trial"]
        trial = next((t for t in await source.trials() if t["name"] == name), None)
        if trial is None:
            raise _not_found(f"no trial {name!r} in this sweep")
        raw = request.query.get("offset", "0")
        try:
            offset = int(raw)
        except ValueError:
            return _error(400, f"offset must be an integer, got {raw!r}")
        return _json(await asyncio.to_thread(_files.read_log, trial["path"], offset))

    def _runtime_page(self, page: str) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            if self.state is None:
                raise _not_found(
                    f"/api/{page}: this dashboard shows an experiment folder, not a runtime"
                )
            return _json(getattr(self.state, page)())

        return handler


_NO_CACHE = {"Cache-Control": "no-store"}


def _host_name(host: str) -> str:
    """``Host`` without its port (``[::1]:8265`` is ``[::1]``)."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _token_of(request: web.Request) -> tuple[str | None, bool]:
    query = request.query.get("token")
    if query:
        return query, True
    auth = request.headers.get("Authorization", "")
    if auth.startswith("Bearer "):
        return auth[len("Bearer "):].strip(), False
    return request.cookies.get(COOKIE), False


def _clean(value: Any) -> Any:
    """Plain JSON: non-finite floats as ``null``, anything else unknown as its ``str``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str | int | bool):
        return value
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return str(value)


def _dumps(data: Any) -> str:
    return json.dumps(_clean(data), separators=(",", ":"))


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(
        text=_dumps(data), status=status, content_type="application/json", headers=_NO_CACHE
    )


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    response = _json({"error": message}, status)
    response.headers.update(headers or {})
    return response


def _not_found(message: str) -> web.HTTPNotFound:
    return web.HTTPNotFound(text=_dumps({"error": message}), content_type="application/json")
