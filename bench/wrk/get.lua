-- wrk: GET one invoice as its agent. scripts/bench passes the agent key in the environment.
wrk.headers["Authorization"] = "Bearer " .. os.getenv("WRK_AGENT_KEY")
