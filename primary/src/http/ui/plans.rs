//! The plans of the latest commands this process started, for their
//! pages' values diff: the state store keeps no plan.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::service::view::PlanView;

/// How many commands' plans are kept.
const KEEP: usize = 32;

/// The latest commands' plans, by command id.
#[derive(Default)]
pub struct Plans {
    latest: Mutex<VecDeque<(String, Arc<PlanView>)>>,
}

impl Plans {
    /// Keeps `plan` as command `id`'s, dropping the oldest beyond [`KEEP`].
    pub fn remember(&self, id: &str, plan: &PlanView) {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        latest.retain(|(other, _)| other != id);
        if latest.len() >= KEEP {
            latest.pop_front();
        }
        latest.push_back((id.to_owned(), Arc::new(plan.clone())));
    }

    /// Command `id`'s plan, when still kept.
    pub fn get(&self, id: &str) -> Option<Arc<PlanView>> {
        let latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        latest
            .iter()
            .find(|(other, _)| other == id)
            .map(|(_, p)| p.clone())
    }
}
