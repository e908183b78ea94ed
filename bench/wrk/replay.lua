-- wrk: the same create again and again (one key, one body), so every request is a replay.
-- scripts/bench passes the agent key, the idempotency key and the body in the environment.
wrk.method = "POST"
wrk.body = os.getenv("WRK_BODY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("WRK_AGENT_KEY")
wrk.headers["Idempotency-Key"] = os.getenv("WRK_IDEMPOTENCY_KEY")
