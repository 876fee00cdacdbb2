"""Drive the real gateway binary over loopback: scripted MCP servers, a model-side
client, and what the gateway leaves behind (wire, provenance, audit, metrics)."""
