-- wrk script: GET the fake forge's REST route for one repository with a token, the floor a
-- tools/call through the server is compared with; counts answers other than 200.
wrk.headers["Authorization"] = "token " .. (os.getenv("MCP_TOKEN") or "tok-alice-0123456789")
local threads = {}
function setup(thread) table.insert(threads, thread) end
ok_results, bad_results = 0, 0
function response(status, headers, body)
  if status == 200 then ok_results = ok_results + 1 else bad_results = bad_results + 1 end
end
function done(summary, latency, requests)
  local ok, bad = 0, 0
  for _, t in ipairs(threads) do ok = ok + t:get("ok_results"); bad = bad + t:get("bad_results") end
  io.write(string.format("RESULTS ok=%d bad=%d\n", ok, bad))
  io.write(string.format("LATENCY p50_us=%d p99_us=%d\n", latency:percentile(50), latency:percentile(99)))
end
