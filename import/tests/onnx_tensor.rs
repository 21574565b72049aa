//! Tests of `onnx::tensor` (`import/src/onnx/tensor.rs`).

use ebb_import::onnx::proto::{data_type as dt, TensorProto};
use ebb_import::onnx::tensor::*;

#[test]
fn raw_and_typed_data_agree() {
    let raw = TensorProto {
        dims: vec![2],
        data_type: Some(dt::FLOAT),
        raw_data: Some([1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat()),
        ..Default::default()
    };
    let typed = TensorProto {
        dims: vec![2],
        data_type: Some(dt::FLOAT),
        float_data: vec![1.5, -2.0],
        ..Default::default()
    };
    assert_eq!(decode(&raw, None).unwrap(), decode(&typed, None).unwrap());
}

#[test]
fn wrong_element_count_is_an_error() {
    let t = TensorProto {
        dims: vec![3],
        data_type: Some(dt::INT64),
        int64_data: vec![1, 2],
        ..Default::default()
    };
    assert!(decode(&t, None).unwrap_err().contains("holds 16 bytes"));
}

#[test]
fn external_data_is_read_relative_to_the_model() {
    let dir = std::env::temp_dir().join(format!("ebb_onnx_ext_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let vals: Vec<u8> = [7i64, 8, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.join("w.bin"), [vec![0u8; 8], vals].concat()).unwrap();
    let kv = |k: &str, v: &str| ebb_import::onnx::proto::StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v.into()),
    };
    let t = TensorProto {
        dims: vec![3],
        data_type: Some(dt::INT64),
        data_location: Some(1),
        external_data: vec![
            kv("location", "w.bin"),
            kv("offset", "8"),
            kv("length", "24"),
        ],
        ..Default::default()
    };
    let (_, _, lit) = decode(&t, Some(&dir)).unwrap();
    assert_eq!(lit.get_i64(2), Some(9));
    let mut bad = t.clone();
    bad.external_data[0] = kv("location", "../w.bin");
    assert!(decode(&bad, Some(&dir))
        .unwrap_err()
        .contains("relative path"));
    std::fs::remove_dir_all(&dir).ok();
}
