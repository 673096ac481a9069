"""A class on one machine: a PostgreSQL gradebook, a JupyterHub with nbgrader's exchange, shared vLLM servers.

    servelab class up        # gradebook + exchange + hub (loopback), users from the roster
    servelab class servers   # the two shared vLLM servers the lab's remote backend points at
    servelab class status | down

Everything the class makes lives in one state folder (default: .class/ in the
checkout, ignored by git): the PostgreSQL cluster, the exchange, the hub's
database and cookie secret, the logs. Each piece is a maintained tool run as it
is documented: Debian's PostgreSQL (initdb, pg_ctl), JupyterHub with
configurable-http-proxy, nbgrader's filesystem exchange and server extensions,
vLLM's OpenAI-compatible api_server.
"""

from .errors import ClassError  # noqa: F401
