//! Turns by organisation at the database's scarce places: PostgreSQL's connections, SQLite's
//! read connections and its one writer (docs/DECISIONS.md, "Units take turns by organisation at
//! the database"). A unit says whose work it is ([`Lane`]); while places are free it takes one
//! at once. When they are all held, waiting units queue per lane, first come first served
//! within a lane, and each place given back goes to the next lane in turn (round robin) that
//! holds less than its fair share (the places divided among the lanes holding or waiting), or,
//! if none does, to the next lane in turn. One organisation holds at most `per_lane` places at
//! once, so its in-flight work never takes every place; and as its units end, their places go
//! to the others until it holds no more than its share, however long its units hold them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::oneshot;
use uuid::Uuid;

/// Whose work a unit of work is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    /// An organisation's: its requests and jobs.
    Org(Uuid),
    /// Work for no organisation yet: a credential read before it is checked, sign-ins, job
    /// claims, sweeps, the command line. It takes its turn like a lane of its own, and is not
    /// capped (it is the first read of every request).
    Unattributed,
}

/// The places of one resource and who waits for them.
pub(crate) struct Turns {
    state: Mutex<State>,
    /// Places one organisation may hold at once.
    per_lane: usize,
}

struct State {
    free: usize,
    held: HashMap<Lane, usize>,
    waiting: HashMap<Lane, VecDeque<oneshot::Sender<Turn>>>,
    /// Lanes with waiters, in the order they are served.
    ring: VecDeque<Lane>,
}

/// A place, held until dropped; dropping it hands it to the next lane in turn.
pub(crate) struct Turn {
    turns: Arc<Turns>,
    lane: Lane,
}

impl Turns {
    /// `places` places (at least one); an organisation holds at most `per_lane` of them (at
    /// least one).
    pub(crate) fn new(places: usize, per_lane: usize) -> Arc<Turns> {
        let places = places.max(1);
        Arc::new(Turns {
            state: Mutex::new(State {
                free: places,
                held: HashMap::new(),
                waiting: HashMap::new(),
                ring: VecDeque::new(),
            }),
            per_lane: per_lane.clamp(1, places),
        })
    }

    /// `places` places of which one organisation may hold all but an eighth (at least one
    /// left for the others when there are two or more).
    pub(crate) fn shared(places: usize) -> Arc<Turns> {
        let places = places.max(1);
        let kept = if places > 1 { (places / 8).max(1) } else { 0 };
        Turns::new(places, places - kept)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Counters changed only under the lock, whole after any panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for `lane`: at once if one is free, nobody of its lane waits and it is under its
    /// share; else in its lane's queue until its turn. Cancel-safe: a turn granted to a
    /// waiter that is gone passes on.
    pub(crate) async fn take(self: &Arc<Self>, lane: Lane) -> Turn {
        let waiting = {
            let mut state = self.lock();
            if state.free > 0 && !state.waiting.contains_key(&lane) && self.may_hold(&state, lane) {
                state.grant(lane);
                return Turn {
                    turns: Arc::clone(self),
                    lane,
                };
            }
            let (tx, rx) = oneshot::channel();
            let queue = state.waiting.entry(lane).or_default();
            queue.push_back(tx);
            if queue.len() == 1 {
                state.ring.push_back(lane);
            }
            rx
        };
        match waiting.await {
            Ok(turn) => turn,
            // Only a dropped `Turns` drops its senders, and a waiter holds it alive.
            Err(_) => unreachable!("a waiting turn is granted or passed on"),
        }
    }

    /// The lane whose waiter is served next, if any waits.
    pub(crate) fn next_lane(&self) -> Option<Lane> {
        let state = self.lock();
        self.next_in_ring(&state).map(|at| state.ring[at])
    }

    fn may_hold(&self, state: &State, lane: Lane) -> bool {
        lane == Lane::Unattributed || state.holds(lane) < self.per_lane
    }

    /// Where in the ring the lane served next is: the first under its cap and its fair share,
    /// else the first under its cap.
    fn next_in_ring(&self, state: &State) -> Option<usize> {
        let demand = state
            .held
            .keys()
            .chain(state.waiting.keys())
            .collect::<std::collections::HashSet<_>>()
            .len()
            .max(1);
        let places = state.free + state.held.values().sum::<usize>();
        let share = places.div_ceil(demand);
        let eligible = |i: &usize| self.may_hold(state, state.ring[*i]);
        let mut order = (0..state.ring.len()).filter(eligible);
        let first = order.clone().next()?;
        Some(
            order
                .find(|i| state.holds(state.ring[*i]) < share)
                .unwrap_or(first),
        )
    }

    /// A place given back by `lane`: to the next lane in turn that may hold one.
    fn give_back(self: &Arc<Self>, lane: Lane) {
        let handed = {
            let mut state = self.lock();
            state.free += 1;
            match state.held.get_mut(&lane) {
                Some(1) | None => {
                    state.held.remove(&lane);
                }
                Some(n) => *n -= 1,
            }
            self.next_waiter(&mut state)
        };
        if let Some((tx, next)) = handed {
            let turn = Turn {
                turns: Arc::clone(self),
                lane: next,
            };
            // A waiter gone meanwhile (its request cancelled): the place passes on.
            if let Err(turn) = tx.send(turn) {
                drop(turn);
            }
        }
    }

    /// The next waiter in turn, its place granted: the first lane of the ring under its share,
    /// which then goes to the back if it still waits.
    fn next_waiter(&self, state: &mut State) -> Option<(oneshot::Sender<Turn>, Lane)> {
        while state.free > 0 {
            let at = self.next_in_ring(state)?;
            let lane = state.ring.remove(at)?;
            let queue = state.waiting.get_mut(&lane)?;
            let tx = queue.pop_front();
            if queue.is_empty() {
                state.waiting.remove(&lane);
            } else {
                state.ring.push_back(lane);
            }
            match tx {
                Some(tx) if !tx.is_closed() => {
                    state.grant(lane);
                    return Some((tx, lane));
                }
                _ => {} // cancelled while it waited
            }
        }
        None
    }
}

impl State {
    fn holds(&self, lane: Lane) -> usize {
        self.held.get(&lane).copied().unwrap_or(0)
    }

    fn grant(&mut self, lane: Lane) {
        self.free -= 1;
        *self.held.entry(lane).or_default() += 1;
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.turns.give_back(self.lane);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn org(n: u128) -> Lane {
        Lane::Org(Uuid::from_u128(n))
    }

    /// Whether `take` is still waiting after the runtime had a chance to run it.
    async fn pending<F: std::future::Future + Unpin>(f: &mut F) -> bool {
        tokio::time::timeout(Duration::from_millis(20), f)
            .await
            .is_err()
    }

    #[tokio::test]
    async fn one_organisation_never_holds_every_place() {
        let turns = Turns::shared(8);
        let mut a = Vec::new();
        for _ in 0..7 {
            a.push(turns.take(org(1)).await);
        }
        let mut eighth = Box::pin(turns.take(org(1)));
        assert!(pending(&mut eighth).await, "A holds 7 of 8");
        let b = turns.take(org(2)).await;
        drop(b);
        // The place B gave back does not go to A's waiter: A is at its share.
        assert!(pending(&mut eighth).await);
        drop(a.pop());
        eighth.await;
    }

    /// A holds 7 of 8 places for a long time (units waiting on a lock, say); B and the
    /// unattributed lane wait. Each place A gives back goes to them, not to A's own next unit,
    /// until A holds no more than its share.
    #[tokio::test]
    async fn places_given_back_go_to_lanes_under_their_share() {
        let turns = Turns::shared(8);
        let mut a: Vec<Turn> = Vec::new();
        for _ in 0..7 {
            a.push(turns.take(org(1)).await);
        }
        let _u = turns.take(Lane::Unattributed).await;
        let mut a_next = Box::pin(turns.take(org(1)));
        let mut b = Box::pin(turns.take(org(2)));
        let mut u = Box::pin(turns.take(Lane::Unattributed));
        assert!(pending(&mut a_next).await && pending(&mut b).await && pending(&mut u).await);
        drop(a.pop());
        drop(a.pop());
        // Three lanes: a share of three places each. B and U get the two places.
        let b = tokio::time::timeout(Duration::from_secs(1), b)
            .await
            .expect("B served");
        let u = tokio::time::timeout(Duration::from_secs(1), u)
            .await
            .expect("U served");
        assert!(pending(&mut a_next).await, "A holds 5, over its share");
        drop((b, u));
        a_next.await;
    }

    #[tokio::test]
    async fn lanes_take_turns_and_keep_their_order_within() {
        let turns = Turns::new(1, 1);
        let held = turns.take(Lane::Unattributed).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (lane, name) in [
            (org(1), "a1"),
            (org(1), "a2"),
            (org(1), "a3"),
            (org(2), "b1"),
        ] {
            let (turns, order) = (Arc::clone(&turns), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let turn = turns.take(lane).await;
                order.lock().unwrap().push(name);
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(turn);
            }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(turns.next_lane(), Some(org(1)));
        drop(held);
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["a1", "b1", "a2", "a3"]);
    }

    #[tokio::test]
    async fn a_cancelled_waiter_never_keeps_a_place() {
        let turns = Turns::new(1, 1);
        let held = turns.take(org(1)).await;
        let mut gone = Box::pin(turns.take(org(2)));
        assert!(pending(&mut gone).await);
        drop(gone);
        drop(held);
        // The place is free: taken at once.
        let again = tokio::time::timeout(Duration::from_secs(1), turns.take(org(3))).await;
        assert!(again.is_ok(), "the cancelled waiter kept the place");
    }
}
