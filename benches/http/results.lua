-- What the wrk scripts share: count the answers that are what the script wants (`ok_when`)
-- apart from the rest, and print RESULTS and LATENCY lines at the end. wrk runs the scripts
-- from the repository root, where `require("benches.http.results")` finds this file.
-- Each thread learns its place (`thread_index`, from 0) before its `init` runs.
local results = {}

function results.install(ok_when)
  local threads = {}
  function setup(thread)
    thread:set("thread_index", #threads)
    table.insert(threads, thread)
  end
  ok_results, bad_results = 0, 0
  function response(status, headers, body)
    if ok_when(status, body) then ok_results = ok_results + 1 else bad_results = bad_results + 1 end
  end
  function done(summary, latency, requests)
    local ok, bad = 0, 0
    for _, t in ipairs(threads) do ok = ok + t:get("ok_results"); bad = bad + t:get("bad_results") end
    io.write(string.format("RESULTS ok=%d bad=%d\n", ok, bad))
    io.write(string.format("LATENCY p50_us=%d p99_us=%d\n", latency:percentile(50), latency:percentile(99)))
  end
end

return results
