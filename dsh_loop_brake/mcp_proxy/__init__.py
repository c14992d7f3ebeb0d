"""``dsh-loop-brake mcp-proxy``: the brakes in front of any stdio MCP server, for any MCP client.

The proxy starts the server and passes every line between it and the client on as the bytes
that came, except a ``tools/call`` the brakes deny, which it answers itself with a failed tool
result carrying the denial. Standard library only; the ``mcp`` SDK is needed by the tests, not
by the proxy. One call's way through it:

* ``command``   — the subcommand: options, the brakes from the profile, stdout kept for protocol;
* ``_pump``     — the server process, the two byte pumps, shutdown and signals;
* ``_lines``    — newline-delimited lines read from a descriptor, huge ones in pieces;
* ``_session``  — one session's judgement: deny or forward, the retries that continue a call;
* ``_messages`` — the JSON-RPC fields read, and the denial result written.
"""
