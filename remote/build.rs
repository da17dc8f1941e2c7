//! Compiles PYNQ.remote's protocol (proto/) into Rust with a protobuf compiler
//! written in Rust (protox), so that no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "remote_device.proto",
        "mmio.proto",
        "buffer.proto",
        "gpio.proto",
    ];
    let fds = protox::compile(files, ["proto"])?;
    tonic_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_fds(fds)?;
    for f in files {
        println!("cargo:rerun-if-changed=proto/{f}");
    }
    Ok(())
}
