//! Says whether the JPEG decoder was built with its SIMD code (issue 37:
//! no silent slow build). libjpeg-turbo's x86 SIMD is assembled by `nasm`;
//! without it mozjpeg-sys builds the C code alone and says so in a warning
//! cargo never shows (warnings of dependencies' build scripts are hidden).
//! JPEG decoding then runs at about half speed and the image pipeline falls
//! from 1.27x to 0.75x TensorFlow (docs/performance.md). This script reads
//! the `jconfig.h` mozjpeg-sys generated (`WITH_SIMD` is defined when the
//! SIMD code is in), warns where cargo shows it, and records the answer for
//! the worker's start-up log and `tfdata-bench` (`TFDATA_JPEG_SIMD`).

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_JPEG_INCLUDE");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let simd = built_with_simd();
    println!(
        "cargo:rustc-env=TFDATA_JPEG_SIMD={}",
        match simd {
            Some(true) => "1",
            Some(false) => "0",
            None => "unknown",
        }
    );
    if simd == Some(false) && (arch == "x86_64" || arch == "x86") {
        println!(
            "cargo:warning=libjpeg-turbo was built without its SIMD code because `nasm` was not \
             found: JPEG decoding runs about 2x slower (docs/performance.md, \"JPEG decoder\"). \
             Install nasm (Debian/Ubuntu: apt-get install nasm; macOS: brew install nasm), then \
             `cargo clean -p mozjpeg-sys` and build again."
        );
    }
}

/// `Some(true)` when the generated `jconfig.h` defines `WITH_SIMD`,
/// `Some(false)` when it does not, `None` when it cannot be found.
/// Reading it again whenever mozjpeg-sys writes it anew (a rebuild after
/// nasm was installed).
fn built_with_simd() -> Option<bool> {
    let include = std::env::var_os("DEP_JPEG_INCLUDE")?;
    let (path, text) = std::env::split_paths(&include)
        .map(|dir: PathBuf| dir.join("jconfig.h"))
        .find_map(|path| std::fs::read_to_string(&path).ok().map(|text| (path, text)))?;
    println!("cargo:rerun-if-changed={}", path.display());
    Some(text.lines().any(|l| l.trim() == "#define WITH_SIMD 1"))
}
