-- wrk script: POST one tools/call per request into an MCP session, and count results that
-- are not successful tool results (HTTP errors, JSON-RPC errors, isError) separately.
local session = os.getenv("MCP_SESSION")
local token = os.getenv("MCP_TOKEN")
wrk.method = "POST"
wrk.body = os.getenv("MCP_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
if session then
  wrk.headers["MCP-Protocol-Version"] = "2025-06-18"
  wrk.headers["Mcp-Session-Id"] = session
else
  -- Stateless (protocol 2026-07-28): no session, method and tool name in headers.
  wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = os.getenv("MCP_TOOL") or "repoGet"
end
if token then wrk.headers["Authorization"] = "token " .. token end

-- A successful tool result; HTTP errors, JSON-RPC errors and isError results are not.
require("benches.http.results").install(function(status, body)
  return status == 200 and body:find('"result"', 1, true) and not body:find('"isError":true', 1, true)
end)
