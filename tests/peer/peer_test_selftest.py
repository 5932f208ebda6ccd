#!/usr/bin/env python3
"""Checks the peer-test harness itself (tests/peer/peer_test.py): the output comparison, the tolerance table and
the expected-failures file, on hand-made values. Plain Python, no pytest; exit 1 on the first wrong answer.

Usage: peer_test_selftest.py   (exits 77 when numpy/onnx are not importable)
"""
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_test  # noqa: E402  (exits 77 itself without numpy/onnx)

np = peer_test.np
failures = []
counted = [0]


def check(what, got, want):
    counted[0] += 1
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def compare_ok(ref, got, rtol=1e-2, atol=1e-3):
    return peer_test.compare([ref], [got], ["y"], rtol, atol)[0]


def main():
    f32 = np.array([1.0, -2.0, 0.0, 1e-5], np.float32)
    check("identical outputs pass", compare_ok(f32, f32.copy()), True)
    check("fp16 rounding of the outputs passes", compare_ok(f32, f32.astype(np.float16)), True)
    check("1% + atol off fails", compare_ok(f32, f32 * np.float32(1.03)), False)
    check("an atol-sized difference near zero passes", compare_ok(f32, f32 + np.float32(5e-4)), True)
    inf = f32.copy()
    inf[1] = np.inf
    check("inf where FP32 is finite fails", compare_ok(f32, inf), False)
    nan = f32.copy()
    nan[0] = np.nan
    check("NaN where FP32 is finite fails", compare_ok(f32, nan), False)
    ok, _, _, why = peer_test.compare([f32], [nan], ["y"], 1.0, 1.0)
    check("NaN fails whatever the tolerance", ok, False)
    check("the message names the output and NaN/inf", "'y'" in why and "NaN/inf" in why, True)
    check("NaN where FP32 has NaN passes", compare_ok(nan, nan.copy()), True)
    check("inf of the other sign fails", compare_ok(inf, -inf), False)
    check("shape mismatch fails", compare_ok(f32, f32[:3]), False)
    ints = np.array([1, 2, 3], np.int64)
    check("equal integers pass", compare_ok(ints, ints.copy()), True)
    check("an integer off by one fails", compare_ok(ints, ints + np.array([0, 0, 1])), False)
    strings = np.array(["1.5", "2.25"], dtype=object)
    check("numeric strings within tolerance pass", compare_ok(strings, np.array(["1.5", "2.2502"], dtype=object)),
          True)
    check("other strings compare exactly", compare_ok(np.array(["a"], dtype=object), np.array(["b"], dtype=object)),
          False)
    seq_ok = peer_test.compare([[f32, f32]], [[f32, f32 * np.float32(2)]], ["s"], 1e-2, 1e-3)[0]
    check("a sequence with one bad tensor fails", seq_ok, False)
    ok, max_abs, max_rel, _ = peer_test.compare([np.array([2.0], np.float32)], [np.array([2.01], np.float32)], ["y"],
                                                1e-2, 1e-3)
    check("max abs error measured", round(max_abs, 6), 0.01)
    check("max rel error measured", round(max_rel, 6), 0.005)

    check("models/ tolerance", peer_test.tolerance("models/cnn", ["Conv"], "fp16"), peer_test.MODELS_TOL)
    rtol, atol = peer_test.tolerance("models/cnn", ["Conv"], "bf16")
    check("bf16 tolerance is 8x fp16", (rtol, atol),
          (peer_test.MODELS_TOL[0] * peer_test.BF16_SCALE, peer_test.MODELS_TOL[1] * peer_test.BF16_SCALE))
    check("backend cases without table entries", peer_test.tolerance("node/test_x", ["Abs"], "fp16"),
          peer_test.SUITE_TOL)
    for op, ((r, a), why) in peer_test.TOLERANCES.items():
        check(f"tolerance table entry {op} is used", peer_test.tolerance("node/test_x", ["Abs", op], "fp16"),
              (max(r, peer_test.SUITE_TOL[0]), max(a, peer_test.SUITE_TOL[1])))
        check(f"tolerance table entry {op} says why", bool(why.strip()), True)
    saved = dict(peer_test.TOLERANCES)
    peer_test.TOLERANCES["Exp"] = ((5e-2, 1e-2), "test entry")
    check("a table entry loosens its op", peer_test.tolerance("node/test_exp", ["Exp", "Abs"], "fp16"), (5e-2, 1e-2))
    check("a table entry leaves models/ alone", peer_test.tolerance("models/x", ["Exp"], "fp16"), peer_test.MODELS_TOL)
    peer_test.TOLERANCES.clear()
    peer_test.TOLERANCES.update(saved)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "expected.txt")
        with open(path, "w") as f:
            f.write("# comment\n\nnode/test_a fp16  overflow: 1e9 in fp16 is inf\nnode/test_b bf16-io\n")
        check("expected-failures file", peer_test.read_expected(path),
              {"node/test_a fp16": "overflow: 1e9 in fp16 is inf", "node/test_b bf16-io": ""})
        with open(path, "w") as f:
            f.write("node/test_a fp64 reason\n")
        try:
            peer_test.read_expected(path)
            failures.append("an unknown variant in the expected-failures file is accepted")
        except SystemExit as e:
            check("the error names the file", path in str(e), True)

    if failures:
        for f in failures:
            print(f"FAIL {f}")
        print(f"peer harness self-test: {len(failures)} checks failed")
        return 1
    print(f"peer harness self-test: all {counted[0]} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
