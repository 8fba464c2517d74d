# The two commands a new user needs (README): `make run` and `make test`.
PY := .venv/bin/python

.PHONY: env run test dev cuda-lib clean

env:
	bash scripts/setup_env.sh

run: env
	$(PY) -m dgl_ugraph demo

test: env
	$(PY) -m pytest -q tests

# Developers: build the CPU core in place (no install), for PYTHONPATH=. runs.
dev:
	UGRAPH_CUDA=OFF bash scripts/build_inplace.sh

# Developers: build libugraph_cuda.so here (sm_90 unless UGRAPH_CUDA_ARCHS says otherwise) for the GPU machine.
cuda-lib:
	bash scripts/build_cuda_lib.sh

clean:
	rm -rf build .prebuilt dgl_ugraph/_C*.so dgl_ugraph/libugraph_cuda*.so
