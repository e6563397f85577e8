//! Compiles the contract with protox (pure Rust; no system protoc needed).

/// The contract's files.
const PROTOS: [&str; 4] = [
    "machinedriver/v1/options.proto",
    "machinedriver/v1/types.proto",
    "machinedriver/v1/driver.proto",
    "machinedriver/v1/identity.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Each file, not only the folder: a folder's mtime does not change when a file in it is edited.
    println!("cargo:rerun-if-changed=machinedriver");
    for file in PROTOS {
        println!("cargo:rerun-if-changed={file}");
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let mut compiler = protox::Compiler::new(["."])?;
    compiler.include_imports(true).include_source_info(true);
    compiler.open_files(PROTOS)?;
    std::fs::write(out.join("machinedriver_descriptor.bin"), compiler.encode_file_descriptor_set())?;
    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
