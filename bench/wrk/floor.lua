-- wrk: GET one invoice from the stack's floor (crates/bench/src/bin/floor.rs). scripts/bench passes the
-- floor's constant token in the environment.
wrk.headers["Authorization"] = "Bearer " .. os.getenv("WRK_FLOOR_TOKEN")
