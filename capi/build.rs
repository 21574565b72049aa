//! Generates the C header `ebb.h` into `$OUT_DIR` with cbindgen (config: cbindgen.toml).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let out = std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into());
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config = match cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")) {
        Ok(c) => c,
        Err(e) => {
            println!("cargo:warning=cbindgen.toml: {e}");
            return;
        }
    };
    match cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
    {
        Ok(b) => {
            b.write_to_file(format!("{out}/ebb.h"));
        }
        Err(e) => println!("cargo:warning=cbindgen could not generate ebb.h: {e}"),
    }
}
