"""tf.image codecs beyond decoding JPEG/PNG: EncodeJpeg (every flag, every
quality of EncodeJpegVariableQuality: the bytes must be TensorFlow's),
EncodePng (round trips: our deflate stream is not zlib's, so the cases
compare the decoded pixels, plus every error) and DecodeGif (GIFs written
here by hand: local and global palettes, offsets, transparency, interlacing,
frames larger than the screen, and hostile or truncated bytes) and DecodeWebP
(lossy, lossless, alpha and animated files libwebp wrote, see webp/, every
channels value, cut and corrupt files) and DecodeJxl (lossless and lossy
files libjxl wrote, see jxl/; lossy ones compared within one level)."""

import glob
import os

import numpy as np
import tensorflow as tf

from harness import Family

R = tf.raw_ops
JXL_LOSSY = ("abs:1:lossy (VarDCT) JPEG XL is rendered in floating point by jxl-oxide and by "
             "libjxl, whose colour transfer uses fast approximations; samples differ by at "
             "most one level")


# ---------------------------------------------------------------------------
# A small GIF writer (no Pillow in TensorFlow's venv): LZW with a clear code
# often enough that the code size never grows, which every decoder reads.

def lzw(indices, min_code_size, early_eoi=None):
    clear, eoi = 1 << min_code_size, (1 << min_code_size) + 1
    size = min_code_size + 1
    codes = [clear]
    run = 0
    for n, i in enumerate(indices):
        if early_eoi is not None and n == early_eoi:
            break
        if run == (1 << min_code_size) - 2:
            codes.append(clear)
            run = 0
        codes.append(int(i))
        run += 1
    codes.append(eoi)
    bits, nbits, out = 0, 0, bytearray()
    for c in codes:
        bits |= c << nbits
        nbits += size
        while nbits >= 8:
            out.append(bits & 0xFF)
            bits >>= 8
            nbits -= 8
    if nbits:
        out.append(bits & 0xFF)
    blocks = bytearray([min_code_size])
    for k in range(0, len(out), 255):
        part = out[k:k + 255]
        blocks += bytes([len(part)]) + part
    return bytes(blocks + b"\x00")


def palette_bytes(colors):
    n = max(2, len(colors))
    bits = (n - 1).bit_length()
    table = list(colors) + [(0, 0, 0)] * ((1 << bits) - len(colors))
    return bits, b"".join(bytes(c) for c in table)


def gif(width, height, frames, global_colors=None, version=b"GIF89a", trailer=True):
    """frames: dicts with indices (h, w array), left, top, colors (a local
    palette, optional), transparent (optional), interlace (optional)."""
    out = bytearray(version)
    flags = 0
    gct = b""
    if global_colors is not None:
        bits, gct = palette_bytes(global_colors)
        flags = 0x80 | ((bits - 1) << 4) | (bits - 1)
    out += width.to_bytes(2, "little") + height.to_bytes(2, "little") + bytes([flags, 0, 0]) + gct
    for f in frames:
        idx = np.asarray(f["indices"], np.uint8)
        h, w = idx.shape
        if "transparent" in f:
            out += b"\x21\xf9\x04" + bytes([0x01, 0, 0, f["transparent"], 0])
        local = b""
        lflags = 0
        if "colors" in f:
            bits, local = palette_bytes(f["colors"])
            lflags = 0x80 | (bits - 1)
        rows = idx
        if f.get("interlace"):
            lflags |= 0x40
            order = list(range(0, h, 8)) + list(range(4, h, 8)) + list(range(2, h, 4)) + \
                list(range(1, h, 2))
            rows = idx[order]
        out += b"\x2c" + f.get("left", 0).to_bytes(2, "little") + \
            f.get("top", 0).to_bytes(2, "little") + w.to_bytes(2, "little") + \
            h.to_bytes(2, "little") + bytes([lflags]) + local
        code_size = max(2, int(idx.max()).bit_length() if idx.size else 2)
        code_size = max(code_size, f.get("code_size", 2))
        out += lzw(rows.reshape(-1), code_size, f.get("early_eoi"))
    if trailer:
        out += b"\x3b"
    return bytes(out)


def family():
    fam = Family("image_codecs")
    rng = np.random.default_rng(33)
    yy, xx = np.mgrid[0:37, 0:53]
    smooth = np.stack([(xx * 4) % 256, (yy * 6) % 256, (xx + yy) * 2 % 256], -1).astype(np.uint8)
    noise = rng.integers(0, 256, (17, 23, 3)).astype(np.uint8)
    grey = rng.integers(0, 256, (9, 14, 1)).astype(np.uint8)
    one = np.array([[[250, 3, 128]]], np.uint8)
    tall = rng.integers(0, 256, (40, 3, 3)).astype(np.uint8)

    # --- EncodeJpeg: the bytes, flag by flag.
    def jpeg(case, image, **attrs):
        fam.add("EncodeJpeg", lambda im, a=attrs: R.EncodeJpeg(image=im, **a), [image],
                f"EncodeJpeg/{case}")

    for name, image in (("smooth", smooth), ("noise", noise), ("grey", grey), ("1x1", one),
                        ("tall", tall)):
        jpeg(f"{name}/defaults", image)
        jpeg(f"{name}/q50 progressive", image, quality=50, progressive=True)
        jpeg(f"{name}/q80 optimized", image, quality=80, optimize_size=True)
        jpeg(f"{name}/444", image, quality=90, chroma_downsampling=False)
    for q in (0, 1, 10, 23, 24, 25, 49, 50, 51, 75, 99, 100):
        jpeg(f"smooth/quality {q}", smooth, quality=q)
    jpeg("smooth/progressive 444 optimized", smooth, progressive=True, chroma_downsampling=False,
         optimize_size=True, quality=70)
    jpeg("smooth/density cm", smooth, density_unit="cm", x_density=72, y_density=0)
    jpeg("smooth/density wraps", smooth, x_density=70000, y_density=-1)
    jpeg("smooth/xmp", smooth, xmp_metadata="<x:xmpmeta>ünïcødé ✓</x:xmpmeta>")
    jpeg("smooth/format rgb", smooth, format="rgb")
    jpeg("grey/format grayscale", grey, format="grayscale", progressive=True)
    jpeg("error/format grayscale of rgb", smooth, format="grayscale")
    jpeg("error/format rgb of grey", grey, format="rgb")
    jpeg("error/4 channels", rng.integers(0, 256, (4, 4, 4)).astype(np.uint8))
    jpeg("error/2 channels", rng.integers(0, 256, (4, 4, 2)).astype(np.uint8))
    jpeg("error/rank 2", rng.integers(0, 256, (4, 4)).astype(np.uint8))
    jpeg("error/rank 4", rng.integers(0, 256, (1, 4, 4, 3)).astype(np.uint8))
    jpeg("error/empty", np.zeros((0, 5, 3), np.uint8))
    jpeg("error/empty width", np.zeros((5, 0, 1), np.uint8))
    jpeg("error/quality 101", smooth, quality=101)
    jpeg("error/quality -1", smooth, quality=-1)

    # --- EncodeJpegVariableQuality: every quality on a small image.
    small = smooth[:9, :11]
    for q in range(0, 101):
        fam.add("EncodeJpegVariableQuality",
                lambda im, q: R.EncodeJpegVariableQuality(images=im, quality=q),
                [small, tf.constant(q, tf.int32)], f"EncodeJpegVariableQuality/quality {q}")
    for name, image in (("grey", grey), ("noise", noise)):
        fam.add("EncodeJpegVariableQuality",
                lambda im, q: R.EncodeJpegVariableQuality(images=im, quality=q),
                [image, tf.constant(33, tf.int32)], f"EncodeJpegVariableQuality/{name}")
    for name, image, q in (("quality 101", small, tf.constant(101)),
                           ("quality -5", small, tf.constant(-5)),
                           ("quality vector", small, tf.constant([50])),
                           ("rank 2", small[:, :, 0], tf.constant(50)),
                           ("4 channels", np.zeros((2, 2, 4), np.uint8), tf.constant(50))):
        fam.add("EncodeJpegVariableQuality",
                lambda im, q: R.EncodeJpegVariableQuality(images=im, quality=q),
                [image, q], f"EncodeJpegVariableQuality/error/{name}")

    # --- EncodePng: round trips (the decoded pixels and the output shape),
    # then every error. 16-bit files are read back as 8 bits (tfdata's
    # DecodePng has no dtype=uint16), which keeps the high bytes; a second
    # case encodes the image with its low bytes shifted up, so every bit of
    # every sample is compared.
    def png_roundtrip(case, image, compression=-1):
        image = tf.constant(image)
        batched = len(image.shape) > 3

        def fn(im):
            encoded = tf.raw_ops.EncodePng(image=im, compression=compression)
            flat = tf.reshape(encoded, [-1])
            outs = [tf.shape(encoded)]
            n = 1
            for d in im.shape[:-3]:
                n *= d
            for i in range(n):
                outs.append(tf.io.decode_png(flat[i], channels=0))
            return outs
        fam.add_function(f"EncodePng/{case}", fn, [image])
        if image.dtype == tf.uint16 and not batched:
            low = tf.bitwise.left_shift(image, 8)
            fam.add_function(f"EncodePng/{case}/low bytes", fn, [low])

    for channels in (1, 2, 3, 4):
        img8 = rng.integers(0, 256, (13, 17, channels)).astype(np.uint8)
        png_roundtrip(f"uint8/{channels} channels", img8)
        img16 = rng.integers(0, 65536, (7, 5, channels)).astype(np.uint16)
        png_roundtrip(f"uint16/{channels} channels", img16)
    for level in (-1, 0, 1, 9):
        png_roundtrip(f"smooth/compression {level}", smooth, level)
    png_roundtrip("batch 2x2", rng.integers(0, 256, (2, 2, 6, 5, 3)).astype(np.uint8))
    png_roundtrip("1x1", one)
    fam.add("EncodePng", lambda im: R.EncodePng(image=im), [np.zeros((0, 4, 5, 3), np.uint8)],
            "EncodePng/empty batch")

    def png_error(case, image, **attrs):
        fam.add("EncodePng", lambda im, a=attrs: R.EncodePng(image=im, **a), [image],
                f"EncodePng/error/{case}")
    png_error("rank 2", np.zeros((4, 4), np.uint8))
    png_error("5 channels", np.zeros((4, 4, 5), np.uint8))
    png_error("0 channels", np.zeros((4, 4, 0), np.uint8))
    png_error("compression 10", smooth, compression=10)
    png_error("compression -2", smooth, compression=-2)
    png_error("zero height", np.zeros((0, 4, 3), np.uint8))
    png_error("zero width in a batch", np.zeros((2, 3, 0, 3), np.uint8))
    png_error("uint16 zero width", np.zeros((3, 0, 1), np.uint16))

    # --- DecodeGif.
    def decode_gif(case, data):
        fam.add("DecodeGif", lambda d: R.DecodeGif(contents=d), [tf.constant(data)],
                f"DecodeGif/{case}")

    colors = [tuple(int(v) for v in rng.integers(0, 256, 3)) for _ in range(16)]
    base = rng.integers(0, 16, (10, 12))
    decode_gif("one frame", gif(12, 10, [{"indices": base}], colors))
    decode_gif("two colours", gif(3, 2, [{"indices": [[0, 1, 0], [1, 1, 0]]}],
                                   [(255, 0, 0), (0, 0, 255)]))
    decode_gif("GIF87a", gif(12, 10, [{"indices": base}], colors, version=b"GIF87a"))
    decode_gif("GIF8 other version", gif(12, 10, [{"indices": base}], colors, version=b"GIF8zz"))
    decode_gif("interlaced", gif(12, 10, [{"indices": base, "interlace": True}], colors))
    decode_gif("interlaced tall", gif(5, 19, [{"indices": rng.integers(0, 16, (19, 5)),
                                              "interlace": True}], colors))
    local = [tuple(int(v) for v in rng.integers(0, 256, 3)) for _ in range(4)]
    frames = [
        {"indices": base},
        {"indices": rng.integers(0, 4, (10, 12)), "colors": local},
        {"indices": rng.integers(0, 4, (4, 5)), "left": 3, "top": 2, "colors": local},
        {"indices": rng.integers(0, 16, (10, 12)), "transparent": 5},
        {"indices": rng.integers(0, 16, (3, 3)), "left": 10, "top": 9},
    ]
    decode_gif("animated", gif(12, 10, frames, colors))
    decode_gif("no trailer keeps frames", gif(12, 10, frames, colors, trailer=False))
    decode_gif("first frame transparent", gif(12, 10, [
        {"indices": rng.integers(0, 16, (10, 12)), "transparent": 3},
        {"indices": rng.integers(0, 16, (10, 12)), "transparent": 7}], colors))
    decode_gif("first frame smaller", gif(12, 10, [
        {"indices": rng.integers(0, 16, (4, 6)), "left": 2, "top": 3},
        {"indices": rng.integers(0, 16, (10, 12))}], colors))
    decode_gif("frames smaller than screen", gif(40, 40, [
        {"indices": rng.integers(0, 16, (4, 6)), "left": 2, "top": 1},
        {"indices": rng.integers(0, 16, (5, 3)), "left": 1, "top": 0}], colors))
    decode_gif("frame larger than screen", gif(4, 4, [
        {"indices": rng.integers(0, 16, (6, 7))}], colors))
    decode_gif("transparent out of palette", gif(3, 1, [
        {"indices": [[0, 1, 3]], "transparent": 3}], [(9, 9, 9), (200, 100, 50)]))
    decode_gif("wide code size", gif(4, 3, [
        {"indices": rng.integers(0, 2, (3, 4)), "code_size": 8}], colors[:2]))
    for path in sorted(glob.glob("/root/.pyenv/versions/3.13.0/lib/python3.13/idlelib/Icons/*.gif"))[:3]:
        with open(path, "rb") as f:
            decode_gif(f"idle icon {os.path.basename(path)}", f.read())

    good = gif(12, 10, frames, colors)
    header_end = 13 + 3 * 16
    decode_gif("error/empty", b"")
    decode_gif("error/signature only", b"GIF89a")
    decode_gif("error/cut in screen descriptor", good[:10])
    decode_gif("error/cut in global palette", good[:30])
    decode_gif("error/header only", good[:header_end])
    decode_gif("error/trailer only", good[:header_end] + b"\x3b")
    decode_gif("error/unknown block first", good[:header_end] + b"\x99\x00\x3b")
    decode_gif("error/unknown block after a frame",
               gif(12, 10, frames[:1], colors, trailer=False) + b"\x99\x00\x3b")
    decode_gif("error/cut in image descriptor of frame 2",
               gif(12, 10, frames[:1], colors, trailer=False) + b"\x2c\x00\x00")
    decode_gif("error/index outside palette", gif(3, 1, [{"indices": [[0, 1, 3]]}],
                                                   [(9, 9, 9), (200, 100, 50)]))
    decode_gif("error/no colour map", gif(3, 1, [{"indices": [[0, 1, 1]]}], None))
    decode_gif("error/lzw end too soon", gif(12, 10, [{"indices": base, "early_eoi": 50}], colors))
    decode_gif("error/not a gif", b"GIF7 nothing")
    decode_gif("error/random", bytes(rng.integers(0, 256, 64).astype(np.uint8)))
    decode_gif("error/jpeg", tf.io.encode_jpeg(one).numpy())
    decode_gif("error/png", tf.io.encode_png(one).numpy())
    decode_gif("error/bmp", b"BM" + bytes(60))
    decode_gif("jpeg grey", tf.io.encode_jpeg(grey).numpy())
    decode_gif("png rgba", tf.io.encode_png(np.zeros((2, 3, 4), np.uint8) + 7).numpy())

    # --- DecodeWebP: files Pillow's libwebp wrote (webp/make_webp.py).
    def decode_webp(case, data, channels=0):
        fam.add("DecodeWebP", lambda d, c=channels: R.DecodeWebP(contents=d, channels=c),
                [tf.constant(data)], f"DecodeWebP/{case}")

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "webp")
    webps = {}
    for path in sorted(glob.glob(os.path.join(here, "*.webp"))):
        name = os.path.basename(path)[:-5]
        with open(path, "rb") as f:
            webps[name] = f.read()
        for channels in (0, 3, 4):
            if name == "anim_opaque" and channels == 0:
                # TensorFlow 2.21 sizes the output for 3 channels and lets
                # libwebp write RGBA into it: the process aborts (a heap
                # overflow). tfdata refuses it as channels=3 is refused.
                continue
            decode_webp(f"{name}/channels {channels}", webps[name], channels)
    still, anim = webps["lossy_smooth"], webps["anim_moving"]
    decode_webp("error/channels 1", still, 1)
    decode_webp("error/channels 2", still, 2)
    decode_webp("error/empty", b"")
    decode_webp("error/riff only", b"RIFF\x00\x00\x00\x00WEBP")
    decode_webp("error/bad first chunk", b"RIFF\x00\x00\x00\x00WEBPxxxx")
    for cut in (24, 30, 60, len(still) - 1):
        decode_webp(f"error/still cut at {cut}", still[:cut])
    for cut in (40, 100, len(anim) // 2, len(anim) - 1):
        decode_webp(f"error/animation cut at {cut}", anim[:cut])
    lossless = bytearray(webps["lossless_noise"])
    lossless[40:48] = bytes(8)
    decode_webp("error/lossless corrupt", bytes(lossless))
    decode_webp("error/random after header", still[:30] + bytes(rng.integers(0, 256, 80).astype(np.uint8)))
    decode_webp("png", tf.io.encode_png(one).numpy())
    decode_webp("jpeg", tf.io.encode_jpeg(one).numpy(), 3)
    decode_webp("error/bmp", b"BM" + bytes(60))
    decode_webp("error/unknown", b"not an image at all")

    # --- DecodeJxl: files libjxl wrote (jxl/make_jxl.py).
    def decode_jxl(case, data, channels=0):
        fam.add("DecodeJxl", lambda d, c=channels: R.DecodeJxl(contents=d, channels=c),
                [tf.constant(data)], f"DecodeJxl/{case}")

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jxl")
    jxls = {}
    for path in sorted(glob.glob(os.path.join(here, "*.jxl"))):
        name = os.path.basename(path)[:-4]
        with open(path, "rb") as f:
            jxls[name] = f.read()
        for channels in (0, 1, 3, 4):
            if name.startswith("lossy"):
                # Compared as float32 within one level (harness tolerances
                # are for float outputs).
                fam.add_function(
                    f"DecodeJxl/{name}/channels {channels}",
                    lambda d, c=channels: tf.cast(R.DecodeJxl(contents=d, channels=c),
                                                  tf.float32),
                    [tf.constant(jxls[name])], tolerance=JXL_LOSSY)
            else:
                decode_jxl(f"{name}/channels {channels}", jxls[name], channels)
    good = jxls["lossless_noise"]
    decode_jxl("error/channels 2", good, 2)

    # Either op is TensorFlow's generic decoder: other formats by their bytes.
    others = {"png rgba": tf.io.encode_png(np.zeros((2, 3, 4), np.uint8) + 9).numpy(),
              "jpeg grey": tf.io.encode_jpeg(grey).numpy(),
              "gif": gif(3, 2, [{"indices": [[0, 1, 0], [1, 1, 0]]}], [(255, 0, 0), (0, 0, 255)]),
              "bmp": b"BM" + bytes(60),
              "webp": webps["lossless_rgba"], "jxl": jxls["lossless_grey"]}
    for name in ("lossless_rgba", "lossy_smooth", "anim_moving"):
        decode_gif(f"other format/webp {name}", webps[name])
    for name in ("lossless_grey", "lossless_smooth"):
        decode_gif(f"other format/jxl {name}", jxls[name])
    # DecodeImage on the animated formats: expand_animations, channels, dtype.
    animated = {"gif": gif(12, 10, frames, colors), "webp still": webps["lossy_alpha"],
                "webp animation": webps["anim_moving"], "jxl": jxls["lossless_smooth"]}
    for name, data in animated.items():
        for expand in (True, False):
            for channels in (0, 1, 3, 4):
                for dtype in (tf.uint8, tf.float32):
                    fam.add("DecodeImage", lambda d, c=channels, e=expand, t=dtype: R.DecodeImage(
                        contents=d, channels=c, expand_animations=e, dtype=t),
                        [tf.constant(data)],
                        f"DecodeImage/{name}/expand {expand}/channels {channels}/{dtype.name}")
    for name, data in others.items():
        for channels in (0, 1, 3, 4):
            decode_webp(f"other format/{name}/channels {channels}", data, channels)
            decode_jxl(f"other format/{name}/channels {channels}", data, channels)
    decode_jxl("error/empty", b"")
    decode_jxl("error/signature only", b"\xff\x0a")
    decode_jxl("error/garbage codestream", b"\xff\x0a" + bytes(rng.integers(0, 256, 40).astype(np.uint8)))
    for cut in (6, 20, len(good) // 2, len(good) - 1):
        decode_jxl(f"error/cut at {cut}", good[:cut])
    return fam
