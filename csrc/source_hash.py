"""Hash of everything a libugraph_cuda.so is built from: the CUDA sources, the shared headers,
the host code both cores share (csrc/common) and the build switches. CMake embeds it into the library; `--of-library` reads it back."""
import argparse
import ctypes
import hashlib
import pathlib
import sys

CSRC = pathlib.Path(__file__).resolve().parent


def source_hash(archs: str, strategies: str, dtypes: str) -> str:
    h = hashlib.sha256()
    files = sorted([f for d in ("cuda", "include", "common") for f in (CSRC / d).rglob("*")])
    for f in files:
        if f.is_file() and f.suffix in {".cu", ".cuh", ".h", ".cpp", ".txt", ".py"}:
            h.update(str(f.relative_to(CSRC)).encode())
            h.update(f.read_bytes())
    h.update(f"{archs}|{strategies}|{dtypes}".encode())
    return h.hexdigest()[:16]


def library_hash(path: str) -> str:
    lib = ctypes.CDLL(path)
    lib.ug_cuda_source_hash.restype = ctypes.c_char_p
    return lib.ug_cuda_source_hash().decode()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--archs", default="80;86;89;90")
    ap.add_argument("--strategies", default="all")
    ap.add_argument("--dtypes", default="all")
    ap.add_argument("--of-library")
    args = ap.parse_args()
    sys.stdout.write(library_hash(args.of_library) if args.of_library else
                     source_hash(args.archs, args.strategies, args.dtypes))


if __name__ == "__main__":
    main()
