"""`margin acp`: Margin's agent over the Agent Client Protocol (agentclientprotocol.com, protocol
version 1), on stdio — the third door of the same agent core (services/agent.py), beside the
language server's `margin/agent` and the terminal's `margin agent`; and next edits over ACP's
unstable `nes/*` methods from the same next-edit service (services/next_edit.py).

- server.py: the connection (the SDK's JSON-RPC over newline-delimited JSON), the methods routed,
  and the client's methods Margin calls (`Peer`);
- sessions.py: initialize, sessions (Margin's agent threads), modes and options, prompt, cancel;
- door.py: how a turn reaches the client — session/update, session/request_permission, and the
  client's files (fs/*) when it holds them;
- nes.py: document events and next-edit suggestions.

docs/acp.md is the conformance checklist.
"""
