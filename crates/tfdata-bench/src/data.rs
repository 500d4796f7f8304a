//! Benchmark data: TFRecord shards of JPEG-encoded `tf.train.Example`s,
//! written by `scripts/make_images.py` with TensorFlow (tfdata has no JPEG
//! encoder) and cached between runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// The directory of this crate's Python scripts.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts")
}

/// The workspace's `target/` directory (the one this binary was built in).
pub fn target_dir() -> PathBuf {
    match option_env!("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
    }
}

/// Runs `scripts/<script>` with `python` (TensorFlow's, or for
/// `python_client.py` one with tfdata's Python package) and returns the last
/// line of its stdout that is a JSON object (the scripts print their result
/// last).
pub fn run_python_script(python: &Path, script: &str, args: &[String]) -> Result<String> {
    let path = scripts_dir().join(script);
    let output = Command::new(python)
        .arg(&path)
        .args(args)
        .env("TF_CPP_MIN_LOG_LEVEL", "2")
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    if !output.status.success() {
        bail!(
            "{} failed ({}):\n{}",
            path.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .map(str::to_string)
        .with_context(|| format!("{} printed no JSON: {stdout}", path.display()))
}

/// The Python of a venv with tfdata's Python package, for `--python-client`
/// without a path: `~/.cache/tfdata-py-release/bin/python` (a release build
/// of the native module) if it exists, else `~/.cache/tfdata-py/bin/python`.
pub fn default_python_client() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    let release = home.join(".cache/tfdata-py-release/bin/python");
    if release.exists() {
        release
    } else {
        home.join(".cache/tfdata-py/bin/python")
    }
}

/// Where the images data set of `examples` examples is cached by default.
pub fn default_images_dir(examples: u64) -> PathBuf {
    target_dir()
        .join("bench-data")
        .join(format!("images-{examples}"))
}

/// The TensorFlow venv's Python: `~/.cache/tfdata-tf-2.21/bin/python`.
pub fn default_python() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/tfdata-tf-2.21/bin/python")
}

/// What `make_images.py` wrote (its `manifest.json`).
#[derive(Debug, Clone)]
pub struct ImageData {
    pub dir: PathBuf,
    pub examples: u64,
    pub files: Vec<PathBuf>,
    pub mean_jpeg_bytes: f64,
    pub width: u64,
    pub height: u64,
}

impl ImageData {
    /// The glob matching the shards, for `list_files`.
    pub fn pattern(&self) -> String {
        self.dir.join("train-*.tfrecord").display().to_string()
    }
}

/// Reads a complete data set of `examples` examples in `dir`, or `None` if
/// it is missing, incomplete or of another size.
fn read_manifest(dir: &Path, examples: u64) -> Option<ImageData> {
    let text = std::fs::read_to_string(dir.join("manifest.json")).ok()?;
    let manifest: Value = serde_json::from_str(&text).ok()?;
    if manifest.get("examples")?.as_u64()? != examples {
        return None;
    }
    let files: Vec<PathBuf> = manifest
        .get("files")?
        .as_array()?
        .iter()
        .map(|f| f.as_str().map(|name| dir.join(name)))
        .collect::<Option<_>>()?;
    if files.is_empty() || !files.iter().all(|f| f.is_file()) {
        return None;
    }
    Some(ImageData {
        dir: dir.to_path_buf(),
        examples,
        files,
        mean_jpeg_bytes: manifest.get("mean_jpeg_bytes")?.as_f64()?,
        width: manifest.get("width")?.as_u64()?,
        height: manifest.get("height")?.as_u64()?,
    })
}

/// The images data set in `dir`, generated with `python` first if it is
/// not there yet.
pub fn ensure_images(dir: &Path, examples: u64, python: &Path) -> Result<ImageData> {
    if let Some(data) = read_manifest(dir, examples) {
        return Ok(data);
    }
    let script = scripts_dir().join("make_images.py");
    eprintln!(
        "tfdata-bench: writing {examples} JPEG examples to {} with {}",
        dir.display(),
        python.display()
    );
    let status = Command::new(python)
        .arg(&script)
        .arg("--out-dir")
        .arg(dir)
        .arg("--examples")
        .arg(examples.to_string())
        .env("TF_CPP_MIN_LOG_LEVEL", "2")
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| {
            format!(
                "cannot run {} (the TensorFlow 2.21 venv; see --python)",
                python.display()
            )
        })?;
    if !status.success() {
        bail!("{} failed: {status}", script.display());
    }
    read_manifest(dir, examples).with_context(|| {
        format!(
            "{} did not leave a complete data set in {}",
            script.display(),
            dir.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_must_match_and_its_files_exist() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = serde_json::json!({
            "examples": 4, "files": ["a.tfrecord"], "mean_jpeg_bytes": 10.0,
            "width": 500, "height": 375,
        });
        std::fs::write(dir.path().join("manifest.json"), manifest.to_string()).unwrap();
        assert!(
            read_manifest(dir.path(), 4).is_none(),
            "a.tfrecord is missing"
        );
        std::fs::write(dir.path().join("a.tfrecord"), b"").unwrap();
        let data = read_manifest(dir.path(), 4).unwrap();
        assert_eq!(data.files, vec![dir.path().join("a.tfrecord")]);
        assert!(data.pattern().ends_with("train-*.tfrecord"));
        assert!(read_manifest(dir.path(), 8).is_none(), "another size");
    }
}
