/**
 * The MCP module's face (docs/architecture.md, "Faces"): nothing, on purpose. The module serves
 * `/mcp` (docs/mcp.md) over the other modules' faces (Agent Teams' crews, Jobs' published
 * endpoints, the runs and their journals, IAM's identity key); no module uses it.
 */
export {};
