//! The host memory limit (`ebb_runtime::host_memory`): cgroup headroom and MemAvailable.

use ebb_runtime::host_memory::*;

#[test]
fn cgroup_limits_are_read_for_the_cgroup_and_its_ancestors() {
    let root = std::env::temp_dir().join(format!("ebb-cgroup-{}", std::process::id()));
    let leaf = root.join("sys/fs/cgroup/a/b");
    std::fs::create_dir_all(&leaf).unwrap();
    let parent = root.join("sys/fs/cgroup/a");
    std::fs::write(leaf.join("memory.max"), "max\n").unwrap();
    std::fs::write(leaf.join("memory.current"), "100\n").unwrap();
    std::fs::write(parent.join("memory.max"), "1000000\n").unwrap();
    std::fs::write(parent.join("memory.current"), "400000\n").unwrap();
    let l = cgroup_headroom(&root, "0::/a/b\n").unwrap();
    assert_eq!(l.bytes, 600000);
    assert!(l.source.contains("a/memory.max"), "{}", l.source);
    assert_eq!(cgroup_headroom(&root, "0::/elsewhere\n"), None);
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn the_limit_is_the_smallest_headroom() {
    let l = host_memory_limit().expect("a Linux host has MemAvailable");
    assert!(l.bytes >= 0);
    let avail = meminfo_field(&read("/proc/meminfo").unwrap(), "MemAvailable:").unwrap();
    assert!(l.bytes <= avail);
}
