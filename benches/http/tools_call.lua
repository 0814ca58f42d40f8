-- wrk script: POST one tools/call per request, and count results that are not successful
-- tool results (HTTP errors, JSON-RPC errors, isError) separately.
--
-- MCP_BODY is the request. With MCP_SESSION every request goes into that one session; with
-- MCP_SESSIONS (ids separated by commas) the threads (as many as WRK_THREADS says) share the
-- list out and each thread takes its sessions in turn, so that as many sessions as connections each have about one request in
-- flight, as separate clients' sessions do; with neither, the requests are stateless (protocol
-- 2026-07-28: no session, method and tool name in headers, MCP_TOOL or repoGet).
local session = os.getenv("MCP_SESSION")
local token = os.getenv("MCP_TOKEN")
wrk.method = "POST"
wrk.body = os.getenv("MCP_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
if session or os.getenv("MCP_SESSIONS") then
  wrk.headers["MCP-Protocol-Version"] = "2025-06-18"
  wrk.headers["Mcp-Session-Id"] = session
else
  wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = os.getenv("MCP_TOOL") or "repoGet"
end
if token then wrk.headers["Authorization"] = "token " .. token end

-- This thread's share of MCP_SESSIONS, as whole requests written once.
local mine, turn = {}, 0
function init(args)
  local all = {}
  for id in (os.getenv("MCP_SESSIONS") or ""):gmatch("[^,]+") do table.insert(all, id) end
  for i = thread_index + 1, #all, tonumber(os.getenv("WRK_THREADS") or "1") do
    local headers = {}
    for k, v in pairs(wrk.headers) do headers[k] = v end
    headers["Mcp-Session-Id"] = all[i]
    table.insert(mine, wrk.format(nil, nil, headers, nil))
  end
end
function request()
  if #mine == 0 then return wrk.request() end
  turn = turn % #mine + 1
  return mine[turn]
end

-- A successful tool result; HTTP errors, JSON-RPC errors and isError results are not.
require("benches.http.results").install(function(status, body)
  return status == 200 and body:find('"result"', 1, true) and not body:find('"isError":true', 1, true)
end)
