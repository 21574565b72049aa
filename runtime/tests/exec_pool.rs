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
