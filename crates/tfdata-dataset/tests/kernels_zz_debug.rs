use bytes::Bytes;
use tfdata_core::Tensor;
#[test]
fn dump() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernels");
    for name in [
        "jpeg_odd",
        "jpeg_rgb420",
        "jpeg_rgb444",
        "jpeg_noise",
        "jpeg_progressive",
    ] {
        let data = std::fs::read(dir.join(format!("{name}.jpg"))).unwrap();
        let t = tfdata_dataset::kernels::decode_jpeg(&Tensor::scalar_string(Bytes::from(data)), 3)
            .unwrap();
        std::fs::write(format!("/tmp/jdbg/{name}.raw"), t.to_vec::<u8>().unwrap()).unwrap();
    }
}
