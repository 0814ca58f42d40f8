-- wrk script: GET the fake forge's REST route for one repository with a token, the floor a
-- tools/call through the server is compared with; counts answers other than 200.
wrk.headers["Authorization"] = "token " .. (os.getenv("MCP_TOKEN") or "tok-alice-0123456789")
require("benches.http.results").install(function(status) return status == 200 end)
