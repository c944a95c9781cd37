"""``vardiya ui``: serve the web dashboard (the ``ui`` extra) on the store and app of the global options."""

from __future__ import annotations

import os
import socket

import click

from ..app import load_app
from ..errors import InvalidInput
from .context import Settings, StoreUse, global_options, pass_settings

__all__ = ["ui_command"]

#: The port the dashboard listens on unless --port says otherwise.
DEFAULT_PORT = 8765


def _url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://{'[' + shown + ']' if ':' in shown else shown}:{port}/"


@click.command("ui")
@global_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on; another than loopback needs VARDIYA_UI_TOKEN.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True, help="Port to listen on (0: any free port).")
@click.option(
    "--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
    help="Another Host name the dashboard answers (a DNS name it is reached by; repeatable). Loopback names always are.",
)
@pass_settings
def ui_command(settings: Settings, host: str, port: int, allowed_hosts: tuple[str, ...]) -> int:
    """Serve the dashboard: health, work, handlers and dead letters, errors; redrive and purge.

    Mutations need the token: VARDIYA_UI_TOKEN, or one generated and printed at start (open the
    printed URL once: it sets the token's cookie). Stop it with Ctrl-C.
    """
    try:
        import uvicorn

        from ..ui import Guard, create_app
    except ImportError as missing:
        raise InvalidInput(
            f"the dashboard needs the ui extra ({missing.name} is not installed): pip install 'vardiya[ui]'"
        ) from None
    guard = Guard.for_server(host=host, environment_token=os.environ.get("VARDIYA_UI_TOKEN"), allowed_hosts=allowed_hosts)
    app = load_app(settings.app) if settings.app else None
    listening = _listen(host, port)  # before the store opens: a busy port writes nothing
    with listening, settings.open_store(StoreUse.EXISTING) as store:
        config = uvicorn.Config(
            create_app(store, app, guard), log_level="warning", access_log=False, server_header=False,
        )
        address = _url(host, listening.getsockname()[1])
        if guard.generated:
            click.echo(f"vardiya dashboard on {address}?token={guard.token}")
            click.echo("(the token was generated for this run; set VARDIYA_UI_TOKEN to choose one)")
        else:
            click.echo(f"vardiya dashboard on {address} (mutations: open it once with ?token=VARDIYA_UI_TOKEN)")
        uvicorn.Server(config).run(sockets=[listening])
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port): the port is known (and printed) before uvicorn starts."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        listening = socket.socket(family, socket.SOCK_STREAM)
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
        listening.listen(128)
    except OSError as error:
        raise InvalidInput(f"cannot listen on {host}:{port}: {error.strerror or error}; pick another --host or --port") from None
    return listening
