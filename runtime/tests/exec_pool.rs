//! The buffer pool (`ebb_runtime::exec::pool::BufferPool`): recycling and its capacity.

use ebb_ir::DType;
use ebb_runtime::exec::pool::BufferPool;
use ebb_runtime::tensor::Tensor;
use std::sync::Arc;

#[test]
fn recycles_by_type_and_length_within_the_capacity() {
    let pool = Arc::new(BufferPool::new(1 << 20));
    {
        let _on = pool.activate();
        drop(Tensor::zeros(DType::F32, vec![256, 128])); // 128 KiB
        drop(Tensor::zeros(DType::F32, vec![16])); // small: left to the allocator
    }
    drop(Tensor::zeros(DType::F32, vec![256, 256])); // no pool active
    assert_eq!(pool.held_bytes(), 128 << 10);
    assert!(pool.take(DType::F32, 1 << 10).is_none());
    assert!(pool.take(DType::I32, 256 * 128).is_none());
    let d = pool.take(DType::F32, 256 * 128).expect("kept");
    assert_eq!((d.dtype(), d.len()), (DType::F32, 256 * 128));
    assert_eq!((pool.held_bytes(), pool.reused_bytes()), (0, 128 << 10));
}

#[test]
fn shared_buffers_are_not_kept_and_capacity_bounds_the_pool() {
    let pool = Arc::new(BufferPool::new(200 << 10));
    let _on = pool.activate();
    let t = Tensor::zeros(DType::F32, vec![1 << 15]); // 128 KiB
    let shared = t.clone();
    drop(t);
    assert_eq!(pool.held_bytes(), 0);
    drop(shared);
    assert_eq!(pool.held_bytes(), 128 << 10);
    drop(Tensor::zeros(DType::F32, vec![1 << 15])); // over the capacity: dropped
    assert_eq!(pool.held_bytes(), 128 << 10);
    pool.set_capacity(64 << 10);
    assert_eq!(pool.held_bytes(), 0);
}

#[test]
fn buffers_below_the_recycling_size_are_neither_kept_nor_looked_for() {
    use ebb_runtime::exec::pool::recycle_min_bytes;
    use ebb_runtime::tensor::Data;
    let pool = Arc::new(BufferPool::new(1 << 20));
    let small = (recycle_min_bytes() / 4 - 1) as usize; // f32 elements, just below the size
    let large = (recycle_min_bytes() / 4) as usize;
    {
        let _on = pool.activate();
        drop(Tensor::zeros(DType::F32, vec![small]));
        drop(Tensor::zeros(DType::F32, vec![large]));
    }
    assert_eq!(pool.held_bytes(), recycle_min_bytes());
    assert!(pool.take(DType::F32, small).is_none());
    assert_eq!(pool.take(DType::F32, large).map(|d| d.len()), Some(large));
    // An explicit `put` of a small buffer keeps nothing either (`take` would never find it).
    pool.put(Data::zeros(DType::F32, small));
    assert_eq!(pool.held_bytes(), 0);
    pool.put(Data::zeros(DType::F32, large));
    assert_eq!(pool.held_bytes(), recycle_min_bytes());
}
