//! A bounded LRU cache of finalized plans keyed by (bindings, budget), so a trainer that meets
//! a shape again gets its plan in microseconds.

use crate::finalize::{ConcretePlan, FinalizeError, FinalizeOptions, Finalizer};
use crate::format::Plan;
use ebb_ir::Bindings;
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Arc;

/// Cache key: symbol values in symbol order, and the budget.
type Key = (Vec<i64>, Option<i64>);

/// LRU cache of [`ConcretePlan`]s for one [`Plan`]; misses finalize through one
/// [`Finalizer`], so each plan variant is prepared once.
pub struct PlanCache {
    finalizer: Finalizer,
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
            finalizer: Finalizer::new(plan),
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
        let p = Arc::new(self.finalizer.finalize(b, opts)?);
        self.cache.put(key, p.clone());
        Ok(p)
    }

    /// Prepares every plan variant now, so that no later miss pays for it (see
    /// [`Finalizer::prepare_all`]).
    pub fn prepare_all(&self) {
        self.finalizer.prepare_all();
    }

    /// Prepares the finalizer's plan atlas for finalizes under `opts` from full finalizes at
    /// `samples` ([`Finalizer::prepare_atlas`]); returns its number of entries. Plans already
    /// cached are kept.
    pub fn prepare_atlas(&self, samples: &[Bindings], opts: &FinalizeOptions) -> usize {
        self.finalizer.prepare_atlas(samples, opts)
    }

    /// Prepares the finalizer's atlas for finalizes whose budget is a share of each shape's
    /// peak, from full finalizes at each sample under its own budget (bytes)
    /// ([`Finalizer::prepare_atlas_relative`]; `opts`'s budget is not read); returns its
    /// number of entries. Plans already cached are kept.
    pub fn prepare_atlas_relative(
        &self,
        samples: &[(Bindings, i64)],
        opts: &FinalizeOptions,
    ) -> usize {
        self.finalizer.prepare_atlas_relative(samples, opts)
    }

    /// How many finalizes so far took an atlas's fast path ([`Finalizer::atlas_hits`]).
    pub fn atlas_hits(&self) -> usize {
        self.finalizer.atlas_hits()
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
