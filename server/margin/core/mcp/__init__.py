"""MCP tools for the agent: where servers come from, what an approval binds to, and how their
tools are offered (docs/mcp.md)."""
