//! The [`PassContext`]: results that passes hand to later passes without changing the graph
//! (a schedule, a plan, a rewrite report), keyed by type — the role of MLIR's analysis manager.
//!
//! Invariant: the context holds at most one value of each type; [`PassContext::insert`]
//! replaces an earlier one (a pass that runs again overwrites its result).

use std::any::{Any, TypeId};
use std::collections::HashMap;

/// Results of analysis passes, one value per type (see the module docs).
///
/// ```
/// use ebb_passes::manager::PassContext;
/// let mut cx = PassContext::new();
/// cx.insert(42_u32);
/// assert_eq!(cx.get::<u32>(), Some(&42));
/// assert_eq!(cx.take::<u32>(), Some(42));
/// assert!(cx.get::<u32>().is_none());
/// ```
#[derive(Default)]
pub struct PassContext {
    values: HashMap<TypeId, Box<dyn Any>>,
}

impl PassContext {
    /// An empty context.
    pub fn new() -> Self {
        PassContext::default()
    }

    /// Stores `value`, replacing an earlier value of the same type.
    pub fn insert<T: Any>(&mut self, value: T) {
        self.values.insert(TypeId::of::<T>(), Box::new(value));
    }

    /// The stored value of type `T`, if any.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.values.get(&TypeId::of::<T>())?.downcast_ref()
    }

    /// Removes and returns the stored value of type `T`, if any.
    pub fn take<T: Any>(&mut self) -> Option<T> {
        let b = self.values.remove(&TypeId::of::<T>())?;
        b.downcast().ok().map(|b| *b)
    }

    /// True when a value of type `T` is stored.
    pub fn contains<T: Any>(&self) -> bool {
        self.values.contains_key(&TypeId::of::<T>())
    }
}

impl std::fmt::Debug for PassContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PassContext({} values)", self.values.len())
    }
}
