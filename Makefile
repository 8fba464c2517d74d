# The two commands a new user needs (README): `make run` and `make test`.
PY := .venv/bin/python
# The second pinned environment (scripts/setup_env.sh dgl11) runs the tests that meet DGL.
PY_DGL11 := .venv-dgl11/bin/python
DGL_TESTS := tests/dgl

.PHONY: env run test env-dgl11 test-dgl11 dev cuda-lib clean

env:
	bash scripts/setup_env.sh

run: env
	$(PY) -m dgl_ugraph demo

# The layer contracts of pyproject.toml ([tool.importlinter]) first, on the checkout's package.
test: env
	PYTHONPATH=. .venv/bin/lint-imports
	$(PY) -m pytest -q tests

env-dgl11:
	bash scripts/setup_env.sh dgl11

test-dgl11: env-dgl11
	$(PY_DGL11) -m pytest -q $(DGL_TESTS)

# Developers: build the CPU core in place (no install), for PYTHONPATH=. runs.
dev:
	UGRAPH_CUDA=OFF bash scripts/build_inplace.sh

# Developers: build libugraph_cuda.so here (sm_90 unless UGRAPH_CUDA_ARCHS says otherwise) for the GPU machine.
cuda-lib:
	bash scripts/build_cuda_lib.sh

clean:
	rm -rf build .prebuilt dgl_ugraph/_C*.so dgl_ugraph/libugraph_cuda*.so
