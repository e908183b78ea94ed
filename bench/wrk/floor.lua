-- wrk: GET one invoice from the stack's floor (bench/floor.rs). scripts/bench passes the
-- floor's constant token in the environment.
wrk.headers["Authorization"] = "Bearer " .. os.getenv("WRK_FLOOR_TOKEN")
