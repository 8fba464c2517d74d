"""Hash of everything a libugraph_cuda.so is built from: the CUDA sources, the shared headers (and
CUDA_EXTRA), the host code both cores share (csrc/common) and the build switches. CMake embeds it into the library; `--of-library` reads it back.

`--cpu`: the same for the CPU core's static library, libugraph_cpu.a (csrc/cpu, the shared
headers, csrc/common and CMakeLists.txt, which holds its flags); CMake embeds it as the string
CPU_MARKER + hash, which `--of-archive` finds in the archive's bytes."""
import argparse
import ctypes
import hashlib
import pathlib
import re
import sys

CSRC = pathlib.Path(__file__).resolve().parent
CPU_MARKER = "UGRAPH_CPU_SOURCE_HASH="


def _hash_files(h, folders) -> None:
    files = sorted([f for d in folders for f in (CSRC / d).rglob("*")])
    for f in files:
        if f.is_file() and f.suffix in {".cu", ".cuh", ".h", ".cpp", ".in", ".txt", ".py"}:
            h.update(str(f.relative_to(CSRC)).encode())
            h.update(f.read_bytes())


# Files outside those folders that the CUDA library is built from: the edge softmax's params
# struct, which both cores take (csrc/cuda/softmax.h includes it).
CUDA_EXTRA = ("cpu/softmax.h",)


def source_hash(archs: str, strategies: str, dtypes: str) -> str:
    h = hashlib.sha256()
    _hash_files(h, ("cuda", "include", "common"))
    for name in CUDA_EXTRA:
        h.update(name.encode())
        h.update((CSRC / name).read_bytes())
    h.update(f"{archs}|{strategies}|{dtypes}".encode())
    return h.hexdigest()[:16]


def cpu_source_hash() -> str:
    h = hashlib.sha256()
    _hash_files(h, ("cpu", "include", "common"))
    h.update((CSRC.parent / "CMakeLists.txt").read_bytes())
    return h.hexdigest()[:16]


def archive_hash(path: str) -> str:
    found = re.search(re.escape(CPU_MARKER.encode()) + rb"([0-9a-f]{16})", pathlib.Path(path).read_bytes())
    return found.group(1).decode() if found else "none"


def library_hash(path: str) -> str:
    lib = ctypes.CDLL(path)
    lib.ug_cuda_source_hash.restype = ctypes.c_char_p
    return lib.ug_cuda_source_hash().decode()


def library_archs(path: str) -> str:
    """The CUDA architectures a libugraph_cuda.so was compiled for, as UGRAPH_CUDA_ARCHS lists them."""
    lib = ctypes.CDLL(path)
    lib.ug_cuda_build_info.restype = ctypes.c_char_p
    fields = dict(f.split("=", 1) for f in lib.ug_cuda_build_info().decode().split(";") if "=" in f)
    return fields["archs"].replace(",", ";")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--archs", default="80;86;89;90")
    ap.add_argument("--strategies", default="all")
    ap.add_argument("--dtypes", default="all")
    ap.add_argument("--of-library", help="the hash a libugraph_cuda.so was built from")
    ap.add_argument("--archs-of-library", help="the architectures a libugraph_cuda.so was built for")
    ap.add_argument("--cpu", action="store_true", help="the CPU core's hash")
    ap.add_argument("--of-archive", help="the hash a libugraph_cpu.a was built from")
    args = ap.parse_args()
    if args.of_archive:
        sys.stdout.write(archive_hash(args.of_archive))
    elif args.archs_of_library:
        sys.stdout.write(library_archs(args.archs_of_library))
    elif args.of_library:
        sys.stdout.write(library_hash(args.of_library))
    else:
        sys.stdout.write(cpu_source_hash() if args.cpu else source_hash(args.archs, args.strategies, args.dtypes))


if __name__ == "__main__":
    main()
