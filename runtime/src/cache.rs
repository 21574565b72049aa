//! A bounded LRU cache of finalized plans keyed by (bindings, budget), so a trainer that meets
//! a shape again gets its plan in microseconds.

use crate::finalize::{finalize, ConcretePlan, FinalizeError, FinalizeOptions};
use ebb_ir::plan::Plan;
use ebb_ir::Bindings;
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Arc;

/// Cache key: symbol values in symbol order, and the budget.
type Key = (Vec<i64>, Option<i64>);

/// LRU cache of [`ConcretePlan`]s for one [`Plan`].
pub struct PlanCache {
    plan: Arc<Plan>,
    cache: LruCache<Key, Arc<ConcretePlan>>,
    /// Hits since creation.
    pub hits: u64,
    /// Misses since creation.
    pub misses: u64,
}

impl PlanCache {
    /// A cache holding at most `capacity` finalized plans (at least 1).
    pub fn new(plan: Arc<Plan>, capacity: usize) -> Self {
        let cap = NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN);
        PlanCache {
            plan,
            cache: LruCache::new(cap),
            hits: 0,
            misses: 0,
        }
    }

    /// The plan at `b` under `opts` (cached by bindings and budget; the other options are
    /// assumed fixed for the cache's lifetime).
    pub fn get(
        &mut self,
        b: &Bindings,
        opts: &FinalizeOptions,
    ) -> Result<Arc<ConcretePlan>, FinalizeError> {
        let key: Key = (b.values().copied().collect(), opts.budget);
        if let Some(p) = self.cache.get(&key) {
            self.hits += 1;
            return Ok(p.clone());
        }
        self.misses += 1;
        let p = Arc::new(finalize(&self.plan, b, opts)?);
        self.cache.put(key, p.clone());
        Ok(p)
    }

    /// Number of cached plans.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
}
