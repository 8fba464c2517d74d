"""The unified operator: its abstraction (op_info, parallel info), the graph tensors, the compiled
core and the Python API that checks, packs and runs one call (`ops`), the core's capability
rules and the timing engine. Imports nothing from the layers above it."""
