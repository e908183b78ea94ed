//! Named counters: requests and answers by kind, faults injected.

use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Default)]
pub(crate) struct Counters(pub(crate) Mutex<BTreeMap<String, u64>>);

impl Counters {
    pub(crate) fn add(&self, key: &str, n: u64) {
        *self.0.lock().unwrap().entry(key.to_owned()).or_default() += n;
    }
    pub(crate) fn get(&self, key: &str) -> u64 {
        self.0.lock().unwrap().get(key).copied().unwrap_or(0)
    }
    pub(crate) fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0.lock().unwrap().clone()
    }
}
