//! Compiles the contract with protox (pure Rust; no system protoc needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=machinedriver");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let mut compiler = protox::Compiler::new(["."])?;
    compiler.include_imports(true).include_source_info(true);
    compiler.open_files([
        "machinedriver/v1/options.proto",
        "machinedriver/v1/types.proto",
        "machinedriver/v1/driver.proto",
        "machinedriver/v1/identity.proto",
    ])?;
    std::fs::write(out.join("machinedriver_descriptor.bin"), compiler.encode_file_descriptor_set())?;
    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
