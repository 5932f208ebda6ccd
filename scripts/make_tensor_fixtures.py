#!/usr/bin/env python3
"""Writes the NumPy .npy/.npz fixtures under tests/data/tensor_files/ that tests/importer/tensor_file_test.cc reads.

Needs numpy and ml_dtypes (pip install numpy ml_dtypes). The files are small and checked in; run this again only
to change them:  python3 scripts/make_tensor_fixtures.py
The values are simple formulas repeated in the test, so the test checks what NumPy wrote element by element.
"""

import io
import os
import struct
import zipfile

import ml_dtypes
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tensor_files")

# Six values per dtype, shape (2, 3). Chosen to exercise sign, fractions and the top of each range.
VALUES = {
    "f2": ("<f2", [-1.5, 0.0, 0.25, 1.0, 2.5, 65504.0]),
    "f4": ("<f4", [-1.5, 0.0, 0.25, 1.0, 2.5, 1.0e30]),
    "f8": ("<f8", [-1.5, 0.0, 0.25, 1.0, 2.5, 1.0e300]),
    "i1": ("|i1", [0, 1, -2, 3, -128, 127]),
    "i2": ("<i2", [0, 1, -2, 3, -32768, 32767]),
    "i4": ("<i4", [0, 1, -2, 3, -2147483648, 2147483647]),
    "i8": ("<i8", [0, 1, -2, 3, -9223372036854775808, 9223372036854775807]),
    "u1": ("|u1", [0, 1, 2, 3, 128, 255]),
    "u2": ("<u2", [0, 1, 2, 3, 32768, 65535]),
    "u4": ("<u4", [0, 1, 2, 3, 2147483648, 4294967295]),
    "u8": ("<u8", [0, 1, 2, 3, 9223372036854775808, 18446744073709551615]),
    "b1": ("|b1", [True, False, True, True, False, False]),
    "c8": ("<c8", [1 + 2j, -0.5 + 0j, 0j, 3j, 2 - 1j, 1000.0 + 0.25j]),
    "c16": ("<c16", [1 + 2j, -0.5 + 0j, 0j, 3j, 2 - 1j, 1000.0 + 0.25j]),
}


def save(name, array, version=None):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        if version is None:
            np.save(f, array)
        else:
            np.lib.format.write_array(f, array, version=version)


def patch_zip_sizes(data, uncompressed):
    """Rewrites the uncompressed size of the (single) entry in both its local header and the central directory."""
    data = bytearray(data)
    assert data[0:4] == b"PK\x03\x04"
    struct.pack_into("<I", data, 22, uncompressed)
    cd = data.rindex(b"PK\x01\x02")
    struct.pack_into("<I", data, cd + 24, uncompressed)
    return bytes(data)


def entry_info(name, compression=zipfile.ZIP_STORED):
    """A zip entry with a fixed date, so that the hand-made archives are the same on every run."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = compression
    return info


def deflated_single(entry, payload):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(entry_info(entry, zipfile.ZIP_DEFLATED), payload)
    return buf.getvalue()


def npy_bytes(array):
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def main():
    os.makedirs(OUT, exist_ok=True)
    # One file per dtype, as np.save writes it (v1.0 header, C order, little-endian).
    for key, (descr, values) in VALUES.items():
        save(f"dtype_{key}.npy", np.array(values, dtype=descr).reshape(2, 3))

    save("scalar_f8.npy", np.array(3.5, dtype="<f8"))
    save("empty_f4.npy", np.zeros((0, 3), dtype="<f4"))
    # fortran_order True: element [i, j, k] = 100*i + 10*j + k.
    i, j, k = np.meshgrid(np.arange(2), np.arange(3), np.arange(4), indexing="ij")
    save("fortran_i4.npy", np.asfortranarray((100 * i + 10 * j + k).astype("<i4")))
    # Big-endian data, byteswapped on read. Element n (C order) = n * 1.5 (ints: n * 300 - 700).
    save("bigendian_f4.npy", (np.arange(6) * 1.5).astype(">f4").reshape(2, 3))
    save("bigendian_i2.npy", (np.arange(6) * 300 - 700).astype(">i2").reshape(2, 3))
    save("bigendian_c8.npy", (np.arange(6) * 1.5 - 1j * np.arange(6)).astype(">c8").reshape(2, 3))
    # Fortran order and big-endian together: element [i, j] = 10*i + j + 0.5.
    a = np.array([[10 * r + c + 0.5 for c in range(2)] for r in range(3)], dtype=">f8")
    save("fortran_bigendian_f8.npy", np.asfortranarray(a))
    # Version 2.0 and 3.0 headers (4-byte header length).
    save("v2_f4.npy", np.arange(6, dtype="<f4").reshape(2, 3), version=(2, 0))
    save("v3_i2.npy", np.arange(4, dtype="<i2"), version=(3, 0))
    # ml_dtypes' bfloat16 is saved with the opaque descr '<V2': refused on read.
    save("bfloat16_v2.npy", np.array([1.0, 2.0], dtype=ml_dtypes.bfloat16))

    # np.savez (stored entries) and np.savez_compressed (deflated entries).
    np.savez(os.path.join(OUT, "stored.npz"), a=np.arange(6, dtype="<f4").reshape(2, 3),
             b=np.array([1, -2, 3, -4], dtype="<i8"), c=np.array(True))
    np.savez_compressed(os.path.join(OUT, "deflated.npz"), x=np.arange(100, dtype="<f4").reshape(10, 10),
                        y=np.arange(6, dtype="<u1").reshape(3, 2), z=np.array(-7, dtype="<i2"))

    # Bad archives. An entry that is not an .npy array:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(entry_info("a.npy"), npy_bytes(np.zeros(2, dtype="<f4")))
        z.writestr(entry_info("readme.txt"), b"not an array")
    with open(os.path.join(OUT, "non_npy_entry.npz"), "wb") as f:
        f.write(buf.getvalue())
    # A deflated entry whose declared uncompressed size is a lie: far too large (a zip bomb's header), a bit too
    # large, and too small.
    payload = npy_bytes(np.zeros(1000, dtype="<f4"))
    good = deflated_single("a.npy", payload)
    for name, size in (("bomb.npz", 0xFFFFFFF0), ("size_too_large.npz", len(payload) + 100),
                       ("size_too_small.npz", len(payload) - 100)):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(patch_zip_sizes(good, size))


if __name__ == "__main__":
    main()
