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

local threads = {}
function setup(thread) table.insert(threads, thread) end
ok_results, bad_results = 0, 0
function response(status, headers, body)
  if status == 200 and body:find('"result"', 1, true) and not body:find('"isError":true', 1, true) then
    ok_results = ok_results + 1
  else
    bad_results = bad_results + 1
  end
end
function done(summary, latency, requests)
  local ok, bad = 0, 0
  for _, t in ipairs(threads) do ok = ok + t:get("ok_results"); bad = bad + t:get("bad_results") end
  io.write(string.format("RESULTS ok=%d bad=%d\n", ok, bad))
  io.write(string.format("LATENCY p50_us=%d p99_us=%d\n", latency:percentile(50), latency:percentile(99)))
end
